//! The clock of the workqueue's token bucket: [`governor`] reading tokio's
//! [`Instant`], so paused tokio time drives the bucket in tests.
//!
//! Owns the clock reading for one bucket. The bucket sets the reading to the
//! instant of each decision (usually `Instant::now()`), because granting a
//! reservation means checking governor's state once more *at the future
//! instant* the reservation waits for. It never reads the system clock by
//! itself, never sleeps and never moves by itself.

use std::ops::Add;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::clock::{Clock, Reference};
use governor::nanos::Nanos;
use tokio::time::Instant;

use crate::sync::lock;

/// A tokio [`Instant`] as a governor clock reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct TokioInstant(pub(super) Instant);

impl Add<Nanos> for TokioInstant {
    type Output = Self;

    fn add(self, nanos: Nanos) -> Self {
        // Readings stay within a few scheduling horizons of the bucket's
        // start (see `TokenBucket`), far from `Instant`'s limits.
        TokioInstant(self.0 + Duration::from(nanos))
    }
}

impl Reference for TokioInstant {
    fn duration_since(&self, earlier: Self) -> Nanos {
        Nanos::from(self.0.saturating_duration_since(earlier.0))
    }

    fn saturating_sub(&self, nanos: Nanos) -> Self {
        TokioInstant(self.0.checked_sub(Duration::from(nanos)).unwrap_or(self.0))
    }
}

/// A governor [`Clock`] whose reading is the tokio instant last
/// [`set`](Self::set). Clones share the reading.
#[derive(Debug, Clone)]
pub(super) struct TokioClock {
    reading: Arc<Mutex<Instant>>,
}

impl TokioClock {
    /// A clock reading `at`.
    pub(super) fn new(at: Instant) -> Self {
        TokioClock {
            reading: Arc::new(Mutex::new(at)),
        }
    }

    /// Makes the clock read `at` until set again.
    pub(super) fn set(&self, at: Instant) {
        *lock(&self.reading) = at;
    }
}

impl Clock for TokioClock {
    type Instant = TokioInstant;

    fn now(&self) -> TokioInstant {
        TokioInstant(*lock(&self.reading))
    }
}
