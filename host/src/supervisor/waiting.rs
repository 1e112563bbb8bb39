//! Guests waiting for a kind the API server does not serve yet — a custom
//! resource whose CRD is not installed — and when to look again.
//!
//! Owns the set of waiting guests (by key, as the supervisor keys guests)
//! and their retry schedule: [`RETRY_FIRST`], doubling, capped at
//! [`RETRY_MAX`]. It never starts a guest and never asks the API server
//! anything: the supervisor retries what [`Waiting::take_due`] hands back
//! and puts it back with [`Waiting::retry_later`] while the kind is still
//! missing.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use crate::controller::{ControllerError, DescribedGuest};
use crate::metrics::GuestLabels;
use crate::sync::lock;

/// First retry of a guest waiting for a kind.
pub const RETRY_FIRST: Duration = Duration::from_secs(1);
/// The retry interval doubles up to this.
pub const RETRY_MAX: Duration = Duration::from_secs(30);

/// The delay after failed retry number `attempt` (0 for the first wait):
/// [`RETRY_FIRST`], doubling, capped at [`RETRY_MAX`].
pub fn retry_delay(attempt: u32) -> Duration {
    RETRY_FIRST
        .saturating_mul(2u32.saturating_pow(attempt.min(16)))
        .min(RETRY_MAX)
}

/// What a guest waiting for `kind` waits for, for a person (`/readyz`,
/// `/guests`).
pub fn waiting_for(kind: &str) -> String {
    format!("waiting for {kind} to be served (is its CRD installed?)")
}

/// A started controller, or the kind it needs that the API server does not
/// serve yet (`Ok(Err(kind))`: the guest can wait for it); any other
/// failure — a permission the host lacks, an unreachable server — stays an
/// error.
pub fn or_wait<T>(
    started: Result<T, ControllerError>,
) -> Result<Result<T, String>, ControllerError> {
    match started {
        Ok(c) => Ok(Ok(c)),
        Err(e) => match e.kind_not_served() {
            Some(kind) => Ok(Err(kind.to_string())),
            None => Err(e),
        },
    }
}

/// A described guest that needs a kind the API server does not serve yet.
pub struct WaitingGuest {
    /// Where it came from (a path), for logs and duplicate-name errors.
    pub source: String,
    /// Its file digest (empty for `--guest` files).
    pub digest: String,
    /// What it declared, ready to start.
    pub described: DescribedGuest,
    /// The kind discovery could not find, as `group/version/Kind`.
    pub kind: String,
    attempts: u32,
    next: Instant,
}

impl WaitingGuest {
    /// A guest that starts waiting now for `kind`.
    pub fn new(source: String, digest: String, described: DescribedGuest, kind: String) -> Self {
        WaitingGuest {
            source,
            digest,
            described,
            kind,
            attempts: 0,
            next: Instant::now() + retry_delay(0),
        }
    }

    /// The guest's declared name.
    pub fn name(&self) -> &str {
        &self.described.manifest.name
    }
}

/// The waiting guests of one host process.
#[derive(Default)]
pub struct Waiting {
    guests: Mutex<BTreeMap<String, WaitingGuest>>,
    /// `wasmctrl_guest_waiting{guest}`, kept in step with `guests`.
    gauge: Family<GuestLabels, Gauge>,
}

impl Waiting {
    /// No guest waiting yet; `gauge` shows who waits.
    pub fn new(gauge: Family<GuestLabels, Gauge>) -> Self {
        Waiting {
            guests: Mutex::default(),
            gauge,
        }
    }

    fn show(&self, w: &WaitingGuest, waits: bool) {
        self.gauge
            .get_or_create(&GuestLabels {
                guest: w.name().to_string(),
            })
            .set(i64::from(waits));
    }

    /// Starts (or replaces) `key`'s wait, with a log line naming the kind.
    pub fn wait(&self, key: String, w: WaitingGuest) {
        tracing::warn!(guest = %w.name(), kind = %w.kind, path = %w.source, "guest waits: the API server does not serve {} (is its CRD installed?); retrying in {:?}", w.kind, retry_delay(0));
        self.show(&w, true);
        lock(&self.guests).insert(key, w);
    }

    /// Puts back a guest whose retry found `kind` still missing, due after
    /// the next, longer delay.
    pub fn retry_later(&self, key: String, mut w: WaitingGuest, kind: String) {
        w.kind = kind;
        w.attempts = w.attempts.saturating_add(1);
        let delay = retry_delay(w.attempts);
        w.next = Instant::now() + delay;
        tracing::info!(guest = %w.name(), kind = %w.kind, "guest still waits for {}; retrying in {delay:?}", w.kind);
        self.show(&w, true);
        lock(&self.guests).insert(key, w);
    }

    /// Removes and returns every guest due for a retry.
    pub fn take_due(&self) -> Vec<(String, WaitingGuest)> {
        let now = Instant::now();
        let mut guests = lock(&self.guests);
        let due: Vec<String> = guests
            .iter()
            .filter(|(_, w)| w.next <= now)
            .map(|(k, _)| k.clone())
            .collect();
        let due: Vec<(String, WaitingGuest)> = due
            .into_iter()
            .filter_map(|k| guests.remove(&k).map(|w| (k, w)))
            .collect();
        for (_, w) in &due {
            self.show(w, false);
        }
        due
    }

    /// Ends `key`'s wait.
    pub fn remove(&self, key: &str) -> Option<WaitingGuest> {
        let w = lock(&self.guests).remove(key);
        if let Some(w) = &w {
            self.show(w, false);
        }
        w
    }

    /// When the next retry is due, if any guest waits.
    pub fn next_retry(&self) -> Option<Instant> {
        lock(&self.guests).values().map(|w| w.next).min()
    }

    /// `(key, digest)` of every waiting guest loaded from the guest
    /// directory.
    pub fn digests(&self) -> Vec<(String, String)> {
        lock(&self.guests)
            .iter()
            .filter(|(_, w)| !w.digest.is_empty())
            .map(|(k, w)| (k.clone(), w.digest.clone()))
            .collect()
    }

    /// The source of the waiting guest named `name`, if one is.
    pub fn source_of(&self, name: &str) -> Option<String> {
        lock(&self.guests)
            .values()
            .find(|w| w.name() == name)
            .map(|w| w.source.clone())
    }

    /// `(key, manifest)` of every waiting guest.
    pub fn manifests(&self) -> Vec<(String, crate::guest::GuestManifest)> {
        lock(&self.guests)
            .iter()
            .map(|(k, w)| (k.clone(), w.described.manifest.clone()))
            .collect()
    }

    /// Whether no guest waits.
    pub fn is_empty(&self) -> bool {
        lock(&self.guests).is_empty()
    }

    /// `(guest, kind)` of one waiting guest, if any waits.
    pub fn any(&self) -> Option<(String, String)> {
        lock(&self.guests)
            .values()
            .next()
            .map(|w| (w.name().to_string(), w.kind.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_start_at_one_second_double_and_stop_growing_at_thirty() {
        let delays: Vec<u64> = (0..8).map(|a| retry_delay(a).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(retry_delay(u32::MAX), RETRY_MAX);
    }
}
