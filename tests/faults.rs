//! The host against API-server faults after it has started: throttling
//! and unavailability answered by retries that pass the host's limiter
//! and metrics, watches that fail and recover, and writes that were
//! refused for a long time (see README, "What happens when…").

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use crate::support::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kube::Api;
use serde_json::json;
use wasmctrl::client::ClientLimits;
use wasmctrl::metrics::Metrics;
use wasmctrl_apiserver::FailRequests;

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
