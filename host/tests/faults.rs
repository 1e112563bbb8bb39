//! The host against API-server faults after it has started: throttling
//! and unavailability answered by retries that pass the host's limiter
//! and metrics, watches that fail and recover, and writes that were
//! refused for a long time (see the book, docs/src/operating/what-happens-when.md).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kube::Api;
use serde_json::json;
use wasmctrl::client::ClientLimits;
use wasmctrl::controller::ControllerConfig;
use wasmctrl::informer::health::WatchHealthConfig;
use wasmctrl::informer::{InformerKey, InformerRegistry, SyncState};
use wasmctrl::metrics::{serve_health, Metrics};
use wasmctrl::projection::FieldPath;
use wasmctrl::workqueue::DEFAULT_PROBE_INTERVAL;
use wasmctrl_apiserver::{ApiServerConfig, FailRequests};

/// A client built like the binary's, recording into `metrics`.
async fn host_client(
    server: &wasmctrl_apiserver::RunningApiServer,
    limits: ClientLimits,
    metrics: &Arc<Metrics>,
) -> kube::Client {
    let config = server
        .kube_config_for_token(server.admin_token())
        .await
        .unwrap();
    wasmctrl::client::build(config, limits, Some(metrics.clone())).unwrap()
}

fn count(metrics: &Metrics, name: &str, labels: &[&str]) -> f64 {
    prom::metric(&metrics.encode(), name, labels)
}

/// kube retries 429 and 503 by itself; those retries must pass the host's
/// rate limiter and show in `rest_client_requests_total`, one sample per
/// attempt, not only the final answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_retried_attempt_passes_the_limiter_and_is_counted() {
    let (server, admin) = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(admin, HOST_NS);
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "probe", "namespace": HOST_NS}
    }))
    .unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();

    let metrics = Arc::new(Metrics::new());
    let client = host_client(&server, ClientLimits::default(), &metrics).await;
    let faults = server.faults();
    faults.fail(
        FailRequests::new(429, 2)
            .verb("get")
            .resource("configmaps")
            .retry_after(0),
    );
    faults.fail(
        FailRequests::new(503, 1)
            .verb("get")
            .resource("configmaps")
            .retry_after(0),
    );
    let api: Api<ConfigMap> = Api::namespaced(client, HOST_NS);
    let got = api.get("probe").await.expect("retried until it succeeds");
    assert_eq!(got.metadata.name.as_deref(), Some("probe"));
    assert_eq!(faults.injected_failures(), 3, "every failure was served");

    let get = "method=\"GET\"";
    assert_eq!(
        count(
            &metrics,
            "rest_client_requests_total",
            &[get, "code=\"429\""]
        ),
        2.0,
        "{}",
        metrics.encode()
    );
    assert_eq!(
        count(
            &metrics,
            "rest_client_requests_total",
            &[get, "code=\"503\""]
        ),
        1.0
    );
    assert_eq!(
        count(
            &metrics,
            "rest_client_requests_total",
            &[get, "code=\"200\""]
        ),
        1.0
    );
    assert_eq!(
        count(
            &metrics,
            "rest_client_rate_limiter_duration_seconds_count",
            &["verb=\"GET\""]
        ),
        4.0,
        "the limiter was consulted once per attempt: {}",
        metrics.encode()
    );
}

fn watch_health(unhealthy_after: u64, deadline: u64) -> WatchHealthConfig {
    WatchHealthConfig::default()
        .unhealthy_after(Duration::from_secs(unhealthy_after))
        .deadline(Duration::from_secs(deadline))
}

fn host_config_with(health: WatchHealthConfig) -> wasmctrl::supervisor::SupervisorConfig {
    wasmctrl::supervisor::SupervisorConfig {
        watch_health: health,
        ..host_config(ControllerConfig::default())
    }
}

