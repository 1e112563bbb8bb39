//! One system under test through the five phases, on a world of its own:
//! (2) a cold start with every child missing, until every child holds its
//! data and every App is `Ready`; the process stopped and started again:
//! (1) a restart with everything correct, until every key has been
//! reconciled once; (3) a churn of spec edits at a fixed rate, each timed
//! until its child and its status show it; (4) one change of
//! `shared-settings`, timed until every child follows; (5) idle across a
//! resync. It owns the subprocess and reads it only from outside (`/proc`,
//! its metrics or its stdout, the tracker's watches).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use kube::Client;

use crate::native_app::{PeerArgs, READ_LINE, RECONCILE_LINE, WRITE_LINE};
use crate::process::{
    cpu_time, free_port, metric_sum, percentiles, poll, scrape, start, status_bytes, Percentiles,
};
use crate::world::{self, Tracker, World};

/// The first start's name (logs, and the fresh guest cache).
const CREATE: &str = "create";
/// How often the bench looks at what it is waiting for.
const POLL: Duration = Duration::from_millis(20);
/// How long the edits may take to show, from the last one sent, before
/// those not seen count as missed (one deadline for all: missed edits do
/// not each wait this long).
const EDIT_TIMEOUT: Duration = Duration::from_secs(120);
/// After every key was reconciled at a restart, how long the bench keeps
/// counting writes (a correct restart sends none, late ones included).
pub const SETTLE: Duration = Duration::from_secs(2);
/// The smallest wait for a phase; larger worlds get [`PER_KEY_WAIT`] more
/// per App.
const PHASE_WAIT: Duration = Duration::from_secs(60);
const PER_KEY_WAIT: Duration = Duration::from_millis(30);

/// The guest-app build `wasmctrl` runs: the same App controller in each
/// language the SDKs support.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    /// `examples/guest-app` (`make guest`).
    Rust,
    /// `examples/guest-app-py`, componentize-py (`make guest-py`).
    Python,
    /// `examples/guest-app-ts`, componentize-qjs (`make guests-js`).
    TypeScript,
}

impl Lang {
    /// Every language, in table order.
    pub const ALL: [Lang; 3] = [Lang::Rust, Lang::Python, Lang::TypeScript];

    /// The built component, as the Makefile leaves it; panics naming the
    /// make target if it is missing.
    pub fn guest(self) -> PathBuf {
        let (path, make) = match self {
            Lang::Rust => return crate::args::guest("guest_app.wasm"),
            Lang::Python => ("guests-py/guest_app.wasm", "make guest-py"),
            Lang::TypeScript => ("guests-js/guest_app_ts.wasm", "make guests-js"),
        };
        let guest = crate::args::target_dir().join(path);
        assert!(
            guest.exists(),
            "{} is missing: run `{make}` first",
            guest.display()
        );
        guest
    }
}

/// The systems compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum System {
    /// kube-runtime `Controller` (`native_app`).
    Native,
    /// `wasmctrl run` with guest-app in one of the SDKs' languages.
    Wasmctrl(Lang),
    /// The least any App controller does (`floor_app`).
    Floor,
}

impl System {
    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            System::Native => "native",
            System::Wasmctrl(Lang::Rust) => "wasmctrl",
            System::Wasmctrl(Lang::Python) => "wasmctrl-py",
            System::Wasmctrl(Lang::TypeScript) => "wasmctrl-ts",
            System::Floor => "floor",
        }
    }

    /// The system `--systems` names `name`.
    pub fn parse(name: &str) -> Option<System> {
        [System::Native, System::Floor]
            .into_iter()
            .chain(Lang::ALL.map(System::Wasmctrl))
            .find(|s| s.name() == name)
    }
}

/// What is the same for every system in one run.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Where kubeconfigs and subprocess logs go.
    pub dir: PathBuf,
    /// The `wasmctrl` binary.
    pub wasmctrl: PathBuf,
    /// Resync period both systems get.
    pub resync: Duration,
    /// wasmctrl's client-side limit (`--kube-api-qps`, `--kube-api-burst`);
    /// kube-rs has none.
    pub qps: f64,
    /// See `qps`.
    pub burst: u32,
    /// wasmctrl's `--workers` (None: the host's default).
    pub workers: Option<usize>,
    /// Spec edits in the churn.
    pub edits: usize,
    /// Edits per second.
    pub rate: f64,
    /// How long idle writes are counted (longer than `resync`).
    pub idle: Duration,
    /// Log every reconcile's key (the smoke run: each key's reconciles are
    /// counted).
    pub per_key: bool,
}

