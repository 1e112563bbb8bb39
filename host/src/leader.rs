//! Leader election over a `coordination.k8s.io/v1` Lease, following
//! client-go's `tools/leaderelection` rules.
//!
//! This module owns one Lease: it creates it, acquires it, renews it, observes
//! who holds it, and releases it, always with resourceVersion-guarded writes so
//! two candidates racing for an expired lease produce exactly one winner (the
//! other gets 409 Conflict). It publishes the candidate's [`LeaderState`] and
//! nothing else: it never runs workers, never waits for caches, and never
//! writes any object but its Lease. Stopping writes when leadership is lost is
//! the host's job; this module's job is to say so at once.
//!
//! # Rules (as client-go)
//! - A holder's lease is judged expired by **this candidate's local clock**:
//!   `leaseDurationSeconds` after the moment it last *observed a change* of
//!   the lease record. `renewTime` in the record is never compared with the
//!   local clock (clocks of candidates may be skewed); only its change counts.
//! - A lease with an empty `holderIdentity` (released) is free at once.
//! - Acquiring sets `holderIdentity`, `leaseDurationSeconds`, `acquireTime` and
//!   `renewTime`, and increments `leaseTransitions` when the holder changes;
//!   renewing only moves `renewTime`. Releasing clears `holderIdentity`, sets
//!   `leaseDurationSeconds` to 1 and both times to now, and keeps
//!   `leaseTransitions`.
//!
//! # Where this is stricter than client-go
//! - The renew deadline is measured from the moment the last *successful*
//!   renewal was sent, and a request still in flight at the deadline is
//!   abandoned. client-go measures it from the start of each renewal round, so
//!   it may hold on for `retry_period + renew_deadline`. Here a leader always
//!   declares itself lost before any other candidate can see its lease expire,
//!   because `renew_deadline < lease_duration` and the others start their
//!   clocks no earlier than that request was sent.
//! - Seeing another holder (or a cleared holder) in the record while leading
//!   is reported as [`LostReason::Taken`] at once rather than after the
//!   deadline, and the elector never tries to lead again: a lost leader exits.
//! - `leaseDurationSeconds` is `lease_duration` rounded *up* to whole seconds,
//!   so others never wait less than configured.
//!
//! # Use
//! ```no_run
//! # async fn host(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use wasmctrl::leader::{LeaderElectionConfig, LeaderElector, Termination};
//!
//! let config = LeaderElectionConfig::default()
//!     .namespace("ops")
//!     .lease_name("gpu-summary")
//!     .identity(wasmctrl::leader::default_identity().unwrap_or_default());
//! let elector = LeaderElector::new(client, config)?.spawn();
//! let mut status = elector.status();
//! if status.until_leading().await.is_ok() {
//!     // start workers; give writers `elector.status()` to check `is_leader()`
//!     let _state = status.until_not_leading().await; // lost: stop writing, exit non-zero
//! }
//! match elector.stop().await? {
//!     Termination::Stopped { .. } => {}
//!     Termination::Lost(reason) => return Err(reason.into()),
//! }
//! # Ok(())
//! # }
//! ```

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::Client;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{sleep, sleep_until, timeout, Instant};

/// client-go's `JitterFactor`: a candidate waits between `retry_period` and
/// `retry_period * (1 + JITTER_FACTOR)` between acquisition attempts, and the
/// renew deadline must exceed `retry_period * JITTER_FACTOR`.
pub const JITTER_FACTOR: f64 = 1.2;

