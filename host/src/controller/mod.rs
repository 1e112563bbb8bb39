//! One guest's control loop, data flowing one way: informers (reflectors)
//! → stores → handlers → workqueue → workers → pure guest reconcile →
//! actuator.
//!
//! Owns wiring a described guest into the shared machinery: the checks
//! that need the cluster (status subresources, the permission preflight),
//! acquiring the informers its manifest watches (with the indexes its key
//! mappings need), the resync timer, waiting for every cache (the
//! actuator's outputs caches included) to sync before any worker starts,
//! the host-managed finalizer (added to a primary object before its
//! reconcile; never removed here), and each reconcile: its snapshot, the
//! guest call with the host's clock, the plan handed to the actuator with
//! what woke the reconcile (a key held back as a hot loop, see
//! [`crate::actuator::hotloop`], is not reconciled until its hold-back
//! ends), the result turned into a queue outcome. An `aggregate-controller` guest's
//! aggregate key is reconciled incrementally by [`crate::aggregate`]
//! (changed objects mapped, groups rendered) instead of over a whole
//! snapshot. Mapping changes to keys is `keys`;
//! choosing a key's objects is `related`. Handlers only compute keys and
//! enqueue; the guest never writes; what the guest writes, and the echoes
//! of those writes, belong to the actuator, which never calls back here.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;

use crate::actuator::contest::ContestConfig;
use crate::actuator::hotloop::{HotLoopConfig, HotLoops};
use crate::actuator::outputs::Outputs;
use crate::actuator::ActuatorError;
use crate::actuator::{Actuator, Executed, Watched as ActuatorWatched};
use crate::aggregate::Aggregate;
use crate::claims::Claims;
use crate::discovery::{Discovery, DiscoveryError, WatchResourceError};
use crate::guest::{
    Environment, GuestError, GuestManifest, GuestModule, ManifestError, ObjectKey, Request,
};
use crate::informer::{Informer, InformerKey, InformerRegistry, SyncError};
use crate::metrics::{GuestMetrics, Metrics, ReconcileResult};
use crate::permissions::{self, Checked, Need, PermissionError};
use crate::projection::field_positions;
use crate::quarantine::{self, Quarantine, QuarantineConfig, Verdict};
pub use crate::relations::WatchCache;
use crate::relations::{self, snapshot_for};
use crate::request::RequestKey;
use crate::store::Change;
use crate::workqueue::{self, Outcome, Workqueue};

/// How soon a key whose pinned write was dropped (its object gone or
/// replaced) is looked at again, if no watch event has re-enqueued it
/// first: long enough for the caches to catch up, short enough that a
/// deletion's clean-up is not held up.
pub const DROPPED_WRITE_RECHECK: Duration = Duration::from_millis(200);

/// Why a guest's controller could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// A type in the manifest could not be resolved.
    #[error("guest {guest}: {source}")]
    Resolve {
        /// The guest.
        guest: String,
        /// The discovery error.
        #[source]
        source: DiscoveryError,
    },
    /// The resources discovery resolved the manifest to are more than the
    /// operator's policy grants.
    #[error("guest {guest}: {source}")]
    Policy {
        /// The guest.
        guest: String,
        /// Every denial.
        #[source]
        source: crate::guest::policy::PolicyDenied,
    },
    /// The host's credentials lack permissions the guest needs.
    #[error("guest {guest}: {source}")]
    Permissions {
        /// The guest.
        guest: String,
        /// Every missing permission.
        #[source]
        source: PermissionError,
    },
    /// The manifest asks for something the cluster does not offer (a
    /// status write rule for a kind without a status subresource).
    #[error("guest {guest}: invalid manifest: {source}")]
    Manifest {
        /// The guest.
        guest: String,
        /// Which field, and why.
        #[source]
        source: ManifestError,
    },
    /// The guest's `aggregator` export failed or named a key the manifest
    /// does not map to.
    #[error("{0}")]
    Aggregate(#[source] GuestError),
    /// A cache the guest needs cannot sync (or stopped syncing).
    #[error("guest {guest}: {source}")]
    Sync {
        /// The guest.
        guest: String,
        /// Which resource and verb failed.
        #[source]
        source: SyncError,
    },
}

