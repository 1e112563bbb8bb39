//! The namespace provisioner natively: worlds of Namespaces, their children
//! and the overrides ConfigMap, related by the SDK's `World` with the
//! host's key mappings (which keys a change wakes, what each key's snapshot
//! holds, whether a key is live, unselected or gone), and the guest run
//! over them exactly as its component export runs.

use std::collections::BTreeMap;

use wasmctrl_guest_sdk::serde_json::{self, json, Value};
use wasmctrl_guest_sdk::testing::{Obj, Val, World};
use wasmctrl_guest_sdk::wit::{EventType, Plan, Write};
use wasmctrl_guest_sdk::{run, KeyMapping, Presence};

use super::tier::TIER_LABEL;
use super::*;

const TEAM_A: &str = "team-a";
const TEAM_B: &str = "team-b";
const TEAM_C: &str = "team-c";

/// The Namespace `name` labelled with `tier`.
fn tiered(name: &str, tier: &str) -> Obj {
    Obj::new(NAMESPACE_WATCH, "", name).label(TIER_LABEL, tier)
}

/// The three children a namespace's reconcile applies, as the server holds
/// them: in the namespace, controlled by it (`binding` names the
/// RoleBinding).
fn children_of(namespace: &Obj, name: &str, binding: &str) -> [Obj; 3] {
    let owned = |watch: &str, child: &str| {
        Obj::new(watch, name, child)
            .uid(&format!("uid-{name}-{watch}"))
            .controlled_by(&Namespace::gvk(), namespace)
    };
    [
        owned(QUOTA_WATCH, QUOTA_NAME),
        owned(LIMITS_WATCH, LIMITS_NAME),
        owned(BINDING_WATCH, binding),
    ]
}

/// The `tier-overrides` ConfigMap with `data.small` and `data.large`, when
/// given.
fn overrides(small: Option<&str>, large: Option<&str>) -> Obj {
    let data: BTreeMap<&str, &str> = [("small", small), ("large", large)]
        .into_iter()
        .filter_map(|(tier, text)| Some((tier, text?)))
        .collect();
    let data = serde_json::to_string(&data).expect("serialisable");
    Obj::new(OVERRIDES_WATCH, PLATFORM_NS, OVERRIDES).set("data", Val::Json(data))
}

fn world(objects: impl IntoIterator<Item = Obj>) -> World {
    World::new(&manifest()).with_all(objects)
}

// ANCHOR: run
/// The plan of `namespace`'s key in `world`: the request as the host would
/// send it (live, unselected or gone, by the world) over that key's
/// snapshot.
fn reconcile_in(world: &World, env: &Environment, namespace: &str) -> Plan {
    let request = world
        .request(NAMESPACE_WATCH, namespace)
        .expect("a declared watch");
    let data = world.snapshot_for(&request).expect("declared watches");
    run::reconcile::<NamespaceProvisioner>(env, &request, data).expect("reconcile succeeds")
}
// ANCHOR_END: run

fn reconcile(world: &World, namespace: &str) -> Plan {
    reconcile_in(world, &Environment::test("wasmctrl"), namespace)
}

/// The keys a change to `object` wakes in `world`.
fn woken(world: &World, object: &Obj) -> Vec<String> {
    let requests = world.wakes(object).expect("a declared watch");
    requests.into_iter().map(|r| r.key).collect()
}

/// `watch:key` of each object `namespace`'s snapshot holds in `world`.
fn held(world: &World, namespace: &str) -> Vec<String> {
    let request = world
        .request(NAMESPACE_WATCH, namespace)
        .expect("a declared watch");
    let objects = world.objects_for(&request).expect("declared watches");
    objects
        .iter()
        .map(|o| format!("{}:{}", o.watch(), o.key()))
        .collect()
}

/// The documents of a plan's applies.
fn applied(plan: &Plan) -> Vec<Value> {
    plan.writes
        .iter()
        .filter_map(|w| match w {
            Write::Apply(doc) => Some(serde_json::from_str(doc).expect("valid JSON")),
            _ => None,
        })
        .collect()
}

/// `kind namespace/name` of each of a plan's deletes.
fn deleted(plan: &Plan) -> Vec<String> {
    plan.writes
        .iter()
        .filter_map(|w| match w {
            Write::Delete(t) => Some(format!(
                "{} {}/{}",
                t.kind,
                t.namespace.as_deref().unwrap_or_default(),
                t.name
            )),
            _ => None,
        })
        .collect()
}

