//! The informer cache: projected objects by namespace and name, their
//! indexes, and the change each write to it amounts to. Owns the cache's
//! one [`Writer`] and its [`Store`] readers, the indexes, and the uids
//! recently deleted ([`Tombstones`]). It never talks to the API server,
//! never projects, and never calls handlers: it returns the [`Change`] and
//! its owner notifies.
//!
//! # Writer and readers
//! Like kube-runtime's `reflector::store` (and client-go's indexer), the
//! cache is split in two: one [`Writer`], owned by the informer that feeds
//! it from list and watch events, and any number of cheap [`Store`] readers
//! (the controller building snapshots and mapping keys, the actuator
//! comparing live objects).
//!
//! # Changes
//! The writer decides what a change is — added, updated (projected fields
//! or identity changed; a resourceVersion-only update is no change),
//! deleted, or gone during a relist (the tombstone case) — and keeps the
//! indexes (`index`: by namespace, by controller owner uid, by field value)
//! in step under the same lock.
//!
//! # Retention
//! A cache keeps each object's projection ([`Retention::Projections`]) or,
//! when its only reader keeps what it needs of the fields itself (an
//! incremental aggregate keeps its per-object contributions), only the
//! object's identity ([`Retention::Identity`]: key, uid, resourceVersion,
//! owner, finalizers and a fingerprint of the fields, in a type of its
//! own: `kept`, with uid and resourceVersion packed: `ids`), which no
//! index holds; readers are given it as the [`ProjectedObject::identity`]
//! it equals, made as it is read. Either way the
//! [`Change`] handed out carries the whole projection. Switching back to
//! projections ([`Store::restore_projections`]) takes effect for every
//! object applied from then on; until each identity has been replaced
//! (the informer relists), [`Store::holds_projections`] is false and no
//! snapshot may be built from the cache.

mod ids;
mod index;
mod kept;

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};

pub use crate::projection::object_key;
use crate::projection::ProjectedObject;
use crate::sync::{read, write};
use index::Indexes;
pub use index::StoreKey;
use kept::Kept;

/// What happened to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// Seen for the first time.
    Added,
    /// Its projected fields or identity changed.
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
    /// The object as the cache now holds it; for a delete, as it was last
    /// held.
    pub object: Arc<ProjectedObject>,
    /// For an update, the object as it was before.
    pub old: Option<Arc<ProjectedObject>>,
}

impl Change {
    fn deleted(object: Arc<ProjectedObject>) -> Self {
        Change {
            kind: ChangeKind::Deleted,
            namespace: object.namespace.clone(),
            name: object.name.clone(),
            resource_version: Arc::from(""),
            object,
            old: None,
        }
    }

    /// A change reporting `object` as added (replaying a cache to a new
    /// handler).
    pub fn added(object: Arc<ProjectedObject>) -> Self {
        Change {
            kind: ChangeKind::Added,
            namespace: object.namespace.clone(),
            name: object.name.clone(),
            resource_version: object.resource_version.clone(),
            object,
            old: None,
        }
    }

    /// The request key of the object: `namespace/name`, or `name` when
    /// cluster-scoped.
    pub fn object_key(&self) -> String {
        object_key(&self.namespace, &self.name)
    }

    /// The object before and after the change (one of them for an add or a
    /// delete): what a key mapping looks at, so that a field that changed
    /// wakes both the old and the new related keys.
    pub fn versions(&self) -> impl Iterator<Item = &ProjectedObject> {
        std::iter::once(self.object.as_ref()).chain(self.old.as_deref())
    }
}

/// A change callback: an informer's handlers get every change of its
/// store, and must return at once.
pub type Handler = Arc<dyn Fn(&Change) + Send + Sync>;

/// What a cache keeps of each object (see the module's "Retention").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Retention {
    /// The projection: what snapshots are built from.
    #[default]
    Projections,
    /// Only the identity ([`ProjectedObject::identity`]); the projection
    /// goes to the handlers and is not kept.
    Identity,
}

