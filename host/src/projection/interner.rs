//! Sharing the strings cached objects repeat (node names, phases,
//! quantities, namespaces, owners): one copy each, dropped once no cached
//! object holds it. It never decides what is interned.

use std::sync::Arc;

/// Strings held before an interner sweeps on its own (see
/// [`Interner::intern`]).
pub const MIN_SWEEP: usize = 4096;

/// Deduplicates the strings held by cached objects (node names, phases,
/// quantities, namespaces repeat across thousands of objects).
#[derive(Debug, Default)]
pub struct Interner {
    set: std::collections::HashSet<Arc<str>>,
    /// Strings held after the last sweep.
    swept: usize,
}

impl Interner {
    /// The shared copy of `s`. Once the set has doubled since the last
    /// sweep (and holds at least [`MIN_SWEEP`]), it sweeps first: a watch
    /// replacing objects brings new strings (resourceVersions, times) and
    /// leaves its predecessors' unreferenced, and between relists nothing
    /// else would drop them. Amortized O(1) per call.
    pub fn intern(&mut self, s: &str) -> Arc<str> {
        if let Some(found) = self.set.get(s) {
            return found.clone();
        }
        if self.set.len() >= MIN_SWEEP.max(2 * self.swept) {
            self.sweep();
        }
        let arc: Arc<str> = Arc::from(s);
        self.set.insert(arc.clone());
        arc
    }

    /// Drops strings no cached object references any more.
    pub fn sweep(&mut self) {
        self.set.retain(|s| Arc::strong_count(s) > 1);
        self.swept = self.set.len();
    }

    /// Number of distinct strings held.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// Whether no strings are held.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}
