/**
 * The plan builder: what a reconcile returns, written as calls
 * (`plan.apply(document(child, {data}).ownedBy(controllerRef(app)))`,
 * `plan.status(app.ref(), status)`, `plan.removeFinalizer(..)`) instead of
 * contract records, documents serialised with `JSON.stringify`. It only
 * records intent: the host carries the writes out in order, pinning every
 * write aimed at an object the guest saw to its uid, so only `apply` ever
 * creates.
 * @module
 */

import { ReconcileError } from "./errors.js";
import type { OwnerReference } from "./owner.js";
import type { SnapshotObject } from "./snapshot.js";
import type * as wit from "./wit.js";

function sortedEntries(map: Map<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of [...map.keys()].sort()) out[key] = map.get(key) as string;
  return out;
}

/**
 * A complete object document: `apiVersion`, `kind`, `metadata` (`name`,
 * `namespace` when the target has one, then `labels`, `annotations` (each
 * sorted by key) and `ownerReferences` when set), then the members of
 * `body` in their order: what an apply states, the whole object the guest
 * owns. `body` must not repeat those keys.
 */
export class Document {
  private labels = new Map<string, string>();
  private annotations = new Map<string, string>();
  private owners: OwnerReference[] = [];

  constructor(
    readonly target: wit.ObjectRef,
    readonly body: Record<string, unknown>,
  ) {}

  /** With the label `key: value` (a later value for the same key wins). */
  label(key: string, value: string): this {
    this.labels.set(key, value);
    return this;
  }

  /** With the annotation `key: value`. */
  annotation(key: string, value: string): this {
    this.annotations.set(key, value);
    return this;
  }

  /** With the owner reference `owner`, after any added before (at most one controller). */
  ownedBy(owner: OwnerReference): this {
    this.owners.push(owner);
    return this;
  }

  /** The document as JSON.stringify writes it. */
  toJSON(): Record<string, unknown> {
    const metadata: Record<string, unknown> = { name: this.target.name };
    if (this.target.namespace != null) metadata.namespace = this.target.namespace;
    if (this.labels.size) metadata.labels = sortedEntries(this.labels);
    if (this.annotations.size) metadata.annotations = sortedEntries(this.annotations);
    if (this.owners.length) {
      metadata.ownerReferences = this.owners.map((r) => {
        const ref: Record<string, unknown> = { apiVersion: r.apiVersion, kind: r.kind, name: r.name, uid: r.uid };
        if (r.controller !== undefined) ref.controller = r.controller;
        if (r.blockOwnerDeletion !== undefined) ref.blockOwnerDeletion = r.blockOwnerDeletion;
        return ref;
      });
    }
    return { apiVersion: this.target.apiVersion, kind: this.target.kind, metadata, ...this.body };
  }
}

/** `target`'s identity plus `body`'s members, as one document. */
export function document(target: wit.ObjectRef, body: Record<string, unknown> = {}): Document {
  return new Document(target, body);
}

/** An event about `regarding` with action `Reconcile`; set `action`/`related` on it as needed. */
export function event(
  eventType: wit.EventType,
  regarding: wit.ObjectRef,
  reason: string,
  message: string,
): wit.Event {
  return { regarding, eventType, reason, action: "Reconcile", message };
}

/** The desired state one reconcile computed; empty by default. */
export class Plan {
  private readonly writeList: wit.Write[] = [];
  private readonly eventList: wit.Event[] = [];
  private requeue: number | undefined;
  private error: string | undefined;

  private pushDoc(doc: unknown, tag: "apply" | "update" | "apply-status"): this {
    let json: string | undefined;
    try {
      json = JSON.stringify(doc);
    } catch (e) {
      this.error ??= `cannot serialise a planned document: ${e instanceof Error ? e.message : String(e)}`;
      return this;
    }
    if (json === undefined) {
      this.error ??= "cannot serialise a planned document: it is not JSON";
      return this;
    }
    this.writeList.push({ tag, val: json });
    return this;
  }

  /** Create or update `doc` by server-side apply: the only write that creates. */
  apply(doc: unknown): this {
    return this.pushDoc(doc, "apply");
  }

  /** Update `doc` only if the object exists as the snapshot saw it. */
  update(doc: unknown): this {
    return this.pushDoc(doc, "update");
  }

  /** Server-side apply `doc`'s `status` to the status subresource of an object the snapshot saw. */
  applyStatus(doc: unknown): this {
    return this.pushDoc(doc, "apply-status");
  }

  /** {@link Plan.applyStatus} of `{status}` on `target`. */
  status(target: wit.ObjectRef, status: unknown): this {
    return this.applyStatus(document(target, { status }));
  }

  /** Delete `target` (pinned to the uid the snapshot saw, if it saw it). */
  delete(target: wit.ObjectRef): this {
    this.writeList.push({ tag: "delete", val: target });
    return this;
  }

  /** Delete each of `objects`: the clean-up of a primary that is gone or unselected. */
  deleteAll(objects: Iterable<SnapshotObject>): this {
    for (const o of objects) this.delete(o.ref());
    return this;
  }

  /** Add `finalizer` to `target`. */
  addFinalizer(target: wit.ObjectRef, finalizer: string): this {
    this.writeList.push({ tag: "add-finalizer", val: { target, finalizer } });
    return this;
  }

  /** Remove `finalizer` from `target` (for a watch's declared finalizer: clean-up is done). */
  removeFinalizer(target: wit.ObjectRef, finalizer: string): this {
    this.writeList.push({ tag: "remove-finalizer", val: { target, finalizer } });
    return this;
  }

  /** Record `event` (see {@link event}). */
  event(e: wit.Event): this {
    this.eventList.push(e);
    return this;
  }

  /** Reconcile this key again after `ms` milliseconds. */
  requeueAfterMs(ms: number): this {
    this.requeue = ms;
    return this;
  }

  /** The writes so far, in order. */
  get writes(): readonly wit.Write[] {
    return this.writeList;
  }

  /** The events so far. */
  get events(): readonly wit.Event[] {
    return this.eventList;
  }

  /**
   * The contract's plan; throws a terminal {@link ReconcileError} when a
   * document could not be serialised (never a half-written plan).
   */
  finish(): wit.Plan {
    if (this.error !== undefined) throw ReconcileError.terminal(this.error);
    const plan: wit.Plan = { writes: [...this.writeList], events: [...this.eventList] };
    if (this.requeue !== undefined) plan.requeueAfterMs = BigInt(this.requeue);
    return plan;
  }
}
