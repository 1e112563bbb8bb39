//! The actuator: makes a validated plan true in the cluster.
//!
//! Owns every write a guest causes: server-side apply with the guest's
//! field manager (`wasmctrl/<guest>`) and force, skipped entirely when the
//! cached live object already holds the desired fields (so a reconcile never
//! triggers itself); recognising the watch echo of its own applies by their
//! resourceVersion, so the echo wakes no reconcile, while a cache still
//! older than our last apply is never trusted to skip one; deletes; events
//! through kube's recorder, each emitted
//! once per appearance rather than once per reconcile. It never retries in
//! line: any failure goes back to the caller, which requeues with backoff.
//! The write allowlist was already enforced when the plan was validated.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::events::{Event as KubeEvent, EventType as KubeEventType, Recorder, Reporter};
use kube::{Api, Client};
use serde_json::Value as Json;

use crate::guest::{EventType, Gvk, ObjectKey, PlannedEvent, ValidatedPlan};
use crate::sync::lock;

/// Why a plan could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum ActuatorError {
    /// The type could not be resolved through discovery.
    #[error("cannot resolve {gvk} through API discovery: {source}")]
    Discovery {
        /// The type.
        gvk: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
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
            ActuatorError::Discovery { .. } => "discovery",
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

/// Counters of what the actuator did, for tests, the demo and metrics.
#[derive(Debug, Default)]
pub struct ActuatorCounters {
    /// Apply requests sent.
    pub applies: AtomicU64,
    /// Applies skipped because the live object already matched.
    pub skipped: AtomicU64,
    /// Delete requests sent.
    pub deletes: AtomicU64,
    /// Events published.
    pub events: AtomicU64,
    /// Requests that failed.
    pub failures: AtomicU64,
}

impl ActuatorCounters {
    /// Requests that changed the cluster (applies + deletes + events).
    pub fn writes(&self) -> u64 {
        self.applies.load(Ordering::Relaxed)
            + self.deletes.load(Ordering::Relaxed)
            + self.events.load(Ordering::Relaxed)
    }
}

/// Looks up the live state of an object the guest writes.
pub trait LiveObjects: Send + Sync {
    /// The cached live object, if the cache has it.
    fn live(&self, key: &ObjectKey) -> Option<Json>;
    /// The uid of an object, for event references.
    fn uid(&self, key: &ObjectKey) -> Option<String>;
}

/// An event's identity: what it is about, its reason and its message.
type EventId = (ObjectKey, String, String);

/// Carries out plans for one guest.
pub struct Actuator {
    client: Client,
    guest: String,
    metrics: Option<Arc<crate::metrics::Metrics>>,
    field_manager: String,
    resources: Mutex<HashMap<Gvk, ApiResource>>,
    recorder: Recorder,
    counters: Arc<ActuatorCounters>,
    /// Events emitted for each request key by its last successful plan.
    emitted: Mutex<HashMap<String, BTreeSet<EventId>>>,
    /// Our applies whose watch echo has not been seen yet (see
    /// [`Actuator::settle`]).
    pending: Mutex<HashMap<ObjectKey, Echo>>,
}

/// Where the watch echo of one of our applies stands.
#[derive(Debug)]
enum Echo {
    /// The apply is in flight; the resourceVersions the outputs cache
    /// reported meanwhile ("" for a delete) wait for its response.
    InFlight(Vec<String>),
    /// The apply returned this resourceVersion; its echo is still to come.
    Due(String),
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
    /// An actuator writing as `wasmctrl/<guest>`.
    pub fn new(client: Client, guest: &str, instance: Option<String>) -> Self {
        Self::with_metrics(client, guest, instance, None)
    }

    /// An actuator that also records `wasmctrl_writes_total` and
    /// `wasmctrl_writes_skipped_total`.
    pub fn with_metrics(
        client: Client,
        guest: &str,
        instance: Option<String>,
        metrics: Option<Arc<crate::metrics::Metrics>>,
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
            guest: guest.to_string(),
            metrics,
            field_manager,
            resources: Mutex::new(HashMap::new()),
            recorder,
            counters: Arc::new(ActuatorCounters::default()),
            emitted: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
        }
    }

    /// Called for every change of an object the guest writes, with the
    /// resourceVersion the outputs cache now holds (None: gone). Returns
    /// true when the change needs no reconcile from the caller: it is the
    /// watch echo of our own last apply (the cache now shows exactly what
    /// that apply returned), or it arrived while an apply of that object
    /// was in flight — then the apply's response decides (see
    /// [`Actuator::execute`]). Any other change (someone else's write, an
    /// older event, a delete) forgets the apply and must be reconciled.
    ///
    /// Only equality of resourceVersions is used: they are opaque, never
    /// ordered.
    pub fn settle(&self, target: &ObjectKey, cached_rv: Option<&str>) -> bool {
        let mut pending = lock(&self.pending);
        match pending.get_mut(target) {
            Some(Echo::InFlight(seen)) => {
                seen.push(cached_rv.unwrap_or_default().to_string());
                true
            }
            Some(Echo::Due(rv)) => {
                let echo = Some(rv.as_str()) == cached_rv;
                pending.remove(target);
                echo
            }
            None => false,
        }
    }

    /// Settles an apply of `target` that returned `rv` (None: it failed)
    /// against what the cache reported while it was in flight. Returns
    /// whether someone else changed the object meanwhile.
    fn applied(&self, target: &ObjectKey, rv: Option<&str>, live: &dyn LiveObjects) -> bool {
        let mut pending = lock(&self.pending);
        let seen = match pending.remove(target) {
            Some(Echo::InFlight(seen)) => seen,
            _ => Vec::new(),
        };
        let foreign = seen.iter().any(|s| Some(s.as_str()) != rv);
        if let Some(rv) = rv {
            // The echo already came, or the apply changed nothing (the
            // cache holds that version): nothing to wait for.
            let cached = live.live(target);
            let cached_rv = cached
                .as_ref()
                .and_then(|o| o.pointer("/metadata/resourceVersion"))
                .and_then(Json::as_str);
            if !seen.iter().any(|s| s == rv) && cached_rv != Some(rv) {
                pending.insert(target.clone(), Echo::Due(rv.to_string()));
            }
        }
        foreign
    }

    /// The field manager used for every apply.
    pub fn field_manager(&self) -> &str {
        &self.field_manager
    }

    /// Counters (shared).
    pub fn counters(&self) -> Arc<ActuatorCounters> {
        self.counters.clone()
    }

    /// Resolves (and caches) the API resource for `gvk`.
    pub async fn resource(&self, gvk: &Gvk) -> Result<ApiResource, ActuatorError> {
        if let Some(ar) = lock(&self.resources).get(gvk) {
            return Ok(ar.clone());
        }
        let (ar, _caps) = kube::discovery::pinned_kind(
            &self.client,
            &GroupVersionKind::gvk(&gvk.group, &gvk.version, &gvk.kind),
        )
        .await
        .map_err(|source| ActuatorError::Discovery {
            gvk: gvk.to_string(),
            source,
        })?;
        lock(&self.resources).insert(gvk.clone(), ar.clone());
        Ok(ar)
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
    pub async fn execute(
        &self,
        key: &str,
        plan: &ValidatedPlan,
        live: &dyn LiveObjects,
    ) -> Result<bool, ActuatorError> {
        let mut changed_meanwhile = false;
        for (target, desired) in &plan.apply {
            // While our previous apply's echo is on its way the cache is
            // older than the object: no skip decided on it, apply again
            // (a no-op on the server if nothing changed).
            let echo_due = lock(&self.pending).contains_key(target);
            if let Some(current) = live.live(target).filter(|_| !echo_due) {
                if contains(&current, desired)
                    && !drops_owned_field(&current, desired, &self.field_manager)
                {
                    self.counters.skipped.fetch_add(1, Ordering::Relaxed);
                    if let Some(m) = &self.metrics {
                        m.writes_skipped
                            .get_or_create(&crate::metrics::GuestLabels {
                                guest: self.guest.clone(),
                            })
                            .inc();
                    }
                    continue;
                }
            }
            let ar = self.resource(&target.gvk).await?;
            let params = PatchParams::apply(&self.field_manager).force();
            lock(&self.pending).insert(target.clone(), Echo::InFlight(Vec::new()));
            let result = self
                .api(&ar, target.namespace.as_deref())
                .patch(&target.name, &params, &Patch::Apply(desired))
                .await;
            self.count(&result);
            let rv = result
                .as_ref()
                .ok()
                .and_then(|o| o.metadata.resource_version.as_deref());
            changed_meanwhile |= self.applied(target, rv, live);
            result.map_err(|source| ActuatorError::Api {
                verb: "apply",
                target: target.to_string(),
                source,
            })?;
            self.counters.applies.fetch_add(1, Ordering::Relaxed);
            self.count_write("apply");
        }
        for target in &plan.delete {
            if live.live(target).is_none() {
                continue;
            }
            let ar = self.resource(&target.gvk).await?;
            let result = self
                .api(&ar, target.namespace.as_deref())
                .delete(&target.name, &DeleteParams::background())
                .await;
            match result {
                Ok(_) => {
                    self.counters.deletes.fetch_add(1, Ordering::Relaxed);
                    self.count_write("delete");
                }
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(source) => {
                    self.counters.failures.fetch_add(1, Ordering::Relaxed);
                    return Err(ActuatorError::Api {
                        verb: "delete",
                        target: target.to_string(),
                        source,
                    });
                }
            }
        }
        self.publish_events(key, &plan.events, live).await?;
        Ok(changed_meanwhile)
    }

    fn count_write(&self, verb: &str) {
        if let Some(m) = &self.metrics {
            m.writes
                .get_or_create(&crate::metrics::WriteLabels {
                    guest: self.guest.clone(),
                    verb: verb.to_string(),
                })
                .inc();
        }
    }

    fn count<T>(&self, r: &Result<T, kube::Error>) {
        if r.is_err() {
            self.counters.failures.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Publishes the events that were not already emitted by this key's
    /// previous successful plan: a condition is reported when it appears,
    /// not again on every reconcile or resync.
    async fn publish_events(
        &self,
        key: &str,
        events: &[PlannedEvent],
        live: &dyn LiveObjects,
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
                uid: live.uid(&e.regarding),
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
            self.count(&result);
            result.map_err(|source| ActuatorError::Api {
                verb: "event",
                target: format!("event {} on {}", e.reason, e.regarding),
                source,
            })?;
            self.counters.events.fetch_add(1, Ordering::Relaxed);
            self.count_write("event");
        }
        lock(&self.emitted).insert(key.to_string(), now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The outputs cache, as the echo bookkeeping sees it.
    struct Cache(Mutex<Option<String>>);

    impl LiveObjects for Cache {
        fn live(&self, _: &ObjectKey) -> Option<Json> {
            let rv = lock(&self.0).clone()?;
            Some(json!({"metadata": {"resourceVersion": rv}}))
        }
        fn uid(&self, _: &ObjectKey) -> Option<String> {
            None
        }
    }

    fn target() -> ObjectKey {
        ObjectKey {
            gvk: Gvk {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
            },
            namespace: Some("ops".into()),
            name: "s".into(),
        }
    }

    async fn actuator() -> Actuator {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        Actuator::new(Client::try_from(config).unwrap(), "g", None)
    }

    fn in_flight(a: &Actuator) {
        lock(&a.pending).insert(target(), Echo::InFlight(Vec::new()));
    }

    #[tokio::test]
    async fn an_echo_that_beats_the_apply_response_is_swallowed() {
        let a = actuator().await;
        let cache = Cache(Mutex::new(Some("4".into())));
        in_flight(&a);
        *lock(&cache.0) = Some("5".into());
        assert!(a.settle(&target(), Some("5")), "held for the response");
        assert!(!a.applied(&target(), Some("5"), &cache), "it was ours");
        assert!(lock(&a.pending).is_empty(), "nothing left to wait for");
        // The next change is someone else's.
        assert!(!a.settle(&target(), Some("6")));
    }

    #[tokio::test]
    async fn an_echo_after_the_response_is_swallowed_and_anything_else_is_not() {
        let a = actuator().await;
        let cache = Cache(Mutex::new(Some("4".into())));
        in_flight(&a);
        assert!(!a.applied(&target(), Some("5"), &cache));
        assert!(a.settle(&target(), Some("5")), "our echo");
        in_flight(&a);
        assert!(!a.applied(&target(), Some("7"), &cache));
        assert!(!a.settle(&target(), Some("8")), "someone else's write");
        assert!(
            !a.settle(&target(), Some("7")),
            "forgotten after a foreign change"
        );
        in_flight(&a);
        assert!(!a.applied(&target(), Some("9"), &cache));
        assert!(!a.settle(&target(), None), "a delete is never an echo");
    }

    #[tokio::test]
    async fn a_foreign_write_during_the_apply_asks_for_another_look() {
        let a = actuator().await;
        let cache = Cache(Mutex::new(Some("4".into())));
        in_flight(&a);
        assert!(a.settle(&target(), Some("5")));
        assert!(a.applied(&target(), Some("6"), &cache), "5 was not ours");
        assert!(a.settle(&target(), Some("6")), "6 still is");
        // A failed apply: whatever came meanwhile is someone else's.
        in_flight(&a);
        assert!(a.settle(&target(), Some("7")));
        assert!(a.applied(&target(), None, &cache));
        assert!(lock(&a.pending).is_empty());
    }

    #[tokio::test]
    async fn an_apply_that_changed_nothing_waits_for_no_echo() {
        let a = actuator().await;
        let cache = Cache(Mutex::new(Some("4".into())));
        in_flight(&a);
        assert!(!a.applied(&target(), Some("4"), &cache));
        assert!(lock(&a.pending).is_empty());
        assert!(
            !a.settle(&target(), Some("5")),
            "a later change is reconciled"
        );
    }

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
