//! A new kind at 10,000 objects: creates that many Services in one
//! namespace over real HTTPS with the kube client, then times their lists
//! (paged with `limit=500` as raw JSON and as typed `Service`s, and
//! unpaged) and reads the stored bytes. Prints a markdown table for
//! BENCHMARKS.md.
//!
//! `cargo run --release -p wasmctrl-apiserver --example list_services`
//! (`WASMCTRL_BENCH_SERVICES` sets another count). The Services are
//! headless (`clusterIP: None`): the service CIDR 10.0.0.0/24 holds 253
//! cluster IPs, as on the recorded 1.32 server.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

#[path = "../benches/support/mod.rs"]
mod support;

use std::time::Instant;

use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ListParams};
use serde_json::json;
use support::{
    create_all, median, ms, paged_list, print_table_of, raw_paged_list, CONCURRENCY, PAGE,
};
use wasmctrl_apiserver::{ApiServer, ApiServerConfig};

/// Repetitions of each list; the table shows the median.
const ROUNDS: usize = 3;

fn service(i: usize) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": format!("svc-{i:06}"), "labels": {"app": "bench", "shard": format!("{}", i % 16)}},
        "spec": {"clusterIP": "None", "selector": {"app": "bench", "shard": format!("{}", i % 16)},
                 "ports": [{"name": "http", "port": 80, "targetPort": 8080}, {"name": "metrics", "port": 9090}]}
    }))
    .unwrap()
}

async fn run(n: usize) -> Vec<(String, String)> {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = server.client().await.unwrap();
    let api: Api<Service> = Api::namespaced(client.clone(), "default");
    let first_half = create_all(&api, 0..n / 2, service).await;
    let second_half = create_all(&api, n / 2..n, service).await;
    let created = first_half + second_half;
    let half = (n / 2).max(1) as f64;
    let mut rows = vec![
        (
            "Services stored".to_string(),
            server.object_count("services").to_string(),
        ),
        (
            "stored JSON".into(),
            format!(
                "{:.1} MiB ({} B/Service)",
                server.stored_bytes("services") as f64 / 1048576.0,
                server.stored_bytes("services") / n.max(1)
            ),
        ),
        (
            "create throughput, first half / second half".into(),
            format!(
                "{:.0} / {:.0} Services/s ({:.1} s in all, {CONCURRENCY} in flight)",
                half / first_half.as_secs_f64(),
                half / second_half.as_secs_f64(),
                created.as_secs_f64()
            ),
        ),
    ];
    let mut raw = Vec::new();
    let mut typed = Vec::new();
    let mut unpaged = Vec::new();
    let (mut bytes, mut pages) = (0, 0);
    for _ in 0..ROUNDS {
        let (b, p, d) = raw_paged_list(&client, "/api/v1/namespaces/default/services").await;
        (bytes, pages) = (b, p);
        raw.push(d);
        let (items, _, d) = paged_list(&api).await;
        assert_eq!(items, n);
        typed.push(d);
        let t = Instant::now();
        assert_eq!(
            api.list(&ListParams::default()).await.unwrap().items.len(),
            n
        );
        unpaged.push(t.elapsed());
    }
    let raw = median(raw);
    rows.push((
        format!("paged list, limit {PAGE}, raw JSON (server + TLS + HTTP)"),
        format!(
            "{:.0} ms total, {pages} pages, {:.2} ms/page ({:.1} MiB)",
            ms(raw),
            ms(raw) / pages as f64,
            bytes as f64 / 1048576.0
        ),
    ));
    rows.push((
        format!("paged list, limit {PAGE} (client decode included)"),
        format!("{:.0} ms total", ms(median(typed))),
    ));
    rows.push((
        "unpaged list (client decode included)".into(),
        format!("{:.0} ms", ms(median(unpaged))),
    ));
    rows
}

fn main() {
    let n = std::env::var("WASMCTRL_BENCH_SERVICES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    print_table_of(run(n));
}
