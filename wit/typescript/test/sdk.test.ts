// The SDK's layers, each against what the Rust SDK guarantees: names
// resolved once (unknown ones are errors naming what exists), typed reads,
// documents in Kubernetes' field order, conditions keeping their
// transition time, the lifecycle told by presence, owner references.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  Manifest,
  Plan,
  ReconcileError,
  Schema,
  Snapshot,
  Watch,
  WriteRule,
  condition,
  conditionPaths,
  controllerOwner,
  controllerRef,
  core,
  describe,
  document,
  event,
  field,
  FINALIZERS,
  gvk,
  lifecycle,
  objectRef,
  OWNER_REFERENCES,
  ownedConditions,
  ownerRef,
  reconcile,
  rfc3339,
  setCondition,
  settings,
  view,
  type Condition,
  type Guest,
  type ViewOf,
} from "../src/index.js";
import { Obj, World, objectRequest, testEnvironment } from "../src/testing/index.js";

const QUOTA = gvk("example.com", "v1", "GpuQuota");

function manifest(): Manifest {
  return new Manifest("t")
    .watch(
      new Watch("quotas", QUOTA)
        .withFields(["spec.limit", "spec.tags[*]", "spec.on", "spec.ratio", "spec.labels"])
        .index("by-team", "metadata.labels.team")
        .perObject(),
    )
    .watch(new Watch("pods", core("Pod")).withFields(["spec.nodeName"]).sameNamespace("quotas"));
}

function snapshot(): Snapshot {
  const data = World.of(manifest())
    .with(Obj.of("pods", "b", "p2").set("spec.nodeName", "n2"))
    .with(Obj.of("pods", "a", "p1").set("spec.nodeName", "n1"))
    .with(Obj.of("pods", "b", "p1"))
    .with(
      Obj.of("quotas", "a", "q")
        .generation(4)
        .set("spec.limit", 3)
        .setList("spec.tags[*]", ["x", "y"])
        .set("spec.on", true)
        .set("spec.ratio", 0.25)
        .set("spec.labels", { json: '{"a":"1","n":2}' })
        .set("metadata.labels.team", "ml"),
    )
    .with(Obj.of("quotas", "b", "q").deleting("2026-12-01T00:00:00Z"))
    .snapshot();
  return Snapshot.of(new Schema(manifest()), data);
}

test("unknown names are errors that name what exists", () => {
  const schema = new Schema(manifest());
  assert.throws(() => schema.watch("pod"), /no watch named "pod" \(watches: "quotas", "pods"\)/);
  assert.throws(() => schema.watch("quotas").field("spec.limits"), /does not project field "spec.limits".*"spec.limit"/);
  assert.throws(() => schema.watch("quotas").index("by-owner"), /no index named "by-owner"/);
  assert.equal(schema.watch("quotas").index("by-team").name, "by-team");
  assert.throws(() => new Schema(manifest().watch(new Watch("pods", core("Pod")))), /two watches are named "pods"/);
});

test("objects are found by watch, namespace and name, in snapshot order", () => {
  const snap = snapshot();
  const schema = snap.schema;
  const pods = schema.watch("pods");
  const names = (list: { namespace: string; name: string }[]) => list.map((o) => `${o.namespace}/${o.name}`);
  assert.deepEqual(names(snap.objects(pods)), ["a/p1", "b/p1", "b/p2"]);
  assert.deepEqual(names(snap.inNamespace(pods, "b")), ["b/p1", "b/p2"]);
  assert.equal(snap.get(pods, "b", "p2")?.name, "p2");
  assert.equal(snap.get(schema.watch("quotas"), "b", "p2"), undefined);
  const q = snap.primary(objectRequest("quotas", "a/q"));
  assert.ok(q);
  assert.deepEqual([q.generation, q.isDeleting, q.uid], [4, false, "uid-a-q"]);
  assert.deepEqual(q.ref(), { apiVersion: "example.com/v1", kind: "GpuQuota", namespace: "a", name: "q" });
  assert.equal(snap.primary({ key: "a/q" }), undefined);
  assert.equal(snap.get(schema.watch("quotas"), "b", "q")?.deletionTimestamp, "2026-12-01T00:00:00Z");
  const team = schema.watch("quotas").index("by-team");
  assert.deepEqual(names(snap.indexed(team, "ml")), ["a/q"]);
  assert.deepEqual(snap.indexed(team, "web"), []);
});

