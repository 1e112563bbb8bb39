//! One guest's control loop, data flowing one way: informers → stores →
//! handlers → workqueue → workers → pure guest reconcile → actuator.
//! It wires a described guest into the shared machinery (its informers and
//! indexes, the resync timer, waiting for every cache to sync before any
//! worker starts) and runs each reconcile. Handlers only compute keys
//! ([`crate::relations`]) and enqueue; the guest never writes; what it
//! writes, and the echoes of those writes, belong to the actuator, which
//! never calls back here.
//!
//! # Layout
//! - `mod.rs`: [`GuestController`], [`ControllerConfig`], start and run.
//! - `departed`: the last state of primaries that left their watch, kept
//!   for their keys' clean-up snapshots until a reconcile settles them.
//! - `error`: [`ControllerError`].
//! - `labels`: a sharded guest's bucket label, when its caches hold only
//!   the buckets led here: which watches it selects, the label its writes
//!   carry, and the labeller setting it where it is missing or wrong.
//! - `preflight`: checks that need the cluster before caches start
//!   (resources through discovery, status subresources, permissions).
//! - `reconcile`: one key: the host-managed finalizer (added before the
//!   guest is called; released only from an object that left the watch's
//!   selectors), the primary's presence as the server says, the snapshot
//!   (a clean-up snapshot for a primary that left), the guest call,
//!   the plan to the actuator with the guard's answer (asked once per
//!   reconcile: a hot loop held back, see [`crate::guard`]), the outcome
//!   for the queue. An aggregate
//!   key goes through [`crate::aggregate`] instead of a whole snapshot.

mod departed;
mod error;
mod labels;
mod preflight;
mod reconcile;

use std::sync::Arc;
use std::time::Duration;

use kube::Client;

use crate::actuator::ActuatorError;
use crate::actuator::{Actuator, Current, Executed, OnServer, Watched as ActuatorWatched};
use crate::aggregate::Aggregate;
use crate::claims::Claims;
use crate::discovery::Discovery;
use crate::guard::{Admission, ContestConfig, Guard, HotLoopConfig};
use crate::guest::{
    Environment, GuestError, GuestManifest, GuestModule, ObjectKey, Presence, Request,
};
use crate::informer::{Informer, InformerKey, InformerRegistry};
use crate::metrics::{GuestMetrics, Metrics, ReconcileResult};
use crate::outputs::{Feedback, Keys, Outputs, Wakes};
use crate::projection::{field_positions, FieldPath};
use crate::quarantine::{self, Quarantine, QuarantineConfig, Verdict};
pub use crate::relations::WatchCache;
use crate::relations::{self, snapshot_for};
use crate::request::RequestKey;
use crate::shadow::{self, Shadow, ShadowSpec};
use crate::store::{Change, ChangeKind};
use crate::workqueue::{self, Outcome, Workqueue};
pub use error::ControllerError;

/// How soon a key whose pinned write was dropped (its object gone or
/// replaced) is looked at again, if no watch event has re-enqueued it
/// first: long enough for the caches to catch up, short enough that a
/// deletion's clean-up is not held up.
pub const DROPPED_WRITE_RECHECK: Duration = Duration::from_millis(200);

/// Settings for one guest's controller.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Concurrent workers.
    workers: usize,
    /// Resync period when the guest does not choose one.
    resync: Duration,
    /// Queue rate limits.
    queue: workqueue::Config,
    /// Reporter instance for events (the pod name).
    instance: Option<String>,
    /// When another field manager taking our outputs back is a write war.
    contests: ContestConfig,
    /// Which guest of the host owns which object (shared by every guest of
    /// one host; the supervisor sets it).
    claims: Claims,
    /// When a guest whose calls keep failing in the sandbox is not called.
    quarantine: QuarantineConfig,
    /// The host's own Pod (namespace, name): quarantine Events regard it.
    host_pod: Option<(String, String)>,
    /// When a key rewriting its own object on every echo is a hot loop.
    hot_loops: HotLoopConfig,
    /// With key sharding: only keys of the buckets this replica leads are
    /// reconciled (see [`crate::leader_per_guest::Shards`]).
    shards: Option<crate::leader_per_guest::Shards>,
    /// Every write to an object this replica has read carries the
    /// resourceVersion it read (see [`ControllerConfig::pin_versions`]).
    pin_versions: bool,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            workers: 2,
            resync: Duration::from_secs(600),
            queue: workqueue::Config::default(),
            instance: None,
            contests: ContestConfig::default(),
            claims: Claims::default(),
            quarantine: QuarantineConfig::default(),
            host_pod: None,
            hot_loops: HotLoopConfig::default(),
            shards: None,
            pin_versions: false,
        }
    }
}

