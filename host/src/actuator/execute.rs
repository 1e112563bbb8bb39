//! The [`Actuator`] and a plan's execution: each planned write in the
//! plan's order (through `writes` and `finalizers`), then the plan's
//! Events, once per appearance and only about an object the guest watches
//! or may write (`regarding`), and the reports of what the guard declares
//! (write wars, hot loops). It never judges a write war or a hot loop and
//! never retries in line.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{ApiResource, DynamicObject};
use kube::{Api, Client};

use super::dry_run;
use super::error::{path_segments, ActuatorError};
use super::regarding;
use super::step::{Contested, Executed, Part, Step};
use crate::discovery::Discovery;
use crate::events::{
    Event as KubeEvent, EventType as KubeEventType, PublishError, Recorder, Reporter,
};
use crate::guard::{HotLoop, Permit};
use crate::guest::{
    EventType, GuestManifest, Gvk, ObjectKey, PlannedEvent, PlannedWrite, ValidatedPlan,
};
use crate::metrics::{GuestMetrics, WriteVerb};
use crate::outputs::{Outputs, Written};
use crate::request::RequestKey;
use crate::store::Store;
use crate::sync::lock;

/// An event's identity: what it is about, its reason and its message.
type EventId = (ObjectKey, String, String);

/// A watched cache the actuator may read uids and finalizers from.
pub struct Watched {
    /// The kind the cache holds.
    pub gvk: Gvk,
    /// The cache.
    pub store: Store,
    /// The watch has no label or field selector: an object deleted from
    /// its cache was deleted, not merely moved out of a selector, so its
    /// uid is known to be gone.
    pub unfiltered: bool,
}

/// Carries out plans for one guest.
pub struct Actuator {
    pub(super) client: Client,
    pub(super) discovery: Discovery,
    pub(super) metrics: GuestMetrics,
    pub(super) field_manager: String,
    /// Writes to objects read carry the resourceVersion read
    /// ([`Actuator::pin_versions`]).
    pub(super) pin_versions: bool,
    recorder: Recorder,
    pub(super) outputs: Outputs,
    pub(super) watched: Vec<Watched>,
    /// The guest's manifest: which objects its Events may regard.
    manifest: Arc<GuestManifest>,
    /// Events emitted for each request key by its last successful plan.
    emitted: Mutex<HashMap<RequestKey, BTreeSet<EventId>>>,
    /// uids the API server answered 404 for when the host added its
    /// finalizer (bounded like a store's deletions).
    gone: Mutex<crate::store::Tombstones>,
}

