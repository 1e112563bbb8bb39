//! Replicas (issue 45): the per-object bench's App world (`perobj`'s
//! `world.rs`: N Apps in one namespace and `shared-settings`) under 1 and
//! under 3 `wasmctrl run --leader-elect=per-guest --shard-buckets B`
//! replicas, each replica in a CPU cgroup of its own capped at `--cpu`
//! cores (0.5: half of one core; cgroup v1 `cpu.cfs_quota_us` over the
//! default 100,000 µs period, or v2 `cpu.max`; the bench refuses to run
//! if it cannot cap), against one embedded API server in this process
//! (uncapped: its CPU is measured and printed). For each replica count, on
//! a fresh server:
//!
//! - (a) cold start with every child missing, until every App converged;
//! - (b) **churn throughput**: a burst of `--burst` spec edits of distinct
//!   Apps, sent as fast as the bench can; the time from the first edit
//!   sent until the last one's child and `Ready` status at its generation
//!   show it; throughput = edits / that time;
//! - (c) **restart**: every replica stopped (SIGTERM, so its Leases are
//!   released), `shared-settings` changed (every child is stale), as many
//!   fresh replicas started: the time from their start until every child
//!   holds the new banner;
//! - (d) with more than one replica, **chaos** ("chaos duck"): edits at
//!   `--chaos-rate` per second for `--chaos-seconds`, one replica
//!   SIGKILLed every `--kill-every` seconds (the oldest first) and a new
//!   one (a new identity) started in its cgroup at once: every edit must
//!   converge; each kill's **takeover** is the time until every bucket the
//!   victim held is held by another replica (Leases listed every 100 ms);
//!   `--chaos-seconds 0` leaves it out;
//!
//! and, over the whole run, **double writes by identity**, from the
//! server's write log (each stored write with its resourceVersion and
//! `User-Agent`, which names the replica) and a watch of the bucket
//! Leases (each version's holder, by resourceVersion): (1) writes of an
//! App's child, status or finalizers by a replica that did not hold the
//! App's bucket Lease at that resourceVersion; (2) two writes of one App
//! by two identities less than the handover window (lease duration −
//! renew deadline) apart with no release of the bucket's Lease between
//! them (a released bucket is taken at once, after its drain). Both must
//! be 0.
//!
//! `--per-guest` runs instead: 6 println guests on 3 capped replicas, no
//! sharding: the time until each leads 2, then one SIGKILLed: the time
//! until its guests are led by the others.
//!
//! Run (as root): `make guest && cargo bench -p wasmctrl --features
//! wasmctrl/dev-server --bench replicas -- --apps 20000 --replicas 1,3`
//! (also `--cpu 0.5`, `--buckets 12`, `--burst 4000`, `--workers 8`,
//! `--qps 100000`, `--chaos-seconds 80 --kill-every 20 --chaos-rate 20`,
//! `--standby cold` (`warm`: every replica caches every object);
//! `REPLICAS_LOGS=DIR` keeps the replicas' logs, `REPLICAS_LOG=info` logs
//! more than warnings). Under `cargo test
//! --all-targets` it only says where its smoke world is
//! (`tests/replicas.rs`): caps need root.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

// The shared helpers serve several benches; this one uses part of them.
#[allow(dead_code)]
#[path = "../shared/args.rs"]
mod args;
mod cgroup;
#[allow(dead_code)]
#[path = "../shared/process.rs"]
mod process;
#[allow(dead_code)] // the bench reads part of what perobj's world offers
#[path = "../perobj/world.rs"]
mod world;

/// What `world.rs` takes from perobj's native peer: the names guest-app
/// uses (`examples/guest-app`).
mod native_app {
    pub const FINALIZER: &str = "apps.example.com/cleanup";
    pub const SHARED_SETTINGS: &str = "shared-settings";
}

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Child;

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use wasmctrl_apiserver::{ApiServer, ApiServerConfig, WriteLog};
use wasmctrl_test_support::leases::BucketHistory;

use cgroup::CpuCap;
use process::{cpu_time, percentiles, poll, Percentiles};
use world::{Tracker, World};