/// Errors of this module.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configured lease name is empty.
    #[error("leader election: the lease name is empty")]
    EmptyLeaseName,
    /// The configured namespace is empty.
    #[error("leader election: the lease namespace is empty")]
    EmptyNamespace,
    /// The configured identity is empty (every candidate needs a unique one).
    #[error("leader election: the candidate identity is empty")]
    EmptyIdentity,
    /// A duration that must be positive is zero.
    #[error("leader election: {field} must be greater than zero")]
    ZeroDuration {
        /// Which setting (`lease_duration`, `renew_deadline`, `retry_period`).
        field: &'static str,
    },
    /// `lease_duration <= renew_deadline`: a leader could still think it leads
    /// after others consider its lease expired.
    #[error("leader election: lease duration ({lease_duration:?}) must be greater than renew deadline ({renew_deadline:?})")]
    LeaseNotLongerThanRenewDeadline {
        /// Configured lease duration.
        lease_duration: Duration,
        /// Configured renew deadline.
        renew_deadline: Duration,
    },
    /// `renew_deadline <= JITTER_FACTOR * retry_period`: a leader would not
    /// get a single retry before giving up.
    #[error("leader election: renew deadline ({renew_deadline:?}) must be greater than {JITTER_FACTOR} x retry period ({retry_period:?})")]
    RenewDeadlineTooShort {
        /// Configured renew deadline.
        renew_deadline: Duration,
        /// Configured retry period.
        retry_period: Duration,
    },
    /// The lease duration does not fit the Lease's `leaseDurationSeconds` (i32).
    #[error("leader election: lease duration {0:?} is too long for leaseDurationSeconds")]
    LeaseDurationTooLong(Duration),
    /// Releasing the lease on stop failed; others take over when it expires.
    #[error("leader election: releasing lease {lease} failed: {source}")]
    Release {
        /// `namespace/name` of the lease.
        lease: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Releasing the lease on stop did not finish within the renew deadline.
    #[error("leader election: releasing lease {lease} timed out after {after:?}")]
    ReleaseTimedOut {
        /// `namespace/name` of the lease.
        lease: String,
        /// How long it waited.
        after: Duration,
    },
    /// The elector task panicked or was aborted.
    #[error("leader election: the elector task ended abnormally: {0}")]
    Task(String),
}

impl Error {
    /// A short, stable label for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::EmptyLeaseName
            | Error::EmptyNamespace
            | Error::EmptyIdentity
            | Error::ZeroDuration { .. }
            | Error::LeaseNotLongerThanRenewDeadline { .. }
            | Error::RenewDeadlineTooShort { .. }
            | Error::LeaseDurationTooLong(_) => "config",
            Error::Release { .. } => "release",
            Error::ReleaseTimedOut { .. } => "release_timeout",
            Error::Task(_) => "task",
        }
    }
}

/// Result alias of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How to elect a leader. `Default` carries client-go's core defaults
/// (15 s / 10 s / 2 s) but no identity: set one that is unique per replica
/// (see [`default_identity`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// Name of the Lease (also the `name` label of `leader_election_master_status`).
    pub lease_name: String,
    /// Namespace of the Lease.
    pub namespace: String,
    /// This candidate's identity, written to `holderIdentity`.
    pub identity: String,
    /// How long others wait, after last seeing the lease record change, before
    /// taking it over.
    pub lease_duration: Duration,
    /// How long a leader keeps trying to renew before declaring itself lost.
    pub renew_deadline: Duration,
    /// Pause between acquisition attempts (jittered) and between renewals.
    pub retry_period: Duration,
    /// Release the lease (clear the holder) when stopped while leading.
    pub release_on_cancel: bool,
}

impl Default for LeaderElectionConfig {
    fn default() -> Self {
        LeaderElectionConfig {
            lease_name: "wasmctrl".into(),
            namespace: "default".into(),
            identity: String::new(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: true,
        }
    }
}

impl LeaderElectionConfig {
    /// Name of the Lease.
    #[must_use]
    pub fn lease_name(mut self, name: impl Into<String>) -> Self {
        self.lease_name = name.into();
        self
    }

    /// Namespace of the Lease (the host's namespace).
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// This candidate's identity. It must be unique among candidates: a
    /// candidate that finds its own identity in the record treats the lease
    /// as its own and takes it back at once (as client-go does).
    #[must_use]
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = identity.into();
        self
    }

    /// How long a lease lasts without an observed renewal. Shorter means
    /// faster failover but less tolerance to clock *rate* skew between
    /// candidates and to API latency. Written rounded up to whole seconds.
    #[must_use]
    pub fn lease_duration(mut self, d: Duration) -> Self {
        self.lease_duration = d;
        self
    }

    /// How long the leader retries renewing before it declares itself lost.
    /// Must be shorter than the lease duration: the gap is the margin by which
    /// a partitioned leader stops before anyone else may start.
    #[must_use]
    pub fn renew_deadline(mut self, d: Duration) -> Self {
        self.renew_deadline = d;
        self
    }

    /// Pause between attempts. Each attempt is one or two API requests.
    #[must_use]
    pub fn retry_period(mut self, d: Duration) -> Self {
        self.retry_period = d;
        self
    }