impl Actuator {
    /// An actuator writing as `wasmctrl/<guest>` (the manifest's name) into
    /// `outputs`, reading uids and finalizers from `watched`, recording
    /// Events only about objects `manifest` watches or may write.
    pub fn new(
        client: Client,
        discovery: Discovery,
        outputs: Outputs,
        watched: Vec<Watched>,
        metrics: GuestMetrics,
        manifest: Arc<GuestManifest>,
        instance: Option<String>,
    ) -> Self {
        let field_manager = format!("wasmctrl/{}", manifest.name);
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
            pin_versions: false,
            recorder,
            outputs,
            watched,
            manifest,
            emitted: Mutex::new(HashMap::new()),
            gone: Mutex::default(),
        }
    }

    /// Dry runs of writes as this actuator's field manager (see
    /// [`dry_run`]).
    pub fn dry_runner(&self) -> dry_run::DryRun {
        dry_run::DryRun::new(
            self.client.clone(),
            self.discovery.clone(),
            self.field_manager.clone(),
        )
    }

    /// The field manager used for every write.
    pub fn field_manager(&self) -> &str {
        &self.field_manager
    }

    /// What the guest writes.
    pub fn outputs(&self) -> &Outputs {
        &self.outputs
    }

    /// Pins every apply (or the merge patch standing in for one) of an
    /// object this actuator has read to the resourceVersion it read: the
    /// outputs cache's, or, while the echo of our own last write is due,
    /// the version that write returned. A write decided on a view someone
    /// else has changed since is refused with 409 Conflict, returned as an
    /// error (the key is requeued and the conflict counted), never dropped.
    #[must_use]
    pub fn pin_versions(mut self, on: bool) -> Self {
        self.pin_versions = on;
        self
    }

    /// The API for `target`'s resource and `target`'s name, each made one
    /// URL path segment ([`crate::urlpath`]): kube's builders put both into
    /// the path as they are.
    pub(super) fn api(
        &self,
        ar: &ApiResource,
        target: &ObjectKey,
    ) -> Result<(Api<DynamicObject>, String), ActuatorError> {
        let (namespace, name) = path_segments(target)?;
        let api = match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), &ns, ar),
            None => Api::all_with(self.client.clone(), ar),
        };
        Ok((api, name))
    }

    /// Carries out `plan` for request `key`, write by write. Stops at the
    /// first failure (the caller requeues; the next attempt recomputes the
    /// whole plan); a dropped write is not a failure.
    ///
    /// `permit` is the guard's answer for this reconcile
    /// ([`crate::guard::Guard::admit`]): each write asks it whether a write
    /// war holds its object back, and it takes what the plan wrote. A plan
    /// that writes again on the echo of the key's own last write, time
    /// after time, is a hot loop, declared here (a warning log,
    /// `wasmctrl_guest_hot_loops_total`, a Warning event `HotLoop`) and the
    /// key held back (`held_back`).
    pub async fn execute(
        &self,
        key: &RequestKey,
        plan: &ValidatedPlan,
        permit: &Permit<'_>,
    ) -> Result<Executed, ActuatorError> {
        let mut done = Executed::default();
        let mut wrote = Vec::new();
        for w in &plan.writes {
            match w {
                PlannedWrite::Delete { target, .. } => self.outputs.deleting(target, key),
                w => self.outputs.produced_by(w.target(), key),
            }
        }
        for w in &plan.writes {
            let step = match w {
                PlannedWrite::Apply { target, doc } => {
                    self.apply_doc(
                        permit,
                        target,
                        doc,
                        Part::Object,
                        WriteVerb::Apply,
                        false,
                        None,
                    )
                    .await?
                }
                PlannedWrite::ApplyEntries { target, entries } => {
                    self.apply_entries(permit, target, entries).await?
                }
                PlannedWrite::Update { target, doc, .. } => {
                    self.apply_doc(
                        permit,
                        target,
                        doc,
                        Part::Object,
                        WriteVerb::Update,
                        true,
                        None,
                    )
                    .await?
                }
                PlannedWrite::ApplyStatus { target, doc, .. } => {
                    self.apply_doc(
                        permit,
                        target,
                        doc,
                        Part::Status,
                        WriteVerb::ApplyStatus,
                        true,
                        None,
                    )
                    .await?
                }
                PlannedWrite::Delete { target, uid } => {
                    self.delete(permit, target, uid.as_deref()).await?
                }
                PlannedWrite::AddFinalizer {
                    target,
                    uid,
                    finalizer,
                } => self.finalizer(target, uid, finalizer, true).await?,
                PlannedWrite::RemoveFinalizer {
                    target,
                    uid,
                    finalizer,
                } => self.finalizer(target, uid, finalizer, false).await?,
            };
            if let Step::Done { rv: Some(rv), .. } = &step {
                wrote.push(Written {
                    object: self.outputs.key(w.target()),
                    rv: rv.clone(),
                });
            }
            done.add(step);
        }
        self.publish_events(key, &plan.events).await?;
        let now = tokio::time::Instant::now();
        if let Some(hot) = permit.reconciled(wrote, done.held_back.is_some(), now) {
            self.declare_hot_loop(permit, key, &hot).await;
            done.add(Step::HeldBack(hot.backoff));
        }
        Ok(done)
    }

    /// Adds a watch's declared `finalizer` to `target` (pinned to `uid`),
    /// the host's own write: whether it was dropped.
    pub async fn ensure_finalizer(
        &self,
        target: &ObjectKey,
        uid: &str,
        finalizer: &str,
    ) -> Result<Executed, ActuatorError> {
        let mut done = Executed::default();
        done.add(self.finalizer(target, uid, finalizer, true).await?);
        Ok(done)
    }

    /// Whether the object with `uid` is known to be gone: the API server
    /// said so when the host added its finalizer, or an unfiltered watch
    /// saw it deleted.
    pub(crate) fn known_gone(&self, uid: &str) -> bool {
        !uid.is_empty()
            && (crate::sync::lock(&self.gone).contains(uid)
                || self
                    .watched
                    .iter()
                    .any(|w| w.unfiltered && w.store.deleted(uid)))
    }

    pub(super) fn bury(&self, uid: &str) {
        crate::sync::lock(&self.gone).bury(&Arc::from(uid));
    }

    /// The uid of an object a planned event names: from a watched cache of
    /// its kind, else from the outputs cache.
    fn uid(&self, target: &ObjectKey) -> Option<String> {
        self.current(target)
            .map(|c| c.uid)
            .filter(|uid| !uid.is_empty())
    }

    fn reference(&self, key: &ObjectKey) -> ObjectReference {
        ObjectReference {
            api_version: Some(key.gvk.api_version()),
            kind: Some(key.gvk.kind.clone()),
            name: Some(key.name.clone()),
            namespace: key.namespace.clone(),
            uid: self.uid(key),
            ..ObjectReference::default()
        }
    }

    /// Reports a hot loop of request `key`: a warning log naming guest,
    /// key, object and count, `wasmctrl_guest_hot_loops_total` and a
    /// Warning event `HotLoop` on the object (a failure to record the event
    /// is logged, not fatal).
    async fn declare_hot_loop(&self, permit: &Permit<'_>, key: &RequestKey, hot: &HotLoop) {
        let guest = &self.manifest.name;
        let target = &hot.object;
        let window = permit.hot_loops().window;
        let message = format!(
            "guest {guest:?}: {n} reconciles of key {key} in a row (within {w}s) were woken only by the echo of its own previous write and wrote {target} again, each time differently (a timestamp, a counter or the object's own version in what it writes never converges); the host stops reconciling {key} for {b}s",
            n = hot.writes,
            w = window.as_secs(),
            b = hot.backoff.as_secs(),
        );
        tracing::warn!(guest = %guest, key = %key, target = %target, writes = hot.writes, "hot loop: {message}");
        self.metrics.hot_loop();
        let event = KubeEvent {
            type_: KubeEventType::Warning,
            reason: "HotLoop".to_string(),
            note: Some(message),
            action: "Reconcile".to_string(),
            secondary: None,
        };
        match self.recorder.publish(&event, &self.reference(target)).await {
            Ok(()) => self.metrics.wrote(WriteVerb::Event),
            Err(e) => tracing::warn!(target = %target, "recording the hot-loop event failed: {e}"),
        }
    }

    /// Reports a write war over `target` with field manager `other`: a
    /// warning log, `wasmctrl_write_wars_total` and a Warning event on the
    /// object (a failure to record the event is logged, not fatal).
    pub(super) async fn declare_war(
        &self,
        permit: &Permit<'_>,
        target: &ObjectKey,
        other: &str,
        backoff: std::time::Duration,
        flips: u32,
        over: Contested,
    ) {
        let ours = &self.field_manager;
        let window = permit.contests().config().window;
        let what = match over {
            Contested::Fields => format!("took fields of {target} back from {ours}"),
            Contested::Existence => format!("re-created {target}, which {ours} deletes,"),
            Contested::Removal => {
                format!(
                    "(a deletion names no field manager) deleted {target}, which {ours} writes,"
                )
            }
        };
        let message = format!(
            "field manager {other:?} {what} {flips} times within {}s; {ours} stops writing it for {}s",
            window.as_secs(),
            backoff.as_secs()
        );
        tracing::warn!(target = %target, manager = %other, "write war: {message}");
        self.metrics.write_war(other);
        let event = KubeEvent {
            type_: KubeEventType::Warning,
            reason: "WriteWar".to_string(),
            note: Some(message),
            action: match over {
                Contested::Fields | Contested::Removal => "Apply",
                Contested::Existence => "Delete",
            }
            .to_string(),
            secondary: None,
        };
        match self.recorder.publish(&event, &self.reference(target)).await {
            Ok(()) => self.metrics.wrote(WriteVerb::Event),
            Err(e) => tracing::warn!(target = %target, "recording the write-war event failed: {e}"),
        }
    }

    /// Publishes the events that were not already emitted by this key's
    /// previous successful plan: a condition is reported when it appears,
    /// not again on every reconcile or resync. An event about an object the
    /// guest neither watches nor may write (see [`regarding`]) is not
    /// recorded: it is logged with the guest and the reason and counted in
    /// `wasmctrl_guest_events_refused_total`, once per appearance too.
    async fn publish_events(
        &self,
        key: &RequestKey,
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
            if let Err(refusal) =
                regarding::check(&self.manifest, &self.discovery, &e.regarding).await?
            {
                let reason = refusal.label();
                tracing::warn!(guest = %self.manifest.name, reason, event = %e.reason, "event refused: {refusal}");
                self.metrics.refused_event(reason);
                continue;
            }
            let event = KubeEvent {
                type_: match e.event_type {
                    EventType::Normal => KubeEventType::Normal,
                    EventType::Warning => KubeEventType::Warning,
                },
                reason: e.reason.clone(),
                note: Some(e.message.clone()),
                action: e.action.clone(),
                secondary: e.related.as_ref().map(|r| self.reference(r)),
            };
            let result = self
                .recorder
                .publish(&event, &self.reference(&e.regarding))
                .await;
            let target = || format!("event {} on {}", e.reason, e.regarding);
            result.map_err(|e| match e {
                PublishError::Api(source) => ActuatorError::Api {
                    verb: "event",
                    target: target(),
                    source,
                },
                PublishError::Path(source) => ActuatorError::UnsafePath {
                    target: target(),
                    source,
                },
            })?;
            self.metrics.wrote(WriteVerb::Event);
        }
        lock(&self.emitted).insert(key.clone(), now);
        Ok(())
    }
}
