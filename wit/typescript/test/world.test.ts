// The World's key mappings, as the Rust SDK's relation tests check them
// (wit/rust/sdk/src/testing/relations.rs); the shared agreement table
// (agreement.test.ts) checks them against the host's own cases.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Manifest, Schema, Snapshot, Watch, core, gvk } from "../src/index.js";
import { LabelSelector, Obj, World, aggregateRequest, objectRequest } from "../src/testing/index.js";
import type * as wit from "../src/wit.js";

const QUOTA = gvk("example.com", "v1", "Quota");

/** Quotas (primary, indexed by spec.node), pods of their namespace, parts they control, nodes by index, an aggregate. */
function manifest(): Manifest {
  return new Manifest("t")
    .watch(new Watch("quotas", QUOTA).index("node", "spec.node").perObject())
    .watch(new Watch("pods", core("Pod")).sameNamespace("quotas"))
    .watch(new Watch("parts", core("ConfigMap")).owner("quotas"))
    .watch(new Watch("nodes", core("Node")).withFields(["metadata.name"]).byIndex("quotas", "node", "metadata.name"))
    .watch(new Watch("all", core("Secret")).aggregate("sum"));
}

const q = (ns: string, name: string, node: string) => Obj.of("quotas", ns, name).set("spec.node", node);

function world(): World {
  return World.of(manifest()).with(q("a", "q1", "n1"), q("a", "q2", "n2"), q("b", "q3", "n1"));
}

const keys = (requests: wit.Request[]) => requests.map((r) => `${r.watch ?? "*"}:${r.key}`);
const names = (objects: Obj[]) => objects.map((o) => `${o.watch}:${o.key}`);

test("each mapping wakes the keys the host would", () => {
  const w = world();
  const wakes = (o: Obj) => keys(w.wakes(o));
  assert.deepEqual(wakes(q("a", "q9", "n1")), ["quotas:a/q9"]);
  assert.deepEqual(wakes(Obj.of("pods", "a", "p")), ["quotas:a/q1", "quotas:a/q2"]);
  assert.deepEqual(wakes(Obj.of("pods", "c", "p")), []);
  const owner = Obj.of("quotas", "a", "q1");
  assert.deepEqual(wakes(Obj.of("parts", "a", "c").controlledBy(QUOTA, owner)), ["quotas:a/q1"]);
  assert.deepEqual(wakes(Obj.of("parts", "a", "c").controlledBy(gvk("other.io", "v1", "Quota"), owner)), []);
  const node = (name: string) => Obj.of("nodes", "", name).set("metadata.name", name);
  assert.deepEqual(wakes(node("n1")), ["quotas:a/q1", "quotas:b/q3"]);
  assert.deepEqual(wakes(Obj.of("all", "x", "s")), ["*:sum"]);
  const moved = Obj.of("parts", "a", "c").controlledBy(QUOTA, Obj.of("quotas", "a", "q2"));
  const was = Obj.of("parts", "a", "c").controlledBy(QUOTA, owner);
  assert.deepEqual(keys(w.wakesEdit(was, moved)), ["quotas:a/q1", "quotas:a/q2"]);
});

test("a same-namespace by-index link relates only objects of one namespace", () => {
  const m = new Manifest("t")
    .watch(new Watch("apps", gvk("example.com", "v1", "App")).index("config", "spec.configMap").perObject())
    .watch(
      new Watch("configs", core("ConfigMap"))
        .withFields(["metadata.name"])
        .byIndexSameNamespace("apps", "config", "metadata.name"),
    );
  const app = (ns: string, name: string) => Obj.of("apps", ns, name).set("spec.configMap", "shared");
  const config = (ns: string) => Obj.of("configs", ns, "shared").set("metadata.name", "shared");
  const w = World.of(m).with(app("a", "one"), app("a", "two"), app("b", "three"), config("b"));
  assert.deepEqual(keys(w.wakes(config("a"))), ["apps:a/one", "apps:a/two"]);
  assert.deepEqual(names(w.objectsFor(objectRequest("apps", "b/three"))), ["apps:b/three", "configs:b/shared"]);
  assert.equal(w.with(config("a")).objectsFor(objectRequest("apps", "a/one")).length, 2, "a/one and a/shared");
});

