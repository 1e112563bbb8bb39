//! One compiled guest: `describe` and `reconcile` on a fresh instance
//! under the deadline (a controller's reconciles reuse instances through
//! `warm`), a trap or panic classified, the plan validated. It never
//! compiles (see `runtime`).

use super::runtime::ModuleInner;
use super::sandbox::Limiter;
use super::*;

/// A compiled guest, ready to instantiate. Cheap to clone; each of its
/// calls gets a fresh, isolated store ([`super::WarmInstances`] keeps
/// stores between a controller's reconciles).
#[derive(Clone)]
pub struct GuestModule {
    pub(super) inner: Arc<ModuleInner>,
}

/// Timings of one guest call.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallStats {
    /// Creating the store and instance (zero when the call reused one).
    pub instantiate: Duration,
    /// The call created an instance (see [`super::WarmInstances`]).
    pub instantiated: bool,
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

    pub(super) fn error(&self, guest: &str, kind: GuestErrorKind) -> GuestError {
        GuestError {
            guest: guest.to_string(),
            kind,
        }
    }

    pub(super) fn instantiate(&self, guest: &str) -> Result<(Store<CallState>, Controller)> {
        let mut store = self.new_store(guest)?;
        match self.inner.pre.instantiate(&mut store) {
            Ok(instance) => Ok((store, instance)),
            Err(e) => Err(self.classify(guest, &store, e)),
        }
    }

    /// A fresh store with the sandbox's limits, deadline and fuel.
    pub(super) fn new_store(&self, guest: &str) -> Result<Store<CallState>> {
        let shared = &self.inner.shared;
        let limits = shared.config.policy.limits(guest);
        let guest: Arc<str> = guest.into();
        let output = Arc::new(std::sync::Mutex::new(stdio::Output::new(
            limits.clone(),
            shared.log_rates.clone(),
        )));
        let mut store = Store::new(
            &shared.engine,
            CallState {
                wasi: wasi::Wasi::new(guest.clone(), output.clone()),
                output,
                guest,
                limiter: Limiter {
                    max_memory: shared.config.memory_limit,
                    hit: false,
                    size: 0,
                },
                limits,
            },
        );
        store.limiter(|s| &mut s.limiter);
        self.arm(&mut store)?;
        Ok(store)
    }

    /// Gives `store` one call's deadline, fuel and copy budget, and clears
    /// what the last call left in its state (output, log budget, the
    /// memory cap's flag): a store that served a call serves the next one
    /// under exactly a fresh store's limits.
    pub(super) fn arm(&self, store: &mut Store<CallState>) -> Result<()> {
        let shared = &self.inner.shared;
        let state = store.data_mut();
        state.limiter.hit = false;
        let guest = state.guest.clone();
        let mut output = state.output();
        output.flush(&guest);
        output.reset();
        drop(output);
        let budget = limits::copy_budget(&state.limits);
        store.set_hostcall_fuel(budget);
        // A fresh store has deadline 0 and no fuel: set both before
        // instantiating or instantiation itself traps.
        store.set_epoch_deadline(shared.ticks_per_deadline);
        store.epoch_deadline_trap();
        if let Some(fuel) = shared.config.fuel {
            store.set_fuel(fuel).map_err(|e| {
                let guest = store.data().guest.clone();
                self.error(&guest, GuestErrorKind::Instantiate(format!("{e:#}")))
            })?;
        }
        Ok(())
    }

    pub(super) fn classify(
        &self,
        guest: &str,
        store: &Store<CallState>,
        e: wasmtime::Error,
    ) -> GuestError {
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
                // What the runtime printed before it trapped says more
                // than the trap (`unreachable`).
                _ => match exception::last_report(&store.data().output().stderr_tail()) {
                    Some(r) if r.panic => GuestErrorKind::Panicked(r.message),
                    Some(r) => GuestErrorKind::Exception {
                        message: r.message,
                        stack: r.stack,
                    },
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
            self.declared_error(
                self.declared_name(env).as_deref(),
                ManifestError::Rejected(msg),
            )
        })?;
        let manifest = manifest::validate(&raw).map_err(|e| {
            let name = (!matches!(e, ManifestError::BadName(_))).then_some(raw.name.as_str());
            self.declared_error(name, e)
        })?;
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

    /// The name the guest declares when it rejects `env`'s configuration:
    /// its name described without any configuration (the name it runs
    /// under, unless it derives its name from its configuration), or None
    /// when it rejects that too, or had no configuration to drop. Costs
    /// one more `describe`, only on this error path.
    fn declared_name(&self, env: &Environment) -> Option<String> {
        if env.config.is_empty() {
            return None;
        }
        self.name_without_configuration(&env.namespace)
    }

    /// The name the guest declares when described in `namespace` without
    /// configuration (None: it rejects that, or fails): how the host names
    /// a guest whose configuration it cannot use.
    pub fn name_without_configuration(&self, namespace: &str) -> Option<String> {
        let bare = super::environment(namespace, &Default::default());
        let (mut store, instance) = self.instantiate(&self.inner.label).ok()?;
        let raw = instance
            .wasmctrl_controller_reconciler()
            .call_describe(&mut store, &bare)
            .ok()?
            .ok()?;
        wasmctrl_kube_rules::names::is_dns1123_label(&raw.name).then_some(raw.name)
    }

    /// An error about what the guest declares: named by its declared
    /// `name` and its file when the name is known, by its file otherwise.
    fn declared_error(&self, name: Option<&str>, error: ManifestError) -> GuestError {
        let label = &self.inner.label;
        let (guest, file) = match name {
            Some(name) => (name, Some(label.clone())),
            None => (&**label, None),
        };
        self.error(guest, GuestErrorKind::Manifest { error, file })
    }

    /// A plan the guest returned, made ready to carry out: held to the
    /// operator's caps (before any document is parsed), validated against
    /// `manifest` and the snapshot the guest saw (`data`), and its requeue
    /// delay raised to the policy's minimum (recorded in `stats`).
    pub(super) fn finish_plan(
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
    /// (pinned writes take the uids it holds). A controller's reconciles go
    /// through [`super::WarmInstances`] instead, which reuses instances.
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
        stats.instantiated = true;
        let snapshot = snapshot::to_wit(snapshot);
        let returned =
            self.call_reconcile(&mut store, &instance, env, request, &snapshot, &mut stats);
        let limits = store.data().limits.clone();
        let result = self.finish_call(name, returned, manifest, snapshot, &limits, &mut stats);
        (result, stats)
    }

    /// The guest's `reconcile` on `store`'s `instance`: what it returned,
    /// or the trap (classified) after which the instance must not be
    /// called again.
    pub(super) fn call_reconcile(
        &self,
        store: &mut Store<CallState>,
        instance: &Controller,
        env: &Environment,
        request: &Request,
        snapshot: &Snapshot,
        stats: &mut CallStats,
    ) -> Result<std::result::Result<wit::Plan, wit::ReconcileError>> {
        // The clocks read env.now, the random streams restart from the
        // request: a replay of this call sees what this call saw.
        store.data_mut().wasi.at(env.now_ms, &request.key);
        let called = Instant::now();
        let raw = instance.wasmctrl_controller_reconciler().call_reconcile(
            &mut *store,
            env,
            request,
            snapshot,
        );
        stats.call += called.elapsed();
        stats.log_limited += store.data().output().budget.limited;
        raw.map_err(|e| {
            let guest = store.data().guest.clone();
            self.classify(&guest, store, e)
        })
    }

    /// The guest's own error (`reconcile-error`), as the caller gets it.
    pub(super) fn failed(&self, guest: &str, e: wit::ReconcileError) -> GuestError {
        let (retryable, message) = match e {
            wit::ReconcileError::Retryable(m) => (true, m),
            wit::ReconcileError::Terminal(m) => (false, m),
        };
        self.error(guest, GuestErrorKind::Failed { retryable, message })
    }

    /// What a reconcile call returned, as the caller gets it: the guest's
    /// own error, or its plan finished (see [`Self::finish_plan`]).
    pub(super) fn finish_call(
        &self,
        name: &str,
        returned: Result<std::result::Result<wit::Plan, wit::ReconcileError>>,
        manifest: &GuestManifest,
        snapshot: Snapshot,
        limits: &crate::guest::policy::Limits,
        stats: &mut CallStats,
    ) -> Result<ValidatedPlan> {
        match returned? {
            Err(e) => Err(self.failed(name, e)),
            Ok(plan) => {
                let data = snapshot::from_wit(snapshot);
                self.finish_plan(name, &plan, manifest, &data, limits, stats)
            }
        }
    }
}
