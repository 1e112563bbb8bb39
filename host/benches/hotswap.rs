//! Hot-swap latency: from the kubelet's `..data` swap of a guest directory
//! to the new module reconciling, compilation included.
//!
//! `make guest && cargo bench -p wasmctrl --bench hotswap` prints a table;
//! under `cargo test --all-targets` it runs two rounds as a smoke test.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use wasmctrl::guest::RuntimeConfig;
use wasmctrl::supervisor::guest_dir::write_like_kubelet;
use wasmctrl::supervisor::{Supervisor, SupervisorConfig};
use wasmctrl_apiserver::{ApiServer, ApiServerConfig};

/// The same component with a custom section appended: identical logic, a
/// new digest, so the host must compile and swap it.
fn variant(base: &[u8], round: u32) -> Vec<u8> {
    let name = b"wasmctrl-bench-round";
    let payload = round.to_le_bytes();
    let mut out = base.to_vec();
    out.push(0); // custom section id
    out.push((1 + name.len() + payload.len()) as u8);
    out.push(name.len() as u8);
    out.extend_from_slice(name);
    out.extend_from_slice(&payload);
    out
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let rounds = if full { 20 } else { 2 };
    let target = std::env::var("CARGO_TARGET_DIR")
        .unwrap_or_else(|_| format!("{}/../target", env!("CARGO_MANIFEST_DIR")));
    let wasm =
        std::fs::read(PathBuf::from(target).join("wasm32-wasip2/guest/guest_gpu_summary.wasm"))
            .expect("run `make guest` first");

    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = server.client().await.unwrap();
    let ns: Api<Namespace> = Api::all(client.clone());
    ns.create(
        &PostParams::default(),
        &serde_json::from_value(serde_json::json!({"metadata": {"name": "ops"}})).unwrap(),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_like_kubelet(dir.path(), 0, &[("gpu-summary.wasm", &wasm)]).unwrap();
    let host = Arc::new(
        Supervisor::start(
            client,
            SupervisorConfig {
                guest_dir: Some(dir.path().to_path_buf()),
                namespace: "ops".into(),
                runtime: RuntimeConfig::default().cache_dir(None),
                ..SupervisorConfig::default()
            },
            None,
        )
        .await
        .unwrap(),
    );
    let h = host.clone();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        h.run(
            async {
                let _ = rx.await;
            },
            Duration::from_secs(5),
        )
        .await
    });

    let mut latencies = Vec::new();
    for round in 1..=rounds {
        let bytes = variant(&wasm, round);
        let digest = {
            use sha2::Digest;
            hex::encode(sha2::Sha256::digest(&bytes))
        };
        let started = Instant::now();
        write_like_kubelet(dir.path(), round, &[("gpu-summary.wasm", &bytes)]).unwrap();
        loop {
            if let Some(c) = host.controller("gpu-summary") {
                if c.digest() == digest && c.metrics().reconciles() >= 1 {
                    break;
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "swap {round} never happened"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        latencies.push(started.elapsed());
    }
    latencies.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("hotswap: file change -> new module reconciling (GPU-summary guest, compile included), {rounds} rounds");
    println!("| median | p90 | max | goal |");
    println!("|---|---|---|---|");
    println!(
        "| {:.0} ms | {:.0} ms | {:.0} ms | ≤ 500 ms |",
        ms(percentile(&latencies, 0.5)),
        ms(percentile(&latencies, 0.9)),
        ms(latencies[latencies.len() - 1])
    );
    let _ = stop.send(());
    let _ = task.await;
}
