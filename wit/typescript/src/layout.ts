/**
 * The snapshot's columnar layout (see `snapshot` in `wit/controller.wit`):
 * decoding it ({@link Layout}) and laying one out ({@link LayoutBuilder},
 * for the testing World). This module owns the string table's UTF-8
 * offsets, slots, value kinds and index buckets; it knows no names (the
 * schema does) and never throws on a malformed snapshot after
 * {@link Layout.check}: out-of-range indices read as absent.
 *
 * 64-bit payloads arrive as `bigint` (jco's lifting) or as `number`
 * (componentize-qjs lifts u64/s64 to a double): both are read, the second
 * exactly only up to 2^53 (so an integer field below -2^11 or above 2^53,
 * and the last bits of a float's mantissa, are lost on that runtime).
 * @module
 */

import type * as wit from "./wit.js";

/** Value kinds (the table in `wit/controller.wit`). */
export const kind = { ABSENT: 0, STR: 1, INT: 2, FLOAT: 3, BOOL: 4, JSON: 5 } as const;

/** One projected value. */
export type Value =
  | { kind: "absent" }
  | { kind: "str"; value: string }
  | { kind: "int"; value: bigint }
  | { kind: "float"; value: number }
  | { kind: "bool"; value: boolean }
  | { kind: "json"; value: string };

const ABSENT: Value = { kind: "absent" };

/** A 64-bit payload as the runtime lifted it. */
type Word = number | bigint;

/** A list of integers as either runtime lifts it. */
type Ints = ArrayLike<number>;
type Words = ArrayLike<Word>;

/** The snapshot record as either runtime lifts it. */
export interface SnapshotData {
  strings: string;
  stringEnds: Ints;
  objectWatch: Ints;
  objectNamespace: Ints;
  objectName: Ints;
  objectUid: Ints;
  objectGeneration: Words;
  objectDeletionTimestamp: Ints;
  objectFirstSlot: Ints;
  slotEnds: Ints;
  valueKinds: Ints;
  valueData: Words;
  indexes: Array<{ watch: number; name: string; buckets: Array<{ key: number; objects: Ints }> }>;
}

function u64(w: Word | undefined): bigint {
  if (w === undefined) return 0n;
  if (typeof w === "bigint") return BigInt.asUintN(64, w);
  // A double standing for a u64: exact below 2^53.
  return w >= 18446744073709551616 ? 0n : BigInt(Math.max(0, Math.trunc(w)));
}

function s64(w: Word | undefined): bigint {
  return BigInt.asIntN(64, u64(w));
}

const floatView = new DataView(new ArrayBuffer(8));

function f64(bits: bigint): number {
  floatView.setBigUint64(0, bits);
  return floatView.getFloat64(0);
}

/** The UTF-16 range of each string of the blob, from its UTF-8 end offsets. */
function stringRanges(blob: string, ends: Ints): { starts: number[]; stops: number[] } | string {
  const starts: number[] = [];
  const stops: number[] = [];
  let byte = 0;
  let unit = 0;
  let prev = 0;
  let prevUnit = 0;
  for (let i = 0; i < ends.length; i++) {
    const end = ends[i] ?? 0;
    if (end < prev) return `string ${i} ends at ${end} (previous end ${prev})`;
    while (byte < end && unit < blob.length) {
      const c = blob.codePointAt(unit) ?? 0;
      byte += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
      unit += c >= 0x10000 ? 2 : 1;
    }
    if (byte !== end) return `string ${i} ends at ${end}, not on a character of the ${byte}-byte blob`;
    starts.push(prevUnit);
    stops.push(unit);
    prev = end;
    prevUnit = unit;
  }
  return { starts, stops };
}

/** A checked snapshot: typed, bounds-checked reads of its tables. */
export class Layout {
  private constructor(
    readonly data: SnapshotData,
    private readonly starts: number[],
    private readonly stops: number[],
  ) {}

  /** Validates the tables; a description of the first problem otherwise. */
  static check(data: SnapshotData): Layout | string {
    const ranges = stringRanges(data.strings, data.stringEnds);
    if (typeof ranges === "string") return `malformed snapshot: ${ranges}`;
    const n = data.objectWatch.length;
    const columns = [
      data.objectNamespace,
      data.objectName,
      data.objectUid,
      data.objectGeneration,
      data.objectDeletionTimestamp,
      data.objectFirstSlot,
    ];
    if (columns.some((c) => c.length !== n)) return "malformed snapshot: object columns differ in length";
    if (data.valueKinds.length !== data.valueData.length) {
      return "malformed snapshot: value kinds and payloads differ in length";
    }
    return new Layout(data, ranges.starts, ranges.stops);
  }

