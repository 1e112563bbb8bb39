//! Glue tests: snapshots laid out exactly as the host lays them out, through
//! `reconcile_plan`, natively (no wasm, no cluster).

use super::*;

/// Builds a snapshot the way the host does: one string blob, per-object
/// columns, each pod with the eight projected slots of `pod_fields`.
#[derive(Default)]
struct Fixture {
    strings: Vec<String>,
    object_ns: Vec<u32>,
    object_name: Vec<u32>,
    first_slot: Vec<u32>,
    slot_ends: Vec<u32>,
    kinds: Vec<u8>,
    data: Vec<u64>,
}

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

impl Fixture {
    fn s(&mut self, s: &str) -> u32 {
        if self.strings.is_empty() {
            self.strings.push(String::new());
        }
        if let Some(i) = self.strings.iter().position(|x| x == s) {
            return i as u32;
        }
        self.strings.push(s.to_string());
        (self.strings.len() - 1) as u32
    }

    fn field(&mut self, vals: Vec<Option<&str>>) {
        for v in vals {
            match v {
                Some(s) => {
                    let id = self.s(s);
                    self.kinds.push(snapshot::kind::STR);
                    self.data.push(u64::from(id));
                }
                None => {
                    self.kinds.push(snapshot::kind::ABSENT);
                    self.data.push(0);
                }
            }
        }
        self.slot_ends.push(self.kinds.len() as u32);
    }

    fn pod(
        mut self,
        name: &str,
        node: Option<&str>,
        phase: &str,
        containers: &[C],
        init: &[C],
    ) -> Self {
        let (ns, name) = (self.s("default"), self.s(name));
        self.object_ns.push(ns);
        self.object_name.push(name);
        self.first_slot.push(self.slot_ends.len() as u32);
        self.field(vec![node]);
        self.field(vec![Some(phase)]);
        self.field(containers.iter().map(|c| c.req).collect());
        self.field(containers.iter().map(|c| c.lim).collect());
        self.field(init.iter().map(|c| c.always.then_some("Always")).collect());
        self.field(init.iter().map(|c| c.req).collect());
        self.field(init.iter().map(|c| c.lim).collect());
        self.field(vec![None]);
        self
    }

    fn snapshot(mut self) -> Snapshot {
        self.s("");
        let mut strings = String::new();
        let mut ends = Vec::new();
        for s in &self.strings {
            strings.push_str(s);
            ends.push(strings.len() as u32);
        }
        Snapshot {
            strings,
            string_ends: ends,
            object_watch: vec![0; self.object_ns.len()],
            object_uid: vec![0; self.object_ns.len()],
            object_generation: vec![0; self.object_ns.len()],
            object_deletion_timestamp: vec![0; self.object_ns.len()],
            object_namespace: self.object_ns,
            object_name: self.object_name,
            object_first_slot: self.first_slot,
            slot_ends: self.slot_ends,
            value_kinds: self.kinds,
            value_data: self.data,
            indexes: Vec::new(),
        }
    }
}

fn env(config: &[(&str, &str)]) -> Environment {
    Environment {
        namespace: "wasmctrl".into(),
        config: config
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        now_ms: 0,
    }
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
    assert_eq!(plan.requeue_after_ms, None);
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
    snap.value_kinds[2] = snapshot::kind::INT;
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
    assert_eq!(w.gvk.kind, "Pod");
    assert_eq!(w.keys, KeyMapping::Aggregate(AGGREGATE_KEY.into()));
    assert!(w.fields.iter().any(|f| f.contains("['amd.com/gpu']")));
    assert_eq!(m.writes.len(), 1);
    assert_eq!(m.writes[0].namespace.as_deref(), Some("wasmctrl"));
    assert_eq!(m.writes[0].names, vec!["gpu-summary".to_string()]);
}
