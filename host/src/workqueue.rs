//! The workqueue: which key is reconciled when, with client-go's semantics.
//!
//! It owns deduplication of waiting keys, the guarantee that one key is never
//! handed to two workers at once, per-key exponential backoff combined with a
//! global token bucket, delayed re-adds (`add_after`), shutdown, and the
//! client-go `workqueue_*` metrics. It never knows about Kubernetes objects,
//! guests or API calls — only opaque keys — and it never does the work
//! itself: [`run_workers`] hands keys to a caller-supplied handler.
//!
//! The life of a key, as in `k8s.io/client-go/util/workqueue`:
//!
//! 1. [`Workqueue::add`] marks the key *dirty* and queues it, unless it is
//!    already waiting (dedup) or being processed (then it waits until
//!    [`Workqueue::done`]).
//! 2. [`Workqueue::get`] hands it to exactly one worker and marks it
//!    *processing*.
//! 3. The worker always calls [`Workqueue::done`]; if the key was re-added
//!    meanwhile it is queued once more — once, however many adds there were.
//! 4. On success the worker calls [`Workqueue::forget`] to reset the key's
//!    backoff; on failure [`Workqueue::add_rate_limited`] re-adds it after
//!    `max(per-key backoff, token-bucket wait)`.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, Weak};

use crate::sync::lock;
use std::time::Duration;

use futures::FutureExt;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Default first per-key retry delay (client-go: 5 ms).
pub const DEFAULT_BASE_DELAY: Duration = Duration::from_millis(5);
/// Default cap of the per-key retry delay (client-go: 1000 s).
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(1000);
/// Default refill rate of the global token bucket, in keys per second (client-go: 10).
pub const DEFAULT_QPS: f64 = 10.0;
/// Default size of the global token bucket (client-go: 100).
pub const DEFAULT_BURST: u32 = 100;

/// The furthest ahead a key is ever scheduled: far enough never to matter,
/// near enough that `Instant + delay` cannot overflow.
const MAX_SCHEDULE_AHEAD: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);

/// Rate-limiting configuration of a [`Workqueue`].
///
/// The delay of a failed key is the maximum of its per-key exponential
/// backoff (`base_delay * 2^failures`, capped at `max_delay`) and the wait
/// for a token from a global bucket (`qps`, `burst`) that every
/// rate-limited add draws from.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    base_delay: Duration,
    max_delay: Duration,
    qps: f64,
    burst: u32,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            base_delay: DEFAULT_BASE_DELAY,
            max_delay: DEFAULT_MAX_DELAY,
            qps: DEFAULT_QPS,
            burst: DEFAULT_BURST,
        }
    }
}

impl Config {
    /// The delay after a key's first failure; it doubles with every further
    /// failure until [`Workqueue::forget`] resets it.
    ///
    /// A zero base disables the per-key backoff entirely, leaving only the
    /// token bucket: failing keys then retry as fast as the bucket allows.
    #[must_use]
    pub fn base_delay(mut self, base_delay: Duration) -> Self {
        self.base_delay = base_delay;
        self
    }

    /// The cap of the per-key backoff.
    #[must_use]
    pub fn max_delay(mut self, max_delay: Duration) -> Self {
        self.max_delay = max_delay;
        self
    }

    /// The global bucket's refill rate in rate-limited adds per second.
    ///
    /// `f64::INFINITY` disables the bucket. Zero, negative and NaN rates
    /// would never refill and so stall every retry forever; they are
    /// treated as infinite too, so set a small positive rate to throttle hard.
    #[must_use]
    pub fn qps(mut self, qps: f64) -> Self {
        self.qps = qps;
        self
    }

    /// The global bucket's size: how many rate-limited adds pass at once
    /// before the rate applies. A burst of 0 makes even the first add wait
    /// `1 / qps`.
    #[must_use]
    pub fn burst(mut self, burst: u32) -> Self {
        self.burst = burst;
        self
    }
}

/// Per-key exponential backoff (client-go's `ItemExponentialFailureRateLimiter`).
#[derive(Debug)]
struct ItemBackoff<K> {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<K, u32>>,
}

