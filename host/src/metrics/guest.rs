//! One guest's handle on the host's metric families: what the controller,
//! the actuator and the supervisor count for a guest. It never registers a
//! family (see the parent module).

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;

use super::*;

/// One guest's handles on the host's metric families, labelled once when the
/// guest starts. Cheap to clone; every clone counts into the same series.
///
/// Label names: the families controller-runtime and client-go define keep
/// their standard label (`controller` for `controller_runtime_*`, `name`
/// for `workqueue_*`); every `wasmctrl_*` family labels the guest `guest`.
#[derive(Clone)]
pub struct GuestMetrics {
    metrics: Arc<Metrics>,
    guest: String,
    reconcile_ok: Counter,
    reconcile_requeue: Counter,
    reconcile_error: Counter,
    reconcile_time: Histogram,
    applies: Counter,
    deletes: Counter,
    events: Counter,
    /// Every successful write of any kind (not exported: the labelled
    /// family is; this is its sum for this guest).
    all_writes: Counter,
    skipped: Counter,
    instantiate: Histogram,
    call: Histogram,
    resyncs: Counter,
}

impl std::fmt::Debug for GuestMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestMetrics")
            .field("guest", &self.guest)
            .finish_non_exhaustive()
    }
}

/// How one reconcile ended, for `controller_runtime_reconcile_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconcileResult {
    /// Done; nothing to come back for.
    Success,
    /// Done; the guest asked to be called again after a delay.
    RequeueAfter,
    /// Failed with this reason (a metric label: `trap`, `conflict`, ...).
    Error(&'static str),
}

/// A write the actuator made, for `wasmctrl_writes_total{verb}` and
/// `wasmctrl_writes_dropped_total{verb}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteVerb {
    /// A server-side apply (create or update).
    Apply,
    /// An update-only server-side apply, pinned to a uid.
    Update,
    /// A server-side apply to the status subresource.
    ApplyStatus,
    /// A delete.
    Delete,
    /// A finalizer added (by a plan or by the host).
    AddFinalizer,
    /// A finalizer removed.
    RemoveFinalizer,
    /// An event.
    Event,
    /// A sharded guest's bucket label set on an object (by the host).
    Label,
}

impl WriteVerb {
    fn label(self) -> &'static str {
        match self {
            WriteVerb::Apply => "apply",
            WriteVerb::Update => "update",
            WriteVerb::ApplyStatus => "apply_status",
            WriteVerb::Delete => "delete",
            WriteVerb::AddFinalizer => "add_finalizer",
            WriteVerb::RemoveFinalizer => "remove_finalizer",
            WriteVerb::Event => "event",
            WriteVerb::Label => "label",
        }
    }
}

impl GuestMetrics {
    /// The handle for `guest` on `metrics`' families.
    pub fn new(metrics: Arc<Metrics>, guest: &str) -> Self {
        let result = |r: &str| {
            metrics
                .reconcile_total
                .get_or_create(&ResultLabels {
                    controller: guest.to_string(),
                    result: r.to_string(),
                })
                .clone()
        };
        let write = |verb: WriteVerb| {
            metrics
                .writes
                .get_or_create(&WriteLabels {
                    guest: guest.to_string(),
                    verb: verb.label().to_string(),
                })
                .clone()
        };
        let g = GuestLabels {
            guest: guest.to_string(),
        };
        GuestMetrics {
            reconcile_ok: result("success"),
            reconcile_requeue: result("requeue_after"),
            reconcile_error: result("error"),
            reconcile_time: metrics
                .reconcile_time
                .get_or_create(&ControllerLabels {
                    controller: guest.to_string(),
                })
                .clone(),
            applies: write(WriteVerb::Apply),
            deletes: write(WriteVerb::Delete),
            events: write(WriteVerb::Event),
            all_writes: Counter::default(),
            skipped: metrics.writes_skipped.get_or_create(&g).clone(),
            instantiate: metrics.guest_instantiate.get_or_create(&g).clone(),
            call: metrics.guest_reconcile.get_or_create(&g).clone(),
            resyncs: metrics.resyncs.get_or_create(&g).clone(),
            guest: guest.to_string(),
            metrics: metrics.clone(),
        }
    }