impl ControllerConfig {
    /// Reconciles only the keys of the buckets this replica leads (key
    /// sharding); a key of another bucket is dropped, and a key whose
    /// bucket's Lease is lost mid-reconcile is abandoned at once.
    #[must_use]
    pub fn shards(mut self, shards: Option<crate::leader_per_guest::Shards>) -> Self {
        self.shards = shards;
        self
    }

    /// Pins every write to an object this replica has read (an apply or
    /// the merge patch standing in for it, of the object or its status) to
    /// the resourceVersion it read: a write decided on a view someone else
    /// has changed since fails with 409 Conflict and the key is requeued
    /// (counted as a `conflict` reconcile error), rather than overwrite.
    /// For replicas that hand keys over (`--leader-elect=per-guest`): a
    /// write still in flight from a replica that lost the key cannot
    /// overwrite what the next holder wrote. It costs a requeue whenever
    /// the cache is behind the object (a write by someone else not yet
    /// seen, or the host's own finalizer patch), so it is off by default.
    #[must_use]
    pub fn pin_versions(mut self, on: bool) -> Self {
        self.pin_versions = on;
        self
    }

    /// Sets the number of workers.
    #[must_use]
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n.max(1);
        self
    }

    /// Sets the default resync period.
    #[must_use]
    pub fn resync(mut self, d: Duration) -> Self {
        self.resync = d;
        self
    }

    /// Sets the queue's rate limits.
    #[must_use]
    pub fn queue(mut self, q: workqueue::Config) -> Self {
        self.queue = q;
        self
    }

    /// Sets the event reporter instance.
    #[must_use]
    pub fn instance(mut self, instance: Option<String>) -> Self {
        self.instance = instance;
        self
    }

    /// Sets when a contest over an output becomes a write war.
    #[must_use]
    pub fn contests(mut self, contests: ContestConfig) -> Self {
        self.contests = contests;
        self
    }

    /// Sets when a guest whose calls keep running out of time or trapping
    /// is quarantined. A quarantine holds back *every* key of the guest,
    /// healthy ones too: keep `failures` above the number of keys one bad
    /// input can fail at once.
    #[must_use]
    pub fn quarantine(mut self, quarantine: QuarantineConfig) -> Self {
        self.quarantine = quarantine;
        self
    }

    /// Sets when a key woken by its own echoes and writing each time is a
    /// hot loop, and how long it is then held back.
    #[must_use]
    pub fn hot_loops(mut self, hot_loops: HotLoopConfig) -> Self {
        self.hot_loops = hot_loops;
        self
    }

    /// Sets the claims shared by every guest of one host (the supervisor's).
    #[must_use]
    pub fn claims(mut self, claims: Claims) -> Self {
        self.claims = claims;
        self
    }

    /// Sets the host's own Pod (namespace, name), which quarantine Events
    /// regard.
    #[must_use]
    pub fn host_pod(mut self, pod: Option<(String, String)>) -> Self {
        self.host_pod = pod;
        self
    }
}

struct Watched {
    informer: Informer,
    handler: u64,
}

/// A controller's actuator, held through the controller.
#[derive(Clone)]
struct ActuatorOf(Arc<GuestController>);

impl std::ops::Deref for ActuatorOf {
    type Target = Actuator;
    fn deref(&self) -> &Actuator {
        &self.0.actuator
    }
}

/// A guest ready to run: its module, the environment it was described
/// with, and that description (describe runs once per load, in the
/// supervisor).
#[derive(Clone)]
pub struct DescribedGuest {
    /// The compiled module.
    pub module: GuestModule,
    /// The environment (namespace, configuration) every call gets.
    pub env: Environment,
    /// What `describe(env)` returned, validated.
    pub manifest: GuestManifest,
}

