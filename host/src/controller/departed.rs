//! The last state of primaries that left their watch (deleted, or out of
//! its selectors), kept so their keys' clean-up snapshots can still relate
//! the objects they controlled. An entry lives from the primary's leaving
//! until a reconcile of its key that left it settles (or the primary comes
//! back): memory bounded by the keys waiting for that reconcile. It never
//! decides presence and never builds a snapshot.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::projection::ProjectedObject;
use crate::request::RequestKey;
use crate::sync::lock;

/// Departed primaries by key, with the state the host last saw.
#[derive(Default)]
pub struct Departed {
    last: Mutex<HashMap<RequestKey, Arc<ProjectedObject>>>,
}

impl Departed {
    /// `key`'s primary left its watch; `last` is how the cache last held it.
    pub fn left(&self, key: RequestKey, last: Arc<ProjectedObject>) {
        lock(&self.last).insert(key, last);
    }

    /// `key`'s primary is back in its watch: its departure is over.
    pub fn returned(&self, key: &RequestKey) {
        lock(&self.last).remove(key);
    }

    /// The last state of `key`'s departed primary, if it left.
    pub fn get(&self, key: &RequestKey) -> Option<Arc<ProjectedObject>> {
        lock(&self.last).get(key).cloned()
    }

    /// A reconcile made on `seen` (what [`Departed::get`] gave) settled
    /// `key`'s departure: forgets it, unless the primary left again
    /// meanwhile (a newer departure, which its own reconcile settles).
    pub fn settled(&self, key: &RequestKey, seen: &Arc<ProjectedObject>) {
        let mut last = lock(&self.last);
        if last.get(key).is_some_and(|l| Arc::ptr_eq(l, seen)) {
            last.remove(key);
        }
    }

    /// How many departures are kept.
    pub fn len(&self) -> usize {
        lock(&self.last).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projection::{Interner, Projection};

    fn object(name: &str, uid: &str) -> Arc<ProjectedObject> {
        let projection = Projection::new(Vec::new(), Vec::new());
        let json = serde_json::json!({"metadata": {"name": name, "uid": uid}});
        Arc::new(projection.project(&json, &mut Interner::default()))
    }

    #[test]
    fn a_departure_is_kept_until_settled_or_returned_and_no_longer() {
        let departed = Departed::default();
        let (a, b) = (RequestKey::object(0, "a"), RequestKey::object(0, "b"));
        let last_a = object("a", "u1");
        departed.left(a.clone(), last_a.clone());
        departed.left(b.clone(), object("b", "u2"));
        assert_eq!(departed.len(), 2);
        assert_eq!(
            departed.get(&a).map(|o| o.uid.to_string()),
            Some("u1".into())
        );
        departed.settled(&a, &last_a);
        departed.returned(&b);
        assert_eq!(departed.len(), 0, "nothing is kept once settled or back");
    }

    #[test]
    fn a_settle_of_an_older_departure_keeps_the_newer_one() {
        let departed = Departed::default();
        let key = RequestKey::object(0, "a");
        let first = object("a", "u1");
        departed.left(key.clone(), first.clone());
        // Re-created and gone again while the first clean-up ran.
        departed.left(key.clone(), object("a", "u2"));
        departed.settled(&key, &first);
        assert_eq!(
            departed.get(&key).map(|o| o.uid.to_string()),
            Some("u2".into())
        );
    }
}
