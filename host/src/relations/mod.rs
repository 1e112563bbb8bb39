//! Which objects relate to which keys: the mapping from a change to the
//! request keys it wakes ([`keys_for`], [`all_keys`]), and from a key to
//! the objects its snapshot holds ([`objects_for`], [`snapshot_for`]), over
//! the informers' stores. Shared by the controller, the aggregate and the
//! offline reconcile, so the three agree. It never enqueues, reconciles or
//! calls a guest.
//!
//! # Layout
//! - `keys`: key mappings (`per-object`, `aggregate`, `owner`,
//!   `same-namespace`, `by-index`, `all`) and the resync set.
//! - `related`: the objects one key's snapshot holds, around a present
//!   primary or the last state of one that left its watch.
//! - `agreement` (tests): the guest SDK's native model of both
//!   (`wasmctrl_guest_sdk::testing::relations`) against them, on one table.

mod keys;
mod related;

use std::sync::Arc;

use crate::guest::snapshot::{self, WatchView};
use crate::guest::{GuestManifest, Gvk, Presence, Request};
use crate::projection::{Projected, ProjectedObject};
use crate::request::RequestKey;
use crate::store::{Change, ChangeKind, Store};

pub use keys::{all_keys, keys_for};
pub use related::{around_deleted, around_primary, objects_for};

/// One watch's cache as the controller reads it.
#[derive(Clone)]
pub struct WatchCache {
    /// The informer's store.
    pub store: Store,
    /// Where each of the watch's paths (visible, then index fields) sits in
    /// the informer's (possibly wider, shared) projection.
    pub positions: Vec<usize>,
    /// Whether the watched kind is namespaced (discovery's word; offline,
    /// [`namespaced_by_objects`]): a namespaced child's owner of a
    /// cluster-scoped kind has a key without a namespace.
    pub namespaced: bool,
}

/// Whether a kind is namespaced, as its objects show it when discovery
/// cannot be asked (offline, a test's world): cluster-scoped when there are
/// objects and none has a namespace; namespaced otherwise.
pub fn namespaced_by_objects<'a>(mut namespaces: impl Iterator<Item = &'a str>) -> bool {
    match namespaces.next() {
        None => true,
        Some(first) => !first.is_empty() || namespaces.any(|ns| !ns.is_empty()),
    }
}

impl WatchCache {
    /// The informer position of the watch's path `i`.
    pub fn at(&self, i: usize) -> usize {
        self.positions.get(i).copied().unwrap_or(usize::MAX)
    }

    /// Whether `change` leaves this watch's view of the object as it was:
    /// an update of fields only a wider, shared projection holds (the
    /// outputs cache keeps whole objects) — not one the watch shows its
    /// guest or indexes, nor its identity, owner or finalizers. Such a
    /// change wakes no key of the watch, as the store wakes nobody for a
    /// resourceVersion-only update.
    pub fn unchanged(&self, change: &Change) -> bool {
        change.kind == ChangeKind::Updated
            && change.old.as_ref().is_some_and(|old| {
                // An identity (a cache keeping no projections) cannot tell.
                old.holds_fields()
                    && old.same_identity(&change.object)
                    && self
                        .positions
                        .iter()
                        .all(|&p| old.field(p) == change.object.field(p))
            })
    }
}

/// Whether `gvk` is core/v1 Namespace: the one cluster-scoped kind whose
/// objects stand for a namespace (their name) in `same-namespace`
/// relations.
pub fn is_namespace_kind(gvk: &Gvk) -> bool {
    gvk.group.is_empty() && gvk.kind == "Namespace"
}

/// The namespace a primary of watch `p` stands for in `same-namespace`
/// relations: its own when its kind is namespaced, its name when it is a
/// Namespace, none for any other cluster-scoped kind (the controller
/// refuses such a manifest at load).
fn namespace_of<'a>(
    manifest: &GuestManifest,
    caches: &[WatchCache],
    p: usize,
    primary: &'a ProjectedObject,
) -> Option<&'a str> {
    namespace_for(manifest, caches, p, &primary.namespace, &primary.name)
}

/// [`namespace_of`] a primary of watch `p` named `name` in `namespace`.
fn namespace_for<'a>(
    manifest: &GuestManifest,
    caches: &[WatchCache],
    p: usize,
    namespace: &'a str,
    name: &'a str,
) -> Option<&'a str> {
    if caches.get(p).is_none_or(|c| c.namespaced) {
        Some(namespace)
    } else if is_namespace_kind(&manifest.watches[p].gvk) {
        Some(name)
    } else {
        None
    }
}

/// The primaries of watch `p` that stand for namespace `ns` (see
/// [`namespace_of`]), through the namespace index or one lookup.
fn primaries_of_namespace(
    manifest: &GuestManifest,
    caches: &[WatchCache],
    p: usize,
    ns: &str,
) -> Vec<Arc<ProjectedObject>> {
    let Some(cache) = caches.get(p) else {
        return Vec::new();
    };
    if cache.namespaced {
        cache.store.in_namespace(ns)
    } else if is_namespace_kind(&manifest.watches[p].gvk) && !ns.is_empty() {
        cache.store.get("", ns).into_iter().collect()
    } else {
        Vec::new()
    }
}

/// The distinct string values of `obj`'s field at informer position `at`.
fn strings(obj: &ProjectedObject, at: usize) -> Vec<&str> {
    let mut out: Vec<&str> = obj.field(at).iter().filter_map(Projected::as_str).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The snapshot one reconcile of `key` gets from `caches` (one per watch
/// of `manifest`): every object for an aggregate key, the primary and its
/// related objects for a per-object key (see `related`).
pub fn snapshot_for(
    manifest: &GuestManifest,
    caches: &[WatchCache],
    key: &RequestKey,
) -> crate::guest::SnapshotData {
    snapshot_of(manifest, caches, &objects_for(manifest, caches, key))
}

/// The snapshot laid out from each watch's `objects` (indexed like
/// `manifest.watches`, as [`objects_for`] and [`around_primary`] give them).
pub fn snapshot_of(
    manifest: &GuestManifest,
    caches: &[WatchCache],
    objects: &[Vec<Arc<ProjectedObject>>],
) -> crate::guest::SnapshotData {
    let views: Vec<WatchView<'_>> = objects
        .iter()
        .zip(caches)
        .map(|(objs, cache)| WatchView {
            objects: objs.iter().map(Arc::as_ref).collect(),
            positions: cache.positions.clone(),
        })
        .collect();
    snapshot::build(manifest, &views)
}

/// Where `key`'s object stands as the caches alone tell it (offline, a
/// test's world: no server to ask): present when cached, gone when not;
/// none for an aggregate key. The controller asks the server instead.
pub fn presence_in_caches(caches: &[WatchCache], key: &RequestKey) -> Option<Presence> {
    let p = key.watch?;
    let (ns, name) = key.namespace_and_name();
    Some(
        if caches
            .get(p)
            .is_some_and(|c| c.store.get(ns, name).is_some())
        {
            Presence::Present
        } else {
            Presence::Gone
        },
    )
}

/// The guest request for `key` under `manifest` (its watch by name), with
/// `presence` (none for an aggregate key).
pub fn guest_request(
    manifest: &GuestManifest,
    key: &RequestKey,
    presence: Option<Presence>,
) -> Request {
    Request {
        key: key.key.to_string(),
        watch: key.watch.map(|w| manifest.watches[w].name.clone()),
        presence,
    }
}

#[cfg(test)]
mod agreement;
#[cfg(test)]
mod tests;
