//! Prometheus metrics: every family the host exports, registered once and
//! labelled by guest (so guests can come and go), each guest's handle on
//! them ([`GuestMetrics`]: the only counters the host keeps; tests and the
//! demo read the numbers Prometheus scrapes), and the `/metrics`,
//! `/healthz` and `/readyz` endpoints. It never decides what is healthy:
//! callers pass a readiness probe.
//!
//! # Layout
//! - `mod.rs`: [`Metrics`], the families and their registration.
//! - `labels`: the label sets.
//! - `guest`: [`GuestMetrics`], [`ReconcileResult`], [`WriteVerb`].
//! - `http`: the endpoint servers.

mod guest;
mod http;
mod labels;

pub use guest::{GuestMetrics, ReconcileResult, WriteVerb};
pub use http::{
    serve_health, serve_health_with_detail, serve_health_with_reports, serve_metrics, Detail,
    Endpoint, Guests, Health, Readiness, Reports,
};
pub use labels::*;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::workqueue::WorkqueueMetrics;

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
    /// manager kept taking back (see `guard`: write wars).
    pub write_wars: Family<ManagerLabels, Counter>,
    /// `wasmctrl_writes_held_back_total{guest}`: writes not sent during a
    /// write war's hold-back.
    pub writes_held_back: Family<GuestLabels, Counter>,
    /// `wasmctrl_guest_hot_loops_total{guest}`: keys found rewriting their
    /// own object on every echo of their previous write (see
    /// `guard`: hot loops).
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
    /// the API server does not serve (see [`crate::supervisor::waiting`]), else 0.
    pub guest_waiting: Family<GuestLabels, Gauge>,
    /// `wasmctrl_shadow_reconciles_total{guest,outcome}`: keys a shadow
    /// compared with the active guest (see [`crate::shadow`]).
    pub shadow_reconciles: Family<ShadowLabels, Counter>,
    /// `wasmctrl_guest_leader{guest}`: with per-guest leadership, 1 while
    /// this replica holds the guest's Lease and may run it, else 0.
    pub guest_leader: Family<GuestLabels, Gauge>,
    /// `wasmctrl_guest_lease_handovers_total{guest,reason}`: with per-guest
    /// leadership, this replica's changes of a guest's Lease: `acquired`,
    /// `released` (given up: surplus, SIGTERM, guest gone), `lost` (renew
    /// deadline passed or taken).
    pub guest_handovers: Family<GuestReasonLabels, Counter>,
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
            shadow_reconciles: Family::default(),
            guest_leader: Family::default(),
            guest_handovers: Family::default(),
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
            "Time to create a guest instance, for the calls that created one (a controller's reconciles reuse its instances)",
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
        registry.register(
            "wasmctrl_shadow_reconciles",
            "Keys a shadow guest was compared on, by outcome (same, differs, error, skipped)",
            m.shadow_reconciles.clone(),
        );
        registry.register(
            "wasmctrl_guest_leader",
            "With per-guest leadership: 1 while this replica holds the guest's Lease, else 0",
            m.guest_leader.clone(),
        );
        registry.register(
            "wasmctrl_guest_lease_handovers",
            "With per-guest leadership: this replica's changes of a guest's Lease (acquired, released, lost)",
            m.guest_handovers.clone(),
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

/// `text` as a label value: without the characters the Prometheus text
/// format would need escaped (`"`, `\`, newlines), which prometheus-client
/// writes as they are.
pub fn label_value(text: &str) -> String {
    text.chars()
        .filter(|c| !matches!(c, '"' | '\\' | '\n'))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

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
        m.rest_requests
            .get_or_create(&RequestLabels {
                code: "200".into(),
                method: "PATCH".into(),
                host: "127.0.0.1:6443".into(),
            })
            .inc();
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
        g.guest_call(Some(Duration::ZERO), Duration::ZERO, Some("trap"));
        // A call on a reused instance created none.
        g.guest_call(None, Duration::ZERO, None);
        let text = m.encode();
        for line in [
            "controller_runtime_reconcile_total{controller=\"gpu\",result=\"error\"} 1",
            "controller_runtime_reconcile_errors_total{controller=\"gpu\",reason=\"conflict\"} 1",
            "wasmctrl_writes_total{guest=\"gpu\",verb=\"apply\"} 1",
            "wasmctrl_writes_skipped_total{guest=\"gpu\"} 1",
            "wasmctrl_guest_failures_total{guest=\"gpu\",reason=\"trap\"} 1",
            "wasmctrl_guest_instantiate_seconds_count{guest=\"gpu\"} 1",
            "wasmctrl_guest_reconcile_seconds_count{guest=\"gpu\"} 2",
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