/// The Leases' name prefix (`--lease-name`).
const GROUP: &str = "bench";
/// The election's timings: the host's defaults.
const LEASE: Duration = Duration::from_secs(15);
const RENEW: Duration = Duration::from_secs(10);
const RETRY: Duration = Duration::from_secs(2);
/// How long any phase may take before the run fails.
const PHASE_WAIT: Duration = Duration::from_secs(900);
/// How long edits may take to show after the last one was sent.
const EDIT_TIMEOUT: Duration = Duration::from_secs(180);
/// How often the bench looks at what it waits for.
const POLL: Duration = Duration::from_millis(50);
/// Edits in flight at once in the burst.
const BURST_CONCURRENCY: usize = 32;
/// The println guests of `--per-guest`.
const GUESTS: [&str; 6] = ["g1", "g2", "g3", "g4", "g5", "g6"];

/// What is the same for every replica count.
#[derive(Clone, Debug)]
struct Setup {
    dir: PathBuf,
    wasmctrl: PathBuf,
    cpu: f64,
    buckets: u32,
    workers: usize,
    qps: f64,
    burst: usize,
    chaos: Duration,
    kill_every: Duration,
    chaos_rate: f64,
    /// `--standby` of the replicas: `cold` (a sharded guest's caches hold
    /// the buckets a replica leads) or `warm` (every object).
    standby: String,
}

/// One replica: its process, in slot `slot`'s cgroup.
struct Replica {
    id: String,
    child: Child,
    slot: usize,
    log: PathBuf,
}

impl Replica {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn alive(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "replica {} exited ({status}); its log ends:\n{}",
                self.id,
                tail(&self.log)
            );
        }
    }

    /// SIGTERM, then waits for the exit (the host drains, then releases
    /// its Leases).
    fn terminate(mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
        let _ = self.child.wait();
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// The replicas' cgroups, one per slot.
struct Slots {
    caps: Vec<CpuCap>,
}

impl Slots {
    fn new(n: usize, cpu: f64) -> Slots {
        let caps = (0..n)
            .map(|i| {
                CpuCap::create(&format!("wasmctrl-bench-{i}"), cpu)
                    .unwrap_or_else(|e| panic!("replicas bench: {e}"))
            })
            .collect();
        Slots { caps }
    }

    fn throttled(&self) -> (u64, Duration) {
        self.caps
            .iter()
            .map(CpuCap::throttled)
            .fold((0, Duration::ZERO), |(n, t), (n2, t2)| (n + n2, t + t2))
    }
}

/// Starts replica `id` in slot `slot` with `guest_flags`.
fn spawn(
    setup: &Setup,
    slots: &Slots,
    slot: usize,
    id: &str,
    kubeconfig: &Path,
    namespace: &str,
    guest_flags: &[String],
) -> Replica {
    let cap = &slots.caps[slot];
    let log = setup.dir.join(format!("{id}.log"));
    let mut cmd = cap.command(&setup.wasmctrl);
    cmd.arg("run")
        .args(guest_flags)
        .arg("--guest-cache-dir")
        .arg(setup.dir.join(format!("cache-{slot}")))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--namespace", namespace])
        .args(["--resync-seconds", "3600"])
        .arg("--kube-api-qps")
        .arg(setup.qps.to_string())
        .arg("--kube-api-burst")
        .arg((setup.qps as u32).to_string())
        .arg("--workers")
        .arg(setup.workers.to_string())
        .args(["--metrics-addr", "127.0.0.1:0"])
        .args(["--health-addr", "127.0.0.1:0"])
        .arg("--leader-elect=per-guest")
        .arg(format!("--lease-name={GROUP}"))
        .arg(format!("--identity={id}"))
        .arg(format!("--lease-duration-seconds={}", LEASE.as_secs()))
        .arg(format!("--renew-deadline-seconds={}", RENEW.as_secs()))
        .arg(format!("--retry-period-seconds={}", RETRY.as_secs()))
        .env_remove("POD_NAME");
    let out = setup.dir.join(format!("{id}.out"));
    // `REPLICAS_LOG=info` (say) logs more than warnings.
    let level = std::env::var("REPLICAS_LOG").unwrap_or_else(|_| "warn".into());
    let child = process::start(cmd, id, &level, &out, &log);
    // The shell moves itself into the cgroup before it execs wasmctrl.
    let capped = std::iter::repeat_with(|| {
        std::thread::sleep(Duration::from_millis(5));
        cap.holds(child.id())
    })
    .take(400)
    .any(|held| held);
    assert!(
        capped,
        "replica {id} (pid {}) is not in its CPU cgroup; its log:\n{}",
        child.id(),
        tail(&log)
    );
    Replica {
        id: id.to_string(),
        child,
        slot,
        log,
    }
}

/// The App guest's flags.
fn app_flags(setup: &Setup) -> Vec<String> {
    vec![
        "--guest".into(),
        args::guest("guest_app.wasm").display().to_string(),
        format!("--shard-buckets={}", setup.buckets),
        format!("--standby={}", setup.standby),
    ]
}

/// Every bucket's holder ("" when free), by bucket.
async fn bucket_holders(client: &Client) -> BTreeMap<u32, String> {
    let api: Api<Lease> = Api::namespaced(client.clone(), world::NAMESPACE);
    let Ok(list) = api
        .list(&ListParams::default().labels(&format!(
            "wasmctrl.dev/lease-group={GROUP},wasmctrl.dev/guest=app"
        )))
        .await
    else {
        return BTreeMap::new();
    };
    list.items
        .into_iter()
        .filter_map(|l| {
            let bucket = l.labels().get("wasmctrl.dev/bucket")?.parse().ok()?;
            let holder = l.spec?.holder_identity.unwrap_or_default();
            Some((bucket, holder))
        })
        .collect()
}

/// Each holder's count of buckets.
fn spread(holders: &BTreeMap<u32, String>) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for h in holders.values().filter(|h| !h.is_empty()) {
        *counts.entry(h.clone()).or_default() += 1;
    }
    counts
}

