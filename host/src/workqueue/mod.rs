//! The workqueue: which key is reconciled when, with client-go's semantics.
//! It owns deduplication of waiting keys, the guarantee that one key is never
//! handed to two workers at once, per-key exponential backoff combined with a
//! global token bucket, delayed re-adds (`add_after`), shutdown, and the
//! client-go `workqueue_*` metrics. It never knows about Kubernetes objects,
//! guests or API calls — only opaque keys — and it never does the work
//! itself: [`run_workers`] hands keys to a caller-supplied handler.
//!
//! # The life of a key
//! As in `k8s.io/client-go/util/workqueue`:
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
//! 5. Unlike client-go, a failure that was the API server's (5xx, 429, no
//!    connection, 403) goes through [`Workqueue::add_unavailable`]: the same
//!    backoff, except that one such key, the probe, is retried at least every
//!    [`Config::probe_interval`], and once any of them succeeds every other
//!    is retried at once with its backoff reset. After an outage of any
//!    length the keys converge within about one probe interval, not at their
//!    backed-off times (up to 1000 s).
//!
//! # Layout
//! - `rate_limit`: [`Config`] and the [`RateLimiter`] (per-key backoff,
//!   global bucket on [`governor`]); `clock`: the bucket's tokio clock.
//! - `queue`: the [`Workqueue`] itself.
//! - `workers`: [`run_workers`] and the handler's [`Outcome`].
//! - `metrics`: the shared [`WorkqueueMetrics`] families.

mod clock;
mod metrics;
mod queue;
mod rate_limit;
#[cfg(test)]
mod tests;
mod workers;

use std::time::Duration;

pub use metrics::WorkqueueMetrics;
pub use queue::Workqueue;
pub use rate_limit::{
    Config, RateLimiter, DEFAULT_BASE_DELAY, DEFAULT_BURST, DEFAULT_MAX_DELAY,
    DEFAULT_PROBE_INTERVAL, DEFAULT_QPS,
};
pub use workers::{run_workers, BoxError, Outcome};

/// The furthest ahead a key is ever scheduled: far enough never to matter,
/// near enough that `Instant + delay` cannot overflow.
const MAX_SCHEDULE_AHEAD: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);
