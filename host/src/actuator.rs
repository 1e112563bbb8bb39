//! The actuator: makes a validated plan true in the cluster.
//!
//! Owns every write a guest causes: server-side apply with the guest's
//! field manager (`wasmctrl/<guest>`) and force, skipped entirely when the
//! cached live object already holds the desired fields (so a reconcile never
//! triggers itself); the guest's [`Outputs`] (live state of what it writes,
//! producers, and the echo bookkeeping that keeps the watch echo of our own
//! apply from waking a reconcile, while a cache still older than our last
//! apply is never trusted to skip one); deletes; events through the
//! [`crate::events`] recorder, each emitted once per appearance rather than
//! once per reconcile (a changed message is a new appearance). It reads the watched caches only to fill in event references,
//! never calls back into the controller, and never retries in line: any
//! failure goes back to the caller, which requeues with backoff. The write
//! allowlist was already enforced when the plan was validated.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::Value as Json;

use crate::discovery::{Discovery, DiscoveryError};
use crate::events::{Event as KubeEvent, EventType as KubeEventType, Recorder, Reporter};
use crate::guest::{EventType, Gvk, ObjectKey, PlannedEvent, ValidatedPlan};
use crate::metrics::{GuestMetrics, WriteVerb};
use crate::outputs::{resource_version, Outputs};
use crate::store::Store;
use crate::sync::lock;

/// Why a plan could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum ActuatorError {
    /// The type could not be resolved through discovery.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// An API request failed.
    #[error("{verb} {target} failed: {source}")]
    Api {
        /// "apply", "delete" or "event".
        verb: &'static str,
        /// The object.
        target: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

impl ActuatorError {
    /// Short label for metrics: "conflict", "throttled", "server", "client",
    /// "discovery" or "transport".
    pub fn metric_label(&self) -> &'static str {
        match self {
            ActuatorError::Discovery(_) => "discovery",
            ActuatorError::Api {
                source: kube::Error::Api(s),
                ..
            } => match s.code {
                409 => "conflict",
                429 => "throttled",
                500..=599 => "server",
                _ => "client",
            },
            ActuatorError::Api { .. } => "transport",
        }
    }
}

/// An event's identity: what it is about, its reason and its message.
type EventId = (ObjectKey, String, String);

/// A watched cache the actuator may read uids from (for event references).
pub struct Watched {
    /// The kind the cache holds.
    pub gvk: Gvk,
    /// The cache.
    pub store: Store,
}

/// Carries out plans for one guest.
pub struct Actuator {
    client: Client,
    discovery: Discovery,
    metrics: GuestMetrics,
    field_manager: String,
    recorder: Recorder,
    outputs: Outputs,
    watched: Vec<Watched>,
    /// Events emitted for each request key by its last successful plan.
    emitted: Mutex<HashMap<String, BTreeSet<EventId>>>,
}

/// Whether `live` already has every field of `desired` with the same value.
/// Lists and scalars compare whole; an empty map or list in `desired`
/// matches an absent field (the API server omits empty maps).
pub fn contains(live: &Json, desired: &Json) -> bool {
    match (live, desired) {
        (Json::Object(l), Json::Object(d)) => d.iter().all(|(k, dv)| match l.get(k) {
            Some(lv) => contains(lv, dv),
            None => is_empty(dv),
        }),
        (l, d) => l == d || (is_empty(l) && is_empty(d)),
    }
}

