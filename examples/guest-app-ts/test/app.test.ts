// The App guest end to end under node --test: snapshots built by the SDK's
// World, run through the same path as the component's export, plans
// checked as the host would receive them. The same behaviours as the Rust
// guest's native tests (examples/guest-app/src/tests.rs).
import assert from "node:assert/strict";
import { test } from "node:test";

import { conditionPaths, describe, objectRef, reconcile, type wit } from "wasmctrl-guest-sdk";
import { Obj, World, objectRequest, testEnvironment } from "wasmctrl-guest-sdk/testing";

import * as app from "../src/app.js";
import {
  APP,
  APP_WATCH,
  AppController,
  CHILD_WATCH,
  CONFIGMAP,
  FINALIZER,
  SETTINGS_WATCH,
  SHARED_SETTINGS,
  manifest,
} from "../src/guest.js";
import { FINALIZERS } from "wasmctrl-guest-sdk";

const NS = "team-a";
const NAME = "web";
const UID = "uid-team-a-web";
/** 2026-12-01T03:44:00Z. */
const NOW = 1_796_096_640_000;
const NOW_TEXT = "2026-12-01T03:44:00Z";
const EARLIER = "2026-11-30T00:00:00Z";

/** The App team-a/web holding our finalizer. */
function anApp(message: string, replicas: number): Obj {
  return Obj.of(APP_WATCH, NS, NAME).set("spec.message", message).set("spec.replicas", replicas).setList(FINALIZERS, [FINALIZER]);
}

/** With a Ready condition already in status. */
function withReady(o: Obj, status: string, reason: string, since: string, generation: number): Obj {
  const [t, s, g, l, r, m] = conditionPaths("status.conditions") as [string, string, string, string, string, string];
  return o
    .setList(t, ["Ready"])
    .setList(s, [status])
    .setList(g, [generation])
    .setList(l, [since])
    .setList(r, [reason])
    .setList(m, [`ConfigMap ${NS}/${NAME} is applied`]);
}

/** The child ConfigMap of team-a/web, as the host's owner index hands it to the App's snapshot. */
const itsChild = () => Obj.of(CHILD_WATCH, NS, NAME).uid("uid-child");

/** The namespace's shared-settings, with data.banner. */
const settings = (namespace: string, banner: string | undefined) =>
  Obj.of(SETTINGS_WATCH, namespace, SHARED_SETTINGS).set("data.banner", banner);

// ANCHOR: run
function run(objects: Obj[]): wit.Plan {
  const data = World.of(manifest()).withAll(objects).snapshot();
  const env = testEnvironment("wasmctrl", { nowMs: NOW });
  return reconcile(AppController, env, objectRequest(APP_WATCH, `${NS}/${NAME}`), data);
}
// ANCHOR_END: run

type Json = Record<string, any>;

/** The two writes of a live App: the child (applied) and the status. */
function childAndStatus(plan: wit.Plan): [Json, Json] {
  const [child, status, ...rest] = plan.writes;
  assert.equal(rest.length, 0, JSON.stringify(plan.writes));
  assert.ok(child?.tag === "apply" && status?.tag === "apply-status", JSON.stringify(plan.writes));
  const s = JSON.parse(status.val) as Json;
  assert.equal(s.apiVersion, "apps.example.com/v1");
  assert.equal(s.kind, "App");
  assert.deepEqual(s.metadata, { name: NAME, namespace: NS });
  return [JSON.parse(child.val) as Json, s.status as Json];
}

function ready(status: Json): Json {
  assert.equal(status.conditions.length, 1, `only our condition: ${JSON.stringify(status)}`);
  assert.equal(status.conditions[0].type, "Ready");
  return status.conditions[0];
}

test("a new App gets a child controlled by it, and Ready=False until it exists", () => {
  const plan = run([anApp("hello", 2)]);
  const [child, status] = childAndStatus(plan);
  // Byte for byte what the Rust guest applies (the host compares documents).
  assert.equal(
    (plan.writes[0] as { val: string }).val,
    `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"${NAME}","namespace":"${NS}","ownerReferences":[{"apiVersion":"apps.example.com/v1","kind":"App","name":"${NAME}","uid":"${UID}","controller":true,"blockOwnerDeletion":true}]},"data":{"message":"hello","replicas":"2"}}`,
  );
  assert.deepEqual(child.data, { message: "hello", replicas: "2" });
  assert.equal(status.observedGeneration, 1);
  const c = ready(status);
  assert.deepEqual([c.status, c.reason, c.observedGeneration, c.lastTransitionTime], ["False", "ChildMissing", 1, NOW_TEXT]);
  // Once the child is in the snapshot: Ready flips, with a new time.
  const [, after] = childAndStatus(run([withReady(anApp("hello", 2), "False", "ChildMissing", EARLIER, 1), itsChild()]));
  const flipped = ready(after);
  assert.deepEqual([flipped.status, flipped.reason, flipped.lastTransitionTime], ["True", "ChildReady", NOW_TEXT]);
});