#[derive(Default)]
struct Cache {
    objects: BTreeMap<StoreKey, Kept>,
    indexes: Indexes,
    tombstones: Tombstones,
    retention: Retention,
    /// Objects held as identities only.
    identities: usize,
}

impl Cache {
    /// Counts `object` in or out of the identities held.
    fn count(&mut self, object: &Kept, held: bool) {
        if !object.holds_fields() {
            match held {
                true => self.identities += 1,
                false => self.identities = self.identities.saturating_sub(1),
            }
        }
    }

    /// Accounts for `old`, just removed from under `key`: out of the
    /// count and the indexes, its uid tombstoned; the change to report.
    fn remove(&mut self, key: &StoreKey, old: &Kept) -> Change {
        self.count(old, false);
        if let Some(projection) = old.projection() {
            self.indexes.remove(key, projection);
        }
        let old = old.projected(key);
        self.tombstones.bury(&old.uid);
        Change::deleted(old)
    }
}

/// The uids of the objects most recently deleted from a cache (at most
/// [`TOMBSTONES`]): uids are never reused, so a uid here names an object
/// that is gone for good — unless it only left the watch's selector, which
/// is why readers consult only the tombstones of unfiltered watches.
/// The oldest is forgotten first.
#[derive(Debug, Default)]
pub struct Tombstones {
    order: std::collections::VecDeque<Arc<str>>,
    uids: std::collections::HashSet<Arc<str>>,
}

/// Deleted uids a cache remembers.
pub const TOMBSTONES: usize = 4096;

impl Tombstones {
    /// Remembers `uid` as gone (an empty uid is no object's).
    pub fn bury(&mut self, uid: &Arc<str>) {
        if uid.is_empty() || !self.uids.insert(uid.clone()) {
            return;
        }
        self.order.push_back(uid.clone());
        if self.order.len() > TOMBSTONES {
            if let Some(old) = self.order.pop_front() {
                self.uids.remove(&old);
            }
        }
    }

    /// Whether `uid` is remembered as gone.
    pub fn contains(&self, uid: &str) -> bool {
        self.uids.contains(uid)
    }
}

/// A read handle on an informer's cache. Cheap to clone; reads never wait
/// for the API server.
#[derive(Clone, Default)]
pub struct Store {
    cache: Arc<RwLock<Cache>>,
}