/// A running guest controller.
pub struct GuestController {
    name: String,
    /// The module, and its instances kept between reconciles.
    instances: Arc<crate::guest::WarmInstances>,
    manifest: Arc<GuestManifest>,
    env: Environment,
    watches: Vec<Watched>,
    caches: Arc<[WatchCache]>,
    aggregate: Option<Arc<Aggregate>>,
    queue: Workqueue<RequestKey>,
    /// Whether a key may write now, and what a write war holds back.
    guard: Arc<Guard>,
    actuator: Actuator,
    config: ControllerConfig,
    metrics: GuestMetrics,
    quarantine: Quarantine,
    recorder: crate::events::Recorder,
    /// Every metric family (the shadow's counters are registered there).
    families: Arc<Metrics>,
    /// A new version of this guest run beside it, compared, never acting.
    shadow: std::sync::Mutex<Option<Shadow>>,
    /// Where this guest's reconcile cases are recorded, when they are.
    recording: std::sync::Mutex<Option<crate::recording::Recording>>,
    /// Primaries that left their watch, as last seen, until settled.
    departed: Arc<departed::Departed>,
    /// Started through a dormant registry view: a guest this replica
    /// stands by for, cold. Its informers list nothing of their own; it is
    /// never run (a fresh controller is started when the guest is led).
    dormant: bool,
    /// With caches selected by bucket: sets the bucket label where it is
    /// missing or wrong.
    labeller: Option<labels::Labeller>,
}

impl Drop for GuestController {
    fn drop(&mut self) {
        for w in &self.watches {
            w.informer.remove_handler(w.handler);
        }
        self.queue.shutdown();
    }
}

