//! Health and metrics endpoints: scraped over HTTP and parsed, with a
//! failure proven to show up in the error counters.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use crate::support::*;
use wasmctrl::client::ClientLimits;
use wasmctrl::controller::ControllerConfig;
use wasmctrl::metrics::{serve_health, serve_metrics, Metrics};
use wasmctrl_apiserver::FailRequests;

/// `GET path` at `addr`, which must answer.
async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    http_get(addr, path)
        .await
        .unwrap_or_else(|| panic!("GET {path} at {addr} answers"))
}

/// The sum of every sample whose series (name and labels, as written)
/// starts with `prefix`.
fn value(samples: &[(String, f64)], prefix: &str) -> f64 {
    samples
        .iter()
        .filter(|(series, _)| series.starts_with(prefix))
        .map(|(_, v)| v)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_scraped_and_a_failing_reconcile_bumps_the_error_counter() {
    let (server, admin) = server().await;
    let metrics = Arc::new(Metrics::new());
    let config = server
        .kube_config_for_token(server.admin_token())
        .await
        .unwrap();
    let client =
        wasmctrl::client::build(config, ClientLimits::default(), Some(metrics.clone())).unwrap();
    server.faults().fail(
        FailRequests::new(500, 2)
            .verb("patch")
            .resource("configmaps"),
    );
    pod("a").on("n1").requesting("2").create(&admin).await;
    let host = start_host_with(&client, ControllerConfig::default(), Some(metrics.clone())).await;
    let endpoint = serve_metrics("127.0.0.1:0".parse().unwrap(), metrics.clone())
        .await
        .unwrap();
    summary_becomes(&admin, &[("n1", "2")]).await;

    let (code, body) = get(endpoint.addr, "/metrics").await;
    assert_eq!(code, 200);
    let m = prom::samples(&body);
    let g = "{controller=\"gpu-summary\"";
    assert!(
        value(
            &m,
            &format!("controller_runtime_reconcile_total{g},result=\"success\"}}")
        ) >= 1.0,
        "{body}"
    );
    assert!(
        value(
            &m,
            &format!("controller_runtime_reconcile_errors_total{g},reason=\"server\"}}")
        ) >= 2.0,
        "the injected 500s are counted as errors: {body}"
    );
    assert!(
        value(&m, "workqueue_adds_total{name=\"gpu-summary\"}") >= 1.0,
        "{body}"
    );
    assert!(
        value(&m, "workqueue_retries_total{name=\"gpu-summary\"}") >= 2.0,
        "{body}"
    );
    assert!(
        value(
            &m,
            "rest_client_requests_total{code=\"500\",method=\"PATCH\""
        ) >= 2.0,
        "{body}"
    );
    assert!(
        value(&m, "rest_client_requests_total{code=\"200\",method=\"GET\"") >= 1.0,
        "{body}"
    );
    assert!(
        value(
            &m,
            "wasmctrl_writes_total{guest=\"gpu-summary\",verb=\"apply\"}"
        ) >= 1.0,
        "{body}"
    );
    assert!(
        value(
            &m,
            "wasmctrl_guest_reconcile_seconds_count{guest=\"gpu-summary\"}"
        ) >= 1.0,
        "{body}"
    );
    assert!(
        value(
            &m,
            "wasmctrl_guest_instantiate_seconds_count{guest=\"gpu-summary\"}"
        ) >= 1.0,
        "{body}"
    );
    let info = m
        .iter()
        .map(|(series, _)| series)
        .find(|k| k.starts_with("wasmctrl_guest_info{guest=\"gpu-summary\",digest=\""))
        .expect("guest info with its digest");
    assert!(info.contains("file=\"guest_gpu_summary.wasm\""), "{info}");
    host.stop().await.unwrap();
}

/// `/healthz` and `/readyz` of `host` on a free localhost port.
async fn serve_readiness_of(
    host: Arc<wasmctrl::supervisor::Supervisor>,
) -> wasmctrl::metrics::Endpoint {
    serve_health(
        "127.0.0.1:0".parse().unwrap(),
        Arc::new(move || host.readiness()),
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_waits_for_synced_caches_and_healthz_answers() {
    let (_server, client) = server().await;
    let host = start_host(&client, ControllerConfig::default()).await;
    let health = serve_readiness_of(host.host.clone()).await;
    assert_eq!(get(health.addr, "/healthz").await.0, 200);
    eventually("ready", || async {
        http_status(health.addr, "/readyz").await == Some(200)
    })
    .await;
    host.stop().await.unwrap();

    // A host whose caches can never sync (every list and every watch of
    // pods, so a streaming list too, fails with a 500, a transient error
    // it keeps retrying) is not ready, and says why.
    let (server, admin) = server().await;
    for verb in ["list", "watch"] {
        server.faults().fail(
            FailRequests::new(500, 1_000_000)
                .verb(verb)
                .resource("pods"),
        );
    }
    let stuck = Arc::new(
        wasmctrl::supervisor::Supervisor::start(
            admin.clone(),
            host_config(ControllerConfig::default()),
            None,
        )
        .await
        .unwrap(),
    );
    let health = serve_readiness_of(stuck).await;
    let (code, body) = get(health.addr, "/readyz").await;
    assert_eq!(code, 503);
    assert!(body.contains("gpu-summary"), "{body}");
}
