//! The guest supervisor: the host process's set of running guests, over one
//! client and shared informers.
//!
//! Owns the set of running guests: loading each (from `--guest` files or a
//! watched `--guest-dir`), giving it its configuration and namespace,
//! starting one [`GuestController`] per guest over one [`InformerRegistry`],
//! swapping a guest's module at run time (compiled and validated off the
//! reconcile path; in-flight reconciles finish on the old module; a bad
//! module is rejected, not tried again until its file changes — but for
//! one needing a kind not served yet, tried at every rescan — and the old
//! one keeps running), stopping removed
//! guests, keeping a guest whose kinds the API server does not serve yet (a
//! CRD not installed) waiting — not ready, retried with backoff, started
//! when the kind appears — and running everything until shutdown, lost
//! leadership, or a cache that cannot sync or has no working watch past
//! its deadline (fatal: a controller that silently does nothing is worse
//! than one that exits; see `informer::health`). A guest that cannot be loaded
//! (policy, `describe` failing, write rules naming another guest's object,
//! missing permissions, ...) is refused alone — log line, metric, Event on
//! the host's Pod, a `/readyz` detail line — and the others run; the host
//! ends only when no guest can run, or when `strict_guests` asks. It owns
//! the host's [`Claims`] (which guest may write which object). It never
//! reconciles anything itself.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Client;
use tokio::sync::{mpsc, watch};

use crate::claims::{self, Claims, Overlap};
use crate::controller::{ControllerConfig, ControllerError, DescribedGuest, GuestController};
use crate::discovery::Discovery;
use crate::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use crate::guest::{self, GuestError, GuestModule, GuestRuntime, RuntimeConfig};
use crate::guestdir::{self, ConfigFileError, DirWatch, GuestDirError, GuestFile};
use crate::informer::InformerRegistry;
use crate::metrics::{GuestReasonLabels, GuestResultLabels, Metrics};
use crate::sync::lock;
use crate::waiting::{or_wait, Waiting, WaitingGuest};

/// Why the supervisor (and so the host process) stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    /// A guest could not be loaded.
    #[error(transparent)]
    Guest(#[from] GuestError),
    /// A guest's controller failed.
    #[error(transparent)]
    Controller(Box<ControllerError>),
    /// The guest directory could not be read or watched.
    #[error(transparent)]
    GuestDir(#[from] GuestDirError),
    /// No guests were given.
    #[error("no guests to run: pass --guest PATH.wasm or --guest-dir DIR")]
    NoGuests,
    /// Two guests declare the same name.
    #[error("guest {name} is declared by both {first} and {second}")]
    DuplicateName {
        /// The name.
        name: String,
        /// One file.
        first: String,
        /// The other.
        second: String,
    },
    /// A guest's configuration file is unusable.
    #[error("guest {key}: {source}")]
    Config {
        /// The guest's file stem.
        key: String,
        /// What is wrong.
        #[source]
        source: ConfigFileError,
    },
    /// A new version of a running guest needs a kind that is not served.
    #[error("the API server does not serve {kind} (is its CRD installed?)")]
    NotServed {
        /// The kind, `group/version/Kind`.
        kind: String,
    },
    /// Leadership was lost: writes stopped; the process must exit.
    #[error("lost leadership: {0}")]
    LostLeadership(String),
    /// A guest's write rules name an object another guest's rules name.
    #[error(transparent)]
    Overlap(Box<Overlap>),
}

impl SupervisorError {
    /// Why a guest was refused, as a metric label (`policy`, `trap`,
    /// `deadline`, `memory`, `write_overlap`, `permissions`, ...).
    pub fn reason(&self) -> &'static str {
        match self {
            SupervisorError::Guest(e) => e.reason(),
            SupervisorError::Controller(e) => e.reason(),
            SupervisorError::GuestDir(_) => "guest_dir",
            SupervisorError::NoGuests => "no_guests",
            SupervisorError::DuplicateName { .. } => "duplicate_name",
            SupervisorError::Config { .. } => "config",
            SupervisorError::NotServed { .. } => "not_served",
            SupervisorError::LostLeadership(_) => "lost_leadership",
            SupervisorError::Overlap(_) => "write_overlap",
        }
    }
}

impl From<ControllerError> for SupervisorError {
    fn from(e: ControllerError) -> Self {
        SupervisorError::Controller(Box::new(e))
    }
}

