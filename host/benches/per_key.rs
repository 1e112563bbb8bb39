//! Per-key reconcile cost against the size of the cache: a per-object
//! guest (one quota per namespace, pods related by `same-namespace`)
//! reconciling one key while 1,000, 10,000 or 100,000 pods are cached.
//!
//! Each row times, for one key: choosing its objects through the store
//! indexes and building its snapshot, then the guest call (instance,
//! copy-in, a reconcile that returns an empty plan, plan validation).
//! Every namespace holds 100 pods at every size, so a key's related
//! objects stay the same while the world grows. Run with
//! `make guest && cargo bench -p wasmctrl --bench per_key`.

#![allow(missing_docs, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::json;
use wasmctrl::guest::{self, GuestRuntime, Request, RuntimeConfig};
use wasmctrl::projection::field_positions;
use wasmctrl::projection::Interner;
use wasmctrl::relations::{snapshot_for, WatchCache};
use wasmctrl::request::RequestKey;
use wasmctrl::store::Writer;

#[path = "../tests/support/wat.rs"]
mod wat;

const PODS_PER_NAMESPACE: usize = 100;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn quota_guest() -> Vec<u8> {
    let quotas = wat::WatWatch {
        name: "quotas".into(),
        group: "example.com".into(),
        version: "v1".into(),
        kind: "Quota".into(),
        plural: Some("quotas".into()),
        namespace: None,
        fields: vec!["spec.limit".into()],
        indexes: Vec::new(),
        keys: wat::WatKeys::PerObject,
        finalizer: None,
        label_selector: None,
    };
    let pods = wat::WatWatch {
        fields: vec![
            "spec.nodeName".into(),
            "status.phase".into(),
            "spec.containers[*].resources.requests['nvidia.com/gpu']".into(),
        ],
        ..wat::WatWatch::pods("pods", wat::WatKeys::SameNamespace("quotas".into()))
    };
    let m = wat::WatManifest {
        name: "quota".into(),
        watches: vec![quotas, pods],
        writes: Vec::new(),
    };
    wat::guest(&m, wat::Behaviour::Apply(Vec::new()))
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
    let samples = if full { 201 } else { 11 };
    let rt = GuestRuntime::new(RuntimeConfig::default().cache_dir(None)).unwrap();
    let module = rt.load_bytes("quota.wasm", &quota_guest()).unwrap();
    let env = guest::environment("default", &BTreeMap::new()).at(guest::now_ms());
    let manifest = module.manifest(&env).unwrap();
    println!("per_key: one quota per namespace, {PODS_PER_NAMESPACE} pods per namespace, median of {samples} keys");
    println!("| pods cached | snapshot (select + build) | guest call | per-key total | objects in snapshot | vs 1k |");
    println!("|---|---|---|---|---|---|");
    let mut base = None;
    for &n in sizes {
        let namespaces = n / PODS_PER_NAMESPACE;
        let mut interner = Interner::default();
        let caches: Vec<WatchCache> = manifest
            .watches
            .iter()
            .enumerate()
            .map(|(w, spec)| {
                let indexed = field_positions(&spec.projection, &spec.indexed_paths());
                let mut writer = Writer::with_field_indexes(&indexed);
                let objects: Vec<serde_json::Value> = if w == 0 {
                    (0..namespaces)
                        .map(|ns| json!({"metadata": {"namespace": format!("team-{ns:05}"), "name": "quota", "uid": format!("q-{ns}"), "generation": 1}, "spec": {"limit": 8}}))
                        .collect()
                } else {
                    (0..n)
                        .map(|i| json!({"metadata": {"namespace": format!("team-{:05}", i % namespaces), "name": format!("job-{i:06}"), "uid": format!("p-{i}")},
                            "spec": {"nodeName": format!("node-{}", i % 500), "containers": [{"resources": {"requests": {"nvidia.com/gpu": "1"}}}]},
                            "status": {"phase": "Running"}}))
                        .collect()
                };
                for o in &objects {
                    writer.apply(spec.projection.project(o, &mut interner));
                }
                WatchCache {
                    store: writer.store(),
                    positions: (0..spec.projection.paths().len()).collect(),
                    namespaced: true,
                }
            })
            .collect();
        let (mut build, mut call, mut total) = (Vec::new(), Vec::new(), Vec::new());
        let mut objects = 0;
        for s in 0..samples {
            let key = RequestKey::object(0, format!("team-{:05}/quota", (s * 7919) % namespaces));
            let started = Instant::now();
            let snap = snapshot_for(&manifest, &caches, &key);
            build.push(started.elapsed());
            objects = snap.len();
            let request = Request {
                key: key.key.to_string(),
                watch: Some("quotas".into()),
                presence: Some(wasmctrl::guest::Presence::Present),
            };
            let (plan, stats) = module.reconcile(&manifest, &env, &request, snap);
            plan.unwrap();
            call.push(stats.instantiate + stats.call);
            total.push(started.elapsed());
        }
        let (b, c, t) = (median(build), median(call), median(total));
        let base_t = *base.get_or_insert(t);
        println!(
            "| {n} | {:.1} µs | {:.1} µs | {:.1} µs | {objects} | {:.2}x |",
            b.as_secs_f64() * 1e6,
            c.as_secs_f64() * 1e6,
            t.as_secs_f64() * 1e6,
            t.as_secs_f64() / base_t.as_secs_f64()
        );
    }
}