/// Sum of the replicas' CPU.
fn cpu_of(replicas: &[Replica]) -> Duration {
    replicas.iter().filter_map(|r| cpu_time(r.pid())).sum()
}

fn own_cpu() -> Duration {
    cpu_time(std::process::id()).unwrap_or_default()
}

/// One phase's wall time, replicas' CPU and this process's (API server,
/// watches, bench) CPU.
#[derive(Clone, Copy, Debug, Default)]
struct Cost {
    took: Duration,
    cpu: Duration,
    server_cpu: Duration,
    throttled: Duration,
}

struct Meter {
    at: Instant,
    cpu: Duration,
    server: Duration,
    throttled: Duration,
}

impl Meter {
    fn start(replicas: &[Replica], slots: &Slots) -> Meter {
        Meter {
            at: Instant::now(),
            cpu: cpu_of(replicas),
            server: own_cpu(),
            throttled: slots.throttled().1,
        }
    }

    fn stop(&self, replicas: &[Replica], slots: &Slots, end: Instant) -> Cost {
        Cost {
            took: end - self.at,
            cpu: cpu_of(replicas).saturating_sub(self.cpu),
            server_cpu: own_cpu().saturating_sub(self.server),
            throttled: slots.throttled().1.saturating_sub(self.throttled),
        }
    }
}

/// The replica a write came from: its `User-Agent`'s `(IDENTITY)`.
fn identity(user_agent: &str) -> Option<&str> {
    let rest = user_agent.strip_prefix("wasmctrl/")?;
    let (_, id) = rest.split_once(" (")?;
    id.strip_suffix(')')
}

/// The double writes of a run.
#[derive(Clone, Copy, Debug, Default)]
struct DoubleWrites {
    /// Writes of Apps (child, status, finalizers) by a replica.
    checked: usize,
    /// Of them, by a replica not holding the App's bucket Lease at that
    /// resourceVersion.
    not_holder: usize,
    /// Two writes of one App by two identities less than the handover
    /// window apart, its bucket's Lease not released between them (a
    /// release hands the bucket over at once, after the drain).
    within_window: usize,
    /// Writes of one App by a new identity (handovers seen per key).
    identity_changes: usize,
}

/// Checks every write of the run's log against the Leases.
fn double_writes(log: &WriteLog, leases: &BucketHistory, buckets: u32) -> DoubleWrites {
    let window = LEASE - RENEW;
    let mut by_app: HashMap<String, Vec<(u64, Instant, String)>> = HashMap::new();
    let mut out = DoubleWrites::default();
    for w in log.records() {
        let Some(id) = identity(&w.user_agent) else {
            continue;
        };
        let app_write = w.namespace == world::NAMESPACE
            && w.name.starts_with("app-")
            && matches!(w.resource.as_str(), "configmaps" | "apps" | "apps/status");
        if !app_write {
            continue;
        }
        out.checked += 1;
        let key = format!("{}/{}", w.namespace, w.name);
        let bucket = wasmctrl::leader_per_guest::bucket_of(&key, buckets);
        let holder = leases.holder_before(bucket, w.rv);
        if holder != id {
            out.not_holder += 1;
            if out.not_holder <= 5 {
                eprintln!(
                    "replicas: {key} ({}) written by {id} at rv {} while bucket {bucket} was held by {holder:?}",
                    w.resource, w.rv
                );
            }
        }
        by_app
            .entry(w.name.clone())
            .or_default()
            .push((w.rv, w.at, id.to_string()));
    }
    for (name, writes) in &mut by_app {
        writes.sort_by_key(|(rv, _, _)| *rv);
        let bucket =
            wasmctrl::leader_per_guest::bucket_of(&format!("{}/{name}", world::NAMESPACE), buckets);
        for pair in writes.windows(2) {
            let ((rv0, t0, a), (rv1, t1, b)) = (&pair[0], &pair[1]);
            if a != b {
                out.identity_changes += 1;
                if t1.saturating_duration_since(*t0) < window
                    && !leases.released_between(bucket, *rv0, *rv1)
                {
                    out.within_window += 1;
                }
            }
        }
    }
    out
}