    /// Whether stopping a leader releases the lease. Only set this when all
    /// work guarded by the lease has finished before the stop is requested,
    /// or two processes may act at once.
    #[must_use]
    pub fn release_on_cancel(mut self, release: bool) -> Self {
        self.release_on_cancel = release;
        self
    }

    /// Checks the settings the way client-go's `NewLeaderElector` does.
    pub fn validate(&self) -> Result<()> {
        if self.lease_name.is_empty() {
            return Err(Error::EmptyLeaseName);
        }
        if self.namespace.is_empty() {
            return Err(Error::EmptyNamespace);
        }
        if self.identity.is_empty() {
            return Err(Error::EmptyIdentity);
        }
        for (field, d) in [
            ("lease_duration", self.lease_duration),
            ("renew_deadline", self.renew_deadline),
            ("retry_period", self.retry_period),
        ] {
            if d.is_zero() {
                return Err(Error::ZeroDuration { field });
            }
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(Error::LeaseNotLongerThanRenewDeadline {
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
            });
        }
        if self.renew_deadline <= self.retry_period.mul_f64(JITTER_FACTOR) {
            return Err(Error::RenewDeadlineTooShort {
                renew_deadline: self.renew_deadline,
                retry_period: self.retry_period,
            });
        }
        lease_duration_seconds(self.lease_duration)?;
        Ok(())
    }

    fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.lease_name)
    }
}

/// `leaseDurationSeconds` for a lease duration: rounded up, never below 1.
fn lease_duration_seconds(d: Duration) -> Result<i32> {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    i32::try_from(secs.max(1)).map_err(|_| Error::LeaseDurationTooLong(d))
}

/// The identity a replica should use by default: `$POD_NAME`, else
/// `$HOSTNAME`, else the kernel's host name. None if none is known.
pub fn default_identity() -> Option<String> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    env("POD_NAME").or_else(|| env("HOSTNAME")).or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
    })
}

/// Why a leader stopped being leader without being asked to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LostReason {
    /// No renewal succeeded within the renew deadline (API unreachable,
    /// slow, or refusing).
    #[error("could not renew the lease within the renew deadline (last error: {})", last_error.as_deref().unwrap_or("none: requests did not complete"))]
    RenewDeadlineExceeded {
        /// The last renewal error seen, if any request completed.
        last_error: Option<String>,
    },
    /// The lease record names another holder (None: the holder was cleared
    /// by someone else).
    #[error("the lease was taken over by {}", holder.as_deref().unwrap_or("nobody (holder cleared)"))]
    Taken {
        /// The holder now in the record.
        holder: Option<String>,
    },
    /// The elector task is gone (aborted or panicked) while leading.
    #[error("the leader elector stopped running")]
    ElectorGone,
}

impl LostReason {
    /// A short, stable label for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            LostReason::RenewDeadlineExceeded { .. } => "renew_deadline",
            LostReason::Taken { .. } => "taken",
            LostReason::ElectorGone => "elector_gone",
        }
    }
}

/// Where a candidate stands. Transitions only go
/// `Follower → Leader → (Lost | Stopped)` or `Follower → Stopped`: an elector
/// that lost never leads again (the process is expected to exit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaderState {
    /// Waiting to acquire. `holder` is the holder as last observed (None: not
    /// read yet, or no holder).
    Follower {
        /// Current holder as last observed.
        holder: Option<String>,
    },
    /// Holding the lease.
    Leader {
        /// The instant the elector declares the lease lost unless it renews
        /// first. [`LeaderStatus::is_leader`] is false from this instant even
        /// if the elector task has not run yet.
        valid_until: Instant,
    },
    /// Leadership ended without being asked to. Terminal.
    Lost(LostReason),
    /// Stopped on request (after releasing the lease if it held it). Terminal.
    Stopped,
}

impl LeaderState {
    /// The value of `leader_election_master_status{name}`: 1 while leading, else 0.
    pub fn master_status(&self) -> i64 {
        i64::from(matches!(self, LeaderState::Leader { .. }))
    }
}

