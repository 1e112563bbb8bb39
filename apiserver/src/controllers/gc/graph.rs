//! The collector's view of ownership, kept from the store's change stream
//! as the real garbage collector's `GraphBuilder` keeps its from informers:
//! every object by uid, and each owner uid's dependents. It only indexes
//! and says which objects a change may concern; it never reads the store
//! except to rebuild, and never writes.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde::Deserialize;

use crate::storage::store::{EventType, ObjKey, Record, Store};

/// An object as the collector names it: storage key and `(namespace, name)`.
pub(crate) type Item = (Arc<str>, ObjKey);

/// One `metadata.ownerReferences` entry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct OwnerRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
    pub block_owner_deletion: Option<bool>,
}

/// The metadata the collector acts on, read without building the whole
/// object. Malformed metadata reads as empty: the collector leaves such
/// an object alone.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Meta {
    pub uid: String,
    pub deletion_timestamp: Option<String>,
    finalizers: Option<Vec<String>>,
    owner_references: Option<Vec<OwnerRef>>,
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    metadata: Meta,
}

impl Meta {
    /// Reads the metadata of a stored object's JSON.
    pub(crate) fn parse(json: &[u8]) -> Meta {
        serde_json::from_slice::<Envelope>(json)
            .map(|e| e.metadata)
            .unwrap_or_default()
    }
    /// Whether the object is being deleted.
    pub(crate) fn deleting(&self) -> bool {
        self.deletion_timestamp.is_some()
    }
    /// Whether the finalizer `f` is set.
    pub(crate) fn has_finalizer(&self, f: &str) -> bool {
        self.finalizers.iter().flatten().any(|x| x == f)
    }
    /// The owner references (none when absent).
    pub(crate) fn owners(&self) -> &[OwnerRef] {
        self.owner_references.as_deref().unwrap_or_default()
    }
}

#[derive(Debug)]
struct Node {
    uid: String,
    owners: Vec<String>,
}

/// Ownership as of the last change observed.
#[derive(Debug, Default)]
pub(crate) struct Graph {
    nodes: HashMap<Item, Node>,
    by_uid: HashMap<String, Item>,
    dependents: HashMap<String, BTreeSet<Item>>,
}

impl Graph {
    /// Forgets everything and indexes the store's current objects, marking
    /// each `dirty` (after lost changes, or at start).
    pub(crate) fn rebuild(&mut self, store: &Store, dirty: &mut BTreeSet<Item>) {
        *self = Graph::default();
        for resource in store.resources() {
            let resource: Arc<str> = Arc::from(resource.as_str());
            let page = store.list(&resource, None, None, 0, |_| true);
            for json in page.items {
                let meta = Meta::parse(&json);
                let key = match serde_json::from_slice::<serde_json::Value>(&json) {
                    Ok(v) => (
                        crate::rules::objects::meta_str(&v, "namespace")
                            .unwrap_or_default()
                            .to_string(),
                        crate::rules::objects::meta_str(&v, "name")
                            .unwrap_or_default()
                            .to_string(),
                    ),
                    Err(_) => continue,
                };
                let item = (resource.clone(), key);
                self.insert(&item, &meta);
                dirty.insert(item);
            }
        }
    }

    /// Takes one committed change into the graph and marks in `dirty` the
    /// objects it may concern: the object itself, its owners (a foreground
    /// owner may be free now) and, when it is deleted or being deleted, its
    /// dependents.
    pub(crate) fn observe(&mut self, r: &Record, dirty: &mut BTreeSet<Item>) {
        let item: Item = (r.resource.clone(), (r.namespace.clone(), r.name.clone()));
        let meta = Meta::parse(&r.json);
        if let Some(old) = self.remove(&item) {
            self.mark_owners(&old.owners, dirty);
            if r.event == EventType::Deleted || old.uid != meta.uid {
                self.mark_dependents(&old.uid, dirty);
            }
        }
        if r.event != EventType::Deleted {
            self.insert(&item, &meta);
            let owners: Vec<String> = meta.owners().iter().map(|o| o.uid.clone()).collect();
            self.mark_owners(&owners, dirty);
            if meta.deleting() {
                self.mark_dependents(&meta.uid, dirty);
            }
        }
        dirty.insert(item);
    }