impl ControllerError {
    /// A metric label for why the controller could not start.
    pub fn reason(&self) -> &'static str {
        match self {
            ControllerError::Resolve { .. } => "resolve",
            ControllerError::Policy { .. } => "policy",
            ControllerError::Permissions { .. } => "permissions",
            ControllerError::Manifest { .. } => "manifest",
            ControllerError::Aggregate(e) => e.reason(),
            ControllerError::Sync { .. } => "sync",
        }
    }

    /// The kind the guest needs that the API server does not serve (yet),
    /// when that is why the controller could not start: the guest can
    /// wait for it (a CRD being installed) instead of failing.
    pub fn kind_not_served(&self) -> Option<&str> {
        match self {
            ControllerError::Resolve { source, .. } if source.is_not_served() => Some(&source.gvk),
            _ => None,
        }
    }
}

/// Settings for one guest's controller.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Concurrent workers.
    pub workers: usize,
    /// Resync period when the guest does not choose one.
    pub resync: Duration,
    /// Queue rate limits.
    pub queue: workqueue::Config,
    /// Reporter instance for events (the pod name).
    pub instance: Option<String>,
    /// When another field manager taking our outputs back is a write war.
    pub contests: ContestConfig,
    /// Which guest of the host owns which object (shared by every guest of
    /// one host; the supervisor sets it).
    pub claims: Claims,
    /// When a guest whose calls keep failing in the sandbox is not called.
    pub quarantine: QuarantineConfig,
    /// The host's own Pod (namespace, name): quarantine Events regard it.
    pub host_pod: Option<(String, String)>,
    /// When a key rewriting its own object on every echo is a hot loop.
    pub hot_loops: HotLoopConfig,
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
        }
    }
}

impl ControllerConfig {
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
}

struct Watched {
    informer: Informer,
    handler: u64,
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
    module: GuestModule,
    manifest: Arc<GuestManifest>,
    env: Environment,
    watches: Vec<Watched>,
    caches: Arc<[WatchCache]>,
    aggregate: Option<Arc<Aggregate>>,
    queue: Workqueue<RequestKey>,
    actuator: Actuator,
    config: ControllerConfig,
    metrics: GuestMetrics,
    quarantine: Quarantine,
    recorder: crate::events::Recorder,
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
        let resources = resolve(discovery, &manifest, &name).await?;
        module
            .policy()
            .admit_resolved(&manifest, &resources.watches, &resources.writes)
            .map_err(|source| ControllerError::Policy {
                guest: name.clone(),
                source,
            })?;
        check_status_rules(discovery, &manifest, &name).await?;
        preflight(&client, &manifest, &resources, &name).await?;

        let mut informers = Vec::new();
        for (spec, resource) in manifest.watches.iter().zip(&resources.watches) {
            let key = InformerKey {
                group: spec.gvk.group.clone(),
                version: spec.gvk.version.clone(),
                kind: spec.gvk.kind.clone(),
                plural: resource.plural.clone(),
                namespace: spec.namespace.clone(),
                label_selector: spec.label_selector.clone(),
                field_selector: spec.field_selector.clone(),
            };
            informers.push(registry.acquire(&key, spec.projection.paths(), &spec.indexed_paths()));
        }
        let caches: Arc<[WatchCache]> = manifest
            .watches
            .iter()
            .zip(&informers)
            .map(|(spec, informer)| WatchCache {
                store: informer.store().clone(),
                positions: field_positions(informer.projection(), spec.projection.paths()),
            })
            .collect();
        // Every cache exists before the first handler: a handler replays
        // what its informer already holds and may look up other watches.
        let shared = Arc::new(manifest.clone());
        let loops = Arc::new(HotLoops::new(config.hot_loops));
        let watches: Vec<Watched> = informers
            .into_iter()
            .enumerate()
            .map(|(w, informer)| {
                let mut handler = handler(
                    shared.clone(),
                    caches.clone(),
                    w,
                    queue.clone(),
                    loops.clone(),
                );
                if let Some(a) = aggregate.as_ref().filter(|a| a.maps(w)) {
                    handler = a.handler(w, handler);
                }
                let handler = informer.add_handler(handler);
                Watched { informer, handler }
            })
            .collect();

