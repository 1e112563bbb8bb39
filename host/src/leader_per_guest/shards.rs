//! Key sharding of one guest: its per-object keys hashed into buckets,
//! each bucket a unit with its own Lease, the gate a worker passes before
//! reconciling a key ([`Shards::admit`]), and the bucket label
//! ([`Shards::label`]) by which a replica caches only the buckets it leads.
//!
//! Owns which bucket a key is in, whether this replica may reconcile it
//! now, which buckets a controller caches, and the label and selectors
//! that say so to the API server. It never reconciles, never writes, and
//! never decides which buckets this replica leads (the coordinator does,
//! like for whole guests).

use std::collections::BTreeSet;
use std::sync::Arc;

use super::lease::{GuestLease, Running, Stop};
use super::naming::{dns_label, unit};
use super::GuestLeases;

/// The bucket of `key` (`namespace/name`, or `name`) among `buckets`:
/// FNV-1a of the key, the same on every replica and every version of the
/// host.
pub fn bucket_of(key: &str, buckets: u32) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    u32::try_from(h % u64::from(buckets.max(1))).unwrap_or(0)
}

/// The prefix of a sharded guest's bucket label: `shard.wasmctrl.dev/GUEST`
/// (the guest's name as a DNS-1123 label).
pub const SHARD_LABEL_PREFIX: &str = "shard.wasmctrl.dev/";

/// One guest's keys in `buckets` buckets, as this replica leads them.
#[derive(Debug, Clone)]
pub struct Shards {
    leases: GuestLeases,
    guest: String,
    buckets: u32,
    label: Arc<str>,
    /// The buckets whose objects the controller caches (selected by their
    /// label); None: it caches every object, labelled or not (warm
    /// standby).
    cached: Option<Arc<BTreeSet<u32>>>,
}

/// A key admitted: its bucket's lead, held while the key is reconciled
/// (the bucket is not released while any such key runs).
#[derive(Debug)]
pub struct Admitted {
    lease: GuestLease,
    _running: Running,
}

impl Admitted {
    /// Resolves when the bucket's Lease is lost: the reconcile must stop
    /// at once (its future dropped), before another replica can take the
    /// bucket. A handover does not resolve it: the key finishes, then the
    /// bucket is released.
    pub async fn until_lost(&self) -> Stop {
        self.lease.until_lost().await
    }
}

impl Shards {
    /// The keys of `guest` in `buckets` buckets (at least 1).
    pub fn new(leases: GuestLeases, guest: &str, buckets: u32) -> Self {
        Shards {
            leases,
            guest: guest.to_string(),
            buckets: buckets.max(1),
            label: format!("{SHARD_LABEL_PREFIX}{}", dns_label(guest)).into(),
            cached: None,
        }
    }

    /// The same sharding, its controller caching only the objects labelled
    /// with one of `buckets` (see [`Shards::selecting`]).
    #[must_use]
    pub fn caching(mut self, buckets: BTreeSet<u32>) -> Self {
        self.cached = Some(Arc::new(buckets));
        self
    }

    /// The buckets whose objects its controller caches; None: every object.
    pub fn cached(&self) -> Option<&BTreeSet<u32>> {
        self.cached.as_deref()
    }

    /// The label every object of a key carries when the guest's caches are
    /// selected by bucket: `shard.wasmctrl.dev/GUEST`.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The value of [`Shards::label`] on the objects of `bucket`:
    /// `B-of-N`, so that a change of the number of buckets makes every
    /// old label a wrong one.
    pub fn label_value(&self, bucket: u32) -> String {
        format!("{bucket}-of-{}", self.buckets)
    }

    /// The value of [`Shards::label`] on the objects of `key`.
    pub fn value_of(&self, key: &str) -> String {
        self.label_value(self.bucket_of(key))
    }

    /// The label selector term selecting the objects of the cached
    /// buckets (`LABEL in (B-of-N,…)`); None when every object is cached
    /// or no bucket is (no valid selector says "nothing").
    pub fn selecting(&self) -> Option<String> {
        let cached = self.cached.as_deref()?;
        if cached.is_empty() {
            return None;
        }
        let values: Vec<String> = cached.iter().map(|b| self.label_value(*b)).collect();
        Some(format!("{} in ({})", self.label, values.join(",")))
    }

