//! Hot swap from a ConfigMap-volume-style directory, and isolation between
//! guests in one host — real HTTPS, real kube client.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::support::wat::{configmap_doc, guest, Behaviour, WatManifest};
use crate::support::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};
use wasmctrl::controller::ControllerConfig;
use wasmctrl::guest::RuntimeConfig;
use wasmctrl::metrics::Metrics;
use wasmctrl::supervisor::guest_dir::write_like_kubelet;
use wasmctrl::supervisor::SupervisorConfig;

/// How long a test watches for a write that must not come.
const NOT_UPDATED: Duration = Duration::from_millis(500);

fn logic(version: &str) -> Vec<u8> {
    guest(
        &WatManifest::writing_its_own_configmap("logic", HOST_NS),
        Behaviour::Apply(vec![configmap_doc(
            HOST_NS,
            "logic",
            &[("version", version)],
        )]),
    )
}

async fn logic_version(client: &Client) -> Option<String> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    cms.get_opt("logic")
        .await
        .unwrap()
        .and_then(|cm| cm.data)
        .and_then(|d| d.get("version").cloned())
}

/// A ConfigMap-volume-style directory holding `files` as its first version.
fn guest_dir(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_like_kubelet(dir.path(), 1, files).unwrap();
    dir
}

struct DirHost {
    running: RunningHost,
    metrics: Arc<Metrics>,
}

async fn start_dir_host(client: &Client, dir: &Path, runtime: RuntimeConfig) -> DirHost {
    let metrics = Arc::new(Metrics::new());
    let config = SupervisorConfig {
        guest_dir: Some(dir.to_path_buf()),
        namespace: HOST_NS.into(),
        controller: ControllerConfig::default(),
        runtime: runtime.cache_dir(None),
        rescan: Some(Duration::from_secs(60)),
        ..SupervisorConfig::default()
    };
    DirHost {
        running: run_host(client, config, Some(metrics.clone())).await,
        metrics,
    }
}

