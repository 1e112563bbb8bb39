//! Prometheus metrics and the health/metrics HTTP endpoints.
//!
//! Owns every metric family the host exports (registered once, labelled by
//! guest, so guests can come and go), each guest's [`GuestMetrics`] handle
//! on them (the only counters the host keeps: tests and the demo read the
//! same numbers Prometheus scrapes), and the two small HTTP servers
//! controller-runtime managers also run: `/metrics` on the metrics address,
//! `/healthz` and `/readyz` on the health address. It never decides what is
//! healthy: callers pass a readiness probe.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::workqueue::WorkqueueMetrics;

/// `{controller}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ControllerLabels {
    /// The guest name.
    pub controller: String,
}

/// `{controller, result}` (`success`, `error`, `requeue_after`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ResultLabels {
    /// The guest name.
    pub controller: String,
    /// The outcome.
    pub result: String,
}

/// `{controller, reason}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ReasonLabels {
    /// The guest name.
    pub controller: String,
    /// Error label (`trap`, `deadline`, `memory`, `conflict`, ...).
    pub reason: String,
}

/// `{resource, reason}` of a failed list or watch.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct WatchFailureLabels {
    /// The informer, e.g. `pods in namespace ml` (through [`label_value`]).
    pub resource: String,
    /// See [`crate::failure::watch_failure_reason`].
    pub reason: String,
}

/// `{guest}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct GuestLabels {
    /// The guest name.
    pub guest: String,
}

/// `{guest, reason}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct GuestReasonLabels {
    /// The guest name.
    pub guest: String,
    /// Failure reason.
    pub reason: String,
}

/// `{guest, digest, file}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct GuestInfoLabels {
    /// The guest name.
    pub guest: String,
    /// SHA-256 of the module.
    pub digest: String,
    /// The file it was loaded from.
    pub file: String,
}

/// `{guest, verb}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct WriteLabels {
    /// The guest name.
    pub guest: String,
    /// `apply`, `delete` or `event`.
    pub verb: String,
}

/// `{guest, result}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct GuestResultLabels {
    /// The guest name.
    pub guest: String,
    /// The outcome.
    pub result: String,
}

/// `{guest, manager}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ManagerLabels {
    /// The guest name.
    pub guest: String,
    /// The other field manager.
    pub manager: String,
}

/// `{name}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct NameLabels {
    /// The lease name.
    pub name: String,
}

/// `{code, method, host}` as client-go labels `rest_client_requests_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RequestLabels {
    /// HTTP status code, or `<error>` when there was no response.
    pub code: String,
    /// HTTP method.
    pub method: String,
    /// API server host.
    pub host: String,
}

/// `{verb, host}` as client-go labels `rest_client_request_duration_seconds`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct LatencyLabels {
    /// HTTP method.
    pub verb: String,
    /// API server host.
    pub host: String,
}

type Hist<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 1 ms .. ~16 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

fn fast_histogram() -> Histogram {
    // 10 µs .. ~5 s: guest calls and instantiation.
    Histogram::new(exponential_buckets(0.000_01, 2.5, 15))
}

