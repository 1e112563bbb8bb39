//! `wasmctrl demo`: a simulated GPU cluster on the embedded API server, the
//! real host pipeline with the GPU-summary guest against it over HTTPS, and
//! the live summary next to a ground truth computed independently.
//!
//! Owns the simulation (nodes with `nvidia.com/gpu` allocatable; pods
//! created, scheduled, completing, failing and deleted at a steady rate) and
//! the verdict. The ground truth is computed here from the simulator's own
//! bookkeeping, never from the guest's code, so the comparison means
//! something.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use crate::controller::ControllerConfig;
use crate::guest::RuntimeConfig;
use crate::supervisor::{Supervisor, SupervisorConfig};
use wasmctrl_apiserver::{ApiServer, ApiServerConfig};

/// Demo settings.
#[derive(Debug, Clone)]
pub struct DemoConfig {
    /// Number of GPU nodes.
    pub nodes: usize,
    /// Number of pods kept alive (roughly) by the simulator.
    pub pods: usize,
    /// Run for this long, then stop churning and give a verdict; `None`
    /// runs until Ctrl-C.
    pub duration: Option<Duration>,
    /// The GPU-summary guest.
    pub guest: PathBuf,
    /// Simulator actions per second.
    pub rate: f64,
    /// Seed for the simulator.
    pub seed: u64,
}

/// Namespace the host runs in (and writes its summary to).
pub const HOST_NAMESPACE: &str = "wasmctrl-system";
/// Namespace of the simulated workload.
pub const WORKLOAD_NAMESPACE: &str = "gpu-jobs";
const GPUS_PER_NODE: i64 = 8;

#[derive(Debug, Clone)]
struct SimPod {
    node: Option<String>,
    gpus: i64,
    phase: &'static str,
}

/// The demo's outcome.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// Whether the summary matched the ground truth at the end.
    pub converged: bool,
    /// The last summary read.
    pub summary: BTreeMap<String, String>,
    /// The ground truth.
    pub truth: BTreeMap<String, String>,
}

fn truth(pods: &BTreeMap<String, SimPod>) -> BTreeMap<String, String> {
    let mut per_node: BTreeMap<String, i64> = BTreeMap::new();
    for p in pods.values() {
        if let Some(n) = &p.node {
            if p.phase != "Succeeded" && p.phase != "Failed" {
                *per_node.entry(n.clone()).or_default() += p.gpus;
            }
        }
    }
    per_node
        .into_iter()
        .filter(|(_, v)| *v > 0)
        .map(|(k, v)| (k, v.to_string()))
        .collect()
}

async fn read_summary(cms: &Api<ConfigMap>) -> BTreeMap<String, String> {
    match cms.get_opt("gpu-summary").await {
        Ok(Some(cm)) => cm.data.unwrap_or_default(),
        _ => BTreeMap::new(),
    }
}