  /** Number of objects. */
  get length(): number {
    return this.data.objectWatch.length;
  }

  /** String `i` of the table; "" when out of range. */
  string(i: number | undefined): string {
    if (i === undefined || i >= this.starts.length) return "";
    return this.data.strings.slice(this.starts[i], this.stops[i]);
  }

  /** The watch of object `o` (-1 when out of range). */
  watch(o: number): number {
    return this.data.objectWatch[o] ?? -1;
  }

  namespace(o: number): string {
    return this.string(this.data.objectNamespace[o]);
  }

  name(o: number): string {
    return this.string(this.data.objectName[o]);
  }

  uid(o: number): string {
    return this.string(this.data.objectUid[o]);
  }

  generation(o: number): number {
    return Number(s64(this.data.objectGeneration[o]));
  }

  /** `metadata.deletionTimestamp`, or `undefined` when not being deleted. */
  deletionTimestamp(o: number): string | undefined {
    const t = this.string(this.data.objectDeletionTimestamp[o]);
    return t === "" ? undefined : t;
  }

  /** The object of watch `w` named `namespace/name` (binary search). */
  find(w: number, namespace: string, name: string): number | undefined {
    let lo = 0;
    let hi = this.length;
    const less = (o: number) => compare3(this.watch(o), this.namespace(o), this.name(o), w, namespace, name) < 0;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (less(mid)) lo = mid + 1;
      else hi = mid;
    }
    return lo < this.length && this.watch(lo) === w && this.namespace(lo) === namespace && this.name(lo) === name
      ? lo
      : undefined;
  }

  /** The first object index whose watch is not below `w` (or `length`). */
  watchStart(w: number): number {
    let lo = 0;
    let hi = this.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.watch(mid) < w) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private range(o: number, slot: number): [number, number] {
    const first = this.data.objectFirstSlot[o];
    if (first === undefined) return [0, 0];
    const s = first + slot;
    const end = this.data.slotEnds[s];
    if (end === undefined) return [0, 0];
    const start = s === 0 ? 0 : (this.data.slotEnds[s - 1] ?? 0);
    if (start > end || end > this.data.valueKinds.length) return [0, 0];
    return [start, end];
  }

  /** How many values slot `slot` of object `o` holds. */
  fieldLength(o: number, slot: number): number {
    const [start, end] = this.range(o, slot);
    return end - start;
  }

  /** Value `i` of slot `slot` of object `o` (absent when out of range). */
  value(o: number, slot: number, i: number): Value {
    const [start, end] = this.range(o, slot);
    const at = start + i;
    if (i < 0 || at >= end) return ABSENT;
    const data = this.data.valueData[at];
    switch (this.data.valueKinds[at]) {
      case kind.STR:
        return { kind: "str", value: this.string(Number(u64(data))) };
      case kind.INT:
        return { kind: "int", value: s64(data) };
      case kind.FLOAT:
        return { kind: "float", value: f64(u64(data)) };
      case kind.BOOL:
        return { kind: "bool", value: u64(data) !== 0n };
      case kind.JSON:
        return { kind: "json", value: this.string(Number(u64(data))) };
      default:
        return ABSENT;
    }
  }

  /** The objects of index `name` of watch `w` under `key`. */
  lookup(w: number, name: string, key: string): number[] {
    const index = this.data.indexes.find((i) => i.watch === w && i.name === name);
    if (!index) return [];
    const bucket = index.buckets.find((b) => this.string(b.key) === key);
    return bucket ? Array.from(bucket.objects).filter((o) => o < this.length) : [];
  }
}

/** Orders (watch, namespace, name) triples as the snapshot does (UTF-8 byte order). */
export function compare3(w1: number, ns1: string, n1: string, w2: number, ns2: string, n2: string): number {
  return w1 - w2 || compareBytes(ns1, ns2) || compareBytes(n1, n2);
}

/**
 * Compares strings by their UTF-8 bytes, as Rust orders `str`: the same as
 * code point order (UTF-16 code unit order differs above U+FFFF).
 */
export function compareBytes(a: string, b: string): number {
  if (a === b) return 0;
  const ai = a[Symbol.iterator]();
  const bi = b[Symbol.iterator]();
  for (;;) {
    const x = ai.next();
    const y = bi.next();
    if (x.done) return y.done ? 0 : -1;
    if (y.done) return 1;
    const d = (x.value.codePointAt(0) ?? 0) - (y.value.codePointAt(0) ?? 0);
    if (d !== 0) return d;
  }
}

