//! Waiting on conditions instead of sleeping: [`eventually`] for something
//! that must happen, [`stays_for`] for something that must not, and
//! [`bounded`] for a future that must finish.
//!
//! A test never sleeps to let things "settle": it waits for the condition
//! that settling would bring. Proving that something does *not* happen needs
//! a window of time; [`stays_for`] makes that window explicit and named, and
//! a test first waits for whatever must precede it.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// How long any convergence may take before a test fails.
pub const CONVERGE: Duration = Duration::from_secs(30);
/// How often conditions are polled.
pub const POLL: Duration = Duration::from_millis(50);

/// Polls `check` until it returns true; fails the test after [`CONVERGE`]
/// naming `what`.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + CONVERGE;
    loop {
        if check().await {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(POLL).await;
    }
}

/// Polls `check` for all of `window` and fails the test, naming `what`, the
/// first time it is false. For "this does not happen": the window is the
/// test's explicit bet on how soon it would have happened.
pub async fn stays_for<F, Fut>(window: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        assert!(
            check().await,
            "{what}: no longer true {:?} into the {window:?} window",
            start.elapsed()
        );
        if start.elapsed() >= window {
            return;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `f`, which must finish within `limit`; fails the test naming `what`.
pub async fn bounded<T>(what: &str, limit: Duration, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within {limit:?}"))
}
