//! The workers: tokio tasks that take keys from a queue, hand each to the
//! caller's handler, and apply what the handler made of it.
//!
//! Owns the worker loop (sample-controller's `processNextWorkItem`) and the
//! mapping from [`Outcome`] to `forget` / `add_after` / `add_rate_limited`
//! and `done`. It never knows what a key means: the handler does the work.

use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;

use super::Workqueue;

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
    /// The key was not handled now (its guest is quarantined) and must be
    /// looked at again after this delay; its backoff is kept.
    Postpone(Duration),
    /// The key failed: it is re-added after its rate-limited delay.
    Retry(BoxError),
    /// The key failed because the API server did (5xx, 429, no connection,
    /// 403): re-added like [`Outcome::Retry`], but retried promptly once
    /// the server answers again (see [`Workqueue::add_unavailable`]).
    Unavailable(BoxError),
}

impl Outcome {
    /// A [`Outcome::Retry`] from anything error-like (`"message"`,
    /// `String`, any `std::error::Error`).
    pub fn retry(error: impl Into<BoxError>) -> Self {
        Self::Retry(error.into())
    }

    /// An [`Outcome::Unavailable`] from anything error-like.
    pub fn unavailable(error: impl Into<BoxError>) -> Self {
        Self::Unavailable(error.into())
    }
}

/// Runs `workers` concurrent workers (tokio tasks) that take keys from
/// `queue` and hand them to `handler`, until the queue shuts down; returns
/// once every worker has stopped.
///
/// Per key, as in sample-controller's `processNextWorkItem`:
/// [`Outcome::Success`] → `forget`; [`Outcome::RequeueAfter`] → `forget` +
/// `add_after`; [`Outcome::Postpone`] → `add_after`;
/// [`Outcome::Retry`] → `add_rate_limited`;
/// [`Outcome::Unavailable`] → `add_unavailable`; then always `done`.
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
                // `get` returns at once while keys wait, and a handler may
                // never wait either (nothing to write, a guest call run in
                // place): without this the worker would hold its thread
                // until the queue is empty. Yields once tokio's per-task
                // budget is spent.
                tokio::task::consume_budget().await;
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
        Outcome::Postpone(delay) => queue.add_after(key.clone(), delay),
        Outcome::Retry(error) => {
            tracing::warn!(
                ?key,
                %error,
                requeues = queue.num_requeues(&key),
                "reconcile failed; retrying with backoff"
            );
            queue.add_rate_limited(key.clone());
        }
        Outcome::Unavailable(error) => {
            tracing::warn!(
                ?key,
                %error,
                requeues = queue.num_requeues(&key),
                "reconcile failed on the API server's side; retrying with backoff, promptly once it answers"
            );
            queue.add_unavailable(key.clone());
        }
    }
    queue.done(&key);
}
