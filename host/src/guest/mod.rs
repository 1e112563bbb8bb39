//! The guest runtime: loading, sandboxing and calling WebAssembly guests.
//!
//! Owns the one wasmtime [`Engine`], compilation (once per content digest,
//! with an on-disk cache of precompiled artifacts), the sandbox (no ambient
//! authority — only stdout/stderr, routed to tracing, see [`stdio`] —, an
//! epoch deadline, a memory cap, optional fuel) and the classification of
//! every way a guest can fail into a [`GuestError`] (a panic with its
//! message).
//! It never talks to the cluster and never acts on a plan: callers get a
//! validated plan back and decide what to do with it.

pub mod aggregate;
pub mod imports;
pub mod limits;
pub mod manifest;
pub mod plan;
pub mod policy;
pub mod snapshot;
pub mod stdio;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, ResourceLimiter, Store, Trap};

pub use manifest::{GuestManifest, Gvk, KeyMapping, ManifestError, WatchSpec, WriteRule};
pub use plan::{
    EntryWrite, EventType, ObjectKey, PlanError, PlannedEvent, PlannedWrite, ValidatedPlan,
};
pub use wasmctrl_snapshot::SnapshotData;

/// Host-side bindings generated from `wit/`.
#[allow(missing_docs, clippy::all)]
pub mod bindings {
    wasmtime::component::bindgen!({ world: "controller", path: "../wit" });
}

use bindings::wasmctrl::controller::types as wit;
pub use bindings::wasmctrl::controller::types::{Environment, Request, Snapshot};
use bindings::{Controller, ControllerPre};

/// The contract version this host implements (the WIT package version).
pub const CONTRACT_VERSION: &str = "wasmctrl:controller@0.2.0";

/// The interface every guest exports, without its version.
const RECONCILER: &str = "wasmctrl:controller/reconciler@";

/// Result alias for this module.
pub type Result<T, E = GuestError> = std::result::Result<T, E>;

/// A failure while loading or running a guest, naming the guest.
#[derive(Debug, thiserror::Error)]
#[error("guest {guest}{} {kind}", if matches!(.kind, GuestErrorKind::Version { .. }) { "" } else { ":" })]
pub struct GuestError {
    /// The guest's name (its manifest name, or the file it came from).
    pub guest: String,
    /// What went wrong.
    pub kind: GuestErrorKind,
}

impl GuestError {
    /// Short, stable label for metrics (`reason="deadline"`, ...).
    pub fn reason(&self) -> &'static str {
        self.kind.reason()
    }

    /// Whether retrying the same input may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.kind,
            GuestErrorKind::Failed {
                retryable: true,
                ..
            }
        )
    }
}

