//! Server-side dry runs of planned writes: each sent as the actuator would
//! send it, with `dryRun=All`, so the API server's schema, admission, RBAC
//! and conflict checks answer without anything being stored. It never
//! touches the actuator's bookkeeping (echoes, write wars, hot loops, write
//! counters); the client still rate-limits and counts each request.

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::Client;

use super::error::{path_segments, ActuatorError};
use crate::discovery::Discovery;
use crate::guest::{ObjectKey, PlannedWrite};

/// Sends planned writes as dry runs, as one guest's field manager.
#[derive(Clone)]
pub struct DryRun {
    client: Client,
    discovery: Discovery,
    field_manager: String,
}

impl DryRun {
    /// Dry runs through `client`, resolving kinds with `discovery`, as
    /// `field_manager`.
    pub fn new(client: Client, discovery: Discovery, field_manager: String) -> Self {
        DryRun {
            client,
            discovery,
            field_manager,
        }
    }

    async fn api(&self, target: &ObjectKey) -> Result<(Api<DynamicObject>, String), ActuatorError> {
        let ar = self.discovery.resource(&target.gvk).await?;
        let (namespace, name) = path_segments(target)?;
        let api = match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), &ns, &ar),
            None => Api::all_with(self.client.clone(), &ar),
        };
        Ok((api, name))
    }

    /// Sends `write` with `dryRun=All`: Ok when the API server would accept
    /// it. Finalizer changes are not sent (Ok): they are JSON patches of
    /// the host's own making, not the guest's documents.
    pub async fn send(&self, write: &PlannedWrite) -> Result<(), ActuatorError> {
        let params = PatchParams::apply(&self.field_manager).force().dry_run();
        let failed = |verb: &'static str, target: &ObjectKey| {
            let target = target.to_string();
            move |source| ActuatorError::Api {
                verb,
                target,
                source,
            }
        };
        match write {
            PlannedWrite::Apply { target, doc } | PlannedWrite::Update { target, doc, .. } => {
                let (api, name) = self.api(target).await?;
                api.patch(&name, &params, &Patch::Apply(doc))
                    .await
                    .map_err(failed("apply", target))?;
            }
            PlannedWrite::ApplyEntries { target, entries } => {
                let (api, name) = self.api(target).await?;
                api.patch(&name, &params, &Patch::Apply(entries.doc()))
                    .await
                    .map_err(failed("apply", target))?;
            }
            PlannedWrite::ApplyStatus { target, doc, .. } => {
                let (api, name) = self.api(target).await?;
                api.patch_status(&name, &params, &Patch::Apply(doc))
                    .await
                    .map_err(failed("apply-status", target))?;
            }
            PlannedWrite::Delete { target, uid } => {
                let (api, name) = self.api(target).await?;
                let params = DeleteParams {
                    dry_run: true,
                    preconditions: uid.as_ref().map(|uid| Preconditions {
                        uid: Some(uid.clone()),
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                api.delete(&name, &params)
                    .await
                    .map_err(failed("delete", target))?;
            }
            PlannedWrite::AddFinalizer { .. } | PlannedWrite::RemoveFinalizer { .. } => {}
        }
        Ok(())
    }
}
