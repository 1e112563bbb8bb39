//! Guests of one host isolated from each other: two guests never fight over
//! one object (refused at load when their write rules name it, refused per
//! plan when one writes any name), a guest refused at start is refused
//! alone while the others run, and a guest whose calls keep looping is
//! quarantined so its neighbours keep their cores.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::{Api, Client};

use crate::support::guests::{dir_config, refused};
use crate::support::wat::{
    configmap_doc, guest, trapping_in_describe, Behaviour, WatKeys, WatManifest, WatWatch,
};
use crate::support::*;
use wasmctrl::controller::ControllerConfig;
use wasmctrl::guest::RuntimeConfig;
use wasmctrl::metrics::Metrics;
use wasmctrl::quarantine::QuarantineConfig;
use wasmctrl::supervisor::guest_dir::write_like_kubelet;
use wasmctrl::supervisor::{Supervisor, SupervisorConfig};

/// The host's own Pod, which guest Events regard.
const POD: &str = "wasmctrl-0";

/// A guest named `name` that applies `data` to ConfigMap `ops/target`;
/// its write rule names `target` (`Some`) or allows any name (`None`).
fn writer(name: &str, rule_names: Option<&[&str]>, target: &str, data: &[(&str, &str)]) -> Vec<u8> {
    let mut m = WatManifest::writing_its_own_configmap(name, HOST_NS);
    m.writes[0].names = rule_names
        .map(|n| n.iter().map(|s| s.to_string()).collect())
        .unwrap_or_default();
    guest(
        &m,
        Behaviour::Apply(vec![configmap_doc(HOST_NS, target, data)]),
    )
}

/// The GPU summary's rival from issue 22: names `ops/gpu-summary` in its
/// write rule and writes `n1=999` there.
fn thief() -> Vec<u8> {
    writer(
        "thief",
        Some(&["gpu-summary"]),
        "gpu-summary",
        &[("n1", "999")],
    )
}

fn files_config(dir: &Path, files: &[(&str, &[u8])]) -> SupervisorConfig {
    let mut guests = Vec::new();
    for (name, bytes) in files {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        guests.push(path);
    }
    SupervisorConfig {
        guests,
        namespace: HOST_NS.into(),
        runtime: RuntimeConfig::default().cache_dir(None),
        pod: Some((HOST_NS.into(), POD.into())),
        ..SupervisorConfig::default()
    }
}

fn writes_refused(metrics: &Metrics, guest: &str, owner: &str) -> f64 {
    prom::metric(
        &metrics.encode(),
        "wasmctrl_writes_refused_total",
        &[&format!("guest=\"{guest}\""), &format!("owner=\"{owner}\"")],
    )
}

/// The Events on the host's Pod with `reason`.
async fn pod_events(client: &Client, reason: &str) -> Vec<Event> {
    crate::support::guests::pod_events(client, POD, reason).await
}

/// The host's field managers (`wasmctrl/GUEST`) of ConfigMap `ops/name`.
async fn managers(client: &Client, name: &str) -> Vec<String> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    cms.get_opt(name)
        .await
        .unwrap()
        .and_then(|cm| cm.metadata.managed_fields)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .filter(|m| m.starts_with("wasmctrl/"))
        .collect()
}

