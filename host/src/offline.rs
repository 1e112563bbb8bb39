//! Offline reconcile: run a guest once over objects read from files, exactly
//! as the host would (same selectors, projection, snapshot, runtime, limits
//! and plan validation), and report the plan.
//!
//! Owns the mapping from a flat list of objects to each watch's cached view,
//! the choice of request keys, and the JSON shape of a printed plan (the
//! contract's field names, one document per key). It never contacts a
//! cluster.

use std::time::Duration;

use serde_json::{json, Value as Json};

use crate::guest::{
    self, Environment, GuestError, GuestManifest, GuestModule, KeyMapping, ObjectKey, ValidatedPlan,
};
use crate::projection::{Interner, ProjectedObject};
use wasmctrl_kube_rules::selector::{extract_attrs, FieldSelector, LabelSelector, SelectorError};

/// Why an offline reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    /// Loading or running the guest failed.
    #[error(transparent)]
    Guest(#[from] GuestError),
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

/// The resource (plural) of a watch: as declared, else the conventional
/// lowercase plural of its kind.
pub fn resource_name(w: &crate::guest::WatchSpec) -> String {
    w.plural
        .clone()
        .unwrap_or_else(|| format!("{}s", w.gvk.kind.to_lowercase()))
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
        let resource = resource_name(w);
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

/// Request keys the world produces, in order.
pub fn keys(manifest: &GuestManifest, world: &[Vec<ProjectedObject>]) -> Vec<String> {
    let mut keys = std::collections::BTreeSet::new();
    for (w, objs) in manifest.watches.iter().zip(world) {
        match &w.keys {
            KeyMapping::Aggregate(k) => {
                keys.insert(k.clone());
            }
            KeyMapping::PerObject => {
                for o in objs {
                    keys.insert(if o.namespace.is_empty() {
                        o.name.to_string()
                    } else {
                        format!("{}/{}", o.namespace, o.name)
                    });
                }
            }
            KeyMapping::None => {}
        }
    }
    // An aggregate guest with an empty world still reconciles its key.
    for w in &manifest.watches {
        if let KeyMapping::Aggregate(k) = &w.keys {
            keys.insert(k.clone());
        }
    }
    keys.into_iter().collect()
}

/// Which request keys an offline reconcile runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Keys {
    /// Every key the objects produce under the manifest's key mappings
    /// (see [`keys`]).
    #[default]
    All,
    /// Exactly these, in this order, whether or not an object produces them
    /// (a per-object key whose object is gone is a real request too).
    Only(Vec<String>),
}

/// Runs the guest (described with `env` as `manifest`) over `objects` once
/// per request key, each call on the same snapshot, and returns one plan per
/// key in the printed form of [`plan_json`]. Plans are never merged: each
/// is exactly what the host would act on for that key.
pub fn reconcile(
    module: &GuestModule,
    env: &Environment,
    manifest: &GuestManifest,
    objects: &[Json],
    which: &Keys,
) -> Result<Vec<Json>, OfflineError> {
    let mut interner = Interner::default();
    let world = project_world(manifest, objects, &mut interner)?;
    let views: Vec<guest::snapshot::WatchView<'_>> = world
        .iter()
        .zip(&manifest.watches)
        .map(|(objs, w)| {
            guest::snapshot::WatchView::identity(objs.iter().collect(), w.projection.paths().len())
        })
        .collect();
    let snapshot = guest::snapshot::build(manifest, &views);
    let keys = match which {
        Keys::All => keys(manifest, &world),
        Keys::Only(keys) => keys.clone(),
    };
    let mut plans = Vec::with_capacity(keys.len());
    for key in keys {
        let (result, _stats) = module.reconcile(manifest, env, &key, &snapshot);
        plans.push(plan_json(&key, &result?));
    }
    Ok(plans)
}

/// A contract `object-ref` as JSON (field names as in `wit/controller.wit`;
/// `namespace` is null for a cluster-scoped object).
fn object_ref_json(k: &ObjectKey) -> Json {
    json!({
        "api-version": k.gvk.api_version(),
        "kind": k.gvk.kind,
        "namespace": k.namespace,
        "name": k.name,
    })
}

/// The printed form of the plan for `key`: the contract's `plan` record
/// with its field names (`apply`, `delete`, `events`, `requeue-after-ms`;
/// events as `regarding`, `event-type` (`normal`/`warning`), `reason`,
/// `message`), each applied document as JSON rather than a string, and the
/// request `key` it answers.
pub fn plan_json(key: &str, plan: &ValidatedPlan) -> Json {
    let apply: Vec<&Json> = plan.apply.iter().map(|(_, o)| o).collect();
    let delete: Vec<Json> = plan.delete.iter().map(object_ref_json).collect();
    let events: Vec<Json> = plan
        .events
        .iter()
        .map(|e| {
            json!({
                "regarding": object_ref_json(&e.regarding),
                "event-type": match e.event_type {
                    guest::EventType::Normal => "normal",
                    guest::EventType::Warning => "warning",
                },
                "reason": e.reason,
                "message": e.message,
            })
        })
        .collect();
    let requeue = plan
        .requeue_after
        .map(|d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    json!({
        "key": key,
        "apply": apply,
        "delete": delete,
        "events": events,
        "requeue-after-ms": requeue,
    })
}