        let outputs = Outputs::start(
            registry,
            discovery,
            &manifest,
            &queue,
            config.contests,
            loops,
            config.claims.clone(),
        )
        .await
        .map_err(resolve_err)?;
        let watched = manifest
            .watches
            .iter()
            .zip(&watches)
            .map(|(spec, w)| ActuatorWatched {
                gvk: spec.gvk.clone(),
                store: w.informer.store().clone(),
                unfiltered: spec.label_selector.is_none() && spec.field_selector.is_none(),
            })
            .collect();
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
        );
        Ok(GuestController {
            name,
            module,
            manifest: shared,
            env,
            watches,
            caches,
            aggregate,
            queue,
            actuator,
            quarantine: Quarantine::new(config.quarantine),
            recorder,
            config,
            metrics,
        })
    }

    /// The guest's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// SHA-256 of the guest module.
    pub fn digest(&self) -> &str {
        self.module.digest()
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

    /// Waits until every cache the guest reads or writes has synced.
    pub async fn wait_synced(&self) -> Result<(), ControllerError> {
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
        self.informers()
            .all(|i| i.state() == crate::informer::SyncState::Synced)
    }

    /// Why one of the guest's caches makes the host not ready: its watch
    /// has been failing longer than tolerated (see [`crate::informer::health`]).
    pub fn unhealthy_watch(&self) -> Option<String> {
        self.informers().find_map(Informer::unready)
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
        self.wait_synced().await?;
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
                    async move { this.reconcile(key).await }
                },
            )
        };
        let result = tokio::select! {
            () = workers => Ok(()),
            e = failures => Err(ControllerError::Sync { guest: self.name.clone(), source: e }),
        };
        ticker.abort();
        result
    }

    /// Stops handing out keys; in-flight reconciles finish.
    pub fn shutdown(&self) {
        self.queue.shutdown();
    }

    /// One reconcile of `key`, measured, inside its own span. The span is
    /// attached to the future (`Instrument`), never entered across an
    /// `.await`: a guard held over a suspension point leaks into whatever
    /// the worker thread polls next (another key's reconcile), nesting spans
    /// across keys and guests.
    async fn reconcile(&self, key: RequestKey) -> Outcome {
        use tracing::Instrument;
        if let Some(left) = self.quarantine.remaining(tokio::time::Instant::now()) {
            // Quarantined: nothing is called; the key comes back when the
            // quarantine ends, its backoff kept.
            return Outcome::Postpone(left);
        }
        let started = std::time::Instant::now();
        let span = tracing::info_span!("reconcile", guest = %self.name, key = %key);
        let (outcome, reason) = self.reconcile_inner(key).instrument(span).await;
        let result = match (&outcome, reason) {
            (_, Some(reason)) => ReconcileResult::Error(reason),
            (Outcome::RequeueAfter(_), None) => ReconcileResult::RequeueAfter,
            _ => ReconcileResult::Success,
        };
        self.metrics.reconciled(result, started.elapsed());
        outcome
    }

    /// Adds the primary watch's declared finalizer to `key`'s object when it
    /// lacks it and is not being deleted: before the guest ever sees it, so
    /// no deletion can happen without the guest's plan releasing it.
    async fn ensure_finalizer(
        &self,
        key: &RequestKey,
    ) -> Result<Executed, crate::actuator::ActuatorError> {
        let Some(p) = key.watch else {
            return Ok(Executed::default());
        };
        let spec = &self.manifest.watches[p];
        let Some(finalizer) = &spec.finalizer else {
            return Ok(Executed::default());
        };
        let (ns, name) = key.namespace_and_name();
        let Some(obj) = self.caches[p].store.get(ns, name) else {
            return Ok(Executed::default());
        };
        if obj.deletion_timestamp.is_some() || obj.has_finalizer(finalizer) {
            return Ok(Executed::default());
        }
        let target = ObjectKey {
            gvk: spec.gvk.clone(),
            namespace: (!ns.is_empty()).then(|| ns.to_string()),
            name: name.to_string(),
        };
        self.actuator
            .ensure_finalizer(&target, &obj.uid, finalizer)
            .await
    }

    /// One reconcile; the error reason (a metric label) when it failed.
    async fn reconcile_inner(&self, key: RequestKey) -> (Outcome, Option<&'static str>) {
        let loops = self.actuator.outputs().loops();
        let woken = loops.begin(&key);
        if let Some(left) = loops.held_back(&key, tokio::time::Instant::now()) {
            // A hot loop: the key is not reconciled (nothing is planned,
            // so nothing is written) until its hold-back ends.
            tracing::debug!("hot loop: not reconciled for another {left:?}");
            return (Outcome::RequeueAfter(left), None);
        }
        let mut executed = match self.ensure_finalizer(&key).await {
            Ok(done) => done,
            Err(e) => {
                let reason = e.metric_label();
                tracing::warn!(reason, "adding the host-managed finalizer: {e}");
                return (write_outcome(e), Some(reason));
            }
        };
        if executed.dropped > 0 {
            // The finalizer could not be added: the object is gone or was
            // replaced. The snapshot would still hold it, and a plan made
            // on it could create children of an object that no longer
            // exists. Look again once the cache has caught up (its delete
            // or the namesake's add re-enqueues the key too).
            tracing::info!("primary gone or replaced before its finalizer landed; not reconciled on the stale cache");
            return (Outcome::RequeueAfter(DROPPED_WRITE_RECHECK), None);
        }
        let module = self.module.clone();
        let manifest = self.manifest.clone();
        let caches = self.caches.clone();
        let env = self.env.at(crate::guest::now_ms());
        let request = Request {
            key: key.key.to_string(),
            watch: key.watch.map(|w| manifest.watches[w].name.clone()),
        };
        let k = key.clone();
        let aggregate = self
            .aggregate
            .clone()
            .filter(|a| key.watch.is_none() && &*key.key == a.key());
        // The blocking pool's thread is outside this future: carry the span.
        let span = tracing::Span::current();
        let joined = tokio::task::spawn_blocking(move || {
            span.in_scope(|| match aggregate {
                Some(aggregate) => {
                    let (result, stats) = aggregate.reconcile(&module, &manifest, &caches, &env);
                    tracing::debug!(?stats, "incremental aggregate");
                    let call = crate::guest::CallStats {
                        instantiate: stats.instantiate,
                        call: stats.call,
                        requeue_clamped: stats.requeue_clamped,
                        log_limited: stats.log_limited,
                    };
                    (result, call)
                }
                None => {
                    let snap = snapshot_for(&manifest, &caches, &k);
                    module.reconcile(&manifest, &env, &request, snap)
                }
            })
        })
        .await;
        let (result, stats) = match joined {
            Ok(r) => r,
            Err(e) => {
                return (
                    Outcome::retry(format!("reconcile task failed: {e}")),
                    Some("panic"),
                );
            }
        };
        tracing::debug!(?stats, "guest call");
        self.metrics.guest_call(
            stats.instantiate,
            stats.call,
            result.as_ref().err().map(GuestError::reason),
        );
        match &result {
            Err(e) if quarantine::counts(e.reason()) => self.sandbox_failed(e).await,
            _ => {
                if self.quarantine.succeeded() {
                    tracing::info!("guest call returned; quarantine over");
                    self.metrics.quarantined(false);
                }
            }
        }
        self.metrics
            .limited("min_requeue", u64::from(stats.requeue_clamped));
        self.metrics.limited("log", stats.log_limited);
        let plan = match result {
            Ok(plan) => plan,
            Err(e) => {
                let reason = e.reason();
                let terminal = matches!(
                    e.kind,
                    crate::guest::GuestErrorKind::Failed {
                        retryable: false,
                        ..
                    }
                );
                if terminal {
                    tracing::error!(reason, "{e}; not retrying until the key changes");
                    return (Outcome::Success, Some(reason));
                }
                tracing::warn!(reason, "{e}");
                return (Outcome::retry(e), Some(reason));
            }
        };
        if let Err(c) = self.config.claims.claim(&self.name, &plan.writes) {
            tracing::warn!(guest = %self.name, owner = %c.owner, object = %c.object, "plan refused: {c}");
            self.metrics.refused_write(&c.owner);
            return (Outcome::retry(c), Some("claimed"));
        }
        match self.actuator.execute(&key, &plan, &woken).await {
            Err(e) => {
                let reason = e.metric_label();
                tracing::warn!(reason, "{e}");
                return (write_outcome(e), Some(reason));
            }
            Ok(done) => {
                self.config.claims.deleted(&self.name, &plan.writes);
                executed.changed_meanwhile |= done.changed_meanwhile;
                executed.dropped += done.dropped;
                executed.held_back = done.held_back;
            }
        }
        // Someone else wrote an output while our write was in flight: look
        // again (the key is being processed, so this re-queues it once it
        // is done).
        if executed.changed_meanwhile {
            self.queue.add(key.clone());
        }
        let mut requeue = plan.requeue_after;
        if executed.dropped > 0 {
            // A pinned write met a gone or replaced object: not an error;
            // the key is looked at again once the caches have caught up.
            requeue = Some(requeue.map_or(DROPPED_WRITE_RECHECK, |d| d.min(DROPPED_WRITE_RECHECK)));
        }
        if let Some(d) = executed.held_back {
            // A write war or a hot loop: come back when its hold-back ends.
            requeue = Some(requeue.map_or(d, |r| r.min(d)));
        }
        let outcome = match requeue {
            Some(d) => Outcome::RequeueAfter(d),
            None => Outcome::Success,
        };
        (outcome, None)
    }
}

