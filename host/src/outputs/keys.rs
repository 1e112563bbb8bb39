//! One shared copy of each output's [`ObjectKey`] for the write path's
//! bookkeeping.
//!
//! Owns interning keys: the contests, the echoes, the producers and the
//! hot-loop records key their entries by the same `Arc`, not each by its
//! own copy of the key's five strings (about 250 bytes per map per written
//! object: 19 MB at 10,000 Apps, BENCHMARKS.md). It never decides what a
//! map keeps: a key the interner alone still holds is dropped at its next
//! sweep.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crate::guest::ObjectKey;
use crate::sync::lock;

/// Sweeps never run below this many keys.
const SWEEP_FLOOR: usize = 1024;

/// The interned keys of one guest's outputs.
#[derive(Debug, Default)]
pub struct Keys(Mutex<Interned>);

#[derive(Debug, Default)]
struct Interned {
    keys: HashSet<Arc<ObjectKey>>,
    /// The next sweep runs when this many keys are interned.
    sweep_at: usize,
}

impl Keys {
    /// The shared copy of `key`.
    pub fn get(&self, key: &ObjectKey) -> Arc<ObjectKey> {
        let mut i = lock(&self.0);
        if let Some(k) = i.keys.get(key) {
            return k.clone();
        }
        if i.keys.len() >= i.sweep_at.max(SWEEP_FLOOR) {
            // Keys no map holds any more (their objects were deleted and
            // forgotten): amortised, as the next sweep waits for twice as
            // many keys as this one kept.
            i.keys.retain(|k| Arc::strong_count(k) > 1);
            i.sweep_at = i.keys.len() * 2;
        }
        let k = Arc::new(key.clone());
        i.keys.insert(k.clone());
        k
    }

    /// How many keys are interned.
    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.0).keys.len()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::guest::Gvk;

    fn key(name: &str) -> ObjectKey {
        ObjectKey {
            gvk: Gvk::from_api_version("v1", "ConfigMap"),
            namespace: Some("apps".into()),
            name: name.into(),
        }
    }

    #[test]
    fn one_copy_per_key_and_keys_no_map_holds_are_swept() {
        let keys = Keys::default();
        let a = keys.get(&key("a"));
        assert!(Arc::ptr_eq(&a, &keys.get(&key("a"))), "shared");
        let held: Vec<_> = (0..SWEEP_FLOOR / 2)
            .map(|i| keys.get(&key(&format!("held-{i}"))))
            .collect();
        for i in 0..SWEEP_FLOOR {
            drop(keys.get(&key(&format!("dropped-{i}"))));
        }
        // What maps hold: `a` and `held`. A sweep keeps those, and the
        // next waits for twice as many keys (or the floor).
        let bound = (2 * (held.len() + 1)).max(SWEEP_FLOOR) + 1;
        assert!(keys.len() <= bound, "swept: {}", keys.len());
        assert!(Arc::ptr_eq(&a, &keys.get(&key("a"))), "a held key stays");
        assert!(held.iter().all(|k| Arc::strong_count(k) == 2));
        let before = keys.len();
        for i in 0..before * 3 {
            drop(keys.get(&key(&format!("later-{i}"))));
        }
        assert!(keys.len() <= bound, "still bounded: {}", keys.len());
    }
}