/// A cheap, cloneable view of one elector's state, for whoever needs to know
/// whether this replica leads: the host's workers and writers, readiness,
/// and metrics.
#[derive(Debug, Clone)]
pub struct LeaderStatus {
    rx: watch::Receiver<LeaderState>,
    lease_name: Arc<str>,
    conflicts: Arc<AtomicU64>,
}

impl LeaderStatus {
    /// The current state. If the elector task is gone without reporting a
    /// terminal state, a leader reads as `Lost(ElectorGone)` and a follower
    /// as `Stopped`.
    pub fn state(&self) -> LeaderState {
        let closed = self.rx.has_changed().is_err();
        let state = self.rx.borrow().clone();
        match state {
            LeaderState::Leader { .. } if closed => LeaderState::Lost(LostReason::ElectorGone),
            LeaderState::Follower { .. } if closed => LeaderState::Stopped,
            s => s,
        }
    }

    /// True while this replica holds the lease and its renew deadline has not
    /// passed. Check it before every write.
    pub fn is_leader(&self) -> bool {
        match self.state() {
            LeaderState::Leader { valid_until } => Instant::now() < valid_until,
            _ => false,
        }
    }

    /// `leader_election_master_status{name}`: 1 while [`Self::is_leader`], else 0.
    pub fn master_status(&self) -> i64 {
        i64::from(self.is_leader())
    }

    /// The lease name: the `name` label of `leader_election_master_status`.
    pub fn lease_name(&self) -> &str {
        &self.lease_name
    }

    /// How many of this candidate's Lease writes were rejected with 409
    /// Conflict (another writer got there first).
    pub fn conflicts(&self) -> u64 {
        self.conflicts.load(Ordering::Relaxed)
    }

    /// Waits until this replica leads. `Err` carries the terminal state if the
    /// elector stopped (or is gone) before that.
    pub async fn until_leading(&mut self) -> Result<(), LeaderState> {
        let reached = self
            .rx
            .wait_for(|s| !matches!(s, LeaderState::Follower { .. }))
            .await
            .map(|s| s.clone());
        match reached {
            Ok(LeaderState::Leader { .. }) => Ok(()),
            Ok(other) => Err(other),
            Err(_) => Err(self.state()),
        }
    }

    /// Waits until this replica is not the leader and returns that state
    /// (`Lost`, or `Stopped` if stopped on request). Returns at once if it
    /// does not lead now. Resolves at the renew deadline even if the elector
    /// task has not run, so waiting on this is as prompt as [`Self::is_leader`];
    /// in that case the reason is `RenewDeadlineExceeded { last_error: None }`
    /// and the elector's [`Termination`] carries the last error.
    pub async fn until_not_leading(&mut self) -> LeaderState {
        loop {
            let current = self.rx.borrow_and_update().clone();
            let LeaderState::Leader { valid_until } = current else {
                return self.state();
            };
            tokio::select! {
                changed = self.rx.changed() => {
                    if changed.is_err() {
                        return self.state();
                    }
                }
                () = sleep_until(valid_until) => {
                    // The elector reports the same deadline with its last
                    // error, unless this side noticed first.
                    return match self.state() {
                        LeaderState::Leader { .. } | LeaderState::Follower { .. } => {
                            LeaderState::Lost(LostReason::RenewDeadlineExceeded { last_error: None })
                        }
                        terminal => terminal,
                    };
                }
            }
        }
    }
}

/// How [`LeaderElector::run`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Termination {
    /// Stopped on request. `released` is true if it led and cleared the
    /// holder so a standby can take over at once.
    Stopped {
        /// Whether the lease was released.
        released: bool,
    },
    /// Leadership was lost; the host must stop writing and exit non-zero.
    Lost(LostReason),
}

