//! Offline reconcile: run a guest once over objects read from files, exactly
//! as the host would (same selectors, projection, snapshot, runtime, limits
//! and plan validation), and report the plan. A tool over the runtime, not
//! part of it: `wasmctrl reconcile`, the examples and the benches use it,
//! and no module of the host's control loop imports it.
//!
//! Owns reading objects from files ([`objects`]), the mapping from a flat
//! list of objects to each watch's cached view (indexed stores, as the host
//! keeps them) and the choice of keys (all, or `--key`); a plan prints as
//! [`ValidatedPlan::to_json`](crate::guest::ValidatedPlan::to_json). It
//! never contacts a cluster, so a host-managed finalizer is not added
//! offline.

use serde_json::{json, Value as Json};

use crate::guest::{Environment, GuestError, GuestManifest, GuestModule, KeyMapping};
use crate::projection::{Interner, Keep, ProjectedObject};
use crate::relations::{self, WatchCache};
use crate::request::RequestKey;
use crate::store::Writer;
use wasmctrl_kube_rules::selector::{extract_attrs, FieldSelector, LabelSelector, SelectorError};

pub mod objects;

/// Why an offline reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    /// Loading or running the guest failed.
    #[error(transparent)]
    Guest(#[from] GuestError),
    /// `--key` names no key the objects produce, and no primary that is
    /// gone either.
    #[error("guest {guest}: no request key {key:?} in these objects (keys: {})", known.join(", "))]
    UnknownKey {
        /// The guest.
        guest: String,
        /// The key asked for.
        key: String,
        /// The keys there are.
        known: Vec<String>,
    },
    /// A selector in the manifest does not parse.
    #[error("guest {guest}: {source}")]
    Selector {
        /// The guest.
        guest: String,
        /// The parse error.
        #[source]
        source: SelectorError,
    },
}

/// What to keep of the objects read from files for `manifest`: what its watches need: their projections and index
/// fields, plus identity, labels and the fields field selectors read.
/// `List` documents keep the same under `items`.
pub fn keep_for(manifest: &GuestManifest) -> Keep {
    let mut object = Keep::for_paths(manifest.watches.iter().flat_map(|w| w.projection.paths()));
    object.add_leaf("metadata.labels");
    // Plus every field label a selector on the watched resources can
    // read, as the embedded API server defines them.
    for w in &manifest.watches {
        for leaf in wasmctrl_kube_rules::selector::supported_fields(&w.resource_name()) {
            object.add_leaf(leaf);
        }
    }
    object.documents()
}

/// The objects of each watch, projected, sorted by namespace then name.
pub fn project_world(
    manifest: &GuestManifest,
    objects: &[Json],
    interner: &mut Interner,
) -> Result<Vec<Vec<ProjectedObject>>, OfflineError> {
    let mut out = Vec::with_capacity(manifest.watches.len());
    for w in &manifest.watches {
        let sel_err = |source| OfflineError::Selector {
            guest: manifest.name.clone(),
            source,
        };
        // The embedded API server's selectors: offline filtering is the
        // same code (and the same supported field labels) a list uses.
        let resource = w.resource_name();
        let labels =
            LabelSelector::parse(w.label_selector.as_deref().unwrap_or("")).map_err(sel_err)?;
        let fields = FieldSelector::parse(w.field_selector.as_deref().unwrap_or(""), &resource)
            .map_err(sel_err)?;
        let api_version = w.gvk.api_version();
        let mut list: Vec<ProjectedObject> = objects
            .iter()
            .filter(|o| {
                o.get("apiVersion").and_then(Json::as_str) == Some(api_version.as_str())
                    && o.get("kind").and_then(Json::as_str) == Some(w.gvk.kind.as_str())
                    && w.namespace.as_deref().is_none_or(|ns| {
                        o.pointer("/metadata/namespace").and_then(Json::as_str) == Some(ns)
                    })
                    && {
                        let attrs = extract_attrs(&resource, o);
                        labels.matches(&attrs) && fields.matches(&attrs)
                    }
            })
            .map(|o| w.projection.project(o, interner))
            .collect();
        list.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        list.dedup_by(|a, b| a.namespace == b.namespace && a.name == b.name);
        out.push(list);
    }
    Ok(out)
}