/// Every metric the host exports.
pub struct Metrics {
    registry: Registry,
    /// Workqueue metrics (client-go names).
    pub workqueue: WorkqueueMetrics,
    /// `controller_runtime_reconcile_total{controller,result}`.
    pub reconcile_total: Family<ResultLabels, Counter>,
    /// `controller_runtime_reconcile_errors_total{controller,reason}`.
    pub reconcile_errors: Family<ReasonLabels, Counter>,
    /// `controller_runtime_reconcile_time_seconds{controller}`.
    pub reconcile_time: Hist<ControllerLabels>,
    /// `leader_election_master_status{name}`.
    pub leader: Family<NameLabels, Gauge>,
    /// `rest_client_requests_total{code,method,host}`.
    pub rest_requests: Family<RequestLabels, Counter>,
    /// `rest_client_request_duration_seconds{verb,host}`.
    pub rest_latency: Hist<LatencyLabels>,
    /// `rest_client_rate_limiter_duration_seconds{verb,host}`: one
    /// observation per request attempt that passed the client-side limiter.
    pub rest_rate_limiter: Hist<LatencyLabels>,
    /// `wasmctrl_watch_failures_total{resource,reason}`: failed lists and
    /// watches of the informers, by reason.
    pub watch_failures: Family<WatchFailureLabels, Counter>,
    /// `wasmctrl_writes_total{guest,verb}`.
    pub writes: Family<WriteLabels, Counter>,
    /// `wasmctrl_writes_skipped_total{guest}`: applies skipped as no-ops.
    pub writes_skipped: Family<GuestLabels, Counter>,
    /// `wasmctrl_writes_dropped_total{guest,verb}`: pinned writes whose
    /// object was gone or replaced.
    pub writes_dropped: Family<WriteLabels, Counter>,
    /// `wasmctrl_guest_instantiate_seconds{guest}`.
    pub guest_instantiate: Hist<GuestLabels>,
    /// `wasmctrl_guest_reconcile_seconds{guest}`: time inside the guest.
    pub guest_reconcile: Hist<GuestLabels>,
    /// `wasmctrl_guest_failures_total{guest,reason}`: traps, deadline and
    /// memory hits, malformed plans, forbidden writes.
    pub guest_failures: Family<GuestReasonLabels, Counter>,
    /// `wasmctrl_guest_info{guest,digest,file}` = 1 for each loaded module.
    pub guest_info: Family<GuestInfoLabels, Gauge>,
    /// `wasmctrl_guest_swaps_total{guest,result}`.
    pub guest_swaps: Family<GuestResultLabels, Counter>,
    /// `wasmctrl_resyncs_total{guest}`: periodic re-enqueues of every key.
    pub resyncs: Family<GuestLabels, Counter>,
    /// `wasmctrl_write_wars_total{guest,manager}`: outputs another field
    /// manager kept taking back (see `actuator::contest`).
    pub write_wars: Family<ManagerLabels, Counter>,
    /// `wasmctrl_writes_held_back_total{guest}`: writes not sent during a
    /// write war's hold-back.
    pub writes_held_back: Family<GuestLabels, Counter>,
    /// `wasmctrl_guest_hot_loops_total{guest}`: keys found rewriting their
    /// own object on every echo of their previous write (see
    /// `actuator::hotloop`).
    pub hot_loops: Family<GuestLabels, Counter>,
    /// `wasmctrl_guest_limited_total{guest,limit}`: a policy cap applied
    /// without failing the call (`min_requeue` raised a requeue delay,
    /// `log` truncated or dropped a message).
    pub guest_limited: Family<GuestLimitLabels, Counter>,
    /// `wasmctrl_guest_events_refused_total{guest,reason}`: Events a plan
    /// asked for that the host did not record (`not_watched_or_written`:
    /// about an object the guest neither watches nor may write; `scope`: a
    /// namespace that disagrees with the kind's scope).
    pub events_refused: Family<GuestReasonLabels, Counter>,
    /// `wasmctrl_guests_refused_total{guest,reason}`: guests refused at
    /// load (no version of them runs) while the host runs the others.
    pub guests_refused: Family<GuestReasonLabels, Counter>,
    /// `wasmctrl_writes_refused_total{guest,owner}`: plans refused because
    /// they write an object another guest of this host owns (see
    /// [`crate::claims`]).
    pub writes_refused: Family<OwnerLabels, Counter>,
    /// `wasmctrl_guest_quarantines_total{guest}`: quarantines started (see
    /// [`crate::quarantine`]).
    pub guest_quarantines: Family<GuestLabels, Counter>,
    /// `wasmctrl_guest_quarantined{guest}`: 1 while the guest is
    /// quarantined (not called), else 0.
    pub guest_quarantined: Family<GuestLabels, Gauge>,
    /// `wasmctrl_guest_waiting{guest}`: 1 while the guest waits for a kind
    /// the API server does not serve (see [`crate::waiting`]), else 0.
    pub guest_waiting: Family<GuestLabels, Gauge>,
}

/// `{guest, owner}`: the guest refused and the guest owning the object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct OwnerLabels {
    /// The guest whose plan was refused.
    pub guest: String,
    /// The guest that owns the object.
    pub owner: String,
}