/// Runs the demo and prints progress to stdout.
pub async fn run(config: DemoConfig) -> anyhow::Result<Verdict> {
    let server = ApiServer::start(ApiServerConfig::default()).await?;
    let client: Client = server.client().await?;
    println!(
        "embedded API server: {} (kubectl: run `wasmctrl apiserver` for a standalone one)",
        server.url()
    );

    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in [HOST_NAMESPACE, WORKLOAD_NAMESPACE] {
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": ns}}))?,
            )
            .await?;
    }
    let nodes: Api<Node> = Api::all(client.clone());
    let node_names: Vec<String> = (0..config.nodes)
        .map(|i| format!("gpu-node-{i:02}"))
        .collect();
    for n in &node_names {
        nodes
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({
                    "metadata": {"name": n, "labels": {"nvidia.com/gpu.present": "true"}},
                    "status": {"allocatable": {"nvidia.com/gpu": GPUS_PER_NODE.to_string(), "cpu": "64"},
                               "capacity": {"nvidia.com/gpu": GPUS_PER_NODE.to_string(), "cpu": "64"}}
                }))?,
            )
            .await?;
    }

    let host = Supervisor::start(
        client.clone(),
        SupervisorConfig {
            guests: vec![config.guest.clone()],
            namespace: HOST_NAMESPACE.into(),
            guest_config: BTreeMap::new(),
            controller: ControllerConfig::default(),
            runtime: RuntimeConfig::default(),
            ..SupervisorConfig::default()
        },
        None,
    )
    .await?;
    let controller = host.controllers()[0].clone();
    let counters = controller.metrics().clone();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let host_task = tokio::spawn(async move {
        host.run(
            async {
                let _ = stop_rx.await;
            },
            Duration::from_secs(5),
        )
        .await
    });

    let pods: Api<Pod> = Api::namespaced(client.clone(), WORKLOAD_NAMESPACE);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NAMESPACE);
    let mut rng = fastrand::Rng::with_seed(config.seed);
    let mut sim: BTreeMap<String, SimPod> = BTreeMap::new();
    let mut next_id = 0u64;
    let started = Instant::now();
    let mut last_report = Instant::now();
    let tick = Duration::from_secs_f64(1.0 / config.rate.max(0.1));
    let mut interrupted = false;
    loop {
        if config.duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        tokio::select! {
            _ = tokio::signal::ctrl_c() => { interrupted = true; break; }
            () = tokio::time::sleep(tick) => {}
        }
        if host_task.is_finished() {
            break;
        }
        let live: Vec<String> = sim.keys().cloned().collect();
        let roll = rng.f64();
        if live.len() < config.pods && (roll < 0.45 || live.is_empty()) {
            // Create: most pods arrive already bound to a node (as after
            // scheduling); some stay pending.
            next_id += 1;
            let name = format!("job-{next_id:05}");
            let gpus = rng.i64(1..=4);
            let node =
                (rng.f64() < 0.85).then(|| node_names[rng.usize(..node_names.len())].clone());
            let by_limit = rng.bool();
            let resources = if by_limit {
                json!({"limits": {"nvidia.com/gpu": gpus.to_string()}})
            } else {
                json!({"requests": {"nvidia.com/gpu": gpus.to_string()}, "limits": {"nvidia.com/gpu": gpus.to_string()}})
            };
            let mut spec = json!({"containers": [{"name": "train", "image": "trainer:1", "resources": resources}]});
            if let Some(n) = &node {
                spec["nodeName"] = json!(n);
            }
            let pod: Pod =
                serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec}))?;
            if pods.create(&PostParams::default(), &pod).await.is_ok() {
                sim.insert(
                    name,
                    SimPod {
                        node,
                        gpus,
                        phase: "Pending",
                    },
                );
            }
        } else if !live.is_empty() {
            let name = &live[rng.usize(..live.len())];
            let Some(p) = sim.get(name).cloned() else {
                continue;
            };
            let action = rng.f64();
            let new_phase = match (p.phase, p.node.is_some()) {
                ("Pending", true) if action < 0.6 => Some("Running"),
                ("Running", _) if action < 0.3 => Some("Succeeded"),
                ("Running", _) if action < 0.4 => Some("Failed"),
                _ => None,
            };
            if let Some(phase) = new_phase {
                let patch = json!({"status": {"phase": phase}});
                if pods
                    .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .is_ok()
                {
                    if let Some(s) = sim.get_mut(name) {
                        s.phase = phase;
                    }
                }
            } else if (p.phase != "Running" || action > 0.85)
                // At once: the demo's truth has no terminating phase.
                && pods
                    .delete(name, &DeleteParams::default().grace_period(0))
                    .await
                    .is_ok()
            {
                sim.remove(name);
            }
        }
        if last_report.elapsed() >= Duration::from_secs(2) {
            last_report = Instant::now();
            let summary = read_summary(&cms).await;
            let want = truth(&sim);
            println!(
                "t={:>4.0}s pods={:<4} reconciles={:<5} applies={:<4} skipped={:<5} {}",
                started.elapsed().as_secs_f64(),
                sim.len(),
                counters.reconciles(),
                counters.applies(),
                counters.skipped(),
                if summary == want {
                    "summary == truth"
                } else {
                    "converging…"
                }
            );
        }
    }

    // Stop churning and wait for the summary to converge.
    let want = truth(&sim);
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut summary = read_summary(&cms).await;
    while summary != want && Instant::now() < deadline && !host_task.is_finished() {
        tokio::time::sleep(Duration::from_millis(200)).await;
        summary = read_summary(&cms).await;
    }
    println!();
    println!("{:<14} {:>8} {:>8}", "node", "summary", "truth");
    for n in &node_names {
        let s = summary.get(n).map(String::as_str).unwrap_or("-");
        let t = want.get(n).map(String::as_str).unwrap_or("-");
        println!(
            "{n:<14} {s:>8} {t:>8}{}",
            if s == t { "" } else { "   <- differs" }
        );
    }
    println!(
        "reconciles={} applies={} skipped-writes={} errors={}",
        counters.reconciles(),
        counters.applies(),
        counters.skipped(),
        counters.errors()
    );
    let _ = stop_tx.send(());
    let host_result = host_task.await;
    let converged = summary == want;
    match host_result {
        Ok(Err(e)) => anyhow::bail!("the host stopped with an error: {e}"),
        Err(e) => anyhow::bail!("the host task failed: {e}"),
        Ok(Ok(())) => {}
    }
    if !interrupted || config.duration.is_some() {
        println!(
            "verdict: {}",
            if converged {
                "PASS — the GPU summary matches the ground truth"
            } else {
                "FAIL — the GPU summary does not match the ground truth"
            }
        );
    }
    Ok(Verdict {
        converged,
        summary,
        truth: want,
    })
}
