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
//! watch relates through its last state the host saw. It never builds
//! the snapshot layout (see `guest::snapshot`) and never calls the guest.

use std::sync::Arc;

use super::{namespace_of, strings, WatchCache};
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
    let mut out: Vec<Vec<Arc<ProjectedObject>>> = vec![Vec::new(); caches.len()];
    for (w, (spec, cache)) in manifest.watches.iter().zip(caches).enumerate() {
        if spec.keys.primary() != Some(p) {
            continue;
        }
        out[w] = related(
            manifest,
            caches,
            p,
            basis.map(Arc::as_ref),
            &spec.keys,
            cache,
        );
    }
    if let (true, Some(primary)) = (present, basis) {
        out[p] = vec![primary.clone()];
    }
    out
}

/// The objects of watch `cache` (mapped by `keys` to primary watch `p`)
/// that relate to `primary` (to any primary when it is unknown), sorted by
/// namespace and name.
fn related(
    manifest: &GuestManifest,
    caches: &[WatchCache],
    p: usize,
    primary: Option<&ProjectedObject>,
    keys: &KeyMapping,
    cache: &WatchCache,
) -> Vec<Arc<ProjectedObject>> {
    if let KeyMapping::All(_) = keys {
        return cache.store.list();
    }
    let Some(primary) = primary else {
        return Vec::new();
    };
    match keys {
        KeyMapping::Owner(_) => {
            let kind = &manifest.watches[p].gvk;
            cache
                .store
                .owned_by(&primary.uid)
                .into_iter()
                .filter(|o| {
                    o.owner
                        .as_ref()
                        .is_some_and(|r| *r.kind == kind.kind && r.group() == kind.group)
                })
                .collect()
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
