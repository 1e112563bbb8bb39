//! The GPU-summary guest: keeps one ConfigMap whose `data` maps each node to
//! the number of `nvidia.com/gpu` that pods scheduled there request.
//!
//! This file is only the glue between the wasmctrl contract (`wit/`) and the
//! plain-Rust logic in [`quantity`] and [`summary`]; it never does I/O (the
//! host does every read and write) and never panics on snapshot contents.
//!
//! Configuration keys (all optional):
//! - `name`: the ConfigMap's name (default `gpu-summary`);
//! - `namespace`: its namespace (default: the host's namespace);
//! - `resource`: the extended resource to count (default `nvidia.com/gpu`).

pub mod json;
pub mod quantity;
pub mod snapshot;
pub mod summary;

#[allow(missing_docs, unsafe_code, clippy::all)]
mod bindings {
    wit_bindgen::generate!({
        world: "controller",
        path: "../wit",
        additional_derives: [PartialEq],
    });
}

use bindings::exports::wasmctrl::controller::reconciler::Guest;
pub use bindings::wasmctrl::controller::types::{
    Bucket, Environment, Event, EventType, GroupVersionKind, Index, IndexSpec, KeyMapping,
    Manifest, ObjectRef, Plan, ReconcileError, Request, Snapshot, Watch, Write, WriteRule,
};
use snapshot::SnapshotView;
use summary::{ContainerGpu, PodGpu};

/// The guest's name, used in its field manager (`wasmctrl/gpu-summary`).
pub const GUEST_NAME: &str = "gpu-summary";
/// The request key every pod change maps to: the summary is one object.
pub const AGGREGATE_KEY: &str = "gpu-summary";
/// Default ConfigMap name.
pub const DEFAULT_CONFIGMAP: &str = "gpu-summary";
/// Default resource counted.
pub const DEFAULT_RESOURCE: &str = "nvidia.com/gpu";

/// Slots of the pod watch's projection, in the order of [`pod_fields`].
mod slot {
    pub const NODE_NAME: usize = 0;
    pub const PHASE: usize = 1;
    pub const REQUESTS: usize = 2;
    pub const LIMITS: usize = 3;
    pub const INIT_RESTART_POLICY: usize = 4;
    pub const INIT_REQUESTS: usize = 5;
    pub const INIT_LIMITS: usize = 6;
    pub const OVERHEAD: usize = 7;
}

/// Where the summary goes and what it counts, read from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// ConfigMap name.
    pub name: String,
    /// ConfigMap namespace.
    pub namespace: String,
    /// Extended resource name counted.
    pub resource: String,
}

impl Settings {
    /// Reads the configuration; unknown keys and empty values are errors that
    /// name the key, so an operator's typo never goes unnoticed.
    pub fn from_env(env: &Environment) -> Result<Self, String> {
        let mut settings = Settings {
            name: DEFAULT_CONFIGMAP.to_string(),
            namespace: env.namespace.clone(),
            resource: DEFAULT_RESOURCE.to_string(),
        };
        for (key, value) in &env.config {
            let slot = match key.as_str() {
                "name" => &mut settings.name,
                "namespace" => &mut settings.namespace,
                "resource" => &mut settings.resource,
                other => {
                    return Err(format!(
                        "unknown configuration key {other:?} (known: name, namespace, resource)"
                    ))
                }
            };
            if value.is_empty() {
                return Err(format!("configuration key {key:?} must not be empty"));
            }
            value.clone_into(slot);
        }
        if settings.namespace.is_empty() {
            return Err("no namespace: set configuration key \"namespace\"".to_string());
        }
        if settings.resource.contains('\'') {
            return Err(format!("invalid resource name {:?}", settings.resource));
        }
        Ok(settings)
    }
}

/// The pod projection: exactly the fields the summary needs.
pub fn pod_fields(resource: &str) -> Vec<String> {
    vec![
        "spec.nodeName".to_string(),
        "status.phase".to_string(),
        format!("spec.containers[*].resources.requests['{resource}']"),
        format!("spec.containers[*].resources.limits['{resource}']"),
        "spec.initContainers[*].restartPolicy".to_string(),
        format!("spec.initContainers[*].resources.requests['{resource}']"),
        format!("spec.initContainers[*].resources.limits['{resource}']"),
        format!("spec.overhead['{resource}']"),
    ]
}

