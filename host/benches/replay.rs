//! Replaying recorded cases, and what recording costs: a real host runs
//! `examples/guest-app` against an embedded API server holding N Apps
//! until every App is Ready, twice in one run on fresh servers — once
//! plain, once with `--record DIR` keeping the newest N reconcile cases —
//! then `wasmctrl replay --guest guest_app.wasm DIR` runs every recorded
//! case through the same guest offline, as a guest's CI would. Prints, for
//! both hosts, the time until every App was Ready and the host's CPU and
//! VmHWM over it; then the cases kept, their size on disk, and the replay's
//! wall time (the guest's compilation included, `--no-guest-cache`) and
//! rate. Asserts that every case replays the same.
//!
//! Run: `make guest && cargo bench -p wasmctrl --features
//! wasmctrl/dev-server --bench replay -- --apps 10000 [--qps 1000]`. Under
//! `cargo test --all-targets` it runs a smoke world of 100 Apps.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use serde_json::json;
use wasmctrl_apiserver::{ApiServer, ApiServerConfig};

#[path = "shared/process.rs"]
#[allow(dead_code)]
mod process;

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

/// The last lines of the host's log, for a failure message.
fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// One host's way to every App Ready.
struct Converged {
    took: Duration,
    cpu: Duration,
    vmhwm: u64,
}

/// The bench's settings, shared by both hosts.
struct Setup {
    apps: usize,
    qps: u32,
    wasm: PathBuf,
    /// Progress lines every 5 s (the full run).
    verbose: bool,
}

/// A fresh embedded API server holding the App CRD and `apps` Apps (no
/// finalizer, no child, no status), a host started on it (recording into
/// `record` when given), and the time until every App is Ready. When
/// recording, waits further until no new case appeared for 2 s.
async fn converge(setup: &Setup, dir: &Path, record: Option<&Path>) -> Converged {
    let server = ApiServer::start(ApiServerConfig::default())
        .await
        .expect("server starts");
    let kubeconfig = dir.join("kubeconfig");
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
    futures::stream::iter(0..setup.apps)
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

    let log = dir.join(if record.is_some() {
        "recording-host.log"
    } else {
        "host.log"
    });
    let qps = setup.qps.to_string();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_wasmctrl"));
    command
        .arg("run")
        .arg("--guest")
        .arg(&setup.wasm)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--namespace", "wasmctrl-system", "--no-guest-cache"])
        .args([
            "--metrics-addr",
            "127.0.0.1:0",
            "--health-addr",
            "127.0.0.1:0",
        ])
        .args(["--kube-api-qps", &qps, "--kube-api-burst", &qps]);
    if let Some(record) = record {
        command.arg("--record").arg(record).args([
            "--record-max-cases",
            &setup.apps.to_string(),
            "--record-max-mib",
            "4096",
        ]);
    }
    let t = Instant::now();
    let mut host = command
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = host.id().expect("the host runs");
    // Every App Ready.
    let patience = Duration::from_secs(120 + setup.apps as u64 / 10);
    let took = loop {
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
        if ready == setup.apps {
            break t.elapsed();
        }
        assert!(
            t.elapsed() < patience,
            "{ready} of {} Apps Ready after {patience:?}; the host's log ends:\n{}",
            setup.apps,
            log_tail(&log)
        );
        if setup.verbose {
            eprintln!(
                "{:>5.0} s: {ready} of {} Apps Ready{}",
                t.elapsed().as_secs_f64(),
                setup.apps,
                record
                    .map(|r| format!(", {} cases recorded", cases_in(r).len()))
                    .unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(if setup.verbose {
            5000
        } else {
            200
        }))
        .await;
    };
    let cpu = process::cpu_time(pid).unwrap_or_default();
    let vmhwm = process::status_bytes(pid, "VmHWM").unwrap_or_default();
    // The recording queue drained: no new case for 2 s.
    if let Some(record) = record {
        let mut seen = (0, Instant::now());
        loop {
            let n = cases_in(record).len();
            if n != seen.0 {
                seen = (n, Instant::now());
            } else if seen.1.elapsed() > Duration::from_secs(2) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    host.kill().await.unwrap();
    Converged { took, cpu, vmhwm }
}

#[tokio::main]
async fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let apps: usize = arg("--apps")
        .map(|n| n.parse().expect("--apps N"))
        .unwrap_or(if full { 10_000 } else { 100 });
    // The client's limit: at the default 10 qps, the ~4 writes that take an
    // App to Ready (finalizer, child, status twice) would pace 10,000 Apps
    // to over an hour; the per-object bench uses the same.
    let qps: u32 = arg("--qps")
        .map(|n| n.parse().expect("--qps N"))
        .unwrap_or(1000);
    let wasm = target_dir().join("wasm32-wasip2/guest/guest_app.wasm");
    assert!(
        wasm.exists(),
        "{} is missing: run `make guest` first",
        wasm.display()
    );
    let setup = Setup {
        apps,
        qps,
        wasm,
        verbose: full,
    };
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("cases");

    let plain = converge(&setup, dir.path(), None).await;
    let recording = converge(&setup, dir.path(), Some(&record)).await;
    let files = cases_in(&record);
    assert!(!files.is_empty(), "no case recorded");
    let bytes: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();

    let t = Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .arg("replay")
        .arg("--guest")
        .arg(&setup.wasm)
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
    println!("replay: {apps} Apps, guest-app, --kube-api-qps {qps}");
    println!("| host | every App Ready | CPU | VmHWM |");
    println!("|---|---|---|---|");
    for (name, c) in [("plain", &plain), ("--record", &recording)] {
        println!(
            "| {name} | {:.2} s | {:.2} s | {} MiB |",
            c.took.as_secs_f64(),
            c.cpu.as_secs_f64(),
            c.vmhwm >> 20
        );
    }
    println!();
    println!("| cases recorded | on disk | replay (wall, compile included) | per case |");
    println!("|---|---|---|---|");
    println!(
        "| {n} | {:.1} MB | {:.2} s | {:.0} µs |",
        bytes as f64 / 1e6,
        took.as_secs_f64(),
        took.as_secs_f64() * 1e6 / n as f64
    );
}