    /// The host's families (for what is not per-guest: the queue's).
    pub fn families(&self) -> &Metrics {
        &self.metrics
    }

    /// Records one reconcile and how long it took.
    pub fn reconciled(&self, result: ReconcileResult, elapsed: Duration) {
        self.reconcile_time.observe(elapsed.as_secs_f64());
        match result {
            ReconcileResult::Success => self.reconcile_ok.inc(),
            ReconcileResult::RequeueAfter => self.reconcile_requeue.inc(),
            ReconcileResult::Error(reason) => {
                self.metrics
                    .reconcile_errors
                    .get_or_create(&ReasonLabels {
                        controller: self.guest.clone(),
                        reason: reason.to_string(),
                    })
                    .inc();
                self.reconcile_error.inc()
            }
        };
    }

    /// Records one guest call: instance creation and time inside the guest,
    /// and its failure reason if it failed.
    pub fn guest_call(&self, instantiate: Option<Duration>, call: Duration, failure: Option<&str>) {
        if let Some(instantiate) = instantiate {
            self.instantiate.observe(instantiate.as_secs_f64());
        }
        self.call.observe(call.as_secs_f64());
        if let Some(reason) = failure {
            self.metrics
                .guest_failures
                .get_or_create(&GuestReasonLabels {
                    guest: self.guest.clone(),
                    reason: reason.to_string(),
                })
                .inc();
        }
    }

    /// Counts `n` applications of policy cap `limit` (`min_requeue`, `log`).
    pub fn limited(&self, limit: &str, n: u64) {
        if n > 0 {
            self.metrics
                .guest_limited
                .get_or_create(&GuestLimitLabels {
                    guest: self.guest.clone(),
                    limit: limit.to_string(),
                })
                .inc_by(n);
        }
    }

    /// Records a write request that succeeded.
    pub fn wrote(&self, verb: WriteVerb) {
        self.all_writes.inc();
        match verb {
            WriteVerb::Apply => self.applies.inc(),
            WriteVerb::Delete => self.deletes.inc(),
            WriteVerb::Event => self.events.inc(),
            other => self
                .metrics
                .writes
                .get_or_create(&WriteLabels {
                    guest: self.guest.clone(),
                    verb: other.label().to_string(),
                })
                .inc(),
        };
    }

    /// Records a pinned write dropped because its object was gone or
    /// replaced (404, uid mismatch, a failed `test`): not an error.
    pub fn dropped_write(&self, verb: WriteVerb) {
        self.metrics
            .writes_dropped
            .get_or_create(&WriteLabels {
                guest: self.guest.clone(),
                verb: verb.label().to_string(),
            })
            .inc();
    }

    /// Counts an Event the guest planned and the host refused, by `reason`
    /// (`not_watched_or_written`, `scope`).
    pub fn refused_event(&self, reason: &str) {
        self.metrics
            .events_refused
            .get_or_create(&GuestReasonLabels {
                guest: self.guest.clone(),
                reason: reason.to_string(),
            })
            .inc();
    }

    /// Counts a plan refused because it writes an object `owner` owns.
    pub fn refused_write(&self, owner: &str) {
        self.metrics
            .writes_refused
            .get_or_create(&OwnerLabels {
                guest: self.guest.clone(),
                owner: owner.to_string(),
            })
            .inc();
    }

    /// Plans refused so far because `owner` owns an object they write.
    pub fn refused_writes(&self, owner: &str) -> u64 {
        self.metrics
            .writes_refused
            .get_or_create(&OwnerLabels {
                guest: self.guest.clone(),
                owner: owner.to_string(),
            })
            .get()
    }

    /// Records a quarantine starting (`true`) or over (`false`).
    pub fn quarantined(&self, started: bool) {
        let g = GuestLabels {
            guest: self.guest.clone(),
        };
        if started {
            self.metrics.guest_quarantines.get_or_create(&g).inc();
        }
        self.metrics
            .guest_quarantined
            .get_or_create(&g)
            .set(i64::from(started));
    }

