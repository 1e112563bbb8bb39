//! The wasmctrl guest SDK: everything a Rust controller guest needs besides
//! its own logic, for contract `wasmctrl:controller@0.3.0`.
//!
//! - [`Guest`] and [`export_guest!`]: implement `describe`/`reconcile` with
//!   SDK types; the macro wires them to the component's exports (the
//!   bindings are generated once, here, in [`bindings`]).
//! - [`Schema`], [`Snapshot`], [`Object`]: snapshot access by watch and
//!   field *name*, resolved once against the guest's own manifest into
//!   [`Field`] handles. A name the manifest does not project is an error
//!   when the guest is described, never a silently absent value.
//! - [`View`] and `#[derive(View)]` ([`view`]): a struct's typed fields
//!   declared once with their paths — the projection list, the handles
//!   and a typed read per object.
//! - [`kinds`]: typed views of common built-in kinds (Namespace,
//!   ConfigMap, Secret, Pod, Service, Deployment, ResourceQuota,
//!   LimitRange, Role, RoleBinding) and their types.
//! - [`Plan`]: apply, update, status, finalizers, delete, events; whole
//!   documents with [`document`], owner references with [`controller_ref`]
//!   and [`owner_ref`], read back with [`Object::controller_owner`]
//!   ([`owner`]).
//! - [`Lifecycle`]: a primary `Live`, `Deleting` (clean up, then release
//!   the host-managed finalizer), `Gone` (deleted) or `Unselected` (left
//!   the watch's selectors), as the request's `presence` says
//!   ([`lifecycle`]).
//! - [`config::Config`]: the operator's configuration, unknown keys rejected.
//! - [`condition`]: `set_condition` keeping `lastTransitionTime`,
//!   `owned_conditions` for a guest that owns one condition type; [`time`]:
//!   `env.now-ms` as RFC 3339.
//! - [`log!`], [`info!`], [`warn!`], ...: logging that works natively too;
//!   a panic hook that logs the panic's message.
//! - [`quantity`] and [`pod_request`]: Kubernetes quantities and a pod's
//!   effective request, as apimachinery and kube-scheduler compute them.
//! - [`testing`]: build snapshots natively with the host's own layout code,
//!   apply the manifest's key mappings as the host does
//!   ([`testing::relations`]), and run a guest exactly as its component
//!   export would.
//!
//! The SDK never does I/O and never panics on snapshot contents: bad indices
//! read as absent, and every failure is a value.
//!
//! A whole guest, tested natively (`examples/guest-gpu-quota` is a larger
//! one):
//!
//! ```
//! use wasmctrl_guest_sdk::testing::{Obj, World};
//! use wasmctrl_guest_sdk::{wit, *};
//!
//! /// Copies each ConfigMap's `data.color` into a ConfigMap `<name>-color`.
//! struct Painter;
//!
//! impl Guest for Painter {
//!     type Fields = Field;
//!
//!     fn describe(env: &Environment) -> Result<Manifest, String> {
//!         env.settings(&[])?;
//!         let maps = Watch::new("maps", GroupVersionKind::core("ConfigMap"))
//!             .fields(["data.color"])
//!             .per_object();
//!         Ok(Manifest::new("painter")
//!             .watch(maps)
//!             .write(WriteRule::new(GroupVersionKind::core("ConfigMap"))))
//!     }
//!
//!     fn fields(_: &Environment, schema: &Schema) -> Result<Field, String> {
//!         Ok(schema.watch("maps")?.field("data.color")?)
//!     }
//!
//!     fn reconcile(
//!         _: &Environment,
//!         request: &Request,
//!         snapshot: &Snapshot<'_>,
//!         color: &Field,
//!     ) -> Result<Plan, ReconcileError> {
//!         let mut plan = Plan::new();
//!         if let Some(map) = snapshot.primary(request).filter(|m| !m.is_deleting()) {
//!             let copy = GroupVersionKind::core("ConfigMap")
//!                 .object(map.namespace(), &format!("{}-color", map.name()));
//!             let data = json!({"color": map.text(*color).unwrap_or("none")});
//!             plan.apply(&document(&copy, Entry("data", data)));
//!         }
//!         Ok(plan)
//!     }
//! }
//!
//! export_guest!(Painter);
//!
//! let manifest = run::describe::<Painter>(&Environment::test("ops"))?;
//! let data = World::new(&manifest)
//!     .with(Obj::new("maps", "ops", "m").set("data.color", "red"))
//!     .snapshot()?;
//! let plan = run::reconcile::<Painter>(
//!     &Environment::test("ops"),
//!     &Request::object("maps", "ops/m"),
//!     data,
//! )
//! .map_err(|e| format!("{e:?}"))?;
//! assert_eq!(
//!     plan.writes,
//!     [wit::Write::Apply(
//!         r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"m-color","namespace":"ops"},"data":{"color":"red"}}"#.into()
//!     )]
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod condition;
pub mod config;
#[cfg(feature = "derive")]
pub mod kinds;
pub mod lifecycle;
pub mod log;
pub mod manifest;
pub mod owner;
pub mod plan;
pub mod pod_request;
pub mod quantity;
pub mod run;
pub mod snapshot;
pub mod testing;
pub mod time;
pub mod view;