    /// The label selector term selecting the objects whose label is
    /// missing or names no bucket of this sharding (`LABEL notin
    /// (0-of-N,…)`): those a bucket's holder labels.
    pub fn unlabelled(&self) -> String {
        let values: Vec<String> = (0..self.buckets).map(|b| self.label_value(b)).collect();
        format!("{} notin ({})", self.label, values.join(","))
    }

    /// Whether this replica leads the bucket of `key` now.
    pub fn leads(&self, key: &str) -> bool {
        self.leases
            .lease_of_unit(&unit(&self.guest, Some(self.bucket_of(key))))
            .is_some()
    }

    /// Whether the controller caches the objects of `key`'s bucket.
    pub fn caches(&self, key: &str) -> bool {
        self.cached
            .as_deref()
            .is_none_or(|c| c.contains(&self.bucket_of(key)))
    }

    /// How many buckets.
    pub fn buckets(&self) -> u32 {
        self.buckets
    }

    /// The bucket of `key` (see [`bucket_of`]).
    pub fn bucket_of(&self, key: &str) -> u32 {
        bucket_of(key, self.buckets)
    }

    /// Admits `key` while this replica leads its bucket, is not handing it
    /// over, and its controller caches the bucket; `None`: not this
    /// replica's key now (its bucket's next holder looks at every key of
    /// the bucket when it takes it).
    pub fn admit(&self, key: &str) -> Option<Admitted> {
        if !self.caches(key) {
            return None;
        }
        let bucket = self.bucket_of(key);
        let lease = self
            .leases
            .lease_of_unit(&unit(&self.guest, Some(bucket)))?;
        // Taken before the check, as [`GuestLease::run`] says.
        let running = lease.run();
        lease.is_leader().then_some(Admitted {
            lease,
            _running: running,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_falls_in_one_stable_bucket_within_range() {
        let shards = Shards::new(GuestLeases::detached(), "app", 4);
        let mut seen = [0u32; 4];
        for i in 0..1000 {
            let key = format!("ns/app-{i}");
            let b = shards.bucket_of(&key);
            assert_eq!(b, shards.bucket_of(&key));
            seen[usize::try_from(b).unwrap()] += 1;
        }
        assert!(seen.iter().all(|n| *n > 150), "{seen:?}");
        // Pinned: a host of another version must agree on every bucket.
        assert_eq!(shards.bucket_of("default/a"), 2);
        assert_eq!(
            Shards::new(GuestLeases::detached(), "app", 16).bucket_of("default/a"),
            6
        );
        assert_eq!(Shards::new(GuestLeases::detached(), "g", 0).buckets(), 1);
        assert!(shards.admit("ns/app-1").is_none(), "no bucket is led");
    }

    #[test]
    fn the_bucket_label_selects_the_cached_buckets_and_finds_the_unlabelled() {
        let shards = Shards::new(GuestLeases::detached(), "guest-app", 4);
        assert_eq!(shards.label(), "shard.wasmctrl.dev/guest-app");
        assert_eq!(shards.value_of("default/a"), "2-of-4");
        assert_eq!(shards.selecting(), None, "warm: every object");
        assert!(shards.caches("default/a"));
        let cold = shards.clone().caching(BTreeSet::from([0, 2]));
        assert_eq!(
            cold.selecting().as_deref(),
            Some("shard.wasmctrl.dev/guest-app in (0-of-4,2-of-4)")
        );
        assert!(cold.caches("default/a"));
        for key in ["default/b", "x/y", "q"] {
            assert_eq!(
                cold.caches(key),
                cold.bucket_of(key).is_multiple_of(2),
                "{key}"
            );
        }
        assert_eq!(
            shards.unlabelled(),
            "shard.wasmctrl.dev/guest-app notin (0-of-4,1-of-4,2-of-4,3-of-4)"
        );
        assert_eq!(shards.clone().caching(BTreeSet::new()).selecting(), None);
        // A guest's name that is no label is made one.
        let odd = Shards::new(GuestLeases::detached(), "Guest_App", 4);
        let name = odd.label().strip_prefix(SHARD_LABEL_PREFIX).unwrap();
        assert!(super::super::naming::is_dns_label(name), "{name}");
        // Both selectors parse as the API server parses them.
        for s in [cold.selecting().unwrap(), shards.unlabelled()] {
            wasmctrl_kube_rules::selector::LabelSelector::parse(&s).expect(&s);
        }
    }
}