/// One candidate in a Lease election. Create it, take a [`LeaderStatus`],
/// then [`run`](Self::run) or [`spawn`](Self::spawn) it.
pub struct LeaderElector {
    inner: Elector<KubeLeases>,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl LeaderElector {
    /// A candidate for `config.namespace/config.lease_name`. Fails if the
    /// configuration is invalid ([`LeaderElectionConfig::validate`]).
    pub fn new(client: Client, config: LeaderElectionConfig) -> Result<Self> {
        config.validate()?;
        let lock = KubeLeases {
            api: Api::namespaced(client, &config.namespace),
            name: config.lease_name.clone(),
        };
        Ok(LeaderElector {
            inner: Elector::new(lock, config)?,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &LeaderElectionConfig {
        &self.inner.config
    }

    /// A view of this candidate's state (starts as `Follower { holder: None }`).
    pub fn status(&self) -> LeaderStatus {
        self.inner.status()
    }

    /// Runs the election until leadership is lost or `stop` resolves: tries
    /// to acquire every `retry_period` (jittered); once leading, renews every
    /// `retry_period` and reports `Lost` the instant the renew deadline
    /// passes or another holder appears. When `stop` resolves while leading
    /// (and `release_on_cancel`), releases the lease first. Stop only after
    /// all work guarded by the lease has finished.
    ///
    /// Errors only if releasing fails; the lease then expires on its own.
    pub async fn run(self, stop: impl Future<Output = ()>) -> Result<Termination> {
        self.inner.run(stop).await
    }

    /// Runs the election on a new task; the handle stops it.
    pub fn spawn(self) -> LeaderHandle {
        let status = self.status();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let task = tokio::spawn(self.run(async move {
            // A dropped handle also means stop.
            let _ = stop_rx.await;
        }));
        LeaderHandle {
            status,
            stop: Some(stop_tx),
            task,
        }
    }
}

/// A spawned elector. Dropping the handle requests a graceful stop, like
/// [`LeaderHandle::stop`] without waiting.
#[derive(Debug)]
pub struct LeaderHandle {
    status: LeaderStatus,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<Termination>>,
}

impl LeaderHandle {
    /// A view of the elector's state.
    pub fn status(&self) -> LeaderStatus {
        self.status.clone()
    }

    /// Shorthand for `status().is_leader()`.
    pub fn is_leader(&self) -> bool {
        self.status.is_leader()
    }

    /// Requests a graceful stop and waits for it: a leader releases the
    /// lease (bounded by the renew deadline) so a standby takes over at once.
    /// Call it only after all work guarded by the lease has finished.
    pub async fn stop(mut self) -> Result<Termination> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.join_inner().await
    }

    /// Waits for the elector to end by itself (it only does when leadership
    /// is lost).
    pub async fn join(mut self) -> Result<Termination> {
        self.join_inner().await
    }

    /// Stops the elector abruptly: no release, the lease expires on its own.
    /// The status reads as `Lost(ElectorGone)` (or `Stopped` for a follower).
    pub fn abort(self) {
        self.task.abort();
    }

    async fn join_inner(&mut self) -> Result<Termination> {
        match (&mut self.task).await {
            Ok(r) => r,
            Err(e) => Err(Error::Task(e.to_string())),
        }
    }
}

/// The Lease operations the elector needs; a trait so the state machine can
/// be tested with paused time against an in-memory lease.
trait LeaseLock: Send + Sync + 'static {
    /// GET; Ok(None) if it does not exist.
    fn get(&self) -> impl Future<Output = Result<Option<Lease>, kube::Error>> + Send;
    /// POST a new Lease.
    fn create(&self, lease: &Lease) -> impl Future<Output = Result<Lease, kube::Error>> + Send;
    /// PUT, guarded by `lease.metadata.resourceVersion`.
    fn replace(&self, lease: &Lease) -> impl Future<Output = Result<Lease, kube::Error>> + Send;
}

struct KubeLeases {
    api: Api<Lease>,
    name: String,
}

impl LeaseLock for KubeLeases {
    async fn get(&self) -> Result<Option<Lease>, kube::Error> {
        self.api.get_opt(&self.name).await
    }

    async fn create(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.api.create(&PostParams::default(), lease).await
    }

    async fn replace(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.api
            .replace(&self.name, &PostParams::default(), lease)
            .await
    }
}

/// The election fields of a Lease (client-go's `LeaderElectionRecord`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Record {
    holder: String,
    lease_duration_seconds: i32,
    acquire_time: Option<MicroTime>,
    renew_time: Option<MicroTime>,
    transitions: i32,
}

impl Record {
    fn from_spec(spec: Option<&LeaseSpec>) -> Self {
        let Some(spec) = spec else {
            return Record::default();
        };
        Record {
            holder: spec.holder_identity.clone().unwrap_or_default(),
            lease_duration_seconds: spec.lease_duration_seconds.unwrap_or(0),
            acquire_time: spec.acquire_time.clone(),
            renew_time: spec.renew_time.clone(),
            transitions: spec.lease_transitions.unwrap_or(0),
        }
    }

