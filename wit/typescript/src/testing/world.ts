/**
 * The testing World: objects described by watch and field *name* ({@link Obj}),
 * laid out into the snapshot the host would send ({@link World.snapshot}),
 * and the manifest's key mappings applied as the host applies them
 * (`host/src/relations`): which requests a change wakes ({@link World.wakes})
 * and which objects a request's snapshot holds ({@link World.objectsFor},
 * {@link World.snapshotFor}). A watch holds only the objects its label
 * selector admits; field selectors are not evaluated (add only objects
 * they would admit). A port of the Rust SDK's `testing` module, checked
 * against the shared relation-agreement table. For tests only: unknown
 * names are errors, never silently absent.
 * @module
 */

import { compare3, compareBytes, LayoutBuilder, type Value } from "../layout.js";
import { apiVersion, linkPrimary, linkSameNamespace } from "../manifest.js";
import type { OwnerReference } from "../owner.js";
import { Schema, SchemaError } from "../snapshot.js";
import type * as wit from "../wit.js";
import { LabelSelector } from "./selector.js";

/** One value of a field, as a test writes it: `null`/`undefined` is absent. */
export type Val = string | number | bigint | boolean | null | undefined | { json: string };

function layoutValue(v: Val): Value {
  if (v === null || v === undefined) return { kind: "absent" };
  if (typeof v === "string") return { kind: "str", value: v };
  if (typeof v === "bigint") return { kind: "int", value: v };
  if (typeof v === "boolean") return { kind: "bool", value: v };
  if (typeof v === "number") return Number.isInteger(v) ? { kind: "int", value: BigInt(v) } : { kind: "float", value: v };
  return { kind: "json", value: v.json };
}

/** The request for the aggregate key `key`. */
export function aggregateRequest(key: string): wit.Request {
  return { key };
}

/** The request for the primary object `key` of `watch`, present. */
export function objectRequest(watch: string, key: string, presence: wit.Presence = "present"): wit.Request {
  return { key, watch, presence };
}

/** An environment for tests: the host runs in `namespace`, no configuration, clock at `nowMs`. */
export function testEnvironment(
  namespace: string,
  options: { nowMs?: number; config?: Array<[string, string]> } = {},
): wit.Environment {
  return { namespace, config: options.config ?? [], nowMs: BigInt(options.nowMs ?? 0) };
}

/** One object of a {@link World}; every setter returns a new object. */
export class Obj {
  private constructor(
    readonly watch: string,
    readonly namespace: string,
    readonly name: string,
    private readonly state: {
      uid: string;
      generation: number;
      deletionTimestamp: string;
      fields: ReadonlyArray<readonly [string, readonly Val[]]>;
      labels: ReadonlyArray<readonly [string, string]>;
      ownerReferences: readonly OwnerReference[];
    },
  ) {}

  /**
   * The object `namespace/name` of the watch `watch`, with uid
   * `uid-NAMESPACE-NAME`, generation 1, not being deleted, every
   * projected field absent.
   */
  static of(watch: string, namespace: string, name: string): Obj {
    return new Obj(watch, namespace, name, {
      uid: `uid-${namespace}-${name}`,
      generation: 1,
      deletionTimestamp: "",
      fields: [],
      labels: [],
      ownerReferences: [],
    });
  }

  private with(change: Partial<Obj["state"]>): Obj {
    return new Obj(this.watch, this.namespace, this.name, { ...this.state, ...change });
  }

  get uidValue(): string {
    return this.state.uid;
  }

  /** Its key, `namespace/name` (`name` when cluster-scoped). */
  get key(): string {
    return this.namespace === "" ? this.name : `${this.namespace}/${this.name}`;
  }

  /** With `metadata.uid` = `uid`. */
  uid(uid: string): Obj {
    return this.with({ uid });
  }

  /** With `metadata.generation` = `generation`. */
  generation(generation: number): Obj {
    return this.with({ generation });
  }

  /** Being deleted since `timestamp`. */
  deleting(timestamp: string): Obj {
    return this.with({ deletionTimestamp: timestamp });
  }

  /** The field `path` (as written in the watch's fields) yields `value`. */
  set(path: string, value: Val): Obj {
    return this.setList(path, [value]);
  }

