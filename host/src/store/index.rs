//! The store's indexes: by namespace, by controller owner uid, and by the
//! values of chosen projected fields (client-go's indexers).
//!
//! Owns keeping each index exactly in step with the objects map (its
//! objects holding their projections: identities are not indexed), one
//! object at a time: the [`super::Writer`] calls [`Indexes::insert`] and
//! [`Indexes::remove`] under the same write lock as the map, so a reader
//! never sees an index disagree with the objects (O(log n) per event, no
//! rebuild). It never decides what an index is used for (key mappings and
//! per-key snapshots are the controller's) and never scans the world.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::projection::{Projected, ProjectedObject};

/// (namespace, name); the strings are shared with the cached object.
pub type StoreKey = (Arc<str>, Arc<str>);

/// Objects under one index key, sorted by (namespace, name). The index
/// holds the objects themselves, not only their keys: a lookup reads them
/// without a second search of the objects map (at 100,000 objects, those
/// searches were most of a per-key snapshot's cost).
///
/// Most owner buckets hold a single object (an App's one child): it is
/// kept inline, not in a map, whose first leaf node alone takes room for
/// eleven entries (~450 bytes per owner; 4.5 MB at 10,000 owned children,
/// BENCHMARKS.md).
#[derive(Debug)]
enum Bucket {
    One(StoreKey, Arc<ProjectedObject>),
    Many(BTreeMap<StoreKey, Arc<ProjectedObject>>),
}

impl Bucket {
    fn insert(&mut self, key: StoreKey, obj: Arc<ProjectedObject>) {
        match self {
            Bucket::One(k, o) if *k == key => *o = obj,
            Bucket::One(k, o) => {
                let mut map = BTreeMap::new();
                map.insert(k.clone(), o.clone());
                map.insert(key, obj);
                *self = Bucket::Many(map);
            }
            Bucket::Many(map) => {
                map.insert(key, obj);
            }
        }
    }

    /// Removes `key`; true when the bucket is then empty.
    fn remove(&mut self, key: &StoreKey) -> bool {
        match self {
            Bucket::One(k, _) => k == key,
            Bucket::Many(map) => {
                map.remove(key);
                map.is_empty()
            }
        }
    }

    fn objects(&self) -> Vec<Arc<ProjectedObject>> {
        match self {
            Bucket::One(_, o) => vec![o.clone()],
            Bucket::Many(map) => map.values().cloned().collect(),
        }
    }
}

/// Adds `obj` under `key` to the bucket of `at` in `map`.
fn add_to<K: std::hash::Hash + Eq>(
    map: &mut HashMap<K, Bucket>,
    at: K,
    key: &StoreKey,
    obj: &Arc<ProjectedObject>,
) {
    match map.entry(at) {
        std::collections::hash_map::Entry::Occupied(mut e) => {
            e.get_mut().insert(key.clone(), obj.clone())
        }
        std::collections::hash_map::Entry::Vacant(e) => {
            e.insert(Bucket::One(key.clone(), obj.clone()));
        }
    }
}

/// One field index: objects by each string value a projected field (by
/// position in the informer's projection) yields.
#[derive(Debug, Default)]
struct FieldIndex {
    position: usize,
    values: HashMap<Arc<str>, Bucket>,
}

/// Every index of one store.
#[derive(Debug, Default)]
pub(super) struct Indexes {
    namespaces: HashMap<Arc<str>, Bucket>,
    owners: HashMap<Arc<str>, Bucket>,
    fields: Vec<FieldIndex>,
}

/// The distinct string values of field `position` of `obj`.
fn string_values(obj: &ProjectedObject, position: usize) -> BTreeSet<&Arc<str>> {
    obj.field(position)
        .iter()
        .filter_map(|v| match v {
            Projected::Str(s) => Some(s),
            _ => None,
        })
        .collect()
}

fn remove_from<K: std::hash::Hash + Eq>(map: &mut HashMap<K, Bucket>, key: &K, value: &StoreKey) {
    if map.get_mut(key).is_some_and(|bucket| bucket.remove(value)) {
        map.remove(key);
    }
}

impl Indexes {
    /// Indexes by namespace and owner, plus one field index per position.
    pub(super) fn new(field_positions: &[usize]) -> Self {
        Indexes {
            fields: field_positions
                .iter()
                .map(|&position| FieldIndex {
                    position,
                    values: HashMap::new(),
                })
                .collect(),
            ..Indexes::default()
        }
    }

    /// Adds `obj` (stored under `key`) to every index, unless it is an
    /// identity: a cache keeping identities has one reader, which keeps
    /// what it needs itself, and no snapshot is built from it, so nothing
    /// looks its objects up by namespace, owner or field (at 100,000 pods
    /// the namespace and owner entries were a second and third map as
    /// large as the objects'). Projections applied again (the relist after
    /// [`super::Store::restore_projections`]) are indexed as they come.
    pub(super) fn insert(&mut self, key: &StoreKey, obj: &Arc<ProjectedObject>) {
        if !obj.holds_fields() {
            return;
        }
        add_to(&mut self.namespaces, key.0.clone(), key, obj);
        if let Some(owner) = obj.owner.as_ref().filter(|o| !o.uid.is_empty()) {
            add_to(&mut self.owners, owner.uid.clone(), key, obj);
        }
        for index in &mut self.fields {
            for value in string_values(obj, index.position) {
                add_to(&mut index.values, value.clone(), key, obj);
            }
        }
    }

    /// Removes `obj` (stored under `key`) from every index.
    pub(super) fn remove(&mut self, key: &StoreKey, obj: &ProjectedObject) {
        remove_from(&mut self.namespaces, &key.0, key);
        if let Some(owner) = &obj.owner {
            remove_from(&mut self.owners, &owner.uid, key);
        }
        for index in &mut self.fields {
            for value in string_values(obj, index.position) {
                remove_from(&mut index.values, value, key);
            }
        }
    }

    /// The objects in namespace `ns`, sorted by name.
    pub(super) fn in_namespace(&self, ns: &str) -> Vec<Arc<ProjectedObject>> {
        self.namespaces
            .get(ns)
            .map_or_else(Vec::new, Bucket::objects)
    }

    /// The objects whose controller owner has `uid`, sorted.
    pub(super) fn owned_by(&self, uid: &str) -> Vec<Arc<ProjectedObject>> {
        self.owners.get(uid).map_or_else(Vec::new, Bucket::objects)
    }

    /// The objects whose field `position` yields `value`, sorted (none
    /// when that field is not indexed).
    pub(super) fn with_value(&self, position: usize, value: &str) -> Vec<Arc<ProjectedObject>> {
        self.fields
            .iter()
            .find(|i| i.position == position)
            .and_then(|i| i.values.get(value))
            .map_or_else(Vec::new, Bucket::objects)
    }

    /// Whether field `position` is indexed.
    pub(super) fn indexes(&self, position: usize) -> bool {
        self.fields.iter().any(|i| i.position == position)
    }
}
