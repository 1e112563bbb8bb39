//! Sharing what cached objects repeat: strings (node names, phases,
//! quantities, namespaces) and controller owner references (the pods of
//! one ReplicaSet), one copy each, dropped once no cached object holds it.
//! It never decides what is interned.

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Arc;

use super::owner::OwnerRef;

/// Values of one kind held before an interner sweeps them on its own (see
/// [`Interner::intern`]).
pub const MIN_SWEEP: usize = 4096;

/// One set of shared values, swept once it has doubled since its last
/// sweep.
#[derive(Debug)]
struct Shared<T: ?Sized> {
    set: HashSet<Arc<T>>,
    /// Values held after the last sweep.
    swept: usize,
}

impl<T: ?Sized> Default for Shared<T> {
    fn default() -> Self {
        Shared {
            set: HashSet::new(),
            swept: 0,
        }
    }
}

impl<T: ?Sized + Hash + Eq> Shared<T> {
    /// The shared copy of the value `key` stands for, if one is held.
    fn find<Q>(&self, key: &Q) -> Option<Arc<T>>
    where
        Arc<T>: std::borrow::Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        self.set.get(key).cloned()
    }

    /// Holds `value` (none equal to it is held); sweeps first once the set
    /// has doubled since the last sweep (and holds at least [`MIN_SWEEP`]).
    fn insert(&mut self, value: Arc<T>) -> Arc<T> {
        if self.set.len() >= MIN_SWEEP.max(2 * self.swept) {
            self.sweep();
        }
        self.set.insert(value.clone());
        value
    }

    fn sweep(&mut self) {
        self.set.retain(|s| Arc::strong_count(s) > 1);
        self.swept = self.set.len();
    }
}

/// Deduplicates what cached objects hold (node names, phases, quantities,
/// namespaces and owners repeat across thousands of objects).
#[derive(Debug, Default)]
pub struct Interner {
    strings: Shared<str>,
    owners: Shared<OwnerRef>,
}

impl Interner {
    /// The shared copy of `s`. Once the set has doubled since the last
    /// sweep (and holds at least [`MIN_SWEEP`]), it sweeps first: a watch
    /// replacing objects brings new strings (resourceVersions, times) and
    /// leaves its predecessors' unreferenced, and between relists nothing
    /// else would drop them. Amortized O(1) per call.
    pub fn intern(&mut self, s: &str) -> Arc<str> {
        match self.strings.find(s) {
            Some(found) => found,
            None => self.strings.insert(Arc::from(s)),
        }
    }

    /// The shared copy of `owner` (made of interned strings), swept like
    /// the strings.
    pub fn intern_owner(&mut self, owner: OwnerRef) -> Arc<OwnerRef> {
        match self.owners.find(&owner) {
            Some(found) => found,
            None => self.owners.insert(Arc::new(owner)),
        }
    }

    /// Drops what no cached object references any more.
    pub fn sweep(&mut self) {
        self.strings.sweep();
        self.owners.sweep();
    }

    /// Number of distinct strings held.
    pub fn len(&self) -> usize {
        self.strings.set.len()
    }

    /// Whether no strings are held.
    pub fn is_empty(&self) -> bool {
        self.strings.set.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(interner: &mut Interner, uid: &str) -> OwnerRef {
        OwnerRef {
            api_version: interner.intern("apps/v1"),
            kind: interner.intern("ReplicaSet"),
            name: interner.intern("rs"),
            uid: interner.intern(uid),
        }
    }

    #[test]
    fn equal_owners_are_shared_and_unused_ones_swept() {
        let mut i = Interner::default();
        let a = owner(&mut i, "u1");
        let a = i.intern_owner(a);
        let again = owner(&mut i, "u1");
        assert!(Arc::ptr_eq(&a, &i.intern_owner(again)));
        let other = owner(&mut i, "u2");
        let b = i.intern_owner(other);
        assert!(!Arc::ptr_eq(&a, &b));
        drop(b);
        i.sweep();
        assert_eq!(i.owners.set.len(), 1, "only the owner still held");
        let again = owner(&mut i, "u1");
        assert!(Arc::ptr_eq(&a, &i.intern_owner(again)), "kept");
    }

    #[test]
    fn owners_replaced_without_end_stay_bounded() {
        let mut i = Interner::default();
        let mut held = Vec::new();
        for n in 0..100_000 {
            let o = owner(&mut i, &format!("u{n}"));
            held.push(i.intern_owner(o));
            if held.len() > 100 {
                held.remove(0);
            }
        }
        assert!(
            i.owners.set.len() <= 2 * MIN_SWEEP,
            "{}",
            i.owners.set.len()
        );
    }
}