  /** The field `path` (a `[*]` path) yields `values`, one per element. */
  setList(path: string, values: Iterable<Val>): Obj {
    const list = [...values];
    const fields = this.state.fields.some(([p]) => p === path)
      ? this.state.fields.map(([p, v]) => [p, p === path ? list : v] as const)
      : [...this.state.fields, [path, list] as const];
    return this.with({ fields });
  }

  /**
   * With the label `key` = `value`: in the snapshot wherever the watch
   * projects `metadata.labels` or a path below it (unless that path is set),
   * and in label selectors.
   */
  label(key: string, value: string): Obj {
    return this.with({ labels: [...this.state.labels.filter(([k]) => k !== key), [key, value]] });
  }

  /** With one more entry in `metadata.ownerReferences`. */
  ownerReference(reference: OwnerReference): Obj {
    return this.with({ ownerReferences: [...this.state.ownerReferences, reference] });
  }

  /** Controlled by `owner`, an object of type `type` (what `controllerRef` puts on a child). */
  controlledBy(type: wit.GroupVersionKind, owner: Obj): Obj {
    return this.ownerReference({
      apiVersion: apiVersion(type),
      kind: type.kind,
      name: owner.name,
      uid: owner.state.uid,
      controller: true,
      blockOwnerDeletion: true,
    });
  }

  /** `metadata` as the API server sends it (labels sorted, as Go encodes a map). */
  metadata(): Record<string, unknown> {
    const meta: Record<string, unknown> = { name: this.name };
    if (this.namespace !== "") meta.namespace = this.namespace;
    meta.uid = this.state.uid;
    if (this.state.generation !== 0) meta.generation = this.state.generation;
    if (this.state.deletionTimestamp !== "") meta.deletionTimestamp = this.state.deletionTimestamp;
    if (this.state.labels.length) {
      const labels: Record<string, string> = {};
      for (const [k, v] of [...this.state.labels].sort(([a], [b]) => compareBytes(a, b))) labels[k] = v;
      meta.labels = labels;
    }
    if (this.state.ownerReferences.length) {
      meta.ownerReferences = this.state.ownerReferences.map((r) => {
        const ref: Record<string, unknown> = { apiVersion: r.apiVersion, kind: r.kind, name: r.name, uid: r.uid };
        if (r.controller !== undefined) ref.controller = r.controller;
        if (r.blockOwnerDeletion !== undefined) ref.blockOwnerDeletion = r.blockOwnerDeletion;
        return ref;
      });
    }
    return meta;
  }

  /**
   * The values `path` yields: as set, else for a `metadata` path what the
   * host projects from the object's metadata; `undefined` otherwise.
   */
  values(path: string): Val[] | undefined {
    const set = this.state.fields.find(([p]) => p === path);
    if (set) return [...set[1]];
    if (!path.startsWith("metadata")) return undefined;
    return project(this.metadata(), path.slice("metadata".length));
  }

  /** The distinct string values `path` yields, sorted (what indexes compare). */
  strings(path: string): string[] {
    const out = (this.values(path) ?? []).filter((v): v is string => typeof v === "string");
    return [...new Set(out)].sort(compareBytes);
  }

  /** Its labels, as a selector sees them. */
  labels(): Map<string, string> {
    return new Map(this.state.labels);
  }

  /** The controller owner reference (the first with `controller: true`). */
  controller(): OwnerReference | undefined {
    return this.state.ownerReferences.find((r) => r.controller === true);
  }

  /** Its controller owner, when of `type`'s group and kind (the host ignores the version). */
  controllerOfKind(type: wit.GroupVersionKind): OwnerReference | undefined {
    const r = this.controller();
    if (!r) return undefined;
    const at = r.apiVersion.indexOf("/");
    const group = at < 0 ? "" : r.apiVersion.slice(0, at);
    return r.kind === type.kind && group === type.group ? r : undefined;
  }

  /** Its values laid out for `path` (see {@link World.snapshot}). */
  fieldNames(): string[] {
    return this.state.fields.map(([p]) => p);
  }

  identity(): { uid: string; generation: number; deletionTimestamp: string } {
    return { uid: this.state.uid, generation: this.state.generation, deletionTimestamp: this.state.deletionTimestamp };
  }
}

