//! The `cleanup` shape: label-selected primaries of a built-in kind (a
//! Namespace, or a namespaced kind such as ServiceAccount) each
//! controlling one Endpoints object, and a shared input (every ConfigMap
//! of one namespace, mapped `all` to the primaries). A live primary gets
//! its child (`<name>-child`, in the namespace it is or is in, labelled
//! `made-by=related`); a `Deleting` one deletes its children, then
//! releases the finalizer; a `Gone` or `Unselected` one deletes the
//! children its clean-up snapshot still holds. Each reconcile that is not
//! a no-op reports, in the ConfigMap `seen-<key>` (a `/` in the key as
//! `.`) of the host's namespace: `presence`, `children` (the children its
//! snapshot held, `namespace/name`, sorted) and `shared` (the shared
//! ConfigMaps it held).
//!
//! Configuration: `primary-kind` (a core kind, default `Namespace`),
//! `selector` (the primaries' label selector, default `tier=gold`),
//! `finalizer` (the host-managed finalizer; none when absent),
//! `shared-namespace` (default `platform`).

use wasmctrl_guest_sdk::lifecycle::FINALIZERS;
use wasmctrl_guest_sdk::snapshot::WatchId;
use wasmctrl_guest_sdk::{
    controller_ref, document, Entry, Environment, GroupVersionKind, Lifecycle, Manifest, Plan,
    Request, Snapshot, Watch, WriteRule,
};

/// The primary watch.
pub const PRIMARIES: &str = "primaries";
/// The Endpoints objects the primaries control.
pub const CHILDREN: &str = "children";
/// The children's kind: one no example uses, without required fields.
pub const CHILD_KIND: &str = "Endpoints";
/// The shared ConfigMaps.
pub const SHARED: &str = "shared";
/// The label on every child this shape writes (the children watch's
/// selector).
pub const MADE_BY: (&str, &str) = ("made-by", "related");

/// The configuration keys of this shape.
pub const KEYS: &[&str] = &[
    "shape",
    "primary-kind",
    "selector",
    "finalizer",
    "shared-namespace",
];

/// The manifest of the `cleanup` shape under `env`'s configuration.
pub fn manifest(env: &Environment) -> Result<Manifest, String> {
    let config = env.settings(KEYS)?;
    let kind = config.get_or("primary-kind", "Namespace");
    let mut primaries = Watch::new(PRIMARIES, GroupVersionKind::core(&kind))
        .label_selector(&config.get_or("selector", "tier=gold"))
        .fields([FINALIZERS])
        .per_object();
    if let Some(finalizer) = config.get("finalizer") {
        primaries = primaries.finalizer(finalizer);
    }
    let children = Watch::new(CHILDREN, GroupVersionKind::core(CHILD_KIND))
        .label_selector(&format!("{}={}", MADE_BY.0, MADE_BY.1))
        .owner(PRIMARIES);
    let shared = Watch::new(SHARED, GroupVersionKind::core("ConfigMap"))
        .namespace(&config.get_or("shared-namespace", "platform"))
        .all(PRIMARIES);
    Ok(Manifest::new("related")
        .watch(primaries)
        .watch(children)
        .watch(shared)
        .write(WriteRule::new(GroupVersionKind::core(CHILD_KIND)))
        .write(WriteRule::new(GroupVersionKind::core("ConfigMap")).namespace(&env.namespace)))
}

/// Watch handles.
pub struct Fields {
    children: WatchId,
    shared: WatchId,
    /// Whether the primaries are Namespaces (their child lives in them).
    namespaces: bool,
    report_namespace: String,
}

impl Fields {
    /// The handles of [`manifest`]'s watches.
    pub fn resolve(env: &Environment, schema: &wasmctrl_guest_sdk::Schema) -> Result<Self, String> {
        let kind = env.settings(KEYS)?.get_or("primary-kind", "Namespace");
        Ok(Fields {
            children: schema.watch(CHILDREN)?.id(),
            shared: schema.watch(SHARED)?.id(),
            namespaces: kind == "Namespace",
            report_namespace: env.namespace.clone(),
        })
    }
}

/// The objects of `watch` in `snapshot`, `namespace/name`, sorted and
/// comma-joined.
fn listed(snapshot: &Snapshot<'_>, watch: WatchId) -> String {
    let mut keys: Vec<String> = snapshot
        .objects(watch)
        .map(|o| format!("{}/{}", o.namespace(), o.name()))
        .collect();
    keys.sort_unstable();
    keys.join(",")
}

/// One reconcile of the `cleanup` shape.
pub fn reconcile(request: &Request, snapshot: &Snapshot<'_>, f: &Fields) -> Plan {
    let mut plan = Plan::new();
    let held_children = snapshot.objects(f.children).next().is_some();
    let presence = match snapshot.lifecycle(request) {
        Lifecycle::Live(primary) => {
            let namespace = if f.namespaces {
                primary.name()
            } else {
                primary.namespace()
            };
            let child = GroupVersionKind::core(CHILD_KIND)
                .object(namespace, &format!("{}-child", primary.name()));
            plan.apply(
                &document(&child, std::collections::BTreeMap::<String, String>::new())
                    .label(MADE_BY.0, MADE_BY.1)
                    .owned_by(controller_ref(&primary)),
            );
            "present"
        }
        Lifecycle::Deleting(primary) => {
            primary.delete_then_release(snapshot.objects(f.children), &mut plan);
            "deleting"
        }
        Lifecycle::Gone(_) | Lifecycle::Unselected(_) if !held_children => return plan,
        Lifecycle::Gone(_) => {
            plan.delete_all(snapshot.objects(f.children));
            "gone"
        }
        Lifecycle::Unselected(_) => {
            plan.delete_all(snapshot.objects(f.children));
            "unselected"
        }
    };
    let report = GroupVersionKind::core("ConfigMap").object(
        &f.report_namespace,
        &format!("seen-{}", request.key.replace('/', ".")),
    );
    plan.apply(&document(
        &report,
        Entry(
            "data",
            [
                ("presence", presence.to_string()),
                ("children", listed(snapshot, f.children)),
                ("shared", listed(snapshot, f.shared)),
            ]
            .into_iter()
            .collect::<std::collections::BTreeMap<_, _>>(),
        ),
    ));
    plan
}