/// The ways a guest can fail.
#[derive(Debug, thiserror::Error)]
pub enum GuestErrorKind {
    /// The module could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not a valid component for this engine.
    #[error("not a valid WebAssembly component: {0}")]
    Compile(String),
    /// The component was built against another contract version.
    #[error("was built against wasmctrl:controller@{found}; this host speaks @{}: rebuild it with the wasmctrl guest SDK (see wit/README.md)", CONTRACT_VERSION.trim_start_matches("wasmctrl:controller@"))]
    Version {
        /// The version its reconciler export names.
        found: String,
    },
    /// The component does not implement the world this host speaks, or
    /// instantiation failed.
    #[error("cannot instantiate (does it implement {CONTRACT_VERSION}?): {0}")]
    Instantiate(String),
    /// The guest trapped (unreachable, out-of-bounds, a call to a WASI
    /// function it has no access to, ...).
    #[error("trapped: {0}")]
    Trap(String),
    /// The guest panicked: Rust's panic message (what `std` printed to
    /// stderr just before the trap) and its location.
    #[error("panicked: {0}")]
    Panicked(String),
    /// The per-call deadline passed.
    #[error("exceeded its deadline of {0:?}")]
    Deadline(Duration),
    /// The guest tried to grow memory past its cap.
    #[error("exceeded its memory limit of {0} bytes")]
    OutOfMemory(usize),
    /// The guest ran out of fuel.
    #[error("ran out of fuel ({0} units)")]
    OutOfFuel(u64),
    /// The component imports interfaces the host cannot provide (their
    /// resource types have no implementation here).
    #[error("{}", imports::describe(.0))]
    Unsupported(Vec<String>),
    /// The manifest is unusable.
    #[error("invalid manifest: {0}")]
    Manifest(#[from] ManifestError),
    /// The manifest asks for more than the operator's policy grants.
    #[error("{0}")]
    Policy(#[from] crate::guest::policy::PolicyDenied),
    /// The plan is malformed or writes outside the allowlist.
    #[error("invalid plan: {0}")]
    Plan(#[from] PlanError),
    /// The `aggregator` export returned something unusable (a spec naming
    /// no aggregate key, a contribution naming no object of its snapshot).
    #[error("invalid aggregate: {0}")]
    Aggregate(String),
    /// The guest returned an error from `reconcile`.
    #[error("reconcile failed ({}): {message}", if *retryable { "retryable" } else { "terminal" })]
    Failed {
        /// Whether the guest asked for a retry.
        retryable: bool,
        /// The guest's message.
        message: String,
    },
}

impl GuestErrorKind {
    /// Short, stable label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            GuestErrorKind::Read { .. } => "read",
            GuestErrorKind::Compile(_) => "compile",
            GuestErrorKind::Version { .. } => "version",
            GuestErrorKind::Instantiate(_) => "instantiate",
            GuestErrorKind::Trap(_) => "trap",
            GuestErrorKind::Panicked(_) => "guest_panic",
            GuestErrorKind::Deadline(_) => "deadline",
            GuestErrorKind::OutOfMemory(_) => "memory",
            GuestErrorKind::OutOfFuel(_) => "fuel",
            GuestErrorKind::Unsupported(_) => "unsupported_import",
            GuestErrorKind::Manifest(_) => "manifest",
            GuestErrorKind::Policy(_) => "policy",
            GuestErrorKind::Plan(PlanError::TooLarge { .. } | PlanError::OverCopyBudget { .. }) => {
                "plan_too_large"
            }
            GuestErrorKind::Aggregate(_) => "malformed_aggregate",
            GuestErrorKind::Plan(PlanError::NotAllowed { .. }) => "forbidden_write",
            GuestErrorKind::Plan(_) => "malformed_plan",
            GuestErrorKind::Failed {
                retryable: true, ..
            } => "retryable",
            GuestErrorKind::Failed {
                retryable: false, ..
            } => "terminal",
        }
    }
}

/// Sandbox limits and engine settings.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Wall-clock budget for one call into a guest (instantiation included).
    pub deadline: Duration,
    /// Maximum linear memory a guest instance may use, in bytes.
    pub memory_limit: usize,
    /// Fuel per call; `None` disables fuel metering (cheaper).
    pub fuel: Option<u64>,
    /// Directory for precompiled artifacts; `None` disables the disk cache.
    pub cache_dir: Option<PathBuf>,
    /// Granularity of the deadline (one epoch tick).
    pub epoch_tick: Duration,
    /// The operator's policy: grants checked at load, caps per call.
    pub policy: Arc<crate::guest::policy::Policy>,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            deadline: Duration::from_secs(5),
            memory_limit: 512 << 20,
            fuel: None,
            cache_dir: default_cache_dir(),
            epoch_tick: Duration::from_millis(10),
            policy: Arc::default(),
        }
    }
}

impl RuntimeConfig {
    /// Sets the per-call deadline.
    #[must_use]
    pub fn deadline(mut self, d: Duration) -> Self {
        self.deadline = d;
        self
    }

    /// Sets the memory cap. Size it to the snapshot: the snapshot is copied
    /// into guest memory, so a cap below the snapshot's size traps every call.
    #[must_use]
    pub fn memory_limit(mut self, bytes: usize) -> Self {
        self.memory_limit = bytes;
        self
    }

    /// Enables fuel metering with this much fuel per call (costs ~25-40 %
    /// speed); `None` disables it.
    #[must_use]
    pub fn fuel(mut self, fuel: Option<u64>) -> Self {
        self.fuel = fuel;
        self
    }

    /// Sets the operator's policy (default: [`crate::guest::policy::Policy::default`]).
    #[must_use]
    pub fn policy(mut self, policy: crate::guest::policy::Policy) -> Self {
        self.policy = Arc::new(policy);
        self
    }

    /// Sets (or disables) the precompiled-artifact cache directory.
    #[must_use]
    pub fn cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.cache_dir = dir;
        self
    }
}

fn default_cache_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|d| d.join("wasmctrl"))
}

/// Per-call state inside a store.
pub struct CallState {
    guest: Arc<str>,
    limiter: Limiter,
    output: stdio::Output,
    limits: crate::guest::policy::Limits,
    log: limits::LogBudget,
    log_rates: Arc<limits::LogRates>,
}