/// What a system reports doing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counts {
    /// Reconciles.
    pub reconciles: f64,
    /// Write requests sent (wasmctrl: `wasmctrl_writes_total`; native: the
    /// applies, status applies and deletes it printed).
    pub writes: f64,
    /// Reconciles per key, when `Setup::per_key`.
    pub per_key: BTreeMap<String, usize>,
    /// wasmctrl: seconds inside guest reconcile calls, and their number
    /// (`wasmctrl_guest_reconcile_seconds`).
    pub guest_seconds: f64,
    /// See `guest_seconds`.
    pub guest_calls: f64,
    /// wasmctrl: seconds creating guest instances, and their number
    /// (`wasmctrl_guest_instantiate_seconds`).
    pub instantiate_seconds: f64,
    /// See `instantiate_seconds`.
    pub instantiations: f64,
}

impl std::ops::Sub for &Counts {
    type Output = Counts;
    fn sub(self, rhs: &Counts) -> Counts {
        let mut per_key = self.per_key.clone();
        for (k, n) in &rhs.per_key {
            if let Some(v) = per_key.get_mut(k) {
                *v -= n;
            }
        }
        per_key.retain(|_, n| *n > 0);
        Counts {
            reconciles: self.reconciles - rhs.reconciles,
            writes: self.writes - rhs.writes,
            per_key,
            guest_seconds: self.guest_seconds - rhs.guest_seconds,
            guest_calls: self.guest_calls - rhs.guest_calls,
            instantiate_seconds: self.instantiate_seconds - rhs.instantiate_seconds,
            instantiations: self.instantiations - rhs.instantiations,
        }
    }
}

/// A phase's cost: wall time, the system's CPU, its write requests and the
/// new versions controllers wrote.
#[derive(Clone, Debug, Default)]
pub struct Phase {
    /// Wall time.
    pub took: Duration,
    /// The system's utime + stime.
    pub cpu: Duration,
    /// This process's (API server, tracker, bench) CPU over the same span.
    pub server_cpu: Duration,
    /// What the system counted.
    pub counts: Counts,
    /// New versions of children and App status/finalizers.
    pub versions: usize,
}

/// Everything measured of one system on one world.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Which system.
    pub system: System,
    /// Apps.
    pub apps: usize,
    /// (2) cold start with every child missing.
    pub create: Phase,
    /// Peak RSS of the first process.
    pub create_hwm: u64,
    /// (1) restart with everything correct: until every key reconciled,
    /// then [`SETTLE`] more for the counts.
    pub restart: Phase,
    /// Peak RSS of the second process after the restart.
    pub restart_hwm: u64,
    /// Keys the restart reconciled (per key, when counted).
    pub restart_keys: usize,
    /// From the restarted process's start until its first reconcile was
    /// counted (polled every [`POLL`]): loading the guest (from the
    /// compiled cache), syncing the caches, the first call.
    pub restart_first: Duration,
    /// (3) the churn.
    pub churn: Phase,
    /// Edit → child and status show it.
    pub latency: Percentiles,
    /// Edits never seen within `EDIT_TIMEOUT` of the last one sent.
    pub missed: usize,
    /// (4) `shared-settings` changed → every child follows.
    pub fanout: Phase,
    /// (5) idle across a resync.
    pub idle: Phase,
    /// Peak RSS of the second process at the end.
    pub final_hwm: u64,
    /// Peak RSS of the second process before the shared change (after the
    /// churn).
    pub churn_hwm: u64,
    /// RSS of the second process at the end.
    pub final_rss: u64,
}

/// A running system and where to read its counts.
struct Running {
    child: Child,
    system: System,
    stdout: PathBuf,
    /// How far `stdout` was read, and what it said so far.
    stdout_seen: std::sync::Mutex<(usize, Counts)>,
    stderr: PathBuf,
    metrics_port: u16,
    per_key: bool,
}