test("a spec change is mirrored in the child and observed in status", () => {
  const edited = withReady(anApp("bye", 5).generation(4), "True", "ChildReady", EARLIER, 3);
  const [child, status] = childAndStatus(run([edited, itsChild()]));
  assert.deepEqual(child.data, { message: "bye", replicas: "5" });
  assert.equal(status.observedGeneration, 4);
  const c = ready(status);
  assert.equal(c.observedGeneration, 4);
  assert.equal(c.lastTransitionTime, EARLIER, "Ready did not flip");
});

test("an unchanged world plans exactly the state it already has", () => {
  const world = () => [withReady(anApp("hello", 2), "True", "ChildReady", EARLIER, 1), itsChild(), settings(NS, "hi")];
  const first = run(world());
  assert.deepEqual(run(world()).writes, first.writes);
  assert.deepEqual([first.events, first.requeueAfterMs], [[], undefined]);
  const [child, status] = childAndStatus(first);
  assert.deepEqual(child.data, { banner: "hi", message: "hello", replicas: "2" });
  assert.equal(
    JSON.stringify(status),
    JSON.stringify({
      observedGeneration: 1,
      conditions: [
        {
          type: "Ready",
          status: "True",
          observedGeneration: 1,
          lastTransitionTime: EARLIER,
          reason: "ChildReady",
          message: `ConfigMap ${NS}/${NAME} is applied`,
        },
      ],
    }),
    "metav1.Condition's field order",
  );
});

test("Ready keeps its transition time unless its status flips", () => {
  const cases: Array<[string, string, string, boolean, string]> = [
    ["still ready", "True", "ChildReady", true, EARLIER],
    ["still missing", "False", "ChildMissing", false, EARLIER],
    ["child appears", "False", "ChildMissing", true, NOW_TEXT],
    ["child deleted", "True", "ChildReady", false, NOW_TEXT],
  ];
  for (const [what, was, reason, exists, want] of cases) {
    const objects = [withReady(anApp("m", 1), was, reason, EARLIER, 1), ...(exists ? [itsChild()] : [])];
    const [, status] = childAndStatus(run(objects));
    assert.equal(ready(status).lastTransitionTime, want, what);
  }
});

test("the banner of shared-settings is copied, and absent means no key", () => {
  const cases: Array<[string, Obj[], string | undefined]> = [
    ["banner set", [settings(NS, "maintenance at 5")], "maintenance at 5"],
    ["empty banner", [settings(NS, "")], ""],
    ["settings without banner", [settings(NS, undefined)], undefined],
    ["no settings", [], undefined],
    // The host only relates same-namespace settings; the guest only reads its own namespace's.
    ["another namespace's", [settings("team-b", "x")], undefined],
  ];
  for (const [what, extra, want] of cases) {
    const [child] = childAndStatus(run([anApp("m", 1), itsChild(), ...extra]));
    assert.equal(child.data.banner, want, what);
    assert.equal("banner" in child.data, want !== undefined, what);
    assert.equal(child.data.message, "m", what);
  }
});

// ANCHOR: deleting
test("a deleting App with its child deletes the child and keeps the finalizer", () => {
  const deleting = anApp("m", 1).deleting("2026-12-01T03:40:00Z");
  // The host pins the delete to the uid its snapshot saw (uid-child).
  assert.deepEqual(run([deleting, itsChild()]).writes, [{ tag: "delete", val: objectRef(CONFIGMAP, NS, NAME) }]);
  // Someone else's finalizer only: the child still goes.
  const plan = run([deleting.setList(FINALIZERS, ["other.io/x"]), itsChild()]);
  assert.deepEqual(plan.writes.map((w) => w.tag), ["delete"]);
  assert.deepEqual(plan.events, []);
});
// ANCHOR_END: deleting

test("a deleting App without a child releases the finalizer and nothing else", () => {
  const deleting = anApp("m", 1).deleting("2026-12-01T03:40:00Z");
  assert.deepEqual(run([deleting, settings(NS, "b")]).writes, [
    { tag: "remove-finalizer", val: { target: objectRef(APP, NS, NAME), finalizer: FINALIZER } },
  ]);
  // Our finalizer already gone: nothing to write.
  assert.deepEqual(run([deleting.setList(FINALIZERS, ["other.io/x"])]).writes, []);
});

test("a gone App plans nothing once its child is gone", () => {
  const plan = run([]);
  assert.deepEqual([plan.writes, plan.events], [[], []]);
});

