//! Replaying recorded cases: a real host (`wasmctrl run --record`) runs
//! `examples/guest-app` against the embedded API server holding N Apps
//! until every App is Ready, keeping the newest N reconcile cases; then
//! `wasmctrl replay --guest guest_app.wasm DIR` runs every recorded case
//! through the same guest offline, as a guest's CI would. Prints the cases
//! kept, their size on disk, and the replay's wall time (the guest's
//! compilation included, `--no-guest-cache`) and rate; asserts that every
//! case replays the same.
//!
//! Run: `make guest && cargo bench -p wasmctrl --features
//! wasmctrl/dev-server --bench replay -- --apps 10000`. Under `cargo test
//! --all-targets` it runs a smoke world of 100 Apps.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use serde_json::json;
use wasmctrl_apiserver::{ApiServer, ApiServerConfig};

const NAMESPACES: usize = 10;

fn target_dir() -> PathBuf {
    std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn cases_in(dir: &Path) -> Vec<PathBuf> {
    wasmctrl::recording::case_files(dir).unwrap_or_default()
}

#[tokio::main]
async fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let apps: usize = arg("--apps")
        .map(|n| n.parse().expect("--apps N"))
        .unwrap_or(if full { 10_000 } else { 100 });
    let wasm = target_dir().join("wasm32-wasip2/guest/guest_app.wasm");
    assert!(
        wasm.exists(),
        "{} is missing: run `make guest` first",
        wasm.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("cases");

    let server = ApiServer::start(ApiServerConfig::default())
        .await
        .expect("server starts");
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let client = server.client().await.unwrap();

    let crd: CustomResourceDefinition = serde_yaml::from_str(
        &std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/guest-app/crd.yaml"),
        )
        .unwrap(),
    )
    .unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in (0..NAMESPACES)
        .map(|i| format!("team-{i}"))
        .chain(["wasmctrl-system".to_string()])
    {
        let namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap();
    }
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("apps.example.com", "v1", "App"));
    // The CRD is served once established.
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let t = Instant::now();
    while all.list(&ListParams::default().limit(1)).await.is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the App CRD is never served"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    futures::stream::iter(0..apps)
        .map(|i| {
            let api: Api<DynamicObject> = Api::namespaced_with(
                client.clone(),
                &format!("team-{}", i % NAMESPACES),
                &resource,
            );
            async move {
                let app: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "apps.example.com/v1", "kind": "App",
                    "metadata": {"name": format!("app-{i:05}")},
                    "spec": {"message": format!("hello {i}"), "replicas": 1 + i % 5},
                }))
                .unwrap();
                api.create(&PostParams::default(), &app).await.map(|_| ())
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await
        .unwrap();

    let bin = env!("CARGO_BIN_EXE_wasmctrl");
    let mut host = tokio::process::Command::new(bin)
        .arg("run")
        .arg("--guest")
        .arg(&wasm)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--namespace", "wasmctrl-system", "--no-guest-cache"])
        .args([
            "--metrics-addr",
            "127.0.0.1:0",
            "--health-addr",
            "127.0.0.1:0",
        ])
        .arg("--record")
        .arg(&record)
        .args([
            "--record-max-cases",
            &apps.to_string(),
            "--record-max-mib",
            "4096",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Every App Ready, then the recording queue drained (no new case for 2 s).
    let t = Instant::now();
    loop {
        let list = all.list(&ListParams::default()).await.unwrap();
        let ready = list
            .items
            .iter()
            .filter(|a| {
                a.data["status"]["conditions"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
            })
            .count();
        if ready == apps {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(600),
            "{ready} of {apps} Apps Ready after 600 s"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let mut seen = (0, Instant::now());
    loop {
        let n = cases_in(&record).len();
        if n != seen.0 {
            seen = (n, Instant::now());
        } else if seen.1.elapsed() > Duration::from_secs(2) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    host.kill().await.unwrap();
    let files = cases_in(&record);
    assert!(!files.is_empty(), "no case recorded");
    let bytes: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();

    let t = Instant::now();
    let out = std::process::Command::new(bin)
        .arg("replay")
        .arg("--guest")
        .arg(&wasm)
        .arg(&record)
        .arg("--no-guest-cache")
        .output()
        .unwrap();
    let took = t.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let n = files.len();
    assert!(
        out.status.success()
            && stdout.contains(&format!("{n} cases: {n} same, 0 differ, 0 not replayed")),
        "replay: {}\n{stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    println!("replay: {apps} Apps, guest-app");
    println!("| cases recorded | on disk | replay (wall, compile included) | per case |");
    println!("|---|---|---|---|");
    println!(
        "| {n} | {:.1} MB | {:.2} s | {:.0} µs |",
        bytes as f64 / 1e6,
        took.as_secs_f64(),
        took.as_secs_f64() * 1e6 / n as f64
    );
}
