//! Rate limiting of failed keys: client-go's default controller rate
//! limiter, the maximum of a per-key exponential backoff and a global token
//! bucket.
//!
//! Owns [`Config`] (and its client-go defaults), each key's failure count,
//! and the bucket every rate-limited add draws from. It never schedules or
//! queues anything: it only says how long a key must wait.

use std::collections::HashMap;
use std::hash::Hash;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::Duration;

use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::Quota;
use tokio::time::Instant;

use super::clock::{TokioClock, TokioInstant};
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
/// Default longest wait of the probe key while keys wait out an API-server
/// failure (see [`Config::probe_interval`]): with a reconcile on top, a
/// recovered server is noticed within about 5 s.
pub const DEFAULT_PROBE_INTERVAL: Duration = Duration::from_secs(2);

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
    probe_interval: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            base_delay: DEFAULT_BASE_DELAY,
            max_delay: DEFAULT_MAX_DELAY,
            qps: DEFAULT_QPS,
            burst: DEFAULT_BURST,
            probe_interval: DEFAULT_PROBE_INTERVAL,
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
    /// `1 / qps`. The bucket never holds more than refills in ten years
    /// (`qps` × ten years), which only caps bursts at absurdly low rates.
    #[must_use]
    pub fn burst(mut self, burst: u32) -> Self {
        self.burst = burst;
        self
    }

    /// While keys wait out an API-server failure
    /// ([`Workqueue::add_unavailable`](super::Workqueue::add_unavailable)),
    /// one of them, the probe, is retried at least this often whatever its
    /// backoff; when it succeeds, every other such key is retried at once
    /// with its backoff reset. One request per interval is what an outage
    /// costs the server; a shorter interval notices recovery sooner.
    #[must_use]
    pub fn probe_interval(mut self, interval: Duration) -> Self {
        self.probe_interval = interval;
        self
    }

    pub(super) fn probe(&self) -> Duration {
        self.probe_interval
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

    /// The backoff `failures` failures earned (the last one's delay).
    fn delay_after(&self, failures: u32) -> Duration {
        let Some(exponent) = failures.checked_sub(1) else {
            return Duration::ZERO;
        };
        2u32.checked_pow(exponent)
            .and_then(|factor| self.base.checked_mul(factor))
            .map_or(self.max, |delay| delay.min(self.max))
    }

    fn longest(&self) -> Duration {
        let most = lock(&self.failures).values().copied().max().unwrap_or(0);
        self.delay_after(most)
    }

    fn forget(&self, key: &K) {
        lock(&self.failures).remove(key);
    }
}

/// governor's direct (unkeyed) limiter on the bucket's own clock.
type Gcra =
    governor::RateLimiter<NotKeyed, InMemoryState, TokioClock, NoOpMiddleware<TokioInstant>>;

/// client-go's `BucketRateLimiter`: a token bucket (`qps`, `burst`, starting
/// full) that always grants a reservation and says how long to wait for it,
/// like golang.org/x/time/rate's `Reserve().Delay()`. A reservation the bucket
/// cannot serve now is granted at the instant governor says it could be, so
/// reservations queue behind each other: with the bucket empty, the next two
/// wait one and two periods.
///
/// Two limits keep governor's nanosecond arithmetic (at most 584 years) far
/// from overflow. A reservation that would wait longer than the ten-year
/// scheduling horizon is not booked: it waits the horizon. And a bucket holds
/// at most the tokens that refill within that horizon — 3.15 billion at the
/// default 10 qps, so only absurd settings (a burst of more than 315 at one
/// token per million seconds) get a smaller burst than configured.
#[derive(Debug)]
pub(super) struct TokenBucket {
    /// `None` when unlimited.
    gcra: Option<Gcra>,
    /// governor's smallest burst is 1. A burst of 0 is a burst of 1 whose
    /// every wait is one period longer (the bucket's state moves the same),
    /// so this is one period for a burst of 0, else zero.
    zero_burst_wait: Duration,
}

impl TokenBucket {
    pub(super) fn new(qps: f64, burst: u32) -> Self {
        let unlimited = TokenBucket {
            gcra: None,
            zero_burst_wait: Duration::ZERO,
        };
        if !(qps > 0.0 && qps.is_finite()) {
            return unlimited;
        }
        let period = Duration::try_from_secs_f64(1.0 / qps)
            .unwrap_or(MAX_SCHEDULE_AHEAD)
            .clamp(Duration::from_nanos(1), MAX_SCHEDULE_AHEAD);
        let horizon_burst = MAX_SCHEDULE_AHEAD.as_nanos() / period.as_nanos();
        let burst_cap = u32::try_from(horizon_burst).unwrap_or(u32::MAX);
        let (Some(quota), Some(cells)) = (
            Quota::with_period(period),
            NonZeroU32::new(burst.clamp(1, burst_cap.max(1))),
        ) else {
            return unlimited;
        };
        let clock = TokioClock::new(Instant::now());
        TokenBucket {
            gcra: Some(Gcra::direct_with_clock(quota.allow_burst(cells), clock)),
            zero_burst_wait: if burst == 0 { period } else { Duration::ZERO },
        }
    }

    /// Takes a token at `now` and returns how long to wait for it.
    pub(super) fn reserve(&mut self, now: Instant) -> Duration {
        let Some(gcra) = &self.gcra else {
            return Duration::ZERO;
        };
        gcra.clock().set(now);
        let granted_at = match gcra.check() {
            Ok(()) => return self.zero_burst_wait,
            Err(not_until) => not_until.earliest_possible().0,
        };
        let wait = granted_at.saturating_duration_since(now);
        if wait >= MAX_SCHEDULE_AHEAD {
            return MAX_SCHEDULE_AHEAD;
        }
        // Book the token at the instant it is granted: the cell conforms
        // then, and the next reservation queues behind it.
        gcra.clock().set(granted_at);
        let booked = gcra.check();
        debug_assert!(booked.is_ok(), "a cell conforms at its earliest instant");
        (wait + self.zero_burst_wait).min(MAX_SCHEDULE_AHEAD)
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

    /// The longest per-key backoff any key has now: the delay its last
    /// failure earned (zero when no key is failing).
    #[must_use]
    pub fn longest_backoff(&self) -> Duration {
        self.backoff.longest()
    }

    /// Resets `key`'s failure count, so its next failure waits `base_delay`
    /// again. Tokens already taken from the bucket are not returned.
    pub fn forget(&self, key: &K) {
        self.backoff.forget(key);
    }
}