/// The world as the host would cache it: one indexed store per watch,
/// holding the projected objects (the same stores, indexes, key mappings
/// and per-key object selection the controller uses).
fn caches(manifest: &GuestManifest, world: Vec<Vec<ProjectedObject>>) -> Vec<WatchCache> {
    manifest
        .watches
        .iter()
        .zip(world)
        .map(|(w, objects)| {
            let positions: Vec<usize> = (0..w.projection.paths().len()).collect();
            let indexed = crate::projection::field_positions(&w.projection, &w.indexed_paths());
            let namespaced =
                relations::namespaced_by_objects(objects.iter().map(|o| &*o.namespace));
            let mut writer = Writer::with_field_indexes(&indexed);
            for o in objects {
                writer.apply(o);
            }
            WatchCache {
                store: writer.store(),
                positions,
                namespaced,
            }
        })
        .collect()
}

/// Request keys the world produces, in order (an aggregate key even when
/// the world is empty).
pub fn keys(manifest: &GuestManifest, world: &[Vec<ProjectedObject>]) -> Vec<String> {
    let caches = caches(manifest, world.to_vec());
    let mut keys: Vec<String> = request_keys(manifest, &caches)
        .into_iter()
        .map(|k| k.key.to_string())
        .collect();
    keys.dedup();
    keys
}

fn request_keys(manifest: &GuestManifest, caches: &[WatchCache]) -> Vec<RequestKey> {
    let mut keys: std::collections::BTreeSet<RequestKey> =
        relations::all_keys(manifest, caches).into_iter().collect();
    for w in &manifest.watches {
        if let KeyMapping::Aggregate(k) = &w.keys {
            keys.insert(RequestKey::aggregate(k.as_str()));
        }
    }
    keys.into_iter().collect()
}

/// Runs the guest (described with `env` as `manifest`; `env.now-ms` is the
/// clock it sees) over `objects` once per request key — or only for `key`
/// — exactly as the host would (per-key snapshots included). Returns one
/// document per key: the request and its plan
/// ([`ValidatedPlan::to_json`](crate::guest::ValidatedPlan::to_json)).
pub fn reconcile(
    module: &GuestModule,
    env: &Environment,
    manifest: &GuestManifest,
    objects: &[Json],
    key: Option<&str>,
) -> Result<Vec<Json>, OfflineError> {
    let mut interner = Interner::default();
    let world = project_world(manifest, objects, &mut interner)?;
    let caches = caches(manifest, world);
    let all = request_keys(manifest, &caches);
    let chosen: Vec<RequestKey> = match key {
        None => all,
        Some(k) => {
            let found: Vec<RequestKey> = all.iter().filter(|r| &*r.key == k).cloned().collect();
            if !found.is_empty() {
                found
            } else if let Some(gone) = gone_primary(manifest, k) {
                // The host reconciles a deleted primary's key once more,
                // its object absent from the snapshot: so does `--key`.
                vec![gone]
            } else {
                return Err(OfflineError::UnknownKey {
                    guest: manifest.name.clone(),
                    key: k.to_string(),
                    known: all.iter().map(|r| r.key.to_string()).collect(),
                });
            }
        }
    };
    let mut out = Vec::with_capacity(chosen.len());
    for request_key in chosen {
        let data = relations::snapshot_for(manifest, &caches, &request_key);
        let presence = relations::presence_in_caches(&caches, &request_key);
        let request = relations::guest_request(manifest, &request_key, presence);
        let (result, _stats) = module.reconcile(manifest, env, &request, data);
        let plan = result?;
        out.push(json!({
            "request": {
                "key": request.key,
                "watch": request.watch,
                "presence": request.presence.map(crate::guest::Presence::as_str),
            },
            "plan": plan.to_json(),
        }));
    }
    Ok(out)
}

/// The request key `key` names when no object of the world produces it: a
/// primary that is gone, when the manifest has exactly one per-object watch
/// and `key` has a primary key's shape (`namespace/name`, or `name` for a
/// cluster-scoped watch).
fn gone_primary(manifest: &GuestManifest, key: &str) -> Option<RequestKey> {
    let mut primaries = manifest
        .watches
        .iter()
        .enumerate()
        .filter(|(_, w)| matches!(w.keys, KeyMapping::PerObject));
    let (p, watch) = primaries.next()?;
    if primaries.next().is_some() {
        return None;
    }
    let parts: Vec<&str> = key.split('/').collect();
    let shaped = match (watch.namespace.as_deref(), parts.as_slice()) {
        (Some(ns), [key_ns, name]) => *key_ns == ns && !name.is_empty(),
        (None, [ns, name]) => !ns.is_empty() && !name.is_empty(),
        (None, [name]) => !name.is_empty(),
        _ => false,
    };
    shaped.then(|| RequestKey::object(p, key))
}