impl Drop for CallState {
    fn drop(&mut self) {
        let guest = self.guest.clone();
        self.output.flush(&guest);
    }
}

/// A memory limiter that remembers whether the cap was hit, so the trap can
/// be reported as what it is rather than as the guest allocator's panic.
struct Limiter {
    max_memory: usize,
    hit: bool,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_memory {
            self.hit = true;
            return Err(wasmtime::Error::msg(format!(
                "memory limit of {} bytes reached (wanted {desired})",
                self.max_memory
            )));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

impl bindings::wasmctrl::controller::types::Host for CallState {}

impl bindings::wasmctrl::controller::log::Host for CallState {
    fn log(&mut self, level: bindings::wasmctrl::controller::log::Level, message: String) {
        use bindings::wasmctrl::controller::log::Level;
        let guest = &*self.guest;
        let Some(message) = self
            .log
            .admit(guest, message, &self.limits, &self.log_rates)
        else {
            return;
        };
        match level {
            Level::Trace => tracing::trace!(target: "wasmctrl::guest", guest, "{message}"),
            Level::Debug => tracing::debug!(target: "wasmctrl::guest", guest, "{message}"),
            Level::Info => tracing::info!(target: "wasmctrl::guest", guest, "{message}"),
            Level::Warn => tracing::warn!(target: "wasmctrl::guest", guest, "{message}"),
            Level::Error => tracing::error!(target: "wasmctrl::guest", guest, "{message}"),
        }
    }
}

struct Shared {
    engine: Engine,
    config: RuntimeConfig,
    ticks_per_deadline: u64,
    stop: Arc<AtomicBool>,
    log_rates: Arc<limits::LogRates>,
    clamp_warnings: limits::ClampWarnings,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The engine every guest runs on. Cheap to clone.
#[derive(Clone)]
pub struct GuestRuntime {
    shared: Arc<Shared>,
}

impl GuestRuntime {
    /// Creates the engine and starts the epoch ticker thread.
    pub fn new(config: RuntimeConfig) -> Result<Self> {
        let mut wasm = Config::new();
        wasm.wasm_component_model(true)
            .epoch_interruption(true)
            .consume_fuel(config.fuel.is_some());
        let engine = Engine::new(&wasm).map_err(|e| GuestError {
            guest: "(engine)".into(),
            kind: GuestErrorKind::Compile(format!("{e:#}")),
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let tick = config.epoch_tick.max(Duration::from_millis(1));
        {
            let engine = engine.clone();
            let stop = stop.clone();
            // One ticker for every store: each store's deadline is counted in
            // these ticks.
            std::thread::Builder::new()
                .name("wasmctrl-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(tick);
                        engine.increment_epoch();
                    }
                })
                .map_err(|e| GuestError {
                    guest: "(engine)".into(),
                    kind: GuestErrorKind::Instantiate(format!("cannot start epoch ticker: {e}")),
                })?;
        }
        let ticks_per_deadline = (config.deadline.as_nanos() / tick.as_nanos()).max(1) as u64 + 1;
        Ok(GuestRuntime {
            shared: Arc::new(Shared {
                engine,
                config,
                ticks_per_deadline,
                stop,
                log_rates: Arc::default(),
                clamp_warnings: Default::default(),
            }),
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &RuntimeConfig {
        &self.shared.config
    }

    /// Loads a guest from a file (`label` in errors is the file name).
    pub fn load_file(&self, path: &Path) -> Result<GuestModule> {
        let label = path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        let bytes = std::fs::read(path).map_err(|source| GuestError {
            guest: label.clone(),
            kind: GuestErrorKind::Read {
                path: path.to_path_buf(),
                source,
            },
        })?;
        self.load_bytes(&label, &bytes)
    }

    /// Loads a guest from bytes (a component binary or its `.wat` text).
    pub fn load_bytes(&self, label: &str, bytes: &[u8]) -> Result<GuestModule> {
        let err = |kind| GuestError {
            guest: label.to_string(),
            kind,
        };
        let digest = hex::encode(Sha256::digest(bytes));
        let started = Instant::now();
        let (component, from_cache) = self.compile(&digest, bytes).map_err(err)?;
        let compile_time = started.elapsed();
        if let Some(found) = contract_version(&component, &self.shared.engine)
            .filter(|v| CONTRACT_VERSION.strip_prefix("wasmctrl:controller@") != Some(v.as_str()))
        {
            return Err(err(GuestErrorKind::Version { found }));
        }

        let unsupported = imports::unsupported(&component, &self.shared.engine);
        if !unsupported.is_empty() {
            return Err(err(GuestErrorKind::Unsupported(unsupported)));
        }
        let mut linker: Linker<CallState> = Linker::new(&self.shared.engine);
        Controller::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)
            .map_err(|e| err(GuestErrorKind::Instantiate(format!("{e:#}"))))?;
        // stdout/stderr go to tracing; whatever else the guest imports
        // (WASI, through std) is defined to trap: it instantiates, but has
        // no clock, randomness, filesystem, environment or network.
        stdio::add_to_linker(&mut linker)
            .map_err(|e| err(GuestErrorKind::Instantiate(format!("{e:#}"))))?;
        linker
            .define_unknown_imports_as_traps(&component)
            .map_err(|e| err(GuestErrorKind::Instantiate(format!("{e:#}"))))?;
        let pre = linker
            .instantiate_pre(&component)
            .map_err(|e| err(GuestErrorKind::Instantiate(format!("{e:#}"))))?;
        // A component of the aggregate-controller world also exports
        // `aggregator`: the controller keeps its aggregate incrementally.
        let aggregate = if aggregate::exports_aggregator(&component, &self.shared.engine) {
            Some(aggregate::pre(pre.clone()).map_err(err)?)
        } else {
            None
        };
        let pre = ControllerPre::new(pre)
            .map_err(|e| err(GuestErrorKind::Instantiate(format!("{e:#}"))))?;
        Ok(GuestModule {
            inner: Arc::new(ModuleInner {
                label: label.into(),
                digest,
                pre,
                aggregate,
                shared: self.shared.clone(),
                compile_time,
                from_cache,
            }),
        })
    }

    fn compile(
        &self,
        digest: &str,
        bytes: &[u8],
    ) -> std::result::Result<(Component, bool), GuestErrorKind> {
        let engine = &self.shared.engine;
        let cache_path = self.shared.config.cache_dir.as_ref().map(|dir| {
            let mut h = DefaultHasher::new();
            engine.precompile_compatibility_hash().hash(&mut h);
            dir.join(format!("{digest}-{:016x}.cwasm", h.finish()))
        });
        if let Some(path) = &cache_path {
            // Read into memory rather than mmap: a cache file truncated or
            // rewritten under a live mapping would be a SIGBUS, not an error.
            if let Ok(artifact) = std::fs::read(path) {
                // SAFETY: the file is named by the digest of the source and
                // the engine's compatibility hash, and is only ever written
                // by `Component::serialize` of this same engine
                // configuration (atomically, via rename), into a cache
                // directory that only this host writes. wasmtime checks the
                // header and version and rejects foreign or corrupt bytes.
                #[allow(unsafe_code)]
                let loaded = unsafe { Component::deserialize(engine, &artifact) };
                match loaded {
                    Ok(c) => return Ok((c, true)),
                    Err(e) => {
                        tracing::warn!(path = %path.display(), "ignoring unusable cached artifact: {e:#}")
                    }
                }
            }
        }
        let component =
            Component::new(engine, bytes).map_err(|e| GuestErrorKind::Compile(format!("{e:#}")))?;
        if let Some(path) = &cache_path {
            if let Err(e) = write_cache(path, &component) {
                tracing::warn!(path = %path.display(), "cannot write compiled-guest cache: {e:#}");
            }
        }
        Ok((component, false))
    }
}

/// The contract version a component's reconciler export names
/// (`wasmctrl:controller/reconciler@0.1.0` → `0.1.0`), read from its type
/// before instantiation so a guest of another version gets an exact
/// message rather than a type-check failure.
fn contract_version(component: &Component, engine: &Engine) -> Option<String> {
    component
        .component_type()
        .exports(engine)
        .find_map(|(name, _)| name.strip_prefix(RECONCILER).map(str::to_string))
}

fn write_cache(
    path: &Path,
    component: &Component,
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let bytes = component.serialize()?;
    let dir = path.parent().ok_or("cache path has no directory")?;
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".tmp-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4()
    ));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

struct ModuleInner {
    label: Arc<str>,
    digest: String,
    pre: ControllerPre<CallState>,
    aggregate: Option<aggregate::bindings::AggregateControllerPre<CallState>>,
    shared: Arc<Shared>,
    compile_time: Duration,
    from_cache: bool,
}

/// A compiled guest, ready to instantiate. Cheap to clone; each call gets a
/// fresh, isolated store.
#[derive(Clone)]
pub struct GuestModule {
    inner: Arc<ModuleInner>,
}

/// Timings of one guest call.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallStats {
    /// Creating the store and instance.
    pub instantiate: Duration,
    /// Time inside the exported function (argument copy included).
    pub call: Duration,
    /// The plan's requeue delay was raised to the policy's minimum.
    pub requeue_clamped: bool,
    /// `log` messages truncated or dropped over the policy's budget.
    pub log_limited: u64,
}

impl std::fmt::Debug for GuestModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestModule")
            .field("label", &self.inner.label)
            .field("digest", &self.inner.digest)
            .finish_non_exhaustive()
    }
}

impl GuestModule {
    /// SHA-256 of the module bytes.
    pub fn digest(&self) -> &str {
        &self.inner.digest
    }

