//! One system under test, start to finish: start it as a subprocess, wait
//! for its cold start (the ConfigMap shows the full, correct summary), read
//! its memory, drive the churn (single-pod changes at a fixed rate, each
//! moving one node's number) and time each change until the ConfigMap shows
//! it, then count writes while idle across a resync. It owns the
//! subprocess and kills it at the end; it never looks inside it.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube::Client;

use crate::measure::Recorder;
use crate::native_peer::{PeerArgs, APPLY_LINE, RECONCILE_LINE};
use crate::pods::{self, World};
use crate::process::{
    cpu_time, free_port, metric_sum, percentiles, poll, scrape, start, status_bytes, Percentiles,
};

/// Namespace the summaries are written to.
pub const SUMMARY_NAMESPACE: &str = "ops";
/// How long a cold start may take before the bench gives up.
const COLD_TIMEOUT: Duration = Duration::from_secs(900);
/// How long one change may take to show before it counts as missed.
const CHANGE_TIMEOUT: Duration = Duration::from_secs(120);
/// How often the bench looks at what the ConfigMap watch recorded.
const POLL: Duration = Duration::from_millis(5);

/// The two systems compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum System {
    /// kube-runtime reflector + native summary (`native_peer`).
    Native,
    /// The tuned native peer (`tuned_peer`): slim decode, incremental
    /// sums, a coalescing writer of changed entries only.
    Tuned,
    /// `wasmctrl run` with the GPU-summary guest.
    Wasmctrl,
    /// The same, with the same guest loaded as its own shadow
    /// (`--shadow`): what comparing every plan costs.
    WasmctrlShadow,
}

impl System {
    /// Short name, also the ConfigMap's suffix.
    pub fn name(self) -> &'static str {
        match self {
            System::Native => "native",
            System::Tuned => "native-tuned",
            System::Wasmctrl => "wasmctrl",
            System::WasmctrlShadow => "wasmctrl-shadow",
        }
    }
}

/// What is the same for every system in one run.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Kubeconfig of the embedded API server.
    pub kubeconfig: PathBuf,
    /// Where subprocess logs go.
    pub log_dir: PathBuf,
    /// The `wasmctrl` binary.
    pub wasmctrl: PathBuf,
    /// The GPU-summary guest.
    pub guest: PathBuf,
    /// Resync period both systems get.
    pub resync: Duration,
    /// Single-pod changes in the churn.
    pub changes: usize,
    /// Changes per second.
    pub rate: f64,
    /// How long idle writes are counted (longer than `resync`).
    pub idle: Duration,
    /// Where `perf record` writes each system's churn profile, if asked.
    pub perf: Option<PathBuf>,
    /// Which systems run (both by default).
    pub systems: Vec<System>,
    /// Extra cold starts per system before the measured run
    /// (`--cold-starts K`), each from a deleted summary.
    pub cold_starts: usize,
    /// Other `wasmctrl` binaries whose cold starts alternate with this
    /// build's (`--cold-baseline PATH[,PATH…]`), for an A/B within one run.
    pub cold_baseline: Vec<PathBuf>,
}

/// One cold start of a `--cold-starts` series.
#[derive(Clone, Debug)]
pub struct ColdStart {
    /// Which system.
    pub system: System,
    /// The `wasmctrl` binary it ran (this build or a baseline), or the
    /// native peer.
    pub binary: String,
    /// Process start → the ConfigMap shows the full summary.
    pub took: Duration,
    /// The system's CPU time (utime + stime) until then.
    pub cpu: Duration,
    /// This process's (the API server's) CPU time over the same span.
    pub server_cpu: Duration,
    /// Peak RSS at sync.
    pub vm_hwm: u64,
}

/// When `recorder` first showed `expected` after `started` (the cold
/// start's end); panics with `system`'s log if it never does.
async fn full_summary(
    recorder: &Recorder,
    started: Instant,
    expected: &std::collections::BTreeMap<String, String>,
    system: System,
    setup: &Setup,
) -> Instant {
    wait_for(recorder, started, COLD_TIMEOUT, |d| d == expected)
        .await
        .unwrap_or_else(|| {
            panic!(
                "{} never showed the full summary; its log ends:\n{}",
                system.name(),
                log_tail(system, setup)
            )
        })
}

/// Deletes the summary ConfigMap `name` if it is there.
async fn delete_summary(client: &Client, name: &str) {
    let configmaps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client.clone(), SUMMARY_NAMESPACE);
    match configmaps.delete(name, &Default::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(e) => panic!("deleting {name}: {e}"),
    }
}

