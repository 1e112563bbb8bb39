/**
 * Snapshot access by name: a {@link Schema} built from the guest's own
 * manifest resolves watch and field names into handles once (an unknown
 * name is a {@link SchemaError}, reported at `describe`), and a
 * {@link Snapshot} hands out {@link SnapshotObject}s whose accessors take
 * those handles. Decoding is {@link Layout}'s; this module adds names,
 * lookups by namespace and name, and typed values. Nothing here throws on
 * a malformed snapshot once it is checked: out-of-range reads are absent.
 * @module
 */

import { Layout, type SnapshotData, type Value } from "./layout.js";
import { objectRef } from "./manifest.js";
import type * as wit from "./wit.js";

/** A name the guest's code reads that its manifest does not declare. */
export class SchemaError extends Error {
  override name = "SchemaError";
}

function quoted(names: Iterable<string>): string {
  const list = [...names].map((n) => JSON.stringify(n));
  return list.length ? list.join(", ") : "none";
}

/** The names a manifest declares, for resolving them into handles. */
export class Schema {
  readonly watches: readonly wit.Watch[];

  /** The schema of `manifest`; watch names must be unique. */
  constructor(manifest: wit.Manifest) {
    manifest.watches.forEach((w, i) => {
      if (manifest.watches.slice(0, i).some((o) => o.name === w.name)) {
        throw new SchemaError(`two watches are named ${JSON.stringify(w.name)}`);
      }
    });
    this.watches = manifest.watches;
  }

  /** The watch named `name`. */
  watch(name: string): WatchSchema {
    const id = this.watches.findIndex((w) => w.name === name);
    const spec = this.watches[id];
    if (!spec) {
      throw new SchemaError(
        `no watch named ${JSON.stringify(name)} (watches: ${quoted(this.watches.map((w) => w.name))})`,
      );
    }
    return new WatchSchema(spec, id);
  }

  /** The watch at position `id`, if any. */
  at(id: number): wit.Watch | undefined {
    return this.watches[id];
  }
}

/** One watch of a {@link Schema}. */
export class WatchSchema {
  constructor(
    readonly spec: wit.Watch,
    /** Its position in the manifest's watches: the handle snapshots take. */
    readonly id: number,
  ) {}

  get name(): string {
    return this.spec.name;
  }

  /** The finalizer the host holds on its objects, if it declares one. */
  get finalizer(): string | undefined {
    return this.spec.finalizer ?? undefined;
  }

  /** The field `path`, exactly as written in the watch's `fields`. */
  field(path: string): Field {
    const slot = this.spec.fields.indexOf(path);
    if (slot < 0) {
      throw new SchemaError(
        `watch ${JSON.stringify(this.spec.name)} does not project field ${JSON.stringify(path)} (its fields: ${quoted(this.spec.fields)})`,
      );
    }
    return { watch: this.id, slot };
  }

  /** The index `name`, checked to be declared (for {@link Snapshot.indexed}). */
  index(name: string): IndexName {
    if (!this.spec.indexes.some((i) => i.name === name)) {
      throw new SchemaError(
        `watch ${JSON.stringify(this.spec.name)} has no index named ${JSON.stringify(name)} (its indexes: ${quoted(this.spec.indexes.map((i) => i.name))})`,
      );
    }
    return { watch: this.id, name };
  }
}

/** A projected field of one watch, resolved. */
export interface Field {
  readonly watch: number;
  readonly slot: number;
}

/** A declared index of one watch, resolved. */
export interface IndexName {
  readonly watch: number;
  readonly name: string;
}

/** `namespace/name` split at the first `/`; without one, a cluster-scoped name. */
export function splitKey(key: string): [string, string] {
  const at = key.indexOf("/");
  return at < 0 ? ["", key] : [key.slice(0, at), key.slice(at + 1)];
}

/** A checked snapshot, read through a {@link Schema}. */
export class Snapshot {
  private constructor(
    readonly schema: Schema,
    readonly layout: Layout,
  ) {}

  /** Checks `data`'s tables; throws a description of the first problem. */
  static of(schema: Schema, data: SnapshotData | wit.Snapshot): Snapshot {
    const layout = Layout.check(data as SnapshotData);
    if (typeof layout === "string") throw new Error(layout);
    return new Snapshot(schema, layout);
  }

  /** Number of objects, over all watches. */
  get length(): number {
    return this.layout.length;
  }

  private object(o: number): SnapshotObject {
    return new SnapshotObject(this, o);
  }

  /** Every object of every watch, in snapshot order. */
  all(): SnapshotObject[] {
    return Array.from({ length: this.length }, (_, o) => this.object(o));
  }

  /** Every object of `watch`, in namespace/name order. */
  objects(watch: WatchSchema | number): SnapshotObject[] {
    const w = typeof watch === "number" ? watch : watch.id;
    const out: SnapshotObject[] = [];
    for (let o = this.layout.watchStart(w); o < this.length && this.layout.watch(o) === w; o++) {
      out.push(this.object(o));
    }
    return out;
  }

  /** The objects of `watch` in `namespace`. */
  inNamespace(watch: WatchSchema | number, namespace: string): SnapshotObject[] {
    return this.objects(watch).filter((o) => o.namespace === namespace);
  }