    fn to_spec(&self) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.holder.clone()),
            lease_duration_seconds: Some(self.lease_duration_seconds),
            acquire_time: self.acquire_time.clone(),
            renew_time: self.renew_time.clone(),
            lease_transitions: Some(self.transitions),
            ..LeaseSpec::default()
        }
    }
}

/// A record and the local instant this candidate last saw it change.
#[derive(Debug, Clone)]
struct Observed {
    record: Record,
    at: Instant,
}

impl Observed {
    /// client-go's `isLeaseValid`: the holder's lease lasts
    /// `leaseDurationSeconds` from when *we* last saw the record change.
    fn is_valid(&self, now: Instant) -> bool {
        let secs = u64::try_from(self.record.lease_duration_seconds).unwrap_or(0);
        self.at + Duration::from_secs(secs) > now
    }
}

/// Wall-clock timestamps for the record, advancing with tokio time (so they
/// are exact under paused time) and truncated to microseconds as MicroTime is.
#[derive(Debug, Clone, Copy)]
struct WallClock {
    wall: Timestamp,
    mono: Instant,
}

impl WallClock {
    fn new() -> Self {
        WallClock {
            wall: Timestamp::now(),
            mono: Instant::now(),
        }
    }

    fn now(&self) -> MicroTime {
        let t = self
            .wall
            .checked_add(self.mono.elapsed())
            .unwrap_or(self.wall);
        MicroTime(Timestamp::from_microsecond(t.as_microsecond()).unwrap_or(t))
    }
}

/// Result of one `try_acquire_or_renew`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Attempt {
    /// We hold the lease (acquired or renewed) as of this write.
    Held,
    /// Someone else holds a valid lease.
    HeldByOther,
    /// While leading, the record names another holder.
    Taken(Option<String>),
    /// A request failed; try again later.
    Failed(String),
}

struct Elector<L> {
    lock: L,
    config: LeaderElectionConfig,
    duration_secs: i32,
    state: watch::Sender<LeaderState>,
    conflicts: Arc<AtomicU64>,
    lease_name: Arc<str>,
    clock: WallClock,
    /// The Lease as last read or written: carries the resourceVersion that
    /// guards the next update.
    cached: Option<Lease>,
    observed: Option<Observed>,
}

enum Step<T> {
    Stop,
    Deadline,
    Done(T),
}

impl<L: LeaseLock> Elector<L> {
    fn new(lock: L, config: LeaderElectionConfig) -> Result<Self> {
        config.validate()?;
        let (state, _) = watch::channel(LeaderState::Follower { holder: None });
        Ok(Elector {
            lock,
            duration_secs: lease_duration_seconds(config.lease_duration)?,
            lease_name: Arc::from(config.lease_name.as_str()),
            config,
            state,
            conflicts: Arc::new(AtomicU64::new(0)),
            clock: WallClock::new(),
            cached: None,
            observed: None,
        })
    }

    fn status(&self) -> LeaderStatus {
        LeaderStatus {
            rx: self.state.subscribe(),
            lease_name: self.lease_name.clone(),
            conflicts: self.conflicts.clone(),
        }
    }

    fn is_leader(&self) -> bool {
        self.observed
            .as_ref()
            .is_some_and(|o| o.record.holder == self.config.identity)
    }

    fn observe(&mut self, lease: Lease) {
        let record = Record::from_spec(lease.spec.as_ref());
        if self.observed.as_ref().is_none_or(|o| o.record != record) {
            self.observed = Some(Observed {
                record,
                at: Instant::now(),
            });
        }
        self.cached = Some(lease);
    }

    fn failed(&self, what: &str, e: &kube::Error) -> Attempt {
        if matches!(e, kube::Error::Api(s) if s.is_conflict()) {
            self.conflicts.fetch_add(1, Ordering::Relaxed);
        }
        tracing::debug!(lease = %self.config.describe(), error = %e, "{what} failed");
        Attempt::Failed(format!("{what}: {e}"))
    }

