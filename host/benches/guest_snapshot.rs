//! Cost of handing a snapshot to a guest, per pod, at 100,000 pods.
//!
//! Prints a table comparing, in one run: the GPU-summary logic as a native
//! Rust loop; building the interned snapshot on the host; and the full guest
//! call (copy into the sandbox + decode + summarise + plan). Run with
//! `make guest && cargo bench -p wasmctrl --bench guest_snapshot`.

#![allow(missing_docs, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::json;
use wasmctrl::guest::{self, GuestRuntime, RuntimeConfig};
use wasmctrl::projection::Interner;

const NODES: usize = 2_000;
const ROUNDS: usize = 7;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn pod(i: usize) -> serde_json::Value {
    let gpu = (i % 4).to_string();
    json!({
        "metadata": {"name": format!("job-{i:06}-abcde"), "namespace": format!("team-{}", i % 50)},
        "spec": {
            "nodeName": format!("gpu-node-{:04}", i % NODES),
            "initContainers": if i.is_multiple_of(5) { json!([{"name": "init", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]) } else { json!([]) },
            "containers": [
                {"name": "main", "resources": {"requests": {"nvidia.com/gpu": gpu, "cpu": "2"}, "limits": {"nvidia.com/gpu": gpu}}},
                {"name": "sidecar", "resources": {"requests": {"cpu": "100m"}}}
            ]
        },
        "status": {"phase": if i.is_multiple_of(10) { "Pending" } else { "Running" }}
    })
}

#[path = "../tests/support/wat.rs"]
mod wat;

/// A guest whose `reconcile` traps at once: timing it measures only the
/// copy of the snapshot into guest memory (the host copies the arguments
/// before entering the function).
fn copy_only_guest() -> Vec<u8> {
    wat::guest(
        &wat::WatManifest::writing_its_own_configmap("copy-only", "default"),
        wat::Behaviour::Trap,
    )
}

fn request() -> guest::Request {
    guest::Request {
        key: "gpu-summary".into(),
        watch: None,
        presence: None,
    }
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` runs this as
    // a quick smoke test on a small world.
    let full = std::env::args().any(|a| a == "--bench");
    let pods_n: usize = if full { 100_000 } else { 1_000 };
    let target = std::env::var("CARGO_TARGET_DIR")
        .unwrap_or_else(|_| format!("{}/../target", env!("CARGO_MANIFEST_DIR")));
    let wasm = std::path::PathBuf::from(target).join("wasm32-wasip2/guest/guest_gpu_summary.wasm");
    let rt = GuestRuntime::new(RuntimeConfig::default().cache_dir(None)).unwrap();
    let module = rt
        .load_file(&wasm)
        .unwrap_or_else(|e| panic!("{e} (run `make guest` first)"));
    let env = guest::environment("default", &BTreeMap::new());
    let manifest = module.manifest(&env).unwrap();
    let mut interner = Interner::default();
    let pods: Vec<_> = (0..pods_n).map(pod).collect();
    let mut objs: Vec<_> = pods
        .iter()
        .map(|p| manifest.watches[0].projection.project(p, &mut interner))
        .collect();
    objs.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    let refs = vec![guest::snapshot::WatchView::identity(
        objs.iter().collect(),
        manifest.watches[0].projection.paths().len(),
    )];

    // Native baseline: the same summary logic over borrowed, projected data.
    let mut native = Vec::new();
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let view_pods = objs.iter().map(|o| guest_gpu_summary::summary::PodGpu {
            namespace: &o.namespace,
            name: &o.name,
            node_name: o.field(0).first().and_then(|v| v.as_str()),
            phase: o.field(1).first().and_then(|v| v.as_str()),
            containers: o
                .field(2)
                .iter()
                .zip(o.field(3))
                .map(|(r, l)| guest_gpu_summary::summary::ContainerGpu {
                    request: r.as_str(),
                    limit: l.as_str(),
                    restart_policy: None,
                })
                .collect(),
            init_containers: o
                .field(5)
                .iter()
                .zip(o.field(6))
                .zip(o.field(4))
                .map(|((r, l), p)| guest_gpu_summary::summary::ContainerGpu {
                    request: r.as_str(),
                    limit: l.as_str(),
                    restart_policy: p.as_str(),
                })
                .collect(),
            overhead: o.field(7).first().and_then(|v| v.as_str()),
        });
        let s = guest_gpu_summary::summary::summarize(view_pods);
        std::hint::black_box(guest_gpu_summary::summary::summary_data(&s));
        native.push(t.elapsed());
    }

    let mut build = Vec::new();
    let mut call = Vec::new();
    let mut inst = Vec::new();
    let mut snapshot = None;
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let snap = guest::snapshot::build(&manifest, &refs);
        build.push(t.elapsed());
        let (plan, stats) = module.reconcile(&manifest, &env, &request(), snap.clone());
        plan.unwrap();
        call.push(stats.call);
        inst.push(stats.instantiate);
        snapshot = Some(snap);
    }
    let snap = snapshot.unwrap();
    let copy_module = rt.load_bytes("copy-only.wasm", &copy_only_guest()).unwrap();
    let mut copy = Vec::new();
    for _ in 0..ROUNDS {
        let (result, stats) = copy_module.reconcile(&manifest, &env, &request(), snap.clone());
        assert!(result.is_err());
        copy.push(stats.call);
    }
    let cp = median(copy);
    let per = |d: Duration| d.as_nanos() as f64 / pods_n as f64;
    let (n, b, c) = (median(native), median(build), median(call));
    println!("guest_snapshot: {pods_n} pods on {NODES} nodes, median of {ROUNDS}");
    println!("| step | total | ns/pod | vs native |");
    println!("|---|---|---|---|");
    println!(
        "| native Rust loop (same logic, no wasm) | {:.1} ms | {:.0} | 1.0x |",
        n.as_secs_f64() * 1e3,
        per(n)
    );
    let row = |step: &str, d: Duration| {
        println!(
            "| {step} | {:.1} ms | {:.0} | {:.1}x |",
            d.as_secs_f64() * 1e3,
            per(d),
            per(d) / per(n)
        );
    };
    row("host: build interned snapshot", b);
    row("guest call: copy in + decode + summarise + plan", c);
    row(
        "of which: copy into guest memory (a guest that returns at once)",
        cp,
    );
    row("total host+guest", b + c);
    println!(
        "| instantiate (per reconcile) | {:.1} µs | | |",
        median(inst).as_secs_f64() * 1e6
    );
    println!(
        "snapshot: {} strings ({} bytes), {} objects, {} values",
        snap.string_ends.len(),
        snap.strings.len(),
        snap.object_watch.len(),
        snap.value_kinds.len()
    );
}
