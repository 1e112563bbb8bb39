/**
 * The manifest as builders: `new Manifest("app").watch(...).write(...)`,
 * `new Watch("apps", gvk).fields(App.fields).perObject().finalizer(..)`,
 * `new WriteRule(gvk).status(true)`. Each builder *is* the contract record
 * (its own properties are the record's fields, absent options `undefined`),
 * so a manifest crosses the component boundary as built. This module
 * checks nothing: the schema ({@link Schema}) and the host do.
 * @module
 */

import type * as wit from "./wit.js";

/** The type `group/version, Kind` (group "" for the core group). */
export function gvk(group: string, version: string, kind: string): wit.GroupVersionKind {
  return { group, version, kind };
}

/** A core (`v1`) type, e.g. `core("ConfigMap")`. */
export function core(kind: string): wit.GroupVersionKind {
  return gvk("", "v1", kind);
}

/** `group/version`, or just `version` for the core group. */
export function apiVersion(type: wit.GroupVersionKind): string {
  return type.group === "" ? type.version : `${type.group}/${type.version}`;
}

/**
 * A reference to the object `namespace/name` of `type` (`namespace` ""
 * for a cluster-scoped object: the reference then has none).
 */
export function objectRef(type: wit.GroupVersionKind, namespace: string, name: string): wit.ObjectRef {
  const ref: wit.ObjectRef = { apiVersion: apiVersion(type), kind: type.kind, name };
  if (namespace !== "") ref.namespace = namespace;
  return ref;
}

/** The prefix of an index link's primary that keeps it to one namespace. */
export const SAME_NAMESPACE = "same-namespace:";

/** One watch, built: see `watch` in `wit/controller.wit`. */
export class Watch implements wit.Watch {
  plural?: string;
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  fields: string[] = [];
  indexes: wit.IndexSpec[] = [];
  keys: wit.KeyMapping = { tag: "none" };
  finalizer?: string;

  /**
   * A watch named `name` (a DNS label, unique in the manifest) over every
   * object of `gvk`, projecting no fields, whose changes enqueue nothing
   * until a key mapping is set.
   */
  constructor(
    readonly name: string,
    readonly gvk: wit.GroupVersionKind,
  ) {}

  /** The resource name in URLs, as a claim the host checks. */
  withPlural(plural: string): this {
    this.plural = plural;
    return this;
  }

  /** Only this namespace. */
  inNamespace(namespace: string): this {
    this.namespace = namespace;
    return this;
  }

  /** A label selector, evaluated by the API server. */
  withLabelSelector(selector: string): this {
    this.labelSelector = selector;
    return this;
  }

  /** A field selector, evaluated by the API server. */
  withFieldSelector(selector: string): this {
    this.fieldSelector = selector;
    return this;
  }

  /** Projects `paths` too (a view's `fields`, say), after those before. */
  withFields(paths: Iterable<string>): this {
    this.fields.push(...paths);
    return this;
  }

  /** An index `name` over the values of `field`. */
  index(name: string, field: string): this {
    this.indexes.push({ name, field });
    return this;
  }

  /** Each object is its own request (a primary watch). */
  perObject(): this {
    this.keys = { tag: "per-object" };
    return this;
  }

  /** Every change enqueues the one fixed key `key`. */
  aggregate(key: string): this {
    this.keys = { tag: "aggregate", val: key };
    return this;
  }

  /** A change enqueues every primary of watch `primary` in its namespace. */
  sameNamespace(primary: string): this {
    this.keys = { tag: "same-namespace", val: primary };
    return this;
  }

  /** A shared input: a change enqueues every primary of watch `primary`. */
  all(primary: string): this {
    this.keys = { tag: "all", val: primary };
    return this;
  }

  /** Owned objects: a change enqueues the controller owner, of watch `primary`. */
  owner(primary: string): this {
    this.keys = { tag: "owner", val: primary };
    return this;
  }

  /**
   * A change enqueues the primaries of watch `primary` whose index `index`
   * holds a value this object's `field` has.
   */
  byIndex(primary: string, index: string, field: string): this {
    this.keys = { tag: "by-index", val: { primary, index, field } };
    return this;
  }

  /** {@link Watch.byIndex}, kept to one namespace. */
  byIndexSameNamespace(primary: string, index: string, field: string): this {
    return this.byIndex(SAME_NAMESPACE + primary, index, field);
  }

  /** A finalizer the host manages on this watch's objects. */
  withFinalizer(finalizer: string): this {
    this.finalizer = finalizer;
    return this;
  }
}

/** Objects the guest may write: see `write-rule` in `wit/controller.wit`. */
export class WriteRule implements wit.WriteRule {
  namespace?: string;
  names: string[] = [];
  status = false;

  /** Any object of `gvk`, in any namespace, not its status. */
  constructor(readonly gvk: wit.GroupVersionKind) {}

  /** Only in `namespace`. */
  inNamespace(namespace: string): this {
    this.namespace = namespace;
    return this;
  }

  /** Only the object `name` (with the names added before). */
  named(name: string): this {
    this.names.push(name);
    return this;
  }

  /** Whether its status subresource may be written too. */
  withStatus(status = true): this {
    this.status = status;
    return this;
  }
}

/** What the guest declares about itself: see `manifest` in `wit/controller.wit`. */
export class Manifest implements wit.Manifest {
  watches: Watch[] = [];
  writes: WriteRule[] = [];
  resyncSeconds?: number;

  /** A guest named `name` (a DNS label) that reads and writes nothing yet. */
  constructor(readonly name: string) {}

  /** Reads `watch` too. */
  watch(watch: Watch): this {
    this.watches.push(watch);
    return this;
  }

  /** May write what `rule` allows too. */
  write(rule: WriteRule): this {
    this.writes.push(rule);
    return this;
  }

  /** Re-enqueue every key this often. */
  resync(seconds: number): this {
    this.resyncSeconds = seconds;
    return this;
  }
}

/** The primary watch an index link names (without its namespace prefix). */
export function linkPrimary(link: wit.IndexLink): string {
  return link.primary.startsWith(SAME_NAMESPACE) ? link.primary.slice(SAME_NAMESPACE.length) : link.primary;
}

/** Whether an index link is kept to one namespace. */
export function linkSameNamespace(link: wit.IndexLink): boolean {
  return link.primary.startsWith(SAME_NAMESPACE);
}
