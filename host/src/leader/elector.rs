//! The elector: client-go's leader-election state machine over one Lease.
//!
//! Owns the candidate's loop — acquire every jittered retry period, renew
//! every retry period once leading, declare itself lost at the renew deadline
//! or the moment another holder appears, release on a requested stop — and
//! publishes each transition to its [`LeaderStatus`] watchers. It never
//! writes any object but its Lease, never tries to lead again after losing,
//! and never stops the host's work itself: it only says so at once.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{sleep, sleep_until, timeout, Instant};

use super::config::lease_duration_seconds;
use super::lock::{KubeLeases, LeaseLock, Observed, Record, WallClock};
use super::{
    Error, LeaderElectionConfig, LeaderState, LeaderStatus, LostReason, Result, Termination,
    JITTER_FACTOR,
};

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
        let lock = KubeLeases::new(client, &config.namespace, &config.lease_name);
        Ok(LeaderElector {
            inner: Elector::new(lock, config)?,
        })
    }

    /// Starts from what this process has already seen of the Lease: `lease`
    /// as read, its record unchanged since `since` (by this process's
    /// clock, never in the future). A holder's lease then lasts from
    /// `since`, as if this elector had watched it all along, rather than a
    /// full lease duration from the elector's own first read. Only the
    /// same process's observation keeps client-go's rule: never pass a
    /// time read from the record.
    #[must_use]
    pub fn seen(mut self, lease: Lease, since: Instant) -> Self {
        self.inner.seed(lease, since.min(Instant::now()));
        self
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

/// Result of one `try_acquire_or_renew`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Attempt {
    /// We hold the lease (acquired or renewed) as of this write.
    Held,
    /// Someone else holds a valid lease.
    HeldByOther,
    /// While leading, the record names another holder.
    Taken(Option<String>),
    /// A request failed; try again later.
    Failed(String),
}

/// The state machine, generic over the lock so tests can drive it against
/// an in-memory Lease with paused time.
pub(super) struct Elector<L> {
    lock: L,
    config: LeaderElectionConfig,
    duration_secs: i32,
    state: watch::Sender<LeaderState>,
    /// Lease writes rejected with 409 Conflict.
    pub(super) conflicts: Arc<AtomicU64>,
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
    pub(super) fn new(lock: L, config: LeaderElectionConfig) -> Result<Self> {
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

    pub(super) fn status(&self) -> LeaderStatus {
        LeaderStatus {
            rx: self.state.subscribe(),
            lease_name: self.lease_name.clone(),
            conflicts: self.conflicts.clone(),
        }
    }

    /// See [`LeaderElector::seen`].
    pub(super) fn seed(&mut self, lease: Lease, at: Instant) {
        let record = Record::from_spec(lease.spec.as_ref());
        self.observed = Some(Observed { record, at });
        self.cached = Some(lease);
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
    pub(super) async fn try_acquire_or_renew(&mut self, leading: bool) -> Attempt {
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
                        labels: (!self.config.labels.is_empty())
                            .then(|| self.config.labels.clone()),
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

    pub(super) async fn run(mut self, stop: impl Future<Output = ()>) -> Result<Termination> {
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
