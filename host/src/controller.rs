//! One guest's control loop: informers → handlers → workqueue → workers →
//! pure guest reconcile → actuator.
//!
//! Owns wiring a loaded guest into the shared machinery: acquiring the
//! informers its manifest asks for (and informers on what it writes, so a
//! hand edit or delete is undone), mapping changes to request keys, the
//! resync timer, waiting for every cache to sync before any worker starts,
//! and turning reconcile results into queue outcomes. Handlers only compute
//! keys and enqueue; the guest never writes; the actuator never retries in
//! line.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Client;
use serde_json::Value as Json;

use crate::actuator::{Actuator, ActuatorCounters, ActuatorError, LiveObjects};
use crate::guest::snapshot::{self, WatchView};
use crate::guest::{
    Environment, GuestError, GuestManifest, GuestModule, KeyMapping, ObjectKey, WatchSpec,
};
use crate::informer::{
    field_positions, whole_object, Change, ChangeKind, Informer, InformerKey, InformerRegistry,
    SyncError,
};
use crate::metrics::{self as m, Metrics};
use crate::permissions::{self, Checked, Need, PermissionError};
use crate::projection::FieldPath;
use crate::sync::lock;
use crate::workqueue::{self, Outcome, Workqueue};

/// Why a guest's controller could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// Loading the guest's manifest failed.
    #[error(transparent)]
    Guest(#[from] GuestError),
    /// A type in the manifest could not be resolved.
    #[error("guest {guest}: {source}")]
    Resolve {
        /// The guest.
        guest: String,
        /// The discovery error.
        #[source]
        source: ActuatorError,
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

/// Counters of one controller, for tests, the demo and metrics.
#[derive(Debug, Default)]
pub struct ControllerStats {
    /// Reconciles run (any result).
    pub reconciles: AtomicU64,
    /// Reconciles that failed (guest or actuator).
    pub errors: AtomicU64,
    /// Full resyncs.
    pub resyncs: AtomicU64,
}

struct Watched {
    informer: Informer,
    positions: Vec<usize>,
    keys: KeyMapping,
    handler: u64,
}

struct Output {
    rule: crate::guest::WriteRule,
    informer: Informer,
    handler: u64,
}

/// A running guest controller.
pub struct GuestController {
    name: String,
    module: GuestModule,
    manifest: Arc<GuestManifest>,
    env: Environment,
    watches: Vec<Watched>,
    outputs: Vec<Output>,
    queue: Workqueue<String>,
    actuator: Arc<Actuator>,
    stats: Arc<ControllerStats>,
    config: ControllerConfig,
    /// Which request key last planned each written object.
    producers: Arc<Mutex<HashMap<ObjectKey, String>>>,
    metrics: Option<Arc<Metrics>>,
}

impl Drop for GuestController {
    fn drop(&mut self) {
        for w in &self.watches {
            w.informer.remove_handler(w.handler);
        }
        for o in &self.outputs {
            o.informer.remove_handler(o.handler);
        }
        self.queue.shutdown();
    }
}

fn object_key(change: &Change) -> String {
    if change.namespace.is_empty() {
        change.name.to_string()
    } else {
        format!("{}/{}", change.namespace, change.name)
    }
}

impl GuestController {
    /// Loads the guest's manifest, acquires its informers and registers its
    /// handlers. Workers start with [`GuestController::run`].
    pub async fn start(
        client: Client,
        registry: &InformerRegistry,
        module: GuestModule,
        env: Environment,
        config: ControllerConfig,
        metrics: Option<Arc<Metrics>>,
    ) -> Result<Self, ControllerError> {
        let manifest = {
            let module = module.clone();
            let env = env.clone();
            tokio::task::spawn_blocking(move || module.manifest(&env))
                .await
                .map_err(|e| GuestError {
                    guest: "(manifest)".into(),
                    kind: crate::guest::GuestErrorKind::Trap(format!("manifest task failed: {e}")),
                })??
        };
        let name = manifest.name.clone();
        let queue = match &metrics {
            Some(m) => Workqueue::with_metrics(name.clone(), &config.queue, &m.workqueue),
            None => Workqueue::new(&config.queue),
        };
        if let Some(m) = &metrics {
            m.guest_info
                .get_or_create(&crate::metrics::GuestInfoLabels {
                    guest: name.clone(),
                    digest: module.digest().to_string(),
                    file: module.label().to_string(),
                })
                .set(1);
        }
        let client_for_checks = client.clone();
        let actuator = Arc::new(Actuator::with_metrics(
            client,
            &name,
            config.instance.clone(),
            metrics.clone(),
        ));
        let resolve_err = |source| ControllerError::Resolve {
            guest: name.clone(),
            source,
        };

        preflight(&client_for_checks, &actuator, &manifest, &name, resolve_err).await?;

        let mut watches = Vec::new();
        for spec in &manifest.watches {
            let plural = watch_plural(&actuator, spec).await.map_err(resolve_err)?;
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
                KeyMapping::PerObject => q.add(object_key(change)),
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

        let producers: Arc<Mutex<HashMap<ObjectKey, String>>> = Arc::default();
        let aggregate_keys: Vec<String> = manifest
            .watches
            .iter()
            .filter_map(|w| match &w.keys {
                KeyMapping::Aggregate(k) => Some(k.clone()),
                _ => None,
            })
            .collect();
        let mut outputs = Vec::new();
        for rule in &manifest.writes {
            let ar = actuator.resource(&rule.gvk).await.map_err(resolve_err)?;
            let field_selector = match rule.names.as_slice() {
                [one] => Some(format!("metadata.name={one}")),
                _ => None,
            };
            let key = InformerKey {
                group: rule.gvk.group.clone(),
                version: rule.gvk.version.clone(),
                kind: rule.gvk.kind.clone(),
                plural: ar.plural,
                namespace: rule.namespace.clone(),
                label_selector: None,
                field_selector,
            };
            let informer = registry.acquire(&key, &[FieldPath::whole()]);
            let q = queue.clone();
            let gvk = rule.gvk.clone();
            let producers = producers.clone();
            let aggregate_keys = aggregate_keys.clone();
            let echoes = actuator.clone();
            let handler = informer.add_handler(Arc::new(move |change: &Change| {
                let written = ObjectKey {
                    gvk: gvk.clone(),
                    namespace: (!change.namespace.is_empty()).then(|| change.namespace.to_string()),
                    name: change.name.to_string(),
                };
                // The echo of our own apply changes nothing we did not
                // decide: no reconcile. (Until it arrives, the actuator
                // does not trust this cache to skip a write.)
                let cached_rv = (change.kind != ChangeKind::Deleted)
                    .then_some(change.resource_version.as_ref());
                if echoes.settle(&written, cached_rv) {
                    return;
                }
                let producer = lock(&producers).get(&written).cloned();
                match producer {
                    Some(k) => q.add(k),
                    // Written before this process started: any aggregate
                    // key may own it.
                    None => aggregate_keys.iter().for_each(|k| q.add(k.clone())),
                }
            }));
            outputs.push(Output {
                rule: rule.clone(),
                informer,
                handler,
            });
        }
        Ok(GuestController {
            name,
            module,
            manifest: Arc::new(manifest),
            env,
            watches,
            outputs,
            queue,
            actuator,
            stats: Arc::default(),
            config,
            producers,
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

    /// The controller's counters.
    pub fn stats(&self) -> Arc<ControllerStats> {
        self.stats.clone()
    }

    /// The actuator's counters.
    pub fn actuator_counters(&self) -> Arc<ActuatorCounters> {
        self.actuator.counters()
    }

    /// The guest's queue.
    pub fn queue(&self) -> &Workqueue<String> {
        &self.queue
    }

    fn informers(&self) -> impl Iterator<Item = &Informer> {
        self.watches
            .iter()
            .map(|w| &w.informer)
            .chain(self.outputs.iter().map(|o| &o.informer))
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
                    for o in w.informer.list() {
                        self.queue.add(if o.namespace.is_empty() {
                            o.name.to_string()
                        } else {
                            format!("{}/{}", o.namespace, o.name)
                        });
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
                    this.stats.resyncs.fetch_add(1, Ordering::Relaxed);
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
        if let Some(metrics) = &self.metrics {
            let controller = self.name.clone();
            metrics
                .reconcile_time
                .get_or_create(&m::ControllerLabels {
                    controller: controller.clone(),
                })
                .observe(started.elapsed().as_secs_f64());
            let result = match (&outcome, reason) {
                (_, Some(_)) => "error",
                (Outcome::RequeueAfter(_), None) => "requeue_after",
                _ => "success",
            };
            metrics
                .reconcile_total
                .get_or_create(&m::ResultLabels {
                    controller: controller.clone(),
                    result: result.to_string(),
                })
                .inc();
            if let Some(reason) = reason {
                metrics
                    .reconcile_errors
                    .get_or_create(&m::ReasonLabels {
                        controller,
                        reason: reason.to_string(),
                    })
                    .inc();
            }
        }
        outcome
    }

    fn record_guest(&self, stats: &crate::guest::CallStats, failure: Option<&'static str>) {
        let Some(metrics) = &self.metrics else { return };
        let labels = m::GuestLabels {
            guest: self.name.clone(),
        };
        metrics
            .guest_instantiate
            .get_or_create(&labels)
            .observe(stats.instantiate.as_secs_f64());
        metrics
            .guest_reconcile
            .get_or_create(&labels)
            .observe(stats.call.as_secs_f64());
        if let Some(reason) = failure {
            metrics
                .guest_failures
                .get_or_create(&m::GuestReasonLabels {
                    guest: self.name.clone(),
                    reason: reason.to_string(),
                })
                .inc();
        }
    }

    /// One reconcile; the error reason (a metric label) when it failed.
    async fn reconcile_inner(&self, key: String) -> (Outcome, Option<&'static str>) {
        let span = tracing::info_span!("reconcile", guest = %self.name, key = %key);
        let _enter = span.enter();
        self.stats.reconciles.fetch_add(1, Ordering::Relaxed);
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
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
                return (
                    Outcome::retry(format!("reconcile task failed: {e}")),
                    Some("panic"),
                );
            }
        };
        tracing::debug!(?stats, "guest call");
        self.record_guest(&stats, result.as_ref().err().map(GuestError::reason));
        let plan = match result {
            Ok(plan) => plan,
            Err(e) => {
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
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
        {
            let mut producers = lock(&self.producers);
            for (target, _) in &plan.apply {
                producers.insert(target.clone(), key.clone());
            }
        }
        match self.actuator.execute(&key, &plan, self).await {
            Err(e) => {
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
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

impl LiveObjects for GuestController {
    fn live(&self, key: &ObjectKey) -> Option<Json> {
        let output = self
            .outputs
            .iter()
            .find(|o| o.rule.allows(&key.gvk, key.namespace.as_deref(), &key.name))?;
        let obj = output
            .informer
            .get(key.namespace.as_deref().unwrap_or(""), &key.name)?;
        whole_object(&obj)
    }

    fn uid(&self, key: &ObjectKey) -> Option<String> {
        let ns = key.namespace.as_deref().unwrap_or("");
        let from_watch = self
            .watches
            .iter()
            .filter(|w| {
                let k = w.informer.key();
                k.group == key.gvk.group && k.kind == key.gvk.kind
            })
            .find_map(|w| w.informer.get(ns, &key.name));
        let uid = match from_watch {
            Some(o) => o.uid.to_string(),
            None => self
                .live(key)?
                .pointer("/metadata/uid")
                .and_then(Json::as_str)?
                .to_string(),
        };
        (!uid.is_empty()).then_some(uid)
    }
}

/// Per-guest configuration from `GUEST.KEY=VALUE` pairs.
pub fn split_guest_config(
    pairs: &[String],
) -> Result<BTreeMap<String, BTreeMap<String, String>>, String> {
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for p in pairs {
        let (lhs, value) = p
            .split_once('=')
            .ok_or_else(|| format!("--config {p:?}: expected GUEST.KEY=VALUE"))?;
        let (guest, key) = lhs
            .split_once('.')
            .filter(|(g, k)| !g.is_empty() && !k.is_empty())
            .ok_or_else(|| format!("--config {p:?}: expected GUEST.KEY=VALUE"))?;
        out.entry(guest.to_string())
            .or_default()
            .insert(key.to_string(), value.to_string());
    }
    Ok(out)
}

/// The resource plural a watch reads: the guest's, or discovery's.
async fn watch_plural(actuator: &Actuator, spec: &WatchSpec) -> Result<String, ActuatorError> {
    match &spec.plural {
        Some(p) => Ok(p.clone()),
        None => Ok(actuator.resource(&spec.gvk).await?.plural),
    }
}

/// Checks, before any cache starts, that the host may do everything the
/// guest's manifest needs (see [`crate::permissions`]): list and watch what
/// it watches and the objects it writes (the outputs cache), and patch and
/// create (an apply that creates is authorized as both) the write targets
/// in the namespaces it names.
async fn preflight(
    client: &Client,
    actuator: &Actuator,
    manifest: &GuestManifest,
    guest: &str,
    resolve_err: impl Fn(ActuatorError) -> ControllerError,
) -> Result<(), ControllerError> {
    let mut needs = Vec::new();
    for spec in &manifest.watches {
        let plural = watch_plural(actuator, spec).await.map_err(&resolve_err)?;
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
        let plural = actuator
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
