//! Runs the GPU-summary guest once over a few pods built in code — the same
//! path `wasmctrl reconcile` takes — and prints the plan.
//!
//! `make guest && cargo run -p examples --bin offline_summary`

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;
use serde_json::json;
use wasmctrl::guest::{self, GuestRuntime, RuntimeConfig};

fn main() -> anyhow::Result<()> {
    let target = std::env::var("CARGO_TARGET_DIR")
        .unwrap_or_else(|_| format!("{}/../target", env!("CARGO_MANIFEST_DIR")));
    let wasm = PathBuf::from(target).join("wasm32-wasip2/guest/guest_gpu_summary.wasm");
    let runtime = GuestRuntime::new(RuntimeConfig::default().cache_dir(None))?;
    let module = runtime
        .load_file(&wasm)
        .with_context(|| "build the guest first: make guest")?;

    let pod = |name: &str, node: &str, phase: &str, gpus: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "ml"},
               "spec": {"nodeName": node, "containers": [
                   {"name": "train", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]},
               "status": {"phase": phase}})
    };
    let objects = vec![
        pod("trainer-0", "gpu-node-1", "Running", "4"),
        pod("trainer-1", "gpu-node-1", "Running", "2"),
        pod("notebook", "gpu-node-2", "Running", "1"),
        pod("finished", "gpu-node-2", "Succeeded", "8"),
    ];
    let mut config = BTreeMap::new();
    config.insert("name".to_string(), "gpu-summary".to_string());
    let env = guest::environment("ops", &config);
    let manifest = module.manifest(&env)?;
    let plans = wasmctrl::offline::reconcile(
        &module,
        &env,
        &manifest,
        &objects,
        &wasmctrl::offline::Keys::All,
    )?;
    // One aggregate key, so one plan.
    anyhow::ensure!(plans.len() == 1, "expected one plan, got {}", plans.len());
    let plan = &plans[0];
    println!("{}", serde_json::to_string_pretty(plan)?);
    anyhow::ensure!(
        plan["apply"][0]["data"] == json!({"gpu-node-1": "6", "gpu-node-2": "1"}),
        "unexpected summary"
    );
    Ok(())
}