/// Everything measured for one replica count.
#[derive(Clone, Debug, Default)]
struct Outcome {
    replicas: usize,
    apps: usize,
    cold: Cost,
    burst: Cost,
    restart: Cost,
    /// From the restarted replicas' start until every bucket was held.
    restart_buckets: Duration,
    /// From the burst's first edit sent until the last was answered (the
    /// bench's own floor for the burst).
    burst_sent: Duration,
    /// From the restarted replicas' start until the buckets were spread
    /// evenly (each replica its share), and the spread when all were held.
    restart_even: Duration,
    restart_first_spread: String,
    chaos: Option<Chaos>,
    doubles: DoubleWrites,
}

#[derive(Clone, Debug, Default)]
struct Chaos {
    edits: usize,
    missed: usize,
    latency: Percentiles,
    kills: usize,
    /// Each kill's takeover time.
    takeovers: Vec<Duration>,
    cost: Cost,
}

/// Waits until `done` holds, checking that every replica is alive.
async fn until(
    what: &str,
    replicas: &mut [Replica],
    timeout: Duration,
    mut done: impl AsyncFnMut() -> bool,
) -> Instant {
    let found = poll(POLL, timeout, async || {
        for r in replicas.iter_mut() {
            r.alive();
        }
        done().await.then(Instant::now)
    })
    .await;
    found.unwrap_or_else(|| panic!("replicas bench: {what} within {timeout:?}"))
}

/// Sets App `i`'s `spec.message`; its new generation.
async fn edit(client: &Client, i: usize, message: &str) -> i64 {
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client.clone(), world::NAMESPACE, &world::app_resource());
    let patch = json!({"spec": {"message": message}});
    let app = api
        .patch(
            &world::app_name(i),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .expect("App edited");
    app.metadata.generation.expect("an App has a generation")
}

