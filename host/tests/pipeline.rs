//! The host pipeline end to end: real HTTPS to the embedded API server, the
//! real kube client, the real GPU-summary component.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::Api;
use serde_json::json;
use wasmctrl::controller::ControllerConfig;
use wasmctrl_apiserver::{ApiServerConfig, FailRequests, Rule, User};

/// How long a test watches a terminating pod for a summary that drops it
/// too early (well within the pod's 1 s grace period).
const TERMINATING: Duration = Duration::from_millis(300);
/// How long a test watches for a reconcile that must not come.
const NO_MORE: Duration = Duration::from_millis(500);

fn fast() -> ControllerConfig {
    ControllerConfig::default()
}

/// Someone else sets the summary's `n1` to 99.
async fn edit_summary_by_hand(client: &kube::Client) {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    cms.patch(
        "gpu-summary",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"n1": "99"}})),
    )
    .await
    .unwrap();
}

/// Holds the stopped server's address during an outage until a client
/// (an informer re-watching) knocks, and turns it away: so the outage
/// lasts until it has certainly been felt.
async fn a_client_is_turned_away_at(addr: std::net::SocketAddr) {
    let stand_in = tokio::net::TcpListener::bind(addr).await.unwrap();
    let (knock, _) = bounded("a client tries to reconnect", CONVERGE, stand_in.accept())
        .await
        .unwrap();
    drop(knock);
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
    // No host can have seen a removal that has not happened: a summary read
    // while the pod still exists afterwards must count it.
    stays_for(
        TERMINATING,
        "the terminating pod keeps its GPUs",
        || async {
            let seen = summary(&client).await;
            let still_there = pods.get_opt("a").await.unwrap().is_some();
            !still_there || seen == Some(data(&[("n1", "2")]))
        },
    )
    .await;
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

    // Someone edits our key by hand.
    edit_summary_by_hand(&client).await;
    summary_becomes(&client, &[("n1", "3")]).await;
    // Someone deletes the ConfigMap.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
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
    // The first apply is counted and its echo has come and gone.
    eventually("the first apply done, the queue idle", || async {
        host.applies() >= 1 && host.idle()
    })
    .await;
    let applies = host.applies();
    let reconciles = host.reconciles();
    let resyncs = host.host.controllers()[0].metrics().clone();
    let before = resyncs.resyncs();
    eventually("three more resyncs", || {
        let r = resyncs.clone();
        async move { r.resyncs() >= before + 3 }
    })
    .await;
    eventually("the resyncs' reconciles ran", || async {
        host.reconciles() >= reconciles + 3 && host.skipped() >= 3
    })
    .await;
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
    a_client_is_turned_away_at(server.addr()).await;
    server.restart_listener().await.unwrap();
    pod("d").on("n3").requesting("1").create(&client).await;
    summary_becomes(&client, &[("n1", "2"), ("n3", "1")]).await;
    delete_now(&client, "d").await;
    summary_becomes(&client, &[("n1", "2")]).await;

    // Changes while no watch can be opened, then history compacted: the
    // re-watch gets 410 Gone, the informer relists, and the pod deleted
    // meanwhile is noticed as deleted (the tombstone case).
    pod_watches_down(&faults).await;
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
    let result = tokio::time::timeout(CONVERGE, host.join())
        .await
        .expect("the host must exit, not idle");
    let err = result
        .expect_err("a host that cannot watch must fail")
        .to_string();
    assert!(err.contains("watch") && err.contains("pods"), "{err}");
}

