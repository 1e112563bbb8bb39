//! The host pipeline end to end: real HTTPS to the embedded API server, the
//! real kube client, the real GPU-summary component.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::support::*;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::Api;
use serde_json::json;
use wasmctrl::controller::ControllerConfig;
use wasmctrl_apiserver::{ApiServerConfig, FailRequests, Rule, User};

fn fast() -> ControllerConfig {
    ControllerConfig::default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summary_follows_pod_creation_phases_rescheduling_and_deletion() {
    let (_server, client) = server().await;
    let host = start_host(&client, fast()).await;
    // An empty world still gets its (empty) summary.
    summary_becomes(&client, &[]).await;

    pod("a")
        .on("n1")
        .requesting("2")
        .grace_period(1)
        .create(&client)
        .await;
    pod("b").on("n1").limited_to("1").create(&client).await;
    pod("c")
        .on("n2")
        .requesting("1")
        .limited_to("1")
        .create(&client)
        .await;
    pod("pending").requesting("4").create(&client).await;
    pod("cpu").on("n3").create(&client).await;
    summary_becomes(&client, &[("n1", "3"), ("n2", "1")]).await;

    set_phase(&client, "a", "Running").await;
    set_phase(&client, "b", "Succeeded").await;
    summary_becomes(&client, &[("n1", "2"), ("n2", "1")]).await;
    set_phase(&client, "c", "Failed").await;
    summary_becomes(&client, &[("n1", "2")]).await;

    // Deleting a running pod starts its graceful termination: until its
    // kubelet (the server's stand-in, after the 1 s grace period) removes
    // it, the terminating pod still holds its GPUs.
    let pods: Api<Pod> = Api::namespaced(client.clone(), PODS_NS);
    let deleted = pods.delete("a", &DeleteParams::default()).await.unwrap();
    let terminating = deleted.left().expect("the pod is still there, terminating");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(1));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(summary(&client).await, Some(data(&[("n1", "2")])));
    summary_becomes(&client, &[]).await;
    assert!(
        pods.get_opt("a").await.unwrap().is_none(),
        "removed after its grace period"
    );
    // Rescheduling: the pod is recreated on another node.
    pod("a").on("n4").requesting("2").create(&client).await;
    summary_becomes(&client, &[("n4", "2")]).await;

    host.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_edits_and_deletes_of_the_summary_are_undone() {
    let (_server, client) = server().await;
    pod("a").on("n1").requesting("3").create(&client).await;
    let host = start_host(&client, fast()).await;
    summary_becomes(&client, &[("n1", "3")]).await;

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    // Someone edits our key by hand.
    cms.patch(
        "gpu-summary",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"n1": "99"}})),
    )
    .await
    .unwrap();
    summary_becomes(&client, &[("n1", "3")]).await;
    // Someone deletes the ConfigMap.
    cms.delete("gpu-summary", &DeleteParams::default())
        .await
        .unwrap();
    summary_becomes(&client, &[("n1", "3")]).await;
    host.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_of_an_unchanged_world_makes_no_writes() {
    let (_server, client) = server().await;
    pod("a").on("n1").requesting("1").create(&client).await;
    pod("b").on("n2").requesting("2").create(&client).await;
    let host = start_host(&client, fast().resync(Duration::from_millis(300))).await;
    summary_becomes(&client, &[("n1", "1"), ("n2", "2")]).await;
    // Let the apply's own watch event come back and settle.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let applies = host.applies();
    let reconciles = host.reconciles();
    let resyncs = host.host.controllers()[0].metrics().clone();
    let before = resyncs.resyncs();
    eventually("three more resyncs", || {
        let r = resyncs.clone();
        async move { r.resyncs() >= before + 3 }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(host.reconciles() >= reconciles + 3, "resyncs reconcile");
    assert_eq!(
        host.applies(),
        applies,
        "a resync of an unchanged world must not write"
    );
    assert!(host.skipped() >= 3, "the writes were skipped as no-ops");
    host.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_conflicts_and_server_errors_converge_without_a_write_storm() {
    let (server, client) = server().await;
    let faults = server.faults();
    faults.fail(
        FailRequests::new(409, 3)
            .verb("patch")
            .resource("configmaps"),
    );
    faults.fail(
        FailRequests::new(500, 2)
            .verb("patch")
            .resource("configmaps"),
    );
    pod("a").on("n1").requesting("2").create(&client).await;
    let host = start_host(&client, fast()).await;
    summary_becomes(&client, &[("n1", "2")]).await;
    assert_eq!(
        faults.injected_failures(),
        5,
        "every injected failure was hit"
    );
    let errors = host.host.controllers()[0].metrics().errors();
    assert!(errors >= 5, "failures went back to the queue ({errors})");
    assert!(
        host.applies() <= 3,
        "no write storm: {} applies",
        host.applies()
    );
    host.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_watches_compaction_and_a_server_restart_converge() {
    let (server, client) = server_with(ApiServerConfig::default().history(50)).await;
    let faults = server.faults();
    pod("a").on("n1").requesting("1").create(&client).await;
    let host = start_host(&client, fast()).await;
    summary_becomes(&client, &[("n1", "1")]).await;

    // Dropped watch: the informer re-watches from its last resourceVersion.
    faults.drop_watches();
    pod("b").on("n1").requesting("1").create(&client).await;
    summary_becomes(&client, &[("n1", "2")]).await;

    let pods_informer = host
        .host
        .registry()
        .all()
        .into_iter()
        .find(|i| i.key().plural == "pods")
        .unwrap();
    assert_eq!(
        pods_informer.lists(),
        1,
        "a dropped watch resumes without a relist"
    );

    // A server restart (listener down, state kept): watches break and
    // come back.
    server.stop_listener().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.restart_listener().await.unwrap();
    pod("d").on("n3").requesting("1").create(&client).await;
    summary_becomes(&client, &[("n1", "2"), ("n3", "1")]).await;
    delete_now(&client, "d").await;
    summary_becomes(&client, &[("n1", "2")]).await;

    // Changes while no watch can be opened, then history compacted: the
    // re-watch gets 410 Gone, the informer relists, and the pod deleted
    // meanwhile is noticed as deleted (the tombstone case).
    let refused_before = faults.injected_failures();
    faults.fail(
        FailRequests::new(500, 10_000)
            .verb("watch")
            .resource("pods"),
    );
    faults.drop_watches();
    // Once a re-watch was refused, the informer's watch is down for sure.
    eventually("the informer tried to re-watch and was refused", || {
        let f = faults.clone();
        async move { f.injected_failures() > refused_before }
    })
    .await;
    delete_now(&client, "a").await;
    pod("c").on("n2").requesting("3").create(&client).await;
    for i in 0..60 {
        // Churn past the 50-event history so resuming is impossible.
        pod(&format!("filler-{i}")).create(&client).await;
    }
    faults.compact_history();
    faults.clear();
    summary_becomes(&client, &[("n1", "1"), ("n2", "3")]).await;
    assert!(
        pods_informer.lists() >= 2,
        "the 410 made the informer relist"
    );
    let applies = host.applies();
    assert!(applies <= 8, "no write storm: {applies} applies");
    host.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_forbidden_makes_the_host_exit_with_the_resource_and_verb() {
    let (server, client) = server().await;
    let token = "list-but-no-watch";
    server.add_token(
        token,
        User::with_rules(
            "limited",
            vec![
                Rule::new(&["get", "list"], &["pods"]),
                Rule::new(
                    &["get", "list", "watch", "create", "update", "patch"],
                    &["configmaps"],
                ),
                Rule::new(&["create", "patch"], &["events"]),
            ],
        ),
    );
    let limited = server.client_for_token(token).await.unwrap();
    pod("a").on("n1").requesting("1").create(&client).await;
    // The preflight check (SelfSubjectAccessReview) refuses to start the
    // guest before any cache syncs: no reconcile, no write, and the error
    // reads like the API server's own Forbidden message.
    let err = wasmctrl::supervisor::Supervisor::start(limited.clone(), host_config(fast()), None)
        .await
        .err()
        .expect("a host that cannot watch must not start")
        .to_string();
    assert!(
        err.contains(
            "pods is forbidden: User \"limited\" cannot watch resource \"pods\" in API group \"\" at the cluster scope"
        ),
        "{err}"
    );
    assert!(
        err.contains("gpu-summary") && err.contains("missing permissions (1)"),
        "{err}"
    );
    assert_eq!(summary(&client).await, None, "nothing was written");

    // Without the preflight's answer (reviews refused), the informer's own
    // 403 on watch still stops the host instead of leaving it idle.
    server.faults().fail(
        FailRequests::new(403, 1_000)
            .verb("create")
            .resource("selfsubjectaccessreviews"),
    );
    let host = start_host(&limited, fast()).await;
    let result = tokio::time::timeout(CONVERGE, host.task)
        .await
        .expect("the host must exit, not idle")
        .unwrap();
    let err = result
        .expect_err("a host that cannot watch must fail")
        .to_string();
    assert!(err.contains("watch") && err.contains("pods"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_rapid_changes_to_one_pod_during_a_slow_reconcile_cause_two_or_three_reconciles() {
    use crate::support::wat::{configmap_doc, guest, Behaviour, WatManifest};
    let (_server, client) = server().await;
    pod("busy").on("n1").create(&client).await;
    // A guest whose reconcile takes a while (counting to 300 million).
    let slow = guest(
        &WatManifest {
            name: "slow".into(),
            write_namespace: HOST_NS.into(),
            write_names: vec!["slow".into()],
            aggregate_key: "all".into(),
        },
        Behaviour::SlowApply(
            300_000_000,
            vec![configmap_doc(HOST_NS, "slow", &[("ok", "1")])],
        ),
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slow.wasm");
    std::fs::write(&path, slow).unwrap();
    let mut config = host_config(fast());
    config.guests = vec![path];
    let host = std::sync::Arc::new(
        wasmctrl::supervisor::Supervisor::start(client.clone(), config, None)
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
            Duration::from_secs(10),
        )
        .await
    });
    let controller = host.controller("slow").unwrap();
    let stats = controller.metrics().clone();
    let reconciles = || stats.reconciles();
    // Settle: the first reconcile (and the one its own write triggers).
    eventually("first reconcile done", || async {
        controller.queue().is_empty() && reconciles() >= 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let before = reconciles();

    for i in 0..10 {
        let phase = if i % 2 == 0 { "Running" } else { "Pending" };
        set_phase(&client, "busy", phase).await;
    }
    // Wait until the queue is idle again.
    tokio::time::sleep(Duration::from_millis(300)).await;
    eventually("queue drained", || async { controller.queue().is_empty() }).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let ran = reconciles() - before;
    assert!(
        (1..=3).contains(&ran),
        "ten changes caused {ran} reconciles"
    );
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_echo_of_our_own_apply_triggers_no_reconcile() {
    let (_server, client) = server().await;
    pod("a").on("n1").requesting("1").create(&client).await;
    let host = start_host(&client, fast()).await;
    summary_becomes(&client, &[("n1", "1")]).await;
    // Settled: nothing queued, the first apply's echo consumed.
    let settled = |host: &RunningHost| {
        let c = host.host.controllers()[0].clone();
        async move { c.queue().is_empty() }
    };
    eventually("idle", || settled(&host)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (reconciles, applies) = (host.reconciles(), host.applies());

    // Five pod changes, one at a time: each is one reconcile and one apply,
    // and the apply's echo wakes nobody (without that: ten reconciles).
    // The echo can, rarely, beat the apply's own response back; then it
    // is reconciled like any change — hence a little slack.
    let mut want = vec![("n1".to_string(), "1".to_string())];
    for i in 0..5 {
        let node = format!("m{i}");
        pod(&format!("b{i}"))
            .on(&node)
            .requesting("2")
            .create(&client)
            .await;
        want.push((node, "2".into()));
        let w: Vec<(&str, &str)> = want.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        summary_becomes(&client, &w).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(host.applies(), applies + 5);
    let ran = host.reconciles() - reconciles;
    assert!(
        (5..=7).contains(&ran),
        "{ran} reconciles for 5 changes: the summary's echoes were reconciled"
    );

    // Someone else's edit of the summary is not an echo: undone.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    cms.patch(
        "gpu-summary",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"n1": "99"}})),
    )
    .await
    .unwrap();
    let w: Vec<(&str, &str)> = want.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    summary_becomes(&client, &w).await;
    host.stop().await.unwrap();
}
