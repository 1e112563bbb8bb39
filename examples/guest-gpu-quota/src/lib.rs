//! The GpuQuota guest: a complete controller written with the guest SDK.
//!
//! A `GpuQuota` (`gpuquotas.example.com/v1`, namespaced, see `crd.yaml`)
//! sets `spec.limit`, the GPUs its namespace's pods may hold. For each quota
//! this guest writes `status.used` (the namespace's scheduled, non-terminal
//! pods' `nvidia.com/gpu` requests, counted as kube-scheduler does),
//! `status.observedGeneration` and a `Ready` condition (`False`, reason
//! `OverLimit`, when over, with a Warning event). A pod change wakes only
//! the quotas of its namespace (`same-namespace` key mapping). The host
//! holds the finalizer `example.com/gpu-quota` on every quota; when a quota
//! is deleted this guest's clean-up (nothing external here) ends by
//! removing it. This file is the glue (manifest, the views [`Quota`] and
//! [`Pod`] with their paths, plan); the decision is [`quota`].

pub mod quota;

use wasmctrl_guest_sdk::pod_request::PodResources;
use wasmctrl_guest_sdk::{
    Condition, Environment, Event, GroupVersionKind, Lifecycle, Manifest, Plan, ReconcileError,
    Request, Schema, Snapshot, View, Watch, WriteRule,
};

/// The guest's name (field manager `wasmctrl/gpu-quota`).
pub const GUEST_NAME: &str = "gpu-quota";
/// The finalizer the host keeps on every quota until clean-up is done.
pub const FINALIZER: &str = "example.com/gpu-quota";
/// The primary watch: the quotas.
pub const QUOTA_WATCH: &str = "quotas";
/// The secondary watch: pods, related to the quotas of their namespace.
pub const POD_WATCH: &str = "pods";
/// The resource counted (the one [`Pod`] reads).
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// The finalizers: projected so that [`Lifecycle::Deleting`] releases ours
/// only if it is there.
pub use wasmctrl_guest_sdk::lifecycle::FINALIZERS;

/// A quota, as this guest reads it.
#[derive(View)]
pub struct Quota {
    /// `spec.limit` (the CRD requires it).
    #[field("spec.limit")]
    pub limit: Option<i64>,
    /// `status.conditions`, to keep `Ready`'s transition time.
    #[conditions("status.conditions")]
    pub conditions: Vec<Condition>,
}

/// A pod's [`GPU_RESOURCE`] requests, as kube-scheduler counts them.
#[derive(View)]
pub struct Pod<'a> {
    /// Node, phase, and the requests and limits of every container.
    #[pod_resources("nvidia.com/gpu")]
    pub resources: PodResources<'a>,
}

/// The `GpuQuota` type.
pub fn quota_gvk() -> GroupVersionKind {
    GroupVersionKind::new("example.com", "v1", "GpuQuota")
}

/// The manifest: quotas (per object, finalizer) and the pods of their
/// namespaces; writes: quota status and finalizers.
pub fn manifest() -> Manifest {
    let quotas = Watch::new(QUOTA_WATCH, quota_gvk())
        .fields(Quota::FIELDS)
        .fields([FINALIZERS])
        .per_object()
        .finalizer(FINALIZER);
    let pods = Watch::new(POD_WATCH, GroupVersionKind::core("Pod"))
        .field_selector("spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed")
        .fields(Pod::FIELDS)
        .same_namespace(QUOTA_WATCH);
    Manifest::new(GUEST_NAME)
        .watch(quotas)
        .watch(pods)
        .write(WriteRule::new(quota_gvk()).status(true))
}

/// The guest.
pub struct GpuQuota;

/// The views a reconcile reads through, resolved.
pub struct Fields {
    quotas: QuotaFields,
    pods: PodFields,
}

impl wasmctrl_guest_sdk::Guest for GpuQuota {
    type Fields = Fields;

    fn describe(env: &Environment) -> Result<Manifest, String> {
        env.settings(&[])?;
        Ok(manifest())
    }

    fn fields(_: &Environment, schema: &Schema) -> Result<Fields, String> {
        Ok(Fields {
            quotas: Quota::resolve(&schema.watch(QUOTA_WATCH)?)?,
            pods: Pod::resolve(&schema.watch(POD_WATCH)?)?,
        })
    }

    fn reconcile(
        env: &Environment,
        request: &Request,
        snapshot: &Snapshot<'_>,
        f: &Fields,
    ) -> Result<Plan, ReconcileError> {
        let mut plan = Plan::new();
        let object = match snapshot.lifecycle(request) {
            // Gone or unselected (or not a quota key): a quota controls no
            // objects (it only writes its own status), so nothing is left
            // to clean up, and an unselected quota is no longer ours.
            Lifecycle::Gone(_) | Lifecycle::Unselected(_) => return Ok(plan),
            // Clean-up would go here; then release the object.
            Lifecycle::Deleting(quota) => {
                quota.release(&mut plan);
                return Ok(plan);
            }
            Lifecycle::Live(quota) => quota,
        };
        let (quota, target) = (f.quotas.read(&object), object.object_ref());
        let pods = snapshot.in_namespace(f.pods.watch(), object.namespace());
        let usage = quota::usage(GPU_RESOURCE, pods.map(|p| f.pods.read(&p).resources));
        // The CRD requires `spec.limit`; were it missing, any GPU is over.
        let limit = quota.limit.unwrap_or(0);
        let generation = object.generation();
        let status = quota::status(limit, usage.used, generation, quota.conditions, env.now_ms);
        plan.status(&target, &status);
        if !status.is_ready() {
            let message = format!(
                "namespace {} requests {} GPUs, over its limit of {limit}",
                object.namespace(),
                usage.used
            );
            plan.event(Event::warning(target.clone(), quota::OVER_LIMIT, message));
        }
        for (pod, why) in &usage.invalid {
            let pod = GroupVersionKind::core("Pod").object(object.namespace(), pod);
            let message = format!("pod not counted in quota {}: {why}", target.name);
            plan.event(Event::warning(pod, "InvalidQuantity", message).related(target.clone()));
        }
        Ok(plan)
    }
}

wasmctrl_guest_sdk::export_guest!(GpuQuota);

#[cfg(test)]
mod tests;