impl Store {
    /// One cached object.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<ProjectedObject>> {
        let key: StoreKey = (Arc::from(namespace), Arc::from(name));
        let cache = read(&self.cache);
        let (key, kept) = cache.objects.get_key_value(&key)?;
        Some(kept.projected(key))
    }

    /// All cached objects, sorted by namespace then name.
    pub fn list(&self) -> Vec<Arc<ProjectedObject>> {
        read(&self.cache)
            .objects
            .iter()
            .map(|(key, kept)| kept.projected(key))
            .collect()
    }

    /// The key and resourceVersion of every cached object.
    pub fn versions(&self) -> Vec<(StoreKey, Arc<str>)> {
        read(&self.cache)
            .objects
            .iter()
            .map(|(k, o)| (k.clone(), o.resource_version()))
            .collect()
    }

    /// The objects in namespace `ns`, sorted by name (through the
    /// namespace index: no scan).
    pub fn in_namespace(&self, ns: &str) -> Vec<Arc<ProjectedObject>> {
        read(&self.cache).indexes.in_namespace(ns)
    }

    /// The objects whose controller owner has `uid`, sorted by namespace
    /// and name (through the owner index).
    pub fn owned_by(&self, uid: &str) -> Vec<Arc<ProjectedObject>> {
        if uid.is_empty() {
            return Vec::new();
        }
        read(&self.cache).indexes.owned_by(uid)
    }

    /// The objects whose projected field `position` yields the string
    /// `value`, sorted by namespace and name (through that field's index;
    /// empty when the field is not indexed).
    pub fn with_value(&self, position: usize, value: &str) -> Vec<Arc<ProjectedObject>> {
        read(&self.cache).indexes.with_value(position, value)
    }

    /// Whether projected field `position` is indexed.
    pub fn indexes(&self, position: usize) -> bool {
        read(&self.cache).indexes.indexes(position)
    }

    /// Whether an object with `uid` was deleted from this cache recently
    /// (see [`TOMBSTONES`]).
    pub fn deleted(&self, uid: &str) -> bool {
        read(&self.cache).tombstones.contains(uid)
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        read(&self.cache).objects.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What the cache keeps of objects applied from now on.
    pub fn retention(&self) -> Retention {
        read(&self.cache).retention
    }

    /// Whether every cached object holds its projection: false while the
    /// cache keeps identities only, and after [`Store::restore_projections`]
    /// until every identity has been applied again. A snapshot built from
    /// the cache meanwhile would miss fields, so none may be.
    pub fn holds_projections(&self) -> bool {
        let cache = read(&self.cache);
        cache.retention == Retention::Projections && cache.identities == 0
    }

    /// Cached objects held as identities only.
    pub fn identities(&self) -> usize {
        read(&self.cache).identities
    }

    /// Keeps projections again for every object applied from now on;
    /// true when the cache kept identities until now (its owner must then
    /// apply every object again: the informer relists).
    pub fn restore_projections(&self) -> bool {
        let mut cache = write(&self.cache);
        let was = cache.retention;
        cache.retention = Retention::Projections;
        was == Retention::Identity
    }

    /// The cached objects that hold their projection, sorted by namespace
    /// then name: what a handler added now can be told of at once (an
    /// identity reaches it as an update once applied again).
    pub fn projected(&self) -> Vec<Arc<ProjectedObject>> {
        read(&self.cache)
            .objects
            .values()
            .filter_map(Kept::projection)
            .filter(|o| o.holds_fields())
            .cloned()
            .collect()
    }
}

/// The one writer of a [`Store`], owned by the informer feeding it.
#[derive(Default)]
pub struct Writer {
    store: Store,
    /// Keys seen since the last relist began: what survives it. None
    /// also for a relist that began with the cache empty (the initial
    /// list): it can remove nothing, so it keeps no set.
    relisting: Option<BTreeSet<StoreKey>>,
    /// A relist that began with the cache empty is under way.
    listing_into_empty: bool,
}

impl Writer {
    /// A writer whose store also indexes the projected fields at
    /// `field_positions` by value (namespace and owner are always indexed).
    pub fn with_field_indexes(field_positions: &[usize]) -> Self {
        let writer = Writer::default();
        write(&writer.store.cache).indexes = Indexes::new(field_positions);
        writer
    }

    /// A writer keeping `retention` of each object (see the module's
    /// "Retention"), indexing `field_positions` like
    /// [`Writer::with_field_indexes`].
    pub fn with_retention(field_positions: &[usize], retention: Retention) -> Self {
        let writer = Writer::with_field_indexes(field_positions);
        write(&writer.store.cache).retention = retention;
        writer
    }

    /// A reader of this writer's cache.
    pub fn store(&self) -> Store {
        self.store.clone()
    }

