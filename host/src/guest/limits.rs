//! Enforcement of the operator's [`Limits`] inside one guest call: the size
//! of a plan, the guest's `log` import, the shortest requeue delay.
//!
//! Owns the checks and the budgets; the numbers come from
//! [`crate::guest::policy`]. A plan over a cap is refused whole before any of its
//! documents is parsed (the raw strings are only measured); log output over
//! budget is truncated or dropped and counted, never an error; a requeue
//! delay under the minimum is raised to it. It never records metrics (the
//! caller reads [`super::CallStats`]) and never sends anything.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::bindings::wasmctrl::controller::types as wit;
use super::plan::PlanError;
use crate::guest::policy::Limits;

/// Checks a raw plan against the caps before it is validated: counts and
/// byte sizes of the strings the guest returned, nothing parsed yet.
pub fn check_plan(plan: &wit::Plan, limits: &Limits) -> Result<(), PlanError> {
    let over = |what: &'static str, found: usize, max: usize, name: &'static str| {
        (found > max).then_some(PlanError::TooLarge {
            what,
            found,
            max,
            limit: name,
        })
    };
    if let Some(e) = over(
        "writes",
        plan.writes.len(),
        limits.max_plan_writes,
        "maxPlanWrites",
    ) {
        return Err(e);
    }
    if let Some(e) = over(
        "events",
        plan.events.len(),
        limits.max_plan_events,
        "maxPlanEvents",
    ) {
        return Err(e);
    }
    let ref_bytes = |r: &wit::ObjectRef| {
        r.api_version.len()
            + r.kind.len()
            + r.name.len()
            + r.namespace.as_ref().map_or(0, String::len)
    };
    let writes: usize = plan
        .writes
        .iter()
        .map(|w| match w {
            wit::Write::Apply(d) | wit::Write::Update(d) | wit::Write::ApplyStatus(d) => d.len(),
            wit::Write::Delete(r) => ref_bytes(r),
            wit::Write::AddFinalizer(f) | wit::Write::RemoveFinalizer(f) => {
                ref_bytes(&f.target) + f.finalizer.len()
            }
        })
        .sum();
    let events: usize = plan
        .events
        .iter()
        .map(|e| {
            e.reason.len()
                + e.message.len()
                + e.action.len()
                + ref_bytes(&e.regarding)
                + e.related.as_ref().map_or(0, ref_bytes)
        })
        .sum();
    match over(
        "bytes",
        writes.saturating_add(events),
        limits.max_plan_bytes,
        "maxPlanBytes",
    ) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Bytes a guest may copy out to the host in one call (wasmtime's hostcall
/// fuel): what the largest plan within `limits` takes — every document and
/// string byte, plus each write's and event's fixed record — with room to
/// spare. Wasmtime's own default (128 MiB) would let a 1,000,000-write plan
/// be copied out whole (and then refused); this bound stops it at the copy.
pub fn copy_budget(limits: &Limits) -> usize {
    /// A generous bound on one write's or event's record in the canonical
    /// ABI, its strings aside (a write is 48 bytes).
    const RECORD: usize = 256;
    limits.max_plan_bytes.saturating_add(
        limits
            .max_plan_writes
            .saturating_add(limits.max_plan_events)
            .saturating_mul(RECORD),
    )
}

/// Whether `e` is wasmtime refusing a copy out of the guest over the
/// budget [`copy_budget`] set (its error type is private: matched by its
/// message, pinned with wasmtime's version in Cargo.toml and tested).
pub fn over_copy_budget(e: &wasmtime::Error) -> bool {
    e.chain().any(|c| {
        c.to_string()
            .contains("fuel allocated for hostcalls has been exhausted")
    })
}

/// Raises a requeue delay under `min` to `min`; says whether it did.
pub fn clamp_requeue(requeue: &mut Option<Duration>, min: Duration) -> bool {
    match requeue {
        Some(d) if *d < min => {
            *d = min;
            true
        }
        _ => false,
    }
}

/// The guests already warned that a requeue delay was raised (one warning
/// per guest per runtime; the metric counts every time).
#[derive(Debug, Default)]
pub struct ClampWarnings(Mutex<std::collections::HashSet<String>>);

impl ClampWarnings {
    /// Warns that `guest`'s requeue delay was raised to `min`, the first
    /// time only.
    pub fn warn_once(&self, guest: &str, min: Duration) {
        let first = self
            .0
            .lock()
            .map(|mut w| w.insert(guest.to_string()))
            .unwrap_or(false);
        if first {
            tracing::warn!(target: "wasmctrl::guest", guest,
                "guest asked to be requeued sooner than the policy's minimum of {min:?}; raised to it (logged once, counted in wasmctrl_guest_limited_total{{limit=\"min_requeue\"}})");
        }
    }
}

/// Per-guest log budget over one-second windows, shared by every call of
/// every guest on one runtime.
#[derive(Debug, Default)]
pub struct LogRates {
    windows: Mutex<HashMap<String, (Instant, usize)>>,
}

impl LogRates {
    /// Takes up to `want` bytes from `guest`'s budget for the current
    /// second; returns how many it may log.
    fn take(&self, guest: &str, want: usize, per_second: usize) -> usize {
        let Ok(mut windows) = self.windows.lock() else {
            return 0;
        };
        let now = Instant::now();
        let entry = windows.entry(guest.to_string()).or_insert((now, 0));
        if now.duration_since(entry.0) >= Duration::from_secs(1) {
            *entry = (now, 0);
        }
        let granted = want.min(per_second.saturating_sub(entry.1));
        entry.1 += granted;
        granted
    }
}

/// The `log` budget of one call.
#[derive(Debug, Default)]
pub struct LogBudget {
    used: usize,
    /// Messages truncated or dropped in this call.
    pub limited: u64,
    warned: bool,
}

impl LogBudget {
    /// What of `message` may be logged (`None`: drop it): truncated to the
    /// per-message cap at a character boundary, and within the call's and
    /// the guest's per-second budgets. Warns once per call when it drops or
    /// truncates.
    pub fn admit(
        &mut self,
        guest: &str,
        message: String,
        limits: &Limits,
        rates: &LogRates,
    ) -> Option<String> {
        let mut message = message;
        let mut cut = false;
        if message.len() > limits.max_log_message_bytes {
            let mut end = limits.max_log_message_bytes;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push_str(" …[truncated]");
            cut = true;
        }
        let room = limits.max_log_bytes_per_call.saturating_sub(self.used);
        let fits = message.len() <= room
            && rates.take(guest, message.len(), limits.max_log_bytes_per_second) == message.len();
        if cut || !fits {
            self.limited += 1;
            if !self.warned {
                self.warned = true;
                tracing::warn!(target: "wasmctrl::guest", guest,
                    "guest log output over its budget (message {} B, call {} B, {} B/s): truncating or dropping the rest of this call's messages",
                    limits.max_log_message_bytes, limits.max_log_bytes_per_call, limits.max_log_bytes_per_second);
            }
        }
        if !fits {
            return None;
        }
        self.used += message.len();
        Some(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_log_message_bytes: 10,
            max_log_bytes_per_call: 30,
            max_log_bytes_per_second: 1000,
            ..Limits::default()
        }
    }

    #[test]
    fn a_long_log_message_is_truncated_and_counted() {
        let mut budget = LogBudget::default();
        let out = budget
            .admit("g", "x".repeat(10_000_000), &limits(), &LogRates::default())
            .unwrap();
        assert!(out.starts_with("xxxxxxxxxx …"), "{out}");
        assert!(out.len() < 40);
        assert_eq!(budget.limited, 1);
    }

    #[test]
    fn log_messages_past_the_call_budget_are_dropped() {
        let mut budget = LogBudget::default();
        let rates = LogRates::default();
        let kept = (0..10)
            .filter_map(|_| budget.admit("g", "12345678".into(), &limits(), &rates))
            .count();
        assert_eq!(kept, 3, "30 bytes per call hold three 8-byte messages");
        assert_eq!(budget.limited, 7);
    }

    #[test]
    fn the_per_second_budget_spans_calls() {
        let rates = LogRates::default();
        let limits = Limits {
            max_log_bytes_per_second: 20,
            ..limits()
        };
        let mut first = LogBudget::default();
        assert!(first
            .admit("g", "12345678".into(), &limits, &rates)
            .is_some());
        assert!(first
            .admit("g", "12345678".into(), &limits, &rates)
            .is_some());
        let mut second = LogBudget::default();
        assert!(second
            .admit("g", "12345678".into(), &limits, &rates)
            .is_none());
        assert!(
            second
                .admit("other", "12345678".into(), &limits, &rates)
                .is_some(),
            "budgets are per guest"
        );
    }

    #[test]
    fn truncation_respects_utf8_boundaries() {
        let mut budget = LogBudget::default();
        let out = budget
            .admit("g", "ééééééééé".into(), &limits(), &LogRates::default())
            .unwrap();
        assert!(out.starts_with("ééééé"), "{out}");
    }

    #[test]
    fn requeue_under_the_minimum_is_raised_to_it() {
        let mut r = Some(Duration::ZERO);
        assert!(clamp_requeue(&mut r, Duration::from_secs(1)));
        assert_eq!(r, Some(Duration::from_secs(1)));
        let mut r = Some(Duration::from_secs(5));
        assert!(!clamp_requeue(&mut r, Duration::from_secs(1)));
        assert_eq!(r, Some(Duration::from_secs(5)));
        assert!(!clamp_requeue(&mut None, Duration::from_secs(1)));
    }
}
