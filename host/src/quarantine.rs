//! Quarantine: a guest whose calls keep running out of time or trapping
//! is not called at all for a while, so it cannot spend the host's cores.
//! Owns one guest's record of consecutive sandbox failures and the
//! quarantine they lead to. It never calls the guest, never drops a key
//! (the controller requeues each key for the quarantine's end) and never
//! reads a clock: callers pass `now`.
//!
//! # Rules
//! - A sandbox failure is a call that never returned a plan: deadline,
//!   trap, panic, memory, fuel ([`counts`]).
//! - After [`QuarantineConfig::failures`] in a row (0: never), no call for
//!   [`QuarantineConfig::initial`], doubling on each quarantine up to
//!   [`QuarantineConfig::max`].
//! - After a quarantine the guest is on probation: its next such failure
//!   quarantines it again at once.
//! - A call that returns (a plan, or an error the guest chose) resets
//!   everything.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::sync::lock;

/// Default consecutive failures that quarantine a guest.
pub const DEFAULT_FAILURES: u32 = 5;
/// Default first quarantine: long against a 5 s deadline, short against
/// an operator's reaction time.
pub const DEFAULT_INITIAL: Duration = Duration::from_secs(30);
/// Default longest quarantine (as a write war's longest hold-back).
pub const DEFAULT_MAX: Duration = Duration::from_secs(30 * 60);

/// When a failing guest is quarantined, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuarantineConfig {
    /// Consecutive deadline-or-trap failures that start a quarantine (0:
    /// never quarantine).
    pub failures: u32,
    /// The first quarantine's length.
    pub initial: Duration,
    /// The longest quarantine; each one doubles the previous up to this.
    pub max: Duration,
}

impl Default for QuarantineConfig {
    fn default() -> Self {
        QuarantineConfig {
            failures: DEFAULT_FAILURES,
            initial: DEFAULT_INITIAL,
            max: DEFAULT_MAX,
        }
    }
}

impl QuarantineConfig {
    /// Sets how many failures in a row quarantine a guest (0: never).
    #[must_use]
    pub fn failures(mut self, n: u32) -> Self {
        self.failures = n;
        self
    }

    /// Sets the first quarantine's length and the cap of its doubling.
    /// `max` below `initial` is raised to it.
    #[must_use]
    pub fn lengths(mut self, initial: Duration, max: Duration) -> Self {
        self.initial = initial;
        self.max = max.max(initial);
        self
    }
}

/// Whether a guest error's reason (a metric label) is a sandbox failure:
/// the call ran out of time, memory or fuel, or trapped.
pub fn counts(reason: &str) -> bool {
    matches!(
        reason,
        "deadline" | "trap" | "guest_panic" | "memory" | "fuel"
    )
}

#[derive(Debug, Default)]
struct State {
    consecutive: u32,
    /// The current quarantine's end.
    until: Option<Instant>,
    /// The last quarantine's length (None: none since the last success).
    last: Option<Duration>,
}

/// One guest's quarantine record.
#[derive(Debug)]
pub struct Quarantine {
    config: QuarantineConfig,
    state: Mutex<State>,
}

/// What a recorded failure did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Not (yet) quarantined: failures in a row so far.
    Counted(u32),
    /// Quarantined for this long, after this many failures in a row.
    Quarantined(Duration, u32),
    /// Already quarantined (a call that was in flight when it started).
    AlreadyQuarantined,
}

impl Quarantine {
    /// A clean record.
    pub fn new(config: QuarantineConfig) -> Self {
        Quarantine {
            config,
            state: Mutex::new(State::default()),
        }
    }

    /// How long the guest stays quarantined after `now` (None: it may be
    /// called).
    pub fn remaining(&self, now: Instant) -> Option<Duration> {
        let until = lock(&self.state).until?;
        (until > now).then(|| until - now)
    }