    /// Inserts or replaces `object` (or, keeping identities, its
    /// identity). Returns the change to report, carrying the whole
    /// projection: None when the projected fields are unchanged, so a
    /// resourceVersion-only update wakes nobody (the newer resourceVersion
    /// is kept all the same). An identity replaced by a projection is a
    /// change: the handlers that never saw its fields see them now.
    pub fn apply(&mut self, object: ProjectedObject) -> Option<Change> {
        // The key shares the projected object's strings: no second copy.
        let key: StoreKey = (object.namespace.clone(), object.name.clone());
        if let Some(seen) = self.relisting.as_mut() {
            seen.insert(key.clone());
        }
        let object = Arc::new(object);
        let mut cache = write(&self.store.cache);
        let kept = Kept::of(&object, cache.retention == Retention::Identity);
        // Moved into the map, not cloned (an identity's clone would be a
        // second allocation per event): what is looked at afterwards is
        // taken first.
        let projection = kept.projection().cloned();
        cache.count(&kept, true);
        let (old, unchanged) = match cache.objects.entry(key.clone()) {
            Entry::Occupied(mut entry) => {
                let unchanged = entry.get().same_content(&kept, &object);
                (Some(entry.insert(kept)), unchanged)
            }
            Entry::Vacant(entry) => {
                entry.insert(kept);
                (None, false)
            }
        };
        if let Some(old) = &old {
            cache.count(old, false);
        }
        let Cache { indexes, .. } = &mut *cache;
        let kind = match &old {
            Some(_) if unchanged => {
                // Not a change, but the indexes hold the version the map
                // holds (the same index keys, as the content is the same):
                // before, they kept the old one, a second copy alive.
                if let Some(projection) = &projection {
                    indexes.insert(&key, projection);
                }
                return None;
            }
            Some(old) => {
                if let Some(projection) = old.projection() {
                    indexes.remove(&key, projection);
                }
                ChangeKind::Updated
            }
            None => ChangeKind::Added,
        };
        if let Some(projection) = &projection {
            indexes.insert(&key, projection);
        }
        let old = old.map(|old| old.projected(&key));
        let (namespace, name) = key;
        Some(Change {
            kind,
            namespace,
            name,
            resource_version: object.resource_version.clone(),
            object,
            old,
        })
    }

    /// Removes an object; the change to report if it was cached.
    pub fn delete(&mut self, namespace: &str, name: &str) -> Option<Change> {
        let key: StoreKey = (Arc::from(namespace), Arc::from(name));
        let mut cache = write(&self.store.cache);
        let (key, old) = cache.objects.remove_entry(&key)?;
        Some(cache.remove(&key, &old))
    }

    /// A relist begins: objects not applied again before
    /// [`Writer::finish_relist`] are gone.
    pub fn start_relist(&mut self) {
        self.listing_into_empty = self.store.is_empty();
        self.relisting = (!self.listing_into_empty).then(BTreeSet::new);
    }

    /// A relist ended: removes every object it did not see (deleted while
    /// the watch was down) and returns their tombstones.
    pub fn finish_relist(&mut self) -> Vec<Change> {
        if std::mem::take(&mut self.listing_into_empty) {
            return Vec::new();
        }
        let seen = self.relisting.take().unwrap_or_default();
        let mut cache = write(&self.store.cache);
        let gone: Vec<StoreKey> = cache
            .objects
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        let mut tombstones = Vec::with_capacity(gone.len());
        for k in &gone {
            if let Some(old) = cache.objects.remove(k) {
                tombstones.push(cache.remove(k, &old));
            }
        }
        tombstones
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
    fn a_deleted_uid_is_remembered_and_the_oldest_forgotten_past_the_cap() {
        let mut w = Writer::default();
        let store = w.store();
        w.apply(object("a", "1", "n1"));
        assert!(!store.deleted("u"), "alive");
        w.delete("ml", "a");
        assert!(store.deleted("u"));
        let mut t = Tombstones::default();
        for i in 0..=TOMBSTONES {
            t.bury(&Arc::from(i.to_string()));
        }
        assert!(!t.uids.contains("0") && t.uids.contains("1"));
        assert_eq!(t.order.len(), TOMBSTONES);
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
    fn indexes_follow_every_update_delete_and_relist() {
        let mut w = Writer::with_field_indexes(&[0]);
        let store = w.store();
        w.apply(object("a", "1", "n1"));
        w.apply(object("b", "1", "n1"));
        let names = |v: Vec<Arc<ProjectedObject>>| -> Vec<String> {
            v.iter().map(|o| o.name.to_string()).collect()
        };
        assert_eq!(names(store.with_value(0, "n1")), ["a", "b"]);
        assert_eq!(names(store.in_namespace("ml")), ["a", "b"]);
        w.apply(object("a", "2", "n2"));
        assert_eq!(names(store.with_value(0, "n1")), ["b"], "moved out of n1");
        assert_eq!(names(store.with_value(0, "n2")), ["a"]);
        w.delete("ml", "b");
        assert!(store.with_value(0, "n1").is_empty());
        w.start_relist();
        w.finish_relist();
        assert!(
            store.in_namespace("ml").is_empty(),
            "tombstoned by the relist"
        );
        assert!(store.with_value(0, "n2").is_empty());
        assert!(store.with_value(7, "n2").is_empty(), "not an indexed field");
    }

    fn owned(name: &str, rv: &str, owner_uid: &str) -> ProjectedObject {
        Projection::new(vec![], vec![]).project(
            &json!({"metadata": {"namespace": "ml", "name": name, "uid": name, "resourceVersion": rv,
                    "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o",
                                         "uid": owner_uid, "controller": true}]}}),
            &mut Interner::default(),
        )
    }

