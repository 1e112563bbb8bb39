//! The incremental path against the whole-snapshot path, with the real
//! GPU-summary component (`make guest` builds it): random sequences of pod
//! adds, modifications, deletions, selector exits and relists, after each
//! of which the plan the incremental state renders must be exactly the
//! plan `reconcile` computes over the whole cache; and a fresh state
//! (what a hot swap or a configuration change starts from) must agree too.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use proptest::prelude::*;
use serde_json::{json, Value as Json};

use super::*;
use crate::guest::{GuestRuntime, ObjectKey, Request, RuntimeConfig};
use crate::projection::Interner;
use crate::relations::snapshot_for;
use crate::request::RequestKey;
use crate::store::Writer;

fn guest_path(file: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = target.join("wasm32-wasip2/guest").join(file);
    assert!(
        path.exists(),
        "{} is missing: build it first with `make guest`",
        path.display()
    );
    path
}

/// The GPU guest, its manifest and environment, loaded once per process.
struct Gpu {
    module: GuestModule,
    manifest: GuestManifest,
    env: Environment,
}

fn gpu() -> &'static Gpu {
    static GPU: std::sync::OnceLock<Gpu> = std::sync::OnceLock::new();
    GPU.get_or_init(|| {
        let rt = GuestRuntime::new(RuntimeConfig::default().cache_dir(None)).unwrap();
        let module = rt.load_file(&guest_path("guest_gpu_summary.wasm")).unwrap();
        let env = crate::guest::environment("ops", &Default::default());
        let manifest = module.manifest(&env).unwrap();
        Gpu {
            module,
            manifest,
            env,
        }
    })
}

/// One watch's cache as the controller holds it, and its writer.
struct World {
    writer: Writer,
    caches: Vec<WatchCache>,
    interner: Interner,
}

impl World {
    fn new(manifest: &GuestManifest) -> Self {
        let writer = Writer::default();
        let caches = vec![WatchCache {
            store: writer.store(),
            positions: (0..manifest.watches[0].projection.paths().len()).collect(),
            namespaced: true,
        }];
        World {
            writer,
            caches,
            interner: Interner::default(),
        }
    }

    fn project(&mut self, pod: &Json) -> crate::projection::ProjectedObject {
        gpu().manifest.watches[0]
            .projection
            .project(pod, &mut self.interner)
    }
}

/// The whole-snapshot plan of the aggregate key.
fn whole(world: &World) -> ValidatedPlan {
    let g = gpu();
    let key = RequestKey::aggregate("gpu-summary");
    let snap = snapshot_for(&g.manifest, &world.caches, &key);
    let request = Request {
        key: "gpu-summary".into(),
        watch: None,
        presence: None,
    };
    g.module
        .reconcile(&g.manifest, &g.env, &request, snap)
        .0
        .unwrap()
}

fn incremental(aggregate: &Aggregate, world: &World) -> ValidatedPlan {
    incremental_seen(aggregate, world, &mut None)
}

/// The incremental plan with an entry-wise apply turned into the apply of
/// its whole document (what `render` over every group returns). `seen`
/// holds the entries of the previous plan: an entry-wise plan's changes
/// must be exactly what turns them into this plan's.
fn incremental_seen(
    aggregate: &Aggregate,
    world: &World,
    seen: &mut Option<BTreeMap<String, String>>,
) -> ValidatedPlan {
    let g = gpu();
    let (plan, _) = aggregate.reconcile(&g.module, &g.manifest, &world.caches, &g.env);
    let mut plan = plan.unwrap();
    for w in &mut plan.writes {
        if let PlannedWrite::ApplyEntries { target, entries } = w {
            let mut next = match seen.take() {
                Some(prev) if !entries.complete => prev,
                _ => (*entries.all).clone(),
            };
            for (k, v) in &entries.changed {
                match v {
                    Some(v) => next.insert(k.clone(), v.clone()),
                    None => next.remove(k),
                };
            }
            assert_eq!(&next, &*entries.all, "the changes of {:?}", entries.changed);
            *seen = Some(next);
            *w = PlannedWrite::Apply {
                target: target.clone(),
                doc: entries.doc(),
            };
        }
    }
    plan
}

/// A state that has seen every cached object once (a handler's replay),
/// rendering entry by entry as the guest declares.
fn fresh(world: &World) -> Aggregate {
    fresh_as(world, true)
}