impl GuestController {
    /// Checks the guest's permissions, acquires its informers and registers
    /// its handlers. Workers start with [`GuestController::run`].
    pub async fn start(
        client: Client,
        registry: &InformerRegistry,
        discovery: &Discovery,
        guest: DescribedGuest,
        config: ControllerConfig,
        metrics: Arc<Metrics>,
    ) -> Result<Self, ControllerError> {
        let DescribedGuest {
            module,
            env,
            manifest,
        } = guest;
        let name = manifest.name.clone();
        let queue = Workqueue::with_metrics(name.clone(), &config.queue, &metrics.workqueue);
        let families = metrics.clone();
        let metrics = GuestMetrics::new(metrics, &name);
        metrics.loaded(module.digest(), module.label());
        let resolve_err = |source| ControllerError::Resolve {
            guest: name.clone(),
            source,
        };

        let aggregate = match module
            .aggregate_spec(&manifest, &env)
            .map_err(ControllerError::Aggregate)?
        {
            Some(spec) => {
                let field = module
                    .entry_field(&manifest, &env)
                    .map_err(ControllerError::Aggregate)?;
                Some(Arc::new(Aggregate::new(spec, &manifest, field)))
            }
            None => None,
        };
        let resources = preflight::resolve(discovery, &manifest, &name).await?;
        module
            .policy()
            .admit_resolved(&manifest, &resources.watches, &resources.writes)
            .map_err(|source| ControllerError::Policy {
                guest: name.clone(),
                source,
            })?;
        preflight::check_status_rules(discovery, &manifest, &name).await?;
        let selecting = config.shards.as_ref().and_then(|s| s.selecting());
        preflight::preflight(&client, &manifest, &resources, &name, selecting.is_some()).await?;

        // A watch with the very informer key of an outputs cache (the kind
        // the guest also writes, unselected) asks for the whole object too,
        // so the outputs cache shares its informer: one watch and one
        // decode per event, and both handlers see each change at once.
        // With caches selected by bucket (`selecting`), the watches whose
        // objects map to their own key or their owner's, and the outputs,
        // hold only the objects labelled with a bucket cached here.
        let output_keys: Vec<InformerKey> = manifest
            .writes
            .iter()
            .zip(&resources.writes)
            .map(|(rule, ar)| {
                crate::outputs::informer_key(rule, ar.plural.clone(), selecting.as_deref())
            })
            .collect();
        let mut informers = Vec::new();
        // The keys of the watches selected by bucket, before the bucket term.
        let mut by_bucket = Vec::new();
        for (w, (spec, resource)) in manifest.watches.iter().zip(&resources.watches).enumerate() {
            let sharded = selecting.as_deref().filter(|_| labels::by_bucket(spec));
            let key = InformerKey {
                group: spec.gvk.group.clone(),
                version: spec.gvk.version.clone(),
                kind: spec.gvk.kind.clone(),
                plural: resource.plural.clone(),
                namespace: spec.namespace.clone(),
                label_selector: labels::and(spec.label_selector.as_deref(), sharded),
                field_selector: spec.field_selector.clone(),
            };
            if sharded.is_some() {
                by_bucket.push((
                    w,
                    InformerKey {
                        label_selector: spec.label_selector.clone(),
                        ..key.clone()
                    },
                ));
            }
            let mut fields = spec.projection.paths().to_vec();
            let output = output_keys.contains(&key);
            if output {
                fields.push(FieldPath::whole());
            }
            let retention = match (&aggregate, output) {
                (Some(a), false) => a.retention_for(&manifest, informers.len()),
                _ => crate::store::Retention::Projections,
            };
            informers.push(registry.acquire_keeping(
                &key,
                &fields,
                &spec.indexed_paths(),
                retention,
            ));
        }
        let caches: Arc<[WatchCache]> = manifest
            .watches
            .iter()
            .zip(&informers)
            .zip(&resources.namespaced)
            .map(|((spec, informer), namespaced)| WatchCache {
                store: informer.store().clone(),
                positions: field_positions(informer.projection(), spec.projection.paths()),
                namespaced: *namespaced,
            })
            .collect();
        // Every cache exists before the first handler: a handler replays
        // what its informer already holds and may look up other watches.
        let shared = Arc::new(manifest.clone());
        let keys: Arc<Keys> = Arc::default();
        let wakes: Arc<Wakes> = Arc::default();
        let departed: Arc<departed::Departed> = Arc::default();
        let guard = Arc::new(Guard::new(
            config.contests,
            config.hot_loops,
            keys.clone(),
            wakes.clone(),
        ));
        let feedback = Feedback {
            queue: queue.clone(),
            wakes: wakes.clone(),
            judge: guard.clone(),
        };
        let outputs = Outputs::start(
            registry,
            discovery,
            &manifest,
            keys,
            feedback,
            config.claims.clone(),
            selecting.as_deref(),
        )
        .await
        .map_err(resolve_err)?;
        // The outputs' handlers go first: an echo of our write is settled
        // before a watch of the same informer wakes its key, so the woken
        // reconcile never finds that echo still due.
        let watches: Vec<Watched> = informers
            .into_iter()
            .enumerate()
            .map(|(w, informer)| {
                let mut handler = handler(
                    shared.clone(),
                    caches.clone(),
                    w,
                    queue.clone(),
                    wakes.clone(),
                    departed.clone(),
                );
                if let Some(a) = aggregate.as_ref().filter(|a| a.maps(w)) {
                    handler = a.handler(w, handler);
                }
                let handler = informer.add_handler(handler);
                Watched { informer, handler }
            })
            .collect();

        let watched = manifest
            .watches
            .iter()
            .zip(&watches)
            .map(|(spec, w)| ActuatorWatched {
                gvk: spec.gvk.clone(),
                store: w.informer.store().clone(),
                unfiltered: spec.label_selector.is_none()
                    && spec.field_selector.is_none()
                    && (selecting.is_none() || !labels::by_bucket(spec)),
            })
            .collect();
        let labeller = config
            .shards
            .as_ref()
            .filter(|_| !by_bucket.is_empty())
            .map(|shards| {
                labels::Labeller::start(
                    registry,
                    &shared,
                    &caches,
                    &by_bucket,
                    shards,
                    &config.queue,
                )
            });
        let recorder = crate::events::Recorder::new(
            client.clone(),
            crate::events::Reporter {
                controller: "wasmctrl".into(),
                instance: config.instance.clone(),
            },
        );
        let actuator = Actuator::new(
            client,
            discovery.clone(),
            outputs,
            watched,
            metrics.clone(),
            shared.clone(),
            config.instance.clone(),
        )
        .pin_versions(config.pin_versions);
        Ok(GuestController {
            instances: Arc::new(crate::guest::WarmInstances::new(module, &name)),
            name,
            manifest: shared,
            env,
            watches,
            caches,
            aggregate,
            queue,
            guard,
            actuator,
            quarantine: Quarantine::new(config.quarantine),
            recorder,
            config,
            metrics,
            families,
            shadow: std::sync::Mutex::new(None),
            recording: std::sync::Mutex::new(None),
            departed,
            dormant: registry.is_dormant(),
            labeller,
        })
    }

    /// Whether this controller stands by cold (started through
    /// [`InformerRegistry::dormant`]): it keeps no caches of its own, counts
    /// as synced, and is never run.
    pub fn is_dormant(&self) -> bool {
        self.dormant
    }