    /// client-go's `tryAcquireOrRenew`, one round: at most a GET and a
    /// create or update.
    async fn try_acquire_or_renew(&mut self, leading: bool) -> Attempt {
        let now = self.clock.now();
        let mut desired = Record {
            holder: self.config.identity.clone(),
            lease_duration_seconds: self.duration_secs,
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            transitions: 0,
        };

        // 1. Fast path: the leader updates the lease it last wrote.
        if self.is_leader()
            && self
                .observed
                .as_ref()
                .is_some_and(|o| o.is_valid(Instant::now()))
        {
            if let (Some(cached), Some(observed)) = (&self.cached, &self.observed) {
                desired.acquire_time = observed.record.acquire_time.clone();
                desired.transitions = observed.record.transitions;
                let mut lease = cached.clone();
                lease.spec = Some(desired.to_spec());
                match self.lock.replace(&lease).await {
                    Ok(written) => {
                        self.observe(written);
                        return Attempt::Held;
                    }
                    Err(e) => {
                        // Fall back to reading the lease, as client-go does.
                        let _ = self.failed("optimistic renew", &e);
                    }
                }
            }
        }

        // 2. Read it, or create it if absent.
        let current = match self.lock.get().await {
            Ok(Some(lease)) => lease,
            Ok(None) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.config.lease_name.clone()),
                        namespace: Some(self.config.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(desired.to_spec()),
                };
                return match self.lock.create(&lease).await {
                    Ok(created) => {
                        self.observe(created);
                        Attempt::Held
                    }
                    Err(e) => self.failed("create", &e),
                };
            }
            Err(e) => return self.failed("get", &e),
        };

        // 3. Note a change of the record (this starts the expiry clock).
        self.observe(current);
        let Some(observed) = self.observed.clone() else {
            return Attempt::Failed("no observed record".into());
        };
        if leading && observed.record.holder != self.config.identity {
            let holder = Some(observed.record.holder).filter(|h| !h.is_empty());
            return Attempt::Taken(holder);
        }
        if !observed.record.holder.is_empty()
            && observed.is_valid(Instant::now())
            && !self.is_leader()
        {
            return Attempt::HeldByOther;
        }

        // 4. Ours to take (free, expired, or already ours).
        if self.is_leader() {
            desired.acquire_time = observed.record.acquire_time.clone();
            desired.transitions = observed.record.transitions;
        } else {
            desired.transitions = observed.record.transitions.saturating_add(1);
        }
        let Some(mut lease) = self.cached.clone() else {
            return Attempt::Failed("no cached lease".into());
        };
        lease.spec = Some(desired.to_spec());
        match self.lock.replace(&lease).await {
            Ok(written) => {
                self.observe(written);
                Attempt::Held
            }
            Err(e) => self.failed("update", &e),
        }
    }

    fn set_follower(&self) {
        let holder = self
            .observed
            .as_ref()
            .map(|o| o.record.holder.clone())
            .filter(|h| !h.is_empty());
        self.state.send_if_modified(|s| {
            let next = LeaderState::Follower {
                holder: holder.clone(),
            };
            if *s == next {
                return false;
            }
            if holder.is_some() {
                tracing::info!(lease = %self.config.describe(), holder = ?holder, "new leader observed");
            }
            *s = next;
            true
        });
    }

    fn jittered_retry(&self) -> Duration {
        self.config
            .retry_period
            .mul_f64(1.0 + fastrand::f64() * JITTER_FACTOR)
    }

    async fn run(mut self, stop: impl Future<Output = ()>) -> Result<Termination> {
        tokio::pin!(stop);
        let lease = self.config.describe();
        tracing::info!(%lease, identity = %self.config.identity, "attempting to acquire leader lease");

        // Acquire: retry every jittered retry period until we hold it.
        let mut renewed_at = loop {
            let sent = Instant::now();
            let attempt = tokio::select! {
                biased;
                () = &mut stop => Step::Stop,
                a = timeout(self.config.renew_deadline, self.try_acquire_or_renew(false)) => {
                    Step::Done(a.unwrap_or_else(|_| Attempt::Failed("timed out".into())))
                }
            };
            match attempt {
                Step::Done(Attempt::Held) => break sent,
                Step::Done(_) => self.set_follower(),
                Step::Stop | Step::Deadline => {
                    self.state.send_replace(LeaderState::Stopped);
                    return Ok(Termination::Stopped { released: false });
                }
            }
            let pause = self.jittered_retry();
            tokio::select! {
                biased;
                () = &mut stop => {
                    self.state.send_replace(LeaderState::Stopped);
                    return Ok(Termination::Stopped { released: false });
                }
                () = sleep(pause) => {}
            }
        };
        tracing::info!(%lease, identity = %self.config.identity, "successfully acquired lease");

        // Lead: renew every retry period; lost at the renew deadline.
        let mut last_error: Option<String> = None;
        loop {
            let deadline = renewed_at + self.config.renew_deadline;
            let leading = LeaderState::Leader {
                valid_until: deadline,
            };
            self.state.send_if_modified(|s| {
                let changed = *s != leading;
                *s = leading;
                changed
            });
            let step = tokio::select! {
                biased;
                () = sleep_until(deadline) => Step::Deadline,
                () = &mut stop => Step::Stop,
                () = sleep(self.config.retry_period) => Step::Done(()),
            };
            let step = match step {
                Step::Done(()) => {
                    let sent = Instant::now();
                    let step = tokio::select! {
                        biased;
                        () = sleep_until(deadline) => Step::Deadline,
                        () = &mut stop => Step::Stop,
                        a = self.try_acquire_or_renew(true) => Step::Done(a),
                    };
                    match step {
                        Step::Done(Attempt::Held) => {
                            renewed_at = sent;
                            last_error = None;
                            continue;
                        }
                        Step::Done(Attempt::Taken(holder)) => {
                            return Ok(self.lose(LostReason::Taken { holder }));
                        }
                        Step::Done(Attempt::HeldByOther) => {
                            // Unreachable while leading (Taken comes first); keep trying.
                            continue;
                        }
                        Step::Done(Attempt::Failed(e)) => {
                            tracing::warn!(%lease, error = %e, "failed to renew lease");
                            last_error = Some(e);
                            continue;
                        }
                        Step::Stop => Step::Stop,
                        Step::Deadline => Step::Deadline,
                    }
                }
                other => other,
            };
            return match step {
                Step::Stop => self.stop_leading().await,
                _ => Ok(self.lose(LostReason::RenewDeadlineExceeded { last_error })),
            };
        }
    }

    fn lose(&self, reason: LostReason) -> Termination {
        tracing::error!(lease = %self.config.describe(), identity = %self.config.identity, %reason, "leader election lost");
        self.state.send_replace(LeaderState::Lost(reason.clone()));
        Termination::Lost(reason)
    }

    async fn stop_leading(&mut self) -> Result<Termination> {
        // Leadership ends here, whether or not the release below succeeds.
        self.state.send_replace(LeaderState::Stopped);
        if !self.config.release_on_cancel {
            return Ok(Termination::Stopped { released: false });
        }
        let lease = self.config.describe();
        let after = self.config.renew_deadline;
        match timeout(after, self.release()).await {
            Ok(Ok(released)) => {
                tracing::info!(%lease, released, "stopped leading");
                Ok(Termination::Stopped { released })
            }
            Ok(Err(source)) => Err(Error::Release { lease, source }),
            Err(_) => Err(Error::ReleaseTimedOut { lease, after }),
        }
    }

    /// client-go's `release`: clear the holder, duration 1 s, both times now,
    /// transitions kept. Guarded by resourceVersion; on conflict re-read and
    /// release only if the record still names us.
    async fn release(&mut self) -> Result<bool, kube::Error> {
        for _ in 0..2 {
            if !self.is_leader() {
                return Ok(false);
            }
            let (Some(cached), Some(observed)) = (&self.cached, &self.observed) else {
                return Ok(false);
            };
            let now = self.clock.now();
            let record = Record {
                holder: String::new(),
                lease_duration_seconds: 1,
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                transitions: observed.record.transitions,
            };
            let mut lease = cached.clone();
            lease.spec = Some(record.to_spec());
            match self.lock.replace(&lease).await {
                Ok(written) => {
                    self.observe(written);
                    return Ok(true);
                }
                Err(kube::Error::Api(s)) if s.is_conflict() => {
                    self.conflicts.fetch_add(1, Ordering::Relaxed);
                    match self.lock.get().await? {
                        Some(current) => self.observe(current),
                        None => return Ok(false),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use kube::core::Status;
    use std::sync::Mutex;

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
        let (Some(MicroTime(t1)), Some(MicroTime(t2))) = (first.renew_time, second.renew_time)
        else {
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
}