/** The steps of a path's tail: a key for `.key` or `['key']`, `null` for `[*]`; undefined when it does not parse. */
function steps(rest: string): Array<string | null> | undefined {
  const out: Array<string | null> = [];
  while (rest !== "") {
    if (rest.startsWith("[*]")) {
      out.push(null);
      rest = rest.slice(3);
    } else if (rest.startsWith("['") || rest.startsWith('["')) {
      const tail = rest.slice(2);
      const end = tail.search(/['"]/);
      if (end < 0) return undefined;
      out.push(tail.slice(0, end));
      if (tail[end + 1] !== "]") return undefined;
      rest = tail.slice(end + 2);
    } else if (rest.startsWith(".")) {
      const tail = rest.slice(1);
      const found = tail.search(/[.[]/);
      const end = found < 0 ? tail.length : found;
      out.push(tail.slice(0, end));
      rest = tail.slice(end);
    } else {
      return undefined;
    }
  }
  return out;
}

function valueOf(node: unknown): Val {
  if (node === undefined || node === null) return null;
  if (typeof node === "string" || typeof node === "boolean") return node;
  if (typeof node === "number") return Number.isInteger(node) ? BigInt(node) : node;
  return { json: JSON.stringify(node) };
}

/** The values the path tail `rest` yields in `node`, as the host's projection extracts them. */
function project(node: unknown, rest: string): Val[] {
  const path = steps(rest);
  if (!path) return [null];
  let nodes: unknown[] = [node];
  for (const step of path) {
    nodes =
      step === null
        ? nodes.flatMap((n) => (Array.isArray(n) ? n : []))
        : nodes.map((n) =>
            typeof n === "object" && n !== null && !Array.isArray(n) ? (n as Record<string, unknown>)[step] : undefined,
          );
  }
  return nodes.map(valueOf);
}

/**
 * A set of objects for one manifest. Like the API server it evaluates each
 * watch's label selector: an object whose labels do not match is on the
 * server but not in its watch (its key reconciles `unselected`); objects
 * added with {@link World.gone} were deleted (their keys reconcile `gone`).
 */
export class World {
  private readonly selectors: Array<LabelSelector | undefined | Error>;

  private constructor(
    readonly manifest: wit.Manifest,
    private readonly objects: readonly Obj[],
    private readonly departed: readonly Obj[],
  ) {
    this.selectors = manifest.watches.map((w) => {
      if (w.labelSelector == null) return undefined;
      try {
        return LabelSelector.parse(w.labelSelector);
      } catch (e) {
        return e instanceof Error ? e : new Error(String(e));
      }
    });
  }

  /** An empty world seen through `manifest`. */
  static of(manifest: wit.Manifest): World {
    return new World(manifest, [], []);
  }

  /** With `object` (order does not matter: the snapshot sorts). */
  with(...objects: Obj[]): World {
    return new World(this.manifest, [...this.objects, ...objects], this.departed);
  }

  /** With `objects`. */
  withAll(objects: Iterable<Obj>): World {
    return this.with(...objects);
  }

  /** With an object the server no longer has, as the host last saw it. */
  gone(object: Obj): World {
    return new World(this.manifest, this.objects, [...this.departed, object]);
  }

  private watchIndex(name: string): number {
    return new Schema(this.manifest).watch(name).id;
  }

  private checkSelectors(): void {
    this.manifest.watches.forEach((w, i) => {
      const s = this.selectors[i];
      if (s instanceof Error) {
        throw new SchemaError(`watch ${JSON.stringify(w.name)} has an invalid label selector: ${s.message}`);
      }
    });
  }

  private selected(w: number, o: Obj): boolean {
    const s = this.selectors[w];
    if (s === undefined) return true;
    return s instanceof LabelSelector && s.matches(o.labels());
  }

  /** Every object of watch `w`'s kind on the server, selected or not. */
  private onServerOf(w: number): Obj[] {
    const name = this.manifest.watches[w]?.name;
    return this.objects.filter((o) => o.watch === name);
  }

  /** The objects watch `w` holds. */
  private of(w: number): Obj[] {
    return this.onServerOf(w).filter((o) => this.selected(w, o));
  }

  private held(p: number, key: string): Obj | undefined {
    return this.of(p).find((o) => o.key === key);
  }

  private onServer(p: number, key: string): Obj | undefined {
    return this.onServerOf(p).find((o) => o.key === key);
  }

  /** The objects its watches hold, in insertion order. */
  private watched(): Obj[] {
    this.checkSelectors();
    return this.objects.filter((o) => this.selected(this.watchIndex(o.watch), o));
  }

  /**
   * Whether watch `w`'s kind is cluster-scoped, as the world tells it: it
   * has objects of that watch (selected, unselected or gone), none with a namespace.
   */
  private clusterScoped(w: number): boolean {
    const name = this.manifest.watches[w]?.name;
    const mine = [...this.objects, ...this.departed].filter((o) => o.watch === name);
    return mine.length > 0 && mine.every((o) => o.namespace === "");
  }

  /** The namespace primary `q` of watch `p` stands for in same-namespace relations. */
  private namespaceOf(p: number, q: Obj): string | undefined {
    const type = this.manifest.watches[p]?.gvk;
    if (!this.clusterScoped(p)) return q.namespace;
    if (type && type.group === "" && type.kind === "Namespace") return q.name;
    return undefined;
  }

  /**
   * The request for the object `key` of the primary watch `watch`, with its
   * presence as this world has it: `present` when its watch holds it,
   * `unselected` when it exists but its labels do not match, `gone` otherwise.
   */
  request(watch: string, key: string): wit.Request {
    const p = this.watchIndex(watch);
    const presence = this.held(p, key) ? "present" : this.onServer(p, key) ? "unselected" : "gone";
    return objectRequest(watch, key, presence);
  }

  /** The requests a change to `object` wakes (sorted, without duplicates). */
  wakes(object: Obj): wit.Request[] {
    return this.wakesEdit(undefined, object);
  }

  /** The requests an edit from `old` to `next` wakes: both versions'. */
  wakesEdit(old: Obj | undefined, next: Obj): wit.Request[] {
    this.checkSelectors();
    const w = this.watchIndex(next.watch);
    const spec = this.manifest.watches[w] as wit.Watch;
    const versions = old ? [old, next] : [next];
    const keys: Array<[number, wit.Request]> = [];
    const primaries = (primary: string): [number, Obj[]] => {
      const p = this.watchIndex(primary);
      return [p, this.of(p)];
    };
    switch (spec.keys.tag) {
      case "per-object":
        keys.push([w, objectRequest(spec.name, next.key)]);
        break;
      case "aggregate":
        keys.push([Number.MAX_SAFE_INTEGER, aggregateRequest(spec.keys.val)]);
        break;
      case "none":
        break;
      case "owner": {
        const primary = spec.keys.val;
        const p = this.watchIndex(primary);
        const type = (this.manifest.watches[p] as wit.Watch).gvk;
        const clusterScoped = this.clusterScoped(p);
        for (const o of versions) {
          const owner = o.controllerOfKind(type);
          if (owner) {
            const key = clusterScoped || o.namespace === "" ? owner.name : `${o.namespace}/${owner.name}`;
            keys.push([p, objectRequest(primary, key)]);
          }
        }
        break;
      }
      case "same-namespace": {
        const primary = spec.keys.val;
        const [p, qs] = primaries(primary);
        for (const o of versions) {
          for (const q of qs) if (this.namespaceOf(p, q) === o.namespace) keys.push([p, objectRequest(primary, q.key)]);
        }
        break;
      }
      case "all": {
        const primary = spec.keys.val;
        const [p, qs] = primaries(primary);
        for (const q of qs) keys.push([p, objectRequest(primary, q.key)]);
        break;
      }
      case "by-index": {
        const link = spec.keys.val;
        const primary = linkPrimary(link);
        const [p, qs] = primaries(primary);
        const index = (this.manifest.watches[p] as wit.Watch).indexes.find((i) => i.name === link.index);
        if (!index) return [];
        for (const o of versions) {
          for (const value of o.strings(link.field)) {
            for (const q of qs) {
              if (
                q.strings(index.field).includes(value) &&
                (!linkSameNamespace(link) || this.namespaceOf(p, q) === o.namespace)
              ) {
                keys.push([p, objectRequest(primary, q.key)]);
              }
            }
          }
        }
        break;
      }
    }
    keys.sort(([a, r], [b, s]) => a - b || compareBytes(r.key, s.key));
    return keys
      .filter(([p, r], i) => i === 0 || !(keys[i - 1]?.[0] === p && keys[i - 1]?.[1].key === r.key))
      .map(([, r]) => r);
  }

  /**
   * The objects `request`'s snapshot holds, in snapshot order: every
   * watched object for an aggregate request; for a primary's request, the
   * primary and what the watches mapped to its watch relate to it. When the
   * watch no longer holds the primary, the snapshot lacks it but still
   * holds what relates to it, by its state on the server (`unselected`) or
   * its last state ({@link World.gone}). The request's presence is not read.
   */
  objectsFor(request: wit.Request): Obj[] {
    if (request.watch == null) return this.watched();
    this.checkSelectors();
    const watch = request.watch;
    const p = this.watchIndex(watch);
    const held = this.held(p, request.key);
    const basis =
      held ??
      this.onServer(p, request.key) ??
      [...this.departed].reverse().find((o) => o.watch === watch && o.key === request.key);
    const out: Obj[] = held ? [held] : [];
    const primaryType = (this.manifest.watches[p] as wit.Watch).gvk;
    this.manifest.watches.forEach((spec, w) => {
      const k = spec.keys;
      if (k.tag === "all" && k.val === watch) {
        out.push(...this.of(w));
      } else if (!basis) {
        return;
      } else if (k.tag === "owner" && k.val === watch) {
        const uid = basis.uidValue;
        out.push(...this.of(w).filter((o) => uid !== "" && o.controllerOfKind(primaryType)?.uid === uid));
      } else if (k.tag === "same-namespace" && k.val === watch) {
        out.push(...this.of(w).filter((o) => this.namespaceOf(p, basis) === o.namespace));
      } else if (k.tag === "by-index" && linkPrimary(k.val) === watch) {
        const link = k.val;
        const index = (this.manifest.watches[p] as wit.Watch).indexes.find((i) => i.name === link.index);
        const values = index ? basis.strings(index.field) : [];
        out.push(
          ...this.of(w)
            .filter((o) => !linkSameNamespace(link) || this.namespaceOf(p, basis) === o.namespace)
            .filter((o) => o.strings(link.field).some((v) => values.includes(v))),
        );
      }
    });
    const position = (o: Obj) => this.watchIndex(o.watch);
    out.sort((a, b) => compare3(position(a), a.namespace, a.name, position(b), b.namespace, b.name));
    return out.filter(
      (o, i) => i === 0 || !(out[i - 1]?.watch === o.watch && out[i - 1]?.namespace === o.namespace && out[i - 1]?.name === o.name),
    );
  }

  /** The snapshot the host would send for `request`. */
  snapshotFor(request: wit.Request): wit.Snapshot {
    return this.build(this.objectsFor(request));
  }

  /**
   * The snapshot the host would send for an aggregate key: every watched
   * object, sorted by watch, namespace and name; each projected field in
   * the watch's order, absent unless set (a `[*]` path yields no values
   * unless set); each declared index filled. A watch or field the manifest
   * does not declare is an error.
   */
  snapshot(): wit.Snapshot {
    return this.build(this.watched());
  }

  private build(objects: Obj[]): wit.Snapshot {
    const schema = new Schema(this.manifest);
    const rows: Array<[number, Obj]> = [];
    for (const o of objects) {
      const watch = schema.watch(o.watch);
      for (const path of o.fieldNames()) {
        if (!watch.spec.indexes.some((i) => i.field === path)) watch.field(path);
      }
      rows.push([watch.id, o]);
    }
    rows.sort(([a, x], [b, y]) => compare3(a, x.namespace, x.name, b, y.namespace, y.name));
    const b = new LayoutBuilder();
    for (const [w, o] of rows) {
      const id = o.identity();
      b.object(w, o.namespace, o.name, id.uid, id.generation, id.deletionTimestamp);
      for (const path of (this.manifest.watches[w] as wit.Watch).fields) {
        const values = o.values(path);
        if (values) values.forEach((v) => b.push(layoutValue(v)));
        else if (!path.includes("[*]")) b.push({ kind: "absent" });
        b.endSlot();
      }
    }
    this.manifest.watches.forEach((spec, w) => {
      for (const index of spec.indexes) {
        const entries: Array<[string, number]> = [];
        rows.forEach(([rw, o], at) => {
          if (rw === w) for (const key of o.strings(index.field)) entries.push([key, at]);
        });
        b.index(w, index.name, entries);
      }
    });
    return b.finish();
  }
}
