//! Per-change cost of the incremental aggregate path against the size of
//! the cache: the real GPU-summary guest with 1,000, 10,000 or 100,000
//! pods cached (20 pods per node, so 50 to 5,000 groups).
//!
//! Each change rewrites one pod's request (or moves it to another node)
//! in the store, records the change as the watch handler does, and runs
//! one incremental reconcile of the aggregate key: a store lookup, a
//! `map-objects` call over a one-pod snapshot, the reductions updated,
//! and a `render` call over every group (its plan validated). For
//! comparison, the whole-snapshot path for the same key: building the
//! snapshot of every pod and one `reconcile` call. Run with
//! `make guest && cargo bench -p wasmctrl --bench aggregate`.

#![allow(missing_docs, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value as Json};
use wasmctrl::aggregate::Aggregate;
use wasmctrl::guest::{self, GuestRuntime, Request, RuntimeConfig};
use wasmctrl::informer::Change;
use wasmctrl::projection::Interner;
use wasmctrl::relations::{snapshot_for, WatchCache};
use wasmctrl::request::RequestKey;
use wasmctrl::store::Writer;

const PODS_PER_NODE: usize = 20;

fn pct(v: &mut [Duration], p: usize) -> Duration {
    v.sort();
    v[(v.len() - 1) * p / 100]
}

fn pod(i: usize, node: usize, gpus: usize) -> Json {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("p{i}"), "namespace": "ml", "uid": format!("u{i}")},
        "spec": {"nodeName": format!("node-{node}"), "containers": [
            {"name": "c", "resources": {"requests": {"nvidia.com/gpu": gpus.to_string()}}}]},
        "status": {"phase": "Running"},
    })
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// Pods cached in the measured run (`cargo bench`), one table row each.
const FULL_SIZES: &[usize] = &[1_000, 10_000, 100_000];
/// Pods cached in the smoke run (`cargo test --all-targets`).
const SMOKE_SIZES: &[usize] = &[1_000];

fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` runs this as
    // a quick smoke test.
    let full = std::env::args().any(|a| a == "--bench");
    let sizes = if full { FULL_SIZES } else { SMOKE_SIZES };
    let (changes, wholes) = if full { (201, 5) } else { (11, 1) };
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let wasm = target.join("wasm32-wasip2/guest/guest_gpu_summary.wasm");
    let rt = GuestRuntime::new(RuntimeConfig::default().cache_dir(None)).unwrap();
    let module = rt.load_file(&wasm).unwrap();
    let env = guest::environment("ops", &BTreeMap::new()).at(guest::now_ms());
    let manifest = module.manifest(&env).unwrap();
    let spec = module.aggregate_spec(&manifest, &env).unwrap().unwrap();
    let field = module.entry_field(&manifest, &env).unwrap();
    println!("aggregate: GPU-summary guest, {PODS_PER_NODE} pods per node, {changes} single-pod changes (whole snapshot: {wholes} runs)");
    println!("| pods cached | groups | first reconcile (maps all) | per change p50 | per change p99 | guest calls p50 (map + render) | whole-snapshot reconcile p50 |");
    println!("|---|---|---|---|---|---|---|");
    for &n in sizes {
        let mut interner = Interner::default();
        let mut writer = Writer::default();
        let paths = manifest.watches[0].projection.paths().len();
        for i in 0..n {
            let obj = manifest.watches[0]
                .projection
                .project(&pod(i, i / PODS_PER_NODE, 1), &mut interner);
            writer.apply(obj);
        }
        let caches = vec![WatchCache {
            store: writer.store(),
            positions: (0..paths).collect(),
            namespaced: true,
        }];
        let aggregate = Aggregate::new(spec.clone(), &manifest, field.clone());
        for obj in caches[0].store.list() {
            aggregate.record(0, &Change::added(obj));
        }
        let started = Instant::now();
        let (plan, _) = aggregate.reconcile(&module, &manifest, &caches, &env);
        plan.unwrap();
        let first = started.elapsed();
        let groups = aggregate.sizes().1;

        let mut per_change = Vec::with_capacity(changes);
        let mut guest_calls = Vec::with_capacity(changes);
        let mut rng = fastrand::Rng::with_seed(7);
        for k in 0..changes {
            let i = rng.usize(..n);
            // Half the changes move a pod to another node.
            let node = if k % 2 == 0 {
                i / PODS_PER_NODE
            } else {
                rng.usize(..n / PODS_PER_NODE)
            };
            let obj = manifest.watches[0]
                .projection
                .project(&pod(i, node, 1 + k % 4), &mut interner);
            let started = Instant::now();
            if let Some(change) = writer.apply(obj) {
                aggregate.record(0, &change);
            }
            let (plan, stats) = aggregate.reconcile(&module, &manifest, &caches, &env);
            plan.unwrap();
            per_change.push(started.elapsed());
            guest_calls.push(stats.instantiate + stats.call);
        }

        let key = RequestKey::aggregate(spec.key.as_str());
        let request = Request {
            key: spec.key.clone(),
            watch: None,
            presence: None,
        };
        let mut whole = Vec::with_capacity(wholes);
        for _ in 0..wholes {
            let started = Instant::now();
            let snap = snapshot_for(&manifest, &caches, &key);
            let (plan, _) = module.reconcile(&manifest, &env, &request, snap);
            plan.unwrap();
            whole.push(started.elapsed());
        }
        println!(
            "| {n} | {groups} | {} | {} | {} | {} | {} |",
            ms(first),
            ms(pct(&mut per_change, 50)),
            ms(pct(&mut per_change, 99)),
            ms(pct(&mut guest_calls, 50)),
            ms(pct(&mut whole, 50)),
        );
    }
}