/// Waits for every edit `(i, message, generation, sent)`; the latencies of
/// those seen and the count of those missed.
async fn await_edits(
    tracker: &Tracker,
    edits: &[(usize, String, i64, Instant)],
) -> (Vec<(Duration, Instant)>, usize) {
    let deadline = Instant::now() + EDIT_TIMEOUT;
    let mut seen = vec![None; edits.len()];
    loop {
        for (k, (i, message, generation, sent)) in edits.iter().enumerate() {
            if seen[k].is_none() {
                seen[k] = tracker
                    .edit_seen(&world::app_name(*i), *sent, message, *generation)
                    .map(|at| (at - *sent, at));
            }
        }
        if seen.iter().all(Option::is_some) || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    let missed = seen.iter().filter(|s| s.is_none()).count();
    (seen.into_iter().flatten().collect(), missed)
}

/// One replica count through (a)–(d) on a fresh server.
async fn run_replicas(setup: &Setup, apps: usize, n: usize) -> Outcome {
    let server = ApiServer::start(ApiServerConfig::default().write_log(true))
        .await
        .expect("embedded API server starts");
    let kubeconfig = setup.dir.join(format!("kubeconfig-{n}"));
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let client = server.client().await.expect("a client");
    world::install_crd(&client).await;
    let t = Instant::now();
    let mut world = world::populate(&client, apps).await;
    eprintln!(
        "replicas: {apps} Apps created in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let (tracker, watches) = Tracker::start(&client).await;
    let (leases, lease_watch) = BucketHistory::watch(
        &client,
        world::NAMESPACE,
        &format!("wasmctrl.dev/lease-group={GROUP},wasmctrl.dev/guest=app"),
    );
    let slots = Slots::new(n, setup.cpu);
    let flags = app_flags(setup);
    let mut next_id = 0;
    let mut start = |slot: usize| {
        let id = format!("r{n}-{next_id}");
        next_id += 1;
        spawn(
            setup,
            &slots,
            slot,
            &id,
            &kubeconfig,
            world::NAMESPACE,
            &flags,
        )
    };
    let mut out = Outcome {
        replicas: n,
        apps,
        ..Outcome::default()
    };

    // (a) Cold start.
    let mut replicas: Vec<Replica> = (0..n).map(&mut start).collect();
    let meter = Meter::start(&replicas, &slots);
    let end = until(
        "every App converges (cold)",
        &mut replicas,
        PHASE_WAIT,
        async || tracker.converged(&world) == apps,
    )
    .await;
    out.cold = meter.stop(&replicas, &slots, end);
    eprintln!(
        "replicas: {n}: cold start converged in {:.1} s",
        out.cold.took.as_secs_f64()
    );
    // The buckets settle before the burst: a replica that joined late
    // takes its share.
    let want = setup.buckets as usize / n;
    until(
        "the buckets spread evenly",
        &mut replicas,
        PHASE_WAIT,
        async || {
            let h = bucket_holders(&client).await;
            let s = spread(&h);
            h.len() == setup.buckets as usize && s.len() == n && s.values().all(|c| *c >= want)
        },
    )
    .await;

    // (b) Burst of edits.
    let meter = Meter::start(&replicas, &slots);
    let targets: Vec<usize> = (0..setup.burst).map(|k| (k * 7919) % apps).collect();
    let sent = futures::stream::iter(targets.iter().copied().enumerate())
        .map(|(k, i)| {
            let client = client.clone();
            async move {
                let message = format!("burst {k}");
                let sent = Instant::now();
                let generation = edit(&client, i, &message).await;
                (i, message, generation, sent)
            }
        })
        .buffer_unordered(BURST_CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    out.burst_sent = meter.at.elapsed();
    for (i, message, _, _) in &sent {
        world.messages[*i] = message.clone();
    }
    let (seen, missed) = await_edits(&tracker, &sent).await;
    assert_eq!(
        missed, 0,
        "{n} replicas: {missed} burst edits never converged"
    );
    let last = seen.iter().map(|(_, at)| *at).max().unwrap_or(meter.at);
    out.burst = meter.stop(&replicas, &slots, last);
    eprintln!(
        "replicas: {n}: {} edits converged in {:.1} s",
        setup.burst,
        out.burst.took.as_secs_f64()
    );

    // (c) Restart with every child stale.
    for r in replicas.drain(..) {
        r.terminate();
    }
    let banner = format!("banner for {n}");
    world::set_banner(&client, &mut world, banner.clone()).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    replicas = (0..n).map(&mut start).collect();
    let meter = Meter::start(&replicas, &slots);
    let fresh: Vec<String> = replicas.iter().map(|r| r.id.clone()).collect();
    let mut all_held = None;
    let mut even = None;
    let mut first_spread = String::new();
    let share = (setup.buckets as usize).div_ceil(n);
    let end = until(
        "every child holds the new banner",
        &mut replicas,
        PHASE_WAIT,
        async || {
            if even.is_none() {
                let h = bucket_holders(&client).await;
                // Held by the restarted replicas only: a holder from before
                // the restart does not count.
                if h.len() == setup.buckets as usize && h.values().all(|h| fresh.contains(h)) {
                    let counts = spread(&h);
                    if all_held.is_none() {
                        all_held = Some(started.elapsed());
                        first_spread = format!("{:?}", counts.values().collect::<Vec<_>>());
                    }
                    if counts.len() == n && counts.values().all(|c| *c <= share) {
                        even = Some(started.elapsed());
                    }
                }
            }
            tracker.banner_everywhere(started, &banner, apps).is_some()
        },
    )
    .await;
    out.restart_even = even.unwrap_or_default();
    out.restart_first_spread = first_spread;
    out.restart = meter.stop(&replicas, &slots, end);
    out.restart.took = end - started;
    out.restart_buckets = all_held.unwrap_or_default();
    eprintln!(
        "replicas: {n}: restart: every child followed in {:.1} s",
        out.restart.took.as_secs_f64()
    );

    // (d) Chaos.
    if n > 1 && !setup.chaos.is_zero() {
        out.chaos = Some(
            chaos(
                setup,
                &client,
                &tracker,
                &mut world,
                &mut replicas,
                &slots,
                &mut start,
            )
            .await,
        );
    }
    for r in replicas.drain(..) {
        r.terminate();
    }
    // The last writes and Lease versions arrive.
    tokio::time::sleep(Duration::from_secs(2)).await;
    out.doubles = double_writes(&server.write_log(), &leases, setup.buckets);
    lease_watch.abort();
    for w in watches {
        w.abort();
    }
    drop(server);
    out
}

/// (d): edits at `chaos_rate` while a replica is SIGKILLed every
/// `kill_every` and replaced.
async fn chaos(
    setup: &Setup,
    client: &Client,
    tracker: &Tracker,
    world: &mut World,
    replicas: &mut Vec<Replica>,
    slots: &Slots,
    start: &mut impl FnMut(usize) -> Replica,
) -> Chaos {
    let n = world.apps();
    let meter = Meter::start(replicas, slots);
    let period = Duration::from_secs_f64(1.0 / setup.chaos_rate);
    let total = (setup.chaos.as_secs_f64() * setup.chaos_rate) as usize;
    let mut edits = Vec::with_capacity(total);
    let mut takeovers: Vec<tokio::task::JoinHandle<Duration>> = Vec::new();
    let mut next_kill = meter.at + setup.kill_every;
    let mut kills = 0;
    let mut killed_cpu = Duration::ZERO;
    // Distinct Apps from the burst's (offset by half the world).
    for k in 0..total {
        tokio::time::sleep_until((meter.at + period * k as u32).into()).await;
        if Instant::now() >= next_kill {
            next_kill += setup.kill_every;
            kills += 1;
            let victim = replicas.remove(0);
            let held: Vec<u32> = bucket_holders(client)
                .await
                .into_iter()
                .filter(|(_, h)| *h == victim.id)
                .map(|(b, _)| b)
                .collect();
            let (id, slot) = (victim.id.clone(), victim.slot);
            let killed = Instant::now();
            // Its CPU so far still counts for the phase.
            killed_cpu += cpu_time(victim.pid()).unwrap_or_default();
            victim.kill();
            eprintln!("replicas: chaos: SIGKILLed {id} holding buckets {held:?}");
            replicas.push(start(slot));
            let client = client.clone();
            takeovers.push(tokio::spawn(async move {
                loop {
                    let h = bucket_holders(&client).await;
                    let moved = held.iter().all(|b| {
                        h.get(b)
                            .is_some_and(|holder| !holder.is_empty() && *holder != id)
                    });
                    if moved {
                        return killed.elapsed();
                    }
                    assert!(
                        killed.elapsed() < PHASE_WAIT,
                        "{id}'s buckets {held:?} were never taken over"
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }));
        }
        for r in replicas.iter_mut() {
            r.alive();
        }
        let i = (n / 2 + k * 7919) % n;
        let message = format!("chaos {k}");
        let sent = Instant::now();
        let generation = edit(client, i, &message).await;
        world.messages[i] = message.clone();
        edits.push((i, message, generation, sent));
    }
    let (seen, missed) = await_edits(tracker, &edits).await;
    let mut cost = meter.stop(replicas, slots, Instant::now());
    // The killed replicas' CPU, and all of their replacements'.
    cost.cpu = (cpu_of(replicas) + killed_cpu).saturating_sub(meter.cpu);
    let mut times = Vec::new();
    for t in takeovers {
        times.push(t.await.expect("takeover watcher"));
    }
    Chaos {
        edits: edits.len(),
        missed,
        latency: percentiles(&seen.iter().map(|(d, _)| *d).collect::<Vec<_>>()),
        kills,
        takeovers: times,
        cost,
    }
}

/// `--per-guest`: 6 println guests on 3 capped replicas.
async fn per_guest(setup: &Setup) {
    let server = ApiServer::start(ApiServerConfig::default())
        .await
        .expect("embedded API server starts");
    let kubeconfig = setup.dir.join("kubeconfig-per-guest");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let client = server.client().await.expect("a client");
    let println = args::guest("guest_println.wasm");
    let mut flags = Vec::new();
    for g in GUESTS {
        let file = setup.dir.join(format!("{g}.wasm"));
        std::fs::copy(&println, &file).expect("guest copied");
        flags.extend([
            "--guest".to_string(),
            file.display().to_string(),
            format!("--config={g}.name={g}"),
            format!("--config={g}.output=out-{g}"),
            format!("--config={g}.watch=/v1/Pod"),
        ]);
    }
    let slots = Slots::new(3, setup.cpu);
    let holders = async || -> BTreeMap<String, String> {
        let api: Api<Lease> = Api::namespaced(client.clone(), "default");
        let list = api
            .list(&ListParams::default().labels(&format!(
                "wasmctrl.dev/lease-group={GROUP},wasmctrl.dev/lease-role=guest"
            )))
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        list.into_iter()
            .filter_map(|l| {
                let g = l.labels().get("wasmctrl.dev/guest")?.clone();
                Some((g, l.spec?.holder_identity.unwrap_or_default()))
            })
            .collect()
    };
    let started = Instant::now();
    let mut replicas: Vec<Replica> = (0..3)
        .map(|slot| {
            spawn(
                setup,
                &slots,
                slot,
                &format!("p-{slot}"),
                &kubeconfig,
                "default",
                &flags,
            )
        })
        .collect();
    let even = |h: &BTreeMap<String, String>| {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for holder in h.values().filter(|h| !h.is_empty()) {
            *counts.entry(holder).or_default() += 1;
        }
        h.len() == GUESTS.len() && counts.len() == 3 && counts.values().all(|c| *c == 2)
    };
    let mut last = BTreeMap::new();
    until(
        "6 guests spread 2, 2, 2",
        &mut replicas,
        PHASE_WAIT,
        async || {
            last = holders().await;
            even(&last)
        },
    )
    .await;
    let spread_time = started.elapsed();
    let victim = replicas.remove(1);
    let moved: Vec<String> = last
        .iter()
        .filter(|(_, h)| **h == victim.id)
        .map(|(g, _)| g.clone())
        .collect();
    let id = victim.id.clone();
    let killed = Instant::now();
    victim.kill();
    let mut after = BTreeMap::new();
    until(
        "the killed replica's guests move",
        &mut replicas,
        PHASE_WAIT,
        async || {
            after = holders().await;
            moved
                .iter()
                .all(|g| after.get(g).is_some_and(|h| !h.is_empty() && *h != id))
        },
    )
    .await;
    let takeover = killed.elapsed();
    println!();
    println!(
        "| mode | replicas | guests | spread 2, 2, 2 from start | killed replica's guests | moved to | takeover after SIGKILL | bound (lease {} s + 2 retry periods) |",
        LEASE.as_secs()
    );
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| per-guest, --cpu {} each | 3 | 6 println | {:.2} s | {} | {} | {:.2} s | {} s |",
        setup.cpu,
        spread_time.as_secs_f64(),
        moved.join(", "),
        moved
            .iter()
            .map(|g| after[g].clone())
            .collect::<Vec<_>>()
            .join(", "),
        takeover.as_secs_f64(),
        (LEASE + RETRY * 2).as_secs()
    );
    for r in replicas {
        r.terminate();
    }
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn print_tables(outcomes: &[Outcome], setup: &Setup) {
    println!(
        "replicas: --cpu {} per replica, --shard-buckets {}, --standby {}, --workers {}, --kube-api-qps {}, burst of {} edits, lease {}/{}/{} s",
        setup.cpu,
        setup.buckets,
        setup.standby,
        setup.workers,
        setup.qps,
        setup.burst,
        LEASE.as_secs(),
        RENEW.as_secs(),
        RETRY.as_secs()
    );
    println!();
    println!("| replicas | Apps | (a) cold: time / replicas' CPU / server CPU | (b) burst: time (all sent) | edits/s | replicas' CPU | server+bench CPU | throttled | (c) restart: all children | buckets all held (spread then) | evenly spread | replicas' CPU | server+bench CPU | double writes: not the bucket's holder / two identities within {} s / writes checked |", (LEASE - RENEW).as_secs());
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for o in outcomes {
        println!(
            "| {} | {} | {} / {} / {} | {} ({}) | {:.0} | {} | {} | {} | {} | {} ({}) | {} | {} | {} | {} / {} / {} |",
            o.replicas,
            o.apps,
            secs(o.cold.took),
            secs(o.cold.cpu),
            secs(o.cold.server_cpu),
            secs(o.burst.took),
            secs(o.burst_sent),
            setup.burst as f64 / o.burst.took.as_secs_f64(),
            secs(o.burst.cpu),
            secs(o.burst.server_cpu),
            secs(o.burst.throttled),
            secs(o.restart.took),
            secs(o.restart_buckets),
            o.restart_first_spread,
            secs(o.restart_even),
            secs(o.restart.cpu),
            secs(o.restart.server_cpu),
            o.doubles.not_holder,
            o.doubles.within_window,
            o.doubles.checked,
        );
    }
    let one = outcomes.iter().find(|o| o.replicas == 1);
    for o in outcomes.iter().filter(|o| o.replicas > 1) {
        if let Some(one) = one {
            println!(
                "{} vs 1 replica: burst throughput {:.2}x, restart {:.2}x faster",
                o.replicas,
                one.burst.took.as_secs_f64() / o.burst.took.as_secs_f64(),
                one.restart.took.as_secs_f64() / o.restart.took.as_secs_f64(),
            );
        }
    }
    println!();
    println!("| replicas | chaos: edits at {}/s for {} s | kills (every {} s) | missed | p50 | p99 | max | takeover per kill | bound (lease {} s + 2 retry periods) | replicas' CPU | server+bench CPU | App writes by another identity than the App's previous write (whole run) |", setup.chaos_rate, setup.chaos.as_secs(), setup.kill_every.as_secs(), LEASE.as_secs());
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for o in outcomes {
        let Some(c) = &o.chaos else { continue };
        println!(
            "| {} | {} | {} | {} | {:.0} ms | {:.0} ms | {:.0} ms | {} | {} s | {} | {} | {} |",
            o.replicas,
            c.edits,
            c.kills,
            c.missed,
            c.latency.p50.as_secs_f64() * 1e3,
            c.latency.p99.as_secs_f64() * 1e3,
            c.latency.max.as_secs_f64() * 1e3,
            c.takeovers
                .iter()
                .map(|t| format!("{:.1}", t.as_secs_f64()))
                .collect::<Vec<_>>()
                .join(", ")
                + " s",
            (LEASE + RETRY * 2).as_secs(),
            secs(c.cost.cpu),
            secs(c.cost.server_cpu),
            o.doubles.identity_changes,
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        println!("replicas: a bench (`cargo bench --bench replicas`, as root: it caps each replica in a CPU cgroup); its smoke world is tests/replicas.rs");
        return;
    }
    let dir = tempfile::tempdir().expect("temporary directory");
    let log_dir =
        std::env::var_os("REPLICAS_LOGS").map_or_else(|| dir.path().to_path_buf(), PathBuf::from);
    std::fs::create_dir_all(&log_dir).expect("log directory");
    let setup = Setup {
        dir: log_dir,
        wasmctrl: PathBuf::from(env!("CARGO_BIN_EXE_wasmctrl")),
        cpu: args::parse(&args, "--cpu", 0.5),
        buckets: args::parse(&args, "--buckets", 12),
        workers: args::parse(&args, "--workers", 8),
        qps: args::parse(&args, "--qps", 100_000.0),
        burst: args::parse(&args, "--burst", 4_000),
        chaos: Duration::from_secs(args::parse(&args, "--chaos-seconds", 80)),
        kill_every: Duration::from_secs(args::parse(&args, "--kill-every", 20)),
        chaos_rate: args::parse(&args, "--chaos-rate", 20.0),
        standby: args::option(&args, "--standby").unwrap_or_else(|| "cold".into()),
    };
    let rt = args::bench_runtime();
    if args.iter().any(|a| a == "--per-guest") {
        rt.block_on(per_guest(&setup));
        return;
    }
    let apps: usize = args::parse(&args, "--apps", 20_000);
    assert!(
        setup.burst <= apps / 2,
        "--burst {} must not exceed half of --apps {apps}",
        setup.burst
    );
    let counts = args::option(&args, "--replicas").map_or_else(
        || vec![1, 3],
        |l| args::list("--replicas", &l, args::number),
    );
    let mut outcomes = Vec::new();
    for n in counts {
        outcomes.push(rt.block_on(run_replicas(&setup, apps, n)));
        print_tables(&outcomes, &setup);
    }
    let bad: Vec<String> = outcomes
        .iter()
        .filter(|o| {
            o.doubles.not_holder > 0
                || o.doubles.within_window > 0
                || o.chaos.as_ref().is_some_and(|c| c.missed > 0)
        })
        .map(|o| format!("{} replicas", o.replicas))
        .collect();
    if !bad.is_empty() {
        eprintln!("replicas: double writes or missed edits with {bad:?}");
        std::process::exit(1);
    }
}
