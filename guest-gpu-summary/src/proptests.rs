//! Property: for any set of pods, the aggregate path (every pod mapped on
//! its own, contributions summed per node, rendered, diagnostics appended in
//! pod order — `wasmctrl_guest_aggregate::whole`, the fold the host keeps
//! incrementally) gives exactly the plan `reconcile` computes over the
//! whole snapshot. Natively, through the same entry points as the exports.

use proptest::prelude::*;
use wasmctrl_guest_sdk::run;
use wasmctrl_guest_sdk::testing::{Obj, World};

use super::*;
use wasmctrl_guest_sdk::pod_request::pod_resource_paths;

/// Quantities a pod field may hold: valid, zero, fractional, huge, junk,
/// negative.
const QUANTITIES: &[&str] = &[
    "0",
    "1",
    "2",
    "500m",
    "1500m",
    "1Ki",
    "9223372036854775807",
    "junk",
    "-1",
    "",
];

fn quantity() -> impl Strategy<Value = Option<&'static str>> {
    prop_oneof![
        3 => Just(None),
        4 => proptest::sample::select(QUANTITIES).prop_map(Some),
    ]
}

/// (request, limit, restartPolicy Always).
type Container = (Option<&'static str>, Option<&'static str>, bool);

fn container() -> impl Strategy<Value = Container> {
    (quantity(), quantity(), any::<bool>())
}

/// One pod: name, node, phase, containers, init containers, overhead.
#[derive(Clone, Debug)]
struct Pod {
    name: String,
    node: Option<&'static str>,
    phase: Option<&'static str>,
    containers: Vec<Container>,
    init: Vec<Container>,
    overhead: Option<&'static str>,
}

fn pod() -> impl Strategy<Value = Pod> {
    (
        0..40u32,
        proptest::option::of(proptest::sample::select(&["n1", "n2", "n3"][..])),
        proptest::option::of(proptest::sample::select(
            &["Running", "Pending", "Succeeded", "Failed"][..],
        )),
        proptest::collection::vec(container(), 0..3),
        proptest::collection::vec(container(), 0..3),
        quantity(),
    )
        .prop_map(|(n, node, phase, containers, init, overhead)| Pod {
            name: format!("p{n}"),
            node,
            phase,
            containers,
            init,
            overhead,
        })
}

fn world(pods: &[Pod]) -> World {
    let settings = Settings::from_env(&Environment::test("wasmctrl")).expect("defaults");
    let paths = pod_resource_paths(DEFAULT_RESOURCE);
    let mut world = World::new(&manifest_for(&settings));
    let mut seen = std::collections::BTreeSet::new();
    for p in pods.iter().filter(|p| seen.insert(p.name.clone())) {
        let obj = Obj::new(POD_WATCH, "default", &p.name)
            .set(&paths[0], p.node)
            .set(&paths[1], p.phase)
            .set_list(&paths[2], p.containers.iter().map(|c| c.0))
            .set_list(&paths[3], p.containers.iter().map(|c| c.1))
            .set_list(&paths[4], p.init.iter().map(|c| c.2.then_some("Always")))
            .set_list(&paths[5], p.init.iter().map(|c| c.0))
            .set_list(&paths[6], p.init.iter().map(|c| c.1))
            .set(&paths[7], p.overhead);
        world = world.with(obj);
    }
    world
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_aggregate_fold_equals_the_whole_snapshot_reconcile(
        pods in proptest::collection::vec(pod(), 0..30)
    ) {
        let env = Environment::test("wasmctrl");
        let data = world(&pods).snapshot().expect("declared fields");
        let whole = run::reconcile::<GpuSummary>(&env, &Request::aggregate(AGGREGATE_KEY), data.clone());
        let incremental = wasmctrl_guest_aggregate::whole::<GpuSummary>(&env, data);
        prop_assert_eq!(whole, incremental);
    }

    /// `render` is entry-wise over `data`, as `entry_field` promises the
    /// host: composed from one render per group it is the same plan.
    #[test]
    fn render_is_entry_wise_over_data(
        groups in proptest::collection::btree_map("[a-z0-9.-]{1,12}", -3i64..40, 0..20)
    ) {
        let env = Environment::test("wasmctrl");
        let groups: Vec<wasmctrl_guest_aggregate::Group> = groups
            .into_iter()
            .map(|(key, value)| wasmctrl_guest_aggregate::Group { key, value, count: 1, members: Vec::new() })
            .collect();
        prop_assert_eq!(wasmctrl_guest_aggregate::entry_wise_mismatch::<GpuSummary>(&env, &groups), None);
    }
}

#[test]
fn map_gives_each_counted_pod_its_node_and_each_invalid_pod_a_warning() {
    let env = Environment::test("wasmctrl");
    let pods = [
        Pod {
            name: "a".into(),
            node: Some("n1"),
            phase: Some("Running"),
            containers: vec![(Some("2"), None, false)],
            init: vec![],
            overhead: None,
        },
        Pod {
            name: "b".into(),
            node: Some("n2"),
            phase: Some("Running"),
            containers: vec![(Some("junk"), None, false)],
            init: vec![],
            overhead: None,
        },
    ];
    let data = world(&pods).snapshot().expect("declared fields");
    let mapped = wasmctrl_guest_aggregate::map::<GpuSummary>(&env, data).expect("maps");
    let contributions: Vec<(u32, &str, i64)> = mapped
        .contributions
        .iter()
        .map(|c| (c.object, c.group.as_str(), c.value))
        .collect();
    assert_eq!(contributions, [(0, "n1", 2)]);
    assert_eq!(mapped.diagnostics.len(), 1);
    assert_eq!(mapped.diagnostics[0].object, 1);
    assert_eq!(mapped.diagnostics[0].event.reason, "InvalidQuantity");
    let spec = wasmctrl_guest_aggregate::aggregate::<GpuSummary>(&env).expect("spec");
    assert_eq!(spec.key, AGGREGATE_KEY);
}