/// Like [`fresh`]; `entrywise: false` renders every group each time, as
/// for a guest that declares no entry field.
fn fresh_as(world: &World, entrywise: bool) -> Aggregate {
    let g = gpu();
    let spec = g
        .module
        .aggregate_spec(&g.manifest, &g.env)
        .unwrap()
        .unwrap();
    let field = if entrywise {
        g.module.entry_field(&g.manifest, &g.env).unwrap()
    } else {
        None
    };
    let aggregate = Aggregate::new(spec, &g.manifest, field);
    for obj in world.caches[0].store.list() {
        aggregate.record(0, &Change::added(obj));
    }
    aggregate
}

const QUANTITIES: &[&str] = &["0", "1", "2", "500m", "1500m", "3Ki", "junk", "-1", ""];

#[derive(Clone, Debug)]
struct Pod {
    name: u8,
    node: Option<&'static str>,
    phase: &'static str,
    requests: Vec<Option<&'static str>>,
    limits: Vec<Option<&'static str>>,
    init: Vec<(Option<&'static str>, bool)>,
    overhead: Option<&'static str>,
    numeric: bool,
}

impl Pod {
    fn json(&self) -> Json {
        let q = |v: &str| -> Json {
            match v.parse::<i64>() {
                Ok(n) if self.numeric => json!(n),
                _ => json!(v),
            }
        };
        let res = |r: Option<&str>, l: Option<&str>| {
            let mut out = json!({});
            if let Some(r) = r {
                out["requests"] = json!({"nvidia.com/gpu": q(r)});
            }
            if let Some(l) = l {
                out["limits"] = json!({"nvidia.com/gpu": q(l)});
            }
            out
        };
        let containers: Vec<Json> = self
            .requests
            .iter()
            .zip(self.limits.iter().chain(std::iter::repeat(&None)))
            .map(|(r, l)| json!({"name": "c", "resources": res(*r, *l)}))
            .collect();
        let init: Vec<Json> = self
            .init
            .iter()
            .map(|(r, always)| {
                let mut c = json!({"name": "i", "resources": res(*r, None)});
                if *always {
                    c["restartPolicy"] = json!("Always");
                }
                c
            })
            .collect();
        let mut spec = json!({"containers": containers, "initContainers": init});
        if let Some(node) = self.node {
            spec["nodeName"] = json!(node);
        }
        if let Some(o) = self.overhead {
            spec["overhead"] = json!({"nvidia.com/gpu": q(o)});
        }
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("p{}", self.name), "namespace": "ml",
                         "uid": format!("uid-{}", self.name)},
            "spec": spec,
            "status": {"phase": self.phase},
        })
    }

    /// What the watch's field selector
    /// (`spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed`)
    /// lets through: the API server sends a deletion when a pod stops
    /// matching.
    fn selected(&self) -> bool {
        self.node.is_some() && !matches!(self.phase, "Succeeded" | "Failed")
    }
}

fn pod() -> impl Strategy<Value = Pod> {
    let q = || proptest::option::of(proptest::sample::select(QUANTITIES));
    (
        0..12u8,
        proptest::option::weighted(0.9, proptest::sample::select(&["n1", "n2", "n3"][..])),
        proptest::sample::select(&["Running", "Pending", "Succeeded", "Failed"][..]),
        proptest::collection::vec(q(), 0..3),
        proptest::collection::vec(q(), 0..3),
        proptest::collection::vec((q(), any::<bool>()), 0..2),
        q(),
        any::<bool>(),
    )
        .prop_map(
            |(name, node, phase, requests, limits, init, overhead, numeric)| Pod {
                name,
                node,
                phase,
                requests,
                limits,
                init,
                overhead,
                numeric,
            },
        )
}

#[derive(Clone, Debug)]
enum Op {
    /// Added or modified (deleted when it leaves the selector).
    Put(Pod),
    /// Deleted.
    Delete(u8),
    /// The watch expired (410 Gone): a relist that sees only these pods.
    Relist(Vec<Pod>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => pod().prop_map(Op::Put),
        2 => (0..12u8).prop_map(Op::Delete),
        1 => proptest::collection::vec(pod(), 0..8).prop_map(Op::Relist),
    ]
}

