//! One guest's control loop, data flowing one way: informers (reflectors)
//! → stores → handlers → workqueue → workers → pure guest reconcile →
//! actuator.
//!
//! Owns wiring a described guest into the shared machinery: the permission
//! preflight, acquiring the informers its manifest watches, mapping changes
//! to request keys, the resync timer, waiting for every cache (the
//! actuator's outputs caches included) to sync before any worker starts,
//! building each reconcile's snapshot from the stores, and turning results
//! into queue outcomes. Handlers only compute keys and enqueue; the guest
//! never writes; what the guest writes, and the echoes of those writes,
//! belong to the actuator, which never calls back here.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;

use crate::actuator::{Actuator, Watched as ActuatorWatched};
use crate::discovery::{Discovery, DiscoveryError};
use crate::guest::snapshot::{self, WatchView};
use crate::guest::{Environment, GuestError, GuestManifest, GuestModule, KeyMapping};
use crate::informer::{
    field_positions, Change, Informer, InformerKey, InformerRegistry, SyncError,
};
use crate::metrics::{GuestMetrics, Metrics, ReconcileResult};
use crate::outputs::Outputs;
use crate::permissions::{self, Checked, Need, PermissionError};
use crate::store::object_key;
use crate::workqueue::{self, Outcome, Workqueue};

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
    /// The host's credentials lack permissions the guest needs.
    #[error("guest {guest}: {source}")]
    Permissions {
        /// The guest.
        guest: String,
        /// Every missing permission.
        #[source]
        source: PermissionError,
    },
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
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            workers: 2,
            resync: Duration::from_secs(600),
            queue: workqueue::Config::default(),
            instance: None,
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
}

struct Watched {
    informer: Informer,
    positions: Vec<usize>,
    keys: KeyMapping,
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
    queue: Workqueue<String>,
    actuator: Actuator,
    config: ControllerConfig,
    metrics: GuestMetrics,
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

        preflight(&client, discovery, &manifest, &name, resolve_err).await?;

        let mut watches = Vec::new();
        for spec in &manifest.watches {
            let plural = discovery.watch_plural(spec).await.map_err(resolve_err)?;
            let key = InformerKey {
                group: spec.gvk.group.clone(),
                version: spec.gvk.version.clone(),
                kind: spec.gvk.kind.clone(),
                plural,
                namespace: spec.namespace.clone(),
                label_selector: spec.label_selector.clone(),
                field_selector: spec.field_selector.clone(),
            };
            let informer = registry.acquire(&key, spec.projection.paths());
            let positions = field_positions(informer.projection(), spec.projection.paths());
            let q = queue.clone();
            let mapping = spec.keys.clone();
            let handler = informer.add_handler(Arc::new(move |change: &Change| match &mapping {
                KeyMapping::PerObject => q.add(change.object_key()),
                KeyMapping::Aggregate(k) => q.add(k.clone()),
                KeyMapping::None => {}
            }));
            watches.push(Watched {
                informer,
                positions,
                keys: spec.keys.clone(),
                handler,
            });
        }

