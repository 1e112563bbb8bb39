//! The guest supervisor: the host process's set of running guests, over one
//! client and shared informers. It loads each guest (`--guest` files or a
//! watched `--guest-dir`), starts one [`GuestController`] per guest, swaps
//! a guest's module at run time, keeps guests whose kinds are not served
//! yet waiting, refuses a guest that cannot be loaded alone (the others
//! run), owns the host's [`Claims`], and runs everything until shutdown,
//! lost leadership or a fatal cache. It never reconciles anything itself.
//!
//! # Layout
//! - `mod.rs`: [`Supervisor`], its configuration and errors, start and run.
//! - `load`: loading, describing, refusing and starting one guest.
//! - `swap`: rescanning the guest directory and swapping modules.
//! - `readiness`: `/readyz` over every guest.
//! - [`waiting`]: guests waiting for a kind the API server does not serve.
//! - [`guest_dir`]: reading a ConfigMap-volume directory of guests.
//! - [`compressed`]: `.wasm.gz` and `.wasm.zst` guests, decompressed under a cap.
//! - [`status`]: each guest's state (`/guests`) and the Event a change is worth.
//! - `announce`: reporting a guest's change to [`status`] and as an Event.
//! - `oci`: fetching guests the directory names by OCI reference, and
//!   resolving tags.
//! - `pulls`: guests waiting for their registry.
//! - `leading`: per-guest leadership — each guest's workers gated by its
//!   own Lease, stopped alone when it is lost or handed over; a guest whose
//!   keys are sharded runs everywhere, each key gated by its bucket.

mod announce;
pub mod compressed;
pub mod guest_dir;
mod leading;
mod load;
mod oci;
mod pulls;
mod readiness;
pub mod status;
mod swap;
pub mod waiting;