    /// Its key sharding, if its keys are sharded over replicas.
    pub fn shards(&self) -> Option<&crate::leader_per_guest::Shards> {
        self.config.shards.as_ref()
    }

    /// What this controller was started from (module, environment,
    /// manifest): a fresh controller of the same guest starts from it.
    pub fn described(&self) -> DescribedGuest {
        DescribedGuest {
            module: self.instances.module().clone(),
            env: self.env.clone(),
            manifest: (*self.manifest).clone(),
        }
    }

    /// The shadow's and the recording's view of this controller.
    fn target(&self) -> shadow::Target {
        shadow::Target {
            module: self.instances.module().clone(),
            manifest: self.manifest.clone(),
            caches: self.caches.clone(),
            env: self.env.clone(),
            host_pod: self
                .config
                .host_pod
                .clone()
                .map(|pod| (self.recorder.clone(), pod)),
            dry_run: None,
        }
    }

    /// Records every key this guest reconciles from now on, as `config`
    /// says (see [`crate::recording`]).
    pub fn start_recording(&self, config: &crate::recording::RecordConfig) {
        self.retain_projections();
        let recording = crate::recording::Recording::start(config, self.target());
        *crate::sync::lock(&self.recording) = recording;
    }

    /// Runs `spec` as this guest's shadow from now on (replacing any
    /// other): every key reconciled is also compared with it; with
    /// `dry_run`, the shadow's differing writes are dry-run against the API
    /// server.
    pub fn attach_shadow(&self, spec: ShadowSpec, dry_run: bool) {
        self.retain_projections();
        let target = shadow::Target {
            dry_run: dry_run.then(|| self.actuator.dry_runner()),
            ..self.target()
        };
        let running = Shadow::start(spec, target, self.families.clone());
        *crate::sync::lock(&self.shadow) = Some(running);
    }

    /// Has every cache of the guest's watches keep projections from now
    /// on (a shadow or a recording builds whole snapshots): one holding
    /// identities relists, and until it has, those snapshots are not made.
    fn retain_projections(&self) {
        for w in &self.watches {
            w.informer.retain_projections();
        }
    }

    /// Whether every watch's cache holds each object's projection (false
    /// while an aggregate-only guest's caches keep identities, or are
    /// getting their projections back).
    pub fn caches_hold_projections(&self) -> bool {
        self.caches.iter().all(|c| c.store.holds_projections())
    }

    /// Stops the shadow running beside this guest, if any.
    pub fn detach_shadow(&self) {
        crate::sync::lock(&self.shadow).take();
    }

    /// The shadow running beside this guest, if any.
    pub fn shadow(&self) -> Option<ShadowSpec> {
        crate::sync::lock(&self.shadow)
            .as_ref()
            .map(|s| s.spec().clone())
    }

    /// The environment the guest is described and called with (its clock
    /// set per call).
    pub fn environment(&self) -> &Environment {
        &self.env
    }

    /// The guest's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// SHA-256 of the guest module.
    pub fn digest(&self) -> &str {
        self.instances.module().digest()
    }

    /// The guest's manifest.
    pub fn manifest(&self) -> &GuestManifest {
        &self.manifest
    }

    /// The guest's metrics (what it reconciled and wrote).
    pub fn metrics(&self) -> &GuestMetrics {
        &self.metrics
    }

    /// The incremental state of the guest's aggregate key, when it exports
    /// `aggregator`.
    pub fn aggregate(&self) -> Option<&Arc<Aggregate>> {
        self.aggregate.as_ref()
    }

    /// The guest's actuator (its writes and what it knows of their
    /// objects).
    pub fn actuator(&self) -> &Actuator {
        &self.actuator
    }

    /// The guest's queue.
    pub fn queue(&self) -> &Workqueue<RequestKey> {
        &self.queue
    }

    fn informers(&self) -> impl Iterator<Item = &Informer> {
        self.watches
            .iter()
            .map(|w| &w.informer)
            .chain(self.actuator.outputs().informers())
    }

    /// How many distinct informers (watches of the API server) the guest's
    /// watches and outputs caches read: a watch with an outputs cache's
    /// very key shares its informer.
    pub fn informer_count(&self) -> usize {
        let mut distinct: Vec<&Informer> = Vec::new();
        for informer in self.informers() {
            if !distinct.iter().any(|d| d.same(informer)) {
                distinct.push(informer);
            }
        }
        distinct.len()
    }