    /// The objects whose ownerReferences name `uid`.
    pub(crate) fn dependents_of(&self, uid: &str) -> Vec<Item> {
        self.dependents
            .get(uid)
            .map(|d| d.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether anything names `uid` as its owner.
    pub(crate) fn has_dependents(&self, uid: &str) -> bool {
        self.dependents.get(uid).is_some_and(|d| !d.is_empty())
    }

    fn insert(&mut self, item: &Item, meta: &Meta) {
        if meta.uid.is_empty() {
            return;
        }
        let owners: Vec<String> = meta.owners().iter().map(|o| o.uid.clone()).collect();
        for o in &owners {
            self.dependents
                .entry(o.clone())
                .or_default()
                .insert(item.clone());
        }
        self.by_uid.insert(meta.uid.clone(), item.clone());
        self.nodes.insert(
            item.clone(),
            Node {
                uid: meta.uid.clone(),
                owners,
            },
        );
    }

    fn remove(&mut self, item: &Item) -> Option<Node> {
        let old = self.nodes.remove(item)?;
        for o in &old.owners {
            if let Some(d) = self.dependents.get_mut(o) {
                d.remove(item);
                if d.is_empty() {
                    self.dependents.remove(o);
                }
            }
        }
        if self.by_uid.get(&old.uid) == Some(item) {
            self.by_uid.remove(&old.uid);
        }
        Some(old)
    }

    fn mark_owners(&self, owners: &[String], dirty: &mut BTreeSet<Item>) {
        dirty.extend(owners.iter().filter_map(|o| self.by_uid.get(o).cloned()));
    }

    fn mark_dependents(&self, uid: &str, dirty: &mut BTreeSet<Item>) {
        if let Some(d) = self.dependents.get(uid) {
            dirty.extend(d.iter().cloned());
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn add(store: &Store, name: &str, uid: &str, owner: Option<&str>) -> Arc<Record> {
        let mut rx = store.changes();
        let mut obj = json!({"metadata": {"name": name, "namespace": "d", "uid": uid}});
        if let Some(o) = owner {
            obj["metadata"]["ownerReferences"] =
                json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": o}]);
        }
        store
            .create("configmaps", ("d".into(), name.into()), obj)
            .unwrap();
        rx.try_recv().unwrap()
    }

    #[test]
    fn a_deleted_owner_marks_its_dependents() {
        let store = Store::new(100);
        let mut g = Graph::default();
        let mut dirty = BTreeSet::new();
        g.observe(&add(&store, "o", "u-o", None), &mut dirty);
        g.observe(&add(&store, "a", "u-a", Some("u-o")), &mut dirty);
        assert!(g.has_dependents("u-o"));
        assert_eq!(g.dependents_of("u-o").len(), 1);
        dirty.clear();
        let mut rx = store.changes();
        store
            .delete("configmaps", &("d".into(), "o".into()), None, None)
            .unwrap();
        g.observe(&rx.try_recv().unwrap(), &mut dirty);
        let names: Vec<&str> = dirty.iter().map(|(_, k)| k.1.as_str()).collect();
        assert_eq!(names, ["a", "o"]);
    }

    #[test]
    fn malformed_metadata_reads_as_empty() {
        let m = Meta::parse(br#"{"metadata": {"uid": 5}}"#);
        assert!(m.uid.is_empty() && m.owners().is_empty());
        let m = Meta::parse(br#"{"metadata": {"uid": "u", "finalizers": null}}"#);
        assert_eq!(m.uid, "u");
        assert!(!m.has_finalizer("orphan"));
    }
}
