//! Per-guest leadership of the real binary: three `wasmctrl run
//! --leader-elect=per-guest` processes over six guests against one
//! in-process embedded API server, with short, real lease timings.
//!
//! What it shows, and how it knows:
//! - the guests spread: each replica leads its share, two (the Leases'
//!   holders, and each replica's `wasmctrl_guest_leader`);
//! - every guest reconciles on whoever leads it (its output ConfigMap
//!   counts the pods);
//! - a SIGKILLed replica's guests move to the survivors once their Leases
//!   expire and not before (the new holders' `acquireTime` against the
//!   kill), within the lease duration and a few rounds;
//! - a SIGTERMed replica exits 0 and releases its guests, so the last one
//!   takes them long before the Leases could have expired;
//! - throughout, sampled every 50 ms, no guest is led by two replicas at
//!   once by their own account (`wasmctrl_guest_leader`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ListParams;
use kube::{Api, Client};
use tokio::time::Instant;

use crate::support::replica::Replica;
use crate::support::{prom, HOST_NS};
use wasmctrl_test_support::leases::BucketHistory;

const GROUP: &str = "spread";
const GUESTS: [&str; 6] = ["g1", "g2", "g3", "g4", "g5", "g6"];
/// Lease 2 s, renew deadline 1.5 s, retry 0.25 s.
const LEASE: Duration = Duration::from_secs(2);
const RENEW: Duration = Duration::from_millis(1_500);
const RETRY: Duration = Duration::from_millis(250);
/// The longest any single wait may take.
const BOUND: Duration = Duration::from_secs(30);
/// `acquireTime` is stamped before the request that finds a lease expired,
/// and the expiry is counted from the last observation before the kill
/// (up to one retry period before it).
const STAMP_SLACK: Duration = Duration::from_millis(300);

/// A `--leader-elect=per-guest` replica `id` of this file's group and
/// timings against `kubeconfig`, its guests' files in `dir` (the compile
/// cache in `dir/cache`); `flags` are its guest flags.
fn per_guest_replica(
    id: &str,
    dir: &std::path::Path,
    kubeconfig: &std::path::Path,
    flags: Vec<String>,
) -> Replica {
    let (id_, dir, kubeconfig) = (id.to_string(), dir.to_path_buf(), kubeconfig.to_path_buf());
    Replica::start(id, move |command, _, health, metrics| {
        command
            .arg("run")
            .args(flags)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--namespace={HOST_NS}"))
            .arg("--leader-elect=per-guest")
            .arg(format!("--lease-name={GROUP}"))
            .arg(format!("--identity={id_}"))
            .arg(format!("--lease-duration-seconds={}", LEASE.as_secs_f64()))
            .arg(format!("--renew-deadline-seconds={}", RENEW.as_secs_f64()))
            .arg(format!("--retry-period-seconds={}", RETRY.as_secs_f64()))
            .arg(format!("--health-addr={health}"))
            .arg(format!("--metrics-addr={metrics}"))
            .arg(format!("--guest-cache-dir={}", dir.join("cache").display()))
            .env_remove("POD_NAME")
            .env_remove("POD_NAMESPACE")
            .env("RUST_LOG", "info");
    })
}

/// The flags of println guests `guests` (files `dir/GUEST.wasm`), each
/// watching Pods and writing ConfigMap `out-GUEST`.
fn println_guests(dir: &std::path::Path, guests: &[&str]) -> Vec<String> {
    guests
        .iter()
        .flat_map(|g| {
            [
                "--guest".to_string(),
                dir.join(format!("{g}.wasm")).display().to_string(),
                format!("--config={g}.name={g}"),
                format!("--config={g}.output=out-{g}"),
                format!("--config={g}.watch=/v1/Pod"),
            ]
        })
        .collect()
}

/// A scratch directory for replicas (`cache/` for compiled guests) and an
/// admin kubeconfig for `server` in it.
fn scratch_dir(
    server: &wasmctrl_apiserver::RunningApiServer,
) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("cache")).unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        server.kubeconfig_for_token(server.admin_token()),
    )
    .unwrap();
    (dir, kubeconfig)
}

/// An embedded API server with pod `p1`, and a directory holding an
/// admin kubeconfig, the compile cache and the println guests `guests`.
struct PrintlnWorld {
    /// Runs as long as the world.
    _server: wasmctrl_apiserver::RunningApiServer,
    admin: Client,
    dir: tempfile::TempDir,
    kubeconfig: std::path::PathBuf,
    guests: Vec<&'static str>,
}

impl PrintlnWorld {
    async fn new(guests: &[&'static str]) -> Self {
        let (server, admin) = crate::support::server().await;
        let (dir, kubeconfig) = scratch_dir(&server);
        let println = crate::support::built_guest("guest_println");
        for g in guests {
            std::fs::copy(&println, dir.path().join(format!("{g}.wasm"))).unwrap();
        }
        crate::support::pod("p1").on("n1").create(&admin).await;
        PrintlnWorld {
            _server: server,
            admin,
            dir,
            kubeconfig,
            guests: guests.to_vec(),
        }
    }

    /// A replica `id` running every guest of the world.
    fn replica(&self, id: &str) -> Replica {
        per_guest_replica(
            id,
            self.dir.path(),
            &self.kubeconfig,
            println_guests(self.dir.path(), &self.guests),
        )
    }
}

async fn bounded<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    crate::support::bounded(what, BOUND, f).await
}

/// Each guest's Lease holder, by guest (None: free).
async fn holders(admin: &Client) -> BTreeMap<String, Option<String>> {
    let api: Api<Lease> = Api::namespaced(admin.clone(), HOST_NS);
    let list = api
        .list(&ListParams::default().labels(&format!(
            "wasmctrl.dev/lease-group={GROUP},wasmctrl.dev/lease-role=guest"
        )))
        .await
        .unwrap();
    list.items
        .into_iter()
        .filter_map(|l| {
            let guest = l.metadata.labels?.get("wasmctrl.dev/guest")?.clone();
            let holder = l.spec?.holder_identity.filter(|h| !h.is_empty());
            Some((guest, holder))
        })
        .collect()
}