// The derive's generated code names `::wasmctrl_guest_sdk`, also here.
extern crate self as wasmctrl_guest_sdk;

/// The bindings of the `controller` world, generated once for every guest.
#[allow(missing_docs, unsafe_code, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "controller",
        path: "wit/controller.wit",
        pub_export_macro: true,
        default_bindings_module: "wasmctrl_guest_sdk::bindings",
        additional_derives: [PartialEq],
    });
}

/// The contract's records, as the component boundary carries them.
pub use bindings::wasmctrl::controller::types as wit;

pub use condition::{
    is_condition_true, owned_conditions, set_condition, Condition, ConditionFields,
};
pub use lifecycle::{Deleting, Lifecycle};
pub use log::Level;
pub use owner::{controller_ref, owner_ref, OwnerReference, OWNER_REFERENCES};
pub use plan::{document, Entry, Plan};
pub use run::Guest;
pub use snapshot::{Field, Object, Schema, SchemaError, Snapshot, WatchSchema};
pub use view::View;
/// `#[derive(View)]`: see [`View`] and the crate `wasmctrl-guest-sdk-derive`.
#[cfg(feature = "derive")]
pub use wasmctrl_guest_sdk_derive::View;
pub use wit::{
    Environment, Event, EventType, GroupVersionKind, IndexLink, IndexSpec, KeyMapping, Manifest,
    ObjectRef, Presence, ReconcileError, Request, Watch, WriteRule,
};

/// serde_json, for `json!` documents and for tests that parse a plan.
pub use serde_json::{self, json};

/// Exports a [`Guest`] implementation as the component's `reconciler`:
/// `wasmctrl_guest_sdk::export_guest!(MyGuest);` at the crate root of a
/// `cdylib`. Only the `wasm32` build exports anything (the export names are
/// not valid native symbols), so the same crate also builds as a native
/// `rlib` for unit tests.
#[macro_export]
macro_rules! export_guest {
    ($guest:ty) => {
        // A const block, not a module: `$guest` stays in scope.
        #[cfg(target_arch = "wasm32")]
        #[allow(unsafe_code, missing_docs)]
        const _: () = {
            use $crate::bindings::exports::wasmctrl::controller::reconciler as r;

            struct Export;

            impl r::Guest for Export {
                fn describe(
                    env: $crate::Environment,
                ) -> ::std::result::Result<$crate::Manifest, ::std::string::String> {
                    $crate::run::describe::<$guest>(&env)
                }

                fn reconcile(
                    env: $crate::Environment,
                    request: $crate::Request,
                    snapshot: $crate::wit::Snapshot,
                ) -> ::std::result::Result<$crate::wit::Plan, $crate::ReconcileError> {
                    $crate::run::reconcile::<$guest>(
                        &env,
                        &request,
                        $crate::snapshot::from_wit(snapshot),
                    )
                }
            }

    $crate::bindings::export!(Export with_types_in $crate::bindings);
        };
    };
}