/// Labels `{guest, limit}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GuestLimitLabels {
    /// Guest name.
    pub guest: String,
    /// `min_requeue` or `log`.
    pub limit: String,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Creates and registers every family.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let workqueue = WorkqueueMetrics::new(&mut registry);
        let m = Metrics {
            workqueue,
            reconcile_total: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_time: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            leader: Family::default(),
            rest_requests: Family::default(),
            rest_latency: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            rest_rate_limiter: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            watch_failures: Family::default(),
            writes: Family::default(),
            writes_skipped: Family::default(),
            writes_dropped: Family::default(),
            guest_instantiate: Family::new_with_constructor(fast_histogram as fn() -> Histogram),
            guest_reconcile: Family::new_with_constructor(fast_histogram as fn() -> Histogram),
            guest_failures: Family::default(),
            guest_info: Family::default(),
            guest_swaps: Family::default(),
            resyncs: Family::default(),
            write_wars: Family::default(),
            writes_held_back: Family::default(),
            hot_loops: Family::default(),
            guest_limited: Family::default(),
            events_refused: Family::default(),
            guests_refused: Family::default(),
            writes_refused: Family::default(),
            guest_quarantines: Family::default(),
            guest_quarantined: Family::default(),
            guest_waiting: Family::default(),
            registry: Registry::default(),
        };
        // prometheus-client appends `_total` to counters.
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            m.reconcile_total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            m.reconcile_errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            m.reconcile_time.clone(),
        );
        registry.register(
            "leader_election_master_status",
            "1 if this process holds the lease, 0 otherwise",
            m.leader.clone(),
        );
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host",
            m.rest_requests.clone(),
        );
        registry.register(
            "rest_client_request_duration_seconds",
            "Request latency in seconds, broken down by verb and host",
            m.rest_latency.clone(),
        );
        registry.register(
            "rest_client_rate_limiter_duration_seconds",
            "Client side rate limiter latency in seconds, broken down by verb and host",
            m.rest_rate_limiter.clone(),
        );
        registry.register(
            "wasmctrl_watch_failures",
            "Failed lists and watches of the host's informers, by reason (forbidden, server, throttled, tls, transport, expired, other)",
            m.watch_failures.clone(),
        );
        registry.register(
            "wasmctrl_writes",
            "API writes made on behalf of a guest, by verb",
            m.writes.clone(),
        );
        registry.register(
            "wasmctrl_writes_skipped",
            "Applies skipped because the live object already matched (no-op writes)",
            m.writes_skipped.clone(),
        );
        registry.register(
            "wasmctrl_writes_dropped",
            "Pinned writes dropped because their object was gone or replaced (404, uid mismatch, failed test); the key re-reconciles",
            m.writes_dropped.clone(),
        );
        registry.register(
            "wasmctrl_guest_instantiate_seconds",
            "Time to create a fresh guest instance for one call",
            m.guest_instantiate.clone(),
        );
        registry.register(
            "wasmctrl_guest_reconcile_seconds",
            "Time spent inside the guest's reconcile (snapshot copy included)",
            m.guest_reconcile.clone(),
        );
        registry.register(
            "wasmctrl_guest_failures",
            "Guest failures by reason (trap, deadline, memory, fuel, malformed_plan, forbidden_write, ...)",
            m.guest_failures.clone(),
        );
        registry.register(
            "wasmctrl_guest_info",
            "Loaded guest modules (value 1)",
            m.guest_info.clone(),
        );
        registry.register(
            "wasmctrl_guest_swaps",
            "Guest module swaps by result",
            m.guest_swaps.clone(),
        );
        registry.register(
            "wasmctrl_resyncs",
            "Periodic resyncs (every key re-enqueued) per guest",
            m.resyncs.clone(),
        );
        registry.register(
            "wasmctrl_write_wars",
            "Write wars declared: an output another field manager kept taking back, by that manager",
            m.write_wars.clone(),
        );
        registry.register(
            "wasmctrl_writes_held_back",
            "Writes not sent because their object was in a write war's hold-back",
            m.writes_held_back.clone(),
        );
        registry.register(
            "wasmctrl_guest_hot_loops",
            "Hot loops declared: a key whose reconciles, woken by the echo of its own write, kept writing again; the key is held back",
            m.hot_loops.clone(),
        );
        registry.register(
            "wasmctrl_guest_limited",
            "Policy caps applied without failing the call, by limit (min_requeue, log)",
            m.guest_limited.clone(),
        );
        registry.register(
            "wasmctrl_guest_events_refused",
            "Events a guest planned that the host refused to record, by reason (not_watched_or_written, scope)",
            m.events_refused.clone(),
        );
        registry.register(
            "wasmctrl_guests_refused",
            "Guests refused at load while the host runs the others, by reason (policy, trap, deadline, memory, write_overlap, permissions, ...)",
            m.guests_refused.clone(),
        );
        registry.register(
            "wasmctrl_writes_refused",
            "Plans refused because they write an object another guest of this host owns, by that guest",
            m.writes_refused.clone(),
        );
        registry.register(
            "wasmctrl_guest_quarantines",
            "Quarantines of a guest whose calls kept running out of time or trapping",
            m.guest_quarantines.clone(),
        );
        registry.register(
            "wasmctrl_guest_quarantined",
            "1 while a guest is quarantined (not called), else 0",
            m.guest_quarantined.clone(),
        );
        registry.register(
            "wasmctrl_guest_waiting",
            "1 while a guest waits for a kind the API server does not serve (a CRD not installed), else 0",
            m.guest_waiting.clone(),
        );
        Metrics { registry, ..m }
    }

    /// The registry in Prometheus text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.push_str("# encoding failed\n");
        }
        out
    }
}

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
    pub fn guest_call(&self, instantiate: Duration, call: Duration, failure: Option<&str>) {
        self.instantiate.observe(instantiate.as_secs_f64());
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

/// Readiness probe: Ok when ready, Err(why not) otherwise.
pub type Readiness<E> = Arc<dyn Fn() -> Result<(), E> + Send + Sync>;

async fn metrics_handler(State(m): State<Arc<Metrics>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        m.encode(),
    )
}

