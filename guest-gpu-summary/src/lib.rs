//! The GPU-summary guest: keeps one ConfigMap whose `data` maps each node to
//! the number of `nvidia.com/gpu` that pods scheduled there request.
//!
//! This file is only the glue between the guest SDK and the plain-Rust
//! logic in [`summary`]; it never does I/O (the host does every read and
//! write) and never panics on snapshot contents. It exports the
//! `aggregate-controller` world: the host keeps the summary up to date
//! incrementally (`map` per changed pod: its node and device count, or a
//! Warning for an invalid quantity; a `sum` per node; `render` the
//! ConfigMap), and `reconcile` computes the same plan from a whole snapshot
//! (offline runs, and the reference the tests compare with).
//!
//! Configuration keys (all optional):
//! - `name`: the ConfigMap's name (default `gpu-summary`);
//! - `namespace`: its namespace (default: the host's namespace);
//! - `resource`: the extended resource to count (default `nvidia.com/gpu`).

pub mod node_key;
pub mod summary;

use wasmctrl_guest_aggregate::{AggregateGuest, AggregateSpec, Contributions, Group, Reduction};
use wasmctrl_guest_sdk::pod_request::PodResources;
use wasmctrl_guest_sdk::{
    document, Entry, Environment, Event, GroupVersionKind, Manifest, Object, ObjectRef, Plan,
    ReconcileError, Request, Schema, Snapshot, View, Watch, WriteRule,
};

/// The guest's name, used in its field manager (`wasmctrl/gpu-summary`).
pub const GUEST_NAME: &str = "gpu-summary";
/// The request key every pod change maps to: the summary is one object.
pub const AGGREGATE_KEY: &str = "gpu-summary";
/// The name of the pod watch.
pub const POD_WATCH: &str = "pods";
/// Default ConfigMap name.
pub const DEFAULT_CONFIGMAP: &str = "gpu-summary";
/// Default resource counted.
pub const DEFAULT_RESOURCE: &str = "nvidia.com/gpu";

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
        let config = env.settings(&["name", "namespace", "resource"])?;
        let settings = Settings {
            name: config.get_or("name", DEFAULT_CONFIGMAP),
            namespace: config.get_or("namespace", &env.namespace),
            resource: config.get_or("resource", DEFAULT_RESOURCE),
        };
        if settings.namespace.is_empty() {
            return Err("no namespace: set configuration key \"namespace\"".to_string());
        }
        if settings.resource.contains('\'') {
            return Err(format!("invalid resource name {:?}", settings.resource));
        }
        Ok(settings)
    }
}

/// A pod as the summary reads it: a view configured by the counted
/// `resource` (`Pod::fields(resource)`, `PodFields::resolve(.., resource)`).
// ANCHOR: view
#[derive(View)]
pub struct Pod<'a> {
    /// Node, phase, and the containers' requests and limits of the resource.
    #[pod_resources("{resource}")]
    pub resources: PodResources<'a>,
}
// ANCHOR_END: view

/// The manifest for the given settings.
pub fn manifest_for(settings: &Settings) -> Manifest {
    // Unscheduled and finished pods never hold devices: the API server
    // filters them, so the host does not even cache them.
    let pods = Watch::new(POD_WATCH, GroupVersionKind::core("Pod"))
        .plural("pods")
        .field_selector("spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed")
        .fields(Pod::fields(&settings.resource))
        .aggregate(AGGREGATE_KEY);
    let summary = WriteRule::new(GroupVersionKind::core("ConfigMap"))
        .namespace(&settings.namespace)
        .name(&settings.name);
    Manifest::new(GUEST_NAME).watch(pods).write(summary)
}

/// The guest.
pub struct GpuSummary;

/// What a reconcile reads: the settings and the pod view's handles.
pub struct Fields {
    settings: Settings,
    pods: PodFields,
}

impl wasmctrl_guest_sdk::Guest for GpuSummary {
    type Fields = Fields;

    fn describe(env: &Environment) -> Result<Manifest, String> {
        Settings::from_env(env).map(|s| manifest_for(&s))
    }

    fn fields(env: &Environment, schema: &Schema) -> Result<Fields, String> {
        let settings = Settings::from_env(env)?;
        let pods = PodFields::resolve(&schema.watch(POD_WATCH)?, &settings.resource)?;
        Ok(Fields { settings, pods })
    }

    fn reconcile(
        _: &Environment,
        _: &Request,
        snapshot: &Snapshot<'_>,
        f: &Fields,
    ) -> Result<Plan, ReconcileError> {
        let (s, pods) = (&f.settings, snapshot.objects(f.pods.watch()));
        let summary =
            summary::summarize_resource(&s.resource, pods.map(|p| f.pods.read(&p).resources));
        let mut plan = summary_plan(s, &summary::summary_data(&summary));
        for bad in &summary.invalid {
            plan.event(invalid_event(s, bad));
        }
        Ok(plan)
    }
}

/// The ConfigMap the summary goes to.
fn target(s: &Settings) -> ObjectRef {
    GroupVersionKind::core("ConfigMap").object(&s.namespace, &s.name)
}

/// The plan applying `data` to the summary ConfigMap.
fn summary_plan(s: &Settings, data: &std::collections::BTreeMap<String, String>) -> Plan {
    let mut plan = Plan::new();
    plan.apply(&document(&target(s), Entry("data", data)));
    plan
}

/// The Warning about a pod left out of the summary.
fn invalid_event(s: &Settings, bad: &summary::InvalidPod) -> Event {
    let pod = GroupVersionKind::core("Pod").object(&bad.namespace, &bad.name);
    let message = format!(
        "pod {}/{} not counted in {}/{}: {} has invalid quantity {:?}: {}",
        bad.namespace, bad.name, s.namespace, s.name, bad.field, bad.value, bad.message
    );
    Event::warning(pod, "InvalidQuantity", message).related(target(s))
}

// ANCHOR: aggregate
impl AggregateGuest for GpuSummary {
    fn aggregate(_: &Environment) -> Result<AggregateSpec, String> {
        Ok(AggregateSpec {
            key: AGGREGATE_KEY.to_string(),
            reduction: Reduction::Sum,
        })
    }

    fn map(
        _: &Environment,
        pod: &Object<'_>,
        f: &Fields,
        out: &mut Contributions,
    ) -> Result<(), ReconcileError> {
        // The same per-pod step as `reconcile`, on a one-pod summary.
        let one = summary::summarize_resource(&f.settings.resource, [f.pods.read(pod).resources]);
        for (node, gpus) in &one.per_node {
            out.add(node, *gpus);
        }
        for bad in &one.invalid {
            out.event(invalid_event(&f.settings, bad));
        }
        Ok(())
    }

    fn render(_: &Environment, groups: &[Group], f: &Fields) -> Result<Plan, ReconcileError> {
        let data = groups
            .iter()
            .filter(|g| g.value > 0)
            .map(|g| (g.key.clone(), g.value.to_string()))
            .collect();
        Ok(summary_plan(&f.settings, &data))
    }

    /// `render` is entry-wise over `data`: a node's entry is its own total
    /// (none when it is 0), and the rest of the ConfigMap depends on no
    /// node. The host then renders and writes only the nodes that changed.
    fn entry_field(_: &Environment) -> Option<String> {
        Some("data".to_string())
    }
}

wasmctrl_guest_aggregate::export_aggregate_guest!(GpuSummary);
// ANCHOR_END: aggregate

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
