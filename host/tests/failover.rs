//! Failover of the real binary: two `wasmctrl run --leader-elect` processes
//! against one in-process embedded API server, with short, real lease
//! timings (paused time cannot reach into another process).
//!
//! What each test shows, and how it knows:
//! - an abruptly killed leader is replaced only once its lease has expired
//!   (the Lease's own `renewTime` / `acquireTime` stamps, not test sleeps),
//!   and the summary converges under the new leader;
//! - a SIGTERMed leader exits 0 and releases the Lease, so the standby takes
//!   over long before the lease could have expired;
//! - a leader cut off from the API server (a TCP relay that stops passing
//!   bytes) exits non-zero before the standby acquires, and nothing it
//!   wrote lands after the cut;
//! - a leader refused only its Lease (its summary writes still succeed)
//!   keeps writing until its renew deadline, then exits non-zero before the
//!   standby acquires: the writes really stop, not just fail;
//! - (in-process `Host`) a leader draining after SIGTERM still stops at once
//!   if its lease is lost during the drain.
//!
//! Every Lease and summary change is recorded by a watch; the embedded
//! server's resourceVersion is one global counter, so the recorded changes
//! are totally ordered without relying on the test's polling. Every wait is
//! bounded.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Resource};
use tokio::sync::watch;
use tokio::time::Instant;
use wasmctrl_apiserver::{Rule, RunningApiServer, User};

use crate::support::replica::Replica;

const LEASE: &str = "failover";
const SUMMARY: &str = "gpu-summary";
/// The longest any single wait in these tests may take.
const BOUND: Duration = Duration::from_secs(15);
/// `acquireTime` is stamped before the GET that finds the lease expired, so
/// the new holder's stamp may precede the expiry by that request's latency.
const STAMP_SLACK: Duration = Duration::from_millis(300);

/// The binary's lease flags.
#[derive(Debug, Clone, Copy)]
struct Timings {
    lease: Duration,
    renew: Duration,
    retry: Duration,
}

/// Lease 2 s, renew deadline 1.5 s, retry 0.25 s.
const FAST: Timings = Timings {
    lease: Duration::from_secs(2),
    renew: Duration::from_millis(1_500),
    retry: Duration::from_millis(250),
};

/// A 6 s lease: a handover that waited for expiry could not be quick.
const LONG: Timings = Timings {
    lease: Duration::from_secs(6),
    renew: Duration::from_secs(4),
    retry: Duration::from_millis(250),
};

// ---------------------------------------------------------------------------
// The recorded timeline of Lease and summary changes.

#[derive(Debug, Clone)]
enum Seen {
    Lease(LeaseSpec),
    Summary(BTreeMap<String, String>),
}

#[derive(Debug, Clone)]
struct Change {
    rv: u64,
    seen: Seen,
}

impl Change {
    fn lease(&self) -> Option<&LeaseSpec> {
        match &self.seen {
            Seen::Lease(s) => Some(s),
            Seen::Summary(_) => None,
        }
    }
    fn summary(&self) -> Option<&BTreeMap<String, String>> {
        match &self.seen {
            Seen::Summary(d) => Some(d),
            Seen::Lease(_) => None,
        }
    }
}

/// Every change of the Lease and of the summary ConfigMap, by watch.
#[derive(Clone, Default)]
struct Timeline(Arc<Mutex<Vec<Change>>>);

fn rv_of<K: Resource>(k: &K) -> u64 {
    k.meta()
        .resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
        .expect("the embedded server's resourceVersions are numbers")
}

impl Timeline {
    fn record(admin: &Client) -> Self {
        let timeline = Timeline::default();
        timeline.follow(admin, LEASE, |l: Lease| {
            Seen::Lease(l.spec.unwrap_or_default())
        });
        timeline.follow(admin, SUMMARY, |cm: ConfigMap| {
            Seen::Summary(cm.data.unwrap_or_default())
        });
        timeline
    }

