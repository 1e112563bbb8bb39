//! `wasmctrl reconcile` on a 20,000-pod `kubectl get pods -A -o json` dump:
//! read + decode (only the fields the guest needs) + project + snapshot +
//! guest call, as the CLI does it.
//!
//! `make guest && cargo bench -p wasmctrl --bench offline_reconcile`; under
//! `cargo test --all-targets` it runs once on 500 pods as a smoke test.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::json;
use wasmctrl::guest::{self, GuestRuntime, RuntimeConfig};
use wasmctrl::offline::keep_for;
use wasmctrl::offline::objects::read_objects_keeping;
use wasmctrl::projection::Keep;

/// A pod shaped like kubectl prints it (~7.5 KB pretty-printed).
fn pod(i: usize) -> serde_json::Value {
    let env: Vec<_> = (0..10)
        .map(|j| json!({"name": format!("E{j}"), "value": "v".repeat(20)}))
        .collect();
    let conditions: Vec<_> = ["Initialized", "Ready", "ContainersReady", "PodScheduled"]
        .iter()
        .map(|t| json!({"type": t, "status": "True", "lastTransitionTime": "2026-11-29T00:00:00Z"}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("job-{i:05}"), "namespace": format!("team-{}", i % 40),
            "uid": format!("00000000-0000-0000-0000-{i:012}"), "resourceVersion": (1000 + i).to_string(),
            "labels": {"app": "trainer", "team": format!("team-{}", i % 40)},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "x".repeat(1500)},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": format!("job-{i}"), "uid": "u", "controller": true}]
        },
        "spec": {
            "nodeName": format!("gpu-node-{:03}", i % 500), "restartPolicy": "Never",
            "containers": [
                {"name": "train", "image": "registry/trainer:1.2.3", "env": env,
                 "resources": {"requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": (1 + i % 4).to_string()},
                               "limits": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": (1 + i % 4).to_string()}},
                 "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
                {"name": "sidecar", "image": "log:1", "resources": {"requests": {"cpu": "100m"}}}
            ],
            "volumes": [{"name": "data", "emptyDir": {}}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        },
        "status": {
            "phase": if i.is_multiple_of(7) { "Succeeded" } else { "Running" },
            "conditions": conditions,
            "containerStatuses": [{"name": "train", "ready": true, "restartCount": 0, "image": "registry/trainer:1.2.3",
                "imageID": format!("sha256:{}", "a".repeat(64)), "containerID": format!("containerd://{}", "b".repeat(64)),
                "state": {"running": {"startedAt": "2026-11-29T00:00:00Z"}}}]
        }
    })
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (pods, rounds) = if full { (20_000, 7) } else { (500, 1) };
    let target = std::env::var("CARGO_TARGET_DIR")
        .unwrap_or_else(|_| format!("{}/../target", env!("CARGO_MANIFEST_DIR")));
    let wasm = PathBuf::from(target).join("wasm32-wasip2/guest/guest_gpu_summary.wasm");
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("pods.json");
    {
        let items: Vec<_> = (0..pods).map(pod).collect();
        let list = json!({"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}});
        let mut f = std::io::BufWriter::new(std::fs::File::create(&dump).unwrap());
        serde_json::to_writer_pretty(&mut f, &list).unwrap();
        f.flush().unwrap();
    }
    let size = std::fs::metadata(&dump).unwrap().len();
    let rt = GuestRuntime::new(RuntimeConfig::default().cache_dir(None)).unwrap();
    let module = rt.load_file(&wasm).expect("run `make guest` first");
    let env = guest::environment("default", &BTreeMap::new());
    let manifest = module.manifest(&env).unwrap();

    let mut pruned = Vec::new();
    let mut whole = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let keep = keep_for(&manifest);
        let objects = read_objects_keeping(&dump, &keep).unwrap();
        let plans = wasmctrl::offline::reconcile(&module, &env, &manifest, &objects, None).unwrap();
        assert_eq!(plans[0]["plan"]["writes"].as_array().unwrap().len(), 1);
        pruned.push(t.elapsed());

        let t = Instant::now();
        let objects = read_objects_keeping(&dump, &Keep::everything()).unwrap();
        wasmctrl::offline::reconcile(&module, &env, &manifest, &objects, None).unwrap();
        whole.push(t.elapsed());
    }
    pruned.sort();
    whole.sort();
    let ms = |v: &[Duration]| v[v.len() / 2].as_secs_f64() * 1e3;
    println!(
        "offline_reconcile: {pods} pods, {:.0} MB kubectl-style dump, median of {rounds}",
        size as f64 / 1e6
    );
    println!("| decoding | read + decode + project + guest |");
    println!("|---|---|");
    println!(
        "| only the fields the guest needs (what the CLI does) | {:.0} ms |",
        ms(&pruned)
    );
    println!(
        "| whole objects (serde_json::Value) | {:.0} ms |",
        ms(&whole)
    );
}