/// Starts `system` (as `binary` for wasmctrl) from a deleted summary, waits
/// for the full summary, and stops it. With `perf`, records it there.
pub async fn cold_start(
    client: &Client,
    world: &World,
    setup: &Setup,
    system: System,
    binary: &std::path::Path,
    perf: Option<&std::path::Path>,
) -> ColdStart {
    let name = configmap_name(system);
    delete_summary(client, &name).await;
    let (recorder, watch) = Recorder::start(client, SUMMARY_NAMESPACE, &name).await;
    let expected = world.expected();
    let setup = Setup {
        wasmctrl: binary.to_path_buf(),
        ..setup.clone()
    };
    let started = Instant::now();
    let server_cpu_before = cpu_time(std::process::id()).unwrap_or_default();
    let mut running = spawn(system, &setup);
    let pid = running.child.id();
    let profile = perf.map(|dir| start_perf(dir, system, pid, "cold"));
    let synced = full_summary(&recorder, started, &expected, system, &setup).await;
    let took = synced - started;
    let vm_hwm = status_bytes(pid, "VmHWM").unwrap_or(0);
    let cpu = cpu_time(pid).unwrap_or_default();
    let server_cpu = cpu_time(std::process::id())
        .unwrap_or_default()
        .saturating_sub(server_cpu_before);
    if let Some(perf) = profile {
        stop_perf(perf);
    }
    let _ = running.child.kill();
    let _ = running.child.wait();
    watch.abort();
    // The measured run's cold start starts from no summary too.
    delete_summary(client, &name).await;
    ColdStart {
        system,
        binary: match system {
            System::Native => "native peer (this bench)".into(),
            System::Tuned => "tuned native peer (this bench)".into(),
            System::Wasmctrl | System::WasmctrlShadow => binary.display().to_string(),
        },
        took,
        cpu,
        server_cpu,
        vm_hwm,
    }
}

/// What one system did.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Which system.
    pub system: System,
    /// Pods in the world.
    pub pods: usize,
    /// Process start → the ConfigMap shows the full summary.
    pub cold_start: Duration,
    /// Peak RSS after sync.
    pub vm_hwm: u64,
    /// RSS after sync.
    pub vm_rss: u64,
    /// utime + stime during the churn.
    pub churn_cpu: Duration,
    /// Event → ConfigMap latency of each change seen.
    pub latency: Percentiles,
    /// Changes never seen within `CHANGE_TIMEOUT`.
    pub missed: usize,
    /// New ConfigMap versions during the churn.
    pub churn_writes: usize,
    /// New ConfigMap versions while idle.
    pub idle_writes: usize,
    /// Reconciles and write requests (as the system counts them) during
    /// the churn.
    pub churn_requests: Counts,
    /// The same while idle.
    pub idle_requests: Counts,
    /// The summary at cold start.
    pub cold_data: std::collections::BTreeMap<String, String>,
    /// The summary at the end.
    pub final_data: std::collections::BTreeMap<String, String>,
}

/// What a system reports doing: reconciles run and write (PATCH) requests
/// sent. The native peer prints a line for each; wasmctrl's `/metrics` has
/// `controller_runtime_reconcile_total` and `rest_client_requests_total`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counts {
    /// Reconciles.
    pub reconciles: f64,
    /// Write requests.
    pub writes: f64,
}

impl std::ops::Sub for Counts {
    type Output = Counts;
    fn sub(self, rhs: Counts) -> Counts {
        Counts {
            reconciles: self.reconciles - rhs.reconciles,
            writes: self.writes - rhs.writes,
        }
    }
}

/// A running system and where to read its counts.
struct Running {
    child: Child,
    system: System,
    stdout: PathBuf,
    metrics_port: u16,
}

impl Running {
    async fn counts(&self) -> Counts {
        match self.system {
            System::Native | System::Tuned => {
                let out = std::fs::read_to_string(&self.stdout).unwrap_or_default();
                let count = |line: &str| out.lines().filter(|l| *l == line).count() as f64;
                Counts {
                    reconciles: count(RECONCILE_LINE),
                    writes: count(APPLY_LINE),
                }
            }
            System::Wasmctrl | System::WasmctrlShadow => {
                let text = scrape(self.metrics_port).await.unwrap_or_default();
                Counts {
                    reconciles: metric_sum(&text, "controller_runtime_reconcile_total", &[]),
                    writes: metric_sum(&text, "rest_client_requests_total", &["method=\"PATCH\""]),
                }
            }
        }
    }
}

fn configmap_name(system: System) -> String {
    format!("gpu-summary-{}", system.name())
}