/// Applies `op` to the store, recording every change it reports.
fn apply(world: &mut World, aggregate: &Aggregate, op: &Op) {
    let mut changes = Vec::new();
    match op {
        Op::Put(p) if p.selected() => {
            let obj = world.project(&p.json());
            changes.extend(world.writer.apply(obj));
        }
        Op::Put(p) => changes.extend(world.writer.delete("ml", &format!("p{}", p.name))),
        Op::Delete(n) => changes.extend(world.writer.delete("ml", &format!("p{n}"))),
        Op::Relist(pods) => {
            world.writer.start_relist();
            for p in pods.iter().filter(|p| p.selected()) {
                let obj = world.project(&p.json());
                changes.extend(world.writer.apply(obj));
            }
            changes.extend(world.writer.finish_relist());
        }
    }
    for c in &changes {
        aggregate.record(0, c);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn incremental_plans_equal_whole_snapshot_plans_after_every_event(
        ops in proptest::collection::vec(op(), 1..14),
        every in 1..4usize,
    ) {
        let g = gpu();
        for entrywise in [true, false] {
            let mut world = World::new(&g.manifest);
            let aggregate = fresh_as(&world, entrywise);
            let mut seen = None;
            for (i, op) in ops.iter().enumerate() {
                apply(&mut world, &aggregate, op);
                // Several changes may wait for one reconcile (a busy queue).
                if i % every == 0 || i + 1 == ops.len() {
                    prop_assert_eq!(incremental_seen(&aggregate, &world, &mut seen), whole(&world), "after {:?}", op);
                    prop_assert_eq!(aggregate.pending(), 0);
                }
            }
            // A resync with nothing changed, and a new guest instance (hot
            // swap, configuration change) starting from the cache.
            let expected = whole(&world);
            prop_assert_eq!(incremental_seen(&aggregate, &world, &mut seen), expected.clone());
            prop_assert_eq!(incremental(&fresh_as(&world, entrywise), &world), expected);
        }
    }
}

#[test]
fn a_deleted_pod_costs_no_guest_map_call_and_a_changed_one_maps_alone() {
    let g = gpu();
    let mut world = World::new(&g.manifest);
    let aggregate = fresh(&world);
    let pods: Vec<Pod> = (0..5)
        .map(|n| Pod {
            name: n,
            node: Some("n1"),
            phase: "Running",
            requests: vec![Some("1")],
            limits: vec![],
            init: vec![],
            overhead: None,
            numeric: false,
        })
        .collect();
    for p in &pods {
        apply(&mut world, &aggregate, &Op::Put(p.clone()));
    }
    let (_, stats) = aggregate.reconcile(&g.module, &g.manifest, &world.caches, &g.env);
    assert_eq!((stats.changed, stats.mapped, stats.groups), (5, 5, 1));
    apply(&mut world, &aggregate, &Op::Delete(3));
    let (plan, stats) = aggregate.reconcile(&g.module, &g.manifest, &world.caches, &g.env);
    assert_eq!((stats.changed, stats.mapped, stats.removed), (1, 0, 1));
    let mut plan = plan.unwrap();
    if let PlannedWrite::ApplyEntries { target, entries } = &plan.writes[0] {
        plan.writes[0] = PlannedWrite::Apply {
            target: target.clone(),
            doc: entries.doc(),
        };
    }
    assert_eq!(plan, whole(&world));
    let moved = Pod {
        node: Some("n2"),
        ..pods[0].clone()
    };
    apply(&mut world, &aggregate, &Op::Put(moved));
    let (plan, stats) = aggregate.reconcile(&g.module, &g.manifest, &world.caches, &g.env);
    assert_eq!((stats.changed, stats.mapped, stats.groups), (1, 1, 2));
    let plan = plan.unwrap();
    let PlannedWrite::ApplyEntries { entries, .. } = &plan.writes[0] else {
        panic!("expected an entry-wise apply: {:?}", plan.writes);
    };
    // Only the two groups the pod left and joined were rendered.
    assert_eq!(
        entries.changed,
        [
            ("n1".into(), Some("3".into())),
            ("n2".into(), Some("1".into()))
        ]
    );
    assert_eq!(entries.doc()["data"], json!({"n1": "3", "n2": "1"}));
    assert!(!entries.complete);
    assert_eq!(aggregate.sizes(), (4, 2));
}

/// The same ops applied to `world` (a cache keeping projections, the
/// reference) and to `ids` (a cache keeping identities, as an
/// aggregate-only watch's), recording `ids`' changes only.
fn apply_both(world: &mut World, ids: &mut Writer, aggregate: &Aggregate, op: &Op) {
    let mut changes = Vec::new();
    let put = |world: &mut World, ids: &mut Writer, p: &Pod, changes: &mut Vec<Change>| {
        let obj = world.project(&p.json());
        world.writer.apply(obj.clone());
        changes.extend(ids.apply(obj));
    };
    let name = |n: u8| format!("p{n}");
    match op {
        Op::Put(p) if p.selected() => put(world, ids, p, &mut changes),
        Op::Put(Pod { name: n, .. }) | Op::Delete(n) => {
            world.writer.delete("ml", &name(*n));
            changes.extend(ids.delete("ml", &name(*n)));
        }
        Op::Relist(pods) => {
            world.writer.start_relist();
            ids.start_relist();
            for p in pods.iter().filter(|p| p.selected()) {
                put(world, ids, p, &mut changes);
            }
            world.writer.finish_relist();
            changes.extend(ids.finish_relist());
        }
    }
    for c in &changes {
        aggregate.record(0, c);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Issue 46: a watch read only by the aggregate keeps identities; after
    /// any interleaving of adds, modifications, deletions, selector exits
    /// and relists the incremental plan is the whole-snapshot plan of a
    /// cache keeping projections, the identity cache holds no projection,
    /// and once its projections are restored (a shadow or second reader
    /// came: the informer relists) it equals that cache.
    #[test]
    fn an_aggregate_over_identities_equals_a_recompute_after_every_event(
        ops in proptest::collection::vec(op(), 1..14),
        every in 1..4usize,
    ) {
        let g = gpu();
        let mut world = World::new(&g.manifest);
        let mut ids = Writer::with_retention(&[], crate::store::Retention::Identity);
        let id_caches = vec![WatchCache { store: ids.store(), ..world.caches[0].clone() }];
        let aggregate = fresh(&world);
        let mut seen = None;
        for (i, op) in ops.iter().enumerate() {
            apply_both(&mut world, &mut ids, &aggregate, op);
            let store = &id_caches[0].store;
            prop_assert_eq!(store.len(), world.caches[0].store.len());
            prop_assert_eq!(store.identities(), store.len(), "no projection held");
            if i % every == 0 || i + 1 == ops.len() {
                let (plan, _) = aggregate.reconcile(&g.module, &g.manifest, &id_caches, &g.env);
                let mut plan = plan.unwrap();
                let whole_plan = whole(&world);
                // The entry-wise apply as a whole document (see `incremental_seen`).
                for w in &mut plan.writes {
                    if let PlannedWrite::ApplyEntries { target, entries } = w {
                        let mut next = match seen.take() {
                            Some(prev) if !entries.complete => prev,
                            _ => (*entries.all).clone(),
                        };
                        for (k, v) in &entries.changed {
                            match v {
                                Some(v) => next.insert(k.clone(), v.clone()),
                                None => next.remove(k),
                            };
                        }
                        prop_assert_eq!(&next, &*entries.all);
                        seen = Some(next);
                        *w = PlannedWrite::Apply { target: target.clone(), doc: entries.doc() };
                    }
                }
                prop_assert_eq!(plan, whole_plan, "after {:?}", op);
                prop_assert_eq!(aggregate.pending(), 0);
            }
        }
        // Restored: every identity comes back as an update with its fields.
        prop_assert!(ids.store().restore_projections());
        ids.start_relist();
        let mut updates = 0;
        for obj in world.caches[0].store.list() {
            let change = ids.apply((*obj).clone());
            updates += usize::from(change.is_some_and(|c| c.kind == ChangeKind::Updated));
        }
        prop_assert!(ids.finish_relist().is_empty());
        prop_assert_eq!(updates, world.caches[0].store.len());
        prop_assert!(ids.store().holds_projections());
        prop_assert_eq!(ids.store().list(), world.caches[0].store.list());
    }
}

#[test]
fn an_aggregate_only_watch_keeps_identities_and_any_other_reader_projections() {
    let g = gpu();
    let world = World::new(&g.manifest);
    let aggregate = fresh(&world);
    use crate::store::Retention;
    assert_eq!(aggregate.retention_for(&g.manifest, 0), Retention::Identity);
    // A second watch reconciled per object: its snapshots may read the
    // first watch's cache.
    let mut other = g.manifest.clone();
    let mut second = other.watches[0].clone();
    second.keys = KeyMapping::PerObject;
    other.watches.push(second);
    assert_eq!(aggregate.retention_for(&other, 0), Retention::Projections);
    assert_eq!(aggregate.retention_for(&other, 1), Retention::Projections);
}

#[test]
fn mapping_ahead_maps_whole_batches_and_the_reconcile_the_rest() {
    let g = gpu();
    let mut world = World::new(&g.manifest);
    let aggregate = fresh(&world);
    let mut ids = Writer::with_retention(&[], crate::store::Retention::Identity);
    let id_caches = vec![WatchCache {
        store: ids.store(),
        ..world.caches[0].clone()
    }];
    let pods = MAP_BATCH + MAP_BATCH / 2;
    for i in 0..pods {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("p{i}"), "namespace": "ml", "uid": format!("u{i}")},
            "spec": {"nodeName": format!("n{}", i % 7), "containers": [
                {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]},
            "status": {"phase": "Running"},
        });
        let obj = world.project(&pod);
        world.writer.apply(obj.clone());
        if let Some(c) = ids.apply(obj) {
            aggregate.record(0, &c);
        }
    }
    let stats = aggregate
        .map_ahead(&g.module, &g.manifest, &id_caches, &g.env, usize::MAX)
        .unwrap();
    assert_eq!(stats.mapped, MAP_BATCH, "one whole batch; no render");
    assert_eq!(aggregate.pending(), pods - MAP_BATCH);
    assert_eq!(aggregate.sizes().0, MAP_BATCH);
    let (plan, stats) = aggregate.reconcile(&g.module, &g.manifest, &id_caches, &g.env);
    assert_eq!(stats.mapped, pods - MAP_BATCH);
    let mut plan = plan.unwrap();
    for w in &mut plan.writes {
        if let PlannedWrite::ApplyEntries { target, entries } = w {
            *w = PlannedWrite::Apply {
                target: target.clone(),
                doc: entries.doc(),
            };
        }
    }
    assert_eq!(plan, whole(&world));
}

