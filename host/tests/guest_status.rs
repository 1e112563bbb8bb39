//! Each guest's state as an operator sees it: `GET /guests` on the health
//! address and `wasmctrl guests` over a running host (loaded, a bad hot
//! swap refused with its reason while the old version runs, a shadow),
//! and the Events on the host's Pod for every load, swap, refusal, wait
//! and removal — real HTTPS, real kube client.

use crate::support::guests::{
    dir_config, guests_over_http, host_event_notes, serve_health, sha256,
};
use crate::support::wat::{configmap_doc, guest, Behaviour, WatKeys, WatManifest, WatWatch};
use crate::support::*;
use wasmctrl::supervisor::guest_dir::write_like_kubelet;

/// A guest named `name` writing ConfigMap `name` with `version`.
fn writer(name: &str, version: &str) -> Vec<u8> {
    guest(
        &WatManifest::writing_its_own_configmap(name, HOST_NS),
        Behaviour::Apply(vec![configmap_doc(HOST_NS, name, &[("version", version)])]),
    )
}

/// `wasmctrl guests --address ADDR`'s output.
async fn wasmctrl_guests(addr: std::net::SocketAddr) -> String {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_wasmctrl"))
        .args(["guests", "--address", &addr.to_string()])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guests_shows_each_guest_loaded_a_refused_swap_beside_the_running_version_and_a_shadow() {
    let (_server, client) = server().await;
    let gpu = std::fs::read(guest_path()).unwrap();
    let v1 = writer("logic", "v1");
    let dir = tempfile::tempdir().unwrap();
    write_like_kubelet(
        dir.path(),
        1,
        &[
            ("gpu-summary.wasm", &gpu),
            ("gpu-summary.shadow.wasm", &gpu),
            ("logic.wasm", &v1),
        ],
    )
    .unwrap();
    let h = run_host(&client, dir_config(dir.path()), None).await;
    let health = serve_health(&h.host).await;
    pod("a").on("n1").requesting("1").create(&client).await;
    summary_becomes(&client, &[("n1", "1")]).await;

    let guests = guests_over_http(health.addr).await;
    assert_eq!(
        guests.keys().collect::<Vec<_>>(),
        ["gpu-summary", "logic"],
        "a shadow is its guest's, not a guest"
    );
    let g = &guests["gpu-summary"];
    assert_eq!(g["name"], "gpu-summary");
    assert_eq!(g["state"], "loaded");
    assert_eq!(g["digest"], sha256(&gpu));
    assert_eq!(g["contract"], wasmctrl::guest::CONTRACT_VERSION);
    assert_eq!(
        g["source"]["path"],
        dir.path().join("gpu-summary.wasm").display().to_string()
    );
    assert_eq!(g["shadow"]["state"], "loaded");
    assert_eq!(g["shadow"]["source"]["key"], "gpu-summary.shadow.wasm");
    assert!(g["reconciles"].as_u64().unwrap() >= 1, "{g}");
    assert_eq!(g["errors"], 0);
    assert!(g["last_swap"].is_null() && g["candidate"].is_null());

    // A bad version of logic: refused with its reason; v1 runs on.
    let before = h.host.controller("logic").unwrap();
    let bad = b"\0asm not really".to_vec();
    let files = |generation: u32, logic: &[u8]| {
        let files = [
            ("gpu-summary.wasm", &gpu[..]),
            ("gpu-summary.shadow.wasm", &gpu[..]),
            ("logic.wasm", logic),
        ];
        write_like_kubelet(dir.path(), generation, &files).unwrap();
    };
    files(2, &bad);
    eventually("the bad version is refused", || async {
        guests_over_http(health.addr).await["logic"]["candidate"]["state"] == "refused"
    })
    .await;
    let logic = &guests_over_http(health.addr).await["logic"];
    assert_eq!(logic["state"], "loaded");
    assert_eq!(logic["digest"], sha256(&v1));
    let candidate = &logic["candidate"];
    assert_eq!(candidate["reason"], "compile");
    assert_eq!(candidate["digest"], sha256(&bad));
    assert!(
        candidate["message"]
            .as_str()
            .unwrap()
            .contains("logic.wasm"),
        "{candidate}"
    );
    assert!(std::sync::Arc::ptr_eq(
        &before,
        &h.host.controller("logic").unwrap()
    ));

    let table = wasmctrl_guests(health.addr).await;
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("GUEST        SOURCE"), "{table}");
    let row = |name: &str| {
        let row = lines.iter().find(|l| l.starts_with(name)).unwrap();
        row.split_whitespace()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let short = |bytes: &[u8]| sha256(bytes)[..12].to_string();
    assert_eq!(
        row("gpu-summary")[1..6],
        [
            "gpu-summary.wasm".to_string(),
            short(&gpu),
            "0.3.0".into(),
            "loaded".into(),
            "loaded".into()
        ]
    );
    assert_eq!(
        row("logic")[1..5],
        [
            "logic.wasm".to_string(),
            short(&v1),
            "0.3.0".into(),
            "loaded".into()
        ]
    );
    let refusal = format!("  new version refused {} from logic.wasm: ", short(&bad));
    assert!(lines.iter().any(|l| l.starts_with(&refusal)), "{table}");

    // Back to v1's file: nothing to swap, and nothing refused any more.
    files(3, &v1);
    eventually("the refused version is forgotten", || async {
        let _ = h.host.sync_dir().await;
        guests_over_http(health.addr).await["logic"]["candidate"].is_null()
    })
    .await;
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loads_swaps_refusals_waits_and_removals_are_events_on_the_hosts_pod() {
    let (_server, client) = server().await;
    let gpu = std::fs::read(guest_path()).unwrap();
    let (v1, v2) = (writer("logic", "v1"), writer("logic", "v2"));
    let dir = tempfile::tempdir().unwrap();
    write_like_kubelet(
        dir.path(),
        1,
        &[("gpu-summary.wasm", &gpu), ("logic.wasm", &v1)],
    )
    .unwrap();
    let h = run_host(&client, dir_config(dir.path()), None).await;
    let has = |reason: &'static str, warning: bool, parts: Vec<String>| {
        let client = client.clone();
        async move {
            host_event_notes(&client, reason, warning)
                .await
                .iter()
                .any(|n| parts.iter().all(|p| n.contains(p.as_str())))
        }
    };
    let short = |bytes: &[u8]| sha256(bytes)[..12].to_string();
    for (name, bytes) in [("gpu-summary", &gpu), ("logic", &v1)] {
        let parts = vec![format!("guest {name} loaded from "), short(bytes)];
        eventually("a GuestLoaded Event for each guest at start", || {
            has("GuestLoaded", false, parts.clone())
        })
        .await;
    }

    // Swapped; a bad version rejected while v2 runs; a new guest waiting
    // for a kind not served; a new guest refused; a shadow attached.
    let mut widgets = WatManifest::writing_its_own_configmap("widgets", HOST_NS);
    widgets.watches.push(WatWatch::widgets(
        "widgets",
        WatKeys::Aggregate("all".into()),
        None,
    ));
    let widgets = guest(&widgets, Behaviour::Apply(vec![]));
    write_like_kubelet(
        dir.path(),
        2,
        &[("gpu-summary.wasm", &gpu), ("logic.wasm", &v2)],
    )
    .unwrap();
    let parts = vec![
        "guest logic swapped to ".to_string(),
        short(&v2),
        format!("replacing sha256 {}", short(&v1)),
    ];
    eventually("GuestSwapped", || has("GuestSwapped", false, parts.clone())).await;
    write_like_kubelet(
        dir.path(),
        3,
        &[
            ("gpu-summary.wasm", &gpu),
            ("gpu-summary.shadow.wasm", &gpu),
            ("logic.wasm", b"\0asm not really"),
            ("widgets.wasm", &widgets),
            ("broken.wasm", b"not wasm"),
        ],
    )
    .unwrap();
    let parts = vec![
        "guest logic: the version from ".to_string(),
        format!(
            "refused, the running one (sha256 {}) keeps running",
            short(&v2)
        ),
    ];
    eventually("GuestRejected", || {
        has("GuestRejected", true, parts.clone())
    })
    .await;
    let parts = vec![
        "guest widgets from ".to_string(),
        "waiting: waiting for".into(),
        "Widget".into(),
    ];
    eventually("GuestWaiting", || has("GuestWaiting", true, parts.clone())).await;
    let parts = vec![
        "guest broken from ".to_string(),
        "broken.wasm".into(),
        "refused: ".into(),
    ];
    eventually("GuestRefused", || has("GuestRefused", true, parts.clone())).await;
    let parts = vec![
        "gpu-summary.shadow.wasm".to_string(),
        "runs as the shadow of guest gpu-summary".into(),
    ];
    eventually("ShadowLoaded", || has("ShadowLoaded", false, parts.clone())).await;
    // A retried wait is no new Event.
    h.host.sync_dir().await.unwrap();
    assert_eq!(
        host_event_notes(&client, "GuestWaiting", true).await.len(),
        1
    );

    // The shadow and the GPU summary go in one update (this deadlocked
    // the host once: see `controller_by_key_or_name`); logic stays.
    write_like_kubelet(dir.path(), 4, &[("logic.wasm", &v2)]).unwrap();
    let parts = vec![
        "guest gpu-summary removed (".to_string(),
        "gpu-summary.wasm is gone); its outputs are left in place".into(),
    ];
    eventually("GuestRemoved", || has("GuestRemoved", false, parts.clone())).await;
    // Each Event names the host as its reporter and regards its Pod.
    let events = events_with_reason(&client, Some(HOST_NS), "GuestSwapped").await;
    let e = &events[0];
    assert_eq!(e.reporting_controller.as_deref(), Some("wasmctrl"));
    let regarding = e.regarding.as_ref().unwrap();
    assert_eq!(
        (regarding.kind.as_deref(), regarding.namespace.as_deref()),
        (Some("Pod"), Some(HOST_NS))
    );
    h.stop().await.unwrap();
}
