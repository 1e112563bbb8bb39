//! The queue itself: which key is handed to a worker when.
//!
//! Owns the waiting, dirty, processing and delayed keys behind one `std`
//! mutex (never held across an `.await`), waking getters, shutdown and
//! draining, and updating the queue's metric handles. It never runs a
//! handler and never computes a delay itself: the rate limiter says how
//! long, the workers do the work.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::metrics::{InFlight, QueueMetrics};
use super::{Config, RateLimiter, WorkqueueMetrics, MAX_SCHEDULE_AHEAD};
use crate::sync::lock;

/// The mutable state of a queue, always behind one `std` mutex that is never
/// held across an `.await`.
struct State<K> {
    /// Keys ready to be handed out, in order. Every key here is also dirty.
    queue: VecDeque<K>,
    /// Keys that need processing: queued, or re-added while processing.
    dirty: HashSet<K>,
    /// Keys handed out and not yet done, with the time they were handed out.
    processing: HashMap<K, Instant>,
    /// When each dirty key was first added (for `queue_duration`).
    added_at: HashMap<K, Instant>,
    /// Delayed keys by ready time; the sequence number keeps equal times FIFO.
    waiting: BTreeMap<(Instant, u64), K>,
    /// Each delayed key's entry in `waiting`: a key waits at most once.
    waiting_index: HashMap<K, (Instant, u64)>,
    next_seq: u64,
    shutting_down: bool,
    /// Keys whose last failure was the API server's (see `add_unavailable`).
    unavailable: HashSet<K>,
    /// The one of them retried at least every probe interval.
    probe: Option<K>,
}

impl<K: Clone + Eq + Hash> State<K> {
    fn new() -> Self {
        Self {
            queue: VecDeque::new(),
            dirty: HashSet::new(),
            processing: HashMap::new(),
            added_at: HashMap::new(),
            waiting: BTreeMap::new(),
            waiting_index: HashMap::new(),
            next_seq: 0,
            shutting_down: false,
            unavailable: HashSet::new(),
            probe: None,
        }
    }

    /// Schedules `key` at `ready_at` unless it already waits for an
    /// earlier time. Returns whether `ready_at` is now the earliest time.
    fn schedule(&mut self, key: K, ready_at: Instant) -> bool {
        if let Some(&(at, seq)) = self.waiting_index.get(&key) {
            if at <= ready_at {
                return false;
            }
            self.waiting.remove(&(at, seq));
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.waiting.insert((ready_at, seq), key.clone());
        self.waiting_index.insert(key, (ready_at, seq));
        self.next_ready_at() == Some(ready_at)
    }

    /// `key` no longer waits out a server failure; if it was the probe,
    /// another waiting such key becomes the probe, due within `interval`.
    /// Returns whether that moved the earliest ready time.
    fn leave_unavailable(&mut self, key: &K, now: Instant, interval: Duration) -> bool {
        self.unavailable.remove(key);
        if self.probe.as_ref() != Some(key) {
            return false;
        }
        self.probe = self
            .unavailable
            .iter()
            .find(|k| self.waiting_index.contains_key(*k))
            .cloned();
        match self.probe.clone() {
            Some(next) => self.schedule(next, now + interval),
            None => false,
        }
    }

    /// client-go's `Add`. Returns whether the key was pushed onto `queue`.
    fn add(&mut self, key: K, now: Instant, metrics: Option<&QueueMetrics>) -> bool {
        if self.shutting_down || self.dirty.contains(&key) {
            return false;
        }
        if let Some(metrics) = metrics {
            metrics.adds.inc();
        }
        self.added_at.entry(key.clone()).or_insert(now);
        self.dirty.insert(key.clone());
        let pushed = !self.processing.contains_key(&key);
        if pushed {
            self.queue.push_back(key);
        }
        self.update_depth(metrics);
        pushed
    }

    /// Moves every delayed key whose time has come into the queue.
    /// Returns whether any was pushed onto `queue`.
    fn promote_ready(&mut self, now: Instant, metrics: Option<&QueueMetrics>) -> bool {
        let mut pushed = false;
        while let Some(entry) = self.waiting.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let key = entry.remove();
            self.waiting_index.remove(&key);
            pushed |= self.add(key, now, metrics);
        }
        pushed
    }