fn spawn(system: System, setup: &Setup) -> Running {
    let log = setup.log_dir.join(format!("{}.log", system.name()));
    let stdout_path = setup.log_dir.join(format!("{}.out", system.name()));
    let metrics_port = free_port();
    let cmd = match system {
        System::Native | System::Tuned => {
            let mut cmd = Command::new(std::env::current_exe().expect("own executable"));
            let args = PeerArgs {
                kubeconfig: setup.kubeconfig.clone(),
                namespace: SUMMARY_NAMESPACE.into(),
                name: configmap_name(system),
                resync: setup.resync,
            };
            cmd.args(if system == System::Tuned {
                crate::tuned_peer::to_args(&args)
            } else {
                args.to_args()
            });
            cmd
        }
        System::Wasmctrl | System::WasmctrlShadow => {
            let mut cmd = Command::new(&setup.wasmctrl);
            if system == System::WasmctrlShadow {
                cmd.arg("run")
                    .arg("--shadow")
                    .arg(format!("gpu-summary={}", setup.guest.display()));
            } else {
                cmd.arg("run");
            }
            cmd.arg("--guest")
                .arg(&setup.guest)
                .arg("--kubeconfig")
                .arg(&setup.kubeconfig)
                .args(["--namespace", SUMMARY_NAMESPACE])
                .arg("--config")
                .arg(format!("gpu-summary.name={}", configmap_name(system)))
                .arg("--resync-seconds")
                .arg(setup.resync.as_secs().to_string())
                .arg("--metrics-addr")
                .arg(format!("127.0.0.1:{metrics_port}"))
                .args(["--health-addr", "127.0.0.1:0"])
                .arg("--no-guest-cache");
            cmd
        }
    };
    let child = start(cmd, system.name(), "warn", &stdout_path, &log);
    Running {
        child,
        system,
        stdout: stdout_path,
        metrics_port,
    }
}

