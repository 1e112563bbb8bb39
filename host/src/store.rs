//! The informer cache: projected objects by namespace and name, and the
//! change each write to it amounts to.
//!
//! Like kube-runtime's `reflector::store` (and client-go's indexer), the
//! cache is split in two: one [`Writer`], owned by the informer that feeds it
//! from list and watch events, and any number of cheap [`Store`] readers
//! (the controller building snapshots, the actuator comparing live objects).
//! The writer decides what a change is — added, updated (projected fields
//! changed; a resourceVersion-only update is no change), deleted, or gone
//! during a relist (the tombstone case). It never talks to the API server,
//! never projects, and never calls handlers: it returns the [`Change`] and
//! its owner notifies.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};

use crate::projection::ProjectedObject;
use crate::sync::{read, write};

/// What happened to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// Seen for the first time.
    Added,
    /// Its projected fields changed.
    Updated,
    /// Deleted, left the selector, or vanished during a relist (tombstone).
    Deleted,
}

/// A change notification. Handlers get it by reference and must not block.
#[derive(Debug, Clone)]
pub struct Change {
    /// What happened.
    pub kind: ChangeKind,
    /// The object's namespace ("" for cluster-scoped).
    pub namespace: Arc<str>,
    /// The object's name.
    pub name: Arc<str>,
    /// The resourceVersion the cache now holds ("" after a delete).
    pub resource_version: Arc<str>,
}

impl Change {
    fn deleted((namespace, name): StoreKey) -> Self {
        Change {
            kind: ChangeKind::Deleted,
            namespace,
            name,
            resource_version: Arc::from(""),
        }
    }

    /// The request key of the object: `namespace/name`, or `name` when
    /// cluster-scoped.
    pub fn object_key(&self) -> String {
        object_key(&self.namespace, &self.name)
    }
}

/// `namespace/name`, or `name` for a cluster-scoped object: the key a
/// per-object controller reconciles.
pub fn object_key(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    }
}

/// (namespace, name); the strings are shared with the cached object.
pub type StoreKey = (Arc<str>, Arc<str>);

type Objects = BTreeMap<StoreKey, Arc<ProjectedObject>>;

/// A read handle on an informer's cache. Cheap to clone; reads never wait
/// for the API server.
#[derive(Clone, Default)]
pub struct Store {
    objects: Arc<RwLock<Objects>>,
}

impl Store {
    /// One cached object.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<ProjectedObject>> {
        let key: StoreKey = (Arc::from(namespace), Arc::from(name));
        read(&self.objects).get(&key).cloned()
    }

    /// All cached objects, sorted by namespace then name.
    pub fn list(&self) -> Vec<Arc<ProjectedObject>> {
        read(&self.objects).values().cloned().collect()
    }

    /// The key and resourceVersion of every cached object.
    pub fn versions(&self) -> Vec<(StoreKey, Arc<str>)> {
        read(&self.objects)
            .iter()
            .map(|(k, o)| (k.clone(), o.resource_version.clone()))
            .collect()
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        read(&self.objects).len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The one writer of a [`Store`], owned by the informer feeding it.
#[derive(Default)]
pub struct Writer {
    store: Store,
    /// Keys seen since the last relist began: what survives it.
    relisting: Option<BTreeSet<StoreKey>>,
}

impl Writer {
    /// A reader of this writer's cache.
    pub fn store(&self) -> Store {
        self.store.clone()
    }

    /// Inserts or replaces `object`. Returns the change to report: None when
    /// the projected fields are unchanged, so a resourceVersion-only update
    /// wakes nobody (the newer resourceVersion is kept all the same).
    pub fn apply(&mut self, object: ProjectedObject) -> Option<Change> {
        // The key shares the projected object's strings: no second copy.
        let key: StoreKey = (object.namespace.clone(), object.name.clone());
        if let Some(seen) = self.relisting.as_mut() {
            seen.insert(key.clone());
        }
        let mut objects = write(&self.store.objects);
        let kind = match objects.get(&key) {
            Some(old) if old.same_content(&object) => {
                objects.insert(key, Arc::new(object));
                return None;
            }
            Some(_) => ChangeKind::Updated,
            None => ChangeKind::Added,
        };
        let (namespace, name) = key.clone();
        let resource_version = object.resource_version.clone();
        objects.insert(key, Arc::new(object));
        Some(Change {
            kind,
            namespace,
            name,
            resource_version,
        })
    }

    /// Removes an object; the change to report if it was cached.
    pub fn delete(&mut self, namespace: &str, name: &str) -> Option<Change> {
        let key: StoreKey = (Arc::from(namespace), Arc::from(name));
        write(&self.store.objects)
            .remove_entry(&key)
            .map(|(key, _)| Change::deleted(key))
    }

    /// A relist begins: objects not applied again before
    /// [`Writer::finish_relist`] are gone.
    pub fn start_relist(&mut self) {
        self.relisting = Some(BTreeSet::new());
    }

    /// A relist ended: removes every object it did not see (deleted while
    /// the watch was down) and returns their tombstones.
    pub fn finish_relist(&mut self) -> Vec<Change> {
        let seen = self.relisting.take().unwrap_or_default();
        let mut objects = write(&self.store.objects);
        let gone: Vec<StoreKey> = objects
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        for k in &gone {
            objects.remove(k);
        }
        gone.into_iter().map(Change::deleted).collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::projection::{FieldPath, Interner, Projection};
    use serde_json::json;

    fn object(name: &str, rv: &str, node: &str) -> ProjectedObject {
        let projection = Projection::new(vec![FieldPath::parse("spec.nodeName").unwrap()], vec![]);
        projection.project(
            &json!({"metadata": {"namespace": "ml", "name": name, "uid": "u", "resourceVersion": rv},
                    "spec": {"nodeName": node}}),
            &mut Interner::default(),
        )
    }

    #[test]
    fn a_resource_version_only_update_is_kept_but_reported_as_no_change() {
        let mut w = Writer::default();
        let store = w.store();
        assert_eq!(
            w.apply(object("a", "1", "n1")).unwrap().kind,
            ChangeKind::Added
        );
        assert!(w.apply(object("a", "2", "n1")).is_none());
        assert_eq!(&*store.get("ml", "a").unwrap().resource_version, "2");
        let change = w.apply(object("a", "3", "n2")).unwrap();
        assert_eq!(
            (change.kind, &*change.resource_version),
            (ChangeKind::Updated, "3")
        );
    }

    #[test]
    fn a_relist_tombstones_exactly_the_objects_it_did_not_see() {
        let mut w = Writer::default();
        for n in ["a", "b", "c"] {
            w.apply(object(n, "1", "n1"));
        }
        w.start_relist();
        w.apply(object("b", "1", "n1"));
        let gone: Vec<_> = w
            .finish_relist()
            .into_iter()
            .map(|c| c.name.to_string())
            .collect();
        assert_eq!(gone, ["a", "c"]);
        assert_eq!(w.store().len(), 1);
        assert!(
            w.delete("ml", "a").is_none(),
            "already gone: no second tombstone"
        );
        assert_eq!(w.delete("ml", "b").unwrap().kind, ChangeKind::Deleted);
    }

    #[test]
    fn object_keys_are_namespace_slash_name_or_bare_name() {
        assert_eq!(object_key("ml", "p"), "ml/p");
        assert_eq!(object_key("", "node-1"), "node-1");
    }
}