test("a gone or unselected App deletes the child it left and writes nothing else", () => {
  const last = anApp("hello", 1);
  const world = World.of(manifest()).with(itsChild().controlledBy(APP, last), settings(NS, undefined)).gone(last);
  const request = world.request(APP_WATCH, `${NS}/${NAME}`);
  assert.equal(request.presence, "gone");
  for (const presence of ["gone", "unselected"] as const) {
    const plan = reconcile(AppController, testEnvironment("wasmctrl"), { ...request, presence }, world.snapshotFor(request));
    assert.deepEqual(plan.writes, [{ tag: "delete", val: objectRef(CONFIGMAP, NS, NAME) }], presence);
  }
});

test("the manifest relates children to their owner and settings to their namespace", () => {
  const env = testEnvironment("wasmctrl");
  const m = describe(AppController, env);
  assert.deepEqual(m, manifest());
  const [apps, children, shared, ...more] = m.watches;
  assert.equal(more.length, 0);
  assert.deepEqual([apps?.keys, apps?.finalizer], [{ tag: "per-object" }, FINALIZER]);
  assert.deepEqual([children?.keys, children?.gvk], [{ tag: "owner", val: APP_WATCH }, CONFIGMAP]);
  assert.deepEqual([shared?.keys, shared?.fieldSelector], [{ tag: "same-namespace", val: APP_WATCH }, "metadata.name=shared-settings"]);
  assert.deepEqual(
    m.writes.map((w) => [w.gvk, w.status]),
    [
      [CONFIGMAP, false],
      [APP, true],
    ],
  );
  assert.throws(() => describe(AppController, testEnvironment("wasmctrl", { config: [["banner", "x"]] })), /"banner"/);
});

test("the decision: child data has a key for every value present only, Ready follows the child", () => {
  assert.deepEqual(app.childData({ message: "hi", replicas: 3 }, ""), { banner: "", message: "hi", replicas: "3" });
  assert.deepEqual(Object.keys(app.childData({ message: "hi", replicas: 3 }, undefined)), ["message", "replicas"]);
  assert.deepEqual(app.childData({}, undefined), {});
  const other = { type: "Synced", status: "True", observedGeneration: 0, lastTransitionTime: "", reason: "Ok", message: "" };
  for (const [exists, isReady, reason] of [
    [true, true, app.CHILD_READY],
    [false, false, app.CHILD_MISSING],
  ] as const) {
    const s = app.status(4, "ns/a", exists, [other], 0);
    assert.equal(app.isReady(s), isReady);
    assert.deepEqual(
      s.conditions.map((c) => [c.reason, c.observedGeneration]),
      [[reason, 4]],
    );
    assert.equal(s.observedGeneration, 4);
  }
});

/** Apps web and api in team-a, web in team-b, each with its child; both namespaces' shared settings. */
function relationsWorld(): World {
  let world = World.of(manifest());
  for (const [ns, name] of [
    [NS, NAME],
    [NS, "api"],
    ["team-b", NAME],
  ] as const) {
    const owner = Obj.of(APP_WATCH, ns, name);
    world = world.with(owner, Obj.of(CHILD_WATCH, ns, name).controlledBy(APP, owner));
  }
  return world.with(settings(NS, "a"), settings("team-b", "b"));
}

const woken = (world: World, o: Obj) => world.wakes(o).map((r) => r.key);

// ANCHOR: wakes
test("a child edit wakes its owner", () => {
  const world = relationsWorld();
  const owner = Obj.of(APP_WATCH, NS, "api");
  assert.deepEqual(woken(world, Obj.of(CHILD_WATCH, NS, "api").controlledBy(APP, owner)), ["team-a/api"]);
  // A ConfigMap nobody controls, or one another kind controls, wakes no App.
  assert.deepEqual(woken(world, Obj.of(CHILD_WATCH, NS, "loose")), []);
  assert.deepEqual(woken(world, Obj.of(CHILD_WATCH, NS, "x").controlledBy(CONFIGMAP, owner)), []);
});
// ANCHOR_END: wakes

test("a shared-settings change wakes every App of its namespace", () => {
  const world = relationsWorld();
  assert.deepEqual(woken(world, settings(NS, "new")), ["team-a/api", "team-a/web"]);
  assert.deepEqual(woken(world, settings("team-b", undefined)), ["team-b/web"]);
  assert.deepEqual(woken(world, settings("team-c", "x")), []);
});

test("an App's snapshot holds its own child and its namespace's settings only", () => {
  const world = relationsWorld();
  const request = objectRequest(APP_WATCH, `${NS}/${NAME}`);
  assert.deepEqual(
    world.objectsFor(request).map((o) => `${o.watch}:${o.key}`),
    ["apps:team-a/web", "children:team-a/web", "settings:team-a/shared-settings"],
  );
  const plan = reconcile(AppController, testEnvironment("wasmctrl", { nowMs: NOW }), request, world.snapshotFor(request));
  const [child, status] = childAndStatus(plan);
  assert.equal(child.data.banner, "a");
  assert.equal(ready(status).status, "True");
});