/// The tracker's watches, aborted when the run ends: a run that panics
/// (a phase that never converges) leaves none retrying against its
/// stopped server.
struct Aborting(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Aborting {
    fn drop(&mut self) {
        for w in &self.0 {
            w.abort();
        }
    }
}

/// A run that panics (a phase that never converges) leaves no system
/// running behind it.
impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Running {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Panics, naming the system and `phase` with the end of its log, if
    /// the process has exited (a bad flag, a crash): the run says so at
    /// once instead of waiting out the phase.
    fn alive(&self, phase: &str) {
        let state = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()))
            .ok()
            .and_then(|stat| {
                let at = stat.rfind(')')? + 2;
                stat.get(at..at + 1).map(str::to_string)
            });
        if matches!(state.as_deref(), None | Some("Z" | "X")) {
            panic!(
                "{} exited during {phase}; its log ends:\n{}",
                self.system.name(),
                tail(&self.stderr)
            );
        }
    }

    async fn counts(&self) -> Counts {
        match self.system {
            System::Native | System::Floor => {
                // Only the lines added since the last look are read: the
                // bench polls this while the peer prints tens of thousands.
                let mut seen = self.stdout_seen.lock().expect("stdout counts lock");
                let (offset, counts) = &mut *seen;
                let Ok(bytes) = std::fs::read(&self.stdout) else {
                    return counts.clone();
                };
                let fresh = &bytes[(*offset).min(bytes.len())..];
                // A line still being written waits for the next look.
                let complete = fresh.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
                for line in String::from_utf8_lossy(&fresh[..complete]).lines() {
                    if line == WRITE_LINE {
                        counts.writes += 1.0;
                    } else if let Some(key) = line
                        .strip_prefix(RECONCILE_LINE)
                        .and_then(|k| k.strip_prefix(' '))
                    {
                        counts.reconciles += 1.0;
                        if self.per_key {
                            *counts.per_key.entry(key.to_string()).or_default() += 1;
                        }
                    } else if line != READ_LINE {
                        eprintln!("perobj: native printed {line:?}");
                    }
                }
                *offset += complete;
                counts.clone()
            }
            System::Wasmctrl(_) => {
                let text = scrape(self.metrics_port).await.unwrap_or_default();
                // Every write made for the guest (applies, status applies,
                // finalizer patches, deletes, events). Not the
                // SelfSubjectAccessReviews it POSTs at start to check its
                // own permissions: they write nothing.
                let writes = metric_sum(&text, "wasmctrl_writes_total", &[]);
                let mut per_key = BTreeMap::new();
                if self.per_key {
                    let log = std::fs::read_to_string(&self.stderr).unwrap_or_default();
                    for line in log.lines().map(plain).filter(|l| l.contains("guest call")) {
                        if let Some(key) = line
                            .split_once(" key=")
                            .and_then(|(_, rest)| rest.split_once('}'))
                            .map(|(key, _)| key)
                        {
                            *per_key.entry(key.to_string()).or_default() += 1;
                        }
                    }
                }
                let sum = |name: &str| metric_sum(&text, name, &[]);
                Counts {
                    reconciles: sum("controller_runtime_reconcile_total"),
                    writes,
                    per_key,
                    guest_seconds: sum("wasmctrl_guest_reconcile_seconds_sum"),
                    guest_calls: sum("wasmctrl_guest_reconcile_seconds_count"),
                    instantiate_seconds: sum("wasmctrl_guest_instantiate_seconds_sum"),
                    instantiations: sum("wasmctrl_guest_instantiate_seconds_count"),
                }
            }
        }
    }

    /// Stops the process; panics with its log if it had exited on its own.
    fn stop(mut self) {
        let exited = self.child.try_wait().ok().flatten();
        let _ = self.child.kill();
        let _ = self.child.wait();
        assert!(
            exited.is_none(),
            "{} exited during the run ({exited:?}); its log ends:\n{}",
            self.system.name(),
            tail(&self.stderr)
        );
    }
}

/// `line` without ANSI colour sequences (`ESC [ ... m`).
fn plain(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|&c| c == 'm');
        } else {
            out.push(c);
        }
    }
    out
}

