//! The GpuQuota guest end to end, natively: snapshots built by the SDK's
//! `World` (the host's layout code), run through the same path as the
//! component's exports, plans checked as the host would receive them.

use wasmctrl_guest_sdk::condition::condition_paths;
use wasmctrl_guest_sdk::pod_request::pod_resource_paths;
use wasmctrl_guest_sdk::serde_json::{self, Value};
use wasmctrl_guest_sdk::testing::{Obj, World};
use wasmctrl_guest_sdk::wit::{Plan, Write};
use wasmctrl_guest_sdk::{run, EventType, KeyMapping};

use super::*;

const NS: &str = "team-a";
/// 2026-12-01T03:44:00Z.
const NOW: u64 = 1_796_096_640_000;
const EARLIER: &str = "2026-11-30T00:00:00Z";

/// The quota `team-a/gpus` with `limit`, holding our finalizer.
fn quota(limit: i64) -> Obj {
    Obj::new(QUOTA_WATCH, NS, "gpus")
        .set("spec.limit", limit)
        .set_list(FINALIZERS, [FINALIZER])
}

/// With a `Ready` condition already in status.
fn with_ready(quota: Obj, status: &str, reason: &str, since: &str, generation: i64) -> Obj {
    let [t, s, g, l, r, m] = condition_paths("status.conditions");
    quota
        .set_list(&t, ["Ready"])
        .set_list(&s, [status])
        .set_list(&g, [generation])
        .set_list(&l, [since])
        .set_list(&r, [reason])
        .set_list(&m, ["earlier"])
}

/// A pod requesting `gpus` in `namespace`, on `node` (None: unscheduled).
fn pod(namespace: &str, name: &str, node: Option<&str>, phase: &str, gpus: &str) -> Obj {
    let paths = pod_resource_paths(GPU_RESOURCE);
    Obj::new(POD_WATCH, namespace, name)
        .set(&paths[0], node)
        .set(&paths[1], phase)
        .set_list(&paths[2], [gpus])
        .set_list(&paths[3], [None::<&str>])
}

fn running(name: &str, gpus: &str) -> Obj {
    pod(NS, name, Some("node-1"), "Running", gpus)
}

fn reconcile(objects: Vec<Obj>) -> Plan {
    let data = World::new(&manifest())
        .with_all(objects)
        .snapshot()
        .expect("fixture names are in the manifest");
    let env = Environment::test("wasmctrl").now_ms(NOW);
    run::reconcile::<GpuQuota>(&env, &Request::object(QUOTA_WATCH, "team-a/gpus"), data)
        .expect("reconcile succeeds")
}

/// The status the plan applies (exactly one write, to /status).
fn status(plan: &Plan) -> Value {
    match plan.writes.as_slice() {
        [Write::ApplyStatus(doc)] => {
            let doc: Value = serde_json::from_str(doc).expect("valid JSON");
            assert_eq!(doc["apiVersion"], "example.com/v1");
            assert_eq!(doc["kind"], "GpuQuota");
            assert_eq!(doc["metadata"]["namespace"], NS);
            assert_eq!(doc["metadata"]["name"], "gpus");
            doc["status"].clone()
        }
        other => panic!("expected one status write, got {other:?}"),
    }
}

fn ready(status: &Value) -> &Value {
    let conditions = status["conditions"].as_array().expect("conditions");
    assert_eq!(conditions.len(), 1, "only our condition: {status}");
    assert_eq!(conditions[0]["type"], "Ready");
    &conditions[0]
}

