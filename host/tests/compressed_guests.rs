//! Guests compressed into ConfigMaps (`NAME.wasm.gz`, `NAME.wasm.zst`):
//! packaged by `wasmctrl guest configmap`, stored by the API server,
//! mounted as the kubelet mounts a ConfigMap, decompressed under the cap
//! and run; a decompression bomb and two files for one guest refused by
//! name while the others run — real HTTPS, real kube client.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kube::Api;

use crate::support::guests::{
    dir_config, guests_over_http, host_event_notes, refused, serve_health, sha256,
};
use crate::support::wat::{configmap_doc, guest, Behaviour, WatManifest};
use crate::support::*;
use wasmctrl::metrics::Metrics;
use wasmctrl::supervisor::compressed::Compression;
use wasmctrl::supervisor::guest_dir::write_like_kubelet;
use wasmctrl_test_support::component::{code_like_bytes, with_custom_section};

/// The GPU-summary guest grown past what a ConfigMap holds as it is, as
/// large as a QuickJS guest (1.2 MB and more), compressing like one.
fn large_gpu_summary() -> Vec<u8> {
    let gpu = std::fs::read(guest_path()).unwrap();
    with_custom_section(&gpu, "test-payload", &code_like_bytes(1_300_000))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_too_large_for_a_configmap_as_it_is_ships_compressed_and_runs() {
    let (_server, client) = server().await;
    let component = large_gpu_summary();
    assert!(component.len() > 1 << 20);
    let built = tempfile::tempdir().unwrap();
    let file = built.path().join("gpu-summary.wasm");
    std::fs::write(&file, &component).unwrap();

    let out = Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .args([
            "guest",
            "configmap",
            "--name",
            "guests",
            "--namespace",
            HOST_NS,
        ])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("carried as gpu-summary.wasm."), "{stderr}");
    let cm: ConfigMap = serde_yaml::from_slice(&out.stdout).unwrap();
    // The API server stores it; the kubelet mounts what it stored.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    let stored = cms.create(&PostParams::default(), &cm).await.unwrap();
    let files: BTreeMap<String, Vec<u8>> = stored
        .binary_data
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    let (key, packed) = files.iter().next().unwrap();
    let compression = Compression::of_file_name(key).and_then(|(_, c)| c);
    let compression = compression.expect("a compressed key");
    assert!(packed.len() < component.len() / 2);

    let dir = tempfile::tempdir().unwrap();
    write_like_kubelet(dir.path(), 1, &[(key, packed)]).unwrap();
    let h = run_host(&client, dir_config(dir.path()), None).await;
    pod("a").on("n1").requesting("1").create(&client).await;
    summary_becomes(&client, &[("n1", "1")]).await;

    let health = serve_health(&h.host).await;
    let guests = guests_over_http(health.addr).await;
    let g = &guests["gpu-summary"];
    assert_eq!(g["state"], "loaded");
    assert_eq!(g["source"]["type"], "configmap");
    assert_eq!(g["source"]["key"], key.as_str());
    assert_eq!(g["source"]["compression"], compression.name());
    // The digest is the component's, not the compressed file's.
    assert_eq!(g["digest"], sha256(&component));
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decompression_bomb_and_two_files_for_one_guest_are_refused_by_name_and_the_others_run() {
    let (_server, client) = server().await;
    let gpu = std::fs::read(guest_path()).unwrap();
    let cap = 4 << 20;
    // 16 MiB of zeros: a few KiB of gzip.
    let bomb = Compression::Gzip
        .compress_best(&vec![0u8; 16 << 20])
        .unwrap();
    let twice = guest(
        &WatManifest::writing_its_own_configmap("twice", HOST_NS),
        Behaviour::Apply(vec![configmap_doc(HOST_NS, "twice", &[("v", "1")])]),
    );
    let twice_zst = Compression::Zstd.compress_best(&twice).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_like_kubelet(
        dir.path(),
        1,
        &[
            ("gpu-summary.wasm", &gpu),
            ("bomb.wasm.gz", &bomb),
            ("twice.wasm", &twice),
            ("twice.wasm.zst", &twice_zst),
        ],
    )
    .unwrap();
    let metrics = Arc::new(Metrics::new());
    let config = dir_config(dir.path()).decompressed_max(cap);
    let h = run_host(&client, config, Some(metrics.clone())).await;
    pod("a").on("n1").requesting("2").create(&client).await;
    summary_becomes(&client, &[("n1", "2")]).await;

    assert_eq!(refused(&metrics, "bomb", "too_large"), 1.0);
    assert_eq!(refused(&metrics, "twice", "ambiguous"), 1.0);
    let detail = h.host.refused().join("\n");
    let bomb_why = format!("bomb.wasm.gz: decompresses to more than {cap} bytes");
    let twice_why = "twice is given by 2 files (twice.wasm, twice.wasm.zst): keep one";
    assert!(
        detail.contains(&format!("guest bomb: {bomb_why}")),
        "{detail}"
    );
    assert!(
        detail.contains(&format!("guest twice: {twice_why}")),
        "{detail}"
    );
    let health = serve_health(&h.host).await;
    let guests = guests_over_http(health.addr).await;
    assert_eq!(guests["bomb"]["state"], "refused");
    assert_eq!(guests["bomb"]["reason"], "too_large");
    assert_eq!(guests["bomb"]["source"]["compression"], "gzip");
    assert_eq!(guests["twice"]["reason"], "ambiguous");
    assert_eq!(guests["gpu-summary"]["state"], "loaded");
    eventually("a GuestRefused Event for each", || async {
        let notes = host_event_notes(&client, "GuestRefused", true).await;
        let refused = |guest: &str, why: &str| {
            let start = format!("guest {guest} from {}", dir.path().display());
            notes
                .iter()
                .any(|n| n.starts_with(&start) && n.ends_with(why))
        };
        refused("bomb", "refused without reading further") && refused("twice", twice_why)
    })
    .await;

    // One file for each guest: `twice` loads from its zstd file, and the
    // GPU summary swapped to its gzip form runs the same component.
    let gpu_gz = Compression::Gzip.compress_best(&gpu).unwrap();
    write_like_kubelet(
        dir.path(),
        2,
        &[
            ("gpu-summary.wasm.gz", &gpu_gz),
            ("twice.wasm.zst", &twice_zst),
        ],
    )
    .unwrap();
    eventually("twice runs; the GPU summary is swapped", || async {
        let guests = guests_over_http(health.addr).await;
        guests["twice"]["state"] == "loaded"
            && guests["gpu-summary"]["source"]["key"] == "gpu-summary.wasm.gz"
            && !guests.contains_key("bomb")
    })
    .await;
    let guests = guests_over_http(health.addr).await;
    assert_eq!(guests["twice"]["digest"], sha256(&twice));
    assert_eq!(guests["gpu-summary"]["digest"], sha256(&gpu));
    assert!(guests["gpu-summary"]["last_swap"].is_string());
    assert!(h.host.refused().is_empty(), "{:?}", h.host.refused());
    h.stop().await.unwrap();
}