impl<K: Clone + Eq + Hash> ItemBackoff<K> {
    fn when(&self, key: &K) -> Duration {
        let exponent = {
            let mut failures = lock(&self.failures);
            let count = failures.entry(key.clone()).or_insert(0);
            let exponent = *count;
            *count = count.saturating_add(1);
            exponent
        };
        if self.base.is_zero() {
            return Duration::ZERO;
        }
        2u32.checked_pow(exponent)
            .and_then(|factor| self.base.checked_mul(factor))
            .map_or(self.max, |delay| delay.min(self.max))
    }

    fn num_requeues(&self, key: &K) -> u32 {
        lock(&self.failures).get(key).copied().unwrap_or(0)
    }

    fn forget(&self, key: &K) {
        lock(&self.failures).remove(key);
    }
}

/// A token bucket that always grants a reservation and says how long to wait
/// for it, like golang.org/x/time/rate's `Reserve().Delay()`.
#[derive(Debug)]
struct TokenBucket {
    /// `None` when unlimited.
    qps: Option<f64>,
    burst: f64,
    tokens: f64,
    last: Option<Instant>,
}

impl TokenBucket {
    fn new(qps: f64, burst: u32) -> Self {
        let qps = (qps > 0.0 && qps.is_finite()).then_some(qps);
        let burst = f64::from(burst);
        Self {
            qps,
            burst,
            tokens: burst,
            last: None,
        }
    }

    fn reserve(&mut self, now: Instant) -> Duration {
        let Some(qps) = self.qps else {
            return Duration::ZERO;
        };
        if let Some(last) = self.last {
            let refill = now.saturating_duration_since(last).as_secs_f64() * qps;
            self.tokens = (self.tokens + refill).min(self.burst);
        }
        self.last = Some(self.last.map_or(now, |last| last.max(now)));
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            return Duration::ZERO;
        }
        Duration::try_from_secs_f64(-self.tokens / qps)
            .unwrap_or(MAX_SCHEDULE_AHEAD)
            .min(MAX_SCHEDULE_AHEAD)
    }
}

/// The combined rate limiter of a [`Workqueue`]: the maximum of a per-key
/// exponential backoff and a global token bucket (client-go's
/// `DefaultTypedControllerRateLimiter`).
#[derive(Debug)]
pub struct RateLimiter<K> {
    backoff: ItemBackoff<K>,
    bucket: Mutex<TokenBucket>,
}

impl<K: Clone + Eq + Hash> RateLimiter<K> {
    /// A limiter configured by `config`; the bucket starts full.
    #[must_use]
    pub fn new(config: &Config) -> Self {
        Self {
            backoff: ItemBackoff {
                base: config.base_delay,
                max: config.max_delay,
                failures: Mutex::new(HashMap::new()),
            },
            bucket: Mutex::new(TokenBucket::new(config.qps, config.burst)),
        }
    }

    /// How long `key` must wait before its next attempt. Every call counts
    /// as one more failure of `key` and takes one token from the bucket.
    pub fn when(&self, key: &K) -> Duration {
        let backoff = self.backoff.when(key);
        let bucket = lock(&self.bucket).reserve(Instant::now());
        backoff.max(bucket)
    }

    /// How many times `key` has failed since it was last forgotten.
    #[must_use]
    pub fn num_requeues(&self, key: &K) -> u32 {
        self.backoff.num_requeues(key)
    }

    /// Resets `key`'s failure count, so its next failure waits `base_delay`
    /// again. Tokens already taken from the bucket are not returned.
    pub fn forget(&self, key: &K) {
        self.backoff.forget(key);
    }
}

/// The label every workqueue metric carries: the queue's (guest's) name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct QueueLabels {
    name: String,
}

/// Metric name of the in-flight age sum (a gauge computed on scrape).
const UNFINISHED_WORK: &str = "workqueue_unfinished_work_seconds";
/// Metric name of the oldest in-flight age (a gauge computed on scrape).
const LONGEST_RUNNING: &str = "workqueue_longest_running_processor_seconds";

/// What the scrape-time collector asks of each live queue.
trait InFlight: Send + Sync {
    /// Sum and maximum of the ages of the keys being processed, in seconds.
    fn in_flight(&self, now: Instant) -> (f64, f64);
}

type QueueList = Mutex<Vec<(String, Weak<dyn InFlight>)>>;