/// A guest that is not running yet (the host is not ready), and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("guest {guest}: {why}")]
pub struct NotSynced {
    /// The guest.
    pub guest: String,
    /// What it waits for: its caches to sync, or a kind to be served.
    pub why: String,
}

/// Everything the host needs to start.
#[derive(Debug, Clone, Default)]
pub struct SupervisorConfig {
    /// Guest component files.
    pub guests: Vec<PathBuf>,
    /// A directory of guests to watch (ConfigMap volume layout supported).
    pub guest_dir: Option<PathBuf>,
    /// The host's namespace (told to guests).
    pub namespace: String,
    /// Per-guest configuration, keyed by guest name or file stem.
    pub guest_config: BTreeMap<String, BTreeMap<String, String>>,
    /// Controller settings shared by all guests.
    pub controller: ControllerConfig,
    /// Sandbox settings.
    pub runtime: RuntimeConfig,
    /// The host's own Pod (namespace, name), for swap Events.
    pub pod: Option<(String, String)>,
    /// Periodic rescan of the guest directory (safety net for missed
    /// notifications).
    pub rescan: Option<Duration>,
    /// How long failing watches are tolerated (not ready, then exit).
    pub watch_health: crate::informer::WatchHealthConfig,
    /// A guest refused at start ends the host (`--strict-guests`) instead
    /// of being refused alone.
    pub strict_guests: bool,
}

/// Leadership as the host sees it (defined by the leader-election bridge).
pub use crate::leader::Leadership;

/// A guest refused at load of which no version runs.
struct Refused {
    name: String,
    digest: String,
    why: String,
}

struct RunningGuest {
    key: String,
    source: String,
    digest: String,
    controller: Arc<GuestController>,
    task: tokio::task::JoinHandle<()>,
}

/// What a swap candidate turned out to be.
enum Swap {
    /// Compiled, described, caches synced: ready to replace what runs.
    Ready(Box<GuestController>),
    /// A new guest needing a kind that is not served yet (the kind).
    Waits(DescribedGuest, String),
}

/// The running guests of one host process. Share it in an `Arc` to serve readiness while it runs.
pub struct Supervisor {
    client: Client,
    registry: InformerRegistry,
    runtime: GuestRuntime,
    discovery: Discovery,
    config: SupervisorConfig,
    metrics: Arc<Metrics>,
    guests: Mutex<BTreeMap<String, RunningGuest>>,
    /// Guests waiting for a kind to be served, by key.
    waiting: Waiting,
    failures_tx: mpsc::UnboundedSender<ControllerError>,
    failures_rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<ControllerError>>,
    leadership: watch::Receiver<Leadership>,
    _leadership_tx: Option<watch::Sender<Leadership>>,
    recorder: Recorder,
    /// Which guest may write which object.
    claims: Claims,
    /// Guests refused at load, by key.
    refused: Mutex<BTreeMap<String, Refused>>,
    /// The digest of the rejected new version of each running guest, by
    /// key: not tried again until its file changes.
    rejected: Mutex<BTreeMap<String, String>>,
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

impl Supervisor {
    /// Loads every `--guest` file and starts its informers (not its
    /// workers). Without a leadership signal the host always leads.
    pub async fn start(
        client: Client,
        config: SupervisorConfig,
        metrics: Option<Arc<Metrics>>,
    ) -> Result<Self, SupervisorError> {
        let (tx, rx) = watch::channel(Leadership::Leading);
        let mut host = Self::start_with_leadership(client, config, metrics, rx).await?;
        host._leadership_tx = Some(tx);
        Ok(host)
    }

