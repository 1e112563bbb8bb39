//! Rate limiting of failed keys: client-go's default controller rate
//! limiter, the maximum of a per-key exponential backoff and a global token
//! bucket.
//!
//! Owns [`Config`] (and its client-go defaults), each key's failure count,
//! and the bucket every rate-limited add draws from. It never schedules or
//! queues anything: it only says how long a key must wait.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::MAX_SCHEDULE_AHEAD;
use crate::sync::lock;

/// Default first per-key retry delay (client-go: 5 ms).
pub const DEFAULT_BASE_DELAY: Duration = Duration::from_millis(5);
/// Default cap of the per-key retry delay (client-go: 1000 s).
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(1000);
/// Default refill rate of the global token bucket, in keys per second (client-go: 10).
pub const DEFAULT_QPS: f64 = 10.0;
/// Default size of the global token bucket (client-go: 100).
pub const DEFAULT_BURST: u32 = 100;

/// Rate-limiting configuration of a [`Workqueue`](super::Workqueue).
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
    /// failure until [`Workqueue::forget`](super::Workqueue::forget) resets it.
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
pub(super) struct TokenBucket {
    /// `None` when unlimited.
    qps: Option<f64>,
    burst: f64,
    tokens: f64,
    last: Option<Instant>,
}

impl TokenBucket {
    pub(super) fn new(qps: f64, burst: u32) -> Self {
        let qps = (qps > 0.0 && qps.is_finite()).then_some(qps);
        let burst = f64::from(burst);
        Self {
            qps,
            burst,
            tokens: burst,
            last: None,
        }
    }

    pub(super) fn reserve(&mut self, now: Instant) -> Duration {
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

/// The combined rate limiter of a [`Workqueue`](super::Workqueue): the maximum of a per-key
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