async fn healthz() -> impl IntoResponse {
    // Answering at all proves the runtime is responsive.
    (StatusCode::OK, "ok\n")
}

/// Lines `/readyz` adds to its answer, ready or not (guests refused at
/// load: the host runs without them).
pub type Detail = Arc<dyn Fn() -> Vec<String> + Send + Sync>;

async fn readyz<E: std::fmt::Display>(
    State((ready, detail)): State<(Readiness<E>, Detail)>,
) -> impl IntoResponse {
    let (code, mut body) = match ready() {
        Ok(()) => (StatusCode::OK, "ok\n".to_string()),
        Err(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        ),
    };
    for line in detail() {
        body.push_str(&line);
        body.push('\n');
    }
    (code, body)
}

/// A bound endpoint server.
#[derive(Debug)]
pub struct Endpoint {
    /// The address actually bound (useful with port 0).
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(addr: SocketAddr, app: Router) -> std::io::Result<Endpoint> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(%addr, "endpoint server stopped: {e}");
        }
    });
    Ok(Endpoint { addr, task })
}

/// Serves `/metrics` on `addr`.
pub async fn serve_metrics(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<Endpoint> {
    serve(
        addr,
        Router::new()
            .route("/metrics", get(metrics_handler))
            .with_state(metrics),
    )
    .await
}

/// Serves `/healthz` and `/readyz` on `addr`.
pub async fn serve_health<E: std::fmt::Display + 'static>(
    addr: SocketAddr,
    ready: Readiness<E>,
) -> std::io::Result<Endpoint> {
    serve_health_with_detail(addr, ready, Arc::new(Vec::new)).await
}

/// Serves `/healthz` and `/readyz` on `addr`; `/readyz` adds the lines
/// `detail` gives to its answer.
pub async fn serve_health_with_detail<E: std::fmt::Display + 'static>(
    addr: SocketAddr,
    ready: Readiness<E>,
    detail: Detail,
) -> std::io::Result<Endpoint> {
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/livez", get(healthz))
        .route("/readyz", get(readyz))
        .with_state((ready, detail));
    serve(addr, app).await
}

