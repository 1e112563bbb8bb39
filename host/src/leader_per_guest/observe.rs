//! What the Leases of a group show, judged the client-go way: a holder's
//! Lease lasts `leaseDurationSeconds` from the moment *this replica* last
//! saw its record change, never by comparing `renewTime` with the local
//! clock.
//!
//! Owns the last record seen of every Lease of the group and when it last
//! changed. It never reads or writes the API server itself (it is fed the
//! result of one LIST per round) and never decides anything.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use tokio::time::Instant;

use super::naming::{ROLE_LABEL, ROLE_REPLICA};

/// One Lease as last seen.
#[derive(Debug, Clone)]
struct Seen {
    lease: Lease,
    spec: LeaseSpec,
    role: String,
    /// When its record last changed, by the local clock.
    changed: Instant,
}

impl Seen {
    fn holder(&self) -> Option<&str> {
        self.spec
            .holder_identity
            .as_deref()
            .filter(|h| !h.is_empty())
    }

    fn valid(&self, now: Instant) -> bool {
        let secs = u64::try_from(self.spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0);
        self.holder().is_some() && self.changed + Duration::from_secs(secs) > now
    }
}

/// The Leases of one group, by name.
#[derive(Debug, Default)]
pub(super) struct Observer {
    seen: BTreeMap<String, Seen>,
}

impl Observer {
    /// Takes in one LIST of the group's Leases, seen at `now`. A Lease that
    /// is gone from the list is forgotten.
    pub(super) fn update(&mut self, leases: Vec<Lease>, now: Instant) {
        let mut next = BTreeMap::new();
        for lease in leases {
            let Some(name) = lease.metadata.name.clone() else {
                continue;
            };
            let labels = lease.metadata.labels.clone().unwrap_or_default();
            let spec = lease.spec.clone().unwrap_or_default();
            let changed = match self.seen.remove(&name) {
                Some(old) if old.spec == spec => old.changed,
                _ => now,
            };
            let seen = Seen {
                lease,
                spec,
                role: labels.get(ROLE_LABEL).cloned().unwrap_or_default(),
                changed,
            };
            next.insert(name, seen);
        }
        self.seen = next;
    }

    /// How many replicas' presence Leases are held and not expired.
    pub(super) fn live_replicas(&self, now: Instant) -> usize {
        self.seen
            .values()
            .filter(|s| s.role == ROLE_REPLICA && s.valid(now))
            .count()
    }

    /// The identities holding replicas' presence Leases not expired, but
    /// those whose hold of any Lease has expired (a replica renews all its
    /// Leases alike: one expired says it stopped, before its presence
    /// Lease does).
    pub(super) fn live_identities(&self, now: Instant) -> BTreeSet<String> {
        let stopped: BTreeSet<&str> = self
            .seen
            .values()
            .filter(|s| !s.valid(now))
            .filter_map(Seen::holder)
            .collect();
        self.seen
            .values()
            .filter(|s| s.role == ROLE_REPLICA && s.valid(now))
            .filter_map(Seen::holder)
            .filter(|h| !stopped.contains(h))
            .map(String::from)
            .collect()
    }

    /// The Lease `name` as last listed, and since when (by the local clock)
    /// its record has not changed.
    pub(super) fn seen(&self, name: &str) -> Option<(Lease, Instant)> {
        self.seen.get(name).map(|s| (s.lease.clone(), s.changed))
    }

    /// The holder of the Lease `name`, if it is held and not expired (None:
    /// absent, released or expired, so free to take).
    pub(super) fn holder(&self, name: &str, now: Instant) -> Option<&str> {
        self.seen
            .get(name)
            .filter(|s| s.valid(now))
            .and_then(Seen::holder)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::leader_per_guest::naming::ROLE_GUEST;

    fn lease(name: &str, role: &str, holder: &str, renewed: i32) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([(ROLE_LABEL.to_string(), role.to_string())].into()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                lease_duration_seconds: Some(10),
                lease_transitions: Some(renewed),
                ..LeaseSpec::default()
            }),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_expires_by_the_local_clock_after_its_record_stops_changing() {
        let mut o = Observer::default();
        let t0 = Instant::now();
        o.update(vec![lease("r-a", ROLE_REPLICA, "a", 1)], t0);
        assert_eq!(o.live_replicas(t0), 1);
        // Seen again unchanged: the clock keeps running from the first sight.
        tokio::time::advance(Duration::from_secs(9)).await;
        o.update(vec![lease("r-a", ROLE_REPLICA, "a", 1)], Instant::now());
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(o.live_replicas(Instant::now()), 0);
        // A change (a renewal) makes it valid again for a full duration.
        o.update(vec![lease("r-a", ROLE_REPLICA, "a", 2)], Instant::now());
        assert_eq!(o.live_replicas(Instant::now()), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_replica_whose_guest_lease_expired_is_not_live_though_its_presence_still_is() {
        let mut o = Observer::default();
        let t0 = Instant::now();
        o.update(
            vec![
                lease("r-a", ROLE_REPLICA, "a", 1),
                lease("r-b", ROLE_REPLICA, "b", 1),
                lease("g-x", ROLE_GUEST, "a", 1),
            ],
            t0,
        );
        assert_eq!(o.live_identities(t0), ["a", "b"].map(String::from).into());
        // a's guest Lease stops changing first; its presence Lease was last
        // renewed later, so it is still valid.
        tokio::time::advance(Duration::from_secs(5)).await;
        let renewed = vec![
            lease("r-a", ROLE_REPLICA, "a", 2),
            lease("r-b", ROLE_REPLICA, "b", 2),
            lease("g-x", ROLE_GUEST, "a", 1),
        ];
        o.update(renewed, Instant::now());
        tokio::time::advance(Duration::from_secs(6)).await;
        let now = Instant::now();
        assert_eq!(o.live_replicas(now), 2, "both presence Leases valid");
        assert_eq!(o.live_identities(now), ["b"].map(String::from).into());
    }

    #[tokio::test(start_paused = true)]
    async fn a_released_or_vanished_lease_is_free_at_once() {
        let mut o = Observer::default();
        let now = Instant::now();
        o.update(vec![lease("g-x", ROLE_GUEST, "a", 1)], now);
        assert_eq!(o.holder("g-x", now), Some("a"));
        o.update(vec![lease("g-x", ROLE_GUEST, "", 1)], now);
        assert_eq!(o.holder("g-x", now), None);
        o.update(vec![], now);
        assert_eq!(o.holder("g-x", now), None);
    }
}
