//! `wasmctrl demo`: a simulated GPU cluster on the embedded API server, the
//! real host pipeline with the GPU-summary guest against it over HTTPS, and
//! the live summary next to a ground truth computed independently.
//!
//! Owns the flags, the simulation (nodes with `nvidia.com/gpu` allocatable; pods
//! created, scheduled, completing, failing and deleted at a steady rate) and
//! the verdict. The server runs its simulated nodes too ([`SIMULATED_NODES`],
//! with their trivial scheduler and kubelets); the pods the simulator leaves
//! unbound name a scheduler nothing runs ([`UNSCHEDULED`]), so that
//! scheduler never binds them and the ground truth stays exact. The ground truth is computed here from the simulator's own
//! bookkeeping, never from the guest's code, so the comparison means
//! something.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use wasmctrl::metrics::GuestMetrics;
use wasmctrl::supervisor::{Supervisor, SupervisorConfig, SupervisorError};
use wasmctrl_apiserver::{ApiServer, ApiServerConfig, ServerError};

use crate::cli::flags;

/// Most nodes the demo (and `apiserver --simulated-nodes`) creates.
pub const MAX_DEMO_NODES: u64 = 10_000;
/// Most pods the demo keeps alive.
const MAX_DEMO_PODS: u64 = 1_000_000;
/// Fastest demo simulator rate, actions per second.
const MAX_DEMO_RATE: f64 = 100_000.0;

#[derive(Args)]
pub struct DemoArgs {
    /// Number of GPU nodes.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=MAX_DEMO_NODES))]
    nodes: u64,
    /// Pods kept alive by the simulator.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=MAX_DEMO_PODS))]
    pods: u64,
    /// Stop after this many seconds and print a verdict (default: until Ctrl-C).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=flags::MAX_SECONDS))]
    duration: Option<u64>,
    /// Simulator actions per second.
    #[arg(long, default_value_t = 20.0, value_parser = demo_rate)]
    rate: f64,
    /// Simulator seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// The GPU-summary guest.
    #[arg(
        long,
        default_value = "target/wasm32-wasip2/guest/guest_gpu_summary.wasm"
    )]
    guest: PathBuf,
}

/// `demo --rate`.
fn demo_rate(s: &str) -> Result<f64, String> {
    flags::positive(s, MAX_DEMO_RATE, "actions per second")
}

/// Runs the demo; with `--duration`, fails unless the summary converged to
/// the ground truth.
pub async fn demo(args: DemoArgs) -> anyhow::Result<()> {
    let verdict = run(DemoConfig {
        nodes: usize::try_from(args.nodes).unwrap_or(1),
        pods: usize::try_from(args.pods).unwrap_or(1),
        duration: args.duration.map(Duration::from_secs),
        guest: args.guest,
        rate: args.rate,
        seed: args.seed,
    })
    .await?;
    if args.duration.is_some() && !verdict.converged {
        anyhow::bail!("the summary did not converge to the ground truth");
    }
    Ok(())
}

/// Why the demo could not run to a verdict.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The embedded API server did not start.
    #[error("embedded API server: {0}")]
    Server(#[from] ServerError),
    /// Setting up the simulated cluster failed.
    #[error("setting up the simulated cluster: {0}")]
    Setup(#[from] kube::Error),
    /// The host did not start, or stopped with an error.
    #[error("the host stopped with an error: {0}")]
    Host(#[from] SupervisorError),
    /// The host's task panicked or was cancelled.
    #[error("the host task failed: {0}")]
    HostTask(#[from] tokio::task::JoinError),
}

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
/// Simulated nodes the demo's server runs beside the GPU nodes the
/// simulator creates (`ApiServerConfig::simulated_nodes`).
pub const SIMULATED_NODES: usize = 2;
/// The `schedulerName` of the pods the simulator leaves unbound: no
/// scheduler has it, so the server's simulated one (which binds only pods
/// of `default-scheduler`, as kube-scheduler does) leaves them Pending.
pub const UNSCHEDULED: &str = "wasmctrl-demo-unscheduled";

#[derive(Debug, Clone)]
struct SimPod {
    node: Option<String>,
    gpus: i64,
    phase: &'static str,
}

/// The demo's outcome. The command reads `converged`; the end-to-end test
/// reads the rest.
#[derive(Debug, Clone)]
#[cfg_attr(not(test), allow(dead_code))]
pub struct Verdict {
    /// Whether the summary matched the ground truth at the end.
    pub converged: bool,
    /// The last summary read.
    pub summary: BTreeMap<String, String>,
    /// The ground truth.
    pub truth: BTreeMap<String, String>,
    /// Pods the simulator left unbound at the end (the scheduler of the
    /// server's simulated nodes must not have bound them).
    pub unbound: usize,
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

/// Creates the namespaces and the GPU nodes; returns the node names.
async fn create_cluster(client: &Client, nodes: usize) -> Result<Vec<String>, kube::Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in [HOST_NAMESPACE, WORKLOAD_NAMESPACE] {
        let mut namespace = Namespace::default();
        namespace.metadata.name = Some(ns.into());
        namespaces
            .create(&PostParams::default(), &namespace)
            .await?;
    }
    let api: Api<Node> = Api::all(client.clone());
    let names: Vec<String> = (0..nodes).map(|i| format!("gpu-node-{i:02}")).collect();
    let gpus = GPUS_PER_NODE.to_string();
    for n in &names {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": n, "labels": {"nvidia.com/gpu.present": "true"}},
            "status": {"allocatable": {"nvidia.com/gpu": gpus, "cpu": "64"},
                       "capacity": {"nvidia.com/gpu": gpus, "cpu": "64"}}
        }))
        .map_err(kube::Error::SerdeError)?;
        api.create(&PostParams::default(), &node).await?;
    }
    Ok(names)
}