impl GuestController {
    /// Records a call that ran out of time or trapped; starts a quarantine
    /// (log line, metric, Warning Event on the host's Pod) when that makes
    /// too many in a row.
    async fn sandbox_failed(&self, e: &GuestError) {
        let Verdict::Quarantined(length, failures) =
            self.quarantine.failed(tokio::time::Instant::now())
        else {
            return;
        };
        let note = format!(
            "guest {} quarantined for {length:?} after {failures} calls in a row that ran out of time or trapped (last: {e}); its keys wait",
            self.name
        );
        tracing::warn!(guest = %self.name, reason = e.reason(), ?length, failures, "{note}");
        self.metrics.quarantined(true);
        let Some((namespace, pod)) = &self.config.host_pod else {
            return;
        };
        let event = crate::events::Event {
            type_: crate::events::EventType::Warning,
            reason: "GuestQuarantined".into(),
            note: Some(note),
            action: "Reconcile".into(),
            secondary: None,
        };
        let reference = crate::events::pod_reference(namespace, pod);
        if let Err(err) = self.recorder.publish(&event, &reference).await {
            tracing::warn!("cannot record event GuestQuarantined on pod {namespace}/{pod}: {err}");
        }
    }
}

/// The queue outcome of a key whose writes failed with `e`: the server's
/// failures are retried promptly once it answers again
/// ([`workqueue::Outcome::Unavailable`]); the request's keep their backoff.
fn write_outcome(e: ActuatorError) -> Outcome {
    match &e {
        ActuatorError::Api { source, .. } if crate::failure::is_server_side(source) => {
            Outcome::unavailable(e)
        }
        _ => Outcome::retry(e),
    }
}