/// Records one API request in `rest_client_*`.
pub fn record_request(m: &Metrics, method: &str, host: &str, code: Option<u16>, elapsed: Duration) {
    m.rest_requests
        .get_or_create(&RequestLabels {
            code: code.map_or_else(|| "<error>".to_string(), |c| c.to_string()),
            method: method.to_string(),
            host: host.to_string(),
        })
        .inc();
    m.rest_latency
        .get_or_create(&LatencyLabels {
            verb: method.to_string(),
            host: host.to_string(),
        })
        .observe(elapsed.as_secs_f64());
}

/// `text` as a label value: without the characters the Prometheus text
/// format would need escaped (`"`, `\`, newlines), which prometheus-client
/// writes as they are.
pub fn label_value(text: &str) -> String {
    text.chars()
        .filter(|c| !matches!(c, '"' | '\\' | '\n'))
        .collect()
}

/// Records one request's wait for a client-side rate-limiter token.
pub fn record_rate_limiter_wait(m: &Metrics, method: &str, host: &str, waited: Duration) {
    m.rest_rate_limiter
        .get_or_create(&LatencyLabels {
            verb: method.to_string(),
            host: host.to_string(),
        })
        .observe(waited.as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposes_the_controller_runtime_and_client_go_names() {
        let m = Metrics::new();
        let c = ControllerLabels {
            controller: "g".into(),
        };
        m.reconcile_total
            .get_or_create(&ResultLabels {
                controller: "g".into(),
                result: "success".into(),
            })
            .inc();
        m.reconcile_time.get_or_create(&c).observe(0.01);
        m.leader
            .get_or_create(&NameLabels { name: "l".into() })
            .set(1);
        record_request(
            &m,
            "PATCH",
            "127.0.0.1:6443",
            Some(200),
            Duration::from_millis(3),
        );
        let text = m.encode();
        for line in [
            "controller_runtime_reconcile_total{controller=\"g\",result=\"success\"} 1",
            "leader_election_master_status{name=\"l\"} 1",
            "rest_client_requests_total{code=\"200\",method=\"PATCH\",host=\"127.0.0.1:6443\"} 1",
            "controller_runtime_reconcile_time_seconds_count{controller=\"g\"} 1",
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
        assert!(text.contains("# TYPE workqueue_depth gauge"), "{text}");
    }

    #[test]
    fn label_values_carry_no_characters_the_text_format_must_escape() {
        assert_eq!(
            label_value("pods fields \"spec.nodeName!=\"\n\\"),
            "pods fields spec.nodeName!="
        );
    }

    #[test]
    fn a_guest_handle_counts_into_the_scraped_series_with_one_label_per_family() {
        let m = Arc::new(Metrics::new());
        let g = GuestMetrics::new(m.clone(), "gpu");
        g.reconciled(ReconcileResult::Error("conflict"), Duration::from_millis(2));
        g.reconciled(ReconcileResult::Success, Duration::from_millis(1));
        g.wrote(WriteVerb::Apply);
        g.skipped_write();
        g.guest_call(Duration::ZERO, Duration::ZERO, Some("trap"));
        let text = m.encode();
        for line in [
            "controller_runtime_reconcile_total{controller=\"gpu\",result=\"error\"} 1",
            "controller_runtime_reconcile_errors_total{controller=\"gpu\",reason=\"conflict\"} 1",
            "wasmctrl_writes_total{guest=\"gpu\",verb=\"apply\"} 1",
            "wasmctrl_writes_skipped_total{guest=\"gpu\"} 1",
            "wasmctrl_guest_failures_total{guest=\"gpu\",reason=\"trap\"} 1",
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
        assert_eq!(
            (g.reconciles(), g.errors(), g.applies(), g.writes()),
            (2, 1, 1, 1)
        );
        // Every write kind counts in writes(), not only applies.
        g.wrote(WriteVerb::ApplyStatus);
        g.wrote(WriteVerb::RemoveFinalizer);
        assert_eq!((g.applies(), g.writes()), (1, 3));
    }
}
