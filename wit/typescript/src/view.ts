/**
 * Typed views: an object whose fields are declared once with their paths,
 * giving the projection list for `Watch.withFields` ({@link View.fields}),
 * handles resolved once per reconcile ({@link View.resolve}) and a typed
 * read per object:
 *
 * ```ts
 * const App = view({
 *   message: field.text("spec.message"),
 *   replicas: field.int("spec.replicas"),
 *   conditions: field.conditions("status.conditions"),
 * });
 * type App = ViewOf<typeof App>; // { message?: string; replicas?: number; conditions: Condition[] }
 * new Watch("apps", appGvk).withFields(App.fields);
 * const apps = App.resolve(schema.watch("apps"));   // throws naming an unprojected path
 * const app = apps.read(object);                     // no strings at read time
 * ```
 *
 * This module owns how each field type reads from a snapshot value; it
 * never parses paths (the schema does) and never throws on contents: a
 * value of another kind reads as absent.
 * @module
 */

import { type Condition, conditionPaths } from "./condition.js";
import type { Field, SnapshotObject, WatchSchema } from "./snapshot.js";

/** How one view field reads: its paths, and a read from resolved handles. */
export interface FieldSpec<T> {
  readonly paths: readonly string[];
  read(object: SnapshotObject, fields: readonly Field[]): T;
}

function single<T>(path: string, read: (o: SnapshotObject, f: Field) => T): FieldSpec<T> {
  return { paths: [path], read: (o, [f]) => read(o, f as Field) };
}

function stringMembers(text: string | undefined): Record<string, string> {
  if (text === undefined) return {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return {};
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(parsed)) if (typeof v === "string") out[k] = v;
    return out;
  } catch {
    return {};
  }
}

/** The field types a view can declare. */
export const field = {
  /** The first value as text (numbers rendered, objects as JSON); `undefined` when absent. */
  text: (path: string) => single(path, (o, f) => o.text(f)),
  /** An integer (a float without fraction, a decimal string). */
  int: (path: string) => single(path, (o, f) => o.int(f)),
  /** A number (integer or float). */
  number: (path: string) => single(path, (o, f) => o.number(f)),
  /** A boolean; any other value reads as `undefined`. */
  bool: (path: string) => single(path, (o, f) => o.bool(f)),
  /** Every value as text, in order (a `[*]` path), absent ones skipped. */
  texts: (path: string) =>
    single(path, (o, f) => o.texts(f).filter((t): t is string => t !== undefined)),
  /** Every value as an integer, in order, others skipped. */
  ints: (path: string) =>
    single(path, (o, f) =>
      Array.from({ length: o.count(f) }, (_, i) => o.intAt(f, i)).filter((n): n is number => n !== undefined),
    ),
  /** The first value as a map of strings (labels, a ConfigMap's data); `{}` otherwise. */
  map: (path: string) =>
    single(path, (o, f) => {
      const v = o.valueAt(f);
      return v.kind === "json" ? stringMembers(v.value) : {};
    }),
  /** The first value as JSON (maps and lists parsed); `undefined` when absent. */
  json: (path: string) =>
    single(path, (o, f): unknown => {
      const v = o.valueAt(f);
      switch (v.kind) {
        case "absent":
          return undefined;
        case "json":
          try {
            return JSON.parse(v.value) as unknown;
          } catch {
            return undefined;
          }
        case "int":
          return Number(v.value);
        default:
          return v.value;
      }
    }),
  /**
   * The conditions list at `prefix` (six `[*]` paths, see
   * `conditionPaths`), in list order; entries without a type dropped,
   * missing fields empty.
   */
  conditions: (prefix: string): FieldSpec<Condition[]> => ({
    paths: conditionPaths(prefix),
    read(o, fields) {
      const [type, status, generation, time, reason, message] = fields as [Field, Field, Field, Field, Field, Field];
      const text = (f: Field, i: number) => o.textAt(f, i) ?? "";
      const out: Condition[] = [];
      for (let i = 0; i < o.count(type); i++) {
        if (text(type, i) === "") continue;
        out.push({
          type: text(type, i),
          status: text(status, i),
          observedGeneration: o.intAt(generation, i) ?? 0,
          lastTransitionTime: text(time, i),
          reason: text(reason, i),
          message: text(message, i),
        });
      }
      return out;
    },
  }),
};

type Specs = Record<string, FieldSpec<unknown>>;

/** The object a view reads: each declared field's type. */
export type Read<S extends Specs> = { [K in keyof S]: S[K] extends FieldSpec<infer T> ? T : never };

/** The object a view of `V` reads. */
export type ViewOf<V> = V extends View<infer S> ? Read<S> : never;

/** A view resolved against one watch: read objects with it. */
export class ResolvedView<S extends Specs> {
  constructor(
    private readonly specs: S,
    /** The watch it was resolved in. */
    readonly watch: WatchSchema,
    private readonly handles: ReadonlyMap<keyof S, readonly Field[]>,
  ) {}

  /** The view of `object` (an object of another watch reads as all absent). */
  read(object: SnapshotObject): Read<S> {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(this.specs)) {
      out[key] = (this.specs[key] as FieldSpec<unknown>).read(object, this.handles.get(key) ?? []);
    }
    return out as Read<S>;
  }
}

/** A typed view: the declared fields, their paths, and resolution. */
export class View<S extends Specs> {
  constructor(readonly specs: S) {}

  /** Every projection path the view reads, in field order. */
  get fields(): string[] {
    return Object.values(this.specs).flatMap((s) => [...s.paths]);
  }

  /** Resolves every path in `watch`; throws a SchemaError naming the first it does not project. */
  resolve(watch: WatchSchema): ResolvedView<S> {
    const handles = new Map<keyof S, readonly Field[]>();
    for (const [key, spec] of Object.entries(this.specs)) {
      handles.set(key, spec.paths.map((p) => watch.field(p)));
    }
    return new ResolvedView(this.specs, watch, handles);
  }
}

/** A view of the fields `specs` declares (see the module's example). */
export function view<S extends Specs>(specs: S): View<S> {
  return new View(specs);
}