/// What the workqueue guarantees (`host/src/workqueue.rs`): a key waits in
/// the queue at most once (dedup), and a key being reconciled is not handed
/// out again until that reconcile is done; an add meanwhile only marks it
/// dirty, and `done` queues it once, however many adds there were. So the
/// changes that arrive during one reconcile of their key cause exactly one
/// more reconcile after it, which sees the last of them. (In general, adds
/// spread over a window W against reconciles lasting at least D cause at
/// least one reconcile after the last add and at most W/D + 2.)
///
/// The test makes W < D without timing anything: the first change starts
/// a reconcile whose write the API server holds, the other nine arrive and
/// reach the host's cache while it waits (checked, not assumed), then the
/// write is let through, and exactly two reconciles run in all. (The guest
/// stamps its write with the call's clock, so every reconcile writes.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_during_a_slow_reconcile_of_their_key_cause_exactly_one_more_reconcile() {
    use crate::support::wat::{guest, Behaviour, WatManifest, WatWrite, STAMP};
    let (server, client) = server().await;
    pod("busy").on("n1").create(&client).await;
    // Stamped in an annotation, so that every write is a whole apply: a
    // change of data entries alone goes out as a merge patch, and the next
    // write of a merge-patched object waits for the previous one's echo by
    // requeueing its key, a reconcile of its own.
    let stamped = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "slow", "namespace": HOST_NS, "annotations": {"at": STAMP}},
        "data": {"ok": "1"}})
    .to_string();
    let slow = guest(
        &WatManifest::writing_its_own_configmap("slow", HOST_NS),
        Behaviour::Stamped(vec![WatWrite::Apply(stamped)]),
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slow.wasm");
    std::fs::write(&path, slow).unwrap();
    let mut config = host_config(fast());
    config.guests = vec![path];
    let host = run_host(&client, config, None).await;
    let controller = host.controller();
    let reconciles = || host.reconciles();
    // The pod's status.phase as the host's cache holds it.
    let informer = host
        .host
        .registry()
        .all()
        .into_iter()
        .find(|i| i.key().plural == "pods")
        .unwrap();
    let phase_field = informer
        .projection()
        .paths()
        .iter()
        .position(|p| *p == wasmctrl::projection::FieldPath::parse("status.phase").unwrap())
        .unwrap();
    let cached_phase = || {
        informer
            .get(PODS_NS, "busy")
            .and_then(|pod| pod.field(phase_field).first()?.as_str().map(str::to_string))
    };

    eventually(
        "the first reconcile's write done, the queue idle",
        || async { host.applies() >= 1 && host.idle() },
    )
    .await;
    let before = reconciles();

    // From now on the guest's writes wait at the server until released.
    let writes = server.faults().hold("patch", "configmaps");
    set_phase(&client, "busy", "Running").await;
    eventually("the change's reconcile waits in its write", || async {
        writes.waiting() == 1
    })
    .await;
    // Handlers are called in the order they were added: once a handler
    // added now has seen a change, the controller's has queued it (the
    // cache holds a change a moment before its handlers hear of it).
    let heard = Arc::new(std::sync::Mutex::new(String::new()));
    informer.add_handler({
        let heard = heard.clone();
        Arc::new(move |c: &wasmctrl::informer::Change| {
            if &*c.name == "busy" {
                *heard.lock().unwrap() = c.resource_version.to_string();
            }
        })
    });
    let mut phase = "Running";
    for i in 1..10 {
        phase = if i % 2 == 0 { "Running" } else { "Pending" };
        set_phase(&client, "busy", phase).await;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), PODS_NS);
    let last = pods.get("busy").await.unwrap().metadata.resource_version;
    eventually("the controller has queued the last change", || async {
        Some(heard.lock().unwrap().clone()) == last
    })
    .await;
    assert_eq!(cached_phase().as_deref(), Some(phase));
    // The nine changes all reached the queue while the first change's
    // reconcile was still in flight.
    assert_eq!(writes.waiting(), 1, "the first change's write still waits");
    assert_eq!(reconciles(), before, "that reconcile has not ended");
    writes.release();

    eventually("the queue drained", || async {
        reconciles() >= before + 2 && host.idle()
    })
    .await;
    stays_for(NO_MORE, "no reconcile after the queue drained", || async {
        reconciles() == before + 2 && controller.queue().is_empty()
    })
    .await;
    let ran = reconciles() - before;
    assert_eq!(
        ran, 2,
        "the first change's reconcile and one more for the nine during it"
    );
    host.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_echo_of_our_own_apply_triggers_no_reconcile() {
    let (_server, client) = server().await;
    pod("a").on("n1").requesting("1").create(&client).await;
    let host = start_host(&client, fast()).await;
    summary_becomes(&client, &[("n1", "1")]).await;
    // Settled: the first apply counted, nothing queued or in flight.
    eventually("idle", || async { host.applies() >= 1 && host.idle() }).await;
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
        // This change's apply is counted and its echo has come and gone.
        let done = applies + i + 1;
        eventually("the apply done, the queue idle", || async {
            host.applies() >= done && host.idle()
        })
        .await;
    }
    assert_eq!(host.applies(), applies + 5);
    let ran = host.reconciles() - reconciles;
    assert!(
        (5..=7).contains(&ran),
        "{ran} reconciles for 5 changes: the summary's echoes were reconciled"
    );

    // Someone else's edit of the summary is not an echo: undone.
    edit_summary_by_hand(&client).await;
    let w: Vec<(&str, &str)> = want.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    summary_becomes(&client, &w).await;
    host.stop().await.unwrap();
}