use std::collections::{BTreeMap, BTreeSet};
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
use crate::informer::InformerRegistry;
use crate::metrics::{GuestReasonLabels, GuestResultLabels, Metrics};
use crate::sync::lock;
use guest_dir::{ConfigFileError, DirWatch, GuestDirError, GuestFile, GuestFileError};
use status::{GuestSource, LoadState, Statuses, Version};
use waiting::{or_wait, Waiting, WaitingGuest};

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
    /// A guest's file cannot give its component (two files for one guest,
    /// a compressed file that does not decompress within the cap).
    #[error(transparent)]
    File(#[from] GuestFileError),
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
    #[error("guest {}: {source}", guest.as_ref().map_or_else(|| key.clone(), |g| format!("{g} ({key}.wasm)")))]
    Config {
        /// The guest's file stem.
        key: String,
        /// The name the guest declares without configuration, when it
        /// could be described so.
        guest: Option<String>,
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
    /// A shadow cannot run beside its target.
    #[error(transparent)]
    Shadow(#[from] crate::shadow::ShadowError),
    /// A guest named by OCI reference could not be fetched.
    #[error("guest {key}: {source}")]
    Delivery {
        /// The guest's key (`NAME` of `NAME.oci`).
        key: String,
        /// What went wrong, naming the reference.
        #[source]
        source: crate::delivery::DeliveryError,
    },
    /// The registry settings (credentials, CA bundle) are unusable.
    #[error(transparent)]
    Registry(crate::delivery::DeliveryError),
}

impl SupervisorError {
    /// The guest's declared name, when the error is about what a guest
    /// declared and the guest could name itself (see
    /// [`crate::guest::GuestError::file`]): refusals are then counted and logged under
    /// it rather than its file's stem.
    pub fn declared_guest(&self) -> Option<&str> {
        match self {
            SupervisorError::Guest(e) if e.file().is_some() => Some(&e.guest),
            SupervisorError::Config { guest, .. } => guest.as_deref(),
            _ => None,
        }
    }

    /// Why a guest was refused, as a metric label (`policy`, `trap`,
    /// `deadline`, `memory`, `write_overlap`, `permissions`, ...).
    pub fn reason(&self) -> &'static str {
        match self {
            SupervisorError::Guest(e) => e.reason(),
            SupervisorError::Controller(e) => e.reason(),
            SupervisorError::GuestDir(_) => "guest_dir",
            SupervisorError::File(e) => e.reason(),
            SupervisorError::NoGuests => "no_guests",
            SupervisorError::DuplicateName { .. } => "duplicate_name",
            SupervisorError::Config { .. } => "config",
            SupervisorError::NotServed { .. } => "not_served",
            SupervisorError::LostLeadership(_) => "lost_leadership",
            SupervisorError::Overlap(_) => "write_overlap",
            SupervisorError::Shadow(_) => "shadow",
            SupervisorError::Delivery { source, .. } => source.reason(),
            SupervisorError::Registry(e) => e.reason(),
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

/// With per-guest leadership, what a replica keeps of a guest it does not
/// lead (of a sharded guest, of the buckets it does not lead).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Standby {
    /// Nothing: its caches are listed when the replica comes to lead it, and
    /// dropped when it hands it over. Memory and watch traffic follow what
    /// the replica leads; a takeover first syncs the guest's caches.
    #[default]
    Cold,
    /// Its caches synced all along, ready for a takeover (what a follower
    /// keeps under `--leader-elect=host`).
    Warm,
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
    /// Shadows: (the running guest's name, the new version's file), each
    /// run beside its target and compared, never acting (see
    /// [`crate::shadow`]).
    pub shadows: Vec<(String, PathBuf)>,
    /// Shadows' writes that differ from their guests' are sent as dry runs
    /// (`dryRun=All`), so the API server's refusals show in the report.
    pub shadow_dry_run: bool,
    /// Record every guest's reconcile cases (`--record DIR`), for replay.
    pub record: Option<crate::recording::RecordConfig>,
    /// The most bytes a compressed guest file may decompress to (None:
    /// [`compressed::DEFAULT_DECOMPRESSED_MAX`]).
    pub decompressed_max: Option<u64>,
    /// How guests named by OCI reference are fetched and cached.
    pub delivery: crate::delivery::DeliveryConfig,
    /// Per-guest leadership (`--leader-elect=per-guest`): each guest runs
    /// only while this replica holds its Lease (None: every guest runs,
    /// gated by the host-wide leadership if any).
    pub guest_leases: Option<crate::leader_per_guest::GuestLeases>,
    /// With per-guest leadership: the buckets each per-object guest's keys
    /// are sharded into, each bucket with its own Lease (0 or 1: every
    /// guest is led whole).
    pub shard_buckets: u32,
    /// With per-guest leadership: whether a replica keeps the caches of the
    /// guests it does not lead (warm standby) or only of those it leads
    /// (cold, the default).
    pub standby: Standby,
}

impl SupervisorConfig {
    /// Sets the guest component files loaded at start.
    #[must_use]
    pub fn guests(mut self, guests: Vec<PathBuf>) -> Self {
        self.guests = guests;
        self
    }

    /// Sets the directory of guests to watch; its changes are swapped in at
    /// run time.
    #[must_use]
    pub fn guest_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.guest_dir = dir;
        self
    }

    /// Sets the host's namespace (told to guests).
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// Sets the per-guest configuration, keyed by guest name or file stem.
    #[must_use]
    pub fn guest_config(mut self, config: BTreeMap<String, BTreeMap<String, String>>) -> Self {
        self.guest_config = config;
        self
    }

    /// Sets the controller settings every guest shares.
    #[must_use]
    pub fn controller(mut self, controller: ControllerConfig) -> Self {
        self.controller = controller;
        self
    }

    /// Sets the sandbox settings.
    #[must_use]
    pub fn runtime(mut self, runtime: RuntimeConfig) -> Self {
        self.runtime = runtime;
        self
    }

    /// Sets the host's own Pod (namespace, name), which swap Events regard.
    #[must_use]
    pub fn pod(mut self, pod: Option<(String, String)>) -> Self {
        self.pod = pod;
        self
    }

    /// Sets how often the guest directory is rescanned without a
    /// notification (`None`: only on notifications).
    #[must_use]
    pub fn rescan(mut self, rescan: Option<Duration>) -> Self {
        self.rescan = rescan;
        self
    }

    /// Sets how long failing watches are tolerated (not ready, then exit).
    #[must_use]
    pub fn watch_health(mut self, watch_health: crate::informer::WatchHealthConfig) -> Self {
        self.watch_health = watch_health;
        self
    }

    /// Sets whether a guest refused at start ends the host instead of being
    /// refused alone.
    #[must_use]
    pub fn strict_guests(mut self, strict: bool) -> Self {
        self.strict_guests = strict;
        self
    }

    /// Sets the shadows: (the running guest's name, the new version's file).
    #[must_use]
    pub fn shadows(mut self, shadows: Vec<(String, PathBuf)>) -> Self {
        self.shadows = shadows;
        self
    }

    /// Sets whether shadows' differing writes are sent as dry runs. Each
    /// one is a request to the API server, under the host's client rate
    /// limit, which the guests' own writes share.
    #[must_use]
    pub fn shadow_dry_run(mut self, dry_run: bool) -> Self {
        self.shadow_dry_run = dry_run;
        self
    }

    /// Sets how guests named by OCI reference (`NAME.oci` in the guest
    /// directory) are fetched: credentials, trust, tags, cache, size cap.
    #[must_use]
    pub fn delivery(mut self, delivery: crate::delivery::DeliveryConfig) -> Self {
        self.delivery = delivery;
        self
    }

    /// Sets where and how much the host records (`None`: nothing).
    #[must_use]
    pub fn record(mut self, record: Option<crate::recording::RecordConfig>) -> Self {
        self.record = record;
        self
    }

    /// Runs each guest only while this replica holds its own Lease
    /// (per-guest leadership), instead of all of them under one host-wide
    /// Lease.
    #[must_use]
    pub fn guest_leases(mut self, leases: Option<crate::leader_per_guest::GuestLeases>) -> Self {
        self.guest_leases = leases;
        self
    }

    /// With per-guest leadership, shards each per-object guest's keys into
    /// `buckets` buckets, each led by one replica (0 or 1: guests are led
    /// whole). A guest with an aggregate key is always led whole.
    #[must_use]
    pub fn shard_buckets(mut self, buckets: u32) -> Self {
        self.shard_buckets = buckets;
        self
    }

    /// With per-guest leadership, sets whether the guests this replica does
    /// not lead keep their caches synced here ([`Standby::Warm`]) or not.
    #[must_use]
    pub fn standby(mut self, standby: Standby) -> Self {
        self.standby = standby;
        self
    }

    /// Sets the most bytes a compressed guest file (`NAME.wasm.gz`,
    /// `NAME.wasm.zst`) may decompress to; a larger one is refused, having
    /// cost no more than that.
    #[must_use]
    pub fn decompressed_max(mut self, bytes: u64) -> Self {
        self.decompressed_max = Some(bytes);
        self
    }
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
    /// Guests whose led workers stopped (handed over, or the Lease lost):
    /// standing by cold, their caches are dropped.
    stopped_tx: mpsc::UnboundedSender<String>,
    stopped_rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<String>>,
    /// With per-guest leadership, the guests told to the coordinator: each
    /// once its caches first synced here.
    published: Mutex<BTreeSet<String>>,
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
    /// The digest of each `NAME.shadow.wasm` of the guest directory
    /// running as a shadow, by key.
    shadow_files: Mutex<BTreeMap<String, String>>,
    /// Held by one look at the guest directory at a time: a notification
    /// and a rescan (or a caller) never swap the same file twice at once.
    syncing: tokio::sync::Mutex<()>,
    /// Each guest's state, as `/guests` shows it.
    status: Statuses,
    /// The registry client for guests named by OCI reference.
    delivery: crate::delivery::Delivery,
    /// Guests waiting for their registry, by key.
    pending_pulls: pulls::PendingPulls,
    /// What each allowed tag last resolved to, by reference.
    resolved_tags: pulls::ResolvedTags,
    /// With per-guest leadership: each guest runs only while this replica
    /// holds its Lease (see `leading`).
    guest_leases: Option<crate::leader_per_guest::GuestLeases>,
    /// The lead each guest's current task was started under, by guest.
    led_tasks: Mutex<BTreeMap<String, crate::leader_per_guest::GuestLease>>,
}

/// The key under which a `--shadow` refused at start is kept for
/// `/readyz` (followed by its guest's name).
const SHADOW_KEY: &str = "shadow:";

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
        let delivery = crate::delivery::Delivery::new(config.delivery.clone())
            .map_err(SupervisorError::Registry)?;
        let discovery = Discovery::new(client.clone());
        // Without a scraped registry the guests still count (tests and the
        // demo read the same counters).
        let metrics = metrics.unwrap_or_default();
        let registry = InformerRegistry::new(client.clone())
            .with_health(config.watch_health)
            .with_metrics(metrics.clone());
        let (failures_tx, failures_rx) = mpsc::unbounded_channel();
        let (stopped_tx, stopped_rx) = mpsc::unbounded_channel();
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "wasmctrl".into(),
                instance: config.pod.as_ref().map(|(_, n)| n.clone()),
            },
        );
        let waiting = Waiting::new(metrics.guest_waiting.clone());
        let guest_leases = config.guest_leases.clone();
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
            stopped_tx,
            stopped_rx: tokio::sync::Mutex::new(stopped_rx),
            published: Mutex::default(),
            leadership,
            _leadership_tx: None,
            recorder,
            claims: Claims::new(),
            refused: Mutex::new(BTreeMap::new()),
            rejected: Mutex::new(BTreeMap::new()),
            shadow_files: Mutex::new(BTreeMap::new()),
            syncing: tokio::sync::Mutex::new(()),
            status: Statuses::default(),
            delivery,
            pending_pulls: pulls::PendingPulls::default(),
            resolved_tags: pulls::ResolvedTags::default(),
            guest_leases,
            led_tasks: Mutex::new(BTreeMap::new()),
        };
        // A guest that cannot be loaded is refused alone: the others run.
        let mut first_refusal = None;
        // Every guest compiles at once on the blocking pool; each starts,
        // in order, as soon as it and those before it are compiled.
        let compiles: Vec<_> = host
            .config
            .guests
            .iter()
            .map(|path| {
                let label = path.display().to_string();
                host.compile(label, path.clone())
            })
            .map(tokio::spawn)
            .collect();
        for (path, compiled) in host.config.guests.clone().into_iter().zip(compiles) {
            let (key, source) = (stem(&path), path.display().to_string());
            let origin = GuestSource::File {
                path: source.clone(),
            };
            let mut digest = None;
            let loaded = async {
                let module = compiled.await.map_err(|e| {
                    SupervisorError::Guest(GuestError {
                        guest: source.clone(),
                        kind: guest::GuestErrorKind::Compile(format!("compile task failed: {e}")),
                    })
                })??;
                digest = Some(module.digest().to_string());
                host.describe_file(module, &path).await
            };
            let (name, result) = match loaded.await {
                Ok(described) => (
                    described.manifest.name.clone(),
                    host.start_or_wait(key.clone(), origin.clone(), String::new(), described)
                        .await,
                ),
                Err(e) => (e.declared_guest().unwrap_or(&key).to_string(), Err(e)),
            };
            if let Err(e) = result {
                let tried = Version::compiling(origin, digest);
                host.refuse(key, name, tried, String::new(), e, &mut first_refusal)
                    .await?;
            }
        }
        let mut dir_shadows = Vec::new();
        if let Some(dir) = host.config.guest_dir.clone() {
            let mut files = guest_dir::scan(&dir)?;
            host.resolve_tags(&mut files).await;
            for (key, file) in files {
                if guest_dir::shadow_target(&key).is_some() {
                    // Attached once every guest has started.
                    dir_shadows.push(file);
                    continue;
                }
                let (digest, module) = host.compile_file(&file).await;
                let loaded = async {
                    let module = module?;
                    let config = match file.config.clone() {
                        Ok(config) => config,
                        Err(source) => return Err(host.config_error(&key, &module, source).await),
                    };
                    host.describe(module, config).await
                };
                let origin = GuestSource::of_file(&file);
                let (name, result) = match loaded.await {
                    Ok(described) => (
                        described.manifest.name.clone(),
                        host.start_or_wait(
                            key.clone(),
                            origin.clone(),
                            file.digest.clone(),
                            described,
                        )
                        .await,
                    ),
                    Err(e) => (e.declared_guest().unwrap_or(&key).to_string(), Err(e)),
                };
                match result {
                    Err(SupervisorError::Delivery { source: e, .. }) if e.is_transient() => {
                        host.wait_for_registry(&key, &file, false, &e).await;
                    }
                    Err(e) => {
                        let tried = Version::compiling(origin, digest);
                        host.refuse(key, name, tried, file.digest, e, &mut first_refusal)
                            .await?;
                    }
                    Ok(()) => {}
                }
            }
        }
        for (target, path) in host.config.shadows.clone() {
            if let Err(e) = host.load_shadow(&target, &path).await {
                let origin = GuestSource::File {
                    path: path.display().to_string(),
                };
                let key = format!("{SHADOW_KEY}{target}");
                let tried = Version::compiling(origin, None);
                host.refuse(key, target, tried, String::new(), e, &mut first_refusal)
                    .await?;
            }
        }
        for file in dir_shadows {
            host.swap_shadow(&file).await;
        }
        let none_runs = lock(&host.guests).is_empty()
            && host.waiting.is_empty()
            && host.pending_pulls.is_empty();
        match first_refusal {
            // No guest can run: the host ends with the (first) reason.
            Some(e) if none_runs => Err(e),
            _ => Ok(host),
        }
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

    /// The host's claims (which guest may write which object).
    pub fn claims(&self) -> &Claims {
        &self.claims
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
        let mut stopped = self.stopped_rx.lock().await;
        tokio::pin!(shutdown);
        // A closed leadership channel never changes again; polling it would spin.
        let mut leadership_open = true;
        let mut result = loop {
            let unpublished = self.publish_guests();
            tokio::select! {
                // A guest whose caches have not synced yet is told to the
                // coordinator once they have.
                () = tokio::time::sleep(Duration::from_millis(100)), if unpublished => {}
                () = &mut shutdown => break Ok(()),
                guest = async {
                    match &self.guest_leases {
                        Some(leases) => leases.next_led().await,
                        None => std::future::pending().await,
                    }
                } => {
                    if let Some(guest) = guest {
                        self.lead(&guest).await;
                    }
                }
                Some(e) = failures.recv() => break Err(SupervisorError::from(e)),
                Some(guest) = stopped.recv() => self.cool(&guest).await,
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
                    // A guest waiting for its registry is tried again; a
                    // tag is resolved again after its interval.
                    let tags = self.has_tags().then(|| tokio::time::Instant::now() + self.delivery.config().tag_interval);
                    match self.pending_pulls.next_retry().into_iter().chain(tags).min() {
                        Some(at) => tokio::time::sleep_until(at).await,
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
        if let Some(leases) = &self.guest_leases {
            leases.closing();
        }
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