#[test]
fn a_failed_map_keeps_the_changes_for_the_next_reconcile() {
    let g = gpu();
    let mut world = World::new(&g.manifest);
    let aggregate = fresh(&world);
    let p = Pod {
        name: 1,
        node: Some("n1"),
        phase: "Running",
        requests: vec![Some("2")],
        limits: vec![],
        init: vec![],
        overhead: None,
        numeric: true,
    };
    apply(&mut world, &aggregate, &Op::Put(p));
    // A guest without the aggregator export: map-objects cannot run.
    let rt = GuestRuntime::new(RuntimeConfig::default().cache_dir(None)).unwrap();
    let plain = rt.load_file(&guest_path("guest_gpu_quota.wasm")).unwrap();
    assert!(!plain.is_aggregate());
    let (err, _) = aggregate.reconcile(&plain, &g.manifest, &world.caches, &g.env);
    assert_eq!(err.unwrap_err().reason(), "malformed_aggregate");
    assert_eq!(aggregate.pending(), 1);
    assert_eq!(incremental(&aggregate, &world), whole(&world));
    assert_eq!(aggregate.sizes(), (1, 1));
}

#[test]
fn the_gpu_guest_exports_the_aggregator_and_a_key_it_does_not_map_is_refused() {
    let g = gpu();
    assert!(g.module.is_aggregate());
    let spec = g
        .module
        .aggregate_spec(&g.manifest, &g.env)
        .unwrap()
        .unwrap();
    assert_eq!(spec.key, "gpu-summary");
    let mut other = g.manifest.clone();
    other.watches[0].keys = KeyMapping::Aggregate("elsewhere".into());
    let err = g.module.aggregate_spec(&other, &g.env).unwrap_err();
    assert!(err.to_string().contains("\"gpu-summary\""), "{err}");
}

