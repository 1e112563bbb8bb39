//! Which objects one reconcile's snapshot holds.
//!
//! Owns the per-key view of the caches: an aggregate key sees every watched
//! object; a primary object's key sees that object (when present) and
//! only what its manifest relates to it — the objects it controls
//! (`owner`), the objects in its namespace (`same-namespace`; a Namespace
//! primary's are those in the namespace it is), the objects
//! whose field matches one of its index values (`by-index`; only those
//! of its namespace for a `same-namespace:` link), every object of a
//! shared input (`all`) — found through the stores' indexes, so its cost
//! follows the related objects, not the world. A primary that left its
//! watch relates through its last state the host saw (one deleted unseen,
//! while no host ran, through its key). It never builds
//! the snapshot layout (see `guest::snapshot`) and never calls the guest.

use std::sync::Arc;

use super::{namespace_for, namespace_of, strings, WatchCache};
use crate::guest::{GuestManifest, KeyMapping};
use crate::projection::ProjectedObject;
use crate::request::RequestKey;

/// Each watch's objects for `key` (indexed like `manifest.watches`), sorted
/// by namespace and name, as the caches hold them now: for a primary key
/// whose object is not cached, only what relates to any primary (`all`).
/// The controller, which knows a departed primary's last state, uses
/// [`around_primary`] instead.
pub fn objects_for(
    manifest: &GuestManifest,
    caches: &[WatchCache],
    key: &RequestKey,
) -> Vec<Vec<Arc<ProjectedObject>>> {
    let Some(p) = key.watch else {
        return caches.iter().map(|c| c.store.list()).collect();
    };
    let (ns, name) = key.namespace_and_name();
    let primary = caches.get(p).and_then(|c| c.store.get(ns, name));
    around_primary(manifest, caches, p, primary.as_ref(), primary.is_some())
}

/// The objects a key of primary watch `p` sees, related through `basis`:
/// the primary as cached now, or — once it left the watch — as the host
/// last saw it (`None` when it never did: then only `all` watches relate).
/// The primary itself is among them only when `present`.
pub fn around_primary(
    manifest: &GuestManifest,
    caches: &[WatchCache],
    p: usize,
    basis: Option<&Arc<ProjectedObject>>,
    present: bool,
) -> Vec<Vec<Arc<ProjectedObject>>> {
    let of = basis.map_or(Basis::Unknown, |b| Basis::Seen(b));
    let mut out = around(manifest, caches, p, of);
    if let (true, Some(primary)) = (present, basis) {
        out[p] = vec![primary.clone()];
    }
    out
}

/// The objects a key of primary watch `p` sees when its primary, named
/// `name` in `namespace`, was deleted before the host saw its last state
/// (while no host ran): the objects whose controller owner reference
/// names it (its kind and group, its name, its namespace when namespaced;
/// any uid, since every such child is an orphan now), the objects of the
/// namespace it stood for, every object of `all` watches; none through
/// `by-index` (its values are unknown). Owners are found by a scan of
/// the watch, which only such a key's reconciles pay.
pub fn around_deleted(
    manifest: &GuestManifest,
    caches: &[WatchCache],
    p: usize,
    namespace: &str,
    name: &str,
) -> Vec<Vec<Arc<ProjectedObject>>> {
    around(manifest, caches, p, Basis::Deleted { namespace, name })
}

/// What a primary key's relations are found through.
#[derive(Clone, Copy)]
enum Basis<'a> {
    /// Nothing of the primary: only `all` watches relate.
    Unknown,
    /// The primary as cached now, or as the host last saw it.
    Seen(&'a ProjectedObject),
    /// Only the key of a primary deleted unseen (see [`around_deleted`]).
    Deleted { namespace: &'a str, name: &'a str },
}

/// Each watch's objects related to primary watch `p`'s key through `of`
/// (the primary itself not among them).
fn around(
    manifest: &GuestManifest,
    caches: &[WatchCache],
    p: usize,
    of: Basis<'_>,
) -> Vec<Vec<Arc<ProjectedObject>>> {
    let mut out: Vec<Vec<Arc<ProjectedObject>>> = vec![Vec::new(); caches.len()];
    for (w, (spec, cache)) in manifest.watches.iter().zip(caches).enumerate() {
        if spec.keys.primary() != Some(p) {
            continue;
        }
        out[w] = related(manifest, caches, p, of, &spec.keys, cache);
    }
    out
}

/// The objects of watch `cache` (mapped by `keys` to primary watch `p`)
/// that relate to its key through `of`, sorted by namespace and name.
fn related(
    manifest: &GuestManifest,
    caches: &[WatchCache],
    p: usize,
    of: Basis<'_>,
    keys: &KeyMapping,
    cache: &WatchCache,
) -> Vec<Arc<ProjectedObject>> {
    if let KeyMapping::All(_) = keys {
        return cache.store.list();
    }
    let kind = &manifest.watches[p].gvk;
    // Whether `o`'s controller owner is of the primary's kind.
    let by_kind = |o: &ProjectedObject| {
        o.owner
            .as_ref()
            .is_some_and(|r| *r.kind == kind.kind && r.group() == kind.group)
    };
    let primary = match of {
        Basis::Seen(primary) => primary,
        Basis::Unknown => return Vec::new(),
        Basis::Deleted { namespace, name } => {
            return match keys {
                KeyMapping::Owner(_) => {
                    let namespaced = caches.get(p).is_none_or(|c| c.namespaced);
                    let mut found = cache.store.list();
                    found.retain(|o| {
                        by_kind(o)
                            && o.owner.as_ref().is_some_and(|r| *r.name == *name)
                            && (!namespaced || *o.namespace == *namespace)
                    });
                    found
                }
                KeyMapping::SameNamespace(_) => namespace_for(manifest, caches, p, namespace, name)
                    .map(|ns| cache.store.in_namespace(ns))
                    .unwrap_or_default(),
                _ => Vec::new(),
            };
        }
    };
    match keys {
        KeyMapping::Owner(_) => {
            let mut found = cache.store.owned_by(&primary.uid);
            found.retain(|o| by_kind(o));
            found
        }
        KeyMapping::SameNamespace(_) => namespace_of(manifest, caches, p, primary)
            .map(|ns| cache.store.in_namespace(ns))
            .unwrap_or_default(),
        KeyMapping::ByIndex {
            index,
            field,
            same_namespace,
            ..
        } => {
            let at = caches[p].at(manifest.watches[p].index_path(*index));
            let mut found: Vec<Arc<ProjectedObject>> = strings(primary, at)
                .into_iter()
                .flat_map(|value| cache.store.with_value(cache.at(*field), value))
                .filter(|o| {
                    !same_namespace
                        || namespace_of(manifest, caches, p, primary) == Some(&*o.namespace)
                })
                .collect();
            found.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
            found.dedup_by(|a, b| a.namespace == b.namespace && a.name == b.name);
            found
        }
        KeyMapping::All(_)
        | KeyMapping::PerObject
        | KeyMapping::Aggregate(_)
        | KeyMapping::None => Vec::new(),
    }
}