    fn next_ready_at(&self) -> Option<Instant> {
        self.waiting.first_key_value().map(|((at, _), _)| *at)
    }

    fn update_depth(&self, metrics: Option<&QueueMetrics>) {
        if let Some(metrics) = metrics {
            // client-go's depth counts dirty keys, including those parked
            // behind their own processing.
            metrics
                .depth
                .set(i64::try_from(self.dirty.len()).unwrap_or(i64::MAX));
        }
    }
}

struct Shared<K> {
    state: Mutex<State<K>>,
    /// Wakes getters: a key was queued, an earlier delay was scheduled, or
    /// the queue shut down.
    ready: Notify,
    /// Wakes `shutdown_with_drain`: the last in-flight key was done.
    idle: Notify,
    limiter: RateLimiter<K>,
    /// See [`Config::probe_interval`].
    probe_interval: Duration,
    metrics: Option<QueueMetrics>,
}

impl<K: Clone + Eq + Hash + Send + Sync> InFlight for Shared<K> {
    fn in_flight(&self, now: Instant) -> (f64, f64) {
        let state = lock(&self.state);
        state
            .processing
            .values()
            .map(|started| now.saturating_duration_since(*started).as_secs_f64())
            .fold((0.0, 0.0), |(sum, longest), age| {
                (sum + age, f64::max(longest, age))
            })
    }
}

/// A deduplicating, rate-limited, delaying queue of keys with the semantics
/// of client-go's `TypedRateLimitingInterface`.
///
/// Guarantees: a key waits in the queue at most once; a key handed out by
/// [`get`](Self::get) is not handed out again until [`done`](Self::done),
/// and however many times it was added meanwhile it is handed out exactly
/// once more afterwards. Cloning is cheap and clones share the queue.
pub struct Workqueue<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for Workqueue<K> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<K> fmt::Debug for Workqueue<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Workqueue")
            .field(
                "name",
                &self.shared.metrics.as_ref().map(|metrics| &metrics.name),
            )
            .finish_non_exhaustive()
    }
}