#[test]
fn a_render_that_breaks_the_entry_wise_promise_is_refused_and_nothing_is_taken() {
    use crate::guest::aggregate::Group;
    let mut e = Entries {
        field: "data".into(),
        all: Arc::default(),
        bytes: 0,
        handed_out: false,
    };
    let target = ObjectKey {
        gvk: crate::guest::Gvk {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
        },
        namespace: Some("ops".into()),
        name: "s".into(),
    };
    let frame = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s"}});
    let plan = |data: Json| {
        let mut doc = frame.clone();
        doc["data"] = data;
        ValidatedPlan {
            writes: vec![PlannedWrite::Apply {
                target: target.clone(),
                doc,
            }],
            events: vec![],
            requeue_after: None,
        }
    };
    let touched: BTreeSet<Arc<str>> = ["n1", "n2"].into_iter().map(Arc::from).collect();
    // n2 was emptied: only n1 is given to render.
    let given = [Group {
        key: "n1".into(),
        value: 1,
        count: 1,
        members: vec![],
    }];
    let refused = |e: &mut Entries, p: ValidatedPlan| match e.take(p, &touched, &given, 1 << 20) {
        Err(GuestErrorKind::Aggregate(m)) => m,
        other => panic!("refused, got {other:?}"),
    };
    assert!(refused(&mut e, plan(json!({"n2": "1"})))
        .contains("\"n2\" is not the key of a group it was given"));
    assert!(refused(&mut e, plan(json!({"n1": 1}))).contains("\"n1\" is not a string"));
    assert!(refused(&mut e, plan(json!(["n1"]))).contains("data is not a map"));
    let mut two = plan(json!({}));
    two.writes.push(two.writes[0].clone());
    assert!(refused(&mut e, two).contains("2 writes, not one apply"));
    let too_big = e.take(plan(json!({"n1": "1"})), &touched, &given, 40);
    assert!(
        matches!(
            too_big,
            Err(GuestErrorKind::Plan(
                crate::guest::PlanError::TooLarge { .. }
            ))
        ),
        "{too_big:?}"
    );
    assert!(
        e.all.is_empty() && e.bytes == 0 && !e.handed_out,
        "nothing taken"
    );

    let ok = e
        .take(plan(json!({"n1": "1"})), &touched, &given, 1 << 20)
        .unwrap();
    let PlannedWrite::ApplyEntries { entries, .. } = &ok.writes[0] else {
        panic!("{ok:?}");
    };
    assert!(entries.complete, "the first plan handed out");
    assert_eq!(entries.changed, [("n1".to_string(), Some("1".to_string()))]);
    assert_eq!(entries.frame, frame);
    assert_eq!(entries.doc()["data"], json!({"n1": "1"}));
    // n1 emptied next: its entry goes.
    let gone = e.take(plan(json!({})), &touched, &[], 1 << 20).unwrap();
    let PlannedWrite::ApplyEntries { entries, .. } = &gone.writes[0] else {
        panic!("{gone:?}");
    };
    assert_eq!(
        (entries.complete, &entries.changed[..]),
        (false, &[("n1".to_string(), None)][..])
    );
    assert_eq!(e.bytes, 0);
}

