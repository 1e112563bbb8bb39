//! What woke each key: the changes the watches reported since the key's
//! last reconcile began, and whether someone else's change of an output
//! was among them. Kept only for the keys the hot-loop rules follow (those
//! that wrote lately), so a change costs a lookup for any other key. It
//! records facts only: it never judges them (the guard does, when the
//! key's next reconcile begins) and never enqueues.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::guest::{Gvk, ObjectKey};
use crate::request::RequestKey;
use crate::sync::lock;

/// Wakes remembered per key between two reconciles, at most: past it the
/// key counts as woken by someone else (an echo is one event per write).
const MAX_WAKES: usize = 16;

/// One write's echo as a watch reports it: the object and the
/// resourceVersion the write produced ("" for a delete, as a watch reports
/// a deletion).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The object written (the write path's shared copy of its key).
    pub object: Arc<ObjectKey>,
    /// The resourceVersion the write returned.
    pub rv: Arc<str>,
}

impl Written {
    /// The same object at the same version, compared by group, kind,
    /// namespace and name (a watch and a write rule may name different
    /// versions) and resourceVersion only.
    pub fn matches(&self, other: &Written) -> bool {
        same_kind(&self.object.gvk, &other.object.gvk)
            && self.object.namespace == other.object.namespace
            && self.object.name == other.object.name
            && self.rv == other.rv
    }
}

/// Group and kind: a watch and a write rule may name different versions.
fn same_kind(a: &Gvk, b: &Gvk) -> bool {
    a.group == b.group && a.kind == b.kind
}

/// The changes reported for one key since its last reconcile began.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Woke {
    /// The changes the watches reported (object and resourceVersion).
    pub changes: Vec<Written>,
    /// Someone else's change (of an output, or past `MAX_WAKES`) was
    /// among them.
    pub other: bool,
}

/// What woke each followed key, for one guest.
#[derive(Debug, Default)]
pub struct Wakes(Mutex<HashMap<RequestKey, Woke>>);

impl Wakes {
    /// A watch of `gvk` reported a change of `namespace/name` (now at
    /// `rv`; "" when deleted) that wakes `key`. Costs a lookup for a key
    /// that is not followed.
    pub fn woken_by(&self, key: &RequestKey, gvk: &Gvk, namespace: &str, name: &str, rv: &str) {
        let mut keys = lock(&self.0);
        let Some(e) = keys.get_mut(key) else { return };
        if e.other {
            return;
        }
        if e.changes.len() >= MAX_WAKES {
            e.other = true;
            return;
        }
        e.changes.push(Written {
            object: Arc::new(ObjectKey {
                gvk: gvk.clone(),
                namespace: (!namespace.is_empty()).then(|| namespace.to_string()),
                name: name.to_string(),
            }),
            rv: Arc::from(rv),
        });
    }

    /// Someone else's change (of an output) wakes `key`.
    pub fn woken_by_other(&self, key: &RequestKey) {
        if let Some(e) = lock(&self.0).get_mut(key) {
            e.other = true;
        }
    }

    /// What woke `key` since this was last asked (None: it is not
    /// followed); changes reported from now on are the next reconcile's.
    pub fn take(&self, key: &RequestKey) -> Option<Woke> {
        lock(&self.0).get_mut(key).map(std::mem::take)
    }

    /// Follows `key` (what it followed so far is kept).
    pub fn follow(&self, key: &RequestKey) {
        lock(&self.0).entry(key.clone()).or_default();
    }

    /// Stops following `key`.
    pub fn forget(&self, key: &RequestKey) {
        lock(&self.0).remove(key);
    }

    /// Follows only the keys `keep` keeps.
    pub fn retain(&self, keep: impl Fn(&RequestKey) -> bool) {
        lock(&self.0).retain(|k, _| keep(k));
    }

    /// Whether no key is followed.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        lock(&self.0).is_empty()
    }
}
