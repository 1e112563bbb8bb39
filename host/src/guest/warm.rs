//! Instances of one guest kept between its reconciles: a call takes an
//! idle instance (or instantiates one), re-arms its deadline, fuel and
//! budgets as a fresh store's, and gives it back when the guest returned.
//! An instance that trapped is dropped; one grown past [`KEEP_MEMORY`] or
//! used [`MAX_CALLS`] times is retired. Creating and unmapping an instance
//! per call was a quarter of a per-object controller's CPU (BENCHMARKS.md).
//! It never changes what a call may do, only what it costs.
//!
//! [`WarmInstances::reconcile_here`] runs a call on the caller's thread
//! (a runtime worker) when a kept instance waits and the guest's recent
//! calls took under [`HERE_MEAN`] on average ([`Placement`]): it saves
//! two thread switches, and longer calls keep the blocking pool's
//! parallelism. There a call has a deadline of two epoch ticks; one
//! stopped there, or one that took longer than [`HERE_LONG`], sends this
//! guest's calls to the blocking pool for good. Calls are pure, so one
//! stopped early is run again from the start off the runtime.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use super::module::CallStats;
use super::*;

/// Idle instances kept at most (more than any controller's workers).
const MAX_IDLE: usize = 16;
/// Calls one instance serves before it is retired.
pub const MAX_CALLS: u32 = 10_000;
/// Linear memory an idle instance may keep; a larger one is retired.
pub const KEEP_MEMORY: usize = 16 << 20;
/// The mean call time under which a guest's calls run on the caller's
/// thread.
pub const HERE_MEAN: Duration = Duration::from_micros(250);
/// A call that took longer on the caller's thread sends the guest's
/// calls to the blocking pool for good.
pub const HERE_LONG: Duration = Duration::from_millis(10);
/// The deadline, in epoch ticks, of a call run on the caller's thread:
/// it is stopped between one and two ticks after it began.
const HERE_TICKS: u64 = 2;

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
    /// Where calls run (see the module's text).
    placement: Placement,
}

/// Where one guest's calls run: on the caller's thread while the mean of
/// its recent calls is under [`HERE_MEAN`] and none was stopped or took
/// longer than [`HERE_LONG`] there; on the blocking pool otherwise.
#[derive(Debug, Default)]
pub struct Placement {
    /// Mean call time in ns, each call weighing an eighth (0: no call yet).
    mean_ns: AtomicU64,
    /// A call on the caller's thread was stopped or ran long.
    off_for_good: AtomicBool,
}

impl Placement {
    /// Whether the next call may run on the caller's thread.
    pub fn here(&self) -> bool {
        !self.off_for_good.load(Ordering::Relaxed)
            && self.mean_ns.load(Ordering::Relaxed) < HERE_MEAN.as_nanos() as u64
    }

    /// Counts a call that ran to its end (on either side).
    pub fn record(&self, call: Duration) {
        let ns = u64::try_from(call.as_nanos()).unwrap_or(u64::MAX);
        let mean = self.mean_ns.load(Ordering::Relaxed);
        let next = if mean == 0 {
            ns.max(1)
        } else {
            // Two workers may race here: one update lost is harmless.
            mean - mean / 8 + ns / 8
        };
        self.mean_ns.store(next.max(1), Ordering::Relaxed);
    }

    /// Calls run on the blocking pool from now on; true the first time.
    pub fn off_for_good(&self) -> bool {
        !self.off_for_good.swap(true, Ordering::Relaxed)
    }
}

