//! The App guest: the "App owns a child" controller every operator tutorial
//! starts with, written with the guest SDK.
//!
//! An `App` (`apps.example.com/v1`, namespaced, see `crd.yaml`) sets
//! `spec.message` and `spec.replicas`. For each App this guest applies one
//! child ConfigMap of the same name and namespace, controlled by the App
//! (an owner reference with `controller: true`), whose `data` holds
//! `message`, `replicas` and the `banner` of the namespace's
//! `shared-settings` ConfigMap (see [`app::child_data`]); and it writes the
//! App's `status.observedGeneration` and a `Ready` condition through the
//! status subresource. A change to a child wakes its owner (`owner` key
//! mapping), a change to `shared-settings` wakes every App of its namespace
//! (`same-namespace`). The host holds the finalizer
//! `apps.example.com/cleanup` on every App; when an App is deleted
//! ([`Lifecycle::Deleting`]) this guest deletes its child explicitly and
//! releases the finalizer only once the child is gone. This file is the
//! glue (manifest, the views [`App`] and [`SharedSettings`] with their
//! paths, plan); the decision is [`app`].

pub mod app;

use wasmctrl_guest_sdk::{
    controller_ref, document, Condition, Entry, Environment, GroupVersionKind, Lifecycle, Manifest,
    Plan, ReconcileError, Request, Schema, Snapshot, View, Watch, WriteRule,
};

/// The guest's name (field manager `wasmctrl/app`).
pub const GUEST_NAME: &str = "app";
/// The finalizer the host keeps on every App until its child is deleted.
pub const FINALIZER: &str = "apps.example.com/cleanup";
/// The primary watch: the Apps.
pub const APP_WATCH: &str = "apps";
/// The children: ConfigMaps, related to the App that controls them.
pub const CHILD_WATCH: &str = "children";
/// The shared settings: ConfigMaps named [`SHARED_SETTINGS`], related to
/// every App of their namespace.
pub const SETTINGS_WATCH: &str = "settings";
/// The name of the ConfigMap whose `data.banner` every child copies.
pub const SHARED_SETTINGS: &str = "shared-settings";
/// The finalizers (`metadata.finalizers[*]`): projected so that
/// [`Lifecycle::Deleting`] releases ours only if it is there.
pub use wasmctrl_guest_sdk::lifecycle::FINALIZERS;

/// An App, as this guest reads it. The CRD requires both spec fields; a
/// missing one (an older schema, a CRD without validation) is left out of
/// the child rather than invented.
// ANCHOR: views
#[derive(View, Clone, Debug, Default, PartialEq, Eq)]
pub struct App<'a> {
    /// `spec.message`.
    #[field("spec.message")]
    pub message: Option<&'a str>,
    /// `spec.replicas`.
    #[field("spec.replicas")]
    pub replicas: Option<i64>,
    /// `status.conditions`, to keep `Ready`'s transition time.
    #[conditions("status.conditions")]
    pub conditions: Vec<Condition>,
}

/// A namespace's `shared-settings` ConfigMap.
#[derive(View)]
pub struct SharedSettings<'a> {
    /// `data.banner`.
    #[field("data.banner")]
    pub banner: Option<&'a str>,
}
// ANCHOR_END: views

/// The `App` type.
pub fn app_gvk() -> GroupVersionKind {
    GroupVersionKind::new("apps.example.com", "v1", "App")
}

/// The `ConfigMap` type (children and shared settings).
pub fn configmap_gvk() -> GroupVersionKind {
    GroupVersionKind::core("ConfigMap")
}

/// The manifest: Apps (per object, finalizer), the ConfigMaps they control,
/// and each namespace's `shared-settings`; writes: ConfigMaps, and App
/// status.
// ANCHOR: manifest
pub fn manifest() -> Manifest {
    let apps = Watch::new(APP_WATCH, app_gvk())
        .fields(App::FIELDS)
        .fields([FINALIZERS])
        .per_object()
        .finalizer(FINALIZER);
    // Nothing of a child is read: the host compares each planned child with
    // the live one and skips the write when they agree; identity (name,
    // uid) is in every snapshot anyway.
    let children = Watch::new(CHILD_WATCH, configmap_gvk()).owner(APP_WATCH);
    let settings = Watch::new(SETTINGS_WATCH, configmap_gvk())
        .field_selector(&format!("metadata.name={SHARED_SETTINGS}"))
        .fields(SharedSettings::FIELDS)
        .same_namespace(APP_WATCH);
    Manifest::new(GUEST_NAME)
        .watch(apps)
        .watch(children)
        .watch(settings)
        .write(WriteRule::new(configmap_gvk()))
        .write(WriteRule::new(app_gvk()).status(true))
}
// ANCHOR_END: manifest

/// The guest.
pub struct AppController;

/// The views a reconcile reads through, resolved.
pub struct Fields {
    apps: AppFields,
    children: wasmctrl_guest_sdk::snapshot::WatchId,
    settings: SharedSettingsFields,
}

// ANCHOR: guest
impl wasmctrl_guest_sdk::Guest for AppController {
    type Fields = Fields;

    fn describe(env: &Environment) -> Result<Manifest, String> {
        env.settings(&[])?;
        Ok(manifest())
    }

    // ANCHOR: fields
    fn fields(_: &Environment, schema: &Schema) -> Result<Fields, String> {
        Ok(Fields {
            apps: App::resolve(&schema.watch(APP_WATCH)?)?,
            children: schema.watch(CHILD_WATCH)?.id(),
            settings: SharedSettings::resolve(&schema.watch(SETTINGS_WATCH)?)?,
        })
    }
    // ANCHOR_END: fields

    fn reconcile(
        env: &Environment,
        request: &Request,
        snapshot: &Snapshot<'_>,
        f: &Fields,
    ) -> Result<Plan, ReconcileError> {
        // ANCHOR: reconcile
        let mut plan = Plan::new();
        let object = match snapshot.lifecycle(request) {
            // Deleted, or out of the watch's selectors: the snapshot no
            // longer holds the App but still holds the ConfigMaps it
            // controlled. Delete what is left (after a deletion its
            // finalizer already made us delete them: nothing).
            Lifecycle::Gone(_) | Lifecycle::Unselected(_) => {
                plan.delete_all(snapshot.objects(f.children));
                return Ok(plan);
            }
            Lifecycle::Deleting(app) => {
                // The snapshot holds only the ConfigMaps this App controls;
                // they go first and explicitly, then the finalizer.
                app.delete_then_release(snapshot.objects(f.children), &mut plan);
                return Ok(plan);
            }
            Lifecycle::Live(app) => app,
        };
        let app = f.apps.read(&object);
        let (namespace, name) = (object.namespace(), object.name());
        let banner = snapshot
            .get(f.settings.watch(), namespace, SHARED_SETTINGS)
            .and_then(|s| f.settings.read(&s).banner);
        // The child: same namespace and name, controlled by this App (the
        // owner reference names its uid), holding the data.
        let child = configmap_gvk().object(namespace, name);
        let data = app::child_data(&app, banner);
        plan.apply(&document(&child, Entry("data", &data)).owned_by(controller_ref(&object)));
        let exists = snapshot.get(f.children, namespace, name).is_some();
        let status = app::status(
            object.generation(),
            &format!("{namespace}/{name}"),
            exists,
            app.conditions,
            env.now_ms,
        );
        plan.status(&object.object_ref(), &status);
        Ok(plan)
        // ANCHOR_END: reconcile
    }
}

wasmctrl_guest_sdk::export_guest!(AppController);
// ANCHOR_END: guest

#[cfg(test)]
mod tests;
