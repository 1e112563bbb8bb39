/**
 * Where a per-object request's primary is in its life: `live` (reconcile
 * it), `deleting` (clean up, then release the host-managed finalizer),
 * `gone` (deleted) or `unselected` (left the watch's selectors). The
 * request's `presence`, the host's word from the server, tells the last
 * two apart; neither snapshot holds the primary, and both still hold the
 * objects related to it. Like kube-runtime's `finalizer::Event`, but the
 * host adds the finalizer: this module only reads the snapshot and plans
 * its removal, and never decides what clean-up is.
 * @module
 */

import type { Plan } from "./plan.js";
import type { Snapshot, SnapshotObject } from "./snapshot.js";
import type * as wit from "./wit.js";

/** The field path whose projection tells whether an object still holds the watch's finalizer. */
export const FINALIZERS = "metadata.finalizers[*]";

/** A primary being deleted, and the finalizer that holds it for us. */
export class Deleting {
  constructor(
    readonly object: SnapshotObject,
    /** The watch's declared finalizer, if any. */
    readonly finalizer: string | undefined,
    /**
     * Whether it still holds that finalizer: read from {@link FINALIZERS}
     * when the watch projects it, otherwise assumed; false without one.
     */
    readonly holdsFinalizer: boolean,
  ) {}

  /** Plans the removal of the watch's finalizer (nothing when not held or none declared). */
  release(plan: Plan): Plan {
    if (this.finalizer !== undefined && this.holdsFinalizer) plan.removeFinalizer(this.object.ref(), this.finalizer);
    return plan;
  }

  /**
   * Deletes `owned` (each pinned to the uid the snapshot saw) and releases
   * the finalizer only once none is left: their deletions wake the object
   * again, and that reconcile releases it.
   */
  deleteThenRelease(owned: Iterable<SnapshotObject>, plan: Plan): Plan {
    const list = [...owned];
    return list.length === 0 ? this.release(plan) : plan.deleteAll(list);
  }
}

/** A request's primary, by where it is in its life. */
export type Lifecycle =
  | { readonly state: "live"; readonly object: SnapshotObject }
  | { readonly state: "deleting"; readonly deleting: Deleting }
  | { readonly state: "gone"; readonly key: string }
  | { readonly state: "unselected"; readonly key: string };

/**
 * Where `request`'s primary is in its life: `gone` and `unselected` as its
 * presence says, never guessed from the snapshot (`gone` too when a present
 * primary is not in it, as for an aggregate request).
 */
export function lifecycle(snapshot: Snapshot, request: wit.Request): Lifecycle {
  if (request.presence === "gone") return { state: "gone", key: request.key };
  if (request.presence === "unselected") return { state: "unselected", key: request.key };
  const object = snapshot.primary(request);
  if (!object) return { state: "gone", key: request.key };
  if (!object.isDeleting) return { state: "live", object };
  const spec = snapshot.schema.watches.find((w) => w.name === request.watch);
  const finalizer = spec?.finalizer ?? undefined;
  const slot = spec ? spec.fields.indexOf(FINALIZERS) : -1;
  let holds = false;
  if (finalizer !== undefined) {
    holds = slot < 0 || object.texts({ watch: object.watch, slot }).includes(finalizer);
  }
  return { state: "deleting", deleting: new Deleting(object, finalizer, holds) };
}
