//! Glue tests: snapshots laid out by the host's own layout code (the SDK's
//! `World`), through the same path as the component's exports, natively (no
//! wasm, no cluster).

use wasmctrl_guest_sdk::snapshot::{kind, SnapshotData};
use wasmctrl_guest_sdk::testing::{Obj, World};
use wasmctrl_guest_sdk::wit::{Plan, Write};
use wasmctrl_guest_sdk::{run, EventType, KeyMapping};

use super::*;
use wasmctrl_guest_sdk::pod_request::pod_resource_paths;

/// One container's GPU fields.
#[derive(Clone, Copy, Default)]
struct C {
    req: Option<&'static str>,
    lim: Option<&'static str>,
    always: bool,
}

fn req(q: &'static str) -> C {
    C {
        req: Some(q),
        ..C::default()
    }
}

/// Pods of the default manifest, built with the host's snapshot layout.
struct Fixture(World);

impl Default for Fixture {
    fn default() -> Self {
        let settings = Settings::from_env(&env(&[])).expect("default settings");
        Fixture(World::new(&manifest_for(&settings)))
    }
}

impl Fixture {
    fn pod(
        self,
        name: &str,
        node: Option<&str>,
        phase: &str,
        containers: &[C],
        init: &[C],
    ) -> Self {
        let paths = pod_resource_paths(DEFAULT_RESOURCE);
        let pod = Obj::new(POD_WATCH, "default", name)
            .set(&paths[0], node)
            .set(&paths[1], phase)
            .set_list(&paths[2], containers.iter().map(|c| c.req))
            .set_list(&paths[3], containers.iter().map(|c| c.lim))
            .set_list(&paths[4], init.iter().map(|c| c.always.then_some("Always")))
            .set_list(&paths[5], init.iter().map(|c| c.req))
            .set_list(&paths[6], init.iter().map(|c| c.lim));
        Fixture(self.0.with(pod))
    }

    fn snapshot(self) -> SnapshotData {
        self.0
            .snapshot()
            .expect("fixture names are in the manifest")
    }
}

fn env(config: &[(&str, &str)]) -> Environment {
    config
        .iter()
        .fold(Environment::test("wasmctrl"), |e, (k, v)| e.config(k, v))
}

fn reconcile_plan(env: &Environment, snapshot: &SnapshotData) -> Result<Plan, ReconcileError> {
    run::reconcile::<GpuSummary>(env, &Request::aggregate(AGGREGATE_KEY), snapshot.clone())
}

fn applied(plan: &Plan) -> &str {
    match plan.writes.as_slice() {
        [Write::Apply(doc)] => doc,
        other => panic!("expected one apply, got {other:?}"),
    }
}

#[test]
fn plan_applies_one_configmap_with_per_node_counts() {
    let snap = Fixture::default()
        .pod(
            "a",
            Some("node-1"),
            "Running",
            &[
                req("2"),
                C {
                    lim: Some("1"),
                    ..C::default()
                },
            ],
            &[],
        )
        .pod("b", Some("node-2"), "Pending", &[req("1")], &[])
        .pod(
            "c",
            Some("node-1"),
            "Running",
            &[req("1")],
            &[C {
                req: Some("1"),
                always: true,
                lim: None,
            }],
        )
        .pod("done", Some("node-3"), "Succeeded", &[req("8")], &[])
        .pod("unscheduled", None, "Pending", &[req("8")], &[])
        .pod("cpu-only", Some("node-4"), "Running", &[C::default()], &[])
        .snapshot();
    let plan = reconcile_plan(&env(&[]), &snap).unwrap();
    assert_eq!(
        applied(&plan),
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"gpu-summary","namespace":"wasmctrl"},"data":{"node-1":"5","node-2":"1"}}"#
    );
    assert!(plan.events.is_empty());
    assert_eq!(plan.writes.len(), 1, "no deletes");
    assert_eq!(plan.requeue_after_ms, None);
}

