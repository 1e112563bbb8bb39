//! End-to-end latency, memory and CPU: the wasmctrl host running the
//! GPU-summary guest against the same controller written natively with
//! kube-runtime twice — the plain way its docs show (`native_peer`) and
//! tuned as a strong Rust engineer writes it when cost matters
//! (`tuned_peer`) — all as subprocesses against one embedded API server holding realistic pods (~10 KB each as served) over
//! `pods / 20` nodes.
//!
//! For each system, one at a time: cold start (process start → the
//! ConfigMap shows the full, correct summary), VmHWM and VmRSS after sync,
//! then a churn of single-pod changes at 20/s (create, delete, or mark
//! `Failed` a pod, each on its own node, so every change moves one node's
//! number), timing each from sending it to a ConfigMap watch (opened before
//! the process started) showing that node's new number; the CPU time
//! (utime + stime) the process used during the churn; the ConfigMap
//! versions written during the churn and while idle across a resync period
//! afterwards (0 expected).
//!
//! Run: `make guest && cargo bench -p wasmctrl --bench e2e_latency --
//! --pods 10000` (sizes comma-separated; `E2E_PODS` and `E2E_CHANGES` work
//! too). `--systems wasmctrl` (or `native`, `native-tuned`,
//! `wasmctrl-shadow`, comma-separated) runs those systems only (default:
//! native, native-tuned, wasmctrl), and
//! `--perf DIR` records each system's churn, with this process (the API
//! server), into `DIR/perf-<system>.data` for `perf report`;
//! `--cold-starts K` first runs K more cold starts of each system (each
//! from a deleted summary) and prints their median, min and max;
//! `--cold-baseline PATH[,PATH…]` alternates them with other `wasmctrl` binaries'
//! for an A/B in one run (with `--perf`, the first is recorded into
//! `DIR/perf-<system>-cold.data`);
//! `E2E_SAMPLES=DIR` writes each change's latency (ms, in the order sent)
//! to `DIR/<system>-<pods>.txt`. Every system gets `--resync-seconds 30` (the tuned peer needs
//! none) and no leader election;
//! wasmctrl runs with `--no-guest-cache`, so its cold start includes
//! compiling the guest. Under `cargo test --all-targets` it runs a smoke
//! world (200 pods, 10 changes, resync 2 s) that asserts every change shows
//! up, every system converges to the summary the bench expects (each
//! system's cold start shows exactly the previous one's final summary), and
//! none writes while idle.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

#[path = "../shared/args.rs"]
mod args;
#[path = "../shared/pods.rs"]
mod fixture;
mod measure;
mod native_peer;
mod pods;
#[path = "../shared/process.rs"]
mod process;
mod system;
mod tuned_peer;

use std::path::PathBuf;
use std::time::Duration;

use wasmctrl_apiserver::{ApiServer, ApiServerConfig};

use system::{Outcome, Setup, System};

/// Sizes of the measured run when none are given.
const DEFAULT_PODS: usize = 10_000;
/// Changes in the measured churn.
const DEFAULT_CHANGES: usize = 200;
/// Changes per second.
const RATE: f64 = 20.0;
/// Resync period of the measured run.
const RESYNC: Duration = Duration::from_secs(30);
/// Smoke run (`cargo test --all-targets`).
const SMOKE_PODS: usize = 200;
const SMOKE_CHANGES: usize = 10;
const SMOKE_RESYNC: Duration = Duration::from_secs(2);
/// Idle writes are counted over the resync period plus this.
const IDLE_MARGIN: Duration = Duration::from_secs(5);
const SMOKE_IDLE_MARGIN: Duration = Duration::from_secs(2);

async fn run_size(pods: usize, setup: &Setup) -> Vec<Outcome> {
    // The pods name owners (ReplicaSets, Jobs) that are never created: a
    // garbage collector would delete them, as kube-controller-manager's
    // does. The worlds stand for a bare API server.
    let server = ApiServer::start(ApiServerConfig::default().garbage_collector(false))
        .await
        .expect("embedded API server starts");
    server
        .write_kubeconfig(&setup.kubeconfig)
        .expect("kubeconfig written");
    let client = server.client().await.unwrap();
    for ns in [pods::NAMESPACE, system::SUMMARY_NAMESPACE] {
        wasmctrl_test_support::create_namespace(&client, ns).await;
    }
    let t = std::time::Instant::now();
    let mut world = pods::populate(&client, pods).await;
    eprintln!(
        "e2e_latency: created {pods} pods over {} nodes in {:.1} s",
        world.nodes,
        t.elapsed().as_secs_f64()
    );
    cold_start_series(&client, &world, setup).await;
    let mut outcomes = Vec::new();
    for (i, system) in [
        System::Native,
        System::Tuned,
        System::Wasmctrl,
        System::WasmctrlShadow,
    ]
    .into_iter()
    .enumerate()
    {
        if !setup.systems.contains(&system) {
            continue;
        }
        let first_node = i * setup.changes;
        outcomes.push(system::run(&client, &mut world, setup, system, first_node).await);
    }
    drop(server);
    outcomes
}