/// Where [`WarmInstances::reconcile_here`] left the call.
pub enum Here {
    /// It ran on the caller's thread: what [`WarmInstances::reconcile`]
    /// would have returned.
    Ran(Result<ValidatedPlan>, CallStats),
    /// Not run to its end here: run it with
    /// [`WarmInstances::reconcile_wit`] off the runtime.
    Off(Snapshot),
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
            placement: Placement::default(),
        }
    }

    /// Whether the next call may run on the caller's thread.
    pub fn runs_here(&self) -> bool {
        self.placement.here()
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
        self.reconcile_wit(manifest, env, request, snapshot::to_wit(snapshot))
    }

    /// [`Self::reconcile`] on a snapshot already in the contract's form.
    pub fn reconcile_wit(
        &self,
        manifest: &GuestManifest,
        env: &Environment,
        request: &Request,
        snapshot: Snapshot,
    ) -> (Result<ValidatedPlan>, CallStats) {
        let mut stats = CallStats::default();
        let module = &self.module;
        let mut warm = match self.take(&mut stats) {
            Ok(w) => w,
            Err(e) => return (Err(e), stats),
        };
        let mut returned = warm.reconcile(module, env, request, &snapshot, &mut stats);
        if out_of_memory(&returned) && warm.calls > 0 {
            drop(warm);
            warm = match self.fresh(&mut stats) {
                Ok(w) => w,
                Err(e) => return (Err(e), stats),
            };
            returned = warm.reconcile(module, env, request, &snapshot, &mut stats);
        }
        self.placement.record(stats.call);
        self.finish(warm, returned, manifest, snapshot, stats)
    }

    /// The call on the caller's thread, when an instance is kept and this
    /// guest's calls have been short (see the module's text); otherwise,
    /// or when it was stopped before its end, the snapshot back to run it
    /// off the runtime. Never instantiates.
    pub fn reconcile_here(
        &self,
        manifest: &GuestManifest,
        env: &Environment,
        request: &Request,
        snapshot: Snapshot,
    ) -> Here {
        // A deadline of at most two ticks is the whole deadline: nothing
        // to stop early.
        if !self.runs_here() || self.module.inner.shared.ticks_per_deadline <= HERE_TICKS {
            return Here::Off(snapshot);
        }
        let Some(mut warm) = crate::sync::lock(&self.idle).pop() else {
            return Here::Off(snapshot);
        };
        let mut stats = CallStats::default();
        if let Err(e) = self.module.arm(&mut warm.store) {
            return Here::Ran(Err(e), stats);
        }
        warm.store.set_epoch_deadline(HERE_TICKS);
        let returned = warm.reconcile(&self.module, env, request, &snapshot, &mut stats);
        let stopped = matches!(
            &returned,
            Err(e) if matches!(e.kind, GuestErrorKind::Deadline(_))
        );
        if stopped {
            // Run again from the start: what it printed so far is not
            // kept (lines it logged were logged).
            warm.store.data().output().reset();
            self.to_pool(format_args!(
                "stopped after {:?} on a runtime thread",
                stats.call
            ));
            return Here::Off(snapshot);
        }
        if out_of_memory(&returned) {
            // The pool's path runs it again on a fresh instance.
            return Here::Off(snapshot);
        }
        self.placement.record(stats.call);
        if stats.call > HERE_LONG {
            self.to_pool(format_args!(
                "took {:?} on a runtime thread (over {HERE_LONG:?})",
                stats.call
            ));
        }
        let (result, stats) = self.finish(warm, returned, manifest, snapshot, stats);
        Here::Ran(result, stats)
    }

    /// This guest's calls run on the blocking pool from now on.
    fn to_pool(&self, why: std::fmt::Arguments<'_>) {
        if self.placement.off_for_good() {
            tracing::info!(guest = %self.name, "a guest call {why}: this guest's calls run on the blocking pool from now on");
        }
    }

    /// Counts the call, keeps the instance when the guest returned, and
    /// validates what it returned.
    fn finish(
        &self,
        mut warm: Warm,
        returned: Result<std::result::Result<wit::Plan, wit::ReconcileError>>,
        manifest: &GuestManifest,
        snapshot: Snapshot,
        mut stats: CallStats,
    ) -> (Result<ValidatedPlan>, CallStats) {
        warm.calls += 1;
        let limits = warm.store.data().limits.clone();
        if returned.is_ok() {
            self.give_back(warm);
        }
        let result = self.module.finish_call(
            &self.name, returned, manifest, snapshot, &limits, &mut stats,
        );
        (result, stats)
    }
}

fn out_of_memory(returned: &Result<std::result::Result<wit::Plan, wit::ReconcileError>>) -> bool {
    matches!(returned, Err(e) if matches!(e.kind, GuestErrorKind::OutOfMemory(_)))
}
