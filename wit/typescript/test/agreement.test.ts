// The relation agreement table (wit/agreement/relations.json, described in
// wit/agreement/README.md): this SDK's World must give exactly the table's
// answers, as the host, the Rust SDK and the Python SDK must: which keys
// each change wakes, which objects each key's snapshot holds, and what a
// departed primary's snapshot still holds.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { Manifest, Watch } from "../src/index.js";
import { Obj, World, aggregateRequest, objectRequest } from "../src/testing/index.js";
import type * as wit from "../src/wit.js";

interface Case {
  watch: string;
  namespace: string;
  name: string;
  uid?: string;
  fields?: Record<string, string>;
  labels?: Record<string, string>;
  controller?: { apiVersion: string; kind: string; name: string; uid: string };
}

interface Holds {
  key: string;
  holds: string[];
}

type TableKeys = string | Record<string, string | { primary: string; index: string; field: string }>;

interface Table {
  manifest: {
    name: string;
    watches: Array<{
      name: string;
      gvk: wit.GroupVersionKind;
      fields?: string[];
      indexes?: wit.IndexSpec[];
      keys: TableKeys;
    }>;
  };
  world: Case[];
  changes: Array<{ object: Case; wakes: string[] }>;
  snapshots: Holds[];
  departed: Holds[];
}

const file = fileURLToPath(new URL("../../../agreement/relations.json", import.meta.url));
const table = JSON.parse(readFileSync(file, "utf8")) as Table;

function keyMapping(keys: TableKeys): wit.KeyMapping {
  if (keys === "per-object" || keys === "none") return { tag: keys };
  const [[tag, val]] = Object.entries(keys as object) as [[string, unknown]];
  return { tag, val } as wit.KeyMapping;
}

function manifest(): Manifest {
  const m = new Manifest(table.manifest.name);
  for (const w of table.manifest.watches) {
    const watch = new Watch(w.name, w.gvk).withFields(w.fields ?? []);
    for (const index of w.indexes ?? []) watch.index(index.name, index.field);
    watch.keys = keyMapping(w.keys);
    m.watch(watch);
  }
  return m;
}

const key = (c: Case) => (c.namespace === "" ? c.name : `${c.namespace}/${c.name}`);
const same = (a: Case, b: Case) => a.watch === b.watch && a.namespace === b.namespace && a.name === b.name;

function obj(c: Case): Obj {
  let o = Obj.of(c.watch, c.namespace, c.name).uid(c.uid ?? `uid-${c.watch}-${c.namespace}-${c.name}`);
  for (const [path, value] of Object.entries(c.fields ?? {})) o = o.set(path, value);
  for (const [k, v] of Object.entries(c.labels ?? {})) o = o.label(k, v);
  if (c.controller) o = o.ownerReference({ ...c.controller, controller: true });
  return o;
}

function world(cases: Case[]): World {
  return World.of(manifest()).withAll(cases.map(obj));
}

function request(entry: Holds): wit.Request {
  const at = entry.key.indexOf(":");
  const [watch, k] = [entry.key.slice(0, at), entry.key.slice(at + 1)];
  return watch === "*" ? aggregateRequest(k) : objectRequest(watch, k);
}

const held = (objects: Obj[]) => objects.map((o) => `${o.watch}:${o.namespace}/${o.name}`).sort();
const named = (requests: wit.Request[]) => requests.map((r) => `${r.watch ?? "*"}:${r.key}`).sort();

test("every change wakes the table's keys", () => {
  let woken = 0;
  for (const change of table.changes) {
    const old = table.world.find((o) => same(o, change.object));
    const got = named(world(table.world).wakesEdit(old && obj(old), obj(change.object)));
    assert.deepEqual(got, change.wakes, `change ${change.object.watch}:${key(change.object)}`);
    woken += got.length;
  }
  assert.ok(woken > 0 && table.changes.length > 0, "the table wakes keys (it is not vacuous)");
});

test("every key's snapshot holds the table's objects", () => {
  let holds = 0;
  const w = world(table.world);
  for (const entry of table.snapshots) {
    const got = held(w.objectsFor(request(entry)));
    assert.deepEqual(got, entry.holds, `key ${entry.key}`);
    holds += got.length;
  }
  assert.ok(holds > 0, "the snapshots hold objects (the table is not vacuous)");
});

test("a departed primary's snapshot holds the table's related objects, and its key is gone", () => {
  let holds = 0;
  for (const entry of table.departed) {
    const r = request(entry);
    const departed = table.world.find((o) => o.watch === r.watch && key(o) === r.key);
    assert.ok(departed, `${entry.key} is an object of the world`);
    const w = world(table.world.filter((o) => !same(o, departed))).gone(obj(departed));
    const asked = w.request(departed.watch, key(departed));
    assert.equal(asked.presence, "gone", entry.key);
    const got = held(w.objectsFor(asked));
    assert.deepEqual(got, entry.holds, `departed ${entry.key}`);
    holds += got.length;
  }
  assert.ok(holds > 0, "departed snapshots hold related objects");
});
