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
//! removing it. This file is the glue (manifest, field handles, plan);
//! the decision is [`quota`].

pub mod quota;

use wasmctrl_guest_sdk::condition::condition_paths;
use wasmctrl_guest_sdk::pod_request::{pod_resource_paths, PodResourceFields};
use wasmctrl_guest_sdk::snapshot::WatchId;
use wasmctrl_guest_sdk::{
    ConditionFields, Environment, Event, Field, GroupVersionKind, Manifest, Plan, ReconcileError,
    Request, Schema, Snapshot, Watch, WriteRule,
};

/// The guest's name (field manager `wasmctrl/gpu-quota`).
pub const GUEST_NAME: &str = "gpu-quota";
/// The finalizer the host keeps on every quota until clean-up is done.
pub const FINALIZER: &str = "example.com/gpu-quota";
/// The primary watch: the quotas.
pub const QUOTA_WATCH: &str = "quotas";
/// The secondary watch: pods, related to the quotas of their namespace.
pub const POD_WATCH: &str = "pods";
/// The resource counted.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// `spec.limit`.
pub const LIMIT: &str = "spec.limit";
/// The finalizers, to remove ours only if it is there.
pub const FINALIZERS: &str = "metadata.finalizers[*]";

/// The `GpuQuota` type.
pub fn quota_gvk() -> GroupVersionKind {
    GroupVersionKind::new("example.com", "v1", "GpuQuota")
}

/// The manifest: quotas (per object, finalizer) and the pods of their
/// namespaces; writes: quota status and finalizers.
pub fn manifest() -> Manifest {
    let quotas = Watch::new(QUOTA_WATCH, quota_gvk())
        .fields([LIMIT, FINALIZERS])
        .fields(condition_paths("status.conditions"))
        .per_object()
        .finalizer(FINALIZER);
    let pods = Watch::new(POD_WATCH, GroupVersionKind::core("Pod"))
        .field_selector("spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed")
        .fields(pod_resource_paths(GPU_RESOURCE))
        .same_namespace(QUOTA_WATCH);
    Manifest::new(GUEST_NAME)
        .watch(quotas)
        .watch(pods)
        .write(WriteRule::new(quota_gvk()).status(true))
}

/// The guest.
pub struct GpuQuota;

/// The handles a reconcile reads through.
pub struct Fields {
    pods: WatchId,
    limit: Field,
    finalizers: Field,
    conditions: ConditionFields,
    pod: PodResourceFields,
}

impl wasmctrl_guest_sdk::Guest for GpuQuota {
    type Fields = Fields;

    fn describe(env: &Environment) -> Result<Manifest, String> {
        env.settings(&[])?;
        Ok(manifest())
    }

    fn fields(_: &Environment, schema: &Schema) -> Result<Fields, String> {
        let (quotas, pods) = (schema.watch(QUOTA_WATCH)?, schema.watch(POD_WATCH)?);
        Ok(Fields {
            pods: pods.id(),
            limit: quotas.field(LIMIT)?,
            finalizers: quotas.field(FINALIZERS)?,
            conditions: ConditionFields::resolve(&quotas, "status.conditions")?,
            pod: PodResourceFields::resolve(&pods, GPU_RESOURCE)?,
        })
    }

    fn reconcile(
        env: &Environment,
        request: &Request,
        snapshot: &Snapshot<'_>,
        f: &Fields,
    ) -> Result<Plan, ReconcileError> {
        let mut plan = Plan::new();
        // Gone (or not a quota key): nothing left to do.
        let Some(quota) = snapshot.primary(request) else {
            return Ok(plan);
        };
        let target = quota.object_ref();
        if quota.is_deleting() {
            // Clean-up would go here; then release the object.
            if quota.texts(f.finalizers).any(|fin| fin == Some(FINALIZER)) {
                plan.remove_finalizer(&target, FINALIZER);
            }
            return Ok(plan);
        }
        let pods = snapshot.in_namespace(f.pods, quota.namespace());
        let usage = quota::usage(GPU_RESOURCE, pods.map(|p| f.pod.read(&p)));
        // The CRD requires `spec.limit`; were it missing, any GPU is over.
        let limit = quota.int(f.limit).unwrap_or(0);
        let existing = f.conditions.read(&quota);
        let status = quota::status(limit, usage.used, quota.generation(), existing, env.now_ms);
        plan.status(&target, &status);
        if !status.is_ready() {
            let message = format!(
                "namespace {} requests {} GPUs, over its limit of {limit}",
                quota.namespace(),
                usage.used
            );
            plan.event(Event::warning(target.clone(), quota::OVER_LIMIT, message));
        }
        for (pod, why) in &usage.invalid {
            let pod = GroupVersionKind::core("Pod").object(quota.namespace(), pod);
            let message = format!("pod not counted in quota {}: {why}", target.name);
            plan.event(Event::warning(pod, "InvalidQuantity", message).related(target.clone()));
        }
        Ok(plan)
    }
}

wasmctrl_guest_sdk::export_guest!(GpuQuota);

#[cfg(test)]
mod tests;
