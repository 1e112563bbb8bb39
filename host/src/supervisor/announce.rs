//! Telling the operator what happened to a guest: each load, swap,
//! refusal, wait, removal and shadow change is reported to the guests'
//! [`Statuses`] (`/guests`) and, when the change is news, recorded as an
//! Event on the host's Pod — its reason from the same [`Change`], so the
//! two never disagree. It never decides what runs.

use super::status::{Change, GuestStatus};
use super::*;

/// The longest Event note the API server accepts (`events.k8s.io/v1`).
const NOTE_MAX: usize = 1024;

impl Supervisor {
    /// Every guest's state, with the reconcile counts of the running ones.
    pub fn guests(&self) -> Vec<GuestStatus> {
        let running: BTreeMap<String, Arc<GuestController>> = lock(&self.guests)
            .iter()
            .map(|(k, g)| (k.clone(), g.controller.clone()))
            .collect();
        let mut all = self.status.all();
        for g in &mut all {
            if let Some(c) = running.get(&g.key) {
                g.reconciles = Some(c.metrics().reconciles());
                g.errors = Some(c.metrics().errors());
            }
            g.leader = self.guest_leader(&g.name);
        }
        all
    }

    /// `/guests`' answer: `{"guests": [...]}`.
    pub fn guests_json(&self) -> serde_json::Value {
        serde_json::json!({ "guests": self.guests() })
    }

    /// Reports that `version` of guest `key` (declaring `name`) is where
    /// it says, with an Event when that is news.
    pub(super) async fn announce(&self, key: &str, name: &str, version: Version) {
        let running = self
            .status
            .get(key)
            .filter(|g| g.current.state == LoadState::Loaded);
        let change = self.status.report(key, name, version.clone());
        let tried = version.label();
        let note = match change {
            Change::Loaded => format!("guest {name} loaded from {tried}"),
            Change::Swapped => format!(
                "guest {name} swapped to {tried}, replacing sha256 {}",
                running.as_ref().map_or("-", |r| r.current.short_digest())
            ),
            Change::Waiting | Change::Refused => format!(
                "guest {name} from {tried} {}: {}",
                version.state.name(),
                version.state.message().unwrap_or_default()
            ),
            Change::CandidateWaiting | Change::Rejected => format!(
                "guest {name}: the version from {tried} {}, the running one (sha256 {}) keeps running: {}",
                version.state.name(),
                running.as_ref().map_or("-", |r| r.current.short_digest()),
                version.state.message().unwrap_or_default()
            ),
            _ => return,
        };
        self.publish(change, note).await;
    }

    /// Reports the shadow beside guest `target` (its key or name; None:
    /// no shadow runs beside it any more), with an Event when that is
    /// news.
    pub(super) async fn announce_shadow(&self, target: &str, shadow: Option<Version>) {
        let change = self.status.report_shadow(target, shadow.clone());
        let note = match (&shadow, change) {
            (Some(s), Change::ShadowLoaded) => {
                format!("{} runs as the shadow of guest {target}", s.label())
            }
            (Some(s), Change::ShadowRefused) => format!(
                "the shadow {} of guest {target} {}: {}",
                s.label(),
                s.state.name(),
                s.state.message().unwrap_or_default()
            ),
            (None, Change::ShadowRemoved) => format!("the shadow of guest {target} stopped"),
            _ => return,
        };
        self.publish(change, note).await;
    }

    /// Reports that guest `key` (declaring `name`) is gone with its
    /// source: an Event when a version of it ran.
    pub(super) async fn announce_removed(&self, key: &str, name: &str, why: &str) {
        let change = self.status.remove(key);
        if change == Change::Removed {
            let note = format!("guest {name} removed ({why}); its outputs are left in place");
            self.publish(change, note).await;
        }
    }

    async fn publish(&self, change: Change, mut note: String) {
        let Some((warning, reason)) = change.event() else {
            return;
        };
        if note.len() > NOTE_MAX {
            let mut end = NOTE_MAX - '…'.len_utf8();
            while !note.is_char_boundary(end) {
                end -= 1;
            }
            note.truncate(end);
            note.push('…');
        }
        self.event(warning, reason, note).await;
    }
}

/// `tried` (a version being loaded) refused for `e`; its contract is the
/// one the error names, if any.
pub(super) fn refused(tried: Version, e: &SupervisorError) -> Version {
    let contract = match e {
        SupervisorError::Guest(GuestError {
            kind: guest::GuestErrorKind::Version { found },
            ..
        }) => Some(format!("wasmctrl:controller@{found}")),
        _ => tried.contract.clone(),
    };
    let state = LoadState::Refused {
        reason: e.reason().to_string(),
        message: e.to_string().replace('\n', " "),
    };
    Version {
        state,
        contract,
        since: chrono::Utc::now(),
        ..tried
    }
}
