//! The embedded API server at 100,000 pods: memory, create throughput, list
//! latency (paged with `limit=500`, unpaged, by selector), get, and one batch
//! of changes fanned out to 10 watchers, all over real HTTPS with the kube
//! client.
//!
//! Prints a markdown table for BENCHMARKS.md. Run with
//! `cargo bench -p wasmctrl-apiserver --bench apiserver_scale` (set
//! `WASMCTRL_BENCH_PODS` for another size). Under `cargo test --all-targets`
//! (no `--bench` argument) it runs a 1,000-pod smoke version in seconds.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

#[path = "support/pods.rs"]
mod pods;
mod support;

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use pods::pod;
use support::{
    create_all, median, ms, paged_list, print_table_of, raw_paged_list, CONCURRENCY, PAGE,
};
use wasmctrl_apiserver::{ApiServer, ApiServerConfig, RunningApiServer};

/// Watchers the fan-out is measured with (the number).
const WATCHERS: usize = 10;
/// Repetitions of the cheaper measurements; the table shows the median.
const ROUNDS: usize = 5;
/// Gets timed for the get latency.
const GETS: usize = 200;

struct Size {
    pods: usize,
    changes: usize,
}

/// A `/proc/self/status` field in KiB (0 where procfs is missing).
fn proc_status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Starts `WATCHERS` watches from `rv`, patches the first `changes` pods,
/// and returns how long until every watcher saw every change.
async fn fan_out(server: &RunningApiServer, api: &Api<Pod>, rv: &str, changes: usize) -> Duration {
    let mut tasks = Vec::new();
    for _ in 0..WATCHERS {
        let w: Api<Pod> = Api::default_namespaced(server.client().await.unwrap());
        let mut stream = w
            .watch(&WatchParams::default().timeout(300), rv)
            .await
            .unwrap()
            .boxed();
        tasks.push(tokio::spawn(async move {
            let mut seen = 0;
            while seen < changes {
                match stream.try_next().await.unwrap().expect("watch ended early") {
                    WatchEvent::Modified(_) => seen += 1,
                    WatchEvent::Bookmark(_) => {}
                    other => panic!("unexpected watch event {other:?}"),
                }
            }
            seen
        }));
    }
    let started = Instant::now();
    pods::touch(api, changes).await;
    for t in tasks {
        let seen = tokio::time::timeout(Duration::from_secs(300), t)
            .await
            .expect("fan-out timed out")
            .unwrap();
        assert_eq!(seen, changes);
    }
    started.elapsed()
}