fn is_empty(v: &Json) -> bool {
    match v {
        Json::Null => true,
        Json::Object(m) => m.values().all(is_empty),
        Json::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// Whether `manager` owns (through Apply) a field of `live` that `desired`
/// no longer sets — an apply is then needed to remove it.
pub fn drops_owned_field(live: &Json, desired: &Json, manager: &str) -> bool {
    let Some(entries) = live
        .pointer("/metadata/managedFields")
        .and_then(Json::as_array)
    else {
        return false;
    };
    entries
        .iter()
        .filter(|e| {
            e.get("manager").and_then(Json::as_str) == Some(manager)
                && e.get("operation").and_then(Json::as_str) == Some("Apply")
                && e.get("subresource").is_none_or(Json::is_null)
        })
        .filter_map(|e| e.get("fieldsV1"))
        .any(|fields| owned_missing(fields, Some(desired)))
}

fn owned_missing(fields: &Json, desired: Option<&Json>) -> bool {
    let Some(map) = fields.as_object() else {
        return false;
    };
    map.iter().any(|(k, child)| {
        let Some(name) = k.strip_prefix("f:") else {
            // "." or list-item keys ("k:", "v:", "i:"): lists compare whole.
            return false;
        };
        match desired.and_then(|d| d.get(name)) {
            None => true,
            Some(d) => {
                child.as_object().is_some_and(|c| !c.is_empty())
                    && d.is_object()
                    && owned_missing(child, Some(d))
            }
        }
    })
}

impl Actuator {
    /// An actuator writing as `wasmctrl/<guest>` into `outputs`, reading
    /// uids for event references from `watched`.
    pub fn new(
        client: Client,
        discovery: Discovery,
        outputs: Outputs,
        watched: Vec<Watched>,
        metrics: GuestMetrics,
        guest: &str,
        instance: Option<String>,
    ) -> Self {
        let field_manager = format!("wasmctrl/{guest}");
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: field_manager.clone(),
                instance,
            },
        );
        Actuator {
            client,
            discovery,
            metrics,
            field_manager,
            recorder,
            outputs,
            watched,
            emitted: Mutex::new(HashMap::new()),
        }
    }

    /// The field manager used for every apply.
    pub fn field_manager(&self) -> &str {
        &self.field_manager
    }

    /// What the guest writes.
    pub fn outputs(&self) -> &Outputs {
        &self.outputs
    }

    fn api(&self, ar: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, ar),
            None => Api::all_with(self.client.clone(), ar),
        }
    }

    /// Carries out `plan` for request `key`. Stops at the first failure
    /// (the caller requeues; the next attempt recomputes the whole plan).
    /// Returns whether an object it wrote was changed by someone else
    /// while the write was in flight (the caller reconciles the key again).
    pub async fn execute(&self, key: &str, plan: &ValidatedPlan) -> Result<bool, ActuatorError> {
        let echoes = self.outputs.echoes();
        let mut changed_meanwhile = false;
        for (target, _) in &plan.apply {
            self.outputs.produced_by(target, key);
        }
        for (target, desired) in &plan.apply {
            // While our previous apply's echo is on its way the cache is
            // older than the object: no skip decided on it, apply again
            // (a no-op on the server if nothing changed).
            let echo_due = echoes.awaiting(target);
            if let Some(current) = self.outputs.live(target).filter(|_| !echo_due) {
                if contains(&current, desired)
                    && !drops_owned_field(&current, desired, &self.field_manager)
                {
                    self.metrics.skipped_write();
                    continue;
                }
            }
            let ar = self.discovery.resource(&target.gvk).await?;
            let params = PatchParams::apply(&self.field_manager).force();
            echoes.begin(target);
            let result = self
                .api(&ar, target.namespace.as_deref())
                .patch(&target.name, &params, &Patch::Apply(desired))
                .await;
            let rv = result
                .as_ref()
                .ok()
                .and_then(|o| o.metadata.resource_version.as_deref());
            let cached = self.outputs.live(target);
            let cached_rv = cached.as_ref().and_then(resource_version);
            changed_meanwhile |= echoes.applied(target, rv, cached_rv);
            result.map_err(|source| ActuatorError::Api {
                verb: "apply",
                target: target.to_string(),
                source,
            })?;
            self.metrics.wrote(WriteVerb::Apply);
        }
        for target in &plan.delete {
            if self.outputs.live(target).is_none() {
                continue;
            }
            let ar = self.discovery.resource(&target.gvk).await?;
            let result = self
                .api(&ar, target.namespace.as_deref())
                .delete(&target.name, &DeleteParams::background())
                .await;
            match result {
                Ok(_) => self.metrics.wrote(WriteVerb::Delete),
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(source) => {
                    return Err(ActuatorError::Api {
                        verb: "delete",
                        target: target.to_string(),
                        source,
                    });
                }
            }
        }
        self.publish_events(key, &plan.events).await?;
        Ok(changed_meanwhile)
    }

    /// The uid of an object a planned event is about: from a watched cache
    /// of its kind, else from the outputs cache.
    fn uid(&self, target: &ObjectKey) -> Option<String> {
        let ns = target.namespace.as_deref().unwrap_or("");
        let from_watch = self
            .watched
            .iter()
            .filter(|w| w.gvk.group == target.gvk.group && w.gvk.kind == target.gvk.kind)
            .find_map(|w| w.store.get(ns, &target.name));
        let uid = match from_watch {
            Some(o) => o.uid.to_string(),
            None => self
                .outputs
                .live(target)?
                .pointer("/metadata/uid")
                .and_then(Json::as_str)?
                .to_string(),
        };
        (!uid.is_empty()).then_some(uid)
    }

    /// Publishes the events that were not already emitted by this key's
    /// previous successful plan: a condition is reported when it appears,
    /// not again on every reconcile or resync.
    async fn publish_events(
        &self,
        key: &str,
        events: &[PlannedEvent],
    ) -> Result<(), ActuatorError> {
        let now: BTreeSet<EventId> = events
            .iter()
            .map(|e| (e.regarding.clone(), e.reason.clone(), e.message.clone()))
            .collect();
        let before = lock(&self.emitted).get(key).cloned().unwrap_or_default();
        for e in events {
            let id = (e.regarding.clone(), e.reason.clone(), e.message.clone());
            if before.contains(&id) {
                continue;
            }
            let reference = ObjectReference {
                api_version: Some(e.regarding.gvk.api_version()),
                kind: Some(e.regarding.gvk.kind.clone()),
                name: Some(e.regarding.name.clone()),
                namespace: e.regarding.namespace.clone(),
                uid: self.uid(&e.regarding),
                ..ObjectReference::default()
            };
            let event = KubeEvent {
                type_: match e.event_type {
                    EventType::Normal => KubeEventType::Normal,
                    EventType::Warning => KubeEventType::Warning,
                },
                reason: e.reason.clone(),
                note: Some(e.message.clone()),
                action: "Reconcile".into(),
                secondary: None,
            };
            let result = self.recorder.publish(&event, &reference).await;
            result.map_err(|source| ActuatorError::Api {
                verb: "event",
                target: format!("event {} on {}", e.reason, e.regarding),
                source,
            })?;
            self.metrics.wrote(WriteVerb::Event);
        }
        lock(&self.emitted).insert(key.to_string(), now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn live_object_with_extra_fields_contains_the_desired_ones() {
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "s", "namespace": "ops", "uid": "u", "resourceVersion": "9"},
            "data": {"n1": "2", "other": "x"}});
        let cases = [
            (
                json!({"metadata": {"name": "s", "namespace": "ops"}, "data": {"n1": "2"}}),
                true,
            ),
            (
                json!({"metadata": {"name": "s"}, "data": {"n1": "3"}}),
                false,
            ),
            (json!({"data": {"n2": "1"}}), false),
            (json!({"data": {}}), true),
            (json!({"binaryData": {}}), true),
            (json!({"spec": {"list": []}}), true),
            (json!({"spec": {"list": [1]}}), false),
        ];
        for (desired, want) in cases {
            assert_eq!(contains(&live, &desired), want, "{desired}");
        }
    }

    #[test]
    fn a_key_this_manager_applied_before_and_omits_now_needs_an_apply() {
        let live = json!({"metadata": {"managedFields": [
            {"manager": "wasmctrl/g", "operation": "Apply", "fieldsV1": {"f:data": {"f:n1": {}, "f:n2": {}}}},
            {"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:data": {"f:x": {}}}}
        ]}, "data": {"n1": "1", "n2": "1", "x": "y"}});
        assert!(!drops_owned_field(
            &live,
            &json!({"data": {"n1": "1", "n2": "1"}}),
            "wasmctrl/g"
        ));
        assert!(drops_owned_field(
            &live,
            &json!({"data": {"n1": "1"}}),
            "wasmctrl/g"
        ));
        assert!(drops_owned_field(&live, &json!({}), "wasmctrl/g"));
        // Another manager's fields never force our apply.
        assert!(!drops_owned_field(
            &live,
            &json!({"data": {"n1": "1", "n2": "1"}}),
            "kubectl"
        ));
    }
}