    /// Records a sandbox failure at `now`.
    pub fn failed(&self, now: Instant) -> Verdict {
        if self.config.failures == 0 {
            return Verdict::Counted(0);
        }
        let mut s = lock(&self.state);
        if s.until.is_some_and(|u| u > now) {
            return Verdict::AlreadyQuarantined;
        }
        s.consecutive += 1;
        // On probation after a quarantine, one failure is enough.
        if s.consecutive < self.config.failures && s.last.is_none() {
            return Verdict::Counted(s.consecutive);
        }
        let length = match s.last {
            Some(d) => d.saturating_mul(2).min(self.config.max),
            None => self.config.initial,
        };
        s.last = Some(length);
        s.until = Some(now + length);
        Verdict::Quarantined(length, s.consecutive)
    }

    /// Records a call that returned: the record is clean again. Whether a
    /// quarantine (or probation) ended.
    pub fn succeeded(&self) -> bool {
        let mut s = lock(&self.state);
        let was = s.last.is_some();
        *s = State::default();
        was
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> QuarantineConfig {
        QuarantineConfig::default()
            .failures(3)
            .lengths(Duration::from_secs(10), Duration::from_secs(35))
    }

    #[test]
    fn n_failures_in_a_row_quarantine_and_each_quarantine_doubles_up_to_the_cap() {
        let q = Quarantine::new(config());
        let t0 = Instant::now();
        assert_eq!(q.failed(t0), Verdict::Counted(1));
        assert_eq!(q.failed(t0), Verdict::Counted(2));
        assert_eq!(q.remaining(t0), None);
        assert_eq!(
            q.failed(t0),
            Verdict::Quarantined(Duration::from_secs(10), 3)
        );
        assert_eq!(q.remaining(t0), Some(Duration::from_secs(10)));
        // A call in flight when it started does not extend it.
        let t1 = t0 + Duration::from_secs(4);
        assert_eq!(q.failed(t1), Verdict::AlreadyQuarantined);
        assert_eq!(q.remaining(t1), Some(Duration::from_secs(6)));
        // Over: on probation, the next failure quarantines again, longer.
        let t2 = t0 + Duration::from_secs(10);
        assert_eq!(q.remaining(t2), None);
        assert_eq!(
            q.failed(t2),
            Verdict::Quarantined(Duration::from_secs(20), 4)
        );
        let t3 = t2 + Duration::from_secs(20);
        assert_eq!(
            q.failed(t3),
            Verdict::Quarantined(Duration::from_secs(35), 5)
        );
        let t4 = t3 + Duration::from_secs(35);
        assert_eq!(
            q.failed(t4),
            Verdict::Quarantined(Duration::from_secs(35), 6),
            "capped"
        );
    }

    #[test]
    fn a_call_that_returns_resets_the_count_and_the_doubling() {
        let q = Quarantine::new(config());
        let t0 = Instant::now();
        q.failed(t0);
        q.failed(t0);
        assert!(!q.succeeded(), "no quarantine yet");
        assert_eq!(q.failed(t0), Verdict::Counted(1));
        q.failed(t0);
        assert!(matches!(q.failed(t0), Verdict::Quarantined(..)));
        let later = t0 + Duration::from_secs(10);
        assert!(q.succeeded(), "probation ends");
        assert_eq!(q.remaining(later), None);
        assert_eq!(q.failed(later), Verdict::Counted(1));
        q.failed(later);
        assert_eq!(
            q.failed(later),
            Verdict::Quarantined(Duration::from_secs(10), 3),
            "back to the first length"
        );
    }

    #[test]
    fn zero_failures_never_quarantines() {
        let q = Quarantine::new(config().failures(0));
        let t0 = Instant::now();
        for _ in 0..100 {
            assert_eq!(q.failed(t0), Verdict::Counted(0));
        }
        assert_eq!(q.remaining(t0), None);
    }

    #[test]
    fn only_calls_that_never_returned_count() {
        for r in ["deadline", "trap", "guest_panic", "memory", "fuel"] {
            assert!(counts(r), "{r}");
        }
        for r in ["malformed_plan", "forbidden_write", "guest_error", "policy"] {
            assert!(!counts(r), "{r}");
        }
    }
}