/// `wasmctrl_guest_swaps_total` of `guest` with `result`.
fn swaps(metrics: &Metrics, guest: &str, result: &str) -> f64 {
    let labels = [format!("guest=\"{guest}\""), format!("result=\"{result}\"")];
    prom::metric(
        &metrics.encode(),
        "wasmctrl_guest_swaps_total",
        &[&labels[0], &labels[1]],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_symlink_swap_switches_logic_without_a_restart() {
    let (_server, client) = server().await;
    let gpu = std::fs::read(guest_path()).unwrap();
    let v1 = logic("v1");
    let dir = guest_dir(&[("logic.wasm", &v1), ("gpu-summary.wasm", &gpu)]);
    pod("a").on("n1").requesting("1").create(&client).await;
    let h = start_dir_host(&client, dir.path(), RuntimeConfig::default()).await;
    eventually("v1 writes", || async {
        logic_version(&client).await.as_deref() == Some("v1")
    })
    .await;
    summary_becomes(&client, &[("n1", "1")]).await;
    let gpu_controller = h.running.host.controller("gpu-summary").unwrap();
    let pod_informers = || {
        h.running
            .host
            .registry()
            .all()
            .into_iter()
            .filter(|i| i.key().plural == "pods")
            .count()
    };
    // One for the logic guest (no selector), one for the GPU guest's
    // field selector.
    assert_eq!(pod_informers(), 2);

    // The kubelet swaps `..data`: a new module for one guest and a new
    // configuration for the other, in one atomic step.
    let v2 = logic("v2");
    write_like_kubelet(
        dir.path(),
        2,
        &[
            ("logic.wasm", &v2),
            ("gpu-summary.wasm", &gpu),
            ("gpu-summary.config.json", br#"{"resource": "amd.com/gpu"}"#),
        ],
    )
    .unwrap();
    eventually("v2 writes", || async {
        logic_version(&client).await.as_deref() == Some("v2")
    })
    .await;
    // The new GPU logic counts amd.com/gpu: no pod requests any.
    summary_becomes(&client, &[]).await;
    // Counted right after the new controller starts, so possibly after
    // its first write.
    eventually("both swaps counted", || async {
        swaps(&h.metrics, "logic", "swapped") == 1.0
            && swaps(&h.metrics, "gpu-summary", "swapped") == 1.0
    })
    .await;
    // Informers were replaced or shared across the swap, never leaked.
    assert_eq!(pod_informers(), 2);
    assert!(!Arc::ptr_eq(
        &gpu_controller,
        &h.running.host.controller("gpu-summary").unwrap()
    ));
    // The host was not restarted: the same task is still running.
    assert!(!h.running.is_finished());

    // Nothing is lost across the swap: a change right after is seen.
    pod("b").on("n2").requesting("1").create(&client).await;
    write_like_kubelet(
        dir.path(),
        3,
        &[("logic.wasm", &v2), ("gpu-summary.wasm", &gpu)],
    )
    .unwrap();
    summary_becomes(&client, &[("n1", "1"), ("n2", "1")]).await;
    h.running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_module_is_rejected_and_the_old_one_keeps_running() {
    let (_server, client) = server().await;
    let gpu = std::fs::read(guest_path()).unwrap();
    let dir = guest_dir(&[("gpu-summary.wasm", &gpu)]);
    let h = start_dir_host(&client, dir.path(), RuntimeConfig::default()).await;
    summary_becomes(&client, &[]).await;
    let before = h.running.host.controller("gpu-summary").unwrap();

    write_like_kubelet(dir.path(), 2, &[("gpu-summary.wasm", b"\0asm not really")]).unwrap();
    eventually("rejection counted", || async {
        swaps(&h.metrics, "gpu-summary", "rejected") == 1.0
    })
    .await;
    assert!(
        Arc::ptr_eq(&before, &h.running.host.controller("gpu-summary").unwrap()),
        "old module still in place"
    );
    pod("a").on("n1").requesting("2").create(&client).await;
    summary_becomes(&client, &[("n1", "2")]).await;

    // A bad configuration is rejected the same way.
    write_like_kubelet(
        dir.path(),
        3,
        &[
            ("gpu-summary.wasm", &gpu),
            ("gpu-summary.config.json", br#"{"bogus": "1"}"#),
        ],
    )
    .unwrap();
    eventually("second rejection", || async {
        swaps(&h.metrics, "gpu-summary", "rejected") == 2.0
    })
    .await;
    pod("b").on("n1").requesting("1").create(&client).await;
    summary_becomes(&client, &[("n1", "3")]).await;
    h.running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_guest_stops_it_and_leaves_its_outputs() {
    let (_server, client) = server().await;
    let gpu = std::fs::read(guest_path()).unwrap();
    let v1 = logic("v1");
    let dir = guest_dir(&[("logic.wasm", &v1), ("gpu-summary.wasm", &gpu)]);
    let h = start_dir_host(&client, dir.path(), RuntimeConfig::default()).await;
    pod("a").on("n1").requesting("1").create(&client).await;
    summary_becomes(&client, &[("n1", "1")]).await;

    write_like_kubelet(dir.path(), 2, &[("logic.wasm", &v1)]).unwrap();
    // The swap is counted once the removed guest's queue has drained.
    eventually("removed", || async {
        h.running.host.controller("gpu-summary").is_none()
            && swaps(&h.metrics, "gpu-summary", "removed") == 1.0
    })
    .await;
    // The host still watches pods (for "logic"): once logic has reconciled
    // the new pod, the host has seen it, and the summary must not follow.
    let logic = h.running.host.controller("logic").unwrap();
    eventually("logic is idle", || async { idle(&logic, &h.metrics) }).await;
    let reconciles = || logic.metrics().reconciles();
    let before = reconciles();
    pod("b").on("n1").requesting("5").create(&client).await;
    eventually("logic reconciles the new pod", || async {
        reconciles() > before
    })
    .await;
    stays_for(NOT_UPDATED, "the removed guest's summary stays", || async {
        summary(&client).await == Some(data(&[("n1", "1")]))
    })
    .await;
    assert_eq!(
        summary(&client).await,
        Some(data(&[("n1", "1")])),
        "outputs left in place, no longer updated"
    );
    assert!(
        h.running.host.controller("logic").is_some(),
        "the other guest keeps running"
    );
    h.running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_guests_are_backed_off_and_do_not_delay_a_healthy_one() {
    let (_server, client) = server().await;
    let gpu = std::fs::read(guest_path()).unwrap();
    let hostile =
        |name: &str, b: Behaviour| guest(&WatManifest::writing_its_own_configmap(name, HOST_NS), b);
    let trap = hostile("trapper", Behaviour::Trap);
    let spin = hostile("spinner", Behaviour::Spin);
    // Writes a ConfigMap it did not declare.
    let thief = hostile(
        "thief",
        Behaviour::Apply(vec![configmap_doc(
            HOST_NS,
            "gpu-summary",
            &[("n1", "999")],
        )]),
    );
    let dir = guest_dir(&[
        ("gpu-summary.wasm", &gpu),
        ("trapper.wasm", &trap),
        ("spinner.wasm", &spin),
        ("thief.wasm", &thief),
    ]);
    let h = start_dir_host(
        &client,
        dir.path(),
        RuntimeConfig::default().deadline(Duration::from_millis(200)),
    )
    .await;
    summary_becomes(&client, &[]).await;
    // The healthy guest keeps reconciling on time while the others fail.
    for (i, node) in ["n1", "n2", "n3"].iter().enumerate() {
        pod(&format!("p{i}"))
            .on(node)
            .requesting("1")
            .create(&client)
            .await;
    }
    summary_becomes(&client, &[("n1", "1"), ("n2", "1"), ("n3", "1")]).await;
    let hostile = [
        ("trapper", "trap"),
        ("spinner", "deadline"),
        ("thief", "forbidden_write"),
    ];
    let failure_line = |guest: &str, reason: &str| {
        format!("wasmctrl_guest_failures_total{{guest=\"{guest}\",reason=\"{reason}\"}}")
    };
    eventually("every hostile guest failed and was backed off", || async {
        let text = h.metrics.encode();
        hostile.iter().all(|(guest, reason)| {
            let c = h.running.host.controller(guest).unwrap();
            text.contains(&failure_line(guest, reason))
                && c.metrics().errors() >= 1
                && c.queue()
                    .num_requeues(&wasmctrl::request::RequestKey::aggregate("all"))
                    >= 1
        })
    })
    .await;
    let text = h.metrics.encode();
    for (guest, reason) in hostile {
        let line = failure_line(guest, reason);
        assert!(text.contains(&line), "missing {line}");
        let c = h.running.host.controller(guest).unwrap();
        assert!(c.metrics().errors() >= 1);
        assert!(
            c.queue()
                .num_requeues(&wasmctrl::request::RequestKey::aggregate("all"))
                >= 1,
            "{guest} is backed off"
        );
    }
    // The thief never wrote: the summary is the healthy guest's.
    assert_eq!(
        summary(&client).await,
        Some(data(&[("n1", "1"), ("n2", "1"), ("n3", "1")]))
    );
    let healthy = h.running.host.controller("gpu-summary").unwrap();
    assert_eq!(healthy.metrics().errors(), 0);
    h.running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_guest_needing_a_permission_the_host_lacks_is_rejected_and_the_others_keep_running() {
    use wasmctrl_apiserver::{Rule, User};
    let (server, admin) = server().await;
    // Every ConfigMap in the host's namespace may be read, but only the GPU
    // guest's may be patched.
    server.add_token(
        "host",
        User::with_rules(
            "host-sa",
            vec![
                Rule::new(&["get", "list", "watch"], &["pods"]),
                Rule::new(&["get", "list", "watch"], &["configmaps"]).in_namespace(HOST_NS),
                Rule::new(&["patch"], &["configmaps"])
                    .in_namespace(HOST_NS)
                    .named(&["gpu-summary"]),
                Rule::new(&["create"], &["configmaps"]).in_namespace(HOST_NS),
                Rule::new(&["create", "patch"], &["events"]),
            ],
        ),
    );
    let client = server.client_for_token("host").await.unwrap();
    let gpu = std::fs::read(guest_path()).unwrap();
    let dir = guest_dir(&[("gpu-summary.wasm", &gpu)]);
    let h = start_dir_host(&client, dir.path(), RuntimeConfig::default()).await;
    pod("a").on("n1").requesting("1").create(&admin).await;
    summary_becomes(&admin, &[("n1", "1")]).await;

    // "logic" writes ConfigMap "logic". Its caches would sync and every
    // apply would then fail with 403 into a backoff; the preflight finds
    // the missing patch first, and the guest never starts.
    write_like_kubelet(
        dir.path(),
        2,
        &[("gpu-summary.wasm", &gpu), ("logic.wasm", &logic("v1"))],
    )
    .unwrap();
    eventually("logic rejected", || async {
        swaps(&h.metrics, "logic", "rejected") == 1.0
    })
    .await;
    assert!(h.running.host.controller("logic").is_none());
    assert_eq!(logic_version(&admin).await, None, "it never wrote");
    pod("b").on("n1").requesting("2").create(&admin).await;
    summary_becomes(&admin, &[("n1", "3")]).await;
    h.running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_version_is_not_tried_again_until_its_file_changes() {
    let (_server, client) = server().await;
    let gpu = std::fs::read(guest_path()).unwrap();
    let dir = guest_dir(&[("gpu-summary.wasm", &gpu)]);
    let h = start_dir_host(&client, dir.path(), RuntimeConfig::default()).await;
    summary_becomes(&client, &[]).await;
    let before = h.running.host.controller("gpu-summary").unwrap();

    write_like_kubelet(dir.path(), 2, &[("gpu-summary.wasm", b"\0asm not really")]).unwrap();
    eventually("rejection counted", || async {
        swaps(&h.metrics, "gpu-summary", "rejected") == 1.0
    })
    .await;
    // Rescans of an unchanged directory: the rejected file is not
    // compiled, logged or counted again.
    for _ in 0..5 {
        h.running.host.sync_dir().await.unwrap();
    }
    assert_eq!(
        swaps(&h.metrics, "gpu-summary", "rejected"),
        1.0,
        "an unchanged rejected file is not tried again"
    );
    assert!(Arc::ptr_eq(
        &before,
        &h.running.host.controller("gpu-summary").unwrap()
    ));

    // A changed file is tried again (and rejected again, once).
    write_like_kubelet(dir.path(), 3, &[("gpu-summary.wasm", b"\0asm still not")]).unwrap();
    eventually("the changed file is tried", || async {
        swaps(&h.metrics, "gpu-summary", "rejected") == 2.0
    })
    .await;
    for _ in 0..3 {
        h.running.host.sync_dir().await.unwrap();
    }
    assert_eq!(swaps(&h.metrics, "gpu-summary", "rejected"), 2.0);

    // Back to the running version's file: nothing to swap, nothing
    // rejected; then the good module changed is swapped in.
    write_like_kubelet(dir.path(), 4, &[("gpu-summary.wasm", &gpu)]).unwrap();
    h.running.host.sync_dir().await.unwrap();
    assert_eq!(swaps(&h.metrics, "gpu-summary", "rejected"), 2.0);
    write_like_kubelet(
        dir.path(),
        5,
        &[
            ("gpu-summary.wasm", &gpu),
            ("gpu-summary.config.json", br#"{"resource": "amd.com/gpu"}"#),
        ],
    )
    .unwrap();
    eventually("the changed good version is swapped in", || async {
        swaps(&h.metrics, "gpu-summary", "swapped") == 1.0
    })
    .await;
    h.running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_rejected_for_a_kind_not_served_is_swapped_in_once_its_crd_is_installed() {
    use crate::support::wat::{WatKeys, WatWatch};
    use crate::support::widget::install_widget_crd;
    let (_server, client) = server().await;
    let doc = configmap_doc(HOST_NS, "w", &[("v", "1")]);
    let v1 = guest(
        &WatManifest::writing_its_own_configmap("w", HOST_NS),
        Behaviour::Apply(vec![doc.clone()]),
    );
    let dir = guest_dir(&[("w.wasm", &v1)]);
    let h = start_dir_host(&client, dir.path(), RuntimeConfig::default()).await;
    // Version 2 also watches Widgets, whose CRD is not installed.
    let mut m = WatManifest::writing_its_own_configmap("w", HOST_NS);
    m.watches.push(WatWatch::widgets(
        "widgets",
        WatKeys::Aggregate("all".into()),
        None,
    ));
    let v2 = guest(&m, Behaviour::Apply(vec![doc]));
    write_like_kubelet(dir.path(), 2, &[("w.wasm", &v2)]).unwrap();
    eventually("version 2 rejected", || async {
        swaps(&h.metrics, "w", "rejected") == 1.0
    })
    .await;
    // Unlike other rejections it is tried at every rescan of the
    // unchanged directory, the old version running meanwhile.
    h.running.host.sync_dir().await.unwrap();
    assert_eq!(swaps(&h.metrics, "w", "rejected"), 2.0);
    install_widget_crd(&client).await;
    eventually("version 2 swapped in once Widgets are served", || async {
        let _ = h.running.host.sync_dir().await;
        swaps(&h.metrics, "w", "swapped") == 1.0
    })
    .await;
    h.running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn components_refused_before_compiling_are_rejected_and_the_old_one_keeps_running() {
    let Some(async_probe) = crate::probes::probe_path("guests-js/js-probe-async.wasm") else {
        return;
    };
    let async_probe = std::fs::read(async_probe).unwrap();
    let other_world = ::wat::parse_str("(component)").unwrap();
    let (_server, client) = server().await;
    let dir = guest_dir(&[("logic.wasm", &logic("1"))]);
    let h = start_dir_host(&client, dir.path(), RuntimeConfig::default()).await;
    eventually("version 1 runs", || async {
        logic_version(&client).await.as_deref() == Some("1")
    })
    .await;
    let before = h.running.host.controller("logic").unwrap();
    for (version, bytes, rejected) in [(2, &async_probe, 1.0), (3, &other_world, 2.0)] {
        write_like_kubelet(dir.path(), version, &[("logic.wasm", bytes)]).unwrap();
        eventually("the refused version is counted", || async {
            swaps(&h.metrics, "logic", "rejected") == rejected
        })
        .await;
        assert!(
            Arc::ptr_eq(&before, &h.running.host.controller("logic").unwrap()),
            "the previous version keeps running"
        );
    }
    write_like_kubelet(dir.path(), 4, &[("logic.wasm", &logic("2"))]).unwrap();
    eventually("a good version swaps in after them", || async {
        logic_version(&client).await.as_deref() == Some("2")
    })
    .await;
    h.running.stop().await.unwrap();
}