  /** The object `namespace/name` of `watch` ("" namespace when cluster-scoped). */
  get(watch: WatchSchema | number, namespace: string, name: string): SnapshotObject | undefined {
    const w = typeof watch === "number" ? watch : watch.id;
    const o = this.layout.find(w, namespace, name);
    return o === undefined ? undefined : this.object(o);
  }

  /**
   * The primary object a per-object request is about; `undefined` for an
   * aggregate request or an object the snapshot does not hold.
   */
  primary(request: wit.Request): SnapshotObject | undefined {
    if (request.watch == null) return undefined;
    const id = this.schema.watches.findIndex((w) => w.name === request.watch);
    if (id < 0) return undefined;
    const [namespace, name] = splitKey(request.key);
    return this.get(id, namespace, name);
  }

  /** The objects of `index`'s bucket `key`. */
  indexed(index: IndexName, key: string): SnapshotObject[] {
    return this.layout.lookup(index.watch, index.name, key).map((o) => this.object(o));
  }
}

/** One object of a {@link Snapshot}. */
export class SnapshotObject {
  constructor(
    readonly snapshot: Snapshot,
    /** Its index in the snapshot. */
    readonly position: number,
  ) {}

  /** Its watch's position in the manifest. */
  get watch(): number {
    return this.snapshot.layout.watch(this.position);
  }

  /** `metadata.namespace` ("" when cluster-scoped). */
  get namespace(): string {
    return this.snapshot.layout.namespace(this.position);
  }

  /** `metadata.name`. */
  get name(): string {
    return this.snapshot.layout.name(this.position);
  }

  /** `metadata.uid`. */
  get uid(): string {
    return this.snapshot.layout.uid(this.position);
  }

  /** `metadata.generation` (0 when the type has none). */
  get generation(): number {
    return this.snapshot.layout.generation(this.position);
  }

  /** `metadata.deletionTimestamp`, when it is being deleted. */
  get deletionTimestamp(): string | undefined {
    return this.snapshot.layout.deletionTimestamp(this.position);
  }

  /** Whether it is being deleted (finalizers are holding it). */
  get isDeleting(): boolean {
    return this.deletionTimestamp !== undefined;
  }

  /** Its key, `namespace/name` (`name` when cluster-scoped). */
  get key(): string {
    return this.namespace === "" ? this.name : `${this.namespace}/${this.name}`;
  }

  /** A reference to it, with its watch's apiVersion and kind. */
  ref(): wit.ObjectRef {
    const spec = this.snapshot.schema.at(this.watch);
    if (spec) return objectRef(spec.gvk, this.namespace, this.name);
    return objectRef({ group: "", version: "", kind: "" }, this.namespace, this.name);
  }

  /** The field `path` of its watch (resolve once where you can). */
  field(path: string): Field {
    const spec = this.snapshot.schema.at(this.watch);
    if (!spec) throw new SchemaError(`no watch #${this.watch}`);
    return new WatchSchema(spec, this.watch).field(path);
  }

  private slot(field: Field): number | undefined {
    return field.watch === this.watch ? field.slot : undefined;
  }

  /** How many values `field` yielded (0 for a field of another watch). */
  count(field: Field): number {
    const slot = this.slot(field);
    return slot === undefined ? 0 : this.snapshot.layout.fieldLength(this.position, slot);
  }

  /** Value `i` of `field`, typed. */
  valueAt(field: Field, i = 0): Value {
    const slot = this.slot(field);
    return slot === undefined ? { kind: "absent" } : this.snapshot.layout.value(this.position, slot, i);
  }

  /**
   * Value `i` of `field` as text: strings as they are, numbers rendered,
   * booleans `true`/`false`, objects and lists as JSON; `undefined` when absent.
   */
  textAt(field: Field, i = 0): string | undefined {
    const v = this.valueAt(field, i);
    switch (v.kind) {
      case "absent":
        return undefined;
      case "str":
      case "json":
        return v.value;
      default:
        return String(v.value);
    }
  }

  /** The first value of `field` as text. */
  text(field: Field): string | undefined {
    return this.textAt(field, 0);
  }

  /** Every value of `field` as text, in order. */
  texts(field: Field): Array<string | undefined> {
    return Array.from({ length: this.count(field) }, (_, i) => this.textAt(field, i));
  }

  /**
   * Value `i` of `field` as an integer (also a float without fraction, or
   * a string holding a decimal integer); a number, exact up to 2^53.
   */
  intAt(field: Field, i = 0): number | undefined {
    const v = this.valueAt(field, i);
    switch (v.kind) {
      case "int":
        return Number(v.value);
      case "float":
        return Number.isInteger(v.value) && Math.abs(v.value) < 9.2e18 ? v.value : undefined;
      case "str":
        return /^[+-]?\d+$/.test(v.value) ? Number(v.value) : undefined;
      default:
        return undefined;
    }
  }

  /** The first value of `field` as an integer. */
  int(field: Field): number | undefined {
    return this.intAt(field, 0);
  }

  /** The first value of `field` as a number (integer or float). */
  number(field: Field): number | undefined {
    const v = this.valueAt(field, 0);
    return v.kind === "int" ? Number(v.value) : v.kind === "float" ? v.value : undefined;
  }

  /** The first value of `field` as a boolean. */
  bool(field: Field): boolean | undefined {
    const v = this.valueAt(field, 0);
    return v.kind === "bool" ? v.value : undefined;
  }
}
