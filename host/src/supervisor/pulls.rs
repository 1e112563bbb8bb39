//! Guests waiting for their registry (a guest directory entry naming an
//! OCI reference whose registry could not be reached), retried with the
//! backoff of [`super::waiting`], and what each allowed tag last resolved
//! to. It never fetches, loads or swaps anything: the supervisor's `oci`
//! does.

use std::collections::BTreeMap;
use std::sync::Mutex;

use tokio::time::Instant;

use super::guest_dir::GuestFile;
use super::waiting::retry_delay;
use crate::delivery::DeliveryError;
use crate::sync::lock;

/// A guest whose registry could not be reached, retried with backoff.
pub struct PendingPull {
    /// The guest directory entry's digest (a changed entry is tried at once).
    pub digest: String,
    /// The last failure.
    pub why: String,
    /// Whether a version of the guest runs meanwhile.
    pub runs: bool,
    attempts: u32,
    next: Instant,
}

/// The guests waiting for their registry, by key.
#[derive(Default)]
pub struct PendingPulls {
    pulls: Mutex<BTreeMap<String, PendingPull>>,
}

impl PendingPulls {
    /// Records a failed attempt for `key` (backoff doubles per attempt of
    /// the same entry; a changed entry starts over).
    /// Returns the attempt's number (0: the first failure of this entry).
    pub fn failed(&self, key: &str, digest: &str, runs: bool, e: &DeliveryError) -> u32 {
        let mut pulls = lock(&self.pulls);
        let attempts = pulls
            .get(key)
            .filter(|p| p.digest == digest)
            .map_or(0, |p| p.attempts.saturating_add(1));
        let delay = retry_delay(attempts);
        tracing::warn!(guest = %key, reason = e.reason(), "guest waits for its registry: {e}; retrying in {delay:?}");
        pulls.insert(
            key.to_string(),
            PendingPull {
                digest: digest.to_string(),
                why: e.to_string(),
                runs,
                attempts,
                next: Instant::now() + delay,
            },
        );
        attempts
    }

    /// Keeps only the entries whose guest directory entry is unchanged.
    pub fn retain_current(&self, files: &BTreeMap<String, GuestFile>) {
        lock(&self.pulls).retain(|k, p| files.get(k).is_some_and(|f| f.digest == p.digest));
    }

    /// Ends `key`'s wait.
    pub fn remove(&self, key: &str) {
        lock(&self.pulls).remove(key);
    }

    /// `(key, digest)` of the entries not due yet: current, as far as a
    /// rescan is concerned.
    pub fn not_due(&self) -> Vec<(String, String)> {
        let now = Instant::now();
        lock(&self.pulls)
            .iter()
            .filter(|(_, p)| p.next > now)
            .map(|(k, p)| (k.clone(), p.digest.clone()))
            .collect()
    }

    /// When the next retry is due.
    pub fn next_retry(&self) -> Option<Instant> {
        lock(&self.pulls).values().map(|p| p.next).min()
    }

    /// `(key, why)` of one guest of which no version runs while it waits.
    pub fn any_not_running(&self) -> Option<(String, String)> {
        lock(&self.pulls)
            .iter()
            .find(|(_, p)| !p.runs)
            .map(|(k, p)| (k.clone(), p.why.clone()))
    }

    /// Whether no guest waits for its registry.
    pub fn is_empty(&self) -> bool {
        lock(&self.pulls).is_empty()
    }
}

/// The last digest a tag resolved to, and when.
pub type ResolvedTags = Mutex<BTreeMap<String, (String, Instant)>>;

#[cfg(test)]
mod tests {
    use super::*;

    fn unreachable() -> DeliveryError {
        DeliveryError::Unreachable {
            reference: "oci://r.io/g@sha256:0".into(),
            detail: "connection refused".into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_guest_is_due_after_a_doubling_delay_and_a_changed_entry_starts_over() {
        let pulls = PendingPulls::default();
        assert_eq!(pulls.failed("g", "d1", false, &unreachable()), 0);
        assert_eq!(pulls.not_due().len(), 1, "not due before its first second");
        tokio::time::advance(retry_delay(0)).await;
        assert!(pulls.not_due().is_empty(), "due after one second");
        assert_eq!(pulls.failed("g", "d1", false, &unreachable()), 1);
        tokio::time::advance(retry_delay(0)).await;
        assert_eq!(pulls.not_due().len(), 1, "the second wait is longer");
        assert_eq!(pulls.failed("g", "d2", false, &unreachable()), 0);
        let (guest, why) = pulls.any_not_running().unwrap();
        assert!(guest == "g" && why.contains("connection refused"), "{why}");
        pulls.failed("g", "d2", true, &unreachable());
        assert!(
            pulls.any_not_running().is_none(),
            "a running version keeps the host ready"
        );
    }
}