    /// Records every version of the `K` named `name` in the host's
    /// namespace, by watch, as `seen` makes of it.
    fn follow<K>(&self, admin: &Client, name: &'static str, seen: fn(K) -> Seen)
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + Send
            + 'static,
        K::DynamicType: Default,
    {
        let api: Api<K> = Api::namespaced(admin.clone(), crate::support::HOST_NS);
        let t = self.clone();
        tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(event) = events.next().await {
                if let Ok(watcher::Event::Apply(k) | watcher::Event::InitApply(k)) = event {
                    if k.meta().name.as_deref() == Some(name) {
                        t.push(rv_of(&k), seen(k));
                    }
                }
            }
        });
    }

    fn push(&self, rv: u64, seen: Seen) {
        self.0.lock().unwrap().push(Change { rv, seen });
    }

    /// The changes so far, in resourceVersion order (a relist may replay one).
    fn changes(&self) -> Vec<Change> {
        let mut all = self.0.lock().unwrap().clone();
        all.sort_by_key(|c| c.rv);
        all.dedup_by_key(|c| c.rv);
        all
    }

    /// The first Lease change naming `holder`, after resourceVersion `after`.
    fn acquisition(&self, holder: &str, after: u64) -> Option<(u64, LeaseSpec)> {
        self.changes()
            .into_iter()
            .filter(|c| c.rv > after)
            .find_map(|c| {
                let spec = c.lease()?;
                (spec.holder_identity.as_deref() == Some(holder)).then(|| (c.rv, spec.clone()))
            })
    }

    /// Waits until the recorder has seen `holder` acquire after `after`.
    async fn until_acquired(&self, holder: &str, after: u64) -> (u64, LeaseSpec) {
        bounded(&format!("{holder} acquires the Lease"), async {
            loop {
                if let Some(found) = self.acquisition(holder, after) {
                    return found;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
    }
}

fn micros(t: &Option<MicroTime>) -> i64 {
    t.as_ref()
        .expect("the record carries the time")
        .0
        .as_microsecond()
}

fn wall_micros(t: SystemTime) -> i64 {
    i64::try_from(t.duration_since(UNIX_EPOCH).unwrap().as_micros()).unwrap()
}

fn span(us: i64) -> Duration {
    Duration::from_micros(us.unsigned_abs())
}

fn cleared(spec: &LeaseSpec) -> bool {
    spec.holder_identity
        .as_deref()
        .unwrap_or_default()
        .is_empty()
}

// ---------------------------------------------------------------------------
// The cluster and the replicas.

async fn bounded<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    crate::support::bounded(what, BOUND, f).await
}

/// Waits, bounded, for `replica` (running with [`FAST`] timings) to give up
/// after `fault`, which happened at `since`: it must exit non-zero saying it
/// lost leadership, within its renew deadline (plus 1 s). Meanwhile reads
/// its own count of writes (its /metrics is local, never behind a relay or
/// a revoked token). Returns when the test saw it exit (monotonic and wall
/// clock) and the last count read, starting from `writes`.
async fn gives_up_after(
    replica: &mut Replica,
    fault: &str,
    since: Instant,
    writes: f64,
) -> (Instant, SystemTime, f64) {
    let mut last_writes = writes;
    let (status, gone, gone_wall) = bounded(&format!("{} exits", replica.id), async {
        loop {
            if let Some(status) = replica.child.try_wait().unwrap() {
                return (status, Instant::now(), SystemTime::now());
            }
            if let Some(w) = replica.writes().await {
                last_writes = w;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let (id, log) = (&replica.id, replica.log());
    assert!(!status.success(), "{id} exits non-zero: {status}\n{log}");
    assert!(log.contains("lost leadership"), "{log}");
    assert!(
        gone - since < FAST.renew + Duration::from_secs(1),
        "{id} gave up {:?} after the {fault}",
        gone - since
    );
    (gone, gone_wall, last_writes)
}

/// The new leader's `acquireTime` (`acquired`, in µs) is after the old one
/// exited (`gone_wall`, when the test saw it).
fn assert_acquired_after_exit(gone_wall: SystemTime, acquired: i64) {
    assert!(
        wall_micros(gone_wall) < acquired,
        "b acquired {:?} before a exited",
        span(wall_micros(gone_wall) - acquired)
    );
}

struct Cluster {
    server: RunningApiServer,
    admin: Client,
    timeline: Timeline,
    /// Kubeconfigs and the shared compiled-guest cache.
    dir: tempfile::TempDir,
}

/// An embedded API server with one pod requesting 2 GPUs on n1, and the
/// timeline recorder running.
async fn cluster() -> Cluster {
    let (server, admin) = crate::support::server().await;
    crate::support::pod("a")
        .on("n1")
        .requesting("2")
        .create(&admin)
        .await;
    let timeline = Timeline::record(&admin);
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("cache")).unwrap();
    std::fs::write(
        dir.path().join("kubeconfig"),
        server.kubeconfig_for_token(server.admin_token()),
    )
    .unwrap();
    Cluster {
        server,
        admin,
        timeline,
        dir,
    }
}

impl Cluster {
    fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// A kubeconfig authenticating with `token`.
    fn kubeconfig_for(&self, token: &str) -> PathBuf {
        let path = self.dir.path().join(format!("kubeconfig-{token}"));
        std::fs::write(&path, self.server.kubeconfig_for_token(token)).unwrap();
        path
    }

    /// A kubeconfig whose server is `relay` instead (same CA and address
    /// family, so TLS verification still passes).
    fn kubeconfig_via(&self, relay: SocketAddr) -> PathBuf {
        let direct = self.server.kubeconfig_for_token(self.server.admin_token());
        let url = self.server.url();
        assert!(direct.contains(&url));
        let path = self.dir.path().join(format!("kubeconfig-{}", relay.port()));
        std::fs::write(&path, direct.replace(&url, &format!("https://{relay}"))).unwrap();
        path
    }

    /// Starts the real binary as candidate `id`.
    fn start(&self, id: &str, kubeconfig: &Path, t: Timings) -> Replica {
        Replica::start(id, |command, _, health, metrics| {
            command
                .arg("run")
                .arg("--guest")
                .arg(crate::support::guest_path())
                .arg(format!("--kubeconfig={}", kubeconfig.display()))
                .arg(format!("--namespace={}", crate::support::HOST_NS))
                .arg("--leader-elect")
                .arg(format!("--lease-name={LEASE}"))
                .arg(format!("--identity={id}"))
                .arg(format!(
                    "--lease-duration-seconds={}",
                    t.lease.as_secs_f64()
                ))
                .arg(format!(
                    "--renew-deadline-seconds={}",
                    t.renew.as_secs_f64()
                ))
                .arg(format!("--retry-period-seconds={}", t.retry.as_secs_f64()))
                .arg(format!("--health-addr={health}"))
                .arg(format!("--metrics-addr={metrics}"))
                .arg(format!(
                    "--guest-cache-dir={}",
                    self.dir.path().join("cache").display()
                ))
                .env_remove("POD_NAME")
                .env_remove("POD_NAMESPACE")
                .env("RUST_LOG", "info");
        })
    }

    async fn lease(&self) -> LeaseSpec {
        Api::<Lease>::namespaced(self.admin.clone(), crate::support::HOST_NS)
            .get(LEASE)
            .await
            .unwrap()
            .spec
            .unwrap_or_default()
    }

    /// Starts `replica-a`, waits until it is ready (it compiles the guest
    /// into the shared cache), then `replica-b` from that cache; waits until
    /// one of them holds the Lease and the summary has converged, and checks
    /// their roles ([`assert_roles`]). Returns (leader, follower) as the
    /// Lease names them.
    async fn two_replicas(&self, t: Timings) -> (Replica, Replica) {
        let mut a = self.start("replica-a", &self.kubeconfig(), t);
        a.wait_ready().await;
        let mut b = self.start("replica-b", &self.kubeconfig(), t);
        b.wait_ready().await;
        let (_, spec) = bounded("a replica acquires the Lease", async {
            loop {
                for id in [&a.id, &b.id] {
                    if let Some(found) = self.timeline.acquisition(id, 0) {
                        return found;
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        crate::support::summary_becomes(&self.admin, &[("n1", "2")]).await;
        let (leader, follower) = if spec.holder_identity.as_deref() == Some(a.id.as_str()) {
            (a, b)
        } else {
            (b, a)
        };
        assert_roles(&leader, &follower).await;
        (leader, follower)
    }
}

/// The warm standby: ready while not leading; the gauge says who leads.
async fn assert_roles(leader: &Replica, follower: &Replica) {
    leader.until_master_status(LEASE, 1.0).await;
    assert_eq!(
        follower.master_status(LEASE).await,
        Some(0.0),
        "{}",
        follower.id
    );
    assert_eq!(
        follower.readyz().await,
        Some(200),
        "{} is ready while not leading",
        follower.id
    );
    assert_eq!(leader.readyz().await, Some(200), "{}", leader.id);
}

// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abruptly_killed_leader_is_replaced_after_expiry_and_the_summary_converges() {
    let c = cluster().await;
    let (mut leader, follower) = c.two_replicas(FAST).await;
    // A few renewals, so the follower has watched the lease move.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let before = c.lease().await;
    assert_eq!(before.holder_identity.as_deref(), Some(leader.id.as_str()));
    let killed_rv = c.server.current_resource_version();
    let killed_wall = SystemTime::now();

    leader.child.kill().await.unwrap(); // SIGKILL: no release, no drain
    crate::support::pod("b")
        .on("n2")
        .requesting("1")
        .create(&c.admin)
        .await;

    let (acquired_rv, after) = c.timeline.until_acquired(&follower.id, killed_rv).await;
    crate::support::summary_becomes(&c.admin, &[("n1", "2"), ("n2", "1")]).await;

    // The killed leader's last renewal, as stamped in the Lease.
    let changes = c.timeline.changes();
    let last_renewal = changes
        .iter()
        .filter(|ch| ch.rv < acquired_rv)
        .filter_map(Change::lease)
        .rfind(|s| s.holder_identity.as_deref() == Some(leader.id.as_str()))
        .expect("the killed leader's renewals were recorded");
    let waited = micros(&after.acquire_time) - micros(&last_renewal.renew_time);
    assert!(
        span(waited) + STAMP_SLACK >= FAST.lease && waited > 0,
        "{} acquired {:?} after the last renewal, before the {:?} lease expired",
        follower.id,
        span(waited),
        FAST.lease
    );
    let since_kill = micros(&after.acquire_time) - wall_micros(killed_wall);
    eprintln!(
        "kill: acquired {:?} after the last renewal, {:?} after the kill",
        span(waited),
        span(since_kill)
    );
    assert!(
        since_kill > 0 && span(since_kill) < FAST.lease + Duration::from_secs(2),
        "took over {:?} after the kill",
        span(since_kill)
    );
    assert_eq!(
        after.lease_transitions,
        Some(before.lease_transitions.unwrap_or(0) + 1)
    );
    assert_eq!(after.acquire_time, after.renew_time);

    // Nobody led in the gap: the new pod is counted only after the takeover.
    let first_with_b = changes
        .iter()
        .find(|ch| ch.summary().is_some_and(|d| d.contains_key("n2")))
        .expect("the converged summary was recorded");
    assert!(
        first_with_b.rv > acquired_rv,
        "the summary counted the new pod (rv {}) before {} acquired (rv {acquired_rv})",
        first_with_b.rv,
        follower.id
    );
    follower.until_master_status(LEASE, 1.0).await;
    follower.stop_cleanly().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_hands_over_at_once() {
    let c = cluster().await;
    let (mut leader, follower) = c.two_replicas(LONG).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = c.lease().await;
    let stopped_rv = c.server.current_resource_version();
    let stopped = Instant::now();
    let stopped_wall = SystemTime::now();

    leader.sigterm();
    let (status, _, _) = leader.exited().await;
    assert!(
        status.success(),
        "the leader exits 0 on SIGTERM: {status}\n{}",
        leader.log()
    );
    let (acquired_rv, after) = c.timeline.until_acquired(&follower.id, stopped_rv).await;
    let handover = stopped.elapsed();
    eprintln!("sigterm: handover observed after {handover:?}");
    assert!(
        handover < Duration::from_secs(2),
        "handover took {handover:?}; a {:?} lease was not released",
        LONG.lease
    );
    let since_stop = micros(&after.acquire_time) - wall_micros(stopped_wall);
    assert!(
        span(since_stop) < Duration::from_secs(2),
        "acquired {:?} after SIGTERM",
        span(since_stop)
    );

    // The old leader's last word is client-go's release record.
    let changes = c.timeline.changes();
    let released = changes
        .iter()
        .filter(|ch| ch.rv > stopped_rv && ch.rv < acquired_rv)
        .filter_map(Change::lease)
        .next_back()
        .expect("a Lease change between SIGTERM and the takeover");
    assert!(cleared(released), "released record: {released:?}");
    assert_eq!(released.lease_duration_seconds, Some(1));
    assert_eq!(released.lease_transitions, before.lease_transitions);
    assert_eq!(
        after.lease_transitions,
        Some(before.lease_transitions.unwrap_or(0) + 1)
    );
    assert_eq!(after.lease_duration_seconds, Some(6));

    // The new leader works.
    follower.until_master_status(LEASE, 1.0).await;
    crate::support::pod("b")
        .on("n2")
        .requesting("1")
        .create(&c.admin)
        .await;
    crate::support::summary_becomes(&c.admin, &[("n1", "2"), ("n2", "1")]).await;
    follower.stop_cleanly().await;
    let last = c.lease().await;
    assert!(cleared(&last), "the last replica released too: {last:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_leader_stops_writing_before_another_starts() {
    let c = cluster().await;
    let link = crate::support::Partitionable::start(c.server.addr()).await;
    // a reaches the API server only through the relay, and leads.
    let mut a = c.start("replica-a", &c.kubeconfig_via(link.addr), FAST);
    a.wait_ready().await;
    c.timeline.until_acquired("replica-a", 0).await;
    let mut b = c.start("replica-b", &c.kubeconfig(), FAST);
    b.wait_ready().await;
    crate::support::summary_becomes(&c.admin, &[("n1", "2")]).await;
    assert_roles(&a, &b).await;
    assert_eq!(b.writes().await, Some(0.0), "a follower never writes");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let a_writes = a.writes().await.expect("a's /metrics answers");
    assert!(a_writes >= 1.0, "the leader wrote the summary");

    let cut_rv = c.server.current_resource_version();
    let cut = Instant::now();
    link.cut();
    crate::support::pod("b")
        .on("n2")
        .requesting("1")
        .create(&c.admin)
        .await;

    let (a_gone, a_gone_wall, last_writes) = gives_up_after(&mut a, "cut", cut, a_writes).await;
    assert_eq!(last_writes, a_writes, "a wrote nothing after the cut");

    let (acquired_rv, after) = c.timeline.until_acquired("replica-b", cut_rv).await;
    let b_leads = micros(&after.acquire_time);
    eprintln!(
        "partition: a exited {:?} after the cut; b acquired {:?} after a exited",
        a_gone - cut,
        span(b_leads - wall_micros(a_gone_wall))
    );
    assert_acquired_after_exit(a_gone_wall, b_leads);
    crate::support::summary_becomes(&c.admin, &[("n1", "2"), ("n2", "1")]).await;
    // The timeline is a watch: let it catch up with what the GET saw.
    crate::support::eventually("the timeline records the new summary", || {
        let timeline = c.timeline.clone();
        async move {
            timeline
                .changes()
                .iter()
                .any(|ch| ch.rv > cut_rv && ch.summary().is_some_and(|d| d.contains_key("n2")))
        }
    })
    .await;

    // Between the cut and b's acquisition the summary did not change; the
    // first change after the cut is b's, with the new pod.
    let changes = c.timeline.changes();
    let after_cut: Vec<&Change> = changes
        .iter()
        .filter(|ch| ch.rv > cut_rv && ch.summary().is_some())
        .collect();
    assert!(
        after_cut.iter().all(|ch| ch.rv > acquired_rv),
        "the summary changed before b acquired (rv {acquired_rv}): {after_cut:?}"
    );
    assert!(after_cut
        .first()
        .and_then(|ch| ch.summary())
        .is_some_and(|d| d.contains_key("n2")));
    assert_eq!(
        after.lease_transitions.unwrap_or(0),
        c.timeline
            .acquisition("replica-a", 0)
            .unwrap()
            .1
            .lease_transitions
            .unwrap_or(0)
            + 1
    );
    b.until_master_status(LEASE, 1.0).await;
    b.stop_cleanly().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_refused_its_lease_stops_writing_before_another_starts() {
    let c = cluster().await;
    c.server.add_token("token-a", User::admin("replica-a"));
    let mut a = c.start("replica-a", &c.kubeconfig_for("token-a"), FAST);
    a.wait_ready().await;
    c.timeline.until_acquired("replica-a", 0).await;
    let mut b = c.start("replica-b", &c.kubeconfig(), FAST);
    b.wait_ready().await;
    crate::support::summary_becomes(&c.admin, &[("n1", "2")]).await;
    assert_roles(&a, &b).await;

    // Churn: a new 1-GPU pod on n3 every 100 ms, so a leader has something
    // to write at every moment.
    let (stop_churn, mut churn_stopped) = watch::channel(false);
    let churn = {
        let admin = c.admin.clone();
        tokio::spawn(async move {
            let mut n = 0;
            while !*churn_stopped.borrow() {
                n += 1;
                crate::support::pod(&format!("c{n}"))
                    .on("n3")
                    .requesting("1")
                    .create(&admin)
                    .await;
                tokio::select! {
                    _ = churn_stopped.changed() => {}
                    () = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
            n
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;

    // The fault, for a alone: every verb on everything but Leases.
    let fault_rv = c.server.current_resource_version();
    let fault = Instant::now();
    c.server.add_token(
        "token-a",
        User::with_rules(
            "replica-a",
            vec![Rule::new(&["*"], &["pods", "configmaps", "events"])],
        ),
    );
    let at_fault = a.writes().await.expect("a's /metrics answers");
    let (a_gone, a_gone_wall, last_writes) = gives_up_after(&mut a, "fault", fault, at_fault).await;
    // The fault left a's writes working: it kept applying while it led.
    assert!(
        last_writes > at_fault,
        "a wrote {at_fault} before the fault and {last_writes} at exit"
    );

    let (acquired_rv, after) = c.timeline.until_acquired("replica-b", fault_rv).await;
    let b_leads = micros(&after.acquire_time);
    eprintln!(
        "refused: a exited {:?} after the fault; b acquired {:?} after a exited; a wrote {} times in between",
        a_gone - fault,
        span(b_leads - wall_micros(a_gone_wall)),
        last_writes - at_fault
    );
    assert_acquired_after_exit(a_gone_wall, b_leads);
    // a's writes landed between the fault and b's acquisition; b's after.
    let changes = c.timeline.changes();
    assert!(changes
        .iter()
        .any(|ch| ch.rv > fault_rv && ch.rv < acquired_rv && ch.summary().is_some()));

    stop_churn.send_replace(true);
    let pods = bounded("churn stops", churn).await.unwrap();
    let n3 = pods.to_string();
    crate::support::summary_becomes(&c.admin, &[("n1", "2"), ("n3", &n3)]).await;
    b.until_master_status(LEASE, 1.0).await;
    b.stop_cleanly().await;
}

/// In-process host (the binary's `run` is a thin edge over this): a leader
/// that is draining in-flight reconciles after SIGTERM must still stop at
/// once when its lease is lost meanwhile, or an in-flight write could land
/// after a standby has taken over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_lease_while_draining_after_sigterm_stops_at_once() {
    use wasmctrl::supervisor::{Leadership, Supervisor, SupervisorError};
    let (server, admin) = crate::support::server().await;
    crate::support::pod("a")
        .on("n1")
        .requesting("2")
        .create(&admin)
        .await;
    let (leadership, lead_rx) = watch::channel(Leadership::Leading);
    let host = Supervisor::start_with_leadership(
        admin.clone(),
        crate::support::host_config(wasmctrl::controller::ControllerConfig::default()),
        None,
        lead_rx,
    )
    .await
    .unwrap();
    let mut running = crate::support::spawn(Arc::new(host), Duration::from_secs(20));
    crate::support::summary_becomes(&admin, &[("n1", "2")]).await;

    // Every request now takes 3 s: the pod is stored when its create
    // returns, and the host's apply for it is then on the wire.
    let latency = Duration::from_secs(3);
    server.faults().set_latency(latency);
    crate::support::pod("b")
        .on("n2")
        .requesting("1")
        .create(&admin)
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    running.request_stop(); // SIGTERM
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!running.is_finished(), "the drain waits for the apply");

    let lost = Instant::now();
    leadership.send_replace(Leadership::Lost("renew deadline exceeded".into()));
    let result = bounded("the host stops", running.join()).await;
    let took = lost.elapsed();
    server.faults().set_latency(Duration::ZERO);
    assert!(
        matches!(result, Err(SupervisorError::LostLeadership(_))),
        "{result:?}"
    );
    assert!(
        took < Duration::from_millis(500),
        "the drain went on for {took:?} after the lease was lost"
    );
}