#[test]
fn the_gpu_guest_is_entry_wise_over_data() {
    let g = gpu();
    assert_eq!(
        g.module
            .entry_field(&g.manifest, &g.env)
            .unwrap()
            .as_deref(),
        Some("data")
    );
    let rt = GuestRuntime::new(RuntimeConfig::default().cache_dir(None)).unwrap();
    let plain = rt.load_file(&guest_path("guest_gpu_quota.wasm")).unwrap();
    let manifest = plain.manifest(&g.env).unwrap();
    assert_eq!(plain.entry_field(&manifest, &g.env).unwrap(), None);
}

#[test]
fn a_plan_over_the_event_cap_loses_no_entry_change() {
    let g = gpu();
    // Two pods with an invalid quantity: two diagnostics, over a cap of 1.
    let policy =
        crate::guest::policy::Policy::parse("default:\n  limits:\n    maxPlanEvents: 1\n").unwrap();
    let rt = GuestRuntime::new(RuntimeConfig::default().cache_dir(None).policy(policy)).unwrap();
    let capped = rt.load_file(&guest_path("guest_gpu_summary.wasm")).unwrap();
    let mut world = World::new(&g.manifest);
    let aggregate = fresh(&world);
    let pod = |name: u8, gpus: &'static str| Pod {
        name,
        node: Some("n1"),
        phase: "Running",
        requests: vec![Some(gpus)],
        limits: vec![],
        init: vec![],
        overhead: None,
        numeric: false,
    };
    for (n, q) in [(1, "2"), (2, "junk"), (3, "junk")] {
        apply(&mut world, &aggregate, &Op::Put(pod(n, q)));
    }
    let (plan, _) = aggregate.reconcile(&capped, &g.manifest, &world.caches, &g.env);
    assert_eq!(plan.unwrap_err().reason(), "plan_too_large");
    // Back under the cap: the n1 entry the refused plan computed is still
    // handed out as changed, so the actuator writes it.
    apply(&mut world, &aggregate, &Op::Delete(3));
    apply(&mut world, &aggregate, &Op::Delete(2));
    let (plan, _) = aggregate.reconcile(&capped, &g.manifest, &world.caches, &g.env);
    let plan = plan.unwrap();
    let PlannedWrite::ApplyEntries { entries, .. } = &plan.writes[0] else {
        panic!("{plan:?}");
    };
    assert_eq!(entries.changed, [("n1".to_string(), Some("2".to_string()))]);
}
