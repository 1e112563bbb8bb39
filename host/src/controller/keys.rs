//! Mapping changes to request keys: the event handlers' only job.
//!
//! Owns the key mappings of a validated manifest — `per-object`,
//! `aggregate`, `owner` (the controller owner reference), `same-namespace`
//! and `by-index` (a field value looked up in a primary's index) — and the
//! full key set a resync enqueues; each wake is told to the hot-loop
//! bookkeeping ([`crate::actuator::hotloop`]) with the change that caused
//! it. Every lookup goes through a store index
//! (namespace, field value) or the object itself (owner reference): a
//! change costs the keys it wakes, never a scan of the world. It never
//! reconciles, never blocks and never writes.

use std::sync::Arc;

use crate::actuator::hotloop::HotLoops;
use crate::guest::{GuestManifest, KeyMapping};
use crate::informer::Change;
use crate::projection::{Projected, ProjectedObject};
use crate::request::RequestKey;
use crate::store::{object_key, Store};

/// One watch's cache as the controller reads it.
#[derive(Clone)]
pub struct WatchCache {
    /// The informer's store.
    pub store: Store,
    /// Where each of the watch's paths (visible, then index fields) sits in
    /// the informer's (possibly wider, shared) projection.
    pub positions: Vec<usize>,
}

impl WatchCache {
    /// The informer position of the watch's path `i`.
    pub(crate) fn at(&self, i: usize) -> usize {
        self.positions.get(i).copied().unwrap_or(usize::MAX)
    }
}

/// The distinct string values of `obj`'s field at informer position `at`.
pub(crate) fn strings(obj: &ProjectedObject, at: usize) -> Vec<&str> {
    let mut out: Vec<&str> = obj.field(at).iter().filter_map(Projected::as_str).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The request keys a change to an object of watch `w` wakes.
pub(crate) fn keys_for(
    manifest: &GuestManifest,
    caches: &[WatchCache],
    w: usize,
    change: &Change,
) -> Vec<RequestKey> {
    let Some(spec) = manifest.watches.get(w) else {
        return Vec::new();
    };
    let mut keys = Vec::new();
    match &spec.keys {
        KeyMapping::PerObject => keys.push(RequestKey::object(w, change.object_key())),
        KeyMapping::Aggregate(k) => keys.push(RequestKey::aggregate(k.as_str())),
        KeyMapping::None => {}
        KeyMapping::Owner(p) => {
            let primary = &manifest.watches[*p].gvk;
            for obj in change.versions() {
                if let Some(owner) = obj
                    .owner
                    .as_ref()
                    .filter(|o| *o.kind == primary.kind && o.group() == primary.group)
                {
                    keys.push(RequestKey::object(
                        *p,
                        object_key(&obj.namespace, &owner.name),
                    ));
                }
            }
        }
        KeyMapping::SameNamespace(p) => {
            if let Some(primaries) = caches.get(*p) {
                for obj in change.versions() {
                    for o in primaries.store.in_namespace(&obj.namespace) {
                        keys.push(RequestKey::object(*p, o.key()));
                    }
                }
            }
        }
        KeyMapping::ByIndex {
            primary,
            index,
            field,
        } => {
            if let (Some(primaries), Some(this)) = (caches.get(*primary), caches.get(w)) {
                let indexed = primaries.at(manifest.watches[*primary].index_path(*index));
                for obj in change.versions() {
                    for value in strings(obj, this.at(*field)) {
                        for o in primaries.store.with_value(indexed, value) {
                            keys.push(RequestKey::object(*primary, o.key()));
                        }
                    }
                }
            }
        }
    }
    keys.sort();
    keys.dedup();
    keys
}

/// Every key the guest's world produces (the resync set): each primary's
/// objects and each aggregate key.
pub(crate) fn all_keys(manifest: &GuestManifest, caches: &[WatchCache]) -> Vec<RequestKey> {
    let mut keys = Vec::new();
    for (w, (spec, cache)) in manifest.watches.iter().zip(caches).enumerate() {
        match &spec.keys {
            KeyMapping::Aggregate(k) => keys.push(RequestKey::aggregate(k.as_str())),
            KeyMapping::PerObject => {
                for ((namespace, name), _) in cache.store.versions() {
                    keys.push(RequestKey::object(w, object_key(&namespace, &name)));
                }
            }
            _ => {}
        }
    }
    keys
}

/// A handler for watch `w`: enqueues the keys each change wakes, telling
/// `loops` which change woke them (the echo of a key's own write, or not).
pub(crate) fn handler(
    manifest: Arc<GuestManifest>,
    caches: Arc<[WatchCache]>,
    w: usize,
    queue: crate::workqueue::Workqueue<RequestKey>,
    loops: Arc<HotLoops>,
) -> crate::informer::Handler {
    Arc::new(move |change: &Change| {
        let gvk = &manifest.watches[w].gvk;
        for key in keys_for(&manifest, &caches, w, change) {
            loops.woken_by(
                &key,
                gvk,
                &change.namespace,
                &change.name,
                &change.resource_version,
            );
            queue.add(key);
        }
    })
}