/// `spec.hard` of the applied quota.
fn quota_hard(plan: &Plan) -> Value {
    applied(plan)
        .into_iter()
        .find(|d| d["kind"] == "ResourceQuota")
        .map(|d| d["spec"]["hard"].clone())
        .expect("a quota applied")
}

/// A plan that writes nothing, records nothing and asks for no requeue.
fn assert_nothing(plan: &Plan) {
    assert!(
        plan.writes.is_empty() && plan.events.is_empty() && plan.requeue_after_ms.is_none(),
        "{plan:?}"
    );
}

fn owner(namespace: &str) -> Value {
    json!([{
        "apiVersion": "v1",
        "kind": "Namespace",
        "name": namespace,
        "uid": format!("uid--{namespace}"),
        "controller": true,
        "blockOwnerDeletion": true,
    }])
}

#[test]
fn a_tiered_namespace_gets_a_quota_a_limit_range_and_a_role_binding_it_controls() {
    let plan = reconcile(&world([tiered(TEAM_A, "small")]), TEAM_A);
    let meta =
        |name: &str| json!({"name": name, "namespace": TEAM_A, "ownerReferences": owner(TEAM_A)});
    assert_eq!(
        applied(&plan),
        [
            json!({
                "apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta(QUOTA_NAME),
                "spec": {"hard": {"pods": "10", "requests.cpu": "2", "requests.memory": "4Gi"}},
            }),
            json!({
                "apiVersion": "v1", "kind": "LimitRange", "metadata": meta(LIMITS_NAME),
                "spec": {"limits": [{
                    "type": "Container",
                    "default": {"cpu": "250m", "memory": "256Mi"},
                    "defaultRequest": {"cpu": "250m", "memory": "256Mi"},
                }]},
            }),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": meta("tier-edit"),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "team-a:members"}],
            }),
        ]
    );
    assert_eq!(plan.writes.len(), 3, "nothing else: {:?}", plan.writes);
    assert!(plan.events.is_empty() && plan.requeue_after_ms.is_none());
    let large = reconcile(&world([tiered(TEAM_B, "large")]), TEAM_B);
    assert_eq!(
        quota_hard(&large),
        json!({"pods": "100", "requests.cpu": "16", "requests.memory": "64Gi"})
    );
}

#[test]
fn an_unchanged_world_plans_exactly_the_children_it_already_has() {
    // What the host compares with the live children: the same documents
    // every time, and no delete of a child it keeps, so an idle
    // provisioner writes nothing.
    let ns = tiered(TEAM_A, "small");
    let w = world(children_of(&ns, TEAM_A, "tier-edit")).with(ns.clone());
    let first = reconcile(&w, TEAM_A);
    assert_eq!(first, reconcile(&w, TEAM_A));
    assert_eq!(
        first.writes,
        reconcile(&world([ns]), TEAM_A).writes,
        "the same documents with or without the children"
    );
    assert!(deleted(&first).is_empty(), "{:?}", first.writes);
}

#[test]
fn the_overrides_configmap_changes_its_own_tier_entry_by_entry() {
    let namespaces = [tiered(TEAM_A, "small"), tiered(TEAM_B, "large")];
    let w = world(namespaces.clone()).with(overrides(Some("cpu=4, pods=20"), None));
    assert_eq!(
        quota_hard(&reconcile(&w, TEAM_A)),
        json!({"pods": "20", "requests.cpu": "4", "requests.memory": "4Gi"})
    );
    assert_eq!(
        quota_hard(&reconcile(&w, TEAM_B)),
        json!({"pods": "100", "requests.cpu": "16", "requests.memory": "64Gi"}),
        "the large tier has no override"
    );
    // The guest's configuration sets the defaults an override overrides.
    let env = Environment::test("wasmctrl").config("small", "memory=8Gi,pods=5");
    assert_eq!(
        quota_hard(&reconcile_in(&w, &env, TEAM_A)),
        json!({"pods": "20", "requests.cpu": "4", "requests.memory": "8Gi"})
    );
    let without = world(namespaces);
    assert_eq!(
        quota_hard(&reconcile_in(&without, &env, TEAM_A)),
        json!({"pods": "5", "requests.cpu": "2", "requests.memory": "8Gi"})
    );
}