    /// Like [`Supervisor::start`], with workers gated on `leadership`.
    pub async fn start_with_leadership(
        client: Client,
        config: SupervisorConfig,
        metrics: Option<Arc<Metrics>>,
        leadership: watch::Receiver<Leadership>,
    ) -> Result<Self, SupervisorError> {
        if config.guests.is_empty() && config.guest_dir.is_none() {
            return Err(SupervisorError::NoGuests);
        }
        let runtime = GuestRuntime::new(config.runtime.clone())?;
        let discovery = Discovery::new(client.clone());
        // Without a scraped registry the guests still count (tests and the
        // demo read the same counters).
        let metrics = metrics.unwrap_or_default();
        let registry = InformerRegistry::new(client.clone())
            .with_health(config.watch_health)
            .with_metrics(metrics.clone());
        let (failures_tx, failures_rx) = mpsc::unbounded_channel();
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "wasmctrl".into(),
                instance: config.pod.as_ref().map(|(_, n)| n.clone()),
            },
        );
        let waiting = Waiting::new(metrics.guest_waiting.clone());
        let host = Supervisor {
            client,
            registry,
            runtime,
            discovery,
            config,
            metrics,
            guests: Mutex::new(BTreeMap::new()),
            waiting,
            failures_tx,
            failures_rx: tokio::sync::Mutex::new(failures_rx),
            leadership,
            _leadership_tx: None,
            recorder,
            claims: Claims::new(),
            refused: Mutex::new(BTreeMap::new()),
            rejected: Mutex::new(BTreeMap::new()),
        };
        // A guest that cannot be loaded is refused alone: the others run.
        let mut first_refusal = None;
        for path in host.config.guests.clone() {
            let (key, source) = (stem(&path), path.display().to_string());
            let loaded = async {
                let module = host.runtime.load_file(&path)?;
                host.describe_file(module, &path).await
            };
            let (name, result) = match loaded.await {
                Ok(described) => (
                    described.manifest.name.clone(),
                    host.start_or_wait(key.clone(), source.clone(), String::new(), described)
                        .await,
                ),
                Err(e) => (key.clone(), Err(e)),
            };
            if let Err(e) = result {
                host.refuse(key, name, &source, String::new(), e, &mut first_refusal)
                    .await?;
            }
        }
        if let Some(dir) = host.config.guest_dir.clone() {
            for (key, file) in guestdir::scan(&dir)? {
                let source = file.path.display().to_string();
                let loaded = async {
                    let config = file
                        .config
                        .clone()
                        .map_err(|source| SupervisorError::Config {
                            key: key.clone(),
                            source,
                        })?;
                    let module = host
                        .runtime
                        .load_bytes(&format!("{key}.wasm"), &file.bytes)?;
                    host.describe(module, config).await
                };
                let (name, result) = match loaded.await {
                    Ok(described) => (
                        described.manifest.name.clone(),
                        host.start_or_wait(
                            key.clone(),
                            source.clone(),
                            file.digest.clone(),
                            described,
                        )
                        .await,
                    ),
                    Err(e) => (key.clone(), Err(e)),
                };
                if let Err(e) = result {
                    host.refuse(key, name, &source, file.digest, e, &mut first_refusal)
                        .await?;
                }
            }
        }
        let none_runs = lock(&host.guests).is_empty() && host.waiting.is_empty();
        match first_refusal {
            // No guest can run: the host ends with the (first) reason.
            Some(e) if none_runs => Err(e),
            _ => Ok(host),
        }
    }

    /// Refuses a guest that could not be loaded: ends the host when
    /// `strict_guests` asks; otherwise logs it, counts it
    /// (`wasmctrl_guests_refused_total`), records a `GuestRefused` Warning
    /// Event on the host's Pod and keeps it for `/readyz`'s detail (and
    /// the first such error in `first`).
    async fn refuse(
        &self,
        key: String,
        name: String,
        source: &str,
        digest: String,
        e: SupervisorError,
        first: &mut Option<SupervisorError>,
    ) -> Result<(), SupervisorError> {
        if self.config.strict_guests {
            return Err(e);
        }
        tracing::error!(guest = %name, path = %source, reason = e.reason(), "guest refused; the other guests run: {e}");
        self.record_refused(key, &name, digest, &e);
        self.event(true, "GuestRefused", format!("{source}: {e}"))
            .await;
        if first.is_none() {
            *first = Some(e);
        }
        Ok(())
    }

    /// Keeps a refused guest for `/readyz`'s detail (a changed file is
    /// tried again; an unchanged one is not) and counts it.
    fn record_refused(&self, key: String, name: &str, digest: String, e: &SupervisorError) {
        self.metrics
            .guests_refused
            .get_or_create(&GuestReasonLabels {
                guest: name.to_string(),
                reason: e.reason().to_string(),
            })
            .inc();
        let why = e.to_string().replace('\n', " ");
        let why = if why.starts_with("guest ") {
            why
        } else {
            format!("guest {name}: {why}")
        };
        lock(&self.refused).insert(
            key,
            Refused {
                name: name.to_string(),
                digest,
                why,
            },
        );
    }

    /// Refuses a guest whose write rules name an object the rules of
    /// another guest of this host (running or waiting) name.
    fn check_overlap(
        &self,
        key: &str,
        manifest: &crate::guest::GuestManifest,
    ) -> Result<(), SupervisorError> {
        let guests = lock(&self.guests);
        let running = guests
            .values()
            .filter(|g| g.key != key)
            .map(|g| g.controller.manifest().clone());
        let waiting = self
            .waiting
            .manifests()
            .into_iter()
            .filter(|(k, _)| k != key);
        for other in running.chain(waiting.map(|(_, m)| m)) {
            if let Some(overlap) = claims::static_overlap(manifest, &other) {
                return Err(SupervisorError::Overlap(Box::new(overlap)));
            }
        }
        Ok(())
    }

    /// Starts a described guest's controller (registered, to run with
    /// [`Supervisor::run`]), or, when a kind it needs is not served yet,
    /// keeps it waiting. Any other failure is returned.
    async fn start_or_wait(
        &self,
        key: String,
        source: String,
        digest: String,
        described: DescribedGuest,
    ) -> Result<(), SupervisorError> {
        let name = described.manifest.name.clone();
        self.check_unique(&name, &source)?;
        self.check_overlap(&key, &described.manifest)?;
        match or_wait(self.controller_for(described.clone()).await)? {
            Ok(controller) => {
                tracing::info!(guest = %name, path = %source, "guest loaded");
                self.insert(key, source, digest, controller, false);
            }
            Err(kind) => self
                .waiting
                .wait(key, WaitingGuest::new(source, digest, described, kind)),
        }
        Ok(())
    }

    /// Retries every waiting guest whose time has come: a guest whose kinds
    /// are now served starts; one still missing a kind waits longer; any
    /// other failure (a permission the host lacks, ...) refuses it, as at
    /// start.
    async fn retry_waiting(&self) -> Result<(), SupervisorError> {
        for (key, w) in self.waiting.take_due() {
            let started = match or_wait(self.controller_for(w.described.clone()).await) {
                Ok(started) => started,
                Err(e) => {
                    let name = w.name().to_string();
                    self.refuse(key, name, &w.source, w.digest.clone(), e.into(), &mut None)
                        .await?;
                    continue;
                }
            };
            match started {
                Ok(controller) => {
                    tracing::info!(guest = %w.name(), kind = %w.kind, path = %w.source, "the kind the guest waited for is served; guest starting");
                    self.insert(key, w.source, w.digest, controller, true);
                }
                Err(kind) => self.waiting.retry_later(key, w, kind),
            }
        }
        Ok(())
    }

    fn check_unique(&self, name: &str, source: &str) -> Result<(), SupervisorError> {
        let running = lock(&self.guests)
            .values()
            .find(|g| g.controller.name() == name)
            .map(|g| g.source.clone());
        if let Some(first) = running.or_else(|| self.waiting.source_of(name)) {
            return Err(SupervisorError::DuplicateName {
                name: name.to_string(),
                first,
                second: source.to_string(),
            });
        }
        Ok(())
    }

    /// Registers a controller; its task starts now when `running` (the host
    /// already runs), else in [`Supervisor::run`].
    fn insert(
        &self,
        key: String,
        source: String,
        digest: String,
        controller: GuestController,
        running: bool,
    ) {
        let controller = Arc::new(controller);
        self.reserve(&key, controller.manifest());
        lock(&self.refused).remove(&key);
        let task = if running {
            self.spawn(controller.clone())
        } else {
            tokio::spawn(std::future::pending())
        };
        lock(&self.guests).insert(
            key.clone(),
            RunningGuest {
                key,
                source,
                digest,
                controller,
                task,
            },
        );
    }

    fn spawn(&self, controller: Arc<GuestController>) -> tokio::task::JoinHandle<()> {
        let failures = self.failures_tx.clone();
        let mut leadership = self.leadership.clone();
        tokio::spawn(async move {
            let gate = async move {
                loop {
                    if *leadership.borrow_and_update() == Leadership::Leading {
                        return;
                    }
                    if leadership.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
            };
            if let Err(e) = controller.run_when(gate).await {
                let _ = failures.send(e);
            }
        })
    }

    /// Describes `module` with `values` as its configuration (off the
    /// async runtime: a guest call may take up to its deadline).
    async fn describe(
        &self,
        module: GuestModule,
        values: BTreeMap<String, String>,
    ) -> Result<DescribedGuest, SupervisorError> {
        let env = guest::environment(&self.config.namespace, &values);
        let (m, e) = (module.clone(), env.clone());
        let manifest = tokio::task::spawn_blocking(move || m.manifest(&e))
            .await
            .map_err(|e| GuestError {
                guest: module.label().to_string(),
                kind: guest::GuestErrorKind::Trap(format!("describe task failed: {e}")),
            })??;
        Ok(DescribedGuest {
            module,
            env,
            manifest,
        })
    }

    /// Describes a `--guest` file with its `--config` entries, found under
    /// its declared name or else its file stem. The name is only known by
    /// describing, so the guest is described with the stem's entries (or
    /// none) first, and again only when entries under its declared name
    /// differ from those.
    async fn describe_file(
        &self,
        module: GuestModule,
        path: &Path,
    ) -> Result<DescribedGuest, SupervisorError> {
        let by_stem = self.config.guest_config.get(&stem(path)).cloned();
        let first = self
            .describe(module.clone(), by_stem.clone().unwrap_or_default())
            .await?;
        match self.config.guest_config.get(&first.manifest.name) {
            Some(by_name) if Some(by_name) != by_stem.as_ref() => {
                self.describe(module, by_name.clone()).await
            }
            _ => Ok(first),
        }
    }

    async fn controller_for(
        &self,
        described: DescribedGuest,
    ) -> Result<GuestController, ControllerError> {
        let mut config = self.config.controller.clone();
        config.claims = self.claims.clone();
        config.host_pod = self.config.pod.clone();
        GuestController::start(
            self.client.clone(),
            &self.registry,
            &self.discovery,
            described,
            config,
            self.metrics.clone(),
        )
        .await
    }

    /// The guests' controllers, in key order.
    pub fn controllers(&self) -> Vec<Arc<GuestController>> {
        lock(&self.guests)
            .values()
            .map(|g| g.controller.clone())
            .collect()
    }

    /// One guest's controller, by declared name.
    pub fn controller(&self, name: &str) -> Option<Arc<GuestController>> {
        lock(&self.guests)
            .values()
            .find(|g| g.controller.name() == name)
            .map(|g| g.controller.clone())
    }

    /// The shared informer registry.
    pub fn registry(&self) -> &InformerRegistry {
        &self.registry
    }

    /// Readiness: Ok once every guest runs and every cache of every guest
    /// has synced (followers too: they must be able to take over);
    /// otherwise which guest waits, and for what (a kind not served yet, its
    /// caches, or a watch failing past `--unhealthy-watch-seconds`).
    pub fn readiness(&self) -> Result<(), NotSynced> {
        if let Some((guest, kind)) = self.waiting.any() {
            return Err(NotSynced {
                guest,
                why: format!("waiting for {kind} to be served (is its CRD installed?)"),
            });
        }
        let guests = self.controllers();
        match guests.iter().find(|g| !g.is_synced()) {
            None => unready_guest(&guests).map_or(Ok(()), Err),
            Some(g) => Err(NotSynced {
                guest: g.name().to_string(),
                why: "caches not synced".into(),
            }),
        }
    }

    /// One line per guest refused at load of which no version runs, for
    /// `/readyz`'s detail: `refused: guest NAME: why`.
    pub fn refused(&self) -> Vec<String> {
        lock(&self.refused)
            .values()
            .map(|r| format!("refused: {}", r.why))
            .collect()
    }

    /// The host's claims (which guest may write which object).
    pub fn claims(&self) -> &Claims {
        &self.claims
    }

    /// Whether every guest's caches have synced.
    pub fn is_synced(&self) -> bool {
        self.readiness().is_ok()
    }

    fn count_swap(&self, guest: &str, result: &str) {
        self.metrics
            .guest_swaps
            .get_or_create(&GuestResultLabels {
                guest: guest.to_string(),
                result: result.to_string(),
            })
            .inc();
    }

    /// Records a Kubernetes Event about a guest change on the host's Pod
    /// (skipped, with a log line, when the host does not know its Pod).
    async fn event(&self, warning: bool, reason: &str, note: String) {
        let Some((namespace, name)) = &self.config.pod else {
            return;
        };
        let reference = crate::events::pod_reference(namespace, name);
        let event = KubeEvent {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.into(),
            note: Some(note),
            action: "LoadGuest".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &reference).await {
            tracing::warn!("cannot record event {reason} on pod {namespace}/{name}: {e}");
        }
    }

    /// Brings the running set in line with the guest directory: new files
    /// start, changed ones are swapped, removed ones stop. A file that fails
    /// to compile or validate is rejected; what ran before keeps running,
    /// and the file is tried again only once it changes.
    pub async fn sync_dir(&self) -> Result<(), SupervisorError> {
        let Some(dir) = self.config.guest_dir.clone() else {
            return Ok(());
        };
        let files = guestdir::scan(&dir)?;
        let mut current: BTreeMap<String, String> = lock(&self.guests)
            .values()
            .filter(|g| !g.digest.is_empty())
            .map(|g| (g.key.clone(), g.digest.clone()))
            .collect();
        // A waiting guest is current too: it starts once its kind is served
        // (a changed file replaces it; a removed one ends its wait). So is
        // a refused one: it is tried again when its file changes.
        current.extend(self.waiting.digests());
        current.extend(
            lock(&self.refused)
                .iter()
                .filter(|(_, r)| !r.digest.is_empty())
                .map(|(k, r)| (k.clone(), r.digest.clone())),
        );
        // A rejected new version of a running guest is tried again only
        // when its file changes (or changes back after another version).
        let rejected = {
            let mut rejected = lock(&self.rejected);
            rejected.retain(|k, d| files.get(k).is_some_and(|f| f.digest == *d));
            rejected.clone()
        };
        for (key, file) in &files {
            if current.get(key) != Some(&file.digest) && rejected.get(key) != Some(&file.digest) {
                self.swap_in(file).await;
            }
        }
        for key in current.keys().filter(|k| !files.contains_key(*k)) {
            self.remove(key).await;
        }
        Ok(())
    }

    async fn swap_in(&self, file: &GuestFile) {
        let started = Instant::now();
        let key = file.key.clone();
        let previous_name = lock(&self.guests)
            .get(&key)
            .map(|g| g.controller.name().to_string());
        let label = previous_name.clone().unwrap_or_else(|| key.clone());
        let candidate = async {
            let config = file
                .config
                .clone()
                .map_err(|source| SupervisorError::Config {
                    key: key.clone(),
                    source,
                })?;
            let runtime = self.runtime.clone();
            let bytes = file.bytes.clone();
            let name = format!("{key}.wasm");
            // Compiling takes tens of milliseconds of CPU: off the runtime.
            let module = tokio::task::spawn_blocking(move || runtime.load_bytes(&name, &bytes))
                .await
                .map_err(|e| {
                    SupervisorError::Guest(GuestError {
                        guest: key.clone(),
                        kind: guest::GuestErrorKind::Compile(format!("compile task failed: {e}")),
                    })
                })??;
            let described = self.describe(module, config).await?;
            self.check_overlap(&key, &described.manifest)?;
            let controller = match or_wait(self.controller_for(described.clone()).await)? {
                Ok(c) => c,
                // A new guest (nothing of it runs) may wait for its kind.
                Err(kind) if previous_name.is_none() => return Ok(Swap::Waits(described, kind)),
                Err(kind) => return Err(SupervisorError::NotServed { kind }),
            };
            if let Some(other) = lock(&self.guests)
                .values()
                .find(|g| g.key != key && g.controller.name() == controller.name())
            {
                return Err(SupervisorError::DuplicateName {
                    name: controller.name().to_string(),
                    first: other.source.clone(),
                    second: file.path.display().to_string(),
                });
            }
            controller.wait_synced().await?;
            Ok(Swap::Ready(Box::new(controller)))
        };
        let controller = match candidate.await {
            Ok(Swap::Ready(c)) => *c,
            Ok(Swap::Waits(described, kind)) => {
                let source = file.path.display().to_string();
                let w = WaitingGuest::new(source, file.digest.clone(), described, kind);
                self.waiting.wait(key, w);
                return;
            }
            Err(e) => {
                tracing::error!(guest = %label, path = %file.path.display(), "guest rejected, previous version keeps running: {e}");
                self.count_swap(&label, "rejected");
                if previous_name.is_none() {
                    // No version of it runs: refused until its file changes.
                    self.record_refused(key.clone(), &label, file.digest.clone(), &e);
                } else if !matches!(e, SupervisorError::NotServed { .. }) {
                    // Not tried again until its file changes. A version
                    // that needs a kind not served yet is: at every rescan,
                    // so it starts once its CRD is installed.
                    lock(&self.rejected).insert(key.clone(), file.digest.clone());
                }
                self.event(
                    true,
                    "GuestRejected",
                    format!("{}: {e}", file.path.display()),
                )
                .await;
                self.registry.release_unused();
                return;
            }
        };
        let name = controller.name().to_string();
        let controller = Arc::new(controller);
        // A version that waited for its kind, or was refused, is superseded.
        self.waiting.remove(&key);
        lock(&self.refused).remove(&key);
        lock(&self.rejected).remove(&key);
        if let Some(previous) = previous_name.as_ref().filter(|p| **p != name) {
            self.release_claims(previous);
        }
        self.reserve(&key, controller.manifest());
        let old = lock(&self.guests).remove(&key);
        if let Some(old) = &old {
            // In-flight reconciles finish on the old module; new keys wait
            // in the new controller's queue (its handlers are registered).
            old.controller.shutdown();
            let drained = old
                .controller
                .queue()
                .shutdown_with_drain(Duration::from_secs(30))
                .await;
            if !drained {
                tracing::warn!(guest = %name, "old module still busy after 30 s; abandoning its in-flight reconcile");
            }
            old.task.abort();
        }
        let task = self.spawn(controller.clone());
        let digest = file.digest.clone();
        lock(&self.guests).insert(
            key.clone(),
            RunningGuest {
                key: key.clone(),
                source: file.path.display().to_string(),
                digest,
                controller: controller.clone(),
                task,
            },
        );
        drop(old);
        self.registry.release_unused();
        let what = if previous_name.is_some() {
            "swapped"
        } else {
            "loaded"
        };
        tracing::info!(guest = %name, digest = %controller.digest(), elapsed = ?started.elapsed(), "guest {what}");
        self.count_swap(&name, what);
        self.event(
            false,
            if previous_name.is_some() {
                "GuestSwapped"
            } else {
                "GuestLoaded"
            },
            format!(
                "guest {name} {what} from {} (sha256 {})",
                file.path.display(),
                controller.digest()
            ),
        )
        .await;
    }

    /// Registers `manifest`'s write rules with the claims, before its guest
    /// writes: the objects the other running guests wrote while no other
    /// guest could name them, and which it can, are claimed for them now.
    fn reserve(&self, key: &str, manifest: &crate::guest::GuestManifest) {
        self.claims.reserve(manifest);
        let others: Vec<_> = lock(&self.guests)
            .values()
            .filter(|g| g.key != key)
            .map(|g| g.controller.clone())
            .collect();
        for c in others {
            self.claims.seed(c.name(), &c.written());
        }
    }

    /// Ends what `guest` reserved and claimed; when it held objects, every
    /// other guest looks again at once (one whose plan a claim refused
    /// need not wait out its backoff).
    fn release_claims(&self, guest: &str) {
        if self.claims.release_guest(guest) {
            for c in self.controllers().iter().filter(|c| c.name() != guest) {
                c.enqueue_all();
            }
        }
    }

    async fn remove(&self, key: &str) {
        if let Some(w) = self.waiting.remove(key) {
            tracing::info!(guest = %w.name(), "waiting guest removed ({key}.wasm is gone)");
        }
        if let Some(r) = lock(&self.refused).remove(key) {
            tracing::info!(guest = %r.name, "refused guest removed ({key}.wasm is gone)");
        }
        let Some(old) = lock(&self.guests).remove(key) else {
            return;
        };
        let name = old.controller.name().to_string();
        old.controller.shutdown();
        old.controller
            .queue()
            .shutdown_with_drain(Duration::from_secs(30))
            .await;
        old.task.abort();
        drop(old);
        self.registry.release_unused();
        self.release_claims(&name);
        tracing::info!(guest = %name, "guest removed; its outputs are left in place");
        self.count_swap(&name, "removed");
        self.event(
            false,
            "GuestRemoved",
            format!("guest {name} removed ({key}.wasm is gone)"),
        )
        .await;
    }

    /// Runs every guest until `shutdown` resolves (then drains in-flight
    /// reconciles for up to `drain`, unless leadership is lost meanwhile),
    /// leadership is lost, or a cache fails.
    pub async fn run(
        &self,
        shutdown: impl Future<Output = ()>,
        drain: Duration,
    ) -> Result<(), SupervisorError> {
        {
            let mut guests = lock(&self.guests);
            for g in guests.values_mut() {
                g.task.abort();
                g.task = self.spawn(g.controller.clone());
            }
        }
        let mut dir_watch = match &self.config.guest_dir {
            Some(dir) => Some(DirWatch::new(
                dir,
                Duration::from_millis(100),
                self.config.rescan.unwrap_or(Duration::from_secs(30)),
            )?),
            None => None,
        };
        if dir_watch.is_some() {
            // Anything that changed between loading and watching.
            if let Err(e) = self.sync_dir().await {
                tracing::error!("guest directory: {e}");
            }
        }
        let mut leadership = self.leadership.clone();
        let mut failures = self.failures_rx.lock().await;
        tokio::pin!(shutdown);
        // A closed leadership channel never changes again; polling it would spin.
        let mut leadership_open = true;
        let mut result = loop {
            tokio::select! {
                () = &mut shutdown => break Ok(()),
                Some(e) = failures.recv() => break Err(SupervisorError::from(e)),
                changed = leadership.changed(), if leadership_open => {
                    if changed.is_err() {
                        leadership_open = false;
                        continue;
                    }
                    if let Leadership::Lost(why) = &*leadership.borrow_and_update() {
                        break Err(SupervisorError::LostLeadership(why.clone()));
                    }
                }
                () = async {
                    match dir_watch.as_mut() {
                        Some(w) => w.changed().await,
                        None => std::future::pending().await,
                    }
                } => {
                    if let Err(e) = self.sync_dir().await {
                        tracing::error!("guest directory: {e}");
                    }
                }
                () = async {
                    match self.waiting.next_retry() {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                } => {
                    if let Err(e) = self.retry_waiting().await {
                        break Err(e);
                    }
                }
            }
        };
        let running: Vec<(Arc<GuestController>, tokio::task::JoinHandle<()>)> = {
            let mut guests = lock(&self.guests);
            std::mem::take(&mut *guests)
                .into_values()
                .map(|g| (g.controller, g.task))
                .collect()
        };
        if matches!(result, Err(SupervisorError::LostLeadership(_))) {
            // Stop every write at once: no draining.
            for (c, task) in &running {
                c.shutdown();
                task.abort();
            }
        } else {
            for (c, _) in &running {
                c.shutdown();
            }
            let drained = tokio::time::timeout(drain, async {
                for (c, _) in &running {
                    c.queue().shutdown_with_drain(drain).await;
                }
            });
            // The lease can be lost while in-flight reconciles finish; then
            // stop at once as above, or a write could land after another
            // replica has taken over.
            let lost = async {
                let why = leadership
                    .wait_for(|l| matches!(l, Leadership::Lost(_)))
                    .await
                    .map(|l| match &*l {
                        Leadership::Lost(why) => why.clone(),
                        _ => String::new(),
                    });
                match why {
                    Ok(why) => why,
                    // No leadership signal any more: only the drain ends it.
                    Err(_) => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = drained => {}
                why = lost => {
                    tracing::error!("lost leadership while draining; in-flight reconciles abandoned");
                    result = Err(SupervisorError::LostLeadership(why));
                }
            }
            for (_, task) in &running {
                task.abort();
            }
        }
        result
    }
}

/// The first guest with a watch failing for longer than its informer
/// tolerates before reporting not ready, and why.
fn unready_guest<'a>(
    guests: impl IntoIterator<Item = &'a Arc<crate::controller::GuestController>>,
) -> Option<NotSynced> {
    guests.into_iter().find_map(|g| {
        g.unhealthy_watch().map(|why| NotSynced {
            guest: g.name().to_string(),
            why,
        })
    })
}