test("values read typed and as text, and another watch's field reads absent", () => {
  const snap = snapshot();
  const quotas = snap.schema.watch("quotas");
  const [limit, tags, on, ratio, labels] = ["spec.limit", "spec.tags[*]", "spec.on", "spec.ratio", "spec.labels"].map(
    (p) => quotas.field(p),
  ) as [ReturnType<typeof quotas.field>, ...ReturnType<typeof quotas.field>[]];
  const q = snap.get(quotas, "a", "q");
  assert.ok(q && tags && on && ratio && labels);
  assert.deepEqual([q.int(limit), q.text(limit)], [3, "3"]);
  assert.deepEqual(q.texts(tags), ["x", "y"]);
  assert.deepEqual([q.count(tags), q.bool(on), q.text(on)], [2, true, "true"]);
  assert.deepEqual([q.number(ratio), q.int(ratio)], [0.25, undefined]);
  assert.deepEqual(q.valueAt(tags, 2), { kind: "absent" });
  const empty = snap.get(quotas, "b", "q");
  assert.ok(empty);
  assert.deepEqual([empty.count(tags), empty.count(limit), empty.int(limit)], [0, 1, undefined]);
  const node = snap.schema.watch("pods").field("spec.nodeName");
  assert.equal(q.text(node), undefined, "a pod field on a quota");
});

test("a snapshot lifted as QuickJS lifts it (numbers, plain arrays) reads the same", () => {
  const data = snapshot().layout.data;
  const plain = Object.fromEntries(
    Object.entries(data).map(([k, v]) => [
      k,
      ArrayBuffer.isView(v) ? Array.from(v as unknown as ArrayLike<number | bigint>, (x) => Number(x)) : v,
    ]),
  );
  const snap = Snapshot.of(new Schema(manifest()), plain as never);
  const quotas = snap.schema.watch("quotas");
  const q = snap.get(quotas, "a", "q");
  assert.ok(q);
  assert.equal(q.int(quotas.field("spec.limit")), 3);
  assert.equal(q.number(quotas.field("spec.ratio")), 0.25);
  assert.equal(q.generation, 4);
  assert.deepEqual(q.texts(quotas.field("spec.tags[*]")), ["x", "y"]);
});

test("malformed tables are errors and bad indices read as absent", () => {
  const data = snapshot().layout.data;
  assert.throws(() => Snapshot.of(new Schema(manifest()), { ...data, objectUid: Array.from(data.objectUid).slice(1) }), /columns/);
  assert.throws(() => Snapshot.of(new Schema(manifest()), { ...data, stringEnds: [0, 999] }), /malformed snapshot/);
  const broken = Snapshot.of(new Schema(manifest()), {
    ...data,
    objectFirstSlot: new Uint32Array(data.objectFirstSlot.length).fill(0xffffffff),
    objectName: Uint32Array.from(data.objectName, () => 0xffffffff),
  });
  const limit = broken.schema.watch("quotas").field("spec.limit");
  assert.ok(broken.objects(broken.schema.watch("quotas")).every((o) => o.int(limit) === undefined && o.name === ""));
  assert.deepEqual(broken.objects(7), []);
});

test("non-ASCII strings are read by their UTF-8 offsets", () => {
  const m = new Manifest("t").watch(new Watch("maps", core("ConfigMap")).withFields(["data.a", "data.b"]));
  const data = World.of(m)
    .with(Obj.of("maps", "ns", "é").set("data.a", "Grüße 👋").set("data.b", "ok"))
    .snapshot();
  const snap = Snapshot.of(new Schema(m), data);
  const maps = snap.schema.watch("maps");
  const o = snap.get(maps, "ns", "é");
  assert.ok(o);
  assert.deepEqual([o.text(maps.field("data.a")), o.text(maps.field("data.b"))], ["Grüße 👋", "ok"]);
});

const App = view({
  message: field.text("spec.message"),
  replicas: field.int("spec.replicas"),
  tags: field.texts("spec.tags[*]"),
  data: field.map("data"),
  conditions: field.conditions("status.conditions"),
});