/// A 403 on a re-watch, after the caches synced and a watch worked, is an
/// outage (an authorizer or RBAC rollout), not a configuration error: the
/// host keeps serving, says it is not ready once the watch has failed for
/// `--unhealthy-watch-seconds`, naming the resource and the refusal, and is
/// ready and following the server again once the API answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_refused_after_sync_is_retried_and_readiness_follows_it() {
    let (server, client) = server().await;
    pod("a").on("n1").requesting("1").create(&client).await;
    let host = run_host(&client, host_config_with(watch_health(1, 600)), None).await;
    let ready = host.host.clone();
    let health = serve_health(
        "127.0.0.1:0".parse().unwrap(),
        Arc::new(move || ready.readiness()),
    )
    .await
    .unwrap();
    summary_becomes(&client, &[("n1", "1")]).await;
    eventually("ready", || async {
        http_status(health.addr, "/readyz").await == Some(200)
    })
    .await;

    let faults = server.faults();
    faults.fail(
        FailRequests::new(403, 1_000_000)
            .verb("watch")
            .resource("pods"),
    );
    faults.drop_watches();
    eventually("/readyz 503, naming the refused pods watch", || async {
        http_get(health.addr, "/readyz")
            .await
            .is_some_and(|(code, body)| {
                code == 503
                    && body.contains("guest gpu-summary: no working watch of pods")
                    && body.contains("403")
            })
    })
    .await;
    assert!(
        !host.is_finished(),
        "a refused re-watch must not end the host"
    );
    let metrics = host.metrics.clone().unwrap();
    assert!(
        count(
            &metrics,
            "wasmctrl_watch_failures_total",
            &[
                "resource=\"pods fields spec.nodeName!=",
                "reason=\"forbidden\""
            ]
        ) >= 1.0,
        "{}",
        metrics.encode()
    );

    faults.clear();
    eventually("ready again", || async {
        http_status(health.addr, "/readyz").await == Some(200)
    })
    .await;
    pod("b").on("n2").requesting("2").create(&client).await;
    summary_becomes(&client, &[("n1", "1"), ("n2", "2")]).await;
    assert!(!host.is_finished());
    host.stop().await.unwrap();
}

/// An API server that stops listening for a while (connections refused):
/// the host keeps its cache, is not ready while no watch works, and
/// follows the server again once it listens, without exiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_api_server_makes_the_host_unready_until_it_is_back() {
    let (server, client) = server().await;
    pod("a").on("n1").requesting("1").create(&client).await;
    let host = run_host(&client, host_config_with(watch_health(1, 600)), None).await;
    summary_becomes(&client, &[("n1", "1")]).await;
    eventually("ready", || async { host.host.readiness().is_ok() }).await;

    server.stop_listener().await.unwrap();
    eventually("not ready, naming the failed connection", || async {
        host.host
            .readiness()
            .err()
            .is_some_and(|e| e.why.contains("pods") && e.why.contains("Connect"))
    })
    .await;
    assert!(!host.is_finished(), "an outage must not end the host");

    server.restart_listener().await.unwrap();
    eventually("ready again", || async { host.host.readiness().is_ok() }).await;
    pod("b").on("n2").requesting("2").create(&client).await;
    summary_becomes(&client, &[("n1", "1"), ("n2", "2")]).await;
    host.stop().await.unwrap();
}

/// Past `--watch-failure-deadline-seconds` without a working watch the
/// host ends with an error naming the resource and the last failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_failing_past_its_deadline_ends_the_host_naming_resource_and_error() {
    let (server, client) = server().await;
    pod("a").on("n1").requesting("1").create(&client).await;
    let host = run_host(&client, host_config_with(watch_health(1, 3)), None).await;
    summary_becomes(&client, &[("n1", "1")]).await;
    pod_watches_down(&server.faults()).await;
    let err = bounded("the host ends after the deadline", CONVERGE, host.join())
        .await
        .expect_err("a host without a working watch past its deadline fails")
        .to_string();
    assert!(
        err.contains("pods") && err.contains("no working watch for 3 s") && err.contains("500"),
        "{err}"
    );
}

