//! Shared informers against the embedded API server: sharing, projection,
//! change notifications and tombstones after a relist.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use crate::support::*;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::Api;
use serde_json::json;
use wasmctrl::informer::health::WatchHealthConfig;
use wasmctrl::informer::{Change, ChangeKind, InformerKey, InformerRegistry};
use wasmctrl::projection::FieldPath;
use wasmctrl_apiserver::{ApiServerConfig, FailRequests, Faults, WatchList};

fn pods_key() -> InformerKey {
    InformerKey {
        group: String::new(),
        version: "v1".into(),
        kind: "Pod".into(),
        plural: "pods".into(),
        namespace: Some(PODS_NS.into()),
        label_selector: None,
        field_selector: None,
    }
}

fn path(p: &str) -> FieldPath {
    FieldPath::parse(p).unwrap()
}

type Seen = Arc<Mutex<Vec<(ChangeKind, String)>>>;

fn recorder() -> (Seen, wasmctrl::informer::Handler) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    (
        seen,
        Arc::new(move |c: &Change| s.lock().unwrap().push((c.kind, c.name.to_string()))),
    )
}

/// Waits until the recorder has seen `kind` of `name`.
async fn until_seen(seen: &Seen, kind: ChangeKind, name: &str) {
    eventually(&format!("{kind:?} {name}"), || async {
        seen.lock().unwrap().contains(&(kind, name.into()))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guests_watching_the_same_thing_share_one_informer_with_the_union_of_fields() {
    let (_server, client) = server().await;
    let registry = InformerRegistry::new(client.clone());
    let a = registry.acquire(&pods_key(), &[path("spec.nodeName")], &[]);
    let b = registry.acquire(&pods_key(), &[path("spec.nodeName")], &[]);
    assert_eq!(registry.len(), 1);
    assert_eq!(a.key(), b.key());
    // A guest needing more fields gets an informer with the union.
    let c = registry.acquire(&pods_key(), &[path("status.phase")], &[]);
    assert_eq!(
        c.projection().paths(),
        &[path("spec.nodeName"), path("status.phase")]
    );
    // Another selector is another informer.
    let mut other = pods_key();
    other.label_selector = Some("app=x".into());
    registry.acquire(&other, &[path("spec.nodeName")], &[]);
    assert_eq!(registry.len(), 2);
    drop((a, b));
    c.wait_synced().await.unwrap();
}

/// A guest standing by cold acquires its informers dormant: each its own,
/// opening no list or watch, never synced, shared with nobody — neither a
/// running informer of the same key nor a later user, which gets one that
/// runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dormant_informer_lists_nothing_and_is_shared_with_nobody() {
    let (server, client) = server().await;
    pod("p1").on("n1").create(&client).await;
    let watches = server.change_subscribers();
    let registry = InformerRegistry::new(client.clone());
    let dormant = registry
        .dormant()
        .acquire(&pods_key(), &[path("spec.nodeName")], &[]);
    let (seen, handler) = recorder();
    dormant.add_handler(handler);
    assert!(dormant.is_dormant());
    assert_eq!(registry.len(), 0, "a dormant informer is not registered");
    stays_for(
        std::time::Duration::from_secs(1),
        "a dormant informer neither lists nor watches",
        || async {
            server.change_subscribers() == watches
                && dormant.lists() == 0
                && dormant.is_empty()
                && dormant.state() == wasmctrl::informer::SyncState::Pending
        },
    )
    .await;
    assert!(seen.lock().unwrap().is_empty());
    // A user needing the cache gets one that runs.
    let active = registry.acquire(&pods_key(), &[path("spec.nodeName")], &[]);
    assert!(!active.is_dormant() && !active.same(&dormant));
    active.wait_synced().await.unwrap();
    assert_eq!(active.len(), 1);
    eventually("the running informer watches", || async {
        server.change_subscribers() > watches
    })
    .await;
    // A dormant user does not share the running one either: dropping the
    // running one's users drops its watch.
    let late = registry
        .dormant()
        .acquire(&pods_key(), &[path("spec.nodeName")], &[]);
    assert!(late.is_dormant() && !late.same(&active));
    assert!(late.is_empty() && dormant.is_empty());
    assert!(seen.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_changes_to_projected_fields_wake_handlers() {
    let (_server, client) = server().await;
    pod("a").on("n1").requesting("1").create(&client).await;
    let registry = InformerRegistry::new(client.clone());
    let informer = registry.acquire(
        &pods_key(),
        &[path("spec.nodeName"), path("status.phase")],
        &[],
    );
    let (seen, handler) = recorder();
    informer.add_handler(handler);
    informer.wait_synced().await.unwrap();
    until_seen(&seen, ChangeKind::Added, "a").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), PODS_NS);
    // A label is not projected: no notification.
    pods.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
    )
    .await
    .unwrap();
    // The phase is: one Updated.
    set_phase(&client, "a", "Running").await;
    until_seen(&seen, ChangeKind::Updated, "a").await;
    assert_eq!(
        seen.lock()
            .unwrap()
            .iter()
            .filter(|(k, _)| *k == ChangeKind::Updated)
            .count(),
        1,
        "the label change woke nobody: {:?}",
        seen.lock().unwrap()
    );
    let cached = informer.get(PODS_NS, "a").unwrap();
    assert_eq!(cached.field(1)[0].as_str(), Some("Running"));
}

/// Issue 46: an informer whose one reader is an aggregate keeps
/// identities, not projections, and tells its handler of adds and
/// deletes all the same; a second user asking for identities gets an
/// informer of its own; one needing projections shares it, and the
/// informer relists: every pod comes back to the first handler as an
/// update, and the store then equals a full informer's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_informer_gives_projections_back_to_a_reader_needing_them() {
    use wasmctrl::informer::{Informer, Retention};
    use wasmctrl::projection::Projection;
    let (_server, client) = server().await;
    for (name, node) in [("a", "n1"), ("b", "n2"), ("c", "n1")] {
        pod(name).on(node).requesting("1").create(&client).await;
    }
    let registry = InformerRegistry::new(client.clone());
    let fields = [path("spec.nodeName"), path("status.phase")];
    let ids = registry.acquire_keeping(&pods_key(), &fields, &[], Retention::Identity);
    let (seen, handler) = recorder();
    ids.add_handler(handler);
    ids.wait_synced().await.unwrap();
    until_seen(&seen, ChangeKind::Added, "c").await;
    assert_eq!((ids.len(), ids.store().identities()), (3, 3));
    assert!(!ids.store().holds_projections());
    assert!(ids.get(PODS_NS, "a").unwrap().field(0).is_empty());
    let pods: Api<Pod> = Api::namespaced(client.clone(), PODS_NS);
    pods.delete("b", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    until_seen(&seen, ChangeKind::Deleted, "b").await;
    assert_eq!(ids.store().identities(), 2);

    let other = registry.acquire_keeping(&pods_key(), &fields, &[], Retention::Identity);
    assert!(!other.same(&ids), "a second aggregate lists afresh");
    let full = registry.acquire(&pods_key(), &fields, &[]);
    assert!(
        full.same(&other),
        "the newest informer of the key is shared"
    );
    let (seen_full, handler_full) = recorder();
    full.add_handler(handler_full);
    full.wait_synced().await.unwrap();
    eventually("projections restored", || async {
        full.store().holds_projections()
    })
    .await;
    // Restored before it listed: the second user's handler is told of
    // every pod as it comes.
    until_seen(&seen_full, ChangeKind::Added, "a").await;
    until_seen(&seen_full, ChangeKind::Added, "c").await;
    assert_eq!(full.lists(), 1, "nothing to list again");
    // The first informer is still an identity one: a second handler on it
    // restores it too.
    assert!(!ids.store().holds_projections());
    let (seen_late, handler_late) = recorder();
    ids.add_handler(handler_late);
    eventually("the first restored", || async {
        ids.store().holds_projections()
    })
    .await;
    until_seen(&seen, ChangeKind::Updated, "a").await;
    until_seen(&seen_late, ChangeKind::Updated, "c").await;
    assert_eq!(ids.retention(), Retention::Projections);

    let reference = Informer::start(
        client.clone(),
        pods_key(),
        Projection::new(fields.to_vec(), vec![]),
        &[],
    );
    let (_, noop) = recorder();
    reference.add_handler(noop);
    reference.wait_synced().await.unwrap();
    assert_eq!(reference.len(), 2);
    assert_eq!(ids.list(), reference.list());
    assert_eq!(full.list(), reference.list());
}

/// Every paged list of pods fails (500) from now on.
fn pod_lists_fail(faults: &Faults) {
    faults.fail(
        FailRequests::new(500, 1_000_000)
            .verb("list")
            .resource("pods"),
    );
}

/// An informer on a server serving streaming lists or not (`watch_list`)
/// fills its cache, and after a watch outage long enough for a `410 Gone`
/// relists and reports the pod deleted meanwhile. Where they are served,
/// every paged list of pods fails: the informer never needs one.
async fn deleted_while_down_is_reported_after_relist(watch_list: WatchList) {
    let served = watch_list == WatchList::Served;
    let config = ApiServerConfig::default()
        .history(20)
        .watch_list(watch_list);
    let (server, client) = server_with(config).await;
    let faults = server.faults();
    if served {
        pod_lists_fail(&faults);
    }
    pod("gone").on("n1").create(&client).await;
    pod("stays").on("n1").create(&client).await;
    let registry = InformerRegistry::new(client.clone());
    let informer = registry.acquire(&pods_key(), &[path("spec.nodeName")], &[]);
    let (seen, handler) = recorder();
    informer.add_handler(handler);
    informer.wait_synced().await.unwrap();
    assert_eq!(informer.len(), 2);
    assert_eq!(informer.lists(), 1);

    // No watch can be opened; meanwhile "gone" is deleted and history is
    // compacted past the informer's resourceVersion.
    pod_watches_down(&faults).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), PODS_NS);
    pods.delete("gone", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    for i in 0..30 {
        pod(&format!("filler-{i}")).create(&client).await;
    }
    faults.compact_history();
    faults.clear();
    if served {
        pod_lists_fail(&faults);
    }
    until_seen(&seen, ChangeKind::Deleted, "gone").await;
    assert!(informer.lists() >= 2, "it relisted");
    assert!(informer.get(PODS_NS, "gone").is_none());
    assert!(informer.get(PODS_NS, "stays").is_some());
    assert_eq!(informer.len(), 31);
    // The watch goes on after the relist.
    pod("late").on("n2").create(&client).await;
    until_seen(&seen, ChangeKind::Added, "late").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_deleted_while_the_watch_was_down_are_reported_deleted_after_relist() {
    deleted_while_down_is_reported_after_relist(WatchList::Served).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_streaming_lists_is_listed_in_pages() {
    deleted_while_down_is_reported_after_relist(WatchList::Refused).await;
}

/// Creates the ConfigMap `namespace`/`name`.
async fn create_configmap(client: &kube::Client, namespace: &str, name: &str) {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let cm = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(data(&[("k", "v")])),
        ..Default::default()
    };
    cms.create(&Default::default(), &cm).await.unwrap();
}

/// An informer of `plural` (core, v1) in `namespace`.
fn core_key(kind: &str, plural: &str, namespace: &str) -> InformerKey {
    InformerKey {
        group: String::new(),
        version: "v1".into(),
        kind: kind.into(),
        plural: plural.into(),
        namespace: Some(namespace.into()),
        label_selector: None,
        field_selector: None,
    }
}

/// The requests `requests` holds for `key`'s collection: (streaming list
/// attempts, paged lists).
fn lists_of(requests: &Requests, key: &InformerKey) -> (usize, usize) {
    let path = format!(
        "/api/v1/namespaces/{}/{}?",
        key.namespace.as_deref().unwrap(),
        key.plural
    );
    let requests = requests.lock().unwrap();
    let of_key = || requests.iter().filter(|r| r.contains(&path));
    let streaming = of_key()
        .filter(|r| r.contains("sendInitialEvents=true"))
        .count();
    let paged = of_key()
        .filter(|r| !r.contains("watch=true") && r.contains("limit=500"))
        .count();
    (streaming, paged)
}

/// On a server refusing streaming lists as a 1.32 kube-apiserver does on
/// its defaults over an etcd that cannot report watch progress (200, then
/// one ERROR event with a 500), informers started together and informers
/// started later all list in pages and follow their watches; the refusal
/// is said once, at INFO, nothing is warned of nor counted as a watch
/// failure, and once it is known no informer asks for a streaming list
/// again. (The runtime is single-threaded so that the log lines kept are
/// this test's only.)
#[tokio::test(flavor = "current_thread")]
async fn on_a_server_refusing_streaming_lists_informers_page_after_one_info_line_and_no_warning() {
    let lines = logs::on_this_thread(tracing::Level::INFO);
    let config = ApiServerConfig::default().watch_list(WatchList::StorageRefused);
    let (_server, admin) = server_with(config).await;
    for ns in [PODS_NS, HOST_NS] {
        for name in ["a", "b"] {
            create_configmap(&admin, ns, name).await;
        }
    }
    pod("a").on("n1").create(&admin).await;
    let (client, requests) = recording(&admin);
    let metrics = Arc::new(wasmctrl::metrics::Metrics::new());
    let registry = InformerRegistry::new(client).with_metrics(metrics.clone());
    let fields = [path("metadata.labels")];

    // Started together, as a host starts its guests' informers: each may
    // try a streaming list before the first refusal is known.
    let together = [
        core_key("Pod", "pods", PODS_NS),
        core_key("ConfigMap", "configmaps", PODS_NS),
        core_key("Secret", "secrets", PODS_NS),
    ];
    // Each of `keys` acquired at once, then synced.
    let start = |keys: &[InformerKey]| {
        let informers: Vec<_> = keys
            .iter()
            .map(|k| registry.acquire(k, &fields, &[]))
            .collect();
        async move {
            for informer in &informers {
                informer.wait_synced().await.unwrap();
            }
            informers
        }
    };
    let first = start(&together).await;
    // Started once it is known: no streaming list is tried.
    let later = [
        core_key("ConfigMap", "configmaps", HOST_NS),
        core_key("Secret", "secrets", HOST_NS),
    ];
    let second = start(&later).await;
    for informer in [&first[0], &first[1], &second[0]] {
        let ns = informer.key().namespace.as_deref().unwrap();
        assert!(informer.get(ns, "a").is_some(), "{}", informer.key());
    }
    for key in &together {
        let (streaming, paged) = lists_of(&requests, key);
        assert!(streaming <= 1, "{key}: {streaming} streaming lists tried");
        assert_eq!(paged, 1, "{key} listed in pages once");
    }
    for key in &later {
        assert_eq!(lists_of(&requests, key), (0, 1), "{key}");
    }
    // Each goes on watching from its list.
    let (seen, handler) = recorder();
    second[0].add_handler(handler);
    create_configmap(&admin, HOST_NS, "c").await;
    until_seen(&seen, ChangeKind::Added, "c").await;

    let said = lines.containing(&["INFO wasmctrl::", "streaming lists"]);
    assert_eq!(said.len(), 1, "{said:#?}");
    assert!(said[0].contains("RequestWatchProgress"), "{}", said[0]);
    let warned: Vec<String> = lines
        .containing(&[""])
        .into_iter()
        .filter(|l| l.starts_with("WARN") || l.starts_with("ERROR"))
        .filter(|l| !l.contains(" wasmctrl_apiserver"))
        .collect();
    assert!(warned.is_empty(), "{warned:#?}");
    assert!(
        lines.containing(&["re-established"]).is_empty(),
        "no watch had failed"
    );
    let failures = prom::metric(&metrics.encode(), "wasmctrl_watch_failures_total", &[]);
    assert_eq!(failures, 0.0, "{}", metrics.encode());
}

/// A server that accepts streaming lists and ignores them (the watch goes
/// on as a plain one and never marks the end of its initial events), with
/// pods "a" and "b", and an informer of pods on it whose streaming lists
/// may send nothing for `wait` before their mark.
async fn on_a_server_ignoring_streaming_lists(
    wait: std::time::Duration,
) -> (
    wasmctrl_apiserver::RunningApiServer,
    kube::Client,
    wasmctrl::informer::Informer,
) {
    let config = ApiServerConfig::default().watch_list(WatchList::Ignored);
    let (server, client) = server_with(config).await;
    pod("a").on("n1").create(&client).await;
    pod("b").on("n2").create(&client).await;
    let registry = InformerRegistry::new(client.clone())
        .with_health(WatchHealthConfig::default().streaming_list_wait(wait));
    let informer = registry.acquire(&pods_key(), &[path("spec.nodeName")], &[]);
    (server, client, informer)
}

/// The informer syncs within `limit` and goes on following the watch.
async fn syncs_and_follows(
    client: &kube::Client,
    informer: &wasmctrl::informer::Informer,
    limit: std::time::Duration,
) {
    let (seen, handler) = recorder();
    informer.add_handler(handler);
    tokio::time::timeout(limit, informer.wait_synced())
        .await
        .expect("the cache syncs")
        .unwrap();
    assert_eq!(informer.len(), 2);
    let pods: Api<Pod> = Api::namespaced(client.clone(), PODS_NS);
    pods.delete("a", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    until_seen(&seen, ChangeKind::Deleted, "a").await;
    pod("c").on("n3").create(client).await;
    until_seen(&seen, ChangeKind::Added, "c").await;
    assert!(informer.get(PODS_NS, "a").is_none());
    assert_eq!(informer.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_list_that_never_marks_its_end_is_given_up_for_pages() {
    let wait = std::time::Duration::from_secs(1);
    let (_server, client, informer) = on_a_server_ignoring_streaming_lists(wait).await;
    let started = std::time::Instant::now();
    syncs_and_follows(&client, &informer, std::time::Duration::from_secs(30)).await;
    // Only the paged list could sync it, after the silence.
    assert!(started.elapsed() >= wait);
    assert_eq!(informer.lists(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_lists_that_keep_ending_without_their_mark_are_given_up_for_pages() {
    // A silence of an hour would never be waited out here: the informer
    // gives up streaming lists because two in a row end without their
    // mark (the server closes each watch).
    let (server, client, informer) =
        on_a_server_ignoring_streaming_lists(std::time::Duration::from_secs(3600)).await;
    let faults = server.faults();
    let dropping = tokio::spawn(async move {
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            faults.drop_watches();
        }
    });
    let synced =
        tokio::time::timeout(std::time::Duration::from_secs(30), informer.wait_synced()).await;
    dropping.abort();
    synced.expect("the cache syncs").unwrap();
    syncs_and_follows(&client, &informer, std::time::Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_added_after_sync_first_gets_every_cached_object_as_added() {
    let (_server, client) = server().await;
    pod("a").on("n1").create(&client).await;
    pod("b").on("n2").create(&client).await;
    let registry = InformerRegistry::new(client.clone());
    let informer = registry.acquire(&pods_key(), &[path("spec.nodeName")], &[]);
    informer.wait_synced().await.unwrap();
    let (seen, handler) = recorder();
    informer.add_handler(handler);
    let mut got = seen.lock().unwrap().clone();
    got.sort_by(|x, y| x.1.cmp(&y.1));
    assert_eq!(
        got,
        vec![
            (ChangeKind::Added, "a".to_string()),
            (ChangeKind::Added, "b".to_string())
        ]
    );
    // Only the asked-for field is cached.
    let a = informer.get(PODS_NS, "a").unwrap();
    assert_eq!(a.field(0)[0].as_str(), Some("n1"));
    assert_eq!(a.field_count(), 1);
}
