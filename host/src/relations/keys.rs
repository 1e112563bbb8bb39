//! Mapping changes to request keys: what an event handler computes.
//!
//! Owns the key mappings of a validated manifest — `per-object`,
//! `aggregate`, `owner` (the controller owner reference), `same-namespace`
//! `by-index` (a field value looked up in a primary's index, kept to the
//! object's namespace when the link says `same-namespace:`) and `all`
//! (every primary: the change costs exactly the keys it wakes) — and the
//! full key set a resync enqueues. Every lookup goes through a store index
//! (namespace, field value) or the object itself (owner reference): a
//! change costs the keys it wakes, never a scan of the world. It never
//! reconciles, never blocks and never writes.

use super::{namespace_of, primaries_of_namespace, strings, WatchCache};
use crate::guest::{GuestManifest, KeyMapping};
use crate::request::RequestKey;
use crate::store::object_key;
use crate::store::Change;

/// The request keys a change to an object of watch `w` wakes.
pub fn keys_for(
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
            // A namespaced owner is in its child's namespace; a
            // cluster-scoped one (a tenant owning objects in many
            // namespaces) in none.
            let namespaced = caches.get(*p).is_none_or(|c| c.namespaced);
            for obj in change.versions() {
                if let Some(owner) = obj
                    .owner
                    .as_ref()
                    .filter(|o| *o.kind == primary.kind && o.group() == primary.group)
                {
                    let namespace = if namespaced { &*obj.namespace } else { "" };
                    keys.push(RequestKey::object(*p, object_key(namespace, &owner.name)));
                }
            }
        }
        KeyMapping::SameNamespace(p) => {
            for obj in change.versions() {
                for o in primaries_of_namespace(manifest, caches, *p, &obj.namespace) {
                    keys.push(RequestKey::object(*p, o.key()));
                }
            }
        }
        KeyMapping::ByIndex {
            primary,
            index,
            field,
            same_namespace,
        } => {
            if let (Some(primaries), Some(this)) = (caches.get(*primary), caches.get(w)) {
                let indexed = primaries.at(manifest.watches[*primary].index_path(*index));
                for obj in change.versions() {
                    for value in strings(obj, this.at(*field)) {
                        for o in primaries.store.with_value(indexed, value) {
                            if !same_namespace
                                || namespace_of(manifest, caches, *primary, &o)
                                    == Some(&*obj.namespace)
                            {
                                keys.push(RequestKey::object(*primary, o.key()));
                            }
                        }
                    }
                }
            }
        }
        KeyMapping::All(p) => {
            if let Some(primaries) = caches.get(*p) {
                for ((namespace, name), _) in primaries.store.versions() {
                    keys.push(RequestKey::object(*p, object_key(&namespace, &name)));
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
pub fn all_keys(manifest: &GuestManifest, caches: &[WatchCache]) -> Vec<RequestKey> {
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