/// The simulated workload: its pods, and what it believes each holds.
struct Simulator {
    pods: Api<Pod>,
    nodes: Vec<String>,
    max_pods: usize,
    rng: fastrand::Rng,
    sim: BTreeMap<String, SimPod>,
    next_id: u64,
}

impl Simulator {
    /// One random action: create a pod (most already bound to a node, as
    /// after scheduling; some left pending), move one through its phases, or
    /// delete one. The bookkeeping changes only when the API server agreed.
    async fn step(&mut self) {
        let live: Vec<String> = self.sim.keys().cloned().collect();
        if live.len() < self.max_pods && (self.rng.f64() < 0.45 || live.is_empty()) {
            self.create().await;
        } else if !live.is_empty() {
            let name = live[self.rng.usize(..live.len())].clone();
            self.advance(&name).await;
        }
    }

    async fn create(&mut self) {
        self.next_id += 1;
        let name = format!("job-{:05}", self.next_id);
        let gpus = self.rng.i64(1..=4);
        let node =
            (self.rng.f64() < 0.85).then(|| self.nodes[self.rng.usize(..self.nodes.len())].clone());
        let resources = if self.rng.bool() {
            json!({"limits": {"nvidia.com/gpu": gpus.to_string()}})
        } else {
            json!({"requests": {"nvidia.com/gpu": gpus.to_string()}, "limits": {"nvidia.com/gpu": gpus.to_string()}})
        };
        let mut spec = json!({"containers": [{"name": "train", "image": "trainer:1", "resources": resources}]});
        match &node {
            Some(n) => spec["nodeName"] = json!(n),
            None => spec["schedulerName"] = json!(UNSCHEDULED),
        }
        let Ok(pod) =
            serde_json::from_value::<Pod>(json!({"metadata": {"name": name}, "spec": spec}))
        else {
            return;
        };
        if self.pods.create(&PostParams::default(), &pod).await.is_ok() {
            let phase = "Pending";
            self.sim.insert(name, SimPod { node, gpus, phase });
        }
    }

    async fn advance(&mut self, name: &str) {
        let Some(p) = self.sim.get(name).cloned() else {
            return;
        };
        let action = self.rng.f64();
        let new_phase = match (p.phase, p.node.is_some()) {
            ("Pending", true) if action < 0.6 => Some("Running"),
            ("Running", _) if action < 0.3 => Some("Succeeded"),
            ("Running", _) if action < 0.4 => Some("Failed"),
            _ => None,
        };
        if let Some(phase) = new_phase {
            let patch = json!({"status": {"phase": phase}});
            let patched = self
                .pods
                .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
            if let (Ok(_), Some(s)) = (patched, self.sim.get_mut(name)) {
                s.phase = phase;
            }
        } else if (p.phase != "Running" || action > 0.85)
            // At once: the demo's truth has no terminating phase.
            && self
                .pods
                .delete(name, &DeleteParams::default().grace_period(0))
                .await
                .is_ok()
        {
            self.sim.remove(name);
        }
    }
}

fn progress_line(
    elapsed: Duration,
    pods: usize,
    counters: &GuestMetrics,
    converged: bool,
) -> String {
    format!(
        "t={:>4.0}s pods={:<4} reconciles={:<5} applies={:<4} skipped={:<5} {}",
        elapsed.as_secs_f64(),
        pods,
        counters.reconciles(),
        counters.applies(),
        counters.skipped(),
        if converged {
            "summary == truth"
        } else {
            "converging…"
        }
    )
}

