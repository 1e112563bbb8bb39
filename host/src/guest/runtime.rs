//! The guest runtime: the one wasmtime engine and its epoch ticker,
//! compilation once per content digest with an on-disk cache of
//! precompiled artifacts, and the sandbox settings every guest gets. It
//! never calls a guest (see `module`).

use super::*;

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
    /// Granularity of the deadline (one epoch tick); `None`: a fiftieth of
    /// the deadline, between 1 ms and 100 ms (the ticker wakes that often
    /// for as long as the engine lives, calls or not).
    pub epoch_tick: Option<Duration>,
    /// The operator's policy: grants checked at load, caps per call.
    pub policy: Arc<crate::guest::policy::Policy>,
    /// Whether the engine writes `/tmp/perf-PID.map`, naming each guest's
    /// compiled functions for `perf` (see [`RuntimeConfig::perf_map`]).
    pub perf_map: bool,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            deadline: Duration::from_secs(5),
            memory_limit: 512 << 20,
            fuel: None,
            cache_dir: default_cache_dir(),
            epoch_tick: None,
            policy: Arc::default(),
            perf_map: false,
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

    /// Makes the engine write `/tmp/perf-PID.map` (the perf map format:
    /// address, size, name), so that `perf report` names the guests'
    /// compiled functions instead of showing `[unknown]`. A guest stripped
    /// of its name section shows as `wasm[N]::function[M]`. Off by
    /// default: the file grows with every guest loaded.
    #[must_use]
    pub fn perf_map(mut self, on: bool) -> Self {
        self.perf_map = on;
        self
    }

    /// Sets (or disables) the precompiled-artifact cache directory.
    #[must_use]
    pub fn cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.cache_dir = dir;
        self
    }
}

pub(super) fn default_cache_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|d| d.join("wasmctrl"))
}

pub(super) struct Shared {
    pub(super) engine: Engine,
    pub(super) config: RuntimeConfig,
    pub(super) ticks_per_deadline: u64,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) log_rates: Arc<limits::LogRates>,
    pub(super) clamp_warnings: limits::ClampWarnings,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// What a compiled guest holds: its component, ready to instantiate, and
/// the engine it runs on.
pub(super) struct ModuleInner {
    pub(super) label: Arc<str>,
    pub(super) digest: String,
    pub(super) pre: ControllerPre<CallState>,
    pub(super) aggregate: Option<aggregate::bindings::AggregateControllerPre<CallState>>,
    pub(super) shared: Arc<Shared>,
    pub(super) compile_time: Duration,
    pub(super) from_cache: bool,
}

/// The engine every guest runs on. Cheap to clone.
#[derive(Clone)]
pub struct GuestRuntime {
    pub(super) shared: Arc<Shared>,
}

impl GuestRuntime {
    /// Creates the engine and starts the epoch ticker thread.
    pub fn new(config: RuntimeConfig) -> Result<Self> {
        let mut wasm = Config::new();
        wasm.wasm_component_model(true)
            .epoch_interruption(true)
            .consume_fuel(config.fuel.is_some());
        if config.perf_map {
            wasm.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&wasm).map_err(|e| GuestError {
            guest: "(engine)".into(),
            kind: GuestErrorKind::Compile(format!("{e:#}")),
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let tick = config
            .epoch_tick
            .unwrap_or_else(|| {
                (config.deadline / 50).clamp(Duration::from_millis(1), Duration::from_millis(100))
            })
            .max(Duration::from_millis(1));
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
        // Refused before it is read whole.
        let size = std::fs::metadata(path).map_or(0, |m| m.len());
        if size > imports::MAX_COMPONENT_BYTES as u64 {
            return Err(GuestError {
                guest: label,
                kind: GuestErrorKind::TooLarge {
                    size: usize::try_from(size).unwrap_or(usize::MAX),
                    max: imports::MAX_COMPONENT_BYTES,
                },
            });
        }
        let bytes = std::fs::read(path).map_err(|source| GuestError {
            guest: label.clone(),
            kind: GuestErrorKind::Read {
                path: path.to_path_buf(),
                source,
            },
        })?;
        self.load_bytes(&label, &bytes)
    }

    /// Loads a guest from a component binary. What the host would refuse
    /// anyway (see [`imports::check`]) is refused before it is compiled.
    pub fn load_bytes(&self, label: &str, bytes: &[u8]) -> Result<GuestModule> {
        let err = |kind| GuestError {
            guest: label.to_string(),
            kind,
        };
        imports::check(bytes).map_err(err)?;
        let digest = hex::encode(Sha256::digest(bytes));
        let started = Instant::now();
        let (component, from_cache) = self.compile(&digest, bytes).map_err(err)?;
        let compile_time = started.elapsed();
        let mut linker: Linker<CallState> = Linker::new(&self.shared.engine);
        Controller::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)
            .map_err(|e| err(GuestErrorKind::Instantiate(format!("{e:#}"))))?;
        // The governed WASI surface (see `wasi`); whatever else the guest
        // imports is defined to trap.
        wasi::add_to_linker(&mut linker)
            .map_err(|e| err(GuestErrorKind::Instantiate(format!("{e:#}"))))?;
        wasi::define_others_as_traps(&mut linker, &component, &self.shared.engine)
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

    pub(super) fn compile(
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

pub(super) fn write_cache(
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