/// The client-go workqueue metric families, shared by every queue of a
/// process and labelled by queue name (`name="<guest>"`).
///
/// Exposes `workqueue_depth`, `workqueue_adds_total`,
/// `workqueue_queue_duration_seconds`, `workqueue_work_duration_seconds`,
/// `workqueue_retries_total`, `workqueue_unfinished_work_seconds` and
/// `workqueue_longest_running_processor_seconds`; the last two are computed
/// from the live queues at scrape time. Create it once per registry: two
/// instances registered in one registry would expose every name twice.
/// Series of dropped queues keep their last values, as in client-go.
#[derive(Debug, Clone)]
pub struct WorkqueueMetrics {
    depth: Family<QueueLabels, Gauge>,
    adds: Family<QueueLabels, Counter>,
    queue_duration: Family<QueueLabels, Histogram, fn() -> Histogram>,
    work_duration: Family<QueueLabels, Histogram, fn() -> Histogram>,
    retries: Family<QueueLabels, Counter>,
    queues: Arc<QueueList>,
}

fn duration_histogram() -> Histogram {
    // client-go: prometheus.ExponentialBuckets(10e-9, 10, 10), 10 ns .. 10 s.
    Histogram::new(exponential_buckets(1e-8, 10.0, 10))
}

impl WorkqueueMetrics {
    /// Creates the families and registers them (and the scrape-time
    /// collector of the in-flight gauges) in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let metrics = Self {
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(duration_histogram as fn() -> Histogram),
            work_duration: Family::new_with_constructor(duration_histogram as fn() -> Histogram),
            retries: Family::default(),
            queues: Arc::new(Mutex::new(Vec::new())),
        };
        registry.register(
            "workqueue_depth",
            "Current depth of the workqueue: keys waiting to be processed",
            metrics.depth.clone(),
        );
        // prometheus-client appends `_total` to counter names.
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by the workqueue",
            metrics.adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds a key stays in the workqueue before being requested",
            metrics.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing a key from the workqueue takes",
            metrics.work_duration.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of rate-limited retries handled by the workqueue",
            metrics.retries.clone(),
        );
        registry.register_collector(Box::new(InFlightCollector {
            queues: Arc::clone(&metrics.queues),
        }));
        metrics
    }

    fn for_queue(&self, name: String) -> QueueMetrics {
        let labels = QueueLabels { name };
        QueueMetrics {
            depth: Gauge::clone(&self.depth.get_or_create(&labels)),
            adds: Counter::clone(&self.adds.get_or_create(&labels)),
            queue_duration: Histogram::clone(&self.queue_duration.get_or_create(&labels)),
            work_duration: Histogram::clone(&self.work_duration.get_or_create(&labels)),
            retries: Counter::clone(&self.retries.get_or_create(&labels)),
            name: labels.name,
        }
    }

    fn track(&self, name: String, queue: Weak<dyn InFlight>) {
        lock(&self.queues).push((name, queue));
    }
}

/// One queue's handles into the shared families.
#[derive(Debug)]
struct QueueMetrics {
    name: String,
    depth: Gauge,
    adds: Counter,
    queue_duration: Histogram,
    work_duration: Histogram,
    retries: Counter,
}

/// Computes the in-flight gauges from the live queues on every scrape, so
/// they are exact without a ticker task.
#[derive(Debug)]
struct InFlightCollector {
    queues: Arc<QueueList>,
}