fn print_comparison(
    nodes: &[String],
    summary: &BTreeMap<String, String>,
    truth: &BTreeMap<String, String>,
    counters: &GuestMetrics,
) {
    println!();
    println!("{:<14} {:>8} {:>8}", "node", "summary", "truth");
    for n in nodes {
        let s = summary.get(n).map(String::as_str).unwrap_or("-");
        let t = truth.get(n).map(String::as_str).unwrap_or("-");
        let differs = if s == t { "" } else { "   <- differs" };
        println!("{n:<14} {s:>8} {t:>8}{differs}");
    }
    println!(
        "reconciles={} applies={} skipped-writes={} errors={}",
        counters.reconciles(),
        counters.applies(),
        counters.skipped(),
        counters.errors()
    );
}

/// Runs the demo and prints progress to stdout.
pub async fn run(config: DemoConfig) -> Result<Verdict, DemoError> {
    let server =
        ApiServer::start(ApiServerConfig::default().simulated_nodes(SIMULATED_NODES)).await?;
    let client: Client = server.client().await?;
    println!(
        "embedded API server: {} (kubectl: run `wasmctrl apiserver` for a standalone one)",
        server.url()
    );
    let nodes = create_cluster(&client, config.nodes).await?;

    let host = Supervisor::start(
        client.clone(),
        SupervisorConfig {
            guests: vec![config.guest.clone()],
            namespace: HOST_NAMESPACE.into(),
            ..SupervisorConfig::default()
        },
        None,
    )
    .await?;
    let counters = host.controllers()[0].metrics().clone();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let host_task = tokio::spawn(async move {
        let stop = async {
            let _ = stop_rx.await;
        };
        host.run(stop, Duration::from_secs(5)).await
    });

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NAMESPACE);
    let mut sim = Simulator {
        pods: Api::namespaced(client.clone(), WORKLOAD_NAMESPACE),
        nodes: nodes.clone(),
        max_pods: config.pods,
        rng: fastrand::Rng::with_seed(config.seed),
        sim: BTreeMap::new(),
        next_id: 0,
    };
    let started = Instant::now();
    let mut last_report = Instant::now();
    let tick = Duration::from_secs_f64(1.0 / config.rate.max(0.1));
    let mut interrupted = false;
    while config.duration.is_none_or(|d| started.elapsed() < d) {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => { interrupted = true; break; }
            () = tokio::time::sleep(tick) => {}
        }
        if host_task.is_finished() {
            break;
        }
        sim.step().await;
        if last_report.elapsed() >= Duration::from_secs(2) {
            last_report = Instant::now();
            let converged = read_summary(&cms).await == truth(&sim.sim);
            let line = progress_line(started.elapsed(), sim.sim.len(), &counters, converged);
            println!("{line}");
        }
    }

    // Stop churning and wait for the summary to converge.
    let want = truth(&sim.sim);
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut summary = read_summary(&cms).await;
    while summary != want && Instant::now() < deadline && !host_task.is_finished() {
        tokio::time::sleep(Duration::from_millis(200)).await;
        summary = read_summary(&cms).await;
    }
    print_comparison(&nodes, &summary, &want, &counters);
    let _ = stop_tx.send(());
    host_task.await??;
    let converged = summary == want;
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
        unbound: sim.sim.values().filter(|p| p.node.is_none()).count(),
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use super::{run, DemoConfig};

    /// The built GPU-summary guest (`make guest`).
    fn guest_path() -> PathBuf {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
        let p = target.join("wasm32-wasip2/guest/guest_gpu_summary.wasm");
        assert!(
            p.exists(),
            "build the guests first: make guest ({} is missing)",
            p.display()
        );
        p
    }

    /// `wasmctrl demo` end to end, with the server's simulated nodes on:
    /// the pods the simulator leaves unbound name a scheduler nothing
    /// runs, so the simulated scheduler leaves them alone and the GPU
    /// summary equals the simulator's own count exactly.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_demo_summary_equals_its_ground_truth_with_simulated_nodes_on() {
        let verdict = run(DemoConfig {
            nodes: 3,
            pods: 200,
            duration: Some(Duration::from_secs(3)),
            guest: guest_path(),
            rate: 40.0,
            seed: 7,
        })
        .await
        .unwrap();
        assert!(
            verdict.unbound > 0,
            "no pod stayed unbound: the test proves nothing"
        );
        assert_eq!(verdict.summary, verdict.truth);
        assert!(verdict.converged);
    }
}
