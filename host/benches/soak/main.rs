//! Soak and chaos: the real `wasmctrl run` binary with the GPU-summary guest
//! against the embedded API server, under pod churn, server faults and host
//! SIGKILLs, checking after every fault that the summary ConfigMap converges
//! to the value computed natively from the server's pods.
//!
//! Starts the API server in-process, creates the pods (2,000 over 20 nodes),
//! starts the host as a child process (restarted whenever it exits, as a
//! Deployment would, and those exits are counted), then repeats until the
//! time is up: churn pods at ~20 changes/s (create, delete, replace with a
//! new GPU request, finish), inject one random fault through
//! `POST /wasmctrl/faults` (or SIGKILL the host) while churning, stop the
//! churn, clear the fault, and time how long the ConfigMap takes to equal
//! the summary `guest_gpu_summary::summary` computes from the server's pods.
//! Then it waits a quiet period: a host that keeps writing while nothing
//! changes is in a hot loop. It samples the host's `VmRSS` and
//! `wasmctrl_writes_total` throughout.
//!
//! `make guest && cargo bench -p wasmctrl --bench soak -- --minutes 5`
//! (or `make soak`; `--only deny-verb,fail-429` draws only those kinds,
//! `--seed N` repeats a run's choices) prints a table per fault kind and exits non-zero when a
//! fault did not converge within 30 s, the host wrote during a quiet period
//! or more than twice per change (plus a slack of 10),
//! its RSS grew past the bound, or the final summary is wrong. Under
//! `cargo test --all-targets` it runs a smoke world (60 pods, three faults)
//! and asserts the same checks with a looser convergence bound.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

#[path = "../shared/args.rs"]
#[allow(dead_code)]
mod args;
mod faults;
mod host;
mod world;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Client;
use wasmctrl_apiserver::{ApiServer, ApiServerConfig};

use faults::Kind;
use host::Host;
use world::World;

/// Churn rate, changes per second.
const CHURN_PER_SECOND: f64 = 20.0;
/// After a quiet period this long, a host in a hot loop has written.
const QUIET: Duration = Duration::from_secs(2);
/// Writes tolerated in a quiet period (none expected: nothing changed).
const QUIET_WRITES_MAX: f64 = 1.0;
/// Writes a fault cycle may make per accepted change, plus a slack for
/// restarts and retried reconciles; more is a write storm.
const WRITES_PER_CHANGE_MAX: f64 = 2.0;
/// The slack.
const WRITES_SLACK: f64 = 10.0;
/// RSS may grow to this factor of the RSS after the initial sync ...
const RSS_GROWTH_FACTOR: f64 = 2.0;
/// ... plus this slack.
const RSS_SLACK_BYTES: u64 = 64 << 20;
/// How long the first sync (guest compile, list of every pod) may take.
const INITIAL_SYNC: Duration = Duration::from_secs(300);

/// What one run does.
struct Mode {
    full: bool,
    duration: Duration,
    pods: usize,
    nodes: usize,
    /// Seconds of churn with a fault active, picked in this range.
    window: (f64, f64),
    /// A fault must converge within this.
    converge_bound: Duration,
    /// In smoke mode, the faults to inject (in order).
    smoke_faults: Vec<Kind>,
    /// In full mode, the kinds drawn from (`--only a,b`; default all).
    kinds: Vec<Kind>,
    seed: u64,
}

impl Mode {
    fn from_args() -> Mode {
        let args: Vec<String> = std::env::args().collect();
        let value = |flag: &str| {
            args.iter()
                .position(|a| a == flag)
                .and_then(|i| args.get(i + 1))
                .and_then(|v| v.parse::<f64>().ok())
        };
        let minutes = value("--minutes");
        let kinds: Vec<Kind> = match args.iter().position(|a| a == "--only") {
            Some(i) => {
                let wanted = args.get(i + 1).map(String::as_str).unwrap_or_default();
                Kind::ALL
                    .into_iter()
                    .filter(|k| wanted.split(',').any(|w| w == k.label()))
                    .collect()
            }
            None => Kind::ALL.to_vec(),
        };
        assert!(!kinds.is_empty(), "--only names no fault kind");
        let full = args.iter().any(|a| a == "--bench") || minutes.is_some();
        let seed = value("--seed").map_or_else(
            || {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_secs())
            },
            |s| s as u64,
        );
        if full {
            Mode {
                full,
                duration: Duration::from_secs_f64(minutes.unwrap_or(5.0) * 60.0),
                pods: 2_000,
                nodes: 20,
                window: (3.0, 10.0),
                converge_bound: Duration::from_secs(30),
                smoke_faults: Vec::new(),
                kinds,
                seed,
            }
        } else {
            Mode {
                full,
                duration: Duration::ZERO,
                pods: 60,
                nodes: 4,
                window: (1.0, 1.0),
                // A debug build on a shared machine: generous, still bounded.
                converge_bound: Duration::from_secs(120),
                smoke_faults: vec![Kind::DropWatches, Kind::Fail500, Kind::KillHost],
                kinds,
                seed,
            }
        }
    }
}

