//! Health and metrics endpoints: scraped over HTTP and parsed, with a
//! failure proven to show up in the error counters.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wasmctrl::client::ClientLimits;
use wasmctrl::controller::ControllerConfig;
use wasmctrl::metrics::{serve_health, serve_metrics, Metrics};
use wasmctrl_apiserver::FailRequests;

async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

/// Parses Prometheus text exposition: series (name + labels) -> value.
fn parse(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_string(), value.parse().ok()?))
        })
        .collect()
}

fn value(m: &BTreeMap<String, f64>, prefix: &str) -> f64 {
    m.iter()
        .filter(|(k, _)| k.starts_with(prefix))
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

    let (code, body) = http_get(endpoint.addr, "/metrics").await;
    assert_eq!(code, 200);
    let m = parse(&body);
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
        .keys()
        .find(|k| k.starts_with("wasmctrl_guest_info{guest=\"gpu-summary\",digest=\""))
        .expect("guest info with its digest");
    assert!(info.contains("file=\"guest_gpu_summary.wasm\""), "{info}");
    host.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_waits_for_synced_caches_and_healthz_answers() {
    let (_server, client) = server().await;
    let host = start_host(&client, ControllerConfig::default()).await;
    let h = host.host.clone();
    let health = serve_health(
        "127.0.0.1:0".parse().unwrap(),
        Arc::new(move || h.readiness()),
    )
    .await
    .unwrap();
    assert_eq!(http_get(health.addr, "/healthz").await.0, 200);
    eventually("ready", || async {
        http_get(health.addr, "/readyz").await.0 == 200
    })
    .await;
    host.stop().await.unwrap();

    // A host whose caches can never sync (every list fails with a 500, a
    // transient error it keeps retrying) is not ready, and says why.
    let (server, admin) = server().await;
    server.faults().fail(
        FailRequests::new(500, 1_000_000)
            .verb("list")
            .resource("pods"),
    );
    let stuck = Arc::new(
        wasmctrl::supervisor::Supervisor::start(
            admin.clone(),
            host_config(ControllerConfig::default()),
            None,
        )
        .await
        .unwrap(),
    );
    let s = stuck.clone();
    let health = serve_health(
        "127.0.0.1:0".parse().unwrap(),
        Arc::new(move || s.readiness()),
    )
    .await
    .unwrap();
    let (code, body) = http_get(health.addr, "/readyz").await;
    assert_eq!(code, 503);
    assert!(body.contains("gpu-summary"), "{body}");
}