/// A handler for watch `w`: enqueues the keys each change wakes, telling
/// `loops` which change woke them (the echo of a key's own write, or not).
fn handler(
    manifest: Arc<GuestManifest>,
    caches: Arc<[WatchCache]>,
    w: usize,
    queue: crate::workqueue::Workqueue<RequestKey>,
    loops: Arc<HotLoops>,
) -> crate::informer::Handler {
    Arc::new(move |change: &Change| {
        let gvk = &manifest.watches[w].gvk;
        for key in relations::keys_for(&manifest, &caches, w, change) {
            loops.woken_by(
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

/// Refuses, naming the guest and the rule, a status write rule for a kind
/// without a status subresource (a status written to the main resource
/// would be dropped by the API server, silently, forever).
async fn check_status_rules(
    discovery: &Discovery,
    manifest: &GuestManifest,
    guest: &str,
) -> Result<(), ControllerError> {
    for (i, rule) in manifest.writes.iter().enumerate() {
        if !rule.status {
            continue;
        }
        let has =
            discovery
                .has_status(&rule.gvk)
                .await
                .map_err(|source| ControllerError::Resolve {
                    guest: guest.to_string(),
                    source,
                })?;
        if !has {
            return Err(ControllerError::Manifest {
                guest: guest.to_string(),
                source: ManifestError::Invalid {
                    field: format!("writes[{i}].status"),
                    problem: format!(
                        "{} has no status subresource (API discovery lists none): write its status with update, or drop status: true",
                        rule.gvk
                    ),
                },
            });
        }
    }
    Ok(())
}

/// The API resources a manifest's watches and write rules resolve to,
/// position for position.
struct Resources {
    watches: Vec<kube::api::ApiResource>,
    writes: Vec<kube::api::ApiResource>,
}

/// Resolves every watch and write rule through discovery: the resources
/// the host will list and write. A watch whose declared plural is not
/// discovery's is refused, naming the watch and both plurals.
async fn resolve(
    discovery: &Discovery,
    manifest: &GuestManifest,
    guest: &str,
) -> Result<Resources, ControllerError> {
    let resolve_err = |source| ControllerError::Resolve {
        guest: guest.to_string(),
        source,
    };
    let mut watches = Vec::with_capacity(manifest.watches.len());
    for (i, spec) in manifest.watches.iter().enumerate() {
        match discovery.watch_resource(spec).await {
            Ok(resource) => watches.push(resource),
            Err(WatchResourceError::Discovery(e)) => return Err(resolve_err(e)),
            Err(e @ WatchResourceError::PluralMismatch { .. }) => {
                tracing::error!(guest, watch = %spec.name, "{e}");
                return Err(ControllerError::Manifest {
                    guest: guest.to_string(),
                    source: ManifestError::Invalid {
                        field: format!("watches[{i}] ({}).plural", spec.name),
                        problem: e.to_string(),
                    },
                });
            }
        }
    }
    let mut writes = Vec::with_capacity(manifest.writes.len());
    for rule in &manifest.writes {
        writes.push(discovery.resource(&rule.gvk).await.map_err(resolve_err)?);
    }
    Ok(Resources { watches, writes })
}

/// Checks, before any cache starts, that the host may do everything the
/// guest's manifest needs (see [`crate::permissions`]): list and watch what
/// it watches and the objects it writes (the outputs cache), and patch and
/// create (an apply that creates is authorized as both) the write targets
/// in the namespaces it names.
async fn preflight(
    client: &Client,
    manifest: &GuestManifest,
    resources: &Resources,
    guest: &str,
) -> Result<(), ControllerError> {
    let mut needs = Vec::new();
    for (spec, resource) in manifest.watches.iter().zip(&resources.watches) {
        let plural = &resource.plural;
        for verb in ["list", "watch"] {
            needs.push(Need::new(
                verb,
                &spec.gvk.group,
                plural,
                spec.namespace.as_deref(),
                None,
            ));
        }
        // The host adds (and the guest's plan removes) the declared
        // finalizer with a patch.
        if spec.finalizer.is_some() {
            needs.push(Need::new(
                "patch",
                &spec.gvk.group,
                plural,
                spec.namespace.as_deref(),
                None,
            ));
        }
    }
    for (rule, resource) in manifest.writes.iter().zip(&resources.writes) {
        let plural = &resource.plural;
        let group = rule.gvk.group.as_str();
        let ns = rule.namespace.as_deref();
        let single = match rule.names.as_slice() {
            [one] => Some(one.as_str()),
            _ => None,
        };
        for verb in ["list", "watch"] {
            needs.push(Need::new(verb, group, plural, ns, single));
        }
        // Without a namespace the rule says where the guest *may* write,
        // not where it will: nothing precise to ask.
        if ns.is_some() {
            // An apply that creates the object is authorized as create too.
            needs.push(Need::new("create", group, plural, ns, None));
            if rule.names.is_empty() {
                needs.push(Need::new("patch", group, plural, ns, None));
            }
            for n in &rule.names {
                needs.push(Need::new("patch", group, plural, ns, Some(n)));
            }
        }
    }
    match permissions::check(client, &needs).await {
        Ok(Checked::Allowed) => Ok(()),
        Ok(unavailable) => {
            tracing::warn!(
                guest,
                "{unavailable}; a missing permission will show as a 403 later"
            );
            Ok(())
        }
        Err(source) => Err(ControllerError::Permissions {
            guest: guest.to_string(),
            source,
        }),
    }
}