#[test]
fn an_unreadable_override_changes_no_child_and_warns_on_the_configmap() {
    let ns = tiered(TEAM_A, "small");
    let w = world(children_of(&ns, TEAM_A, "tier-edit"))
        .with(ns)
        .with(tiered(TEAM_B, "large"))
        .with(overrides(Some("cpu=4,memory=lots"), Some("pods=200")));
    let plan = reconcile(&w, TEAM_A);
    assert!(plan.writes.is_empty(), "{:?}", plan.writes);
    match plan.events.as_slice() {
        [e] => {
            assert_eq!(e.event_type, EventType::Warning);
            assert_eq!(e.reason, INVALID_OVERRIDE);
            assert_eq!(e.regarding, ConfigMap::gvk().object(PLATFORM_NS, OVERRIDES));
            assert!(
                e.message.contains("data.small") && e.message.contains("\"lots\""),
                "{}",
                e.message
            );
        }
        other => panic!("one Warning event, got {other:?}"),
    }
    // The other tier's override still applies.
    assert_eq!(quota_hard(&reconcile(&w, TEAM_B))["pods"], "200");
}

// ANCHOR: unselected
#[test]
fn a_namespace_whose_label_goes_deletes_the_three_children_it_controls() {
    let labelled = tiered(TEAM_A, "small");
    let children = children_of(&labelled, TEAM_A, "tier-edit");
    let other = tiered(TEAM_B, "small");
    // The label removed, or set to a tier this guest does not provision:
    // the Namespace no longer matches the watch's label selector.
    for now in [
        Obj::new(NAMESPACE_WATCH, "", TEAM_A),
        tiered(TEAM_A, "medium"),
    ] {
        let w = world(children.clone())
            .with(now)
            .with(other.clone())
            .with_all(children_of(&other, TEAM_B, "tier-edit"));
        let request = w.request(NAMESPACE_WATCH, TEAM_A).expect("declared");
        assert_eq!(request.presence, Some(Presence::Unselected));
        let plan = reconcile(&w, TEAM_A);
        assert_eq!(
            deleted(&plan),
            [
                "ResourceQuota team-a/tier-quota",
                "LimitRange team-a/tier-limits",
                "RoleBinding team-a/tier-edit",
            ]
        );
        assert_eq!(plan.writes.len(), 3, "only the deletes: {:?}", plan.writes);
    }
}
// ANCHOR_END: unselected

#[test]
fn an_unselected_namespace_with_no_child_left_plans_nothing() {
    let w = world([Obj::new(NAMESPACE_WATCH, "", TEAM_A)]);
    let request = w.request(NAMESPACE_WATCH, TEAM_A).expect("declared");
    assert_eq!(request.presence, Some(Presence::Unselected));
    assert_nothing(&reconcile(&w, TEAM_A));
}

#[test]
fn a_deleted_or_terminating_namespace_plans_nothing_its_children_go_with_it() {
    let ns = tiered(TEAM_A, "small");
    let children = children_of(&ns, TEAM_A, "tier-edit");
    // Gone: the snapshot still holds what it controlled, and the guest
    // leaves it to the namespace's deletion.
    let gone = world(children.clone()).gone(ns.clone());
    let request = gone.request(NAMESPACE_WATCH, TEAM_A).expect("declared");
    assert_eq!(request.presence, Some(Presence::Gone));
    assert_eq!(
        held(&gone, TEAM_A),
        [
            "quotas:team-a/tier-quota",
            "limits:team-a/tier-limits",
            "bindings:team-a/tier-edit",
        ]
    );
    assert_nothing(&reconcile(&gone, TEAM_A));
    let terminating = world(children).with(ns.deleting("2026-12-01T03:40:00Z"));
    assert_nothing(&reconcile(&terminating, TEAM_A));
}

