//! Offline reconcile: run a guest once over objects read from files, exactly
//! as the host would (same selectors, projection, snapshot, runtime, limits
//! and plan validation), and report the plan.
//!
//! Owns the mapping from a flat list of objects to each watch's cached view
//! and the JSON shape of the printed plan. It never contacts a cluster.

use std::time::Duration;

use serde_json::{json, Value as Json};

use crate::guest::{
    self, Environment, GuestError, GuestManifest, GuestModule, KeyMapping, ValidatedPlan,
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

/// Runs the guest (described with `env` as `manifest`) over `objects` once
/// per request key and merges the plans.
pub fn reconcile(
    module: &GuestModule,
    env: &Environment,
    manifest: &GuestManifest,
    objects: &[Json],
) -> Result<Json, OfflineError> {
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
    let mut plans = Vec::new();
    for key in keys(manifest, &world) {
        let (result, _stats) = module.reconcile(manifest, env, &key, &snapshot);
        plans.push(result?);
    }
    Ok(plan_json(&plans))
}

/// The printed form of one or more plans.
pub fn plan_json(plans: &[ValidatedPlan]) -> Json {
    let apply: Vec<&Json> = plans
        .iter()
        .flat_map(|p| p.apply.iter().map(|(_, o)| o))
        .collect();
    let delete: Vec<Json> = plans
        .iter()
        .flat_map(|p| &p.delete)
        .map(|k| {
            let mut r =
                json!({"apiVersion": k.gvk.api_version(), "kind": k.gvk.kind, "name": k.name});
            if let Some(ns) = &k.namespace {
                r["namespace"] = json!(ns);
            }
            r
        })
        .collect();
    let events: Vec<Json> = plans
        .iter()
        .flat_map(|p| &p.events)
        .map(|e| {
            let mut regarding = json!({
                "apiVersion": e.regarding.gvk.api_version(),
                "kind": e.regarding.gvk.kind,
                "name": e.regarding.name,
            });
            if let Some(ns) = &e.regarding.namespace {
                regarding["namespace"] = json!(ns);
            }
            json!({
                "type": match e.event_type { guest::EventType::Normal => "Normal", guest::EventType::Warning => "Warning" },
                "reason": e.reason,
                "message": e.message,
                "regarding": regarding,
            })
        })
        .collect();
    let requeue = plans
        .iter()
        .filter_map(|p| p.requeue_after)
        .min()
        .map(|d: Duration| d.as_secs_f64());
    json!({"apply": apply, "delete": delete, "events": events, "requeueAfterSeconds": requeue})
}
