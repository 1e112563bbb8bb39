/**
 * The App guest: the "App owns a child" controller every operator tutorial
 * starts with, written with the TypeScript guest SDK; the same controller
 * as `examples/guest-app` (Rust), plan for plan.
 *
 * For each App (`apps.example.com/v1`) it applies one child ConfigMap of
 * the same name and namespace, controlled by the App, whose `data` holds
 * `message`, `replicas` and the `banner` of the namespace's
 * `shared-settings` ConfigMap; and it writes the App's
 * `status.observedGeneration` and a `Ready` condition. The host holds the
 * finalizer `apps.example.com/cleanup` on every App; a deleting App's
 * child is deleted explicitly before the finalizer is released. This file
 * is the glue (views, manifest, plan); the decision is `app.ts`.
 * @module
 */

import {
  FINALIZERS,
  Manifest,
  Plan,
  type Guest,
  type Schema,
  type Snapshot,
  Watch,
  type WatchSchema,
  WriteRule,
  controllerRef,
  core,
  document,
  field,
  gvk,
  lifecycle,
  objectRef,
  settings,
  view,
  type wit,
} from "wasmctrl-guest-sdk";

import * as app from "./app.js";

/** The guest's name (field manager `wasmctrl/app`). */
export const GUEST_NAME = "app";
/** The finalizer the host keeps on every App until its child is deleted. */
export const FINALIZER = "apps.example.com/cleanup";
/** The primary watch: the Apps. */
export const APP_WATCH = "apps";
/** The children: ConfigMaps, related to the App that controls them. */
export const CHILD_WATCH = "children";
/** The shared settings: ConfigMaps named `shared-settings`, related to every App of their namespace. */
export const SETTINGS_WATCH = "settings";
/** The name of the ConfigMap whose `data.banner` every child copies. */
export const SHARED_SETTINGS = "shared-settings";

/** The `App` type. */
export const APP = gvk("apps.example.com", "v1", "App");
/** The `ConfigMap` type (children and shared settings). */
export const CONFIGMAP = core("ConfigMap");

// ANCHOR: views
/** An App, as this guest reads it. */
export const App = view({
  message: field.text("spec.message"),
  replicas: field.int("spec.replicas"),
  conditions: field.conditions("status.conditions"),
});

/** A namespace's `shared-settings` ConfigMap. */
export const SharedSettings = view({
  banner: field.text("data.banner"),
});
// ANCHOR_END: views

// ANCHOR: manifest
/** The manifest: Apps (per object, finalizer), the ConfigMaps they control, each namespace's `shared-settings`. */
export function manifest(): Manifest {
  const apps = new Watch(APP_WATCH, APP).withFields(App.fields).withFields([FINALIZERS]).perObject().withFinalizer(FINALIZER);
  // Nothing of a child is read: the host compares each planned child with
  // the live one; identity (name, uid) is in every snapshot anyway.
  const children = new Watch(CHILD_WATCH, CONFIGMAP).owner(APP_WATCH);
  const shared = new Watch(SETTINGS_WATCH, CONFIGMAP)
    .withFieldSelector(`metadata.name=${SHARED_SETTINGS}`)
    .withFields(SharedSettings.fields)
    .sameNamespace(APP_WATCH);
  return new Manifest(GUEST_NAME)
    .watch(apps)
    .watch(children)
    .watch(shared)
    .write(new WriteRule(CONFIGMAP))
    .write(new WriteRule(APP).withStatus());
}
// ANCHOR_END: manifest

/** The views a reconcile reads through, resolved. */
export interface Fields {
  apps: ReturnType<typeof App.resolve>;
  children: WatchSchema;
  settings: ReturnType<typeof SharedSettings.resolve>;
}

// ANCHOR: guest
/** The guest. */
export const AppController: Guest<Fields> = {
  describe(env: wit.Environment): Manifest {
    settings(env, []);
    return manifest();
  },

  fields(_env: wit.Environment, schema: Schema): Fields {
    return {
      apps: App.resolve(schema.watch(APP_WATCH)),
      children: schema.watch(CHILD_WATCH),
      settings: SharedSettings.resolve(schema.watch(SETTINGS_WATCH)),
    };
  },

  reconcile(env: wit.Environment, request: wit.Request, snapshot: Snapshot, f: Fields): Plan {
    const plan = new Plan();
    const life = lifecycle(snapshot, request);
    switch (life.state) {
      case "gone":
      case "unselected":
        // The snapshot no longer holds the App but still holds the
        // ConfigMaps it controlled: delete what is left.
        return plan.deleteAll(snapshot.objects(f.children));
      case "deleting":
        // The children go first and explicitly, then the finalizer.
        return life.deleting.deleteThenRelease(snapshot.objects(f.children), plan);
      case "live":
        break;
    }
    const object = life.object;
    const spec = f.apps.read(object);
    const { namespace, name } = object;
    const shared = snapshot.get(f.settings.watch, namespace, SHARED_SETTINGS);
    const banner = shared && f.settings.read(shared).banner;
    const child = objectRef(CONFIGMAP, namespace, name);
    plan.apply(document(child, { data: app.childData(spec, banner) }).ownedBy(controllerRef(object)));
    const exists = snapshot.get(f.children, namespace, name) !== undefined;
    const status = app.status(object.generation, `${namespace}/${name}`, exists, spec.conditions, env.nowMs);
    return plan.status(object.ref(), app.statusJSON(status));
  },
};
// ANCHOR_END: guest