    /// Waits until every cache the guest reads or writes has synced.
    pub async fn wait_synced(&self) -> Result<(), ControllerError> {
        if self.dormant {
            return Ok(());
        }
        for informer in self.informers() {
            informer
                .wait_synced()
                .await
                .map_err(|source| ControllerError::Sync {
                    guest: self.name.clone(),
                    source,
                })?;
        }
        Ok(())
    }

    /// Whether every cache has synced.
    pub fn is_synced(&self) -> bool {
        self.dormant
            || self
                .informers()
                .all(|i| i.state() == crate::informer::SyncState::Synced)
    }

    /// Why one of the guest's caches makes the host not ready: its watch
    /// has been failing longer than tolerated (see [`crate::informer::health`]).
    pub fn unhealthy_watch(&self) -> Option<String> {
        self.informers().find_map(Informer::unready)
    }

    /// Whether watch `w`'s cache holds only the objects labelled with a
    /// bucket it caches.
    fn by_bucket(&self, w: usize) -> bool {
        self.labeller.is_some() && self.manifest.watches.get(w).is_some_and(labels::by_bucket)
    }

    /// How many primaries (objects of its per-object watches) it caches.
    pub fn primaries(&self) -> usize {
        self.manifest
            .watches
            .iter()
            .zip(self.caches.iter())
            .filter(|(spec, _)| spec.keys == crate::guest::KeyMapping::PerObject)
            .map(|(_, c)| c.store.len())
            .sum()
    }

    /// Enqueues every key the guest's world produces.
    pub fn enqueue_all(&self) {
        for key in relations::all_keys(&self.manifest, &self.caches) {
            self.queue.add(key);
        }
    }

    /// The objects this guest wrote (planned) that still exist.
    pub fn written(&self) -> Vec<crate::guest::ObjectKey> {
        self.actuator.outputs().written()
    }

    /// How many primaries that left their watch the controller keeps the
    /// last state of (for their keys' clean-up snapshots): it shrinks
    /// again as their reconciles settle.
    pub fn departed(&self) -> usize {
        self.departed.len()
    }

    /// How many objects the write bookkeeping keeps a record of (see
    /// `Outputs::tracked`): it shrinks again as written objects are deleted.
    pub fn outputs_tracked(&self) -> usize {
        self.actuator.outputs().tracked()
    }

    /// Waits for the caches, then runs workers and the resync timer until
    /// the queue shuts down or a cache fails.
    pub async fn run(self: Arc<Self>) -> Result<(), ControllerError> {
        self.run_when(std::future::ready(())).await
    }

    /// Like [`GuestController::run`], but workers start only once the caches
    /// have synced *and* `gate` resolves (leadership): a follower keeps its
    /// caches warm without reconciling.
    pub async fn run_when(
        self: Arc<Self>,
        gate: impl std::future::Future<Output = ()>,
    ) -> Result<(), ControllerError> {
        self.map_ahead_until_synced().await?;
        gate.await;
        tracing::info!(guest = %self.name, "caches synced; starting {} workers", self.config.workers);
        self.enqueue_all();
        let resync = self.manifest.resync.unwrap_or(self.config.resync);
        let ticker = {
            let this = Arc::downgrade(&self);
            tokio::spawn(async move {
                let mut interval =
                    tokio::time::interval_at(tokio::time::Instant::now() + resync, resync);
                loop {
                    interval.tick().await;
                    let Some(this) = this.upgrade() else { return };
                    this.metrics.resynced();
                    this.enqueue_all();
                }
            })
        };
        let failures = {
            let receivers: Vec<_> = self.informers().map(Informer::subscribe_state).collect();
            async move {
                let waits = receivers.into_iter().map(|mut rx| {
                    Box::pin(async move {
                        loop {
                            if let crate::informer::SyncState::Failed(e) = &*rx.borrow_and_update()
                            {
                                return e.clone();
                            }
                            if rx.changed().await.is_err() {
                                std::future::pending::<()>().await;
                            }
                        }
                    })
                });
                futures::future::select_all(waits).await.0
            }
        };
        let workers = {
            let this = self.clone();
            workqueue::run_workers(
                self.queue.clone(),
                self.config.workers,
                move |key: RequestKey| {
                    let this = this.clone();
                    async move {
                        let Some(shards) = &this.config.shards else {
                            return this.reconcile(key).await;
                        };
                        // Not this replica's bucket: dropped; whoever takes
                        // the bucket looks at every key.
                        let Some(admitted) = shards.admit(&key.key) else {
                            this.mislabelled(&key);
                            return workqueue::Outcome::Success;
                        };
                        tokio::select! {
                            biased;
                            _ = admitted.until_lost() => {
                                tracing::warn!(guest = %this.name, %key, "the key's bucket lease is lost; its reconcile abandoned");
                                workqueue::Outcome::Success
                            }
                            outcome = this.reconcile(key.clone()) => outcome,
                        }
                    }
                },
            )
        };
        // Labels where they are missing, until the controller stops (its
        // workers' end decides when).
        let labelling = async {
            if let Some(l) = &self.labeller {
                l.run(
                    ActuatorOf(self.clone()),
                    self.name.clone(),
                    self.config.workers,
                )
                .await;
            }
            std::future::pending::<()>().await
        };
        let result = tokio::select! {
            () = workers => Ok(()),
            () = labelling => Ok(()),
            e = failures => Err(ControllerError::Sync { guest: self.name.clone(), source: e }),
        };
        ticker.abort();
        result
    }

