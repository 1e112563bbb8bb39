//! Unit tests of the elector (against an in-memory Lease) and of the host
//! bridge, with paused time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::core::Status;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::{sleep, Instant};

use super::bridge::publish;
use super::config::lease_duration_seconds;
use super::elector::{Attempt, Elector};
use super::lock::{LeaseLock, Observed, Record};
use super::{
    Error, HostElection, LeaderElectionConfig, LeaderState, LeaderStatus, Leadership, LostReason,
    Result, Termination,
};

/// What the in-memory lease does with requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Serve,
    /// Answer every request with 503.
    Fail,
    /// Never answer (a partition).
    Hang,
}

#[derive(Debug)]
struct Shared {
    lease: Option<Lease>,
    rv: u64,
    conflicts: u64,
    /// When set, a GET answers only once as many GETs have read (to line up a race).
    gate: Option<Arc<tokio::sync::Barrier>>,
}

/// An in-memory Lease with resourceVersion checks, shared by candidates;
/// each [`FakeLeases::connection`] has its own [`Mode`] (to partition one
/// candidate but not another).
#[derive(Debug, Clone)]
struct FakeLeases(Arc<Mutex<Shared>>, Arc<Mutex<Mode>>);

fn api_error(code: u16, reason: &str) -> kube::Error {
    kube::Error::Api(Status::failure(reason, reason).with_code(code).boxed())
}

impl FakeLeases {
    fn new() -> Self {
        FakeLeases(
            Arc::new(Mutex::new(Shared {
                lease: None,
                rv: 0,
                conflicts: 0,
                gate: None,
            })),
            Arc::new(Mutex::new(Mode::Serve)),
        )
    }

    /// Another connection to the same lease, with its own mode.
    fn connection(&self) -> Self {
        FakeLeases(self.0.clone(), Arc::new(Mutex::new(Mode::Serve)))
    }

    fn set_mode(&self, mode: Mode) {
        *self.1.lock().unwrap() = mode;
    }

    fn record(&self) -> Record {
        let s = self.0.lock().unwrap();
        Record::from_spec(s.lease.as_ref().and_then(|l| l.spec.as_ref()))
    }

    /// Writes the lease as another holder would (a new resourceVersion).
    fn put(&self, spec: LeaseSpec) {
        let mut s = self.0.lock().unwrap();
        s.rv += 1;
        let rv = s.rv;
        s.lease = Some(Lease {
            metadata: ObjectMeta {
                name: Some("l".into()),
                namespace: Some("ns".into()),
                resource_version: Some(rv.to_string()),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
        });
    }

    async fn gate(&self) -> Result<(), kube::Error> {
        let mode = *self.1.lock().unwrap();
        match mode {
            Mode::Serve => Ok(()),
            Mode::Fail => Err(api_error(503, "ServiceUnavailable")),
            Mode::Hang => std::future::pending().await,
        }
    }
}

impl LeaseLock for FakeLeases {
    async fn get(&self) -> Result<Option<Lease>, kube::Error> {
        let (read, gate) = {
            let s = self.0.lock().unwrap();
            (s.lease.clone(), s.gate.clone())
        };
        // A gated GET answers what it read only once every racer has read.
        if let Some(g) = gate {
            g.wait().await;
        }
        self.gate().await?;
        Ok(read)
    }

    async fn create(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.write(lease, false).await
    }