/// The subprocess's log, for a failure message.
fn log_tail(system: System, setup: &Setup) -> String {
    let text = std::fs::read_to_string(setup.log_dir.join(format!("{}.log", system.name())))
        .unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// `perf record` of the system and of this process (the API server)
/// during the churn, into `dir/perf-<system>.data` (`--perf DIR`).
/// `phase` names a cold start's profile (`perf-<system>-cold.data`).
fn start_perf(dir: &std::path::Path, system: System, pid: u32, phase: &str) -> Child {
    let out = match phase {
        "" => dir.join(format!("perf-{}.data", system.name())),
        phase => dir.join(format!("perf-{}-{phase}.data", system.name())),
    };
    Command::new("perf")
        .args([
            "record",
            "-e",
            "cpu-clock",
            "-F",
            "199",
            "--call-graph",
            "dwarf,32768",
            "-o",
        ])
        .arg(&out)
        .arg("-p")
        .arg(format!("{pid},{}", std::process::id()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("--perf: starting perf: {e}"))
}

/// Stops `perf record` (SIGINT, so it writes its file) and waits for it.
fn stop_perf(mut perf: Child) {
    let _ = Command::new("kill")
        .args(["-INT", &perf.id().to_string()])
        .status();
    let _ = perf.wait();
}

/// Polls `recorder` until a version at or after `since` satisfies `want`.
async fn wait_for(
    recorder: &Recorder,
    since: Instant,
    timeout: Duration,
    want: impl Fn(&std::collections::BTreeMap<String, String>) -> bool,
) -> Option<Instant> {
    poll(POLL, timeout, async || recorder.first_after(since, &want)).await
}

/// One change of the churn: when it was sent, which node it moved, and the
/// number that node should then show.
struct Change {
    sent: Instant,
    node: String,
    expect: i64,
}

/// Applies change `k` to node `node`: create a pod there, delete one, or
/// mark one `Failed` (cycling), updating `world` to match.
async fn change(client: &Client, world: &mut World, k: usize, node: usize) {
    let victim = world.live_pod_on(node);
    match (k % 3, victim) {
        (1, Some(v)) => {
            pods::delete_pod(client, &world.pods[v].name)
                .await
                .expect("pod deleted");
            world.pods[v].live = false;
        }
        (2, Some(v)) => {
            pods::fail_pod(client, &world.pods[v].name)
                .await
                .expect("pod marked Failed");
            world.pods[v].live = false;
        }
        _ => {
            let i = world.pods.len();
            let record = pods::create_pod(client, i, node)
                .await
                .expect("pod created");
            world.pods.push(record);
        }
    }
}

/// Runs `system` against the world: cold start, churn, idle.
/// `first_node` is where its churn starts (consecutive nodes after it).
pub async fn run(
    client: &Client,
    world: &mut World,
    setup: &Setup,
    system: System,
    first_node: usize,
) -> Outcome {
    assert!(
        setup.changes <= world.nodes,
        "each change must move a different node: {} changes over {} nodes",
        setup.changes,
        world.nodes
    );
    let name = configmap_name(system);
    let (recorder, watch) = Recorder::start(client, SUMMARY_NAMESPACE, &name).await;
    let expected = world.expected();
    let live_pods = world.pods.iter().filter(|p| p.live).count();

    let started = Instant::now();
    // This process serves the API: its CPU during the cold start, beside
    // the system's, says where the two cores went.
    let server_cpu_before = cpu_time(std::process::id()).unwrap_or_default();
    let mut running = spawn(system, setup);
    let pid = running.child.id();
    let synced = full_summary(&recorder, started, &expected, system, setup).await;
    let cold_start = synced - started;
    let vm_hwm = status_bytes(pid, "VmHWM").unwrap_or(0);
    let vm_rss = status_bytes(pid, "VmRSS").unwrap_or(0);
    let system_cpu = cpu_time(pid).unwrap_or_default();
    let server_cpu = cpu_time(std::process::id())
        .unwrap_or_default()
        .saturating_sub(server_cpu_before);
    eprintln!(
        "e2e_latency: {} synced {} pods in {:.2} s (CPU: {} {:.2} s, API server and this bench {:.2} s)",
        system.name(),
        live_pods,
        cold_start.as_secs_f64(),
        system.name(),
        system_cpu.as_secs_f64(),
        server_cpu.as_secs_f64()
    );

    // Churn: one change every 1/rate s, each on its own node.
    let profile = setup
        .perf
        .as_ref()
        .map(|dir| start_perf(dir, system, pid, ""));
    let counts_before = running.counts().await;
    let cpu_before = cpu_time(pid).unwrap_or_default();
    let churn_start = Instant::now();
    let period = Duration::from_secs_f64(1.0 / setup.rate);
    let mut changes = Vec::with_capacity(setup.changes);
    for k in 0..setup.changes {
        tokio::time::sleep_until((churn_start + period * k as u32).into()).await;
        let node = (first_node + k) % world.nodes;
        let before = world.node_total(node);
        let sent = Instant::now();
        change(client, world, k, node).await;
        let expect = world.node_total(node);
        assert_ne!(before, expect, "change {k} must move node {node}'s number");
        changes.push(Change {
            sent,
            node: pods::node_name(node),
            expect,
        });
    }
    let mut latencies = Vec::with_capacity(changes.len());
    let mut missed = 0;
    for c in &changes {
        let shows = |d: &std::collections::BTreeMap<String, String>| {
            let value = d
                .get(&c.node)
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(0);
            value == c.expect
        };
        match wait_for(&recorder, c.sent, CHANGE_TIMEOUT, shows).await {
            Some(at) => latencies.push(at - c.sent),
            None => missed += 1,
        }
    }
    // Settled: the summary matches the world again.
    let expected = world.expected();
    wait_for(&recorder, churn_start, CHANGE_TIMEOUT, |d| d == &expected).await;
    let churn_end = Instant::now();
    let churn_cpu = cpu_time(pid).unwrap_or_default().saturating_sub(cpu_before);
    if let Some(perf) = profile {
        stop_perf(perf);
    }
    let churn_writes = recorder.writes_between(churn_start, churn_end);
    let counts_churned = running.counts().await;

    // Idle across a resync: nothing changed, so nothing should be written.
    tokio::time::sleep(setup.idle).await;
    let idle_writes = recorder.writes_between(churn_end, Instant::now());
    let counts_idle = running.counts().await;
    let final_data = recorder.latest().unwrap_or_default();

    let exited = running.child.try_wait().ok().flatten();
    let _ = running.child.kill();
    let _ = running.child.wait();
    watch.abort();
    assert!(
        exited.is_none(),
        "{} exited during the run ({exited:?}); its log ends:\n{}",
        system.name(),
        log_tail(system, setup)
    );
    if let Some(dir) = std::env::var_os("E2E_SAMPLES") {
        // Each change's latency in the order sent, for a closer look.
        let path = std::path::Path::new(&dir).join(format!("{}-{live_pods}.txt", system.name()));
        let lines: String = latencies
            .iter()
            .map(|d| format!("{:.3}\n", d.as_secs_f64() * 1e3))
            .collect();
        if let Err(e) = std::fs::write(&path, lines) {
            eprintln!("e2e_latency: E2E_SAMPLES: {}: {e}", path.display());
        }
    }
    Outcome {
        system,
        pods: live_pods,
        cold_start,
        vm_hwm,
        vm_rss,
        churn_cpu,
        latency: percentiles(&latencies),
        missed,
        churn_writes,
        idle_writes,
        churn_requests: counts_churned - counts_before,
        idle_requests: counts_idle - counts_churned,
        cold_data: recorder
            .snapshot()
            .into_iter()
            .find(|s| s.at == synced)
            .map(|s| s.data)
            .unwrap_or_default(),
        final_data,
    }
}