#[test]
fn status_and_ready_follow_usage_against_the_limit() {
    // (what, limit, pods' GPU requests, used, over the limit)
    let cases: &[(&str, i64, &[&str], i64, bool)] = &[
        ("no pods", 2, &[], 0, false),
        ("under", 4, &["1", "2"], 3, false),
        ("at the limit", 3, &["1", "2"], 3, false),
        ("over", 2, &["1", "2"], 3, true),
        ("zero limit", 0, &["1"], 1, true),
        // Each pod's total rounds up, as the scheduler accounts it.
        ("fractions round up per pod", 1, &["500m", "0.5"], 2, true),
    ];
    for &(what, limit, gpus, used, over_limit) in cases {
        let (ready_status, reason) = if over_limit {
            ("False", "OverLimit")
        } else {
            ("True", "WithinLimit")
        };
        let mut objects = vec![quota(limit)];
        objects.extend(
            gpus.iter()
                .enumerate()
                .map(|(i, g)| running(&format!("p{i}"), g)),
        );
        let plan = reconcile(objects);
        let s = status(&plan);
        assert_eq!(s["used"], used, "{what}");
        assert_eq!(s["observedGeneration"], 1, "{what}");
        let c = ready(&s);
        assert_eq!(c["status"], ready_status, "{what}");
        assert_eq!(c["reason"], reason, "{what}");
        assert_eq!(c["lastTransitionTime"], "2026-12-01T03:44:00Z", "{what}");
        let over: Vec<_> = plan
            .events
            .iter()
            .filter(|e| e.reason == "OverLimit")
            .collect();
        assert_eq!(over.len(), usize::from(over_limit), "{what}");
        if let Some(e) = over.first() {
            assert_eq!(
                (e.event_type, e.action.as_str()),
                (EventType::Warning, "Reconcile")
            );
            assert_eq!(e.regarding.name, "gpus");
            assert!(
                e.message.contains(&format!("requests {used} GPUs")),
                "{}",
                e.message
            );
        }
    }
}

#[test]
fn a_generation_bump_is_observed_in_status_and_condition() {
    let q = with_ready(quota(4).generation(7), "True", "WithinLimit", EARLIER, 6);
    let s = status(&reconcile(vec![q, running("p", "1")]));
    assert_eq!(s["observedGeneration"], 7);
    assert_eq!(ready(&s)["observedGeneration"], 7);
}

#[test]
fn condition_time_is_kept_unless_the_status_changes() {
    let cases = [
        ("still ready", "True", "WithinLimit", 4, EARLIER),
        ("still over", "False", "OverLimit", 0, EARLIER),
        (
            "becomes over",
            "True",
            "WithinLimit",
            0,
            "2026-12-01T03:44:00Z",
        ),
        (
            "becomes ready",
            "False",
            "OverLimit",
            4,
            "2026-12-01T03:44:00Z",
        ),
    ];
    for (what, was, reason, limit, want_time) in cases {
        let q = with_ready(quota(limit), was, reason, EARLIER, 1);
        let s = status(&reconcile(vec![q, running("p", "2")]));
        assert_eq!(ready(&s)["lastTransitionTime"], want_time, "{what}");
    }
}

#[test]
fn an_unchanged_world_plans_the_same_status_it_already_has() {
    // What the host compares against: the same document every time, so an
    // idle controller writes nothing.
    let q = with_ready(quota(4), "True", "WithinLimit", EARLIER, 1);
    let first = reconcile(vec![q.clone(), running("p", "1")]);
    let again = reconcile(vec![q, running("p", "1")]);
    assert_eq!(first.writes, again.writes);
    assert_eq!(ready(&status(&first))["lastTransitionTime"], EARLIER);
}

#[test]
fn deletion_removes_the_finalizer_and_writes_nothing_else() {
    let deleting = quota(0).deleting("2026-12-01T03:40:00Z");
    let plan = reconcile(vec![deleting.clone(), running("p", "8")]);
    match plan.writes.as_slice() {
        [Write::RemoveFinalizer(f)] => {
            assert_eq!(f.finalizer, FINALIZER);
            assert_eq!(f.target, quota_gvk().object(NS, "gpus"));
        }
        other => panic!("expected only the finalizer's removal, got {other:?}"),
    }
    assert!(plan.events.is_empty());
    // Someone else's finalizer only: nothing to remove.
    let plan = reconcile(vec![deleting.set_list(FINALIZERS, ["other.io/x"])]);
    assert!(plan.writes.is_empty(), "{:?}", plan.writes);
}

#[test]
fn a_gone_quota_plans_nothing() {
    let plan = reconcile(vec![running("p", "1")]);
    assert!(plan.writes.is_empty() && plan.events.is_empty());
}