test("a view names each path once and reads typed values", () => {
  assert.deepEqual(App.fields, [
    "spec.message",
    "spec.replicas",
    "spec.tags[*]",
    "data",
    ...conditionPaths("status.conditions"),
  ]);
  const m = new Manifest("t")
    .watch(new Watch("apps", gvk("a.io", "v1", "App")).withFields(App.fields).perObject())
    .watch(new Watch("bare", core("Secret")).withFields(["spec.message"]));
  const [t, s, g, l, r, msg] = conditionPaths("status.conditions") as [string, string, string, string, string, string];
  const data = World.of(m)
    .with(
      Obj.of("apps", "ns", "a")
        .set("spec.message", "hi")
        .set("spec.replicas", "7")
        .setList("spec.tags[*]", ["x", null, "y"])
        .set("data", { json: '{"k":"v","n":1}' })
        .setList(t, ["Ready", ""])
        .setList(s, ["True", "False"])
        .setList(g, [2])
        .setList(l, ["2026-01-01T00:00:00Z"])
        .setList(r, ["Ok"])
        .setList(msg, ["up"]),
    )
    .with(Obj.of("bare", "ns", "s").set("spec.message", "other"))
    .snapshot();
  const schema = new Schema(m);
  const snap = Snapshot.of(schema, data);
  const apps = App.resolve(schema.watch("apps"));
  const a: ViewOf<typeof App> = apps.read(snap.get(schema.watch("apps"), "ns", "a")!);
  assert.deepEqual(a, {
    message: "hi",
    replicas: 7,
    tags: ["x", "y"],
    data: { k: "v" },
    conditions: [
      {
        type: "Ready",
        status: "True",
        observedGeneration: 2,
        lastTransitionTime: "2026-01-01T00:00:00Z",
        reason: "Ok",
        message: "up",
      },
    ],
  });
  assert.equal(apps.read(snap.get(schema.watch("bare"), "ns", "s")!).message, undefined, "another watch's object");
  assert.throws(() => App.resolve(schema.watch("bare")), /"bare" does not project field "spec.replicas"/);
});

test("documents start with identity, then labels, annotations and owners, then the body", () => {
  const owner = { apiVersion: "apps.example.com/v1", kind: "App", name: "web", uid: "u1", controller: true, blockOwnerDeletion: true };
  const cm = objectRef(core("ConfigMap"), "ops", "web");
  const doc = document(cm, { data: { k: "v" } }).label("b", "2").label("a", "1").annotation("note", "x").ownedBy(owner);
  assert.equal(
    JSON.stringify(doc),
    '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","namespace":"ops","labels":{"a":"1","b":"2"},"annotations":{"note":"x"},"ownerReferences":[{"apiVersion":"apps.example.com/v1","kind":"App","name":"web","uid":"u1","controller":true,"blockOwnerDeletion":true}]},"data":{"k":"v"}}',
  );
  const node = objectRef(core("Node"), "", "n1");
  const plan = new Plan()
    .apply(document(cm, { data: { n1: "2" } }))
    .status(objectRef(QUOTA, "team-a", "gpus"), { used: 3 })
    .update(document(node, { spec: { unschedulable: true } }))
    .finish();
  assert.deepEqual(plan.writes, [
    { tag: "apply", val: '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","namespace":"ops"},"data":{"n1":"2"}}' },
    {
      tag: "apply-status",
      val: '{"apiVersion":"example.com/v1","kind":"GpuQuota","metadata":{"name":"gpus","namespace":"team-a"},"status":{"used":3}}',
    },
    { tag: "update", val: '{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"},"spec":{"unschedulable":true}}' },
  ]);
});

test("finalizers, deletes, events and requeue are recorded in order", () => {
  const q = objectRef(QUOTA, "team-a", "gpus");
  const warning = { ...event("warning", q, "OverLimit", "5 of 4 GPUs"), related: objectRef(core("Pod"), "team-a", "p") };
  const plan = new Plan()
    .addFinalizer(q, "example.com/a")
    .removeFinalizer(q, "example.com/b")
    .delete(q)
    .event(warning)
    .event({ ...event("normal", q, "Released", "done"), action: "Finalize" })
    .requeueAfterMs(500)
    .finish();
  assert.deepEqual(plan.writes, [
    { tag: "add-finalizer", val: { target: q, finalizer: "example.com/a" } },
    { tag: "remove-finalizer", val: { target: q, finalizer: "example.com/b" } },
    { tag: "delete", val: q },
  ]);
  assert.deepEqual(
    plan.events.map((e) => [e.eventType, e.action, e.related?.name]),
    [
      ["warning", "Reconcile", "p"],
      ["normal", "Finalize", undefined],
    ],
  );
  assert.equal(plan.requeueAfterMs, 500n);
});

test("an unserialisable document is a terminal error, not a partial plan", () => {
  const plan = new Plan().apply({ ok: true }).apply({ n: 1n });
  assert.equal(plan.writes.length, 1);
  assert.throws(
    () => plan.finish(),
    (e: unknown) => e instanceof ReconcileError && e.kind === "terminal" && /serialise/.test(e.message),
  );
});