    #[test]
    fn an_owner_index_of_one_child_grows_shrinks_and_empties_in_step() {
        let mut w = Writer::default();
        let store = w.store();
        let names = |v: Vec<Arc<ProjectedObject>>| -> Vec<(String, String)> {
            v.iter()
                .map(|o| (o.name.to_string(), o.resource_version.to_string()))
                .collect()
        };
        let pair = |n: &str, rv: &str| (n.to_string(), rv.to_string());
        w.apply(owned("c", "1", "o1"));
        assert_eq!(names(store.owned_by("o1")), [pair("c", "1")]);
        w.apply(owned("c", "2", "o1"));
        assert_eq!(
            names(store.owned_by("o1")),
            [pair("c", "2")],
            "an update replaces the one child"
        );
        w.apply(owned("b", "1", "o1"));
        assert_eq!(
            names(store.owned_by("o1")),
            [pair("b", "1"), pair("c", "2")],
            "a second child: both, sorted"
        );
        w.apply(owned("c", "3", "o2"));
        assert_eq!(names(store.owned_by("o1")), [pair("b", "1")], "re-owned");
        assert_eq!(names(store.owned_by("o2")), [pair("c", "3")]);
        w.delete("ml", "b");
        assert!(store.owned_by("o1").is_empty());
        w.delete("ml", "c");
        assert!(store.owned_by("o2").is_empty());
        assert!(store.in_namespace("ml").is_empty());
        w.apply(owned("c", "4", "o2"));
        assert_eq!(names(store.owned_by("o2")), [pair("c", "4")], "again");
    }

    #[test]
    fn the_initial_list_keeps_no_set_of_seen_keys_and_a_later_relist_tombstones() {
        let mut w = Writer::default();
        w.start_relist();
        assert!(
            w.relisting.is_none(),
            "into an empty cache: nothing to remove"
        );
        w.apply(object("a", "1", "n1"));
        w.apply(object("b", "1", "n1"));
        assert!(w.finish_relist().is_empty());
        assert_eq!(w.store().len(), 2);
        w.start_relist();
        w.apply(object("b", "2", "n1"));
        let gone: Vec<_> = w.finish_relist().into_iter().map(|c| c.name).collect();
        assert_eq!(gone, [Arc::from("a")]);
    }

    fn identities() -> Writer {
        Writer::with_retention(&[], Retention::Identity)
    }

    #[test]
    fn an_identity_cache_holds_no_projection_and_hands_the_projection_to_handlers() {
        let mut w = identities();
        let store = w.store();
        let full = object("a", "1", "n1");
        let change = w.apply(full.clone()).unwrap();
        assert_eq!(change.object.field(0)[0].as_str(), Some("n1"));
        assert!(change.object.holds_fields());
        let kept = store.get("ml", "a").unwrap();
        assert!(!kept.holds_fields(), "the cache keeps the identity only");
        assert!(kept.field(0).is_empty());
        assert_eq!(
            (&*kept.uid, &*kept.resource_version, kept.key().as_str()),
            ("u", "1", "ml/a")
        );
        assert!(kept.heap_bytes() < full.heap_bytes());
        assert_eq!(store.identities(), 1);
        assert!(!store.holds_projections(), "no snapshot may be built");
        assert!(store.projected().is_empty(), "nothing to replay");
    }