impl Collector for InFlightCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let live: Vec<(String, Arc<dyn InFlight>)> = {
            let mut queues = lock(&self.queues);
            queues.retain(|(_, queue)| queue.strong_count() > 0);
            queues
                .iter()
                .filter_map(|(name, queue)| Some((name.clone(), queue.upgrade()?)))
                .collect()
        };
        let now = Instant::now();
        // Several queues may share a name; report them as one.
        let mut per_name: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        for (name, queue) in live {
            let (sum, longest) = queue.in_flight(now);
            let entry = per_name.entry(name).or_insert((0.0, 0.0));
            entry.0 += sum;
            entry.1 = entry.1.max(longest);
        }
        {
            let mut metric = encoder.encode_descriptor(
                UNFINISHED_WORK,
                "How many seconds of work has been done that is in progress and not yet \
                 observed by work_duration; large values indicate stuck workers.",
                None,
                MetricType::Gauge,
            )?;
            for (name, (sum, _)) in &per_name {
                let labels = QueueLabels { name: name.clone() };
                metric.encode_family(&labels)?.encode_gauge(sum)?;
            }
        }
        let mut metric = encoder.encode_descriptor(
            LONGEST_RUNNING,
            "How many seconds the longest running processor for the workqueue has been running.",
            None,
            MetricType::Gauge,
        )?;
        for (name, (_, longest)) in &per_name {
            let labels = QueueLabels { name: name.clone() };
            metric.encode_family(&labels)?.encode_gauge(longest)?;
        }
        Ok(())
    }
}

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
            if let Some(&(at, seq)) = state.waiting_index.get(&key) {
                if at <= ready_at {
                    return ((), false);
                }
                state.waiting.remove(&(at, seq));
            }
            let seq = state.next_seq;
            state.next_seq += 1;
            state.waiting.insert((ready_at, seq), key.clone());
            state.waiting_index.insert(key, (ready_at, seq));
            earliest_changed = state.next_ready_at() == Some(ready_at);
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
        self.add_after(key, delay);
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
    pub fn forget(&self, key: &K) {
        self.shared.limiter.forget(key);
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

/// The error a handler gives for a retry; only logged by [`run_workers`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What a handler made of one key; [`run_workers`] applies it to the queue.
#[derive(Debug)]
pub enum Outcome {
    /// The key converged: its backoff is reset.
    Success,
    /// The key converged for now and must be looked at again after this
    /// delay (its backoff is reset, as for [`Outcome::Success`]).
    RequeueAfter(Duration),
    /// The key failed: it is re-added after its rate-limited delay.
    Retry(BoxError),
}

impl Outcome {
    /// A [`Outcome::Retry`] from anything error-like (`"message"`,
    /// `String`, any `std::error::Error`).
    pub fn retry(error: impl Into<BoxError>) -> Self {
        Self::Retry(error.into())
    }
}

/// Runs `workers` concurrent workers (tokio tasks) that take keys from
/// `queue` and hand them to `handler`, until the queue shuts down; returns
/// once every worker has stopped.
///
/// Per key, as in sample-controller's `processNextWorkItem`:
/// [`Outcome::Success`] → `forget`; [`Outcome::RequeueAfter`] → `forget` +
/// `add_after`; [`Outcome::Retry`] → `add_rate_limited`; then always `done`.
/// A panicking handler counts as a retry, so a bug cannot wedge its key in
/// the processing state forever.
pub async fn run_workers<K, F, Fut>(queue: Workqueue<K>, workers: usize, handler: F)
where
    K: Clone + Eq + Hash + Send + Sync + fmt::Debug + 'static,
    F: Fn(K) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    let handler = Arc::new(handler);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..workers {
        let queue = queue.clone();
        let handler = Arc::clone(&handler);
        tasks.spawn(async move {
            while let Some(key) = queue.get().await {
                let outcome = AssertUnwindSafe(handler(key.clone()))
                    .catch_unwind()
                    .await
                    .unwrap_or_else(|_| Outcome::retry("handler panicked"));
                apply_outcome(&queue, key, outcome);
            }
        });
    }
    while let Some(joined) = tasks.join_next().await {
        if let Err(error) = joined {
            tracing::error!(%error, "workqueue worker task failed");
        }
    }
}