async fn data_of(client: &Client, name: &str, key: &str) -> Option<String> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    cms.get_opt(name)
        .await
        .unwrap()
        .and_then(|cm| cm.data)
        .and_then(|d| d.get(key).cloned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_whose_write_rule_names_another_guests_object_is_refused_and_the_other_runs() {
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let gpu = std::fs::read(guest_path()).unwrap();
    let metrics = Arc::new(Metrics::new());
    let config = files_config(
        dir.path(),
        &[("gpu-summary.wasm", &gpu), ("thief.wasm", &thief())],
    );
    let h = run_host(&client, config, Some(metrics.clone())).await;

    assert!(
        h.host.controller("thief").is_none(),
        "thief refused at load"
    );
    assert!(h.host.controller("gpu-summary").is_some());
    assert_eq!(refused(&metrics, "thief", "write_overlap"), 1.0);
    let detail = h.host.refused().join("\n");
    assert!(
        detail.contains(
            "guest thief: writes[0] (v1/ConfigMap in namespace ops, names gpu-summary) can name the same object as writes[0] (v1/ConfigMap in namespace ops, names gpu-summary) of guest gpu-summary: v1/ConfigMap ops/gpu-summary"
        ),
        "{detail}"
    );
    pod("p").on("n1").requesting("1").create(&client).await;
    summary_becomes(&client, &[("n1", "1")]).await;
    h.host.readiness().unwrap();
    eventually("a GuestRefused Event on the host's Pod", || async {
        pod_events(&client, "GuestRefused").await.iter().any(|e| {
            e.note
                .as_deref()
                .unwrap_or_default()
                .contains("guest thief")
        })
    })
    .await;
    assert_eq!(
        managers(&client, "gpu-summary").await,
        ["wasmctrl/gpu-summary"]
    );
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_swap_whose_write_rule_names_another_guests_object_is_rejected_and_the_old_version_runs(
) {
    let (_server, client) = server().await;
    let gpu = std::fs::read(guest_path()).unwrap();
    let v1 = writer("logic", Some(&["logic"]), "logic", &[("version", "v1")]);
    let dir = tempfile::tempdir().unwrap();
    write_like_kubelet(
        dir.path(),
        1,
        &[("gpu-summary.wasm", &gpu), ("logic.wasm", &v1)],
    )
    .unwrap();
    let metrics = Arc::new(Metrics::new());
    let h = run_host(&client, dir_config(dir.path()), Some(metrics.clone())).await;
    eventually("logic v1 writes", || async {
        data_of(&client, "logic", "version").await.as_deref() == Some("v1")
    })
    .await;
    let before = h.host.controller("logic").unwrap();

    // v2 also names the GPU summary's ConfigMap.
    let mut m = WatManifest::writing_its_own_configmap("logic", HOST_NS);
    m.writes[0].names = vec!["logic".into(), "gpu-summary".into()];
    let v2 = guest(
        &m,
        Behaviour::Apply(vec![configmap_doc(HOST_NS, "logic", &[("version", "v2")])]),
    );
    write_like_kubelet(
        dir.path(),
        2,
        &[("gpu-summary.wasm", &gpu), ("logic.wasm", &v2)],
    )
    .unwrap();
    eventually("the swap is rejected", || async {
        prom::metric(
            &metrics.encode(),
            "wasmctrl_guest_swaps_total",
            &["guest=\"logic\"", "result=\"rejected\""],
        ) == 1.0
    })
    .await;
    assert!(Arc::ptr_eq(&before, &h.host.controller("logic").unwrap()));
    assert_eq!(
        data_of(&client, "logic", "version").await.as_deref(),
        Some("v1")
    );
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_writing_any_name_cannot_take_an_object_another_guest_names() {
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let gpu = std::fs::read(guest_path()).unwrap();
    // Any ConfigMap in ops: cannot be decided at load, so it loads.
    let rogue = writer("rogue", None, "gpu-summary", &[("n1", "999")]);
    let metrics = Arc::new(Metrics::new());
    let config = files_config(
        dir.path(),
        &[("rogue.wasm", &rogue), ("gpu-summary.wasm", &gpu)],
    );
    let h = run_host(&client, config, Some(metrics.clone())).await;
    assert!(h.host.controller("rogue").is_some(), "rogue loads");
    pod("p").on("n1").requesting("1").create(&client).await;
    summary_becomes(&client, &[("n1", "1")]).await;
    eventually("rogue's plans are refused, naming the owner", || async {
        writes_refused(&metrics, "rogue", "gpu-summary") >= 1.0
    })
    .await;
    stays_for(
        Duration::from_secs(2),
        "the summary stays the GPU summary's",
        || async { data_of(&client, "gpu-summary", "n1").await.as_deref() == Some("1") },
    )
    .await;
    assert_eq!(
        managers(&client, "gpu-summary").await,
        ["wasmctrl/gpu-summary"]
    );
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_of_two_guests_writing_one_object_claims_it_until_it_is_unloaded() {
    let (_server, client) = server().await;
    let a = writer("alpha", None, "shared", &[("writer", "alpha")]);
    let b = writer("beta", None, "shared", &[("writer", "beta")]);
    let dir = tempfile::tempdir().unwrap();
    write_like_kubelet(dir.path(), 1, &[("alpha.wasm", &a), ("beta.wasm", &b)]).unwrap();
    let metrics = Arc::new(Metrics::new());
    let h = run_host(&client, dir_config(dir.path()), Some(metrics.clone())).await;
    eventually("one guest's plan is refused", || async {
        writes_refused(&metrics, "alpha", "beta") + writes_refused(&metrics, "beta", "alpha") >= 1.0
    })
    .await;
    let winner = data_of(&client, "shared", "writer").await.expect("written");
    let loser = if winner == "alpha" { "beta" } else { "alpha" };
    assert_eq!(writes_refused(&metrics, &winner, loser), 0.0);
    stays_for(
        Duration::from_secs(2),
        "no war: the winner's value stays",
        || async { data_of(&client, "shared", "writer").await.as_deref() == Some(winner.as_str()) },
    )
    .await;
    assert_eq!(
        managers(&client, "shared").await,
        [format!("wasmctrl/{winner}")]
    );

    // The winner is unloaded: its claim ends, and the other guest writes.
    let left: &[u8] = if loser == "alpha" { &a } else { &b };
    write_like_kubelet(dir.path(), 2, &[(&format!("{loser}.wasm"), left)]).unwrap();
    eventually("the other guest takes the object over", || async {
        data_of(&client, "shared", "writer").await.as_deref() == Some(loser)
    })
    .await;
    h.stop().await.unwrap();
}

/// Leaky watches every Secret without a grant: refused by the policy.
fn leaky() -> Vec<u8> {
    let mut m = WatManifest::writing_its_own_configmap("leaky", HOST_NS);
    m.watches.push(WatWatch {
        name: "secrets".into(),
        kind: "Secret".into(),
        plural: Some("secrets".into()),
        fields: vec!["data".into()],
        ..WatWatch::pods("secrets", WatKeys::Aggregate("all".into()))
    });
    guest(
        &m,
        Behaviour::Apply(vec![configmap_doc(HOST_NS, "leaky", &[("x", "y")])]),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guests_refused_at_start_are_refused_alone_and_the_others_run() {
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let gpu = std::fs::read(guest_path()).unwrap();
    let files: &[(&str, &[u8])] = &[
        ("leaky.wasm", &leaky()),
        ("describe-trap.wasm", &trapping_in_describe()),
        ("gpu-summary.wasm", &gpu),
    ];
    let metrics = Arc::new(Metrics::new());
    let h = run_host(
        &client,
        files_config(dir.path(), files),
        Some(metrics.clone()),
    )
    .await;
    assert_eq!(refused(&metrics, "leaky", "policy"), 1.0);
    assert_eq!(refused(&metrics, "describe-trap", "trap"), 1.0);
    pod("p").on("n1").requesting("2").create(&client).await;
    summary_becomes(&client, &[("n1", "2")]).await;

    // Ready (the GPU summary runs), and /readyz names each refused guest.
    let host = h.host.clone();
    let detail = host.clone();
    let health = wasmctrl::metrics::serve_health_with_detail(
        "127.0.0.1:0".parse().unwrap(),
        Arc::new(move || host.readiness()),
        Arc::new(move || detail.refused()),
    )
    .await
    .unwrap();
    eventually("ready", || async {
        http_status(health.addr, "/readyz").await == Some(200)
    })
    .await;
    let (_, body) = http_get(health.addr, "/readyz").await.unwrap();
    assert!(body.starts_with("ok\n"), "{body}");
    assert!(
        body.contains("refused: guest leaky: refused by the operator policy"),
        "{body}"
    );
    assert!(body.contains("refused: guest describe-trap"), "{body}");
    eventually("a GuestRefused Event per refused guest", || async {
        let notes: Vec<String> = pod_events(&client, "GuestRefused")
            .await
            .into_iter()
            .filter_map(|e| e.note)
            .collect();
        notes.iter().any(|n| n.contains("guest leaky"))
            && notes.iter().any(|n| n.contains("describe-trap"))
    })
    .await;
    h.stop().await.unwrap();

    // --strict-guests: the first refusal ends the host, as it did before.
    let strict = SupervisorConfig {
        strict_guests: true,
        ..files_config(dir.path(), files)
    };
    let e = Supervisor::start(client.clone(), strict, None)
        .await
        .err()
        .expect("strict: refused");
    assert!(
        e.to_string()
            .contains("guest leaky: refused by the operator policy"),
        "{e}"
    );

    // No guest can run: the host ends with the refusals.
    let none = files_config(dir.path(), &files[..2]);
    let e = Supervisor::start(client.clone(), none, None)
        .await
        .err()
        .expect("no guest can run");
    assert!(e.to_string().contains("guest leaky"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_looping_guest_is_quarantined_and_its_neighbour_stays_correct() {
    const FAILURES: u32 = 3;
    const WORKERS: usize = 2;
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let gpu = std::fs::read(guest_path()).unwrap();
    // One key per pod, every call runs to the deadline.
    let mut m = WatManifest::writing_its_own_configmap("spinner", HOST_NS);
    m.watches[0].keys = WatKeys::PerObject;
    let spinner = guest(&m, Behaviour::Spin);
    let config = SupervisorConfig {
        controller: ControllerConfig::default().workers(WORKERS).quarantine(
            QuarantineConfig::default()
                .failures(FAILURES)
                .lengths(Duration::from_millis(500), Duration::from_secs(2)),
        ),
        runtime: RuntimeConfig::default()
            .cache_dir(None)
            .deadline(Duration::from_millis(200)),
        ..files_config(
            dir.path(),
            &[("spinner.wasm", &spinner), ("gpu-summary.wasm", &gpu)],
        )
    };
    let metrics = Arc::new(Metrics::new());
    for i in 0..8 {
        pod(&format!("p{i}"))
            .on(&format!("n{}", i % 2))
            .requesting("1")
            .create(&client)
            .await;
    }
    let started = Instant::now();
    let h = run_host(&client, config, Some(metrics.clone())).await;
    summary_becomes(&client, &[("n0", "4"), ("n1", "4")]).await;
    let spinner = h.host.controller("spinner").unwrap();
    // Three quarantines: after the first, its keys came back when it ended.
    eventually("the spinner is quarantined three times", || async {
        spinner.metrics().quarantines() >= 3
    })
    .await;
    let deadline_failures = |text: &str| {
        prom::metric(
            text,
            "wasmctrl_guest_failures_total",
            &["guest=\"spinner\"", "reason=\"deadline\""],
        )
    };
    let failures = deadline_failures(&metrics.encode());
    let quarantines = spinner.metrics().quarantines();
    let elapsed = started.elapsed();
    eprintln!(
        "spinner: {failures} calls to the deadline and {quarantines} quarantines in {elapsed:?}"
    );
    // Each quarantine is started by at most one call per worker (the first
    // by FAILURES), and at most one call per worker is past the last one.
    let bound = f64::from(FAILURES) + (WORKERS as f64) * (quarantines as f64 + 1.0);
    assert!(failures <= bound, "{failures} calls, over {bound}");
    // The neighbour stays correct while it loops.
    pod("late").on("n1").requesting("3").create(&client).await;
    summary_becomes(&client, &[("n0", "4"), ("n1", "7")]).await;
    let healthy = h.host.controller("gpu-summary").unwrap();
    assert_eq!(healthy.metrics().errors(), 0);
    eventually("a GuestQuarantined Event on the host's Pod", || async {
        !pod_events(&client, "GuestQuarantined").await.is_empty()
    })
    .await;
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_guest_claims_nothing_and_keeps_its_objects_when_a_rival_is_loaded() {
    let (_server, client) = server().await;
    let a = writer("alpha", None, "early", &[("writer", "alpha")]);
    let b = writer("beta", None, "early", &[("writer", "beta")]);
    let dir = tempfile::tempdir().unwrap();
    write_like_kubelet(dir.path(), 1, &[("alpha.wasm", &a)]).unwrap();
    let metrics = Arc::new(Metrics::new());
    let h = run_host(&client, dir_config(dir.path()), Some(metrics.clone())).await;
    eventually("alpha writes", || async {
        data_of(&client, "early", "writer").await.as_deref() == Some("alpha")
    })
    .await;
    let alpha = h.host.controller("alpha").unwrap();
    eventually("alpha is idle", || async { idle(&alpha, &metrics) }).await;
    // No other guest could name it: no claim is kept.
    assert_eq!(h.host.claims().len(), 0, "a lone guest claims nothing");

    // A guest that can name it is loaded: what alpha wrote is alpha's.
    write_like_kubelet(dir.path(), 2, &[("alpha.wasm", &a), ("beta.wasm", &b)]).unwrap();
    eventually("beta's plan is refused", || async {
        writes_refused(&metrics, "beta", "alpha") >= 1.0
    })
    .await;
    let early = wasmctrl::guest::ObjectKey {
        gvk: wasmctrl::guest::Gvk::from_api_version("v1", "ConfigMap"),
        namespace: Some(HOST_NS.into()),
        name: "early".into(),
    };
    assert_eq!(h.host.claims().owner(&early).as_deref(), Some("alpha"));
    assert_eq!(writes_refused(&metrics, "alpha", "beta"), 0.0);
    assert_eq!(
        data_of(&client, "early", "writer").await.as_deref(),
        Some("alpha")
    );
    h.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_whose_configuration_file_is_unusable_is_refused_under_its_declared_name() {
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let gpu = std::fs::read(guest_path()).unwrap();
    // Another guest runs, so the host starts.
    let logic = writer("logic", Some(&["logic"]), "logic", &[("version", "v1")]);
    write_like_kubelet(
        dir.path(),
        1,
        &[
            ("summary.wasm", &gpu),
            ("summary.config.json", b"[1]"),
            ("logic.wasm", &logic),
        ],
    )
    .unwrap();
    let metrics = Arc::new(Metrics::new());
    let h = run_host(&client, dir_config(dir.path()), Some(metrics.clone())).await;
    assert_eq!(refused(&metrics, "gpu-summary", "config"), 1.0);
    let why = h.host.refused().join("\n");
    assert!(
        why.contains("refused: guest gpu-summary (summary.wasm): ")
            && why.contains("summary.config.json"),
        "{why}"
    );
    h.stop().await.unwrap();
}