test("a primary's snapshot holds it and its related objects only", () => {
  const owner = Obj.of("quotas", "a", "q1");
  const w = world().with(
    Obj.of("pods", "a", "p"),
    Obj.of("pods", "b", "p"),
    Obj.of("parts", "a", "mine").controlledBy(QUOTA, owner),
    Obj.of("parts", "a", "stale").controlledBy(QUOTA, owner.uid("old-uid")),
    Obj.of("nodes", "", "n1").set("metadata.name", "n1"),
    Obj.of("nodes", "", "n2").set("metadata.name", "n2"),
    Obj.of("all", "a", "s"),
  );
  assert.deepEqual(names(w.objectsFor(objectRequest("quotas", "a/q1"))), [
    "quotas:a/q1",
    "pods:a/p",
    "parts:a/mine",
    "nodes:n1",
  ]);
  assert.deepEqual(w.objectsFor(objectRequest("quotas", "a/gone")), []);
  assert.equal(w.objectsFor(aggregateRequest("sum")).length, 10);
  assert.equal(w.snapshotFor(objectRequest("quotas", "b/q3")).objectName.length, 3, "q3, pod b/p, node n1");
});

/** Namespaces selected by tier=gold, each controlling Secrets, and platform ConfigMaps shared by all. */
function provisioner(): Manifest {
  return new Manifest("t")
    .watch(new Watch("spaces", core("Namespace")).withLabelSelector("tier=gold").perObject())
    .watch(new Watch("secrets", core("Secret")).owner("spaces"))
    .watch(new Watch("defaults", core("ConfigMap")).inNamespace("platform").all("spaces"));
}

test("a primary out of its label selector is unselected, with what it controls", () => {
  const m = provisioner();
  const gold = Obj.of("spaces", "", "a").label("tier", "gold");
  const child = Obj.of("secrets", "a", "quota").controlledBy(core("Namespace"), gold);
  const defaults = Obj.of("defaults", "platform", "tiers");
  const w = (space: Obj) => World.of(m).with(space, child, defaults);
  const live = w(gold);
  assert.equal(live.request("spaces", "a").presence, "present");
  assert.deepEqual(names(live.objectsFor(live.request("spaces", "a"))), ["spaces:a", "secrets:a/quota", "defaults:platform/tiers"]);
  const left = w(gold.label("tier", "none"));
  assert.equal(left.request("spaces", "a").presence, "unselected");
  assert.deepEqual(names(left.objectsFor(left.request("spaces", "a"))), ["secrets:a/quota", "defaults:platform/tiers"]);
  assert.equal(left.snapshot().objectName.length, 2, "the watch no longer holds it");
  const deleted = World.of(m).with(child, defaults).gone(gold);
  assert.equal(deleted.request("spaces", "a").presence, "gone");
  assert.deepEqual(names(deleted.objectsFor(deleted.request("spaces", "a"))), ["secrets:a/quota", "defaults:platform/tiers"]);
  assert.deepEqual(names(deleted.objectsFor(deleted.request("spaces", "b"))), ["defaults:platform/tiers"], "never seen");
});

test("a shared input wakes every selected primary, whatever its namespace", () => {
  const w = World.of(provisioner()).with(
    Obj.of("spaces", "", "a").label("tier", "gold"),
    Obj.of("spaces", "", "b").label("tier", "gold"),
    Obj.of("spaces", "", "c").label("tier", "bronze"),
  );
  assert.deepEqual(keys(w.wakes(Obj.of("defaults", "platform", "tiers"))), ["spaces:a", "spaces:b"]);
});

test("a label selector that does not parse is an error naming the watch", () => {
  const m = new Manifest("t").watch(new Watch("spaces", core("Namespace")).withLabelSelector("tier in (gold").perObject());
  assert.throws(() => World.of(m).snapshot(), /watch "spaces" has an invalid label selector/);
});