fn apply_outcome<K>(queue: &Workqueue<K>, key: K, outcome: Outcome)
where
    K: Clone + Eq + Hash + Send + Sync + fmt::Debug + 'static,
{
    match outcome {
        Outcome::Success => queue.forget(&key),
        Outcome::RequeueAfter(delay) => {
            queue.forget(&key);
            queue.add_after(key.clone(), delay);
        }
        Outcome::Retry(error) => {
            tracing::warn!(
                ?key,
                %error,
                requeues = queue.num_requeues(&key),
                "reconcile failed; retrying with backoff"
            );
            queue.add_rate_limited(key.clone());
        }
    }
    queue.done(&key);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    fn queue() -> Workqueue<String> {
        Workqueue::new(&Config::default())
    }

    fn key(name: &str) -> String {
        name.to_owned()
    }

    /// `get` that must not block: the key is already there.
    async fn get_now(queue: &Workqueue<String>) -> String {
        tokio::time::timeout(Duration::ZERO, queue.get())
            .await
            .expect("a key is ready")
            .expect("the queue is running")
    }

    async fn assert_blocks(queue: &Workqueue<String>, within: Duration) {
        assert!(
            tokio::time::timeout(within, queue.get()).await.is_err(),
            "get returned a key within {within:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn queued_keys_are_deduplicated() {
        let q = queue();
        q.add(key("a"));
        q.add(key("b"));
        q.add(key("a"));
        assert_eq!(q.len(), 2);
        assert_eq!(get_now(&q).await, "a");
        assert_eq!(get_now(&q).await, "b");
        assert_blocks(&q, ms(10)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn key_in_processing_is_not_handed_out_and_reruns_once_after_done() {
        let q = queue();
        q.add(key("a"));
        let a = get_now(&q).await;
        for _ in 0..5 {
            q.add(key("a"));
        }
        assert_eq!(q.len(), 0, "re-added key waits for its own processing");
        assert_blocks(&q, ms(100)).await;

        q.done(&a);
        assert_eq!(q.len(), 1);
        let again = get_now(&q).await;
        assert_eq!(again, "a");
        q.done(&again);
        assert_blocks(&q, ms(100)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn done_without_readd_does_not_requeue() {
        let q = queue();
        q.add(key("a"));
        let a = get_now(&q).await;
        q.done(&a);
        assert!(q.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn per_key_backoff_doubles_from_5ms_caps_at_1000s_and_forget_resets_it() {
        let limiter = RateLimiter::new(&Config::default().qps(f64::INFINITY));
        let a = key("a");
        let mut expected = ms(5);
        for failures in 0..18 {
            assert_eq!(limiter.num_requeues(&a), failures);
            assert_eq!(limiter.when(&a), expected, "after {failures} failures");
            expected *= 2;
        }
        // 5 ms * 2^18 = 1310.72 s > 1000 s.
        for _ in 0..50 {
            assert_eq!(limiter.when(&a), Duration::from_secs(1000));
        }
        assert_eq!(limiter.when(&key("b")), ms(5), "backoff is per key");

        limiter.forget(&a);
        assert_eq!(limiter.num_requeues(&a), 0);
        assert_eq!(limiter.when(&a), ms(5));
    }

    #[tokio::test(start_paused = true)]
    async fn token_bucket_passes_a_burst_of_100_then_one_per_100ms() {
        let mut bucket = TokenBucket::new(DEFAULT_QPS, DEFAULT_BURST);
        let now = Instant::now();
        for _ in 0..100 {
            assert_eq!(bucket.reserve(now), Duration::ZERO);
        }
        assert_eq!(bucket.reserve(now), ms(100));
        assert_eq!(bucket.reserve(now), ms(200));
        // One token refills every 100 ms; the two reservations above owe them.
        assert_eq!(bucket.reserve(now + ms(300)), ms(0));
        assert_eq!(bucket.reserve(now + ms(300)), ms(100));
    }

    #[tokio::test(start_paused = true)]
    async fn first_100_rate_limited_adds_are_immediate_and_the_101st_waits_100ms() {
        let q = Workqueue::new(&Config::default().base_delay(Duration::ZERO));
        for i in 0..101 {
            q.add_rate_limited(format!("k{i}"));
        }
        assert_eq!(q.len(), 100);
        tokio::time::advance(ms(99)).await;
        assert_eq!(q.len(), 100);
        tokio::time::advance(ms(1)).await;
        assert_eq!(q.len(), 101);
    }

    #[tokio::test(start_paused = true)]
    async fn combined_limiter_takes_the_max_of_backoff_and_bucket() {
        let limiter = RateLimiter::new(&Config::default().burst(1));
        // Bucket has a token, backoff says 5 ms.
        assert_eq!(limiter.when(&key("a")), ms(5));
        // Bucket empty: 100 ms beats a fresh key's 5 ms.
        assert_eq!(limiter.when(&key("b")), ms(100));
        // A key that failed often: backoff beats the bucket.
        let c = key("c");
        for _ in 0..10 {
            limiter.when(&c);
        }
        // After 10 failures the backoff is 5 ms * 2^10 = 5.12 s; the bucket owes 1.2 s.
        assert_eq!(limiter.when(&c), ms(5 << 10));
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_delays_and_keeps_the_earliest_time() {
        let q = queue();
        q.add_after(key("a"), ms(300));
        q.add_after(key("a"), ms(100));
        q.add_after(key("a"), ms(200));
        q.add_after(key("b"), ms(150));
        assert!(q.is_empty());

        let start = Instant::now();
        assert_eq!(q.get().await.unwrap(), "a");
        assert_eq!(start.elapsed(), ms(100));
        assert_eq!(q.get().await.unwrap(), "b");
        assert_eq!(start.elapsed(), ms(150));
        // The later duplicates were dropped, not kept as extra entries.
        assert_blocks(&q, ms(1000)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_wakes_a_getter_already_waiting_for_a_later_key() {
        let q = queue();
        q.add_after(key("late"), ms(1000));
        let getter = tokio::spawn({
            let q = q.clone();
            async move { (q.get().await, Instant::now()) }
        });
        tokio::task::yield_now().await;
        let start = Instant::now();
        q.add_after(key("early"), ms(10));
        let (got, at) = getter.await.unwrap();
        assert_eq!(got.as_deref(), Some("early"));
        assert_eq!(at - start, ms(10));
    }

    #[tokio::test(start_paused = true)]
    async fn n_workers_process_different_keys_concurrently() {
        let q = queue();
        for i in 0..4 {
            q.add(format!("k{i}"));
        }
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let workers = tokio::spawn(run_workers(q.clone(), 4, {
            let running = Arc::clone(&running);
            let peak = Arc::clone(&peak);
            move |_key: String| {
                let running = Arc::clone(&running);
                let peak = Arc::clone(&peak);
                async move {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                    Outcome::Success
                }
            }
        }));
        let start = Instant::now();
        tokio::time::sleep(ms(1500)).await;
        assert!(q.shutdown_with_drain(Duration::from_secs(5)).await);
        workers.await.unwrap();
        assert_eq!(peak.load(Ordering::SeqCst), 4);
        assert_eq!(start.elapsed(), ms(1500), "four 1 s keys took 1 s, not 4 s");
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_wakes_waiting_getters_with_none() {
        let q = queue();
        let getters: Vec<_> = (0..3)
            .map(|_| {
                let q = q.clone();
                tokio::spawn(async move { q.get().await })
            })
            .collect();
        tokio::task::yield_now().await;
        q.shutdown();
        for getter in getters {
            assert_eq!(getter.await.unwrap(), None);
        }
        q.add(key("late"));
        assert_eq!(q.get().await, None, "adds after shutdown are ignored");
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_with_drain_waits_for_in_flight_keys_and_times_out() {
        let q = queue();
        q.add(key("a"));
        let a = get_now(&q).await;
        let finisher = tokio::spawn({
            let q = q.clone();
            async move {
                tokio::time::sleep(ms(300)).await;
                q.done(&a);
            }
        });
        let start = Instant::now();
        assert!(q.shutdown_with_drain(Duration::from_secs(1)).await);
        assert_eq!(start.elapsed(), ms(300));
        finisher.await.unwrap();

        let q = queue();
        q.add(key("stuck"));
        let _stuck = get_now(&q).await;
        let start = Instant::now();
        assert!(!q.shutdown_with_drain(ms(500)).await);
        assert_eq!(start.elapsed(), ms(500));
    }

    #[tokio::test(start_paused = true)]
    async fn ten_rapid_changes_to_one_key_while_a_handler_is_slow_cause_two_reconciles_not_eleven()
    {
        let q = queue();
        let reconciles = Arc::new(AtomicUsize::new(0));
        let running = Arc::new(AtomicUsize::new(0));
        let overlapped = Arc::new(AtomicUsize::new(0));
        let workers = tokio::spawn(run_workers(q.clone(), 4, {
            let reconciles = Arc::clone(&reconciles);
            let running = Arc::clone(&running);
            let overlapped = Arc::clone(&overlapped);
            move |_key: String| {
                let reconciles = Arc::clone(&reconciles);
                let running = Arc::clone(&running);
                let overlapped = Arc::clone(&overlapped);
                async move {
                    reconciles.fetch_add(1, Ordering::SeqCst);
                    if running.fetch_add(1, Ordering::SeqCst) > 0 {
                        overlapped.fetch_add(1, Ordering::SeqCst);
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                    Outcome::Success
                }
            }
        }));

        q.add(key("default/gpu-pod"));
        tokio::time::sleep(ms(10)).await;
        assert_eq!(
            reconciles.load(Ordering::SeqCst),
            1,
            "first reconcile started"
        );
        for _ in 0..10 {
            q.add(key("default/gpu-pod"));
            tokio::time::sleep(ms(5)).await;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(q.shutdown_with_drain(Duration::from_secs(5)).await);
        workers.await.unwrap();

        assert_eq!(reconciles.load(Ordering::SeqCst), 2);
        assert_eq!(overlapped.load(Ordering::SeqCst), 0, "never concurrently");
    }

    #[tokio::test(start_paused = true)]
    async fn failing_key_is_retried_with_backoff_and_success_forgets_it() {
        let q = queue();
        let attempts = Arc::new(Mutex::new(Vec::new()));
        let workers = tokio::spawn(run_workers(q.clone(), 2, {
            let attempts = Arc::clone(&attempts);
            move |_key: String| {
                let attempts = Arc::clone(&attempts);
                async move {
                    let n = {
                        let mut attempts = attempts.lock().unwrap();
                        attempts.push(Instant::now());
                        attempts.len()
                    };
                    if n < 4 {
                        Outcome::retry(format!("attempt {n} failed"))
                    } else {
                        Outcome::Success
                    }
                }
            }
        }));
        let start = Instant::now();
        q.add(key("a"));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(q.num_requeues(&key("a")), 0, "success forgot the failures");
        q.shutdown_with_drain(Duration::from_secs(1)).await;
        workers.await.unwrap();
        let offsets: Vec<_> = attempts
            .lock()
            .unwrap()
            .iter()
            .map(|at| *at - start)
            .collect();
        assert_eq!(offsets, [ms(0), ms(5), ms(15), ms(35)]);
    }

    #[tokio::test(start_paused = true)]
    async fn requeue_after_success_runs_the_key_again_after_the_delay() {
        let q = queue();
        let runs = Arc::new(Mutex::new(Vec::new()));
        let workers = tokio::spawn(run_workers(q.clone(), 1, {
            let runs = Arc::clone(&runs);
            move |_key: String| {
                let runs = Arc::clone(&runs);
                async move {
                    runs.lock().unwrap().push(Instant::now());
                    Outcome::RequeueAfter(Duration::from_secs(60))
                }
            }
        }));
        let start = Instant::now();
        q.add(key("a"));
        tokio::time::sleep(Duration::from_secs(150)).await;
        q.shutdown();
        workers.await.unwrap();
        let offsets: Vec<_> = runs.lock().unwrap().iter().map(|at| *at - start).collect();
        assert_eq!(
            offsets,
            [
                Duration::ZERO,
                Duration::from_secs(60),
                Duration::from_secs(120)
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn panicking_handler_does_not_wedge_its_key() {
        let q = queue();
        let calls = Arc::new(AtomicUsize::new(0));
        let workers = tokio::spawn(run_workers(q.clone(), 1, {
            let calls = Arc::clone(&calls);
            move |_key: String| {
                let first = calls.fetch_add(1, Ordering::SeqCst) == 0;
                async move {
                    assert!(!first, "handler bug");
                    Outcome::Success
                }
            }
        }));
        q.add(key("a"));
        tokio::time::sleep(ms(100)).await;
        assert_eq!(calls.load(Ordering::SeqCst), 2, "retried after the panic");
        assert!(q.shutdown_with_drain(ms(100)).await);
        workers.await.unwrap();
    }

    /// Real threads, real time: no key overlaps itself and no add is lost
    /// (every key's last add is followed by a reconcile that saw it).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_many_threads_no_key_overlaps_itself_and_no_add_is_lost() {
        const KEYS: usize = 50;
        const ADDS_PER_KEY: usize = 20;
        let q = queue();
        let added: Arc<Vec<AtomicUsize>> =
            Arc::new((0..KEYS).map(|_| AtomicUsize::new(0)).collect());
        let seen: Arc<Vec<AtomicUsize>> =
            Arc::new((0..KEYS).map(|_| AtomicUsize::new(0)).collect());
        let running: Arc<Vec<AtomicUsize>> =
            Arc::new((0..KEYS).map(|_| AtomicUsize::new(0)).collect());
        let overlaps = Arc::new(AtomicUsize::new(0));
        let workers = tokio::spawn(run_workers(q.clone(), 4, {
            let (added, seen, running, overlaps) = (
                Arc::clone(&added),
                Arc::clone(&seen),
                Arc::clone(&running),
                Arc::clone(&overlaps),
            );
            move |key: String| {
                let (added, seen, running, overlaps) = (
                    Arc::clone(&added),
                    Arc::clone(&seen),
                    Arc::clone(&running),
                    Arc::clone(&overlaps),
                );
                async move {
                    let i: usize = key.parse().unwrap();
                    if running[i].fetch_add(1, Ordering::SeqCst) > 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    seen[i].store(added[i].load(Ordering::SeqCst), Ordering::SeqCst);
                    tokio::task::yield_now().await;
                    running[i].fetch_sub(1, Ordering::SeqCst);
                    Outcome::Success
                }
            }
        }));
        let producers: Vec<_> = (0..2)
            .map(|p| {
                let (q, added) = (q.clone(), Arc::clone(&added));
                tokio::spawn(async move {
                    for round in 0..ADDS_PER_KEY / 2 {
                        for i in (p..KEYS).step_by(2).chain((1 - p..KEYS).step_by(2)) {
                            added[i].fetch_add(1, Ordering::SeqCst);
                            q.add(i.to_string());
                            if (round + i) % 7 == 0 {
                                tokio::task::yield_now().await;
                            }
                        }
                    }
                })
            })
            .collect();
        for producer in producers {
            producer.await.unwrap();
        }
        let all_seen =
            || (0..KEYS).all(|i| seen[i].load(Ordering::SeqCst) == added[i].load(Ordering::SeqCst));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !all_seen() && std::time::Instant::now() < deadline {
            tokio::time::sleep(ms(5)).await;
        }
        assert!(all_seen(), "some key's last add was never reconciled");
        assert!(q.shutdown_with_drain(Duration::from_secs(5)).await);
        workers.await.unwrap();
        assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    }

    fn encode(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text
    }

    #[tokio::test(start_paused = true)]
    async fn metrics_are_exposed_with_client_go_names_labelled_by_guest() {
        let mut registry = Registry::default();
        let metrics = WorkqueueMetrics::new(&mut registry);
        let q = Workqueue::with_metrics("gpu-summary", &Config::default(), &metrics);
        let other = Workqueue::<String>::with_metrics("other", &Config::default(), &metrics);

        q.add(key("a"));
        q.add(key("b"));
        q.add(key("a")); // deduplicated: not an add
        tokio::time::advance(Duration::from_secs(2)).await;
        let a = get_now(&q).await; // waited 2 s
        tokio::time::advance(Duration::from_secs(3)).await;
        q.add_rate_limited(key("c"));

        let text = encode(&registry);
        for line in [
            r#"workqueue_adds_total{name="gpu-summary"} 2"#,
            r#"workqueue_adds_total{name="other"} 0"#,
            r#"workqueue_depth{name="gpu-summary"} 1"#,
            r#"workqueue_retries_total{name="gpu-summary"} 1"#,
            r#"workqueue_queue_duration_seconds_count{name="gpu-summary"} 1"#,
            r#"workqueue_queue_duration_seconds_sum{name="gpu-summary"} 2.0"#,
            r#"workqueue_queue_duration_seconds_bucket{le="10.0",name="gpu-summary"} 1"#,
            r#"workqueue_work_duration_seconds_count{name="gpu-summary"} 0"#,
            r#"workqueue_unfinished_work_seconds{name="gpu-summary"} 3.0"#,
            r#"workqueue_longest_running_processor_seconds{name="gpu-summary"} 3.0"#,
            r#"workqueue_unfinished_work_seconds{name="other"} 0.0"#,
            "# TYPE workqueue_depth gauge",
            "# TYPE workqueue_adds counter",
            "# TYPE workqueue_queue_duration_seconds histogram",
            "# TYPE workqueue_unfinished_work_seconds gauge",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }

        tokio::time::advance(Duration::from_secs(1)).await;
        q.done(&a);
        let text = encode(&registry);
        for line in [
            r#"workqueue_work_duration_seconds_count{name="gpu-summary"} 1"#,
            r#"workqueue_work_duration_seconds_sum{name="gpu-summary"} 4.0"#,
            r#"workqueue_unfinished_work_seconds{name="gpu-summary"} 0.0"#,
            r#"workqueue_longest_running_processor_seconds{name="gpu-summary"} 0.0"#,
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }

        drop((q, other));
        let text = encode(&registry);
        assert!(
            !text.contains(r#"workqueue_unfinished_work_seconds{name="#),
            "dropped queues leave the scrape-time gauges:\n{text}"
        );
    }
}
