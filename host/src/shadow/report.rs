//! A shadow's report: counts by outcome, the first keys seen differing
//! with a compact diff, the latest errors and dry-run refusals, as JSON
//! (what `/shadow/GUEST` serves). Bounded: it keeps a fixed number of
//! keys and errors whatever the cluster's size.

use std::collections::HashSet;

use serde_json::{json, Value as Json};

use super::compare::{shorten, Diff};
use crate::request::RequestKey;

/// Differing keys kept in the report (the first ones).
const DIFFERENCES_KEPT: usize = 20;
/// Errors kept in the report (the latest ones).
const ERRORS_KEPT: usize = 20;

/// A shadow's report.
#[derive(Debug)]
pub(super) struct Report {
    pub(super) guest: String,
    pub(super) file: String,
    pub(super) same: u64,
    pub(super) differs: u64,
    pub(super) errors: u64,
    pub(super) skipped: u64,
    /// The first keys seen differing, with their latest diff.
    pub(super) differing: Vec<(String, Diff)>,
    /// How many distinct keys differed (beyond those kept too).
    pub(super) differing_keys: u64,
    pub(super) seen_differing: HashSet<String>,
    pub(super) recent_errors: Vec<(String, String)>,
    /// Differing writes sent as dry runs, and the latest refusals.
    pub(super) dry_runs: u64,
    pub(super) dry_run_refusals: u64,
    pub(super) recent_refusals: Vec<(String, String)>,
}

impl Report {
    pub(super) fn new(guest: String, file: &str) -> Self {
        Report {
            guest,
            file: file.to_string(),
            same: 0,
            differs: 0,
            errors: 0,
            skipped: 0,
            differing: Vec::new(),
            differing_keys: 0,
            seen_differing: HashSet::new(),
            recent_errors: Vec::new(),
            dry_runs: 0,
            dry_run_refusals: 0,
            recent_refusals: Vec::new(),
        }
    }

    pub(super) fn dry_run_refused(&mut self, key: &RequestKey, why: String) {
        self.dry_run_refusals += 1;
        if self.recent_refusals.len() >= ERRORS_KEPT {
            self.recent_refusals.remove(0);
        }
        self.recent_refusals
            .push((key.key.to_string(), shorten(why)));
    }

    /// Records `key` differing; true when it is a key not seen differing
    /// before. Only [`DIFFERENCES_KEPT`] keys' diffs are kept (bounded
    /// memory: the set of keys seen is bounded by the same number, and
    /// later ones are only counted).
    pub(super) fn differ(&mut self, key: &RequestKey, diff: Diff) -> bool {
        let k = key.key.to_string();
        if let Some(kept) = self.differing.iter_mut().find(|(d, _)| *d == k) {
            kept.1 = diff;
            return false;
        }
        if self.differing.len() < DIFFERENCES_KEPT {
            self.differing.push((k.clone(), diff));
        }
        if self.seen_differing.len() >= 4 * DIFFERENCES_KEPT {
            // Beyond the keys kept, every difference counts as new once in
            // a while: the set is bounded, not exact.
            self.seen_differing.clear();
        }
        let new = self.seen_differing.insert(k);
        if new {
            self.differing_keys += 1;
        }
        new
    }

    pub(super) fn error(&mut self, key: &RequestKey, why: String) {
        if self.recent_errors.len() >= ERRORS_KEPT {
            self.recent_errors.remove(0);
        }
        self.recent_errors.push((key.key.to_string(), shorten(why)));
    }

    pub(super) fn to_json(&self) -> Json {
        json!({
            "guest": self.guest,
            "shadow": self.file,
            "same": self.same,
            "differs": self.differs,
            "errors": self.errors,
            "skipped": self.skipped,
            "differing_keys": self.differing_keys,
            "differences": self.differing.iter().map(|(key, d)| json!({
                "key": key,
                "active_only": d.active_only,
                "shadow_only": d.shadow_only,
            })).collect::<Vec<_>>(),
            "recent_errors": self.recent_errors.iter().map(|(key, why)| json!({
                "key": key, "error": why,
            })).collect::<Vec<_>>(),
            "dry_runs": self.dry_runs,
            "dry_run_refusals": self.dry_run_refusals,
            "recent_dry_run_refusals": self.recent_refusals.iter().map(|(key, why)| json!({
                "key": key, "error": why,
            })).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shadow::compare::SHOWN_BYTES;

    #[test]
    fn the_report_keeps_the_first_differing_keys_and_counts_the_rest() {
        let mut r = Report::new("g".into(), "g.shadow.wasm");
        let d = Diff {
            active_only: vec!["a".into()],
            shadow_only: vec![],
        };
        for i in 0..(DIFFERENCES_KEPT + 5) {
            let key = RequestKey::aggregate(format!("k{i}").as_str());
            assert!(r.differ(&key, d.clone()), "key {i} is new");
            assert!(!r.differ(&key, d.clone()), "key {i} again");
        }
        assert_eq!(r.differing.len(), DIFFERENCES_KEPT);
        assert_eq!(r.differing_keys, (DIFFERENCES_KEPT + 5) as u64);
        let long = "x".repeat(5000);
        r.error(&RequestKey::aggregate("k"), long);
        assert!(r.recent_errors[0].1.len() <= SHOWN_BYTES + '…'.len_utf8());
    }
}