test("label selectors match as the API server matches them", () => {
  const labels = new Map([
    ["tier", "gold"],
    ["n", "5"],
  ]);
  const cases: Array<[string, boolean]> = [
    ["", true],
    ["tier=gold", true],
    ["tier==gold,n", true],
    ["tier!=gold", false],
    ["tier in (silver, gold)", true],
    ["tier notin (gold)", false],
    ["missing", false],
    ["!missing", true],
    ["!tier", false],
    ["n>4,n<6", true],
    ["n>5", false],
    ["zone notin (x)", true],
  ];
  for (const [selector, want] of cases) assert.equal(LabelSelector.parse(selector).matches(labels), want, selector);
  for (const bad of ["tier in (gold", "a b", "n>x", "=x", "in (a)"]) {
    assert.throws(() => LabelSelector.parse(bad), /unable to parse requirement/, bad);
  }
});

test("fixtures naming undeclared watches or fields are errors", () => {
  const m = new Manifest("t").watch(new Watch("pods", core("Pod")).withFields(["spec.nodeName"]).index("by-node", "spec.nodeName"));
  const data = World.of(m).with(Obj.of("pods", "a", "p").set("spec.nodeName", "n1")).snapshot();
  assert.equal(data.indexes.length, 1);
  assert.equal(data.indexes[0]?.buckets.length, 1);
  assert.throws(() => World.of(m).with(Obj.of("pods", "a", "p").set("spec.nodename", "n1")).snapshot(), /"spec.nodename"/);
  assert.throws(() => World.of(m).with(Obj.of("pod", "a", "p")).snapshot(), /no watch named "pod"/);
});

test("metadata paths are projected from the object's metadata as the host projects them", () => {
  const app = gvk("example.com", "v1", "App");
  const m = new Manifest("owners")
    .watch(new Watch("apps", app).withFields(["metadata.labels", "metadata.name", "metadata.uid"]).perObject())
    .watch(
      new Watch("parts", core("ConfigMap"))
        .withFields([
          "metadata.generation",
          "metadata.namespace",
          "metadata.labels.team",
          "metadata.labels['a.b/c']",
          "metadata.ownerReferences[*].controller",
          "metadata.ownerReferences[*].uid",
          "metadata.ownerReferences",
        ])
        .owner("apps"),
    );
  const owner = Obj.of("apps", "a", "web").uid("u-web").label("team", "ml").label("a.b/c", "x");
  const mine = Obj.of("parts", "a", "mine")
    .uid("u-mine")
    .generation(0)
    .label("team", "ml")
    .ownerReference({ apiVersion: "v1", kind: "Node", name: "n1", uid: "u-n1" })
    .controlledBy(app, owner);
  const schema = new Schema(m);
  const snap = Snapshot.of(schema, World.of(m).with(owner, mine).snapshotFor(objectRequest("apps", "a/web")));
  const apps = schema.watch("apps");
  const web = snap.get(apps, "a", "web")!;
  assert.equal(web.text(apps.field("metadata.labels")), '{"a.b/c":"x","team":"ml"}');
  assert.equal(web.text(apps.field("metadata.name")), "web");
  const parts = schema.watch("parts");
  const part = snap.get(parts, "a", "mine")!;
  assert.deepEqual(part.texts(parts.field("metadata.ownerReferences[*].uid")), ["u-n1", "u-web"]);
  assert.deepEqual(
    [0, 1].map((i) => part.valueAt(parts.field("metadata.ownerReferences[*].controller"), i).kind),
    ["absent", "bool"],
  );
  assert.equal(part.text(parts.field("metadata.labels['a.b/c']")), undefined);
  assert.equal(part.text(parts.field("metadata.labels.team")), "ml");
  assert.equal(part.text(parts.field("metadata.namespace")), "a");
  assert.equal(part.valueAt(parts.field("metadata.generation")).kind, "absent", "a ConfigMap has no generation");
  assert.match(part.text(parts.field("metadata.ownerReferences")) ?? "", /"blockOwnerDeletion":true/);
});
