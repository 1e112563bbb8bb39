//! Key sharding of one guest: its per-object keys hashed into buckets,
//! each bucket a unit with its own Lease, and the gate a worker passes
//! before reconciling a key ([`Shards::admit`]).
//!
//! Owns which bucket a key is in and whether this replica may reconcile it
//! now. It never reconciles, never writes, and never decides which buckets
//! this replica leads (the coordinator does, like for whole guests).

use super::lease::{GuestLease, Running, Stop};
use super::naming::unit;
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

/// One guest's keys in `buckets` buckets, as this replica leads them.
#[derive(Debug, Clone)]
pub struct Shards {
    leases: GuestLeases,
    guest: String,
    buckets: u32,
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
        }
    }

    /// How many buckets.
    pub fn buckets(&self) -> u32 {
        self.buckets
    }

    /// The bucket of `key` (see [`bucket_of`]).
    pub fn bucket_of(&self, key: &str) -> u32 {
        bucket_of(key, self.buckets)
    }

    /// Admits `key` while this replica leads its bucket and is not handing
    /// it over; `None`: not this replica's key now (its bucket's next
    /// holder enqueues every key when it takes the bucket).
    pub fn admit(&self, key: &str) -> Option<Admitted> {
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
}
