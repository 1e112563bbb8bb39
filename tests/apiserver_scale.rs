//! Scale behaviour of the embedded API server: paged lists over many pods
//! and one change fanned out to many watchers. The `#[ignore]`d test is the
//! 100k-pod measurement (run it in release, see its doc); the other keeps
//! the same path exercised at a size that runs in the normal test command.
#![allow(clippy::unwrap_used, missing_docs)]

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use wasmctrl::apiserver::{ApiServer, ApiServerConfig, RunningApiServer};

const WATCHERS: usize = 10;
const CREATE_CONCURRENCY: usize = 64;

fn pod(i: usize) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("pod-{i:06}"), "labels": {"app": "bench", "shard": format!("{}", i % 16)}},
        "spec": {"nodeName": format!("node-{}", i % 500), "containers": [{
            "name": "main", "image": "registry.example.com/team/app:1.2.3",
            "resources": {"limits": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"}},
            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
        }]}
    }))
    .unwrap()
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

async fn create_pods(api: &Api<Pod>, n: usize) {
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &pod(i))
                    .await
                    .map(|_| ())
            }
        })
        .buffer_unordered(CREATE_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await
        .unwrap();
}

async fn paged_list(api: &Api<Pod>, page: u32) -> (usize, String, Duration) {
    let started = Instant::now();
    let mut lp = ListParams::default().limit(page);
    let mut total = 0;
    loop {
        let l = api.list(&lp).await.unwrap();
        total += l.items.len();
        match l.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => {
                return (
                    total,
                    l.metadata.resource_version.unwrap(),
                    started.elapsed(),
                )
            }
        }
    }
}

/// Starts `WATCHERS` watches from `rv`, makes `changes` label changes, and
/// returns how long until every watcher saw every change.
async fn fan_out(server: &RunningApiServer, api: &Api<Pod>, rv: &str, changes: usize) -> Duration {
    let mut tasks = Vec::new();
    for _ in 0..WATCHERS {
        let client = server.client().await.unwrap();
        let w: Api<Pod> = Api::namespaced(client, "default");
        let mut stream = w
            .watch(&WatchParams::default().timeout(120), rv)
            .await
            .unwrap()
            .boxed();
        tasks.push(tokio::spawn(async move {
            let mut seen = 0;
            while seen < changes {
                match stream.try_next().await.unwrap().unwrap() {
                    WatchEvent::Modified(_) => seen += 1,
                    WatchEvent::Bookmark(_) => {}
                    other => panic!("unexpected {other:?}"),
                }
            }
            seen
        }));
    }
    let started = Instant::now();
    futures::stream::iter(0..changes)
        .map(|i| {
            let api = api.clone();
            async move {
                let p = Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}}));
                api.patch(&format!("pod-{i:06}"), &PatchParams::default(), &p)
                    .await
                    .map(|_| ())
            }
        })
        .buffer_unordered(CREATE_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await
        .unwrap();
    for t in tasks {
        assert_eq!(
            tokio::time::timeout(Duration::from_secs(120), t)
                .await
                .unwrap()
                .unwrap(),
            changes
        );
    }
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paged_list_and_watch_fan_out_deliver_every_pod_and_change() {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let api: Api<Pod> = Api::namespaced(server.client().await.unwrap(), "default");
    create_pods(&api, 1_000).await;
    let (total, rv, _) = paged_list(&api, 128).await;
    assert_eq!(total, 1_000);
    fan_out(&server, &api, &rv, 100).await;
}

/// The 100k-pod measurement for BENCHMARKS.md:
/// `WASMCTRL_BENCH_PODS=100000 cargo test --release -p wasmctrl --test apiserver_scale -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement; run in release with --ignored --nocapture"]
async fn measure_hundred_thousand_pods() {
    let n: usize = std::env::var("WASMCTRL_BENCH_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let api: Api<Pod> = Api::namespaced(server.client().await.unwrap(), "default");
    let rss_before = rss_kib();
    let started = Instant::now();
    create_pods(&api, n).await;
    let create = started.elapsed();
    let rss_after = rss_kib();
    let bytes = server.stored_bytes("pods");
    println!("pods: {n}");
    println!(
        "create: {:.1}s ({:.0} pods/s, concurrency {CREATE_CONCURRENCY})",
        create.as_secs_f64(),
        n as f64 / create.as_secs_f64()
    );
    println!(
        "stored JSON: {:.1} MiB ({} B/pod)",
        bytes as f64 / 1048576.0,
        bytes / n.max(1)
    );
    println!(
        "process RSS growth: {:.1} MiB ({} B/pod; includes history ring and client)",
        (rss_after.saturating_sub(rss_before)) as f64 / 1024.0,
        (rss_after.saturating_sub(rss_before)) * 1024 / n.max(1) as u64
    );
    for page in [500u32, 5_000] {
        let (total, _, took) = paged_list(&api, page).await;
        assert_eq!(total, n);
        println!(
            "paged list (limit {page}): {:.0} ms total",
            took.as_secs_f64() * 1000.0
        );
    }
    let started = Instant::now();
    let all = api.list(&ListParams::default()).await.unwrap();
    println!(
        "unpaged list: {:.0} ms ({} items)",
        started.elapsed().as_secs_f64() * 1000.0,
        all.items.len()
    );
    let rv = all.metadata.resource_version.clone().unwrap();
    drop(all);
    for _ in 0..3 {
        let started = Instant::now();
        let sel = api
            .list(
                &ListParams::default()
                    .labels("shard=3")
                    .fields("spec.nodeName=node-3"),
            )
            .await
            .unwrap();
        println!(
            "selector list: {:.1} ms ({} items)",
            started.elapsed().as_secs_f64() * 1000.0,
            sel.items.len()
        );
    }
    let started = Instant::now();
    api.get("pod-050000").await.unwrap();
    println!("get: {:.2} ms", started.elapsed().as_secs_f64() * 1000.0);
    let changes = 1_000;
    let took = fan_out(&server, &api, &rv, changes).await;
    println!(
        "fan-out: {changes} changes to {WATCHERS} watchers in {:.0} ms",
        took.as_secs_f64() * 1000.0
    );
}