impl<K: Clone + Eq + Hash + Send + Sync + 'static> Workqueue<K> {
    /// A queue without metrics.
    #[must_use]
    pub fn new(config: &Config) -> Self {
        Self::build(config, None)
    }

    /// A queue whose metrics are exported under `name="<name>"` in the
    /// shared `metrics` families.
    pub fn with_metrics(
        name: impl Into<String>,
        config: &Config,
        metrics: &WorkqueueMetrics,
    ) -> Self {
        let name = name.into();
        let queue = Self::build(config, Some(metrics.for_queue(name.clone())));
        let weak = Arc::downgrade(&queue.shared);
        metrics.track(name, weak);
        queue
    }

    fn build(config: &Config, metrics: Option<QueueMetrics>) -> Self {
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State::new()),
                ready: Notify::new(),
                idle: Notify::new(),
                limiter: RateLimiter::new(config),
                probe_interval: config.probe(),
                metrics,
            }),
        }
    }

    fn metrics(&self) -> Option<&QueueMetrics> {
        self.shared.metrics.as_ref()
    }

    /// Locks the state after moving due delayed keys into the queue, runs
    /// `f`, and wakes a getter if either queued something.
    fn with_state<T>(&self, f: impl FnOnce(&mut State<K>, Instant) -> (T, bool)) -> T {
        let now = Instant::now();
        let (result, wake) = {
            let mut state = lock(&self.shared.state);
            let promoted = state.promote_ready(now, self.metrics());
            let (result, queued) = f(&mut state, now);
            (result, promoted || queued)
        };
        if wake {
            // One is enough: a getter that takes a key wakes the next one
            // while keys remain (see `get`).
            self.shared.ready.notify_one();
        }
        result
    }

    /// Queues `key` unless it is already waiting; a key being processed is
    /// queued again only once it is [`done`](Self::done). Ignored after
    /// shutdown.
    pub fn add(&self, key: K) {
        let metrics = self.shared.metrics.as_ref();
        self.with_state(|state, now| ((), state.add(key, now, metrics)));
    }

    /// Queues `key` once `delay` has passed. If `key` is already delayed, the
    /// earlier of the two times wins. A zero delay is a plain [`add`](Self::add).
    /// Ignored after shutdown.
    pub fn add_after(&self, key: K, delay: Duration) {
        let metrics = self.shared.metrics.as_ref();
        let mut earliest_changed = false;
        self.with_state(|state, now| {
            if state.shutting_down {
                return ((), false);
            }
            if delay.is_zero() {
                return ((), state.add(key, now, metrics));
            }
            let ready_at = now + delay.min(MAX_SCHEDULE_AHEAD);
            earliest_changed = state.schedule(key, ready_at);
            ((), false)
        });
        if earliest_changed {
            // Idle getters sleep until the earliest ready time they saw;
            // let them all look again.
            self.shared.ready.notify_waiters();
        }
    }

    /// Re-adds `key` after the rate limiter's delay: `max(per-key backoff,
    /// token-bucket wait)`. Counts one failure of `key` and one
    /// `workqueue_retries_total`. Ignored after shutdown.
    pub fn add_rate_limited(&self, key: K) {
        if self.is_shutting_down() {
            return;
        }
        let delay = self.shared.limiter.when(&key);
        if let Some(metrics) = self.metrics() {
            metrics.retries.inc();
        }
        let interval = self.shared.probe_interval;
        let moved = lock(&self.shared.state).leave_unavailable(&key, Instant::now(), interval);
        if moved {
            self.shared.ready.notify_waiters();
        }
        self.add_after(key, delay);
    }

    /// Re-adds `key`, which failed because the API server did (5xx, 429, no
    /// connection, 403), after its rate-limited delay like
    /// [`add_rate_limited`](Self::add_rate_limited), with two differences:
    /// if no other such key is the probe, `key` becomes it and waits at most
    /// the probe interval; and when any such key next succeeds
    /// ([`forget`](Self::forget)), every other one is retried at once with
    /// its backoff reset. Ignored after shutdown.
    pub fn add_unavailable(&self, key: K) {
        if self.is_shutting_down() {
            return;
        }
        let backoff = self.shared.limiter.when(&key);
        if let Some(metrics) = self.metrics() {
            metrics.retries.inc();
        }
        let delay = {
            let mut state = lock(&self.shared.state);
            state.unavailable.insert(key.clone());
            if state.probe.is_none() || state.probe.as_ref() == Some(&key) {
                state.probe = Some(key.clone());
                backoff.min(self.shared.probe_interval)
            } else {
                backoff
            }
        };
        self.add_after(key, delay);
    }

    /// The longest per-key backoff of any failing key: how long its last
    /// failure made it wait, or would have, were it not the probe.
    #[must_use]
    pub fn longest_backoff(&self) -> Duration {
        self.shared.limiter.longest_backoff()
    }

    /// Waits for a key and marks it processing; the caller must call
    /// [`done`](Self::done) with it. Returns `None` once the queue is shut
    /// down: keys still queued then are dropped, not handed out (unlike
    /// client-go, so that a host that lost its lease stops at once; the
    /// next relist re-adds every key).
    ///
    /// Cancel-safe: a dropped `get` never loses a key.
    pub async fn get(&self) -> Option<K> {
        loop {
            let notified = self.shared.ready.notified();
            tokio::pin!(notified);
            // Register before looking, so a wake between look and wait is kept.
            notified.as_mut().enable();
            let next_ready_at = {
                let now = Instant::now();
                let mut state = lock(&self.shared.state);
                if state.shutting_down {
                    return None;
                }
                state.promote_ready(now, self.metrics());
                if let Some(key) = state.queue.pop_front() {
                    state.dirty.remove(&key);
                    state.processing.insert(key.clone(), now);
                    let added_at = state.added_at.remove(&key);
                    if let Some(metrics) = self.metrics() {
                        if let Some(added_at) = added_at {
                            let waited = now.saturating_duration_since(added_at);
                            metrics.queue_duration.observe(waited.as_secs_f64());
                        }
                    }
                    state.update_depth(self.metrics());
                    let more = !state.queue.is_empty();
                    drop(state);
                    if more {
                        self.shared.ready.notify_one();
                    }
                    return Some(key);
                }
                state.next_ready_at()
            };
            match next_ready_at {
                Some(at) => {
                    tokio::select! {
                        () = &mut notified => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Marks `key` no longer processing. If it was re-added meanwhile it is
    /// queued again now. Call it for every key [`get`](Self::get) returned,
    /// whatever the outcome.
    pub fn done(&self, key: &K) {
        let metrics = self.shared.metrics.as_ref();
        let idle = self.with_state(|state, now| {
            if let Some(started) = state.processing.remove(key) {
                if let Some(metrics) = metrics {
                    let worked = now.saturating_duration_since(started);
                    metrics.work_duration.observe(worked.as_secs_f64());
                }
            }
            let requeued = !state.shutting_down && state.dirty.contains(key);
            if requeued {
                state.queue.push_back(key.clone());
            }
            (state.processing.is_empty(), requeued)
        });
        if idle {
            self.shared.idle.notify_waiters();
        }
    }

    /// Clears `key`'s failure count; call it when `key` succeeded.
    ///
    /// If `key` had failed because the API server did, the server answers
    /// again: every other key waiting out such a failure is queued now,
    /// its backoff reset.
    pub fn forget(&self, key: &K) {
        self.shared.limiter.forget(key);
        let recovered: Vec<K> = {
            let mut state = lock(&self.shared.state);
            if !state.unavailable.remove(key) {
                return;
            }
            state.probe = None;
            state.unavailable.drain().collect()
        };
        if recovered.is_empty() {
            return;
        }
        for k in &recovered {
            self.shared.limiter.forget(k);
        }
        let metrics = self.shared.metrics.as_ref();
        let count = recovered.len();
        self.with_state(|state, now| {
            let mut pushed = false;
            for k in recovered {
                if let Some(entry) = state.waiting_index.remove(&k) {
                    state.waiting.remove(&entry);
                    pushed |= state.add(k, now, metrics);
                }
            }
            ((), pushed)
        });
        tracing::info!(
            keys = count,
            "the API server answers again: keys waiting out its failure are retried now"
        );
        // Several keys may have been queued: wake every getter.
        self.shared.ready.notify_waiters();
    }

    /// How many times `key` has been rate-limited since it was last forgotten.
    #[must_use]
    pub fn num_requeues(&self, key: &K) -> u32 {
        self.shared.limiter.num_requeues(key)
    }

    /// Keys ready to be handed out now (not delayed, not parked behind
    /// their own processing).
    #[must_use]
    pub fn len(&self) -> usize {
        self.with_state(|state, _| (state.queue.len(), false))
    }

    /// Whether no key is ready to be handed out now.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether [`shutdown`](Self::shutdown) was called.
    #[must_use]
    pub fn is_shutting_down(&self) -> bool {
        lock(&self.shared.state).shutting_down
    }

    /// Stops the queue: every current and future [`get`](Self::get) returns
    /// `None`, queued and delayed keys are dropped and later adds are
    /// ignored. Keys already handed out may still be [`done`](Self::done).
    pub fn shutdown(&self) {
        {
            let mut state = lock(&self.shared.state);
            state.shutting_down = true;
            state.queue.clear();
            state.dirty.clear();
            state.added_at.clear();
            state.waiting.clear();
            state.waiting_index.clear();
            state.unavailable.clear();
            state.probe = None;
            state.update_depth(self.metrics());
        }
        self.shared.ready.notify_waiters();
    }

    /// [`shutdown`](Self::shutdown), then waits up to `timeout` for every
    /// key already handed out to be [`done`](Self::done). Returns whether
    /// they all were.
    pub async fn shutdown_with_drain(&self, timeout: Duration) -> bool {
        self.shutdown();
        let drained = async {
            loop {
                let idle = self.shared.idle.notified();
                tokio::pin!(idle);
                idle.as_mut().enable();
                if lock(&self.shared.state).processing.is_empty() {
                    return;
                }
                idle.await;
            }
        };
        tokio::time::timeout(timeout, drained).await.is_ok()
    }
}