#[test]
fn pods_whose_node_name_is_not_a_configmap_key_are_skipped_not_written() {
    let huge = "n".repeat(1 << 20);
    let snap = Fixture::default()
        .pod("ok", Some("node-1"), "Running", &[req("1")], &[])
        .pod("escape", Some("../../etc"), "Running", &[req("2")], &[])
        .pod("nul", Some("node\0x"), "Running", &[req("2")], &[])
        .pod("huge", Some(&huge), "Running", &[req("2")], &[])
        .snapshot();
    let plan = reconcile_plan(&env(&[]), &snap).unwrap();
    assert!(
        applied(&plan).ends_with(r#""data":{"node-1":"1"}}"#),
        "{:.300}",
        applied(&plan)
    );
}

#[test]
fn empty_world_applies_an_empty_summary() {
    let plan = reconcile_plan(&env(&[]), &Fixture::default().snapshot()).unwrap();
    assert!(
        applied(&plan).ends_with(r#""data":{}}"#),
        "{}",
        applied(&plan)
    );
}

#[test]
fn configuration_moves_the_configmap_and_unknown_keys_are_rejected() {
    let plan = reconcile_plan(
        &env(&[("name", "gpus"), ("namespace", "ops")]),
        &Fixture::default().snapshot(),
    )
    .unwrap();
    assert!(applied(&plan).contains(r#""metadata":{"name":"gpus","namespace":"ops"}"#));
    match reconcile_plan(&env(&[("nmae", "x")]), &Fixture::default().snapshot()) {
        Err(ReconcileError::Terminal(msg)) => assert!(msg.contains("nmae"), "{msg}"),
        other => panic!("expected a terminal error, got {other:?}"),
    }
    assert!(Settings::from_env(&env(&[("name", "")]))
        .unwrap_err()
        .contains("name"));
    assert!(run::describe::<GpuSummary>(&env(&[("nmae", "x")]))
        .unwrap_err()
        .contains("nmae"));
}

#[test]
fn invalid_quantity_skips_the_pod_and_plans_a_warning_event() {
    let snap = Fixture::default()
        .pod("bad", Some("node-1"), "Running", &[req("two")], &[])
        .pod("good", Some("node-1"), "Running", &[req("1")], &[])
        .snapshot();
    let plan = reconcile_plan(&env(&[]), &snap).unwrap();
    assert!(
        applied(&plan).contains(r#""data":{"node-1":"1"}"#),
        "{}",
        applied(&plan)
    );
    assert_eq!(plan.events.len(), 1);
    let e = &plan.events[0];
    assert_eq!(e.event_type, EventType::Warning);
    assert_eq!(e.reason, "InvalidQuantity");
    assert_eq!(e.regarding.name, "bad");
    assert!(e.message.contains("\"two\""), "{}", e.message);
    assert!(e.message.contains("default/bad"), "{}", e.message);
    assert_eq!(
        e.related.as_ref().map(|r| r.kind.as_str()),
        Some("ConfigMap")
    );
}

#[test]
fn malformed_snapshot_is_a_terminal_error_not_a_panic() {
    let mut snap = Fixture::default()
        .pod("a", Some("n"), "Running", &[req("1")], &[])
        .snapshot();
    snap.string_ends.push(10_000);
    assert!(matches!(
        reconcile_plan(&env(&[]), &snap),
        Err(ReconcileError::Terminal(_))
    ));
    let mut snap = Fixture::default()
        .pod("a", Some("n"), "Running", &[req("1")], &[])
        .snapshot();
    snap.object_name.pop();
    assert!(matches!(
        reconcile_plan(&env(&[]), &snap),
        Err(ReconcileError::Terminal(_))
    ));
    // Out-of-range slots and values read as absent.
    let mut snap = Fixture::default()
        .pod("a", Some("n"), "Running", &[req("1")], &[])
        .snapshot();
    snap.object_first_slot[0] = 9_999;
    let plan = reconcile_plan(&env(&[]), &snap).unwrap();
    assert!(applied(&plan).ends_with(r#""data":{}}"#));
}

#[test]
fn numbers_and_booleans_read_as_text() {
    let mut snap = Fixture::default()
        .pod("a", Some("n1"), "Running", &[req("1")], &[])
        .snapshot();
    // The container's request (slot 2, value 2) as an unquoted number.
    snap.value_kinds[2] = kind::INT;
    snap.value_data[2] = 3;
    let plan = reconcile_plan(&env(&[]), &snap).unwrap();
    assert!(
        applied(&plan).contains(r#""data":{"n1":"3"}"#),
        "{}",
        applied(&plan)
    );
}

#[test]
fn manifest_watches_pods_and_allows_only_the_summary() {
    let settings = Settings::from_env(&env(&[("resource", "amd.com/gpu")])).unwrap();
    let m = manifest_for(&settings);
    assert_eq!(m.name, "gpu-summary");
    assert_eq!(m.watches.len(), 1);
    let w = &m.watches[0];
    assert_eq!(w.name, POD_WATCH);
    assert_eq!(w.gvk.kind, "Pod");
    assert_eq!(w.keys, KeyMapping::Aggregate(AGGREGATE_KEY.into()));
    assert!(w.fields.iter().any(|f| f.contains("['amd.com/gpu']")));
    assert_eq!(m.writes.len(), 1);
    assert_eq!(m.writes[0].namespace.as_deref(), Some("wasmctrl"));
    assert_eq!(m.writes[0].names, vec!["gpu-summary".to_string()]);
    assert!(!m.writes[0].status);
    assert_eq!(
        run::describe::<GpuSummary>(&env(&[])),
        Ok(manifest_for(&Settings::from_env(&env(&[])).unwrap()))
    );
}

#[test]
fn a_configured_resource_is_the_one_projected_read_and_counted() {
    let env = env(&[("resource", "amd.com/gpu")]);
    let m = manifest_for(&Settings::from_env(&env).unwrap());
    let amd = pod_resource_paths("amd.com/gpu");
    assert_eq!(m.watches[0].fields, amd);
    let snap = World::new(&m)
        .with(
            Obj::new(POD_WATCH, "default", "a")
                .set(&amd[0], "n1")
                .set(&amd[1], "Running")
                .set_list(&amd[2], ["3"]),
        )
        .snapshot()
        .expect("declared names");
    let plan = reconcile_plan(&env, &snap).unwrap();
    assert!(applied(&plan).contains(r#""data":{"n1":"3"}"#), "{plan:?}");
}