    /// The operator's policy this module's runtime admits manifests with
    /// (the controller admits the resolved resources with it again).
    pub fn policy(&self) -> &crate::guest::policy::Policy {
        &self.inner.shared.config.policy
    }

    /// The label used in errors until the manifest names the guest.
    pub fn label(&self) -> &str {
        &self.inner.label
    }

    /// Time spent compiling (or loading from the cache).
    pub fn compile_time(&self) -> Duration {
        self.inner.compile_time
    }

    /// Whether the compiled artifact came from the disk cache.
    pub fn from_cache(&self) -> bool {
        self.inner.from_cache
    }

    fn error(&self, guest: &str, kind: GuestErrorKind) -> GuestError {
        GuestError {
            guest: guest.to_string(),
            kind,
        }
    }

    fn instantiate(&self, guest: &str) -> Result<(Store<CallState>, Controller)> {
        let mut store = self.new_store(guest)?;
        match self.inner.pre.instantiate(&mut store) {
            Ok(instance) => Ok((store, instance)),
            Err(e) => Err(self.classify(guest, &store, e)),
        }
    }

    /// A fresh store with the sandbox's limits, deadline and fuel.
    fn new_store(&self, guest: &str) -> Result<Store<CallState>> {
        let shared = &self.inner.shared;
        let mut store = Store::new(
            &shared.engine,
            CallState {
                guest: guest.into(),
                limiter: Limiter {
                    max_memory: shared.config.memory_limit,
                    hit: false,
                },
                output: stdio::Output::default(),
                limits: shared.config.policy.limits(guest),
                log: limits::LogBudget::default(),
                log_rates: shared.log_rates.clone(),
            },
        );
        store.limiter(|s| &mut s.limiter);
        let budget = limits::copy_budget(&store.data().limits);
        store.set_hostcall_fuel(budget);
        // A fresh store has deadline 0 and no fuel: set both before
        // instantiating or instantiation itself traps.
        store.set_epoch_deadline(shared.ticks_per_deadline);
        store.epoch_deadline_trap();
        if let Some(fuel) = shared.config.fuel {
            store
                .set_fuel(fuel)
                .map_err(|e| self.error(guest, GuestErrorKind::Instantiate(format!("{e:#}"))))?;
        }
        Ok(store)
    }