const T0 = 1_796_096_640_000; // 2026-12-01T03:44:00Z
const T1 = T0 + 60_000;

test("the clock is written as metav1.Time writes it", () => {
  assert.equal(rfc3339(T0 + 999), "2026-12-01T03:44:00Z");
  assert.equal(rfc3339(0n), "1970-01-01T00:00:00Z");
});

test("a condition's transition time changes only with its status", () => {
  const ready = (ok: boolean, reason: string, generation = 0) => condition("Ready", ok, reason, "m", generation);
  const cs: Condition[] = [];
  assert.ok(setCondition(cs, ready(true, "WithinLimit", 1), T0));
  assert.equal(cs[0]?.lastTransitionTime, "2026-12-01T03:44:00Z");
  assert.ok(!setCondition(cs, ready(true, "WithinLimit", 1), T1), "nothing changed");
  assert.ok(setCondition(cs, ready(true, "Other", 2), T1));
  assert.deepEqual([cs[0]?.observedGeneration, cs[0]?.reason, cs[0]?.lastTransitionTime], [2, "Other", "2026-12-01T03:44:00Z"]);
  assert.ok(setCondition(cs, ready(false, "OverLimit"), T1));
  assert.equal(cs[0]?.lastTransitionTime, "2026-12-01T03:45:00Z");
  const kept = [{ ...condition("Synced", true, "Ok", ""), lastTransitionTime: "2020-01-01T00:00:00Z" }, ...cs];
  const owned = ownedConditions(kept, ready(false, "OverLimit"), T0 + 999_000);
  assert.deepEqual(
    owned.map((c) => [c.type, c.lastTransitionTime]),
    [["Ready", "2026-12-01T03:45:00Z"]],
    "only the owned type, its time kept",
  );
});

test("owner references name the owner's type, name and uid, and read back from the projection", () => {
  const app = gvk("apps.example.com", "v1", "App");
  const m = new Manifest("t")
    .watch(new Watch("apps", app).perObject())
    .watch(new Watch("children", core("ConfigMap")).withFields([OWNER_REFERENCES]).owner("apps"))
    .watch(new Watch("bare", core("Secret")));
  const owner = Obj.of("apps", "a", "web").uid("u1");
  const plain = { apiVersion: "v1", kind: "Node", name: "n1", uid: "u-n1" };
  const data = World.of(m)
    .with(owner)
    .with(Obj.of("children", "a", "c").ownerReference(plain).controlledBy(app, owner))
    .with(Obj.of("children", "a", "orphan").ownerReference(plain))
    .with(Obj.of("bare", "a", "s"))
    .snapshot();
  const schema = new Schema(m);
  const snap = Snapshot.of(schema, data);
  const web = snap.get(schema.watch("apps"), "a", "web")!;
  const ref = controllerRef(web);
  assert.equal(
    JSON.stringify(ref),
    '{"apiVersion":"apps.example.com/v1","kind":"App","name":"web","uid":"u1","controller":true,"blockOwnerDeletion":true}',
  );
  assert.deepEqual(ownerRef(web), { apiVersion: "apps.example.com/v1", kind: "App", name: "web", uid: "u1" });
  assert.deepEqual(controllerOwner(snap.get(schema.watch("children"), "a", "c")!), ref);
  assert.equal(controllerOwner(snap.get(schema.watch("children"), "a", "orphan")!), undefined);
  assert.throws(
    () => controllerOwner(snap.get(schema.watch("bare"), "a", "s")!),
    /"bare" does not project field "metadata.ownerReferences"/,
  );
});