/// `--cold-starts K`: K cold starts of each system (alternating with the
/// `--cold-baseline` binary's for wasmctrl), each printed, then each
/// binary's median.
async fn cold_start_series(client: &kube::Client, world: &pods::World, setup: &Setup) {
    if setup.cold_starts == 0 {
        return;
    }
    let mut runs = Vec::new();
    for system in setup.systems.iter().copied() {
        let mut binaries = vec![setup.wasmctrl.clone()];
        if system == System::Wasmctrl {
            binaries.extend(setup.cold_baseline.iter().cloned());
        }
        for k in 0..setup.cold_starts {
            for binary in &binaries {
                let perf = (k == 0 && binary == &setup.wasmctrl)
                    .then_some(setup.perf.as_deref())
                    .flatten();
                let run = system::cold_start(client, world, setup, system, binary, perf).await;
                eprintln!(
                    "e2e_latency: cold start {} ({}) {:.2} s, CPU {:.2} s, API server and bench {:.2} s, VmHWM {:.0} MiB",
                    system.name(),
                    run.binary,
                    run.took.as_secs_f64(),
                    run.cpu.as_secs_f64(),
                    run.server_cpu.as_secs_f64(),
                    mib(run.vm_hwm)
                );
                runs.push(run);
            }
        }
    }
    println!("| system | binary | cold starts | median | min | max | median CPU |");
    println!("|---|---|---|---|---|---|---|");
    let mut keys: Vec<(System, String)> = Vec::new();
    for r in &runs {
        if !keys.contains(&(r.system, r.binary.clone())) {
            keys.push((r.system, r.binary.clone()));
        }
    }
    for (system, binary) in keys {
        let of = |f: fn(&system::ColdStart) -> Duration| {
            let mut v: Vec<Duration> = runs
                .iter()
                .filter(|r| r.system == system && r.binary == binary)
                .map(f)
                .collect();
            v.sort();
            v
        };
        let took = of(|r| r.took);
        let cpu = of(|r| r.cpu);
        let secs = |d: Option<&Duration>| d.map_or(f64::NAN, Duration::as_secs_f64);
        println!(
            "| {} | {} | {} | {:.2} s | {:.2} s | {:.2} s | {:.2} s |",
            system.name(),
            binary,
            took.len(),
            secs(took.get(took.len() / 2)),
            secs(took.first()),
            secs(took.last()),
            secs(cpu.get(cpu.len() / 2)),
        );
    }
    println!();
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn print_table(outcomes: &[Outcome], setup: &Setup) {
    println!(
        "e2e_latency: {} changes at {}/s, resync {} s, idle window {} s",
        setup.changes,
        setup.rate,
        setup.resync.as_secs(),
        setup.idle.as_secs()
    );
    println!();
    println!("| system | pods | cold start | VmHWM | VmRSS | CPU during churn | latency p50 | p90 | p99 | max | missed | writes during churn: versions / requests (reconciles) | idle writes: versions / requests (reconciles) |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for o in outcomes {
        println!(
            "| {} | {} | {:.2} s | {:.0} MiB | {:.0} MiB | {:.2} s | {} | {} | {} | {} | {} | {} / {} ({}) | {} / {} ({}) |",
            o.system.name(),
            o.pods,
            o.cold_start.as_secs_f64(),
            mib(o.vm_hwm),
            mib(o.vm_rss),
            o.churn_cpu.as_secs_f64(),
            ms(o.latency.p50),
            ms(o.latency.p90),
            ms(o.latency.p99),
            ms(o.latency.max),
            o.missed,
            o.churn_writes,
            o.churn_requests.writes,
            o.churn_requests.reconciles,
            o.idle_writes,
            o.idle_requests.writes,
            o.idle_requests.reconciles,
        );
    }
    println!();
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    let secs = |d: Duration| d.as_secs_f64();
    for w in outcomes.iter().filter(|o| o.system == System::Wasmctrl) {
        for peer in outcomes
            .iter()
            .filter(|o| o.pods == w.pods && matches!(o.system, System::Native | System::Tuned))
        {
            println!(
                "wasmctrl/{} at {} pods: cold start {:.2}x, VmHWM {:.2}x, churn CPU {:.2}x, p50 {:.2}x, p99 {:.2}x",
                peer.system.name(),
                w.pods,
                ratio(secs(w.cold_start), secs(peer.cold_start)),
                ratio(w.vm_hwm as f64, peer.vm_hwm as f64),
                ratio(secs(w.churn_cpu), secs(peer.churn_cpu)),
                ratio(secs(w.latency.p50), secs(peer.latency.p50)),
                ratio(secs(w.latency.p99), secs(peer.latency.p99)),
            );
        }
    }
}

/// What the smoke run guarantees about both systems.
fn check(outcomes: &[Outcome]) {
    for o in outcomes {
        let name = o.system.name();
        assert_eq!(
            o.missed, 0,
            "{name}: every change shows up in the ConfigMap"
        );
        assert_eq!(
            o.idle_writes, 0,
            "{name}: no new version while nothing changes"
        );
        assert_eq!(
            o.idle_requests.writes, 0.0,
            "{name}: no write request while nothing changes"
        );
        assert!(
            o.churn_requests.writes >= o.churn_writes as f64,
            "{name}: every new version was a write request the system counted"
        );
        assert!(!o.final_data.is_empty(), "{name}: a summary was written");
    }
    // Each system starts after the one before it has finished its churn,
    // on the same pods.
    for pair in outcomes.windows(2) {
        let [first, second] = pair else { continue };
        if first.pods != second.pods {
            continue;
        }
        assert_eq!(
            second.cold_data,
            first.final_data,
            "{} converges to the summary {} ended with",
            second.system.name(),
            first.system.name()
        );
    }
}

use args::option_or_env as option;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args::run_as_peer(&args, "--native-peer", "native peer", |a| {
        native_peer::PeerArgs::parse(a).map(native_peer::run)
    }) {
        return;
    }
    if args::run_as_peer(&args, tuned_peer::FLAG, "tuned native peer", |a| {
        native_peer::PeerArgs::parse(a).map(tuned_peer::run)
    }) {
        return;
    }
    // `cargo bench` passes --bench; `cargo test --all-targets` runs this
    // as a smoke test on a tiny world.
    let full = args.iter().any(|a| a == "--bench");
    let dir = tempfile::tempdir().expect("temporary directory");
    let guest = args::guest("guest_gpu_summary.wasm");
    let (sizes, changes, resync, idle_margin) = if full {
        let pods = option(&args, "--pods", "E2E_PODS").map_or_else(
            || vec![DEFAULT_PODS],
            |l| args::list("--pods", &l, args::number),
        );
        let changes = option(&args, "--changes", "E2E_CHANGES")
            .map_or(DEFAULT_CHANGES, |c| args::number("--changes", &c));
        (pods, changes, RESYNC, IDLE_MARGIN)
    } else {
        (
            vec![SMOKE_PODS],
            SMOKE_CHANGES,
            SMOKE_RESYNC,
            SMOKE_IDLE_MARGIN,
        )
    };
    let setup = Setup {
        kubeconfig: dir.path().join("kubeconfig"),
        log_dir: dir.path().to_path_buf(),
        // E2E_WASMCTRL: another build of the host (a before/after
        // comparison on the same load).
        wasmctrl: std::env::var_os("E2E_WASMCTRL").map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_wasmctrl")),
            PathBuf::from,
        ),
        guest,
        resync,
        changes,
        rate: RATE,
        idle: resync + idle_margin,
        perf: option(&args, "--perf", "E2E_PERF").map(PathBuf::from),
        cold_starts: option(&args, "--cold-starts", "E2E_COLD_STARTS")
            .map_or(0, |k| args::number("--cold-starts", &k)),
        cold_baseline: option(&args, "--cold-baseline", "E2E_COLD_BASELINE")
            .map(|l| l.split(',').map(PathBuf::from).collect())
            .unwrap_or_default(),
        systems: option(&args, "--systems", "E2E_SYSTEMS").map_or_else(
            || vec![System::Native, System::Tuned, System::Wasmctrl],
            |l| {
                args::list("--systems", &l, |flag, s| match s {
                    "native" => System::Native,
                    "native-tuned" => System::Tuned,
                    "wasmctrl" => System::Wasmctrl,
                    "wasmctrl-shadow" => System::WasmctrlShadow,
                    other => panic!(
                        "{flag}: {other:?} is none of native, native-tuned, wasmctrl, wasmctrl-shadow"
                    ),
                })
            },
        ),
    };
    let rt = args::bench_runtime();
    let mut outcomes = Vec::new();
    for pods in sizes {
        outcomes.extend(rt.block_on(run_size(pods, &setup)));
    }
    print_table(&outcomes, &setup);
    if !full {
        check(&outcomes);
        println!("e2e_latency smoke: every system converged, every change seen, no idle writes");
    }
}
