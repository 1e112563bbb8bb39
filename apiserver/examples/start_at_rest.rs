//! Start time and memory at rest of the embedded API server: the first and
//! the median wall time of `ApiServer::start` over 5 starts, then the process RSS
//! once one server has answered a discovery round (`/api/v1` and every
//! `/apis/{group}/{version}`, what kubectl reads) and sat idle for a second.
//! Run with `cargo run --release -p wasmctrl-apiserver --example start_at_rest`.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use wasmctrl_apiserver::{ApiServer, ApiServerConfig};

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

#[tokio::main]
async fn main() {
    let before = rss_kib();
    let mut starts = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
        starts.push(t.elapsed());
        drop(server);
    }
    let first = starts[0];
    starts.sort();
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = server.client().await.unwrap();
    let mut resources = client
        .list_core_api_resources("v1")
        .await
        .unwrap()
        .resources
        .len();
    for g in client.list_api_groups().await.unwrap().groups {
        for v in g.versions {
            resources += client
                .list_api_group_resources(&v.group_version)
                .await
                .unwrap()
                .resources
                .len();
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    println!(
        "| first start (incl. reading the embedded data) | {:.2} ms |",
        first.as_secs_f64() * 1e3
    );
    println!(
        "| start (median of 5) | {:.2} ms |",
        starts[2].as_secs_f64() * 1e3
    );
    println!("| discovery entries (resources and subresources) | {resources} |");
    println!(
        "| RSS before the first start | {:.1} MiB |",
        before as f64 / 1024.0
    );
    println!(
        "| RSS at rest (one server, after discovery, 1 s idle) | {:.1} MiB |",
        rss_kib() as f64 / 1024.0
    );
}