#[test]
fn a_person_s_edit_of_a_child_wakes_its_namespace_whose_plan_states_the_child_again() {
    let ns = tiered(TEAM_A, "small");
    let [quota, ..] = children_of(&ns, TEAM_A, "tier-edit");
    let w = world(children_of(&ns, TEAM_A, "tier-edit")).with(ns.clone());
    assert_eq!(woken(&w, &quota), [TEAM_A]);
    // The children watches read nothing of a child: the edited quota is the
    // same object to the guest, whose plan states the tier's quota; the
    // host's compare with the live quota finds the edit and applies.
    assert_eq!(
        quota_hard(&reconcile(&w, TEAM_A)),
        json!({"pods": "10", "requests.cpu": "2", "requests.memory": "4Gi"})
    );
    // A quota nobody controls, or one another Namespace controls, is not
    // this key's.
    let loose = Obj::new(QUOTA_WATCH, TEAM_A, "mine");
    assert!(woken(&w, &loose).is_empty());
    let foreign = loose.controlled_by(&Namespace::gvk(), &tiered(TEAM_B, "large"));
    assert_eq!(woken(&w, &foreign), [TEAM_B]);
}

// ANCHOR: shared
#[test]
fn an_overrides_change_wakes_every_tiered_namespace_and_each_snapshot_holds_it() {
    let namespaces = [
        tiered(TEAM_A, "small"),
        tiered(TEAM_B, "large"),
        tiered(TEAM_C, "small"),
    ];
    let w = world(namespaces).with(overrides(Some("pods=20"), None));
    assert_eq!(
        woken(&w, &overrides(Some("pods=30"), None)),
        [TEAM_A, TEAM_B, TEAM_C]
    );
    assert_eq!(
        held(&w, TEAM_B),
        ["namespaces:team-b", "overrides:platform/tier-overrides"]
    );
}
// ANCHOR_END: shared

#[test]
fn a_new_role_binds_a_new_binding_and_deletes_the_old_one() {
    let ns = tiered(TEAM_A, "small");
    let w = world(children_of(&ns, TEAM_A, "tier-edit")).with(ns);
    let env = Environment::test("wasmctrl").config("role", "view");
    let plan = reconcile_in(&w, &env, TEAM_A);
    let binding = applied(&plan)
        .into_iter()
        .find(|d| d["kind"] == "RoleBinding")
        .expect("a binding applied");
    assert_eq!(binding["metadata"]["name"], "tier-view");
    assert_eq!(binding["roleRef"]["name"], "view");
    assert_eq!(deleted(&plan), ["RoleBinding team-a/tier-edit"]);
}

#[test]
fn manifest_selects_tiered_namespaces_and_relates_children_and_overrides() {
    let env = Environment::test("wasmctrl");
    let m = run::describe::<NamespaceProvisioner>(&env).expect("describes");
    assert_eq!(m, manifest());
    let [namespaces, quotas, limits, bindings, shared] = m.watches.as_slice() else {
        panic!("five watches: {:?}", m.watches);
    };
    assert_eq!(namespaces.keys, KeyMapping::PerObject);
    assert_eq!(
        namespaces.label_selector.as_deref(),
        Some("platform.example.com/tier in (small,large)")
    );
    assert_eq!(namespaces.fields, Namespace::FIELDS);
    assert_eq!(
        namespaces.finalizer, None,
        "a namespace's children go with it"
    );
    for (child, gvk) in [
        (quotas, ResourceQuota::gvk()),
        (limits, LimitRange::gvk()),
        (bindings, RoleBinding::gvk()),
    ] {
        assert_eq!(child.keys, KeyMapping::Owner(NAMESPACE_WATCH.into()));
        assert_eq!(child.gvk, gvk);
    }
    assert_eq!(shared.keys, KeyMapping::All(NAMESPACE_WATCH.into()));
    assert_eq!(shared.namespace.as_deref(), Some(PLATFORM_NS));
    assert_eq!(
        shared.field_selector.as_deref(),
        Some("metadata.name=tier-overrides")
    );
    assert_eq!(shared.fields, ConfigMap::FIELDS);
}

#[test]
fn a_bad_configuration_is_refused_at_describe_naming_the_key() {
    let env = Environment::test("wasmctrl");
    let describe = |env: Environment| run::describe::<NamespaceProvisioner>(&env).unwrap_err();
    let err = describe(env.clone().config("medium", "cpu=1"));
    assert!(err.contains("\"medium\"") && err.contains("role"), "{err}");
    let err = describe(env.clone().config("large", "cpu=many"));
    assert!(
        err.contains("\"large\"") && err.contains("\"many\""),
        "{err}"
    );
    let err = describe(env.config("role", ""));
    assert!(err.contains("\"role\" must not be empty"), "{err}");
}