    /// Quarantines started so far.
    pub fn quarantines(&self) -> u64 {
        self.metrics
            .guest_quarantines
            .get_or_create(&GuestLabels {
                guest: self.guest.clone(),
            })
            .get()
    }

    /// Events refused for `reason` so far.
    pub fn refused_events(&self, reason: &str) -> u64 {
        self.metrics
            .events_refused
            .get_or_create(&GuestReasonLabels {
                guest: self.guest.clone(),
                reason: reason.to_string(),
            })
            .get()
    }

    /// Writes of `verb` dropped so far (tests and the demo read it).
    pub fn dropped(&self, verb: WriteVerb) -> u64 {
        self.metrics
            .writes_dropped
            .get_or_create(&WriteLabels {
                guest: self.guest.clone(),
                verb: verb.label().to_string(),
            })
            .get()
    }

    /// Successful writes of `verb` so far.
    pub fn written(&self, verb: WriteVerb) -> u64 {
        self.metrics
            .writes
            .get_or_create(&WriteLabels {
                guest: self.guest.clone(),
                verb: verb.label().to_string(),
            })
            .get()
    }

    /// Records an apply skipped because the live object already matched.
    pub fn skipped_write(&self) {
        self.skipped.inc();
    }

    /// Records a periodic resync.
    pub fn resynced(&self) {
        self.resyncs.inc();
    }

    /// Marks `digest` (loaded from `file`) as this guest's module.
    pub fn loaded(&self, digest: &str, file: &str) {
        self.metrics
            .guest_info
            .get_or_create(&GuestInfoLabels {
                guest: self.guest.clone(),
                digest: digest.to_string(),
                file: file.to_string(),
            })
            .set(1);
    }

    /// Reconciles run, whatever their result.
    pub fn reconciles(&self) -> u64 {
        self.reconcile_ok.get() + self.reconcile_requeue.get() + self.reconcile_error.get()
    }

    /// Reconciles that failed (guest or actuator).
    pub fn errors(&self) -> u64 {
        self.reconcile_error.get()
    }

    /// Apply requests that succeeded.
    pub fn applies(&self) -> u64 {
        self.applies.get()
    }

    /// Delete requests that succeeded.
    pub fn deletes(&self) -> u64 {
        self.deletes.get()
    }

    /// Applies skipped as no-ops.
    pub fn skipped(&self) -> u64 {
        self.skipped.get()
    }

    /// Requests that changed the cluster, of every kind: applies, updates,
    /// status applies, deletes, finalizer patches and events.
    pub fn writes(&self) -> u64 {
        self.all_writes.get()
    }

    /// Periodic resyncs.
    pub fn resyncs(&self) -> u64 {
        self.resyncs.get()
    }

    fn manager(&self, manager: &str) -> ManagerLabels {
        ManagerLabels {
            guest: self.guest.clone(),
            manager: manager.to_string(),
        }
    }

    /// Records a write war with field manager `manager`.
    pub fn write_war(&self, manager: &str) {
        self.metrics
            .write_wars
            .get_or_create(&self.manager(manager))
            .inc();
    }

    /// Write wars declared against `manager` so far.
    pub fn write_wars(&self, manager: &str) -> u64 {
        self.metrics
            .write_wars
            .get_or_create(&self.manager(manager))
            .get()
    }

    /// Records a write not sent because of a write war's hold-back.
    pub fn held_back_write(&self) {
        self.held_back().inc();
    }

    fn held_back(&self) -> Counter {
        let g = GuestLabels {
            guest: self.guest.clone(),
        };
        self.metrics.writes_held_back.get_or_create(&g).clone()
    }

    /// Writes held back so far.
    pub fn held_back_writes(&self) -> u64 {
        self.held_back().get()
    }

    fn hot_loop_counter(&self) -> Counter {
        let g = GuestLabels {
            guest: self.guest.clone(),
        };
        self.metrics.hot_loops.get_or_create(&g).clone()
    }

    /// Records a hot loop declared on one of the guest's keys.
    pub fn hot_loop(&self) {
        self.hot_loop_counter().inc();
    }

    /// Hot loops declared so far.
    pub fn hot_loops(&self) -> u64 {
        self.hot_loop_counter().get()
    }
}
