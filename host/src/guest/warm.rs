//! Instances of one guest kept between its reconciles: a call takes an
//! idle instance (or instantiates one), re-arms its deadline, fuel and
//! budgets as a fresh store's, and gives it back when the guest returned.
//! An instance that trapped is dropped; one grown past [`KEEP_MEMORY`] or
//! used [`MAX_CALLS`] times is retired. Creating and unmapping an instance
//! per call was a quarter of a per-object controller's CPU (BENCHMARKS.md).
//! It never changes what a call may do, only what it costs.

use std::sync::Mutex;

use super::module::CallStats;
use super::*;

/// Idle instances kept at most (more than any controller's workers).
const MAX_IDLE: usize = 16;
/// Calls one instance serves before it is retired.
pub const MAX_CALLS: u32 = 10_000;
/// Linear memory an idle instance may keep; a larger one is retired.
pub const KEEP_MEMORY: usize = 16 << 20;

struct Warm {
    store: Store<CallState>,
    instance: Controller,
    calls: u32,
}

impl Warm {
    fn reconcile(
        &mut self,
        module: &GuestModule,
        env: &Environment,
        request: &Request,
        snapshot: &Snapshot,
        stats: &mut CallStats,
    ) -> Result<std::result::Result<wit::Plan, wit::ReconcileError>> {
        module.call_reconcile(
            &mut self.store,
            &self.instance,
            env,
            request,
            snapshot,
            stats,
        )
    }
}

/// One guest's reusable instances (see the module's text). Every
/// instance runs under the name it was created with: a controller (one
/// guest, one environment) owns one of these.
pub struct WarmInstances {
    module: GuestModule,
    name: Arc<str>,
    idle: Mutex<Vec<Warm>>,
}

impl std::fmt::Debug for WarmInstances {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WarmInstances")
            .field("module", &self.module)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl WarmInstances {
    /// No instance yet: the first call creates one.
    pub fn new(module: GuestModule, name: &str) -> Self {
        WarmInstances {
            module,
            name: name.into(),
            idle: Mutex::new(Vec::new()),
        }
    }

    /// The module the instances come from.
    pub fn module(&self) -> &GuestModule {
        &self.module
    }

    /// Instances waiting for a call.
    pub fn idle(&self) -> usize {
        crate::sync::lock(&self.idle).len()
    }

    fn take(&self, stats: &mut CallStats) -> Result<Warm> {
        let idle = crate::sync::lock(&self.idle).pop();
        if let Some(mut warm) = idle {
            self.module.arm(&mut warm.store)?;
            return Ok(warm);
        }
        self.fresh(stats)
    }

    fn fresh(&self, stats: &mut CallStats) -> Result<Warm> {
        let started = Instant::now();
        let (store, instance) = self.module.instantiate(&self.name)?;
        stats.instantiate += started.elapsed();
        stats.instantiated = true;
        Ok(Warm {
            store,
            instance,
            calls: 0,
        })
    }

    fn give_back(&self, mut warm: Warm) {
        let state = warm.store.data_mut();
        let guest = state.guest.clone();
        state.output().flush(&guest);
        if warm.calls >= MAX_CALLS || state.limiter.size > KEEP_MEMORY {
            return;
        }
        let mut idle = crate::sync::lock(&self.idle);
        if idle.len() < MAX_IDLE {
            idle.push(warm);
        }
    }

    /// [`GuestModule::reconcile`] on a kept instance. A call that runs out
    /// of memory on an instance that served earlier calls runs once more
    /// on a fresh one: what an earlier call left in memory must not fail
    /// this one.
    pub fn reconcile(
        &self,
        manifest: &GuestManifest,
        env: &Environment,
        request: &Request,
        snapshot: SnapshotData,
    ) -> (Result<ValidatedPlan>, CallStats) {
        let mut stats = CallStats::default();
        let module = &self.module;
        let snapshot = snapshot::to_wit(snapshot);
        let mut warm = match self.take(&mut stats) {
            Ok(w) => w,
            Err(e) => return (Err(e), stats),
        };
        let mut returned = warm.reconcile(module, env, request, &snapshot, &mut stats);
        let out_of_memory = matches!(
            &returned,
            Err(e) if matches!(e.kind, GuestErrorKind::OutOfMemory(_))
        );
        if out_of_memory && warm.calls > 0 {
            drop(warm);
            warm = match self.fresh(&mut stats) {
                Ok(w) => w,
                Err(e) => return (Err(e), stats),
            };
            returned = warm.reconcile(module, env, request, &snapshot, &mut stats);
        }
        warm.calls += 1;
        let limits = warm.store.data().limits.clone();
        if returned.is_ok() {
            self.give_back(warm);
        }
        let result = module.finish_call(
            &self.name, returned, manifest, snapshot, &limits, &mut stats,
        );
        (result, stats)
    }
}