/// An API server replaced at the same address with a new CA: the host's
/// connections fail the TLS handshake, and the informer's health says so
/// in words, not as kube's bare `client error (Connect)`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_api_server_is_named_as_an_untrusted_certificate() {
    let (old, client) = server().await;
    let metrics = Arc::new(Metrics::new());
    let registry = InformerRegistry::new(client)
        .with_health(watch_health(0, 600))
        .with_metrics(metrics.clone());
    let informer = registry.acquire(&pods(), &[FieldPath::parse("spec.nodeName").unwrap()], &[]);
    informer.wait_synced().await.unwrap();
    eventually("a watch is established", || async {
        informer.health().ever_established()
    })
    .await;
    let addr = old.addr();
    old.stop_listener().await.unwrap();
    drop(old);
    let _new = wasmctrl_apiserver::ApiServer::start(ApiServerConfig::default().listen(addr))
        .await
        .unwrap();
    eventually("the informer names the untrusted certificate", || async {
        informer.unready().is_some_and(|why| {
            why.contains("TLS: the API server's certificate is not trusted by the configured CA")
        })
    })
    .await;
    eprintln!("{}", informer.unready().unwrap());
    assert!(
        count(
            &metrics,
            "wasmctrl_watch_failures_total",
            &["reason=\"tls\""]
        ) >= 1.0,
        "{}",
        metrics.encode()
    );
    assert_eq!(
        informer.state(),
        SyncState::Synced,
        "still serving its cache"
    );
}

fn pods() -> InformerKey {
    InformerKey {
        group: String::new(),
        version: "v1".into(),
        kind: "Pod".into(),
        plural: "pods".into(),
        namespace: Some(PODS_NS.into()),
        label_selector: None,
        field_selector: None,
    }
}

/// Writes refused long enough that the key's backoff passes 30 s (today's
/// code would retry it next after that long, up to 1000 s): once the API
/// accepts writes again, the key converges within about one probe interval
/// (the probe key is retried at least that often, see `workqueue`), well
/// before its backed-off retry time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_refused_for_long_converge_within_a_probe_interval_of_recovery() {
    let (server, client) = server().await;
    pod("a").on("n1").requesting("1").create(&client).await;
    let host = run_host(&client, host_config(ControllerConfig::default()), None).await;
    summary_becomes(&client, &[("n1", "1")]).await;

    let faults = server.faults();
    faults.deny_verb("patch");
    pod("b").on("n2").requesting("2").create(&client).await;
    let queue = host.controller().queue().clone();
    // Today's code takes some 40 s to get there (5 ms doubling); the
    // probe, retried every interval, gets there in about 12 s.
    bounded(
        "the refused key's backoff passes 30 s",
        Duration::from_secs(120),
        async {
            while queue.longest_backoff() < Duration::from_secs(30) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        },
    )
    .await;
    let backoff = queue.longest_backoff();
    assert_eq!(
        summary(&client).await,
        Some(data(&[("n1", "1")])),
        "no write got through"
    );

    let metrics = host.metrics.clone().unwrap();
    assert!(
        count(
            &metrics,
            "controller_runtime_reconcile_errors_total",
            &["reason=\"client\""]
        ) >= 1.0,
        "the refused writes are counted: {}",
        metrics.encode()
    );

    faults.clear();
    let recovered = std::time::Instant::now();
    // One probe interval until the key is retried, plus a reconcile and the
    // summary poll on a loaded machine.
    let bound = DEFAULT_PROBE_INTERVAL + Duration::from_secs(8);
    assert!(bound < backoff, "{bound:?} vs {backoff:?}");
    bounded(
        "the summary converges within a probe interval of recovery",
        bound,
        summary_becomes(&client, &[("n1", "1"), ("n2", "2")]),
    )
    .await;
    eprintln!(
        "converged {:?} after recovery; the key's backoff was {backoff:?}",
        recovered.elapsed()
    );
    // The summary lands before the reconcile that wrote it returns and
    // forgets the key's backoff.
    eventually("the key's backoff is reset", || async {
        queue.longest_backoff() == Duration::ZERO
    })
    .await;
    host.stop().await.unwrap();
}