async fn run(size: Size) -> Vec<(String, String)> {
    let n = size.pods;
    let mut rows: Vec<(String, String)> = Vec::new();
    let mut row = |k: &str, v: String| rows.push((k.to_owned(), v));

    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let api: Api<Pod> = Api::default_namespaced(server.client().await.unwrap());
    // Warm the connection pool and TLS before measuring memory.
    api.list(&ListParams::default().limit(1)).await.unwrap();

    let rss_before = proc_status_kib("VmRSS:");
    let create = create_all(&api, 0..n, pod).await;
    let rss_after = proc_status_kib("VmRSS:");
    assert_eq!(server.object_count("pods"), n);
    let stored = server.stored_bytes("pods");
    let growth_kib = rss_after.saturating_sub(rss_before);
    row("pods stored", format!("{n}"));
    row(
        "stored JSON",
        format!(
            "{:.1} MiB ({} B/pod)",
            stored as f64 / 1_048_576.0,
            stored / n.max(1)
        ),
    );
    row(
        "process RSS growth while creating",
        format!(
            "{:.1} MiB ({} B/pod; server + kube client in one process)",
            growth_kib as f64 / 1024.0,
            growth_kib * 1024 / n.max(1) as u64
        ),
    );
    row(
        "create throughput",
        format!(
            "{:.0} pods/s ({:.1} s, {CONCURRENCY} in flight)",
            n as f64 / create.as_secs_f64(),
            create.as_secs_f64()
        ),
    );
    // What the unknown-field check (a round trip through the typed `Pod`)
    // adds to each create, on one core, against the wall time per create.
    let info = wasmctrl_apiserver::registry::Registry::new()
        .lookup("", "v1", "pods")
        .unwrap();
    let body = serde_json::to_vec(&pod(0)).unwrap();
    let parsed: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let checks = 2_000;
    let started = Instant::now();
    for _ in 0..checks {
        let mut obj = parsed.clone();
        wasmctrl_apiserver::validation::check(
            &info,
            &mut obj,
            wasmctrl_apiserver::validation::Directive::Strict,
            &wasmctrl_apiserver::validation::Write::Create { body: &body },
            None,
        )
        .unwrap();
    }
    let per_check = started.elapsed().as_secs_f64() / f64::from(checks);
    let per_create = create.as_secs_f64() / n as f64;
    row(
        "unknown-field check (Strict, one core, incl. cloning the parsed body) per pod create",
        format!(
            "{:.1} µs ({:.0}% of the wall time per create at this throughput)",
            per_check * 1e6,
            100.0 * per_check / per_create
        ),
    );

    row(
        "peak RSS after creating",
        format!("{:.1} MiB", proc_status_kib("VmHWM:") as f64 / 1024.0),
    );

    let raw_client = server.client().await.unwrap();
    let mut raw = Vec::new();
    let (mut raw_bytes, mut raw_pages) = (0, 0);
    for _ in 0..3 {
        let (b, p, took) = raw_paged_list(&raw_client, "/api/v1/namespaces/default/pods").await;
        (raw_bytes, raw_pages) = (b, p);
        raw.push(took);
    }
    let raw = median(raw);
    row(
        &format!("paged list, limit {PAGE}, raw JSON (server + TLS + HTTP)"),
        format!(
            "{:.0} ms total, {raw_pages} pages, {:.2} ms/page ({:.1} MiB)",
            ms(raw),
            ms(raw) / raw_pages as f64,
            raw_bytes as f64 / 1_048_576.0
        ),
    );

    let mut paged = Vec::new();
    let mut pages = 0;
    for _ in 0..3 {
        let (items, p, took) = paged_list(&api).await;
        assert_eq!(items, n);
        pages = p;
        paged.push(took);
    }
    let paged = median(paged);
    row(
        &format!("paged list, limit {PAGE} (client decode included)"),
        format!(
            "{:.0} ms total, {pages} pages, {:.2} ms/page",
            ms(paged),
            ms(paged) / pages as f64
        ),
    );
    row(
        "peak RSS after paged lists",
        format!("{:.1} MiB", proc_status_kib("VmHWM:") as f64 / 1024.0),
    );

    let mut unpaged = Vec::new();
    let mut rv = String::new();
    for _ in 0..3 {
        let started = Instant::now();
        let all = api.list(&ListParams::default()).await.unwrap();
        unpaged.push(started.elapsed());
        assert_eq!(all.items.len(), n);
        rv = all.metadata.resource_version.clone().unwrap();
    }
    row(
        "unpaged list (client decode included)",
        format!("{:.0} ms", ms(median(unpaged))),
    );
    row(
        "peak RSS after unpaged lists (all pods decoded as typed `Pod`s in the client)",
        format!("{:.1} MiB", proc_status_kib("VmHWM:") as f64 / 1024.0),
    );

    let selector = ListParams::default()
        .labels("shard=3")
        .fields("spec.nodeName=node-3");
    let mut sel = Vec::new();
    let mut matched = 0;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        matched = api.list(&selector).await.unwrap().items.len();
        sel.push(started.elapsed());
    }
    assert_eq!(
        matched,
        (0..n).filter(|i| i % 16 == 3 && i % 500 == 3).count()
    );
    row(
        "selector list (`shard=3`, `spec.nodeName=node-3`)",
        format!("{:.2} ms ({matched} of {n} match)", ms(median(sel))),
    );

    let mut gets = Vec::new();
    for i in 0..GETS {
        let name = format!("pod-{:06}", (i * 7919) % n);
        let started = Instant::now();
        api.get(&name).await.unwrap();
        gets.push(started.elapsed());
    }
    row(
        "get",
        format!("{:.2} ms (median of {GETS})", ms(median(gets))),
    );

    let took = fan_out(&server, &api, &rv, size.changes).await;
    row(
        &format!("watch fan-out to {WATCHERS} watchers"),
        format!(
            "{} changes reach all in {:.0} ms ({:.0} events/s delivered)",
            size.changes,
            ms(took),
            (size.changes * WATCHERS) as f64 / took.as_secs_f64()
        ),
    );
    server.shutdown().await;
    rows
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` runs this as
    // a quick smoke test.
    let full = std::env::args().any(|a| a == "--bench");
    let pods = std::env::var("WASMCTRL_BENCH_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|_| full)
        .unwrap_or(if full { 100_000 } else { 1_000 });
    let size = Size {
        pods,
        changes: if full { 1_000 } else { 100 }.min(pods),
    };
    print_table_of(run(size));
}