    fn classify(&self, guest: &str, store: &Store<CallState>, e: wasmtime::Error) -> GuestError {
        let config = &self.inner.shared.config;
        let kind = if store.data().limiter.hit {
            GuestErrorKind::OutOfMemory(config.memory_limit)
        } else if limits::over_copy_budget(&e) {
            GuestErrorKind::Plan(PlanError::OverCopyBudget {
                max: store.hostcall_fuel(),
            })
        } else {
            match e.downcast_ref::<Trap>() {
                Some(Trap::Interrupt) => GuestErrorKind::Deadline(config.deadline),
                Some(Trap::OutOfFuel) => GuestErrorKind::OutOfFuel(config.fuel.unwrap_or(0)),
                _ => match store.data().output.panic_message() {
                    Some(message) => GuestErrorKind::Panicked(message),
                    None => GuestErrorKind::Trap(format!("{e:#}")),
                },
            }
        };
        self.error(guest, kind)
    }

    /// Calls the guest's `manifest` and validates the result.
    pub fn manifest(&self, env: &Environment) -> Result<GuestManifest> {
        let label = self.inner.label.clone();
        let (mut store, instance) = self.instantiate(&label)?;
        let raw = instance
            .wasmctrl_controller_reconciler()
            .call_describe(&mut store, env)
            .map_err(|e| self.classify(&label, &store, e))?;
        let raw = raw.map_err(|msg| {
            self.error(
                &label,
                GuestErrorKind::Manifest(ManifestError::Rejected(msg)),
            )
        })?;
        let manifest = manifest::validate(&raw)
            .map_err(|e| self.error(&label, GuestErrorKind::Manifest(e)))?;
        // Named by its declared name from here on: the policy section is
        // chosen by it.
        self.inner
            .shared
            .config
            .policy
            .admit(&manifest)
            .map_err(|e| self.error(&manifest.name, GuestErrorKind::Policy(e)))?;
        Ok(manifest)
    }