    /// Waits for the caches like [`GuestController::wait_synced`], mapping
    /// an aggregate's changes ahead in whole batches meanwhile (see
    /// [`Aggregate::map_ahead`]): the projections of the initial list are
    /// not all held until the first reconcile. A failed map leaves its
    /// changes to that reconcile, which reports it.
    async fn map_ahead_until_synced(&self) -> Result<(), ControllerError> {
        let Some(aggregate) = self.aggregate.clone() else {
            return self.wait_synced().await;
        };
        let synced = self.wait_synced();
        tokio::pin!(synced);
        loop {
            tokio::select! {
                result = &mut synced => return result,
                () = aggregate.batch_ready() => {}
            }
            let (a, instances, manifest, caches) = (
                aggregate.clone(),
                self.instances.clone(),
                self.manifest.clone(),
                self.caches.clone(),
            );
            let env = self.env.at(crate::guest::now_ms());
            let mapped = tokio::task::spawn_blocking(move || {
                a.map_ahead(instances.module(), &manifest, &caches, &env, usize::MAX)
            })
            .await;
            match mapped {
                Ok(Ok(stats)) => tracing::debug!(guest = %self.name, ?stats, "mapped ahead"),
                Ok(Err(e)) => {
                    tracing::debug!(guest = %self.name, "mapping ahead failed, left to the first reconcile: {e}");
                    return self.wait_synced().await;
                }
                Err(e) => {
                    tracing::warn!(guest = %self.name, "mapping ahead stopped: {e}");
                    return self.wait_synced().await;
                }
            }
        }
    }

    /// Stops handing out keys; in-flight reconciles finish.
    pub fn shutdown(&self) {
        if let Some(l) = &self.labeller {
            l.shutdown();
        }
        self.queue.shutdown();
    }
}

/// A handler for watch `w`: enqueues the keys each change wakes, noting in
/// `wakes` which change woke them (for the guard to tell the echo of a
/// key's own write from anyone else's change), and, for a primary watch,
/// noting in `departed` the last state of an object leaving it.
fn handler(
    manifest: Arc<GuestManifest>,
    caches: Arc<[WatchCache]>,
    w: usize,
    queue: crate::workqueue::Workqueue<RequestKey>,
    wakes: Arc<Wakes>,
    departed: Arc<departed::Departed>,
) -> crate::informer::Handler {
    Arc::new(move |change: &Change| {
        // The informer may be shared with a wider projection (the outputs
        // cache of the kind this guest also writes): a change this watch
        // cannot see wakes nobody.
        if caches.get(w).is_some_and(|c| c.unchanged(change)) {
            return;
        }
        if manifest.watches[w].keys == crate::guest::KeyMapping::PerObject {
            let key = RequestKey::object(w, change.object_key());
            match change.kind {
                ChangeKind::Deleted => departed.left(key, change.object.clone()),
                ChangeKind::Added => departed.returned(&key),
                ChangeKind::Updated => {}
            }
        }
        let gvk = &manifest.watches[w].gvk;
        for key in relations::keys_for(&manifest, &caches, w, change) {
            wakes.woken_by(
                &key,
                gvk,
                &change.namespace,
                &change.name,
                &change.resource_version,
            );
            queue.add(key);
        }
    })
}