    async fn replace(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.write(lease, true).await
    }
}

impl FakeLeases {
    async fn write(&self, lease: &Lease, replace: bool) -> Result<Lease, kube::Error> {
        let mode = *self.1.lock().unwrap();
        match mode {
            Mode::Serve => {}
            Mode::Fail => return Err(api_error(503, "ServiceUnavailable")),
            Mode::Hang => std::future::pending::<()>().await,
        }
        {
            let mut s = self.0.lock().unwrap();
            match (&s.lease, replace) {
                (Some(_), false) => return Err(api_error(409, "AlreadyExists")),
                (None, true) => return Err(api_error(404, "NotFound")),
                (Some(current), true)
                    if current.metadata.resource_version != lease.metadata.resource_version =>
                {
                    s.conflicts += 1;
                    return Err(api_error(409, "Conflict"));
                }
                _ => {}
            }
        }
        self.put(lease.spec.clone().unwrap_or_default());
        Ok(self.0.lock().unwrap().lease.clone().unwrap())
    }
}

fn config(identity: &str) -> LeaderElectionConfig {
    LeaderElectionConfig::default()
        .lease_name("l")
        .namespace("ns")
        .identity(identity)
}

fn candidate(fake: &FakeLeases, identity: &str) -> Elector<FakeLeases> {
    Elector::new(fake.clone(), config(identity)).unwrap()
}

fn held_by(holder: &str, secs: i32) -> LeaseSpec {
    // renewTime far in the past: only its change matters, never its value.
    let old = MicroTime(Timestamp::UNIX_EPOCH);
    LeaseSpec {
        holder_identity: Some(holder.into()),
        lease_duration_seconds: Some(secs),
        acquire_time: Some(old.clone()),
        renew_time: Some(old),
        lease_transitions: Some(4),
        ..LeaseSpec::default()
    }
}

/// Spawns `run` with a stop trigger; returns (status, stop, task).
fn start(
    e: Elector<FakeLeases>,
) -> (
    LeaderStatus,
    oneshot::Sender<()>,
    JoinHandle<Result<Termination>>,
) {
    let status = e.status();
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(e.run(async move {
        let _ = rx.await;
    }));
    (status, tx, task)
}

#[test]
fn config_is_validated_like_client_go() {
    let ok = config("a");
    assert!(ok.validate().is_ok());
    assert!(matches!(config("").validate(), Err(Error::EmptyIdentity)));
    assert!(matches!(
        ok.clone().lease_name("").validate(),
        Err(Error::EmptyLeaseName)
    ));
    assert!(matches!(
        ok.clone().retry_period(Duration::ZERO).validate(),
        Err(Error::ZeroDuration {
            field: "retry_period"
        })
    ));
    assert!(matches!(
        ok.clone()
            .lease_duration(Duration::from_secs(10))
            .validate(),
        Err(Error::LeaseNotLongerThanRenewDeadline { .. })
    ));
    // 10 s is not more than 1.2 x 9 s.
    assert!(matches!(
        ok.clone().retry_period(Duration::from_secs(9)).validate(),
        Err(Error::RenewDeadlineTooShort { .. })
    ));
    assert!(ok
        .clone()
        .retry_period(Duration::from_millis(8_000))
        .validate()
        .is_ok());
    assert_eq!(config("").validate().unwrap_err().metric_label(), "config");
}

#[test]
fn lease_duration_seconds_round_up_so_others_never_wait_less() {
    assert_eq!(lease_duration_seconds(Duration::from_secs(15)).unwrap(), 15);
    assert_eq!(
        lease_duration_seconds(Duration::from_millis(1500)).unwrap(),
        2
    );
    assert_eq!(
        lease_duration_seconds(Duration::from_millis(10)).unwrap(),
        1
    );
    assert!(lease_duration_seconds(Duration::from_secs(u64::MAX)).is_err());
}

#[tokio::test(start_paused = true)]
async fn expiry_is_judged_from_the_local_observation_not_from_renew_time() {
    let record = Record {
        holder: "other".into(),
        lease_duration_seconds: 15,
        ..Record::default()
    };
    let observed = Observed {
        record,
        at: Instant::now(),
    };
    assert!(observed.is_valid(Instant::now()));
    tokio::time::advance(Duration::from_millis(14_999)).await;
    assert!(observed.is_valid(Instant::now()));
    tokio::time::advance(Duration::from_millis(1)).await;
    assert!(!observed.is_valid(Instant::now()));
}

#[tokio::test(start_paused = true)]
async fn a_stale_lease_is_taken_only_a_lease_duration_after_it_was_first_observed() {
    let fake = FakeLeases::new();
    fake.put(held_by("old", 15));
    let t0 = Instant::now();
    let (mut status, stop, task) = start(candidate(&fake, "b"));
    status.until_leading().await.unwrap();
    let waited = t0.elapsed();
    // renewTime is from 1970, yet b waited a full lease duration of its own.
    assert!(
        waited >= Duration::from_secs(15),
        "took over after {waited:?}"
    );
    assert!(waited <= Duration::from_secs(15) + Duration::from_millis(4_400));
    let r = fake.record();
    assert_eq!(r.holder, "b");
    assert_eq!(
        r.transitions, 5,
        "leaseTransitions increments on a new holder"
    );
    assert_eq!(r.lease_duration_seconds, 15);
    assert_eq!(r.acquire_time, r.renew_time);
    let _ = stop.send(());
    assert_eq!(
        task.await.unwrap().unwrap(),
        Termination::Stopped { released: true }
    );
}

#[tokio::test(start_paused = true)]
async fn a_candidate_seeded_with_its_processs_observation_counts_expiry_from_it() {
    let fake = FakeLeases::new();
    fake.put(held_by("old", 15));
    let lease = fake.0.lock().unwrap().lease.clone().unwrap();
    let seen_at = Instant::now();
    sleep(Duration::from_secs(16)).await;
    // Unseeded: a first read starts its own clock.
    let mut fresh = candidate(&fake, "b");
    assert_eq!(
        fresh.try_acquire_or_renew(false).await,
        Attempt::HeldByOther
    );
    // Seeded with the same record seen 16 s ago: expired, taken at once.
    let mut seeded = candidate(&fake, "c");
    seeded.seed(lease.clone(), seen_at);
    assert_eq!(seeded.try_acquire_or_renew(false).await, Attempt::Held);
    assert_eq!(fake.record().holder, "c");
    // A record that changed since the seed restarts the clock.
    fake.put(held_by("d", 15));
    let mut stale = candidate(&fake, "e");
    stale.seed(lease, seen_at);
    assert_eq!(
        stale.try_acquire_or_renew(false).await,
        Attempt::HeldByOther
    );
}

#[tokio::test(start_paused = true)]
async fn a_lease_its_holder_keeps_renewing_is_never_taken() {
    let fake = FakeLeases::new();
    fake.put(held_by("a", 15));
    let (status, stop, task) = start(candidate(&fake, "b"));
    let renewer = {
        let fake = fake.clone();
        tokio::spawn(async move {
            for i in 1..=30u64 {
                sleep(Duration::from_secs(2)).await;
                let mut spec = held_by("a", 15);
                spec.renew_time = Some(MicroTime(
                    Timestamp::from_second(i64::try_from(i).unwrap()).unwrap(),
                ));
                fake.put(spec);
            }
        })
    };
    renewer.await.unwrap();
    assert_eq!(
        status.state(),
        LeaderState::Follower {
            holder: Some("a".into())
        }
    );
    assert_eq!(fake.record().holder, "a");
    let _ = stop.send(());
    assert_eq!(
        task.await.unwrap().unwrap(),
        Termination::Stopped { released: false }
    );
}

#[tokio::test(start_paused = true)]
async fn a_released_lease_is_taken_at_once() {
    let fake = FakeLeases::new();
    let mut spec = held_by("", 1);
    spec.holder_identity = Some(String::new());
    fake.put(spec);
    let t0 = Instant::now();
    let (mut status, _stop, _task) = start(candidate(&fake, "b"));
    status.until_leading().await.unwrap();
    assert!(t0.elapsed() < Duration::from_millis(1));
    assert_eq!(fake.record().transitions, 5);
}

#[tokio::test(start_paused = true)]
async fn leader_renews_every_retry_period_keeping_acquire_time_and_transitions() {
    let fake = FakeLeases::new();
    let (mut status, _stop, _task) = start(candidate(&fake, "a"));
    status.until_leading().await.unwrap();
    let first = fake.record();
    assert_eq!(
        first.transitions, 0,
        "creating the lease is not a transition"
    );
    sleep(Duration::from_millis(2_001)).await;
    let second = fake.record();
    assert_ne!(second.renew_time, first.renew_time);
    assert_eq!(second.acquire_time, first.acquire_time);
    assert_eq!(second.transitions, 0);
    assert_eq!(second.holder, "a");
    // renewTime moved by exactly the retry period (tokio-driven wall clock).
    let (Some(MicroTime(t1)), Some(MicroTime(t2))) = (first.renew_time, second.renew_time) else {
        panic!("times set")
    };
    assert_eq!(t2.duration_since(t1).as_millis(), 2_000);
    assert!(status.is_leader());
    assert_eq!(status.master_status(), 1);
}

#[tokio::test(start_paused = true)]
async fn leader_declares_lost_exactly_at_renew_deadline_when_renewals_fail() {
    let fake = FakeLeases::new();
    let (mut status, _stop, task) = start(candidate(&fake, "a"));
    status.until_leading().await.unwrap();
    let acquired = Instant::now();
    fake.set_mode(Mode::Fail);
    let state = status.until_not_leading().await;
    assert_eq!(acquired.elapsed(), Duration::from_secs(10));
    assert!(matches!(
        state,
        LeaderState::Lost(LostReason::RenewDeadlineExceeded { .. })
    ));
    let Termination::Lost(LostReason::RenewDeadlineExceeded { last_error }) =
        task.await.unwrap().unwrap()
    else {
        panic!("lost")
    };
    assert!(last_error.unwrap().contains("503"));
    assert_eq!(status.master_status(), 0);
}

#[tokio::test(start_paused = true)]
async fn leader_declares_lost_at_renew_deadline_even_when_requests_hang() {
    let fake = FakeLeases::new();
    let (mut status, _stop, task) = start(candidate(&fake, "a"));
    status.until_leading().await.unwrap();
    let acquired = Instant::now();
    sleep(Duration::from_millis(4_500)).await; // two renewals succeed (2 s, 4 s)
    fake.set_mode(Mode::Hang);
    let last_renewal = acquired + Duration::from_secs(4);
    assert!(matches!(
        task.await.unwrap().unwrap(),
        Termination::Lost(LostReason::RenewDeadlineExceeded { last_error: None })
    ));
    assert_eq!(Instant::now() - last_renewal, Duration::from_secs(10));
    // ...strictly before anyone else may take over (15 s after observing).
    assert!(!status.is_leader());
}

#[tokio::test(start_paused = true)]
async fn leader_declares_lost_at_once_when_another_holder_appears() {
    let fake = FakeLeases::new();
    let (mut status, _stop, task) = start(candidate(&fake, "a"));
    status.until_leading().await.unwrap();
    fake.put(held_by("intruder", 15));
    let t = Instant::now();
    assert_eq!(
        task.await.unwrap().unwrap(),
        Termination::Lost(LostReason::Taken {
            holder: Some("intruder".into())
        })
    );
    assert!(t.elapsed() <= Duration::from_secs(2));
    assert_eq!(
        fake.record().holder,
        "intruder",
        "a lost leader never writes"
    );
}

#[tokio::test(start_paused = true)]
async fn stopping_a_leader_releases_the_lease_like_client_go() {
    let fake = FakeLeases::new();
    let (mut status, stop, task) = start(candidate(&fake, "a"));
    status.until_leading().await.unwrap();
    sleep(Duration::from_secs(5)).await;
    let before = fake.record();
    let _ = stop.send(());
    assert_eq!(
        task.await.unwrap().unwrap(),
        Termination::Stopped { released: true }
    );
    let r = fake.record();
    assert_eq!(r.holder, "");
    assert_eq!(r.lease_duration_seconds, 1);
    assert_eq!(r.transitions, before.transitions);
    assert_eq!(r.acquire_time, r.renew_time);
    assert_eq!(status.state(), LeaderState::Stopped);
}

#[tokio::test(start_paused = true)]
async fn stopping_without_release_on_cancel_leaves_the_lease_to_expire() {
    let fake = FakeLeases::new();
    let e = Elector::new(fake.clone(), config("a").release_on_cancel(false)).unwrap();
    let (mut status, stop, task) = start(e);
    status.until_leading().await.unwrap();
    let _ = stop.send(());
    assert_eq!(
        task.await.unwrap().unwrap(),
        Termination::Stopped { released: false }
    );
    assert_eq!(fake.record().holder, "a");
}

#[tokio::test(start_paused = true)]
async fn racing_candidates_for_an_expired_lease_produce_exactly_one_winner() {
    let fake = FakeLeases::new();
    fake.put(held_by("old", 15));
    let mut a = candidate(&fake, "a");
    let mut b = candidate(&fake, "b");
    assert_eq!(a.try_acquire_or_renew(false).await, Attempt::HeldByOther);
    assert_eq!(b.try_acquire_or_renew(false).await, Attempt::HeldByOther);
    sleep(Duration::from_secs(15)).await;
    // Both read the expired lease before either writes.
    fake.0.lock().unwrap().gate = Some(Arc::new(tokio::sync::Barrier::new(2)));
    let (ra, rb) = tokio::join!(a.try_acquire_or_renew(false), b.try_acquire_or_renew(false));
    let mut results = [ra, rb];
    results.sort_by_key(|r| matches!(r, Attempt::Held));
    assert!(
        matches!(&results[0], Attempt::Failed(e) if e.contains("409")),
        "{results:?}"
    );
    assert_eq!(results[1], Attempt::Held);
    assert_eq!(fake.0.lock().unwrap().conflicts, 1);
    assert_eq!(
        a.conflicts.load(Ordering::Relaxed) + b.conflicts.load(Ordering::Relaxed),
        1
    );
    assert_eq!(fake.record().transitions, 5, "exactly one transition");
}

#[tokio::test(start_paused = true)]
async fn a_partitioned_leader_declares_lost_before_a_standby_can_lead() {
    let fake = FakeLeases::new();
    let to_a = fake.connection();
    let (mut a, _stop_a, task_a) = start(candidate(&to_a, "a"));
    a.until_leading().await.unwrap();
    let (mut b, _stop_b, _task_b) = start(candidate(&fake.connection(), "b"));
    sleep(Duration::from_millis(5_100)).await; // a renewed at 2 s and 4 s
    assert!(a.is_leader());
    assert_eq!(
        b.state(),
        LeaderState::Follower {
            holder: Some("a".into())
        }
    );
    let last_renewal = Instant::now() - Duration::from_millis(1_100);
    to_a.set_mode(Mode::Hang);

    let a_lost = tokio::spawn(async move {
        let state = a.until_not_leading().await;
        (Instant::now(), state)
    });
    b.until_leading().await.unwrap();
    let b_leads = Instant::now();
    let (a_lost, a_state) = a_lost.await.unwrap();
    assert!(matches!(
        a_state,
        LeaderState::Lost(LostReason::RenewDeadlineExceeded { .. })
    ));
    assert_eq!(a_lost - last_renewal, Duration::from_secs(10));
    // b saw the last renewal no earlier than it was written, so it waits 15 s from then.
    assert!(
        b_leads - last_renewal >= Duration::from_secs(15),
        "{:?}",
        b_leads - last_renewal
    );
    assert!(a_lost < b_leads);
    assert!(matches!(
        task_a.await.unwrap().unwrap(),
        Termination::Lost(_)
    ));
    assert_eq!(fake.record().holder, "b");
    assert_eq!(fake.record().transitions, 1);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_elector_reads_as_lost_not_leader() {
    let fake = FakeLeases::new();
    let e = candidate(&fake, "a");
    let (mut status, _stop, task) = start(e);
    status.until_leading().await.unwrap();
    task.abort();
    let _ = task.await;
    assert_eq!(status.state(), LeaderState::Lost(LostReason::ElectorGone));
    assert!(!status.is_leader());
    assert_eq!(
        status.until_not_leading().await,
        LeaderState::Lost(LostReason::ElectorGone)
    );
}

// The bridge: leadership as the host sees it.

#[test]
fn the_host_reads_a_lost_or_stopped_elector_as_lost_with_its_final_state() {
    assert_eq!(
        Leadership::from(LeaderState::Follower {
            holder: Some("b".into())
        }),
        Leadership::Waiting
    );
    assert_eq!(
        Leadership::from(LeaderState::Leader {
            valid_until: Instant::now()
        }),
        Leadership::Leading
    );
    assert_eq!(
        Leadership::from(LeaderState::Lost(LostReason::Taken { holder: None })),
        Leadership::Lost("Lost(Taken { holder: None })".into())
    );
    assert_eq!(
        Leadership::from(LeaderState::Stopped),
        Leadership::Lost("Stopped".into())
    );
}

#[test]
fn without_an_election_the_host_leads_at_once_and_reports_master_status_1() {
    let (election, leadership) = HostElection::always_leading();
    assert_eq!(*leadership.borrow(), Leadership::Leading);
    let gauge = Gauge::default();
    let handle = election.start(gauge.clone());
    assert_eq!(gauge.get(), 1);
    assert!(
        leadership.has_changed().is_ok(),
        "the signal stays open while the handle lives"
    );
    handle.abort();
    assert!(leadership.has_changed().is_err());
}

#[tokio::test(start_paused = true)]
async fn the_host_waits_then_leads_then_loses_and_master_status_follows() {
    let fake = FakeLeases::new();
    let (status, _stop, _task) = start(candidate(&fake, "a"));
    let (tx, mut leadership) = tokio::sync::watch::channel(Leadership::Waiting);
    let gauge = Gauge::default();
    tokio::spawn(publish(status, tx, gauge.clone()));

    let led = leadership.wait_for(|l| *l != Leadership::Waiting).await;
    assert_eq!(*led.unwrap(), Leadership::Leading);
    assert_eq!(gauge.get(), 1);

    let leading_since = Instant::now();
    fake.set_mode(Mode::Fail);
    let lost = leadership.wait_for(|l| *l != Leadership::Leading).await;
    let Leadership::Lost(why) = lost.unwrap().clone() else {
        panic!("lost")
    };
    assert!(why.contains("RenewDeadlineExceeded"), "{why}");
    assert_eq!(leading_since.elapsed(), Duration::from_secs(10));
    assert_eq!(gauge.get(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_elector_stopped_before_leading_is_lost_to_the_host_and_never_master() {
    let fake = FakeLeases::new();
    fake.put(held_by("other", 15));
    let (status, stop, task) = start(candidate(&fake, "a"));
    let (tx, mut leadership) = tokio::sync::watch::channel(Leadership::Waiting);
    let gauge = Gauge::default();
    let publisher = tokio::spawn(publish(status, tx, gauge.clone()));
    sleep(Duration::from_secs(1)).await;
    assert_eq!(*leadership.borrow_and_update(), Leadership::Waiting);

    let _ = stop.send(());
    task.await.unwrap().unwrap();
    publisher.await.unwrap();
    assert_eq!(*leadership.borrow(), Leadership::Lost("Stopped".into()));
    assert_eq!(gauge.get(), 0);
}