    /// A plan the guest returned, made ready to carry out: held to the
    /// operator's caps (before any document is parsed), validated against
    /// `manifest` and the snapshot the guest saw (`data`), and its requeue
    /// delay raised to the policy's minimum (recorded in `stats`).
    fn finish_plan(
        &self,
        name: &str,
        raw: &wit::Plan,
        manifest: &GuestManifest,
        data: &SnapshotData,
        limits: &crate::guest::policy::Limits,
        stats: &mut CallStats,
    ) -> Result<ValidatedPlan> {
        let plan_error = |e| self.error(name, GuestErrorKind::Plan(e));
        limits::check_plan(raw, limits).map_err(plan_error)?;
        // The host built the snapshot: a bad one is a host bug, reported,
        // never a panic.
        let view = wasmctrl_snapshot::SnapshotView::new(data)
            .map_err(|e| self.error(name, GuestErrorKind::Trap(format!("host snapshot: {e}"))))?;
        let mut plan = plan::validate(raw, manifest, &view).map_err(plan_error)?;
        let min = limits.min_requeue;
        stats.requeue_clamped = limits::clamp_requeue(&mut plan.requeue_after, min);
        if stats.requeue_clamped {
            self.inner.shared.clamp_warnings.warn_once(name, min);
        }
        Ok(plan)
    }

    /// Runs one reconcile of `request` over `snapshot` in a fresh store and
    /// validates the plan against `manifest`'s allowlist and the snapshot
    /// (pinned writes take the uids it holds).
    pub fn reconcile(
        &self,
        manifest: &GuestManifest,
        env: &Environment,
        request: &Request,
        snapshot: SnapshotData,
    ) -> (Result<ValidatedPlan>, CallStats) {
        let mut stats = CallStats::default();
        let name = manifest.name.as_str();
        let started = Instant::now();
        let (mut store, instance) = match self.instantiate(name) {
            Ok(x) => x,
            Err(e) => return (Err(e), stats),
        };
        stats.instantiate = started.elapsed();
        let snapshot = snapshot::to_wit(snapshot);
        let called = Instant::now();
        let raw = instance
            .wasmctrl_controller_reconciler()
            .call_reconcile(&mut store, env, request, &snapshot);
        stats.call = called.elapsed();
        stats.log_limited = store.data().log.limited;
        let limits = store.data().limits.clone();
        let result = match raw {
            Err(e) => Err(self.classify(name, &store, e)),
            Ok(Err(wit::ReconcileError::Retryable(message))) => Err(self.error(
                name,
                GuestErrorKind::Failed {
                    retryable: true,
                    message,
                },
            )),
            Ok(Err(wit::ReconcileError::Terminal(message))) => Err(self.error(
                name,
                GuestErrorKind::Failed {
                    retryable: false,
                    message,
                },
            )),
            Ok(Ok(plan)) => {
                let data = snapshot::from_wit(snapshot);
                self.finish_plan(name, &plan, manifest, &data, &limits, &mut stats)
            }
        };
        (result, stats)
    }
}

/// Builds an [`Environment`] from a namespace and key/value pairs (sorted by
/// key, so the guest sees a deterministic order).
/// `now_ms` is 0: what `describe` gets; see [`Environment::at`].
pub fn environment(
    namespace: &str,
    config: &std::collections::BTreeMap<String, String>,
) -> Environment {
    Environment {
        namespace: namespace.to_string(),
        config: config.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        now_ms: 0,
    }
}

impl Environment {
    /// This environment with the clock at `now_ms` (milliseconds since the
    /// Unix epoch).
    #[must_use]
    pub fn at(&self, now_ms: u64) -> Self {
        Environment {
            now_ms,
            ..self.clone()
        }
    }
}

/// The host's clock in milliseconds since the Unix epoch (0 if the clock is
/// before it).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_governance;
