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

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use wasmctrl_apiserver::{ApiServer, ApiServerConfig};

/// Requests in flight while creating (as the pod bench).
const CONCURRENCY: usize = 64;
/// Page size of the paged lists (kubectl's and client-go's default chunk).
const PAGE: u32 = 500;
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

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Lists every Service in pages of `PAGE` as raw JSON; returns (bytes, pages, elapsed).
async fn raw_paged_list(client: &kube::Client) -> (usize, usize, Duration) {
    const PATH: &str = "/api/v1/namespaces/default/services";
    let started = Instant::now();
    let (mut bytes, mut pages) = (0, 0);
    let mut cont: Option<String> = None;
    loop {
        let uri = match &cont {
            Some(c) => format!("{PATH}?limit={PAGE}&continue={c}"),
            None => format!("{PATH}?limit={PAGE}"),
        };
        let req = http::Request::get(uri).body(Vec::new()).unwrap();
        let text = client.request_text(req).await.unwrap();
        bytes += text.len();
        pages += 1;
        let head = &text[..text.len().min(2048)];
        cont = head
            .split_once("\"continue\":\"")
            .and_then(|(_, rest)| rest.split_once('"').map(|(token, _)| token.to_owned()));
        if cont.is_none() {
            return (bytes, pages, started.elapsed());
        }
    }
}

/// Lists every Service in typed pages of `PAGE`; returns (items, elapsed).
async fn paged_list(api: &Api<Service>) -> (usize, Duration) {
    let started = Instant::now();
    let mut lp = ListParams::default().limit(PAGE);
    let mut items = 0;
    loop {
        let l = api.list(&lp).await.unwrap();
        items += l.items.len();
        match l.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => return (items, started.elapsed()),
        }
    }
}

async fn run(n: usize) -> Vec<(String, String)> {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = server.client().await.unwrap();
    let api: Api<Service> = Api::namespaced(client.clone(), "default");
    let started = Instant::now();
    let mut first_half = Duration::ZERO;
    for (from, to) in [(0, n / 2), (n / 2, n)] {
        let t = Instant::now();
        futures::stream::iter(from..to)
            .map(|i| {
                let api = api.clone();
                async move {
                    api.create(&PostParams::default(), &service(i))
                        .await
                        .map(drop)
                }
            })
            .buffer_unordered(CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await
            .unwrap();
        if from == 0 {
            first_half = t.elapsed();
        }
    }
    let created = started.elapsed();
    let second_half = created - first_half;
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
        let (b, p, d) = raw_paged_list(&client).await;
        (bytes, pages) = (b, p);
        raw.push(d);
        let (items, d) = paged_list(&api).await;
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
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let rows = rt.block_on(run(n));
    println!("| measurement | result |");
    println!("|---|---|");
    for (k, v) in rows {
        println!("| {k} | {v} |");
    }
}
