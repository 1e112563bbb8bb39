//! Which objects one reconcile's snapshot holds.
//!
//! Owns the per-key view of the caches: an aggregate key sees every watched
//! object; a primary object's key sees that object (when still cached) and
//! only what its manifest relates to it — the objects it controls
//! (`owner`), the objects in its namespace (`same-namespace`; a Namespace
//! primary's are those in the namespace it is), the objects
//! whose field matches one of its index values (`by-index`; only those
//! of its namespace for a `same-namespace:` link) — found through
//! the stores' indexes, so its cost follows the related objects, not the
//! world. It never builds the snapshot layout (see `guest::snapshot`) and
//! never calls the guest.

use std::sync::Arc;

use super::{namespace_of, strings, WatchCache};
use crate::guest::{GuestManifest, KeyMapping};
use crate::projection::ProjectedObject;
use crate::request::RequestKey;

/// Each watch's objects for `key` (indexed like `manifest.watches`), sorted
/// by namespace and name.
pub fn objects_for(
    manifest: &GuestManifest,
    caches: &[WatchCache],
    key: &RequestKey,
) -> Vec<Vec<Arc<ProjectedObject>>> {
    let Some(p) = key.watch else {
        return caches.iter().map(|c| c.store.list()).collect();
    };
    let mut out: Vec<Vec<Arc<ProjectedObject>>> = vec![Vec::new(); caches.len()];
    let (ns, name) = key.namespace_and_name();
    let Some(primary) = caches.get(p).and_then(|c| c.store.get(ns, name)) else {
        // Gone: the guest sees an empty snapshot and finishes its clean-up
        // (a finalizer keeps the object until it does).
        return out;
    };
    for (w, (spec, cache)) in manifest.watches.iter().zip(caches).enumerate() {
        if spec.keys.primary() != Some(p) {
            continue;
        }
        let mut related = match &spec.keys {
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
            KeyMapping::SameNamespace(_) => namespace_of(manifest, caches, p, &primary)
                .map(|ns| cache.store.in_namespace(ns))
                .unwrap_or_default(),
            KeyMapping::ByIndex {
                index,
                field,
                same_namespace,
                ..
            } => {
                let at = caches[p].at(manifest.watches[p].index_path(*index));
                let mut found: Vec<Arc<ProjectedObject>> = strings(&primary, at)
                    .into_iter()
                    .flat_map(|value| cache.store.with_value(cache.at(*field), value))
                    .filter(|o| {
                        !same_namespace
                            || namespace_of(manifest, caches, p, &primary) == Some(&*o.namespace)
                    })
                    .collect();
                found.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
                found.dedup_by(|a, b| a.namespace == b.namespace && a.name == b.name);
                found
            }
            _ => Vec::new(),
        };
        std::mem::swap(&mut out[w], &mut related);
    }
    out[p] = vec![primary];
    out
}