#[test]
fn terminal_unscheduled_and_other_namespace_pods_are_ignored() {
    let plan = reconcile(vec![
        quota(1),
        running("counted", "1"),
        pod(NS, "done", Some("node-1"), "Succeeded", "4"),
        pod(NS, "failed", Some("node-1"), "Failed", "4"),
        pod(NS, "pending", None, "Pending", "4"),
        pod("team-b", "elsewhere", Some("node-1"), "Running", "4"),
    ]);
    let s = status(&plan);
    assert_eq!(s["used"], 1);
    assert_eq!(ready(&s)["status"], "True");
}

#[test]
fn an_invalid_quantity_is_not_counted_and_is_reported() {
    let plan = reconcile(vec![quota(4), running("good", "1"), running("bad", "two")]);
    assert_eq!(status(&plan)["used"], 1);
    let e = plan
        .events
        .iter()
        .find(|e| e.reason == "InvalidQuantity")
        .expect("an InvalidQuantity event");
    assert_eq!(
        (e.regarding.kind.as_str(), e.regarding.name.as_str()),
        ("Pod", "bad")
    );
    assert_eq!(e.related, Some(quota_gvk().object(NS, "gpus")));
}

#[test]
fn the_pod_view_reads_the_resource_the_quota_counts() {
    assert_eq!(Pod::FIELDS, pod_resource_paths(GPU_RESOURCE));
}

#[test]
fn manifest_relates_pods_to_the_quotas_of_their_namespace() {
    let env = Environment::test("wasmctrl");
    let m = run::describe::<GpuQuota>(&env).expect("describes");
    assert_eq!(m, manifest());
    let (quotas, pods) = (&m.watches[0], &m.watches[1]);
    assert_eq!(quotas.keys, KeyMapping::PerObject);
    assert_eq!(quotas.finalizer.as_deref(), Some(FINALIZER));
    assert_eq!(pods.keys, KeyMapping::SameNamespace(QUOTA_WATCH.into()));
    assert_eq!(m.writes.len(), 1);
    assert!(m.writes[0].status);
    assert_eq!(m.writes[0].gvk, quota_gvk());
    let err = run::describe::<GpuQuota>(&env.config("limit", "3")).unwrap_err();
    assert!(err.contains("\"limit\""), "{err}");
}

#[test]
fn crd_yaml_declares_what_the_manifest_reads_and_writes() {
    let crd: serde_yaml::Value =
        serde_yaml::from_str(include_str!("../crd.yaml")).expect("crd.yaml parses");
    let gvk = quota_gvk();
    assert_eq!(
        crd["metadata"]["name"].as_str(),
        Some("gpuquotas.example.com")
    );
    assert_eq!(crd["spec"]["group"].as_str(), Some(gvk.group.as_str()));
    assert_eq!(
        crd["spec"]["names"]["kind"].as_str(),
        Some(gvk.kind.as_str())
    );
    assert_eq!(crd["spec"]["scope"].as_str(), Some("Namespaced"));
    let version = &crd["spec"]["versions"][0];
    assert_eq!(version["name"].as_str(), Some(gvk.version.as_str()));
    assert!(
        version["subresources"]["status"].is_mapping(),
        "status subresource"
    );
    let columns: Vec<_> = version["additionalPrinterColumns"]
        .as_sequence()
        .expect("printer columns")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert!(
        columns.starts_with(&["Limit", "Used", "Ready"]),
        "{columns:?}"
    );
    let props = &version["schema"]["openAPIV3Schema"]["properties"];
    assert_eq!(
        props["spec"]["properties"]["limit"]["type"].as_str(),
        Some("integer")
    );
    assert_eq!(
        props["spec"]["properties"]["limit"]["minimum"].as_i64(),
        Some(0)
    );
    let status = &props["status"]["properties"];
    for field in ["used", "observedGeneration"] {
        assert_eq!(status[field]["type"].as_str(), Some("integer"), "{field}");
    }
    let conditions = &status["conditions"];
    assert_eq!(conditions["x-kubernetes-list-type"].as_str(), Some("map"));
    assert_eq!(
        conditions["x-kubernetes-list-map-keys"][0].as_str(),
        Some("type")
    );
    // Every condition field the guest reads and writes is in the schema.
    let item = &conditions["items"]["properties"];
    for path in condition_paths("status.conditions") {
        let field = path.rsplit('.').next().unwrap_or_default();
        assert!(item[field].is_mapping(), "{path}");
    }
}