fn tail(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// Starts `system` for `phase` of the world of `apps` Apps. wasmctrl's
/// compiled-guest cache is `dir/cache-NAME-APPS`, emptied for the first
/// start (phase (2) includes compiling the guest) and kept for the restart
/// (phase (1) loads it compiled, as a restarted host does).
fn spawn(
    system: System,
    setup: &Setup,
    kubeconfig: &std::path::Path,
    apps: usize,
    phase: &str,
) -> Running {
    let run = format!("{apps}-{phase}");
    let cache = setup.dir.join(format!("cache-{}-{apps}", system.name()));
    if phase == CREATE {
        let _ = std::fs::remove_dir_all(&cache);
    }
    let stem = setup.dir.join(format!("{}-{run}", system.name()));
    let stderr = stem.with_extension("log");
    let stdout = stem.with_extension("out");
    let metrics_port = free_port();
    let cmd = match system {
        System::Native | System::Floor => {
            let mut cmd = Command::new(std::env::current_exe().expect("own executable"));
            let peer = match system {
                System::Floor => crate::floor_app::PEER_FLAG,
                _ => crate::native_app::PEER_FLAG,
            };
            cmd.args(
                PeerArgs {
                    kubeconfig: kubeconfig.to_path_buf(),
                    resync: setup.resync,
                }
                .to_args(peer),
            );
            cmd
        }
        System::Wasmctrl(lang) => {
            let mut cmd = Command::new(&setup.wasmctrl);
            cmd.arg("run")
                .arg("--guest")
                .arg(lang.guest())
                .arg("--guest-cache-dir")
                .arg(cache)
                .arg("--kubeconfig")
                .arg(kubeconfig)
                .args(["--namespace", world::NAMESPACE])
                .arg("--resync-seconds")
                .arg(setup.resync.as_secs().to_string())
                .arg("--kube-api-qps")
                .arg(setup.qps.to_string())
                .arg("--kube-api-burst")
                .arg(setup.burst.to_string())
                .args(
                    setup
                        .workers
                        .iter()
                        .flat_map(|w| ["--workers".to_string(), w.to_string()]),
                )
                .arg("--metrics-addr")
                .arg(format!("127.0.0.1:{metrics_port}"))
                .args(["--health-addr", "127.0.0.1:0"]);
            cmd
        }
    };
    let log = match (system, setup.per_key) {
        (System::Wasmctrl(_), true) => "warn,wasmctrl::controller::reconcile=debug",
        _ => "warn",
    };
    let child = start(cmd, system.name(), log, &stdout, &stderr);
    Running {
        child,
        system,
        stdout,
        stdout_seen: Default::default(),
        stderr,
        metrics_port,
        per_key: setup.per_key,
    }
}

/// Polls `done` until it holds or `timeout` passes.
async fn until(timeout: Duration, mut done: impl AsyncFnMut() -> bool) -> bool {
    poll(POLL, timeout, async || done().await.then_some(()))
        .await
        .is_some()
}

/// Measures a phase from `start` (counts, CPU) to now.
struct Meter {
    at: Instant,
    cpu: Duration,
    server_cpu: Duration,
    counts: Counts,
}

impl Meter {
    async fn start(running: &Running) -> Meter {
        Meter {
            at: Instant::now(),
            cpu: cpu_time(running.pid()).unwrap_or_default(),
            server_cpu: cpu_time(std::process::id()).unwrap_or_default(),
            counts: running.counts().await,
        }
    }

    async fn stop(&self, running: &Running, tracker: &Tracker, end: Instant) -> Phase {
        let now = Instant::now();
        Phase {
            took: end - self.at,
            cpu: cpu_time(running.pid())
                .unwrap_or_default()
                .saturating_sub(self.cpu),
            server_cpu: cpu_time(std::process::id())
                .unwrap_or_default()
                .saturating_sub(self.server_cpu),
            counts: &running.counts().await - &self.counts,
            versions: tracker.writes_between(self.at, now),
        }
    }
}

/// How often phase (2) checks convergence. The check walks every App
/// under the tracker's lock, so it runs less often with more of them
/// (every 24 ms at 1,000 Apps, 220 ms at 50,000): every 20 ms at 50,000
/// Apps, `World::holds` alone took 13.7% of the bench process's samples,
/// beside the API server. The phase's time is late by at most one
/// interval.
fn converge_poll(apps: usize) -> Duration {
    POLL + Duration::from_micros(4 * apps as u64)
}

fn phase_wait(apps: usize) -> Duration {
    PHASE_WAIT + PER_KEY_WAIT * apps as u32
}

/// Runs `system` through the five phases on `world` (fresh, served at
/// `kubeconfig`).
pub async fn run(
    client: &Client,
    kubeconfig: &std::path::Path,
    world: &mut World,
    setup: &Setup,
    system: System,
) -> Outcome {
    let n = world.apps();
    let name = system.name();
    let (tracker, watches) = Tracker::start(client).await;
    let watches = Aborting(watches);

    // (2) Every child missing.
    let first = spawn(system, setup, kubeconfig, n, CREATE);
    let meter = Meter::start(&first).await;
    let converged = poll(converge_poll(n), phase_wait(n), async || {
        first.alive("(2)");
        (tracker.converged(world) == n).then_some(())
    })
    .await
    .is_some();
    assert!(
        converged,
        "{name}: {} of {n} Apps converged, {} children; its log ends:\n{}",
        tracker.converged(world),
        tracker.children(),
        tail(&first.stderr)
    );
    let create = meter.stop(&first, &tracker, Instant::now()).await;
    let create_hwm = status_bytes(first.pid(), "VmHWM").unwrap_or(0);
    eprintln!(
        "perobj: {name} created {n} children and Ready statuses in {:.2} s (CPU {:.2} s)",
        create.took.as_secs_f64(),
        create.cpu.as_secs_f64()
    );
    first.stop();
    // Whatever the stopped process had in flight has landed by now.
    tokio::time::sleep(SETTLE).await;

    // (1) Restart with everything correct.
    let running = spawn(system, setup, kubeconfig, n, "restart");
    let meter = Meter::start(&running).await;
    let mut restart_first = None;
    let reconciled = until(phase_wait(n), async || {
        running.alive("(1)");
        let c = running.counts().await;
        if restart_first.is_none() && c.reconciles > 0.0 {
            restart_first = Some(meter.at.elapsed());
        }
        if setup.per_key {
            c.per_key.len() >= n
        } else {
            c.reconciles >= n as f64
        }
    })
    .await;
    assert!(
        reconciled,
        "{name}: the restart never reconciled all {n} keys; its log ends:\n{}",
        tail(&running.stderr)
    );
    let all_reconciled = Instant::now();
    let cpu_at_reconciled = cpu_time(running.pid()).unwrap_or_default();
    let restart_hwm = status_bytes(running.pid(), "VmHWM").unwrap_or(0);
    tokio::time::sleep(SETTLE).await;
    let mut restart = meter.stop(&running, &tracker, all_reconciled).await;
    restart.cpu = cpu_at_reconciled.saturating_sub(meter.cpu);
    let restart_keys = restart.counts.per_key.len();
    eprintln!(
        "perobj: {name} restarted over {n} correct Apps: all reconciled in {:.2} s, {} write requests, {} new versions",
        restart.took.as_secs_f64(),
        restart.counts.writes,
        restart.versions
    );

    // (3) Churn: edits of distinct Apps at `rate`.
    let meter = Meter::start(&running).await;
    let period = Duration::from_secs_f64(1.0 / setup.rate);
    let mut edits = Vec::with_capacity(setup.edits);
    for k in 0..setup.edits {
        tokio::time::sleep_until((meter.at + period * k as u32).into()).await;
        let i = (k * 7919) % n;
        let message = format!("edit {k} by {name}");
        let sent = Instant::now();
        let generation = world::edit(client, world, i, message.clone()).await;
        edits.push((sent, i, message, generation));
    }
    let mut latencies = Vec::with_capacity(edits.len());
    let mut missed = 0;
    let deadline = Instant::now() + EDIT_TIMEOUT;
    for (sent, i, message, generation) in &edits {
        let app = world::app_name(*i);
        let mut seen = None;
        until(
            deadline.saturating_duration_since(Instant::now()),
            async || {
                running.alive("(3)");
                seen = tracker.edit_seen(&app, *sent, message, *generation);
                seen.is_some()
            },
        )
        .await;
        match seen {
            Some(at) => latencies.push(at - *sent),
            None => missed += 1,
        }
    }
    let churn = meter.stop(&running, &tracker, Instant::now()).await;

    let churn_hwm = status_bytes(running.pid(), "VmHWM").unwrap_or(0);

    // (4) One shared input, every App.
    let meter = Meter::start(&running).await;
    let banner = format!("banner for {name}");
    world::set_banner(client, world, banner.clone()).await;
    let mut followed = None;
    until(phase_wait(n), async || {
        running.alive("(4)");
        followed = tracker.banner_everywhere(meter.at, &banner, n);
        followed.is_some()
    })
    .await;
    let fanout_end = followed.unwrap_or_else(|| {
        panic!(
            "{name}: the banner never reached every child; its log ends:\n{}",
            tail(&running.stderr)
        )
    });
    let fanout = meter.stop(&running, &tracker, fanout_end).await;

    // (5) Idle across a resync.
    let meter = Meter::start(&running).await;
    tokio::time::sleep(setup.idle).await;
    let idle = meter.stop(&running, &tracker, Instant::now()).await;
    let final_hwm = status_bytes(running.pid(), "VmHWM").unwrap_or(0);
    let final_rss = status_bytes(running.pid(), "VmRSS").unwrap_or(0);

    running.stop();
    drop(watches);
    Outcome {
        system,
        apps: n,
        create,
        create_hwm,
        restart,
        restart_hwm,
        restart_keys,
        restart_first: restart_first.unwrap_or_default(),
        churn,
        latency: percentiles(&latencies),
        missed,
        fanout,
        idle,
        final_hwm,
        churn_hwm,
        final_rss,
    }
}

/// Keys reconciled more than once in `counts` (the smoke's check of a
/// restart), at most a few, for a failure message.
pub fn repeated(counts: &Counts) -> BTreeSet<String> {
    counts
        .per_key
        .iter()
        .filter(|(_, n)| **n > 1)
        .take(5)
        .map(|(k, _)| k.clone())
        .collect()
}