/// How many guests each holder holds.
fn counts(holders: &BTreeMap<String, Option<String>>) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for h in holders.values().flatten() {
        *counts.entry(h.clone()).or_default() += 1;
    }
    counts
}

/// Waits until every guest is held and the holders hold `want` each.
async fn spread_as(
    admin: &Client,
    want: &BTreeMap<&str, usize>,
) -> BTreeMap<String, Option<String>> {
    let want: BTreeMap<String, usize> = want.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    bounded(&format!("guests spread as {want:?}"), async {
        loop {
            let h = holders(admin).await;
            if h.len() == GUESTS.len() && h.values().all(Option::is_some) && counts(&h) == want {
                return h;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
}

/// Which guests `replica` says it leads (`wasmctrl_guest_leader` 1).
async fn leads(replica: &Replica) -> Option<Vec<String>> {
    let text = replica.scrape().await?;
    Some(
        GUESTS
            .iter()
            .filter(|g| {
                prom::metric(&text, "wasmctrl_guest_leader", &[&format!("guest=\"{g}\"")]) == 1.0
            })
            .map(|g| g.to_string())
            .collect(),
    )
}

/// `replica`'s reconciles of each guest (`controller_runtime_reconcile_total`).
async fn reconciles(replica: &Replica) -> BTreeMap<String, f64> {
    let text = replica.scrape().await.expect("/metrics answers");
    GUESTS
        .iter()
        .map(|g| {
            let label = format!("controller=\"{g}\"");
            let n = prom::metric(&text, "controller_runtime_reconcile_total", &[&label]);
            (g.to_string(), n)
        })
        .collect()
}

/// `/guests` of `replica`: each guest's `leader` object, by guest.
async fn guest_leaders(replica: &Replica) -> BTreeMap<String, serde_json::Value> {
    let (status, body) = crate::support::http_get(replica.health, "/guests")
        .await
        .expect("/guests answers");
    assert_eq!(status, 200, "{body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    json["guests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["name"].as_str().unwrap().to_string(), g["leader"].clone()))
        .collect()
}

/// Every guest's output ConfigMap counts `pods` pods.
async fn outputs_count(admin: &Client, pods: usize) {
    let api: Api<ConfigMap> = Api::namespaced(admin.clone(), HOST_NS);
    bounded(&format!("every output counts {pods} pods"), async {
        loop {
            let mut all = true;
            for g in GUESTS {
                let seen = api
                    .get_opt(&format!("out-{g}"))
                    .await
                    .unwrap()
                    .and_then(|cm| cm.data?.get("objects").cloned());
                all &= seen.as_deref() == Some(pods.to_string().as_str());
            }
            if all {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

fn wall_micros(t: SystemTime) -> i64 {
    i64::try_from(t.duration_since(UNIX_EPOCH).unwrap().as_micros()).unwrap()
}

/// Samples every live replica's own account of what it leads until
/// stopped; panics (in the test, at `finish`) on a guest two replicas
/// lead at once.
struct NoDoubleLead {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<usize>,
}

impl NoDoubleLead {
    fn watch(replicas: Arc<Mutex<Vec<(String, std::net::SocketAddr)>>>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let done = stop.clone();
        let task = tokio::spawn(async move {
            let mut samples = 0;
            while !done.load(Ordering::SeqCst) {
                let targets = replicas.lock().unwrap().clone();
                let mut led: BTreeMap<String, Vec<String>> = BTreeMap::new();
                for (id, addr) in targets {
                    let Some((200, text)) = crate::support::http_get(addr, "/metrics").await else {
                        continue;
                    };
                    for g in GUESTS {
                        let label = format!("guest=\"{g}\"");
                        if prom::metric(&text, "wasmctrl_guest_leader", &[&label]) == 1.0 {
                            led.entry(g.to_string()).or_default().push(id.clone());
                        }
                    }
                }
                // The samples of two replicas are not taken at one instant:
                // a handover between them may show both. Count it only if
                // the next sample shows it still.
                if let Some((g, ids)) = led.iter().find(|(_, ids)| ids.len() > 1) {
                    tokio::time::sleep(Duration::from_millis(400)).await;
                    let again = {
                        let mut n = 0;
                        for id in ids {
                            let addr = replicas
                                .lock()
                                .unwrap()
                                .iter()
                                .find(|(i, _)| i == id)
                                .map(|(_, a)| *a);
                            if let Some(addr) = addr {
                                if let Some((200, text)) =
                                    crate::support::http_get(addr, "/metrics").await
                                {
                                    let label = format!("guest=\"{g}\"");
                                    if prom::metric(&text, "wasmctrl_guest_leader", &[&label])
                                        == 1.0
                                    {
                                        n += 1;
                                    }
                                }
                            }
                        }
                        n
                    };
                    assert!(again < 2, "{g} is led by {ids:?} at once");
                }
                samples += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            samples
        });
        NoDoubleLead { stop, task }
    }

    async fn finish(self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        self.task
            .await
            .expect("no guest was led by two replicas at once")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guests_spread_over_replicas_and_move_when_one_dies() {
    let world = PrintlnWorld::new(&GUESTS).await;
    let admin = world.admin.clone();
    let start = |id: &str| world.replica(id);

    // The first replica compiles the guests into the shared cache.
    let mut a = start("r-a");
    a.wait_ready().await;
    spread_as(&admin, &BTreeMap::from([("r-a", 6)])).await;
    outputs_count(&admin, 1).await;

    let mut b = start("r-b");
    let mut c = start("r-c");
    b.wait_ready().await;
    c.wait_ready().await;
    let live = Arc::new(Mutex::new(
        [&a, &b, &c]
            .iter()
            .map(|r| (r.id.clone(), r.metrics))
            .collect::<Vec<_>>(),
    ));
    let sampler = NoDoubleLead::watch(live.clone());
    let before = spread_as(
        &admin,
        &BTreeMap::from([("r-a", 2), ("r-b", 2), ("r-c", 2)]),
    )
    .await;
    // Each replica's own account agrees with the Leases.
    for r in [&a, &b, &c] {
        let want: Vec<String> = before
            .iter()
            .filter(|(_, h)| h.as_deref() == Some(r.id.as_str()))
            .map(|(g, _)| g.clone())
            .collect();
        bounded(&format!("{} reports leading {want:?}", r.id), async {
            while leads(r).await.as_ref() != Some(&want) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
    }
    // Standing by cold, each replica keeps the caches of the guests it
    // leads only: r-a dropped those of the four it handed over.
    for r in [&a, &b, &c] {
        bounded(&format!("{} caches only what it leads", r.id), async {
            loop {
                let leaders = guest_leaders(r).await;
                let cached: Vec<&String> = leaders
                    .iter()
                    .filter(|(_, l)| l["cached"].as_bool() == Some(true))
                    .map(|(g, _)| g)
                    .collect();
                let led: Vec<&String> = before
                    .iter()
                    .filter(|(_, h)| h.as_deref() == Some(r.id.as_str()))
                    .map(|(g, _)| g)
                    .collect();
                if cached == led {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
    }
    // `/guests` says the same, and who holds each guest.
    for r in [&a, &b, &c] {
        let leaders = guest_leaders(r).await;
        for (g, holder) in &before {
            let leader = &leaders[g];
            assert_eq!(
                leader["holder"].as_str(),
                holder.as_deref(),
                "{}: {g}: {leader}",
                r.id
            );
            assert_eq!(
                leader["leads"].as_bool(),
                Some(holder.as_deref() == Some(r.id.as_str())),
                "{}: {g}: {leader}",
                r.id
            );
            assert_eq!(
                leader["lease"].as_str(),
                Some(wasmctrl::leader_per_guest::guest_lease(GROUP, g).as_str())
            );
        }
    }
    // A new pod is reconciled by each guest's leader only.
    let mut counted = Vec::new();
    for r in [&a, &b, &c] {
        counted.push(reconciles(r).await);
    }
    crate::support::pod("p2").on("n1").create(&admin).await;
    outputs_count(&admin, 2).await;
    for (r, then) in [&a, &b, &c].into_iter().zip(&counted) {
        let now = reconciles(r).await;
        for (g, holder) in &before {
            if holder.as_deref() == Some(r.id.as_str()) {
                assert!(now[g] > then[g], "{} leads {g} and reconciled it", r.id);
            } else {
                assert_eq!(
                    now[g], then[g],
                    "{} does not lead {g} and never reconciled it",
                    r.id
                );
            }
        }
    }

    // SIGKILL r-b: its guests move to r-a and r-c once their Leases expire.
    let moved: Vec<String> = before
        .iter()
        .filter(|(_, h)| h.as_deref() == Some("r-b"))
        .map(|(g, _)| g.clone())
        .collect();
    live.lock().unwrap().retain(|(id, _)| id != "r-b");
    let (killed, killed_wall) = (Instant::now(), SystemTime::now());
    b.child.start_kill().unwrap();
    let after = spread_as(&admin, &BTreeMap::from([("r-a", 3), ("r-c", 3)])).await;
    let took = killed.elapsed();
    assert!(
        took < LEASE + Duration::from_secs(3),
        "r-b's guests moved {took:?} after the kill"
    );
    let api: Api<Lease> = Api::namespaced(admin.clone(), HOST_NS);
    for g in &moved {
        let lease = api
            .get(&wasmctrl::leader_per_guest::guest_lease(GROUP, g))
            .await
            .unwrap();
        let acquired = lease.spec.unwrap().acquire_time.unwrap().0.as_microsecond();
        let earliest = wall_micros(killed_wall)
            + i64::try_from((LEASE - RETRY - STAMP_SLACK).as_micros()).unwrap();
        assert!(
            acquired >= earliest,
            "{g} taken {} ms after the kill, before its Lease could expire",
            (acquired - wall_micros(killed_wall)) / 1000
        );
        assert_ne!(after[g].as_deref(), Some("r-b"));
    }
    crate::support::pod("p3").on("n1").create(&admin).await;
    outputs_count(&admin, 3).await;

    // SIGTERM r-c: it releases its guests; r-a takes them long before the
    // Leases could expire.
    live.lock().unwrap().retain(|(id, _)| id != "r-c");
    let stopped = Instant::now();
    c.sigterm();
    let (status, _, _) = c.exited().await;
    assert!(
        status.success(),
        "r-c exits 0 on SIGTERM: {status}\n{}",
        c.log()
    );
    spread_as(&admin, &BTreeMap::from([("r-a", 6)])).await;
    assert!(
        stopped.elapsed() < LEASE,
        "r-c's guests moved {:?} after SIGTERM: released, not expired",
        stopped.elapsed()
    );
    bounded("r-a caches every guest it now leads", async {
        while !guest_leaders(&a)
            .await
            .values()
            .all(|l| l["cached"].as_bool() == Some(true))
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    crate::support::pod("p4").on("n1").create(&admin).await;
    outputs_count(&admin, 4).await;

    let samples = sampler.finish().await;
    assert!(samples > 10, "the sampler ran ({samples} samples)");
    assert!(a.log().contains("leading the guest"), "{}", a.log());
    a.stop_cleanly().await;
    drop(world);
}

/// `wasmctrl_guest_handovers_total{guest, reason}` of `replica`, summed over
/// its guests.
async fn handovers(replica: &Replica, reason: &str) -> f64 {
    let text = replica.scrape().await.expect("/metrics answers");
    GUESTS
        .iter()
        .map(|g| {
            prom::metric(
                &text,
                "wasmctrl_guest_handovers_total",
                &[&format!("guest=\"{g}\""), &format!("reason=\"{reason}\"")],
            )
        })
        .sum()
}

/// Three replicas started together (a rollout, or a restart of all) each
/// take their share at once: none stands for guests before the others
/// could be seen, so none takes every guest only to give the surplus up
/// rounds later (no `released` handover).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_started_together_take_their_shares_at_once_and_move_nothing() {
    let world = PrintlnWorld::new(&GUESTS).await;
    let admin = world.admin.clone();
    let start = |id: &str| world.replica(id);
    let replicas = [start("r-a"), start("r-b"), start("r-c")];
    // The first moment every guest is held: no replica stands for more
    // than its share, so this is the spread (2 each) only if each saw the
    // other two before standing.
    let first = bounded("every guest held", async {
        loop {
            let h = holders(&admin).await;
            if h.len() == GUESTS.len() && h.values().all(Option::is_some) {
                return h;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    })
    .await;
    let want = BTreeMap::from([
        ("r-a".to_string(), 2),
        ("r-b".to_string(), 2),
        ("r-c".to_string(), 2),
    ]);
    assert_eq!(counts(&first), want, "held when first all held: {first:?}");
    outputs_count(&admin, 1).await;
    // Well past the hysteresis (3 rounds of 0.25 s): nothing moved.
    tokio::time::sleep(RETRY * 8).await;
    assert_eq!(holders(&admin).await, first);
    for r in &replicas {
        assert_eq!(handovers(r, "released").await, 0.0, "{}: {}", r.id, r.log());
    }
    for r in replicas {
        r.stop_cleanly().await;
    }
    drop(world);
}

/// Writes a thief into `guest`'s Lease, held for `seconds` from now (read
/// and written again while the holder's renewals conflict); when.
async fn steal_guest_lease(admin: &Client, guest: &str, seconds: i32) -> Instant {
    let api: Api<Lease> = Api::namespaced(admin.clone(), HOST_NS);
    let name = wasmctrl::leader_per_guest::guest_lease(GROUP, guest);
    bounded("the lease is stolen", async {
        loop {
            let mut lease = api.get(&name).await.unwrap();
            let spec = lease.spec.as_mut().unwrap();
            spec.holder_identity = Some("thief".into());
            spec.lease_duration_seconds = Some(seconds);
            spec.renew_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
                k8s_openapi::jiff::Timestamp::now(),
            ));
            match api.replace(&name, &Default::default(), &lease).await {
                Ok(_) => return Instant::now(),
                Err(kube::Error::Api(e)) if e.code == 409 => continue,
                Err(e) => panic!("stealing the lease: {e}"),
            }
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stolen_guest_lease_stops_that_guest_only_and_the_replica_leads_it_again() {
    let world = PrintlnWorld::new(&GUESTS[..2]).await;
    let admin = world.admin.clone();
    let mut a = world.replica("r-a");
    a.wait_ready().await;
    let output = |g: &str| {
        let api: Api<ConfigMap> = Api::namespaced(admin.clone(), HOST_NS);
        let name = format!("out-{g}");
        async move {
            api.get_opt(&name)
                .await
                .unwrap()
                .and_then(|cm| cm.data?.get("objects").cloned())
        }
    };
    bounded("r-a leads both guests and they converge", async {
        while leads(&a).await != Some(vec!["g1".into(), "g2".into()])
            || output("g1").await.as_deref() != Some("1")
            || output("g2").await.as_deref() != Some("1")
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;

    // Someone else writes itself into g1's Lease, for 5 s.
    let stolen = steal_guest_lease(&admin, "g1", 5).await;

    // r-a stops g1 only: it goes on running, leading and reconciling g2.
    bounded("r-a gives g1 up", async {
        while leads(&a).await != Some(vec!["g2".into()]) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    crate::support::pod("p2").on("n1").create(&admin).await;
    bounded("g2 converges", async {
        while output("g2").await.as_deref() != Some("2") {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        stolen.elapsed() < Duration::from_secs(4),
        "inconclusive: the stolen lease may have expired ({:?})",
        stolen.elapsed()
    );
    assert_eq!(
        output("g1").await.as_deref(),
        Some("1"),
        "g1 wrote without its lease"
    );
    assert!(
        a.child.try_wait().unwrap().is_none(),
        "r-a keeps running\n{}",
        a.log()
    );
    assert_eq!(a.healthz().await, Some(200));
    let text = a.scrape().await.unwrap();
    let lost = prom::metric(
        &text,
        "wasmctrl_guest_lease_handovers_total",
        &["guest=\"g1\"", "reason=\"lost\""],
    );
    assert_eq!(lost, 1.0, "{text}");
    assert!(a.log().contains("lost the guest's lease"), "{}", a.log());

    // Once the thief's lease expires, r-a (still a candidate) leads g1
    // again, on a fresh controller that catches up.
    bounded("r-a leads g1 again and it converges", async {
        while leads(&a).await != Some(vec!["g1".into(), "g2".into()])
            || output("g1").await.as_deref() != Some("2")
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        stolen.elapsed() >= Duration::from_secs(4),
        "r-a took g1 back before the thief's lease expired"
    );
    a.stop_cleanly().await;
    drop(world);
}

/// A replica that leads a guest again but cannot start it (a fresh
/// controller's preflight finds a permission gone) gives the guest up: it
/// releases the Lease rather than hold it uselessly, says so, and stands
/// back, so another replica that can run the guest takes it and
/// reconciles.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_led_guest_that_cannot_start_is_given_up_and_another_replica_takes_it() {
    use wasmctrl_apiserver::{Rule, User};
    let (server, admin) = crate::support::server().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("cache")).unwrap();
    // r-a's own token: its rights are changed under it below.
    let token = "r-a-token";
    server.add_token(token, User::with_rules("r-a", vec![Rule::all()]));
    let kubeconfig_a = dir.path().join("kubeconfig-a");
    std::fs::write(&kubeconfig_a, server.kubeconfig_for_token(token)).unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        server.kubeconfig_for_token(server.admin_token()),
    )
    .unwrap();
    let one = &GUESTS[..1];
    std::fs::copy(
        crate::support::built_guest("guest_println"),
        dir.path().join("g1.wasm"),
    )
    .unwrap();
    crate::support::pod("p1").on("n1").create(&admin).await;
    let mut a = per_guest_replica(
        "r-a",
        dir.path(),
        &kubeconfig_a,
        println_guests(dir.path(), one),
    );
    a.wait_ready().await;
    let output = || {
        let api: Api<ConfigMap> = Api::namespaced(admin.clone(), HOST_NS);
        async move {
            api.get_opt("out-g1")
                .await
                .unwrap()
                .and_then(|cm| cm.data?.get("objects").cloned())
        }
    };
    bounded("r-a leads g1 and it converges", async {
        while leads(&a).await != Some(vec!["g1".into()]) || output().await.as_deref() != Some("1") {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;

    // r-a loses g1 (its workers stop), and may no longer write the
    // guest's output: a fresh controller's preflight will refuse.
    steal_guest_lease(&admin, "g1", 3).await;
    bounded("r-a stops leading g1", async {
        while leads(&a).await != Some(vec![]) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    server.add_token(
        token,
        User::with_rules(
            "r-a",
            vec![
                Rule::new(&["get", "list", "watch"], &["*"]),
                Rule::new(
                    &["*"],
                    &[
                        "leases",
                        "events",
                        "selfsubjectaccessreviews",
                        "selfsubjectrulesreviews",
                    ],
                ),
            ],
        ),
    );
    crate::support::pod("p2").on("n1").create(&admin).await;

    // Once the thief's Lease expires r-a takes g1 again, cannot start it
    // and releases the Lease.
    let released = |text: &str| {
        prom::metric(
            text,
            "wasmctrl_guest_lease_handovers_total",
            &["guest=\"g1\"", "reason=\"released\""],
        )
    };
    bounded("r-a gives g1 up", async {
        while !a
            .log()
            .contains("cannot start the guest it leads; giving it up")
            || released(&a.scrape().await.unwrap_or_default()) < 1.0
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        a.child.try_wait().unwrap().is_none(),
        "r-a keeps running\n{}",
        a.log()
    );
    assert_eq!(leads(&a).await, Some(vec![]), "r-a does not run g1");
    assert_eq!(output().await.as_deref(), Some("1"), "nobody ran g1 yet");
    // Released, not held until it expires: free while r-a stands back.
    bounded("g1's Lease is free", async {
        while holders(&admin).await.remove("g1").flatten().is_some() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;

    // A replica that can run g1 takes it and catches up.
    let mut b = per_guest_replica(
        "r-b",
        dir.path(),
        &kubeconfig,
        println_guests(dir.path(), one),
    );
    b.wait_ready().await;
    bounded("r-b leads g1 and it converges", async {
        while leads(&b).await != Some(vec!["g1".into()]) || output().await.as_deref() != Some("2") {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert_eq!(
        holders(&admin).await.remove("g1").flatten().as_deref(),
        Some("r-b")
    );
    assert_eq!(leads(&a).await, Some(vec![]), "r-a never runs g1");
    b.stop_cleanly().await;
    a.stop_cleanly().await;
    drop(server);
}

/// Buckets of the App guest's keys in the sharding test.
const BUCKETS: u32 = 6;
const APPS: usize = 12;

/// Each bucket's holder (None: free), by bucket.
async fn bucket_holders(admin: &Client) -> BTreeMap<u32, Option<String>> {
    let api: Api<Lease> = Api::namespaced(admin.clone(), HOST_NS);
    let list = api
        .list(&ListParams::default().labels(&format!(
            "wasmctrl.dev/lease-group={GROUP},wasmctrl.dev/guest=app"
        )))
        .await
        .unwrap();
    list.items
        .into_iter()
        .filter_map(|l| {
            let bucket = l
                .metadata
                .labels?
                .get("wasmctrl.dev/bucket")?
                .parse()
                .ok()?;
            let holder = l.spec?.holder_identity.filter(|h| !h.is_empty());
            Some((bucket, holder))
        })
        .collect()
}

/// Prints the last holders seen if the wait panics.
struct ShowOnPanic(String, Arc<Mutex<BTreeMap<u32, Option<String>>>>);

impl Drop for ShowOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}: last seen {:?}", self.0, self.1.lock().unwrap());
        }
    }
}

/// Waits until every bucket is held and the holders hold `want` each.
async fn buckets_spread_as(
    admin: &Client,
    want: &BTreeMap<&str, usize>,
) -> BTreeMap<u32, Option<String>> {
    let want: BTreeMap<String, usize> = want.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let last = Arc::new(Mutex::new(BTreeMap::new()));
    let seen = last.clone();
    let what = format!("buckets spread as {want:?}");
    let _shown = ShowOnPanic(what.clone(), last);
    bounded(&what, async {
        loop {
            let h = bucket_holders(admin).await;
            *seen.lock().unwrap() = h.clone();
            let mut counts: BTreeMap<String, usize> = BTreeMap::new();
            for holder in h.values().flatten() {
                *counts.entry(holder.clone()).or_default() += 1;
            }
            if h.len() == BUCKETS as usize && h.values().all(Option::is_some) && counts == want {
                return h;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
}

/// [`APPS`] Apps, `app-0`…, saying "m0".
async fn create_apps(admin: &Client) {
    for i in 0..APPS {
        crate::app::create_app(admin, crate::support::PODS_NS, &format!("app-{i}"), "m0", 1).await;
    }
}

/// The children of the Apps `apps` (by number) carry `message`.
async fn children_of_say(admin: &Client, apps: &[usize], message: &str) {
    let api: Api<ConfigMap> = Api::namespaced(admin.clone(), crate::support::PODS_NS);
    bounded(&format!("the children of {apps:?} say {message}"), async {
        loop {
            let mut all = true;
            for i in apps {
                let seen = api
                    .get_opt(&format!("app-{i}"))
                    .await
                    .unwrap()
                    .and_then(|cm| cm.data?.get("message").cloned());
                all &= seen.as_deref() == Some(message);
            }
            if all {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

/// Every App's child carries `message`.
async fn children_say(admin: &Client, message: &str) {
    children_of_say(admin, &(0..APPS).collect::<Vec<_>>(), message).await;
}

/// `wasmctrl_writes_total{guest="app"}` of `replica`, every verb.
async fn app_writes(replica: &Replica) -> f64 {
    let text = replica.scrape().await.expect("/metrics answers");
    prom::metric(&text, "wasmctrl_writes_total", &["guest=\"app\""])
}

/// A replica running the App guest with its keys in [`BUCKETS`] buckets.
fn app_replica(dir: &std::path::Path, kubeconfig: &std::path::Path, id: &str) -> Replica {
    let flags = vec![
        "--guest".to_string(),
        dir.join("app.wasm").display().to_string(),
        format!("--shard-buckets={BUCKETS}"),
    ];
    per_guest_replica(id, dir, kubeconfig, flags)
}

/// The App guest's scratch directory (guest file, compile cache) and a
/// kubeconfig for `server`.
fn app_dir(
    server: &wasmctrl_apiserver::RunningApiServer,
) -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, kubeconfig) = scratch_dir(server);
    std::fs::copy(
        crate::support::built_guest("guest_app"),
        dir.path().join("app.wasm"),
    )
    .unwrap();
    (dir, kubeconfig)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_object_guests_keys_are_sharded_in_buckets_over_replicas() {
    let (server, admin) = crate::app::app_server().await;
    let (dir, kubeconfig) = app_dir(&server);
    let start = |id: &str| app_replica(dir.path(), &kubeconfig, id);
    create_apps(&admin).await;
    let mut a = start("r-a");
    a.wait_ready().await;
    let mut b = start("r-b");
    let mut c = start("r-c");
    b.wait_ready().await;
    c.wait_ready().await;
    let holders = buckets_spread_as(
        &admin,
        &BTreeMap::from([("r-a", 2), ("r-b", 2), ("r-c", 2)]),
    )
    .await;
    children_say(&admin, "m0").await;
    let bucket = |i: usize| {
        wasmctrl::leader_per_guest::bucket_of(
            &format!("{}/app-{i}", crate::support::PODS_NS),
            BUCKETS,
        )
    };
    // Each App and its child carry their bucket's label, and each replica
    // caches the Apps of its buckets, none other.
    apps_labelled(&admin).await;
    caches_hold_their_buckets(&admin, &[("r-a", &a), ("r-b", &b), ("r-c", &c)]).await;

    // An edit of the Apps of r-b's buckets only is written by r-b only.
    let of_b: Vec<usize> = (0..APPS)
        .filter(|i| holders[&bucket(*i)].as_deref() == Some("r-b"))
        .collect();
    assert!(
        !of_b.is_empty(),
        "r-b's buckets hold some of the {APPS} Apps: {holders:?}"
    );
    // Let the first writes settle, then count.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = [
        app_writes(&a).await,
        app_writes(&b).await,
        app_writes(&c).await,
    ];
    for i in &of_b {
        crate::app::edit_spec(
            &admin,
            crate::support::PODS_NS,
            &format!("app-{i}"),
            serde_json::json!({"message": "m1"}),
        )
        .await;
    }
    children_of_say(&admin, &of_b, "m1").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = [
        app_writes(&a).await,
        app_writes(&b).await,
        app_writes(&c).await,
    ];
    assert!(
        after[1] > before[1],
        "r-b wrote its keys: {before:?} → {after:?}"
    );
    assert_eq!(after[0], before[0], "r-a wrote none of r-b's keys");
    assert_eq!(after[2], before[2], "r-c wrote none of r-b's keys");

    // SIGKILL r-b: its buckets move once their Leases expire; every App
    // converges again.
    let killed = Instant::now();
    b.child.start_kill().unwrap();
    buckets_spread_as(&admin, &BTreeMap::from([("r-a", 3), ("r-c", 3)])).await;
    assert!(
        killed.elapsed() < LEASE + Duration::from_secs(3),
        "r-b's buckets moved {:?} after the kill",
        killed.elapsed()
    );
    for i in 0..APPS {
        crate::app::edit_spec(
            &admin,
            crate::support::PODS_NS,
            &format!("app-{i}"),
            serde_json::json!({"message": "m2"}),
        )
        .await;
    }
    children_say(&admin, "m2").await;
    caches_hold_their_buckets(&admin, &[("r-a", &a), ("r-c", &c)]).await;

    // `/guests` shows the buckets.
    let leaders = guest_leaders(&a).await;
    let buckets = leaders["app"]["buckets"].as_array().expect("buckets shown");
    assert_eq!(buckets.len(), BUCKETS as usize, "{leaders:?}");
    assert_eq!(
        buckets.iter().filter(|b| b["leads"] == true).count(),
        3,
        "{leaders:?}"
    );
    a.stop_cleanly().await;
    c.stop_cleanly().await;
    drop(server);
}

/// The label of the App guest's buckets.
const SHARD_LABEL: &str = "shard.wasmctrl.dev/app";

/// The bucket label `i`'s App and its child carry.
fn bucket_value(i: usize) -> String {
    let b = wasmctrl::leader_per_guest::bucket_of(
        &format!("{}/app-{i}", crate::support::PODS_NS),
        BUCKETS,
    );
    format!("{b}-of-{BUCKETS}")
}

/// Waits until every App and every App's child carry their bucket's label.
async fn apps_labelled(admin: &Client) {
    let apps = crate::app::apps(admin, crate::support::PODS_NS);
    let children: Api<ConfigMap> = Api::namespaced(admin.clone(), crate::support::PODS_NS);
    bounded("every App and child labelled with its bucket", async {
        loop {
            let mut all = true;
            for i in 0..APPS {
                let name = format!("app-{i}");
                let want = Some(bucket_value(i));
                let app = apps.get(&name).await.unwrap();
                let child = children.get_opt(&name).await.unwrap();
                all &= app
                    .metadata
                    .labels
                    .and_then(|l| l.get(SHARD_LABEL).cloned())
                    == want;
                all &= child.and_then(|c| c.metadata.labels?.get(SHARD_LABEL).cloned()) == want;
            }
            if all {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

/// Waits until each of `replicas` caches exactly the Apps of the buckets
/// it leads (`/guests`: `primaries`, and `cached` on exactly its buckets).
async fn caches_hold_their_buckets(admin: &Client, replicas: &[(&str, &Replica)]) {
    bounded("each replica caches the Apps of its buckets", async {
        let apps = crate::app::apps(admin, crate::support::PODS_NS);
        loop {
            let holders = bucket_holders(admin).await;
            let names: Vec<String> = apps
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter_map(|a| a.metadata.name)
                .collect();
            let mut all = true;
            for (id, replica) in replicas {
                let mine: Vec<u32> = holders
                    .iter()
                    .filter(|(_, h)| h.as_deref() == Some(*id))
                    .map(|(b, _)| *b)
                    .collect();
                let want = names
                    .iter()
                    .filter(|name| {
                        mine.contains(&wasmctrl::leader_per_guest::bucket_of(
                            &format!("{}/{name}", crate::support::PODS_NS),
                            BUCKETS,
                        ))
                    })
                    .count();
                let leader = &guest_leaders(replica).await["app"];
                let cached: Vec<u32> = leader["buckets"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|b| b["cached"] == true)
                    .map(|b| b["bucket"].as_u64().unwrap() as u32)
                    .collect();
                all &= leader["primaries"] == want && cached == mine;
            }
            if all {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
}

/// The App writes of the server's log (an App's status or finalizers, or
/// its child) made by some replica whose `User-Agent` names it, each with
/// the holder of the App's bucket Lease at that resourceVersion: `(app,
/// writer, holder)`.
fn app_writes_and_holders(
    log: &wasmctrl_apiserver::WriteLog,
    history: &BucketHistory,
) -> Vec<(String, String, String)> {
    log.records()
        .into_iter()
        .filter(|w| {
            w.namespace == crate::support::PODS_NS
                && w.name.starts_with("app-")
                && matches!(w.resource.as_str(), "apps" | "apps/status" | "configmaps")
        })
        .filter_map(|w| {
            let writer = w
                .user_agent
                .strip_prefix("wasmctrl/")?
                .split_once(" (")?
                .1
                .strip_suffix(')')?
                .to_string();
            let key = format!("{}/{}", w.namespace, w.name);
            let bucket = wasmctrl::leader_per_guest::bucket_of(&key, BUCKETS);
            Some((w.name, writer, history.holder_before(bucket, w.rv)))
        })
        .collect()
}

/// A write decided on a stale view fails instead of overwriting: a
/// replica's child write is held in flight while someone else (as a
/// replica that took the bucket would) writes the child; released, the
/// held write carries the resourceVersion its replica read and is refused
/// with 409. The replica counts the conflict, requeues and, still leading
/// the key, writes again on the current object: the App converges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_decided_on_a_stale_view_fails_with_a_conflict_instead_of_overwriting() {
    let (server, admin) = crate::app::app_server().await;
    let (dir, kubeconfig) = app_dir(&server);
    crate::app::create_app(&admin, crate::support::PODS_NS, "app-0", "m0", 1).await;
    let mut a = app_replica(dir.path(), &kubeconfig, "r-a");
    a.wait_ready().await;
    let api: Api<ConfigMap> = Api::namespaced(admin.clone(), crate::support::PODS_NS);
    let message = || {
        let api = api.clone();
        async move {
            api.get_opt("app-0")
                .await
                .unwrap()
                .and_then(|cm| cm.data?.get("message").cloned())
        }
    };
    bounded("the child says m0", async {
        while message().await.as_deref() != Some("m0") {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let conflicts = |text: &str| {
        prom::metric(
            text,
            "rest_client_requests_total",
            &["code=\"409\"", "method=\"PATCH\""],
        )
    };
    let before = conflicts(&a.scrape().await.unwrap());

    // r-a's next child write waits at the server.
    let held = server.faults().hold("patch", "configmaps");
    crate::app::edit_spec(
        &admin,
        crate::support::PODS_NS,
        "app-0",
        serde_json::json!({"message": "m1"}),
    )
    .await;
    bounded("r-a's child write is in flight", async {
        while held.waiting() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    // Someone else writes the child meanwhile (an update: not held).
    let mut child = api.get("app-0").await.unwrap();
    child
        .data
        .get_or_insert_default()
        .insert("message".into(), "by-b".into());
    api.replace("app-0", &Default::default(), &child)
        .await
        .unwrap();
    held.release();

    // The held write is refused, counted, and the key reconciled again.
    bounded("r-a's stale write is refused with 409", async {
        while conflicts(&a.scrape().await.unwrap_or_default()) <= before {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let text = a.scrape().await.unwrap();
    assert!(
        prom::metric(
            &text,
            "controller_runtime_reconcile_errors_total",
            &["controller=\"app\"", "reason=\"conflict\""],
        ) >= 1.0,
        "{text}"
    );
    bounded("the child says m1 again", async {
        while message().await.as_deref() != Some("m1") {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    a.stop_cleanly().await;
    drop(server);
}

/// Chaos, small: while every App is edited again and again, a replica is
/// SIGKILLed and a new one joins, three times over. Every edit converges,
/// the buckets end spread over the three live replicas, and no App was
/// ever written by a replica that did not hold its bucket's Lease at that
/// moment (the server's write log names each write's replica by its
/// `User-Agent`; a watch of the Leases gives each version's holder; both
/// in the store's resourceVersion order).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_keys_converge_while_replicas_are_killed_and_replaced() {
    let (server, admin) =
        crate::app::app_server_with(wasmctrl_apiserver::ApiServerConfig::default().write_log(true))
            .await;
    let (history, lease_watch) = BucketHistory::watch(
        &admin,
        HOST_NS,
        &format!("wasmctrl.dev/lease-group={GROUP},wasmctrl.dev/guest=app"),
    );
    let (dir, kubeconfig) = app_dir(&server);
    let start = |id: &str| app_replica(dir.path(), &kubeconfig, id);
    create_apps(&admin).await;
    let mut replicas = Vec::new();
    for id in ["r-0", "r-1", "r-2"] {
        let mut r = start(id);
        r.wait_ready().await;
        replicas.push(r);
    }
    buckets_spread_as(
        &admin,
        &BTreeMap::from([("r-0", 2), ("r-1", 2), ("r-2", 2)]),
    )
    .await;
    children_say(&admin, "m0").await;
    for round in 1..=3 {
        // Edits in flight while the oldest replica dies.
        let message = format!("m{round}");
        for i in 0..APPS {
            crate::app::edit_spec(
                &admin,
                crate::support::PODS_NS,
                &format!("app-{i}"),
                serde_json::json!({ "message": message }),
            )
            .await;
        }
        let mut victim = replicas.remove(0);
        victim.child.start_kill().unwrap();
        let _ = victim.child.wait().await;
        let mut fresh = start(&format!("r-{}", round + 2));
        fresh.wait_ready().await;
        replicas.push(fresh);
        children_say(&admin, &message).await;
    }
    let want: BTreeMap<&str, usize> = replicas.iter().map(|r| (r.id.as_str(), 2)).collect();
    buckets_spread_as(&admin, &want).await;
    children_say(&admin, "m3").await;
    for r in replicas {
        r.stop_cleanly().await;
    }
    // Every replica stopped: nothing writes the bucket Leases any more (a
    // bucket is released, or, if its holder lost it under load, left to
    // expire). Once the watch has reached what a LIST shows now, it has
    // seen every version before.
    let labels = format!("wasmctrl.dev/lease-group={GROUP},wasmctrl.dev/guest=app");
    let current = BucketHistory::current(&admin, HOST_NS, &labels).await;
    assert_eq!(current.len(), BUCKETS as usize, "{current:?}");
    let deadline = Instant::now() + BOUND;
    while !history.reached(&current) {
        assert!(
            Instant::now() < deadline,
            "the watch reaches the bucket Leases' versions {current:?}; last seen: {:?}",
            history.last_versions()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    lease_watch.abort();
    let writes = app_writes_and_holders(&server.write_log(), &history);
    let stray: Vec<_> = writes.iter().filter(|(_, w, h)| w != h).collect();
    assert!(
        stray.is_empty(),
        "Apps written by a replica not holding their bucket: {stray:?}"
    );
    // The check saw handovers: the first replicas (killed since) wrote,
    // and so did one that joined later, and some App was written by
    // two replicas in turn.
    let writers: std::collections::BTreeSet<&str> =
        writes.iter().map(|(_, w, _)| w.as_str()).collect();
    assert!(
        ["r-0", "r-1", "r-2", "r-3"]
            .iter()
            .all(|id| writers.contains(id)),
        "writers {writers:?} ({} writes checked)",
        writes.len()
    );
    let handed_over = (0..APPS).any(|i| {
        let name = format!("app-{i}");
        let by: std::collections::BTreeSet<&str> = writes
            .iter()
            .filter(|(app, _, _)| *app == name)
            .map(|(_, w, _)| w.as_str())
            .collect();
        by.len() > 1
    });
    assert!(handed_over, "no App was written by two replicas in turn");
    drop(server);
}

/// The bucket label is the cache's only way to an object, so a label
/// removed or changed by hand must not read as the App leaving its watch:
/// the App is labelled again and reconciled, its child never deleted (a
/// clean-up would delete it). An App created after the start is labelled
/// by its bucket's holder and reconciled like the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_label_removed_or_changed_by_hand_is_set_again_without_a_clean_up() {
    let (server, admin) = crate::app::app_server().await;
    let (dir, kubeconfig) = app_dir(&server);
    let start = |id: &str| app_replica(dir.path(), &kubeconfig, id);
    create_apps(&admin).await;
    let mut a = start("r-a");
    let mut b = start("r-b");
    a.wait_ready().await;
    b.wait_ready().await;
    let holders = buckets_spread_as(&admin, &BTreeMap::from([("r-a", 3), ("r-b", 3)])).await;
    children_say(&admin, "m0").await;
    apps_labelled(&admin).await;
    let apps = crate::app::apps(&admin, crate::support::PODS_NS);
    let children: Api<ConfigMap> = Api::namespaced(admin.clone(), crate::support::PODS_NS);
    let uid = |cm: ConfigMap| cm.metadata.uid.unwrap();
    let child_uids: Vec<String> = {
        let mut v = Vec::new();
        for i in 0..APPS {
            v.push(uid(children.get(&format!("app-{i}")).await.unwrap()));
        }
        v
    };
    let by_hand = |labels: serde_json::Value| {
        let apps = apps.clone();
        async move |name: String| {
            apps.patch(
                &name,
                &kube::api::PatchParams {
                    field_manager: Some("kubectl-label".into()),
                    ..Default::default()
                },
                &kube::api::Patch::Merge(serde_json::json!({"metadata": {"labels": labels}})),
            )
            .await
            .unwrap();
        }
    };
    // app-0's label removed; app-1's set to a bucket the other replica
    // holds (valid, but not its key's).
    by_hand(serde_json::json!({ SHARD_LABEL: null }))("app-0".into()).await;
    let own = wasmctrl::leader_per_guest::bucket_of(
        &format!("{}/app-1", crate::support::PODS_NS),
        BUCKETS,
    );
    let other = holders
        .iter()
        .find(|(bucket, h)| **bucket != own && *h != &holders[&own])
        .map(|(bucket, _)| *bucket)
        .expect("a bucket of the other replica");
    by_hand(serde_json::json!({ SHARD_LABEL: format!("{other}-of-{BUCKETS}") }))("app-1".into())
        .await;
    // A new App.
    crate::app::create_app(&admin, crate::support::PODS_NS, "app-new", "m0", 1).await;
    apps_labelled(&admin).await;
    bounded("the new App labelled and its child written", async {
        loop {
            let app = apps.get("app-new").await.unwrap();
            let label = app
                .metadata
                .labels
                .and_then(|l| l.get(SHARD_LABEL).cloned());
            let want = wasmctrl::leader_per_guest::bucket_of(
                &format!("{}/app-new", crate::support::PODS_NS),
                BUCKETS,
            );
            let child = children.get_opt("app-new").await.unwrap();
            if label == Some(format!("{want}-of-{BUCKETS}")) && child.is_some() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    // Both relabelled Apps are reconciled again: an edit reaches them.
    for i in 0..2 {
        crate::app::edit_spec(
            &admin,
            crate::support::PODS_NS,
            &format!("app-{i}"),
            serde_json::json!({"message": "m1"}),
        )
        .await;
    }
    children_of_say(&admin, &[0, 1], "m1").await;
    for (i, before) in child_uids.iter().enumerate() {
        let now = uid(children.get(&format!("app-{i}")).await.unwrap());
        assert_eq!(&now, before, "app-{i}'s child was never deleted");
    }
    caches_hold_their_buckets(&admin, &[("r-a", &a), ("r-b", &b)]).await;
    a.stop_cleanly().await;
    b.stop_cleanly().await;
    drop(server);
}