    #[test]
    fn an_identity_cache_indexes_nothing() {
        // Its one reader keeps what it needs itself; no snapshot is built
        // from it, so nothing looks objects up by namespace, owner or
        // field, and the indexes' entries would be a second map as large
        // as the objects'.
        let mut w = Writer::with_retention(&[0], Retention::Identity);
        let store = w.store();
        w.apply(owned("c", "1", "o1"));
        w.apply(object("a", "1", "n1"));
        w.apply(object("a", "2", "n2"));
        assert_eq!(store.len(), 2);
        assert!(store.in_namespace("ml").is_empty());
        assert!(store.owned_by("o1").is_empty());
        assert!(store.with_value(0, "n2").is_empty());
        assert!(w.delete("ml", "a").is_some());
        assert!(w.delete("ml", "c").is_some());
        assert!(store.is_empty());
    }

    #[test]
    fn an_identity_cache_tells_content_changes_deletes_and_relists_apart() {
        let mut w = identities();
        let store = w.store();
        w.apply(object("a", "1", "n1"));
        w.apply(object("b", "1", "n1"));
        assert!(
            w.apply(object("a", "2", "n1")).is_none(),
            "a resourceVersion-only update is no change"
        );
        assert_eq!(&*store.get("ml", "a").unwrap().resource_version, "2");
        let moved = w.apply(object("a", "3", "n2")).unwrap();
        assert_eq!(moved.kind, ChangeKind::Updated);
        assert_eq!(moved.object.field(0)[0].as_str(), Some("n2"));
        let gone = w.delete("ml", "a").unwrap();
        assert_eq!((gone.kind, &*gone.name), (ChangeKind::Deleted, "a"));
        assert!(store.deleted("u"), "tombstoned by uid");
        w.apply(object("c", "1", "n1"));
        w.start_relist();
        w.apply(object("c", "1", "n1"));
        let relisted: Vec<_> = w
            .finish_relist()
            .into_iter()
            .map(|c| (c.kind, c.name.to_string()))
            .collect();
        assert_eq!(relisted, [(ChangeKind::Deleted, "b".to_string())]);
        assert_eq!((store.len(), store.identities()), (1, 1));
        w.delete("ml", "c");
        assert_eq!(store.identities(), 0);
    }

    #[test]
    fn restored_projections_come_back_as_updates_and_equal_a_full_cache() {
        let names = ["a", "b", "c"];
        let mut full = Writer::default();
        let mut w = identities();
        let store = w.store();
        for n in names {
            full.apply(object(n, "1", "n1"));
            w.apply(object(n, "1", "n1"));
        }
        assert!(store.restore_projections());
        assert!(!store.restore_projections(), "once");
        assert!(
            !store.holds_projections(),
            "not before each is applied again"
        );
        // The relist the informer does.
        w.start_relist();
        let mut kinds = Vec::new();
        for (i, n) in names.iter().enumerate() {
            let change = w.apply(object(n, "1", "n1")).unwrap();
            assert!(!change.old.unwrap().holds_fields());
            kinds.push(change.kind);
            assert_eq!(store.holds_projections(), i + 1 == names.len());
        }
        assert!(w.finish_relist().is_empty());
        assert_eq!(kinds, [ChangeKind::Updated; 3]);
        assert_eq!(store.list(), full.store().list());
        assert_eq!(store.projected().len(), 3, "a new handler is told of all");
        assert_eq!(
            store.in_namespace("ml"),
            full.store().in_namespace("ml"),
            "indexed once they hold their projections"
        );
        assert_eq!(store.with_value(0, "n1"), full.store().with_value(0, "n1"));
        assert!(
            w.apply(object("a", "2", "n1")).is_none(),
            "full again: a resourceVersion-only update is no change"
        );
    }

    #[test]
    fn object_keys_are_namespace_slash_name_or_bare_name() {
        assert_eq!(object_key("ml", "p"), "ml/p");
        assert_eq!(object_key("", "node-1"), "node-1");
    }
}