/// One injected fault and what followed.
struct Cycle {
    kind: Kind,
    detail: String,
    /// Time from clearing the fault to the right summary; None: not within
    /// the bound.
    converged: Option<Duration>,
    changes: u64,
    failed_changes: u64,
    writes: f64,
    quiet_writes: f64,
    /// The summary was still right after the quiet period.
    stayed: bool,
    exits: u32,
    rss: Vec<u64>,
}

fn guest_wasm() -> PathBuf {
    args::guest("guest_gpu_summary.wasm")
}

/// Waits until the ConfigMap equals the expected summary (recomputed every
/// poll); the time it took, or None past `bound`.
async fn converge(client: &Client, bound: Duration) -> Option<Duration> {
    let start = Instant::now();
    loop {
        let want = world::expected_summary(client).await;
        if want.is_some() && world::actual_summary(client).await == want {
            return Some(start.elapsed());
        }
        if start.elapsed() > bound {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn summary_is_right(client: &Client) -> bool {
    let want = world::expected_summary(client).await;
    want.is_some() && world::actual_summary(client).await == want
}

async fn cycle(
    mode: &Mode,
    kind: Kind,
    rng: &mut fastrand::Rng,
    client: &Client,
    world: &Arc<World>,
    host: &Host,
) -> Cycle {
    let writes0 = host.writes_now().await;
    let exits0 = host.sampled().await.exits;
    let (changes0, failed0) = (world.changes.load(Relaxed), world.failed.load(Relaxed));
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let (world, stop) = (world.clone(), stop.clone());
        tokio::spawn(async move { world.churn(CHURN_PER_SECOND, stop).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (commands, mut detail) = kind.commands(rng);
    if kind == Kind::KillHost {
        host.kill_and_restart().await;
    }
    for command in &commands {
        if let Err(e) = faults::send(client, command).await {
            detail = format!("{detail} (not sent: {e})");
        }
    }
    let window = mode.window.0 + rng.f64() * (mode.window.1 - mode.window.0);
    tokio::time::sleep(Duration::from_secs_f64(window)).await;
    stop.store(true, Relaxed);
    let _ = churn.await;
    faults::clear(client).await;
    let converged = converge(client, mode.converge_bound).await;
    let writes1 = host.writes_now().await;
    tokio::time::sleep(QUIET).await;
    let quiet_writes = host.writes_now().await - writes1;
    let stayed = summary_is_right(client).await;
    Cycle {
        kind,
        detail,
        converged,
        changes: world.changes.load(Relaxed) - changes0,
        failed_changes: world.failed.load(Relaxed) - failed0,
        writes: writes1 - writes0,
        quiet_writes,
        stayed,
        exits: host.sampled().await.exits - exits0,
        rss: host.take_rss().await,
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[Duration], p: f64) -> Option<Duration> {
    let rank = ((sorted.len() as f64) * p).ceil() as usize;
    sorted.get(rank.max(1) - 1).copied()
}

/// Prints the table per fault kind.
fn report(cycles: &[Cycle]) {
    println!(
        "| fault | injected | converged | p50 s | max s | changes (failed) | writes | writes/change | quiet writes | host exits | RSS min–max MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let mut by_kind: BTreeMap<Kind, Vec<&Cycle>> = BTreeMap::new();
    for c in cycles {
        by_kind.entry(c.kind).or_default().push(c);
    }
    for (kind, cs) in by_kind {
        let mut times: Vec<Duration> = cs.iter().filter_map(|c| c.converged).collect();
        times.sort();
        let secs =
            |d: Option<Duration>| d.map_or("-".into(), |d| format!("{:.1}", d.as_secs_f64()));
        let changes: u64 = cs.iter().map(|c| c.changes).sum();
        let failed: u64 = cs.iter().map(|c| c.failed_changes).sum();
        let writes: f64 = cs.iter().map(|c| c.writes).sum();
        let quiet = cs.iter().map(|c| c.quiet_writes).fold(0.0, f64::max);
        let exits: u32 = cs.iter().map(|c| c.exits).sum();
        let rss = cs.iter().flat_map(|c| c.rss.iter().copied());
        let (lo, hi) = rss.fold((u64::MAX, 0), |(lo, hi), r| (lo.min(r), hi.max(r)));
        println!(
            "| {} | {} | {} | {} | {} | {changes} ({failed}) | {writes:.0} | {:.2} | {quiet:.0} | {exits} | {:.0}–{:.0} |",
            kind.label(),
            cs.len(),
            times.len(),
            secs(percentile(&times, 0.5)),
            secs(times.last().copied()),
            writes / (changes.max(1) as f64),
            mib(if lo == u64::MAX { 0 } else { lo }),
            mib(hi),
        );
    }
}

async fn run(mode: Mode) -> Result<(), Vec<String>> {
    let guest = guest_wasm();
    let server = ApiServer::start(ApiServerConfig::default())
        .await
        .expect("embedded API server starts");
    let client = server.client().await.expect("admin client");
    for ns in [world::HOST_NS, world::PODS_NS] {
        wasmctrl_test_support::create_namespace(&client, ns).await;
    }
    let dir = tempfile::tempdir().expect("scratch dir");
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");

    let mut rng = fastrand::Rng::with_seed(mode.seed);
    let world = Arc::new(World::new(client.clone(), mode.nodes, mode.pods, mode.seed));
    let t = Instant::now();
    world.populate().await;
    println!(
        "soak: seed {}, {} pods over {} nodes created in {:.1} s",
        mode.seed,
        mode.pods,
        mode.nodes,
        t.elapsed().as_secs_f64()
    );

    let host = Host::start(&guest, &kubeconfig, world::HOST_NS, dir.path()).await;
    let Some(initial) = converge(&client, INITIAL_SYNC).await else {
        host.stop().await;
        return Err(vec![format!(
            "the host never produced the initial summary\n{}",
            host.log_tail(40)
        )]);
    };
    // The RSS baseline: the first sample of a settled process (the sampler
    // skips a process's first seconds). Without one the bound is unchecked,
    // so wait for it.
    let mut baseline = 0;
    for _ in 0..200 {
        host.writes_now().await;
        if let Some(&rss) = host.take_rss().await.last() {
            baseline = rss;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "soak: initial summary after {:.1} s, host RSS {:.0} MiB",
        initial.as_secs_f64(),
        mib(baseline)
    );

    let mut cycles = Vec::new();
    let start = Instant::now();
    let mut smoke = mode.smoke_faults.iter();
    loop {
        let kind = if mode.full {
            if start.elapsed() >= mode.duration {
                break;
            }
            mode.kinds[rng.usize(..mode.kinds.len())]
        } else {
            match smoke.next() {
                Some(k) => *k,
                None => break,
            }
        };
        let c = cycle(&mode, kind, &mut rng, &client, &world, &host).await;
        println!(
            "soak: {:>6.1}s {:<16} {:<22} converged {} changes {} writes {:.0} quiet {:.0} exits {}",
            start.elapsed().as_secs_f64(),
            kind.label(),
            c.detail,
            c.converged
                .map_or("NO".into(), |d| format!("{:.1}s", d.as_secs_f64())),
            c.changes,
            c.writes,
            c.quiet_writes,
            c.exits
        );
        cycles.push(c);
    }

    let final_ok = converge(&client, mode.converge_bound).await.is_some();
    let sampled = host.sampled().await;
    host.stop().await;
    report(&cycles);
    let peak = sampled.rss_all.iter().map(|(_, r)| *r).max().unwrap_or(0);
    let bound = (baseline as f64 * RSS_GROWTH_FACTOR) as u64 + RSS_SLACK_BYTES;
    println!(
        "soak: {} faults in {:.0} s; {} changes ({} failed under faults); host exits {}; RSS after sync {:.0} MiB, peak {:.0} MiB (bound {:.0} MiB); writes {:.0}",
        cycles.len(),
        start.elapsed().as_secs_f64(),
        world.changes.load(Relaxed),
        world.failed.load(Relaxed),
        sampled.exits,
        mib(baseline),
        mib(peak),
        mib(bound),
        sampled.writes
    );

    let mut problems = Vec::new();
    for c in &cycles {
        let label = format!("{} ({})", c.kind.label(), c.detail);
        if c.converged.is_none() {
            problems.push(format!(
                "{label}: no convergence within {:?}",
                mode.converge_bound
            ));
        }
        if c.quiet_writes > QUIET_WRITES_MAX {
            problems.push(format!(
                "{label}: {} writes while nothing changed (hot loop)",
                c.quiet_writes
            ));
        }
        if c.writes > WRITES_PER_CHANGE_MAX * c.changes as f64 + WRITES_SLACK {
            problems.push(format!(
                "{label}: {} writes for {} changes (write storm)",
                c.writes, c.changes
            ));
        }
        if c.converged.is_some() && !c.stayed {
            problems.push(format!(
                "{label}: the summary changed again after converging"
            ));
        }
    }
    if !final_ok {
        problems.push("the final summary is not the expected one".into());
    }
    if baseline == 0 {
        problems.push("no RSS sample of the host after the initial sync".into());
    } else if peak > bound {
        problems.push(format!(
            "host RSS peaked at {:.0} MiB, over the bound {:.0} MiB",
            mib(peak),
            mib(bound)
        ));
    }
    if !problems.is_empty() {
        println!("soak: host log tail:\n{}", host.log_tail(30));
    }
    drop(server);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

fn main() {
    let mode = Mode::from_args();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if let Err(problems) = rt.block_on(run(mode)) {
        for p in &problems {
            eprintln!("soak: FAIL: {p}");
        }
        std::process::exit(1);
    }
    println!("soak: ok");
}