/** A value as a test or the World writes it. */
export type LayoutValue = Value;

function utf8Length(s: string): number {
  let n = 0;
  for (const ch of s) {
    const c = ch.codePointAt(0) ?? 0;
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
  }
  return n;
}

/**
 * Lays out a snapshot as the host does: objects added in snapshot order,
 * each followed by its slots' values, then the indexes; strings interned
 * (string 0 is ""). Produces jco's shapes (typed arrays, bigints).
 */
export class LayoutBuilder {
  private strings: string[] = [""];
  private ends: number[] = [0];
  private bytes = 0;
  private interned = new Map<string, number>([["", 0]]);
  private objectWatch: number[] = [];
  private objectNamespace: number[] = [];
  private objectName: number[] = [];
  private objectUid: number[] = [];
  private objectGeneration: bigint[] = [];
  private objectDeletionTimestamp: number[] = [];
  private objectFirstSlot: number[] = [];
  private slotEnds: number[] = [];
  private valueKinds: number[] = [];
  private valueData: bigint[] = [];
  private indexes: wit.Index[] = [];

  /** The index of `s`, interned. */
  string(s: string): number {
    const known = this.interned.get(s);
    if (known !== undefined) return known;
    const id = this.ends.length;
    this.strings.push(s);
    this.bytes += utf8Length(s);
    this.ends.push(this.bytes);
    this.interned.set(s, id);
    return id;
  }

  /** Starts the next object. */
  object(watch: number, namespace: string, name: string, uid: string, generation: number, deletionTimestamp: string): void {
    this.objectWatch.push(watch);
    this.objectNamespace.push(this.string(namespace));
    this.objectName.push(this.string(name));
    this.objectUid.push(this.string(uid));
    this.objectGeneration.push(BigInt(generation));
    this.objectDeletionTimestamp.push(this.string(deletionTimestamp));
    this.objectFirstSlot.push(this.slotEnds.length);
  }

  /** Appends a value to the current slot. */
  push(v: Value): void {
    switch (v.kind) {
      case "absent":
        return this.raw(kind.ABSENT, 0n);
      case "str":
        return this.raw(kind.STR, BigInt(this.string(v.value)));
      case "int":
        return this.raw(kind.INT, BigInt.asUintN(64, v.value));
      case "float":
        floatView.setFloat64(0, v.value);
        return this.raw(kind.FLOAT, floatView.getBigUint64(0));
      case "bool":
        return this.raw(kind.BOOL, v.value ? 1n : 0n);
      case "json":
        return this.raw(kind.JSON, BigInt(this.string(v.value)));
    }
  }

  private raw(k: number, data: bigint): void {
    this.valueKinds.push(k);
    this.valueData.push(data);
  }

  /** Closes the current slot. */
  endSlot(): void {
    this.slotEnds.push(this.valueKinds.length);
  }

  /** Index `name` of `watch` from (key, object) pairs: buckets sorted by key. */
  index(watch: number, name: string, entries: Array<[string, number]>): void {
    const buckets = new Map<string, number[]>();
    for (const [key, o] of entries) {
      const list = buckets.get(key) ?? [];
      list.push(o);
      buckets.set(key, list);
    }
    const keys = [...buckets.keys()].sort(compareBytes);
    this.indexes.push({
      watch,
      name,
      buckets: keys.map((key) => ({ key: this.string(key), objects: Uint32Array.from(buckets.get(key) ?? []) })),
    });
  }

  /** The record, as jco declares it. */
  finish(): wit.Snapshot {
    return {
      strings: this.strings.join(""),
      stringEnds: Uint32Array.from(this.ends),
      objectWatch: Uint32Array.from(this.objectWatch),
      objectNamespace: Uint32Array.from(this.objectNamespace),
      objectName: Uint32Array.from(this.objectName),
      objectUid: Uint32Array.from(this.objectUid),
      objectGeneration: BigInt64Array.from(this.objectGeneration),
      objectDeletionTimestamp: Uint32Array.from(this.objectDeletionTimestamp),
      objectFirstSlot: Uint32Array.from(this.objectFirstSlot),
      slotEnds: Uint32Array.from(this.slotEnds),
      valueKinds: Uint8Array.from(this.valueKinds),
      valueData: BigUint64Array.from(this.valueData),
      indexes: this.indexes,
    };
  }
}
