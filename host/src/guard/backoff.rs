//! The hold-back both rules end in: a key or an object is not written
//! until a deadline, and each hold-back that resumes an earlier one
//! doubles it, up to a cap. It never judges when to hold back: the
//! write-war and hot-loop rules do.

use std::time::Duration;

use tokio::time::Instant;

/// One key's or object's hold-back: until when, and how long the next one
/// that resumes it lasts.
#[derive(Debug, Default)]
pub(super) struct Backoff {
    /// Writes are held back until then.
    until: Option<Instant>,
    /// The next hold-back, when one resumes this one.
    next: Option<Duration>,
}

impl Backoff {
    /// When the last hold-back ends (or ended).
    pub(super) fn until(&self) -> Option<Instant> {
        self.until
    }

    /// How much longer the hold-back lasts at `now`, if it does.
    pub(super) fn left(&self, now: Instant) -> Option<Duration> {
        let until = self.until.filter(|u| *u > now)?;
        Some(until - now)
    }

    /// Holds back from `now`: for `first`, or, when this hold-back
    /// `resumed` the last one, for the doubled last one; never longer than
    /// `max`. Returns how long.
    pub(super) fn hold(
        &mut self,
        now: Instant,
        resumed: bool,
        first: Duration,
        max: Duration,
    ) -> Duration {
        let backoff = if resumed {
            self.next.unwrap_or(first)
        } else {
            first
        }
        .min(max);
        self.next = Some((backoff * 2).min(max));
        self.until = Some(now + backoff);
        backoff
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resumed_hold_back_doubles_up_to_the_cap_and_a_fresh_one_starts_over() {
        let (first, max) = (Duration::from_secs(10), Duration::from_secs(25));
        let now = Instant::now();
        let mut b = Backoff::default();
        assert_eq!(b.left(now), None);
        let lengths: Vec<u64> = [false, true, true, true]
            .into_iter()
            .map(|resumed| b.hold(now, resumed, first, max).as_secs())
            .collect();
        assert_eq!(lengths, [10, 20, 25, 25]);
        assert_eq!(
            b.left(now + Duration::from_secs(5)),
            Some(Duration::from_secs(20))
        );
        assert_eq!(b.left(now + max), None);
        assert_eq!(b.until(), Some(now + max));
        assert_eq!(b.hold(now, false, first, max), first);
    }
}
