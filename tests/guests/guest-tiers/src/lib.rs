//! A test guest: a namespace provisioner in the aggregate shape (one key,
//! `all`, over every Namespace and every child), the shape a user fell
//! back to before a label-selected primary could clean up. Every Namespace
//! labelled `tier` gets three children, each controlled by it: a
//! ResourceQuota `tier-quota`, a LimitRange `tier-limits` and a RoleBinding
//! `tier-view` (ClusterRole `view` for the group `tier-NAMESPACE`); a child
//! whose Namespace lost the label (or is gone) is deleted. The host's
//! integration tests (`host/tests/flapping_label.rs`) flip the label and
//! count wars, writes and children.
//!
//! Watches (all mapped to the aggregate key `all`): `namespaces` (every
//! Namespace, reading `metadata.labels.tier`), and the children by kind,
//! selected by the label `tiers.wasmctrl.dev/child`.

use wasmctrl_guest_sdk::snapshot::{Field, WatchId};
use wasmctrl_guest_sdk::{
    controller_ref, document, json, Environment, GroupVersionKind, Manifest, Plan, ReconcileError,
    Request, Schema, Snapshot, Watch, WriteRule,
};

/// The aggregate key every watch maps to.
pub const KEY: &str = "all";
/// The label that asks for children (any value).
pub const TIER: &str = "tier";
/// The label every child carries (the children's watches select it).
pub const CHILD_LABEL: &str = "tiers.wasmctrl.dev/child";
/// The ResourceQuota's name.
pub const QUOTA: &str = "tier-quota";
/// The LimitRange's name.
pub const LIMITS: &str = "tier-limits";
/// The RoleBinding's name.
pub const BINDING: &str = "tier-view";

const TIER_FIELD: &str = "metadata.labels.tier";

fn quota() -> GroupVersionKind {
    GroupVersionKind::core("ResourceQuota")
}

fn limits() -> GroupVersionKind {
    GroupVersionKind::core("LimitRange")
}

fn binding() -> GroupVersionKind {
    GroupVersionKind::new("rbac.authorization.k8s.io", "v1", "RoleBinding")
}

/// The manifest.
pub fn manifest() -> Manifest {
    let child = |name: &str, gvk: GroupVersionKind| {
        Watch::new(name, gvk)
            .label_selector(CHILD_LABEL)
            .aggregate(KEY)
    };
    Manifest::new("tiers")
        .watch(
            Watch::new("namespaces", GroupVersionKind::core("Namespace"))
                .fields([TIER_FIELD])
                .aggregate(KEY),
        )
        .watch(child("quotas", quota()))
        .watch(child("limits", limits()))
        .watch(child("bindings", binding()))
        .write(WriteRule::new(quota()))
        .write(WriteRule::new(limits()))
        .write(WriteRule::new(binding()))
}

/// The guest.
pub struct Tiers;

/// Watch handles.
pub struct Fields {
    namespaces: WatchId,
    tier: Field,
    children: [WatchId; 3],
}

impl wasmctrl_guest_sdk::Guest for Tiers {
    type Fields = Fields;

    fn describe(_: &Environment) -> Result<Manifest, String> {
        Ok(manifest())
    }

    fn fields(_: &Environment, schema: &Schema) -> Result<Fields, String> {
        let namespaces = schema.watch("namespaces")?;
        Ok(Fields {
            namespaces: namespaces.id(),
            tier: namespaces.field(TIER_FIELD)?,
            children: [
                schema.watch("quotas")?.id(),
                schema.watch("limits")?.id(),
                schema.watch("bindings")?.id(),
            ],
        })
    }

    fn reconcile(
        _: &Environment,
        _: &Request,
        snapshot: &Snapshot<'_>,
        f: &Fields,
    ) -> Result<Plan, ReconcileError> {
        let mut plan = Plan::new();
        let mut tiered = std::collections::BTreeSet::new();
        for ns in snapshot.objects(f.namespaces) {
            let Some(tier) = ns.text(f.tier) else {
                continue;
            };
            if ns.is_deleting() {
                continue;
            }
            tiered.insert(ns.name());
            let children = [
                (
                    quota().object(ns.name(), QUOTA),
                    json!({"spec": {"hard": {"pods": "10"}}}),
                ),
                (
                    limits().object(ns.name(), LIMITS),
                    json!({"spec": {"limits": [{"type": "Container", "default": {"cpu": "500m"}}]}}),
                ),
                (
                    binding().object(ns.name(), BINDING),
                    json!({
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                            "name": format!("tier-{}", ns.name())}],
                    }),
                ),
            ];
            for (target, body) in &children {
                plan.apply(
                    &document(target, body)
                        .label(CHILD_LABEL, "true")
                        .label(TIER, tier)
                        .owned_by(controller_ref(&ns)),
                );
            }
        }
        for watch in f.children {
            for child in snapshot.objects(watch) {
                if !tiered.contains(child.namespace()) && !child.is_deleting() {
                    plan.delete(child.object_ref());
                }
            }
        }
        Ok(plan)
    }
}

wasmctrl_guest_sdk::export_guest!(Tiers);