/// The manifest for the given settings.
pub fn manifest_for(settings: &Settings) -> Manifest {
    Manifest {
        name: GUEST_NAME.to_string(),
        watches: vec![Watch {
            name: "pods".to_string(),
            gvk: GroupVersionKind {
                group: String::new(),
                version: "v1".to_string(),
                kind: "Pod".to_string(),
            },
            plural: Some("pods".to_string()),
            namespace: None,
            label_selector: None,
            // Unscheduled and finished pods never hold devices: let the API
            // server filter them so the host does not even cache them.
            field_selector: Some(
                "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed".to_string(),
            ),
            fields: pod_fields(&settings.resource),
            indexes: Vec::new(),
            keys: KeyMapping::Aggregate(AGGREGATE_KEY.to_string()),
            finalizer: None,
        }],
        writes: vec![WriteRule {
            gvk: GroupVersionKind {
                group: String::new(),
                version: "v1".to_string(),
                kind: "ConfigMap".to_string(),
            },
            namespace: Some(settings.namespace.clone()),
            names: vec![settings.name.clone()],
            status: false,
        }],
        resync_seconds: None,
    }
}

/// Decodes the pods of watch 0 from a snapshot.
pub fn pods_from_snapshot<'a>(view: &'a SnapshotView<'a>) -> Vec<PodGpu<'a>> {
    let containers = |o: usize, req: usize, lim: usize, policy: Option<usize>| {
        let n = view
            .field_len(o, req)
            .max(view.field_len(o, lim))
            .max(policy.map_or(0, |p| view.field_len(o, p)));
        (0..n)
            .map(|i| ContainerGpu {
                request: view.text(o, req, i),
                limit: view.text(o, lim, i),
                restart_policy: policy.and_then(|p| view.text(o, p, i)),
            })
            .collect::<Vec<_>>()
    };
    (0..view.len())
        .filter(|&o| view.watch(o) == 0)
        .map(|o| PodGpu {
            namespace: view.namespace(o),
            name: view.name(o),
            node_name: view.first(o, slot::NODE_NAME),
            phase: view.first(o, slot::PHASE),
            containers: containers(o, slot::REQUESTS, slot::LIMITS, None),
            init_containers: containers(
                o,
                slot::INIT_REQUESTS,
                slot::INIT_LIMITS,
                Some(slot::INIT_RESTART_POLICY),
            ),
            overhead: view.first(o, slot::OVERHEAD),
        })
        .collect()
}

/// The whole reconcile, as a plain function (natively testable).
pub fn reconcile_plan(env: &Environment, snapshot: &Snapshot) -> Result<Plan, ReconcileError> {
    let settings = Settings::from_env(env).map_err(ReconcileError::Terminal)?;
    let view = SnapshotView::new(snapshot).map_err(ReconcileError::Terminal)?;
    let pods = pods_from_snapshot(&view);
    let summary = summary::summarize_resource(&settings.resource, pods);
    let data = summary::summary_data(&summary);

    let mut doc = String::with_capacity(128 + data.len() * 32);
    doc.push_str(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"#);
    json::push_str(&mut doc, &settings.name);
    doc.push_str(r#","namespace":"#);
    json::push_str(&mut doc, &settings.namespace);
    doc.push_str(r#"},"data":{"#);
    for (i, (node, count)) in data.iter().enumerate() {
        if i > 0 {
            doc.push(',');
        }
        json::push_str(&mut doc, node);
        doc.push(':');
        json::push_str(&mut doc, count);
    }
    doc.push_str("}}");

    let events = summary
        .invalid
        .iter()
        .map(|bad| Event {
            regarding: ObjectRef {
                api_version: "v1".to_string(),
                kind: "Pod".to_string(),
                namespace: Some(bad.namespace.clone()),
                name: bad.name.clone(),
            },
            related: None,
            event_type: EventType::Warning,
            reason: "InvalidQuantity".to_string(),
            action: "Summarize".to_string(),
            message: format!(
                "pod {}/{} not counted in {}/{}: {} has invalid quantity {:?}: {}",
                bad.namespace,
                bad.name,
                settings.namespace,
                settings.name,
                bad.field,
                bad.value,
                bad.message
            ),
        })
        .collect();

    Ok(Plan {
        writes: vec![Write::Apply(doc)],
        events,
        requeue_after_ms: None,
    })
}

#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
struct Component;

impl Guest for Component {
    fn describe(env: Environment) -> Result<Manifest, String> {
        Settings::from_env(&env).map(|s| manifest_for(&s))
    }

    fn reconcile(
        env: Environment,
        _request: Request,
        snapshot: Snapshot,
    ) -> Result<Plan, ReconcileError> {
        reconcile_plan(&env, &snapshot)
    }
}

// Exported only in the component build: the export symbols' names are not
// valid native link names, and native tests call `reconcile_plan` directly.
#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)] // the generated export shims; this crate's own code has none
mod export {
    use super::Component;
    crate::bindings::export!(Component with_types_in crate::bindings);
}

#[cfg(test)]
mod tests;