        let outputs = Outputs::start(registry, discovery, &manifest, &queue)
            .await
            .map_err(resolve_err)?;
        let watched = manifest
            .watches
            .iter()
            .zip(&watches)
            .map(|(spec, w)| ActuatorWatched {
                gvk: spec.gvk.clone(),
                store: w.informer.store().clone(),
            })
            .collect();
        let actuator = Actuator::new(
            client,
            discovery.clone(),
            outputs,
            watched,
            metrics.clone(),
            &name,
            config.instance.clone(),
        );
        Ok(GuestController {
            name,
            module,
            manifest: Arc::new(manifest),
            env,
            watches,
            queue,
            actuator,
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

    /// The guest's queue.
    pub fn queue(&self) -> &Workqueue<String> {
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

    /// Enqueues every key the guest's world produces.
    pub fn enqueue_all(&self) {
        for w in &self.watches {
            match &w.keys {
                KeyMapping::Aggregate(k) => self.queue.add(k.clone()),
                KeyMapping::PerObject => {
                    for ((namespace, name), _) in w.informer.store().versions() {
                        self.queue.add(object_key(&namespace, &name));
                    }
                }
                KeyMapping::None => {}
            }
        }
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
                move |key: String| {
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

    /// One reconcile of `key`, measured.
    async fn reconcile(&self, key: String) -> Outcome {
        let started = std::time::Instant::now();
        let (outcome, reason) = self.reconcile_inner(key).await;
        let result = match (&outcome, reason) {
            (_, Some(reason)) => ReconcileResult::Error(reason),
            (Outcome::RequeueAfter(_), None) => ReconcileResult::RequeueAfter,
            _ => ReconcileResult::Success,
        };
        self.metrics.reconciled(result, started.elapsed());
        outcome
    }

    /// One reconcile; the error reason (a metric label) when it failed.
    async fn reconcile_inner(&self, key: String) -> (Outcome, Option<&'static str>) {
        let span = tracing::info_span!("reconcile", guest = %self.name, key = %key);
        let _enter = span.enter();
        let lists: Vec<(Vec<Arc<crate::projection::ProjectedObject>>, Vec<usize>)> = self
            .watches
            .iter()
            .map(|w| (w.informer.list(), w.positions.clone()))
            .collect();
        let module = self.module.clone();
        let manifest = self.manifest.clone();
        let env = self.env.clone();
        let k = key.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let views: Vec<WatchView<'_>> = lists
                .iter()
                .map(|(objs, positions)| WatchView {
                    objects: objs.iter().map(Arc::as_ref).collect(),
                    positions: positions.clone(),
                })
                .collect();
            let snap = snapshot::build(&manifest, &views);
            module.reconcile(&manifest, &env, &k, &snap)
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
        match self.actuator.execute(&key, &plan).await {
            Err(e) => {
                let reason = e.metric_label();
                tracing::warn!(reason, "{e}");
                return (Outcome::retry(e), Some(reason));
            }
            // Someone else wrote an output while our apply was in flight:
            // look again (the key is being processed, so this re-queues it
            // once it is done).
            Ok(true) => self.queue.add(key.clone()),
            Ok(false) => {}
        }
        let outcome = match plan.requeue_after {
            Some(d) => Outcome::RequeueAfter(d),
            None => Outcome::Success,
        };
        (outcome, None)
    }
}

/// Checks, before any cache starts, that the host may do everything the
/// guest's manifest needs (see [`crate::permissions`]): list and watch what
/// it watches and the objects it writes (the outputs cache), and patch and
/// create (an apply that creates is authorized as both) the write targets
/// in the namespaces it names.
async fn preflight(
    client: &Client,
    discovery: &Discovery,
    manifest: &GuestManifest,
    guest: &str,
    resolve_err: impl Fn(DiscoveryError) -> ControllerError,
) -> Result<(), ControllerError> {
    let mut needs = Vec::new();
    for spec in &manifest.watches {
        let plural = discovery.watch_plural(spec).await.map_err(&resolve_err)?;
        for verb in ["list", "watch"] {
            needs.push(Need::new(
                verb,
                &spec.gvk.group,
                &plural,
                spec.namespace.as_deref(),
                None,
            ));
        }
    }
    for rule in &manifest.writes {
        let plural = discovery
            .resource(&rule.gvk)
            .await
            .map_err(&resolve_err)?
            .plural;
        let group = rule.gvk.group.as_str();
        let ns = rule.namespace.as_deref();
        let single = match rule.names.as_slice() {
            [one] => Some(one.as_str()),
            _ => None,
        };
        for verb in ["list", "watch"] {
            needs.push(Need::new(verb, group, &plural, ns, single));
        }
        // Without a namespace the rule says where the guest *may* write,
        // not where it will: nothing precise to ask.
        if ns.is_some() {
            // An apply that creates the object is authorized as create too.
            needs.push(Need::new("create", group, &plural, ns, None));
            if rule.names.is_empty() {
                needs.push(Need::new("patch", group, &plural, ns, None));
            }
            for n in &rule.names {
                needs.push(Need::new("patch", group, &plural, ns, Some(n)));
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