test("the lifecycle is live, deleting, gone or unselected, by presence first", () => {
  const FIN = "example.com/cleanup";
  const m = (finalizer: boolean, project: boolean) => {
    const apps = new Watch("apps", gvk("example.com", "v1", "App")).perObject();
    if (project) apps.withFields([FINALIZERS]);
    if (finalizer) apps.withFinalizer(FIN);
    return new Manifest("t").watch(apps).watch(new Watch("children", core("ConfigMap")));
  };
  const run = (manifest: Manifest, objects: Obj[], presence: "present" | "gone" | "unselected" = "present") => {
    const schema = new Schema(manifest);
    const snap = Snapshot.of(schema, World.of(manifest).withAll(objects).snapshot());
    const life = lifecycle(snap, objectRequest("apps", "ns/a", presence));
    const plan = new Plan();
    if (life.state === "deleting") life.deleting.deleteThenRelease(snap.objects(schema.watch("children")), plan);
    return [life.state, plan.finish().writes.map((w) => w.tag)];
  };
  const a = Obj.of("apps", "ns", "a");
  const deleting = a.deleting("2026-01-01T00:00:00Z");
  assert.deepEqual(run(m(true, true), [a]), ["live", []]);
  assert.deepEqual(run(m(true, true), [Obj.of("apps", "ns", "b")]), ["gone", []]);
  assert.deepEqual(run(m(true, true), [a], "unselected"), ["unselected", []], "presence wins over the snapshot");
  assert.deepEqual(run(m(true, true), [a], "gone"), ["gone", []]);
  assert.deepEqual(run(m(true, true), [deleting.setList(FINALIZERS, ["other", FIN])]), ["deleting", ["remove-finalizer"]]);
  assert.deepEqual(run(m(true, true), [deleting.setList(FINALIZERS, ["other"])]), ["deleting", []], "not ours");
  assert.deepEqual(run(m(false, true), [deleting]), ["deleting", []], "no finalizer declared");
  assert.deepEqual(run(m(true, false), [deleting]), ["deleting", ["remove-finalizer"]], "assumed held");
  assert.deepEqual(
    run(m(true, true), [deleting.setList(FINALIZERS, [FIN]), Obj.of("children", "ns", "a")]),
    ["deleting", ["delete"]],
    "children go first",
  );
});

test("configuration keys are checked: unknown keys and empty values are errors naming the key", () => {
  const env = testEnvironment("ns", { config: [["name", "a"], ["name", "b"]] });
  const config = settings(env, ["name", "resource"]);
  assert.equal(config.get("name"), "b");
  assert.equal(config.getOr("resource", "gpu"), "gpu");
  assert.throws(() => settings(testEnvironment("ns", { config: [["nmae", "x"]] }), ["name"]), {
    message: 'unknown configuration key "nmae" (known: name)',
  });
  assert.throws(() => settings(env, []), /\(known: none\)$/);
  assert.throws(() => settings(testEnvironment("ns", { config: [["name", ""]] }), ["name"]), /"name" must not be empty/);
});

/** Reads spec.replicas of "apps"; projects it only unconfigured. */
const Toy: Guest<ReturnType<typeof toyFields>> = {
  describe(env) {
    const apps = new Watch("apps", gvk("apps", "v1", "Deployment")).perObject();
    if (env.config.length === 0) apps.withFields(["spec.replicas"]);
    return new Manifest("toy").watch(apps).write(new WriteRule(gvk("apps", "v1", "Deployment")).withStatus());
  },
  fields: (_env, schema) => toyFields(schema),
  reconcile(_env, request, snap, replicas) {
    const app = snap.primary(request);
    if (!app) throw ReconcileError.retryable("gone");
    return new Plan().status(app.ref(), { replicas: app.int(replicas) });
  },
};

function toyFields(schema: Schema) {
  return schema.watch("apps").field("spec.replicas");
}

test("describe rejects a field the manifest does not project, naming guest and field", () => {
  const env = testEnvironment("ns");
  assert.equal(describe(Toy, env).name, "toy");
  const lean = testEnvironment("ns", { config: [["lean", "1"]] });
  assert.throws(() => describe(Toy, lean), /^Error: guest toy: watch "apps" does not project field "spec.replicas"/);
  const data = World.of(Toy.describe(env)).snapshot();
  assert.throws(
    () => reconcile(Toy, lean, { key: "k" }, data),
    (e: unknown) => e instanceof ReconcileError && e.kind === "terminal" && e.message.includes("spec.replicas"),
  );
});

test("reconcile reads by name and returns the guest's own errors", () => {
  const env = testEnvironment("ns");
  const data = World.of(Toy.describe(env)).with(Obj.of("apps", "ns", "web").set("spec.replicas", 3)).snapshot();
  const plan = reconcile(Toy, env, objectRequest("apps", "ns/web"), data);
  assert.deepEqual(plan.writes, [
    {
      tag: "apply-status",
      val: '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"ns"},"status":{"replicas":3}}',
    },
  ]);
  assert.throws(() => reconcile(Toy, env, objectRequest("apps", "ns/gone"), data), {
    kind: "retryable",
    message: "gone",
  });
  assert.throws(() => reconcile(Toy, env, objectRequest("app", "ns/web"), data), /no watch named "app"/);
  assert.throws(
    () => reconcile(Toy, env, objectRequest("apps", "ns/web"), { ...data, objectName: new Uint32Array() }),
    /^ReconcileError: guest toy: malformed snapshot/,
  );
});
