//! Drives the embedded API server with the real kube-rs client over HTTPS
//! and asserts the Kubernetes semantics a controller can observe.
#![allow(clippy::unwrap_used, missing_docs)]

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions, WatchEvent,
    WatchParams,
};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::{Client, Error};
use serde_json::json;
use wasmctrl_apiserver::{ApiServer, ApiServerConfig, FailRequests, Rule, RunningApiServer, User};

const WAIT: Duration = Duration::from_secs(10);

async fn start() -> (RunningApiServer, Client) {
    start_with(ApiServerConfig::default()).await
}

async fn start_with(config: ApiServerConfig) -> (RunningApiServer, Client) {
    let server = ApiServer::start(config).await.unwrap();
    let client = server.client().await.unwrap();
    (server, client)
}

fn status(err: Error) -> kube::core::Status {
    match err {
        Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn cm(name: &str, data: serde_json::Value) -> ConfigMap {
    serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}),
    )
    .unwrap()
}

fn pod(name: &str, labels: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36",
            "resources": {"limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}}}]}
    }))
    .unwrap()
}

#[tokio::test]
async fn created_pod_gets_system_metadata_and_real_defaults() {
    let (_s, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let created = pods
        .create(&PostParams::default(), &pod("p", json!({})))
        .await
        .unwrap();
    let got = pods.get("p").await.unwrap();
    assert_eq!(got.metadata.uid, created.metadata.uid);
    assert!(got.metadata.uid.is_some());
    assert!(got.metadata.creation_timestamp.is_some());
    assert_eq!(got.metadata.generation, Some(1));
    assert!(
        got.metadata
            .resource_version
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > 0
    );
    let status = got.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert_eq!(status.qos_class.as_deref(), Some("Guaranteed"));
    let spec = got.spec.unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    let requests = spec.containers[0]
        .resources
        .as_ref()
        .unwrap()
        .requests
        .as_ref()
        .unwrap();
    assert_eq!(
        requests["nvidia.com/gpu"].0, "1",
        "requests default from limits"
    );
    let mf = got.metadata.managed_fields.unwrap();
    assert_eq!(mf[0].operation.as_deref(), Some("Update"));
}

#[tokio::test]
async fn create_conflicts_and_missing_namespace_are_reported_like_the_real_server() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let e = status(
        cms.create(&PostParams::default(), &cm("a", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(e.message, "configmaps \"a\" already exists");

    let missing: Api<ConfigMap> = Api::namespaced(client.clone(), "nope");
    let e = status(
        missing
            .create(&PostParams::default(), &cm("a", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
    assert_eq!(e.message, "namespaces \"nope\" not found");

    let e = status(cms.get("ghost").await.unwrap_err());
    assert_eq!(e.code, 404);
    assert_eq!(e.details.unwrap().kind, "configmaps");
}

#[tokio::test]
async fn invalid_names_are_422_and_generate_name_fills_the_name() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let e = status(
        cms.create(&PostParams::default(), &cm("Bad_Name", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(e
        .message
        .starts_with("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value"));

    let mut unnamed = cm("x", json!({}));
    unnamed.metadata.name = None;
    let e = status(
        cms.create(&PostParams::default(), &unnamed)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    assert!(e.message.contains("name or generateName is required"));

    unnamed.metadata.generate_name = Some("gen-".into());
    let made = cms.create(&PostParams::default(), &unnamed).await.unwrap();
    let name = made.metadata.name.unwrap();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
}

#[tokio::test]
async fn body_namespace_must_match_url_namespace() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut obj = cm("a", json!({}));
    obj.metadata.namespace = Some("kube-system".into());
    let e = status(cms.create(&PostParams::default(), &obj).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
    assert_eq!(
        e.message,
        "the namespace of the provided object does not match the namespace sent on the request"
    );
}

#[tokio::test]
async fn stale_resource_version_update_is_409_conflict() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let v1 = cms
        .create(&PostParams::default(), &cm("a", json!({"k": "1"})))
        .await
        .unwrap();
    let mut v2 = v1.clone();
    v2.data = Some([("k".to_string(), "2".to_string())].into());
    let v2 = cms.replace("a", &PostParams::default(), &v2).await.unwrap();
    assert_ne!(v2.metadata.resource_version, v1.metadata.resource_version);
    let mut stale = v1.clone();
    stale.data = Some([("k".to_string(), "3".to_string())].into());
    let e = status(
        cms.replace("a", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );
    assert_eq!(cms.get("a").await.unwrap().data.unwrap()["k"], "2");
}

#[tokio::test]
async fn paging_with_continue_returns_every_item_once_and_expired_token_is_410() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    for i in 0..7 {
        cms.create(&PostParams::default(), &cm(&format!("cm-{i}"), json!({})))
            .await
            .unwrap();
    }
    let mut names = Vec::new();
    let mut lp = ListParams::default().limit(3);
    let mut pages = 0;
    loop {
        let page = cms.list(&lp).await.unwrap();
        pages += 1;
        names.extend(page.items.iter().map(|c| c.metadata.name.clone().unwrap()));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(names, (0..7).map(|i| format!("cm-{i}")).collect::<Vec<_>>());

    let page = cms.list(&ListParams::default().limit(2)).await.unwrap();
    let first_token = page.metadata.continue_.unwrap();
    cms.create(&PostParams::default(), &cm("later", json!({})))
        .await
        .unwrap();
    server.faults().compact_history();
    let e = status(
        cms.list(&ListParams::default().limit(2).continue_token(&first_token))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
}

#[tokio::test]
async fn continue_pages_are_served_from_the_first_pages_snapshot() {
    let (_server, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    for i in 0..6 {
        cms.create(
            &PostParams::default(),
            &cm(&format!("cm-{i}"), json!({"v": "old"})),
        )
        .await
        .unwrap();
    }
    let first = cms.list(&ListParams::default().limit(3)).await.unwrap();
    let rv = first.metadata.resource_version.clone().unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    // Changes after the first page: none may show in the later pages.
    cms.create(&PostParams::default(), &cm("cm-3a", json!({})))
        .await
        .unwrap();
    cms.delete("cm-4", &DeleteParams::default()).await.unwrap();
    cms.patch(
        "cm-5",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "new"}})),
    )
    .await
    .unwrap();
    let rest = cms
        .list(&ListParams::default().limit(3).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(rest.metadata.resource_version, Some(rv));
    assert!(rest.metadata.continue_.is_none_or(|c| c.is_empty()));
    let got: Vec<(String, String)> = rest
        .items
        .iter()
        .map(|c| {
            (
                c.metadata.name.clone().unwrap(),
                c.data.as_ref().unwrap()["v"].clone(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = ["cm-3", "cm-4", "cm-5"]
        .iter()
        .map(|n| (n.to_string(), "old".to_string()))
        .collect();
    assert_eq!(got, want);
    // A fresh list sees the latest state.
    let now = cms.list(&ListParams::default()).await.unwrap();
    let names: Vec<String> = now
        .items
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["cm-0", "cm-1", "cm-2", "cm-3", "cm-3a", "cm-5"]);
}

#[tokio::test]
async fn label_and_field_selectors_filter_lists() {
    let (_s, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(
        &PostParams::default(),
        &pod("web-1", json!({"app": "web", "tier": "fe"})),
    )
    .await
    .unwrap();
    pods.create(&PostParams::default(), &pod("web-2", json!({"app": "web"})))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("db-1", json!({"app": "db"})))
        .await
        .unwrap();
    pods.patch(
        "db-1",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"nodeName": "n1"}})),
    )
    .await
    .unwrap();
    let names = |l: Vec<Pod>| {
        l.into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect::<Vec<_>>()
    };
    let q = |s: &str| ListParams::default().labels(s);
    assert_eq!(
        names(pods.list(&q("app=web")).await.unwrap().items),
        ["web-1", "web-2"]
    );
    assert_eq!(
        names(pods.list(&q("app!=web")).await.unwrap().items),
        ["db-1"]
    );
    assert_eq!(
        names(pods.list(&q("app in (db,x)")).await.unwrap().items),
        ["db-1"]
    );
    assert_eq!(
        names(pods.list(&q("app notin (db)")).await.unwrap().items),
        ["web-1", "web-2"]
    );
    assert_eq!(names(pods.list(&q("tier")).await.unwrap().items), ["web-1"]);
    assert_eq!(
        names(pods.list(&q("!tier")).await.unwrap().items),
        ["db-1", "web-2"]
    );
    let f = |s: &str| ListParams::default().fields(s);
    assert_eq!(
        names(pods.list(&f("spec.nodeName=n1")).await.unwrap().items),
        ["db-1"]
    );
    assert_eq!(
        names(pods.list(&f("spec.nodeName=")).await.unwrap().items),
        ["web-1", "web-2"]
    );
    assert_eq!(
        names(
            pods.list(&f("metadata.name!=web-1,status.phase=Pending"))
                .await
                .unwrap()
                .items
        ),
        ["db-1", "web-2"]
    );
    let e = status(pods.list(&f("spec.bogus=x")).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
    assert_eq!(e.message, "field label not supported: spec.bogus");
    let all: Api<Pod> = Api::all(client);
    assert_eq!(all.list(&q("app=web")).await.unwrap().items.len(), 2);
}

#[tokio::test]
async fn watch_applies_selector_transitions_as_added_and_deleted() {
    let (_s, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(&PostParams::default(), &pod("p", json!({"app": "x"})))
        .await
        .unwrap();
    let rv = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let wp = WatchParams::default()
        .fields("spec.nodeName=n1")
        .labels("app=x")
        .timeout(10);
    let mut stream = pods.watch(&wp, &rv).await.unwrap().boxed();
    let merge = |v: serde_json::Value| Patch::Merge(v);
    pods.patch(
        "p",
        &PatchParams::default(),
        &merge(json!({"spec": {"nodeName": "n1"}})),
    )
    .await
    .unwrap();
    pods.patch(
        "p",
        &PatchParams::default(),
        &merge(json!({"metadata": {"annotations": {"a": "b"}}})),
    )
    .await
    .unwrap();
    pods.patch(
        "p",
        &PatchParams::default(),
        &merge(json!({"metadata": {"labels": {"app": "y"}}})),
    )
    .await
    .unwrap();
    pods.patch(
        "p",
        &PatchParams::default(),
        &merge(json!({"metadata": {"labels": {"app": "x"}}})),
    )
    .await
    .unwrap();
    // Scheduled and running: only gracePeriodSeconds 0 removes it at once.
    pods.delete("p", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let mut seen = Vec::new();
    while seen.len() < 5 {
        let ev = tokio::time::timeout(WAIT, stream.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        seen.push(match ev {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(e) => panic!("{e:?}"),
        });
    }
    assert_eq!(seen, ["ADDED", "MODIFIED", "DELETED", "ADDED", "DELETED"]);
}

#[tokio::test]
async fn watch_from_zero_starts_with_synthetic_added_events() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let mut stream = cms
        .watch(&WatchParams::default().timeout(10), "0")
        .await
        .unwrap()
        .boxed();
    let ev = tokio::time::timeout(WAIT, stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(ev, WatchEvent::Added(c) if c.metadata.name.as_deref() == Some("a")));
    cms.create(&PostParams::default(), &cm("b", json!({})))
        .await
        .unwrap();
    let ev = tokio::time::timeout(WAIT, stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(ev, WatchEvent::Added(c) if c.metadata.name.as_deref() == Some("b")));
}

#[tokio::test]
async fn watch_timeout_seconds_ends_the_stream() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let started = Instant::now();
    let mut stream = cms
        .watch(&WatchParams::default().timeout(1), &rv)
        .await
        .unwrap()
        .boxed();
    let end = tokio::time::timeout(WAIT, stream.try_next())
        .await
        .unwrap()
        .unwrap();
    assert!(end.is_none());
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn watch_from_compacted_version_gets_410_expired_error_event() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    server.faults().compact_history();
    let mut stream = cms
        .watch(&WatchParams::default().timeout(5), &rv)
        .await
        .unwrap()
        .boxed();
    let ev = tokio::time::timeout(WAIT, stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    match ev {
        WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason, "Expired");
            assert!(e.message.starts_with("too old resource version"));
        }
        other => panic!("expected 410, got {other:?}"),
    }
}

#[tokio::test]
async fn watcher_relists_after_compaction_and_dropped_watches() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("before", json!({})))
        .await
        .unwrap();
    let mut events = watcher(cms.clone(), watcher::Config::default()).boxed();
    let mut next = async || {
        tokio::time::timeout(WAIT, events.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
    };
    assert!(matches!(next().await, watcher::Event::Init));
    assert!(matches!(next().await, watcher::Event::InitApply(_)));
    assert!(matches!(next().await, watcher::Event::InitDone));
    // advance the global resourceVersion past what the configmap watcher saw
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    server.faults().compact_history();
    server.faults().drop_watches();
    cms.create(&PostParams::default(), &cm("after", json!({})))
        .await
        .unwrap();
    // the re-watch from the old resourceVersion gets 410 and the watcher starts over
    let mut saw_error = false;
    loop {
        match tokio::time::timeout(WAIT, events.next())
            .await
            .unwrap()
            .unwrap()
        {
            Err(watcher::Error::WatchError(s)) => {
                assert_eq!(s.code, 410);
                saw_error = true;
            }
            Err(other) => panic!("unexpected watcher error {other:?}"),
            Ok(watcher::Event::Init) => break,
            Ok(other) => panic!("expected a relist, got {other:?}"),
        }
    }
    assert!(saw_error, "the watcher saw the 410 before relisting");
    let mut names = Vec::new();
    loop {
        match tokio::time::timeout(WAIT, events.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            watcher::Event::InitApply(c) => names.push(c.metadata.name.unwrap()),
            watcher::Event::InitDone => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(names, ["after", "before"]);
}

#[tokio::test]
async fn streaming_list_ends_with_initial_events_bookmark() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let mut events = watcher(cms.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut next = async || {
        tokio::time::timeout(WAIT, events.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
    };
    assert!(matches!(next().await, watcher::Event::Init));
    assert!(
        matches!(next().await, watcher::Event::InitApply(c) if c.metadata.name.as_deref() == Some("a"))
    );
    assert!(matches!(next().await, watcher::Event::InitDone));
    cms.create(&PostParams::default(), &cm("b", json!({})))
        .await
        .unwrap();
    assert!(
        matches!(next().await, watcher::Event::Apply(c) if c.metadata.name.as_deref() == Some("b"))
    );
}

#[tokio::test]
async fn periodic_bookmarks_carry_the_latest_resource_version() {
    let (_s, client) =
        start_with(ApiServerConfig::default().bookmark_interval(Duration::from_millis(200))).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = cms
        .watch(&WatchParams::default().timeout(5), &rv)
        .await
        .unwrap()
        .boxed();
    let leases: Api<Lease> = Api::namespaced(client, "default");
    let l: Lease = serde_json::from_value(
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}}),
    )
    .unwrap();
    let lease_rv = leases
        .create(&PostParams::default(), &l)
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(
            Instant::now() < deadline,
            "no bookmark at the lease's resourceVersion"
        );
        let ev = tokio::time::timeout(WAIT, stream.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let WatchEvent::Bookmark(b) = ev {
            if b.metadata.resource_version == lease_rv {
                break;
            }
        }
    }
}

#[tokio::test]
async fn reflector_mirrors_the_server_state() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let (reader, writer) = reflector::store();
    let stream =
        reflector(writer, watcher(cms.clone(), watcher::Config::default())).applied_objects();
    let task = tokio::spawn(stream.for_each(|_| async {}));
    tokio::time::timeout(WAIT, reader.wait_until_ready())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reader.len(), 1);
    cms.create(&PostParams::default(), &cm("b", json!({})))
        .await
        .unwrap();
    cms.delete("a", &DeleteParams::default()).await.unwrap();
    let deadline = Instant::now() + WAIT;
    while !(reader.len() == 1 && reader.state()[0].metadata.name.as_deref() == Some("b")) {
        assert!(Instant::now() < deadline, "reflector never converged");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    task.abort();
}

#[tokio::test]
async fn finalizers_hold_deletion_until_the_last_one_is_removed() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut obj = cm("f", json!({}));
    obj.metadata.finalizers = Some(vec!["example.com/a".into(), "example.com/b".into()]);
    cms.create(&PostParams::default(), &obj).await.unwrap();
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = cms
        .watch(&WatchParams::default().timeout(10), &rv)
        .await
        .unwrap()
        .boxed();
    cms.delete("f", &DeleteParams::background()).await.unwrap();
    let pending = cms.get("f").await.unwrap();
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert_eq!(pending.metadata.deletion_grace_period_seconds, Some(0));
    cms.patch(
        "f",
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(json!([{"op": "remove", "path": "/metadata/finalizers/0"}]))
                .unwrap(),
        ),
    )
    .await
    .unwrap();
    assert!(cms.get("f").await.is_ok(), "one finalizer left");
    cms.patch(
        "f",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let e = status(cms.get("f").await.unwrap_err());
    assert_eq!(e.code, 404);
    let mut kinds = Vec::new();
    while kinds.len() < 3 {
        let ev = tokio::time::timeout(WAIT, stream.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        kinds.push(match ev {
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            other => panic!("{other:?}"),
        });
    }
    assert_eq!(kinds, ["MODIFIED", "MODIFIED", "DELETED"]);
}

#[tokio::test]
async fn delete_preconditions_are_enforced() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("wrong".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let e = status(cms.delete("a", &dp).await.unwrap_err());
    assert_eq!(e.code, 409);
    assert!(e
        .message
        .starts_with("Precondition failed: UID in precondition: wrong"));
    cms.delete("a", &DeleteParams::foreground()).await.unwrap();
    assert_eq!(status(cms.get("a").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn status_subresource_is_separate_and_generation_tracks_spec() {
    let (_s, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(&PostParams::default(), &pod("p", json!({})))
        .await
        .unwrap();
    // main-resource writes ignore status
    let p = pods
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"phase": "Running"}, "metadata": {"labels": {"a": "b"}}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Pending"));
    assert_eq!(
        p.metadata.generation,
        Some(1),
        "metadata changes do not bump generation"
    );
    // status writes change only status
    let p = pods
        .patch_status(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running"}, "spec": {"nodeName": "sneaky"}})),
        )
        .await
        .unwrap();
    assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Running"));
    assert_eq!(p.spec.as_ref().unwrap().node_name, None);
    assert_eq!(
        p.metadata.generation,
        Some(1),
        "status writes never bump generation"
    );
    let p = pods
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"activeDeadlineSeconds": 5}})),
        )
        .await
        .unwrap();
    assert_eq!(p.metadata.generation, Some(2));
    let mut full = pods.get_status("p").await.unwrap();
    full.status.as_mut().unwrap().phase = Some("Succeeded".into());
    let p = pods
        .replace_status("p", &PostParams::default(), &full)
        .await
        .unwrap();
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Succeeded"));
}

#[tokio::test]
async fn every_patch_type_is_accepted() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("a", json!({"x": "1"})))
        .await
        .unwrap();
    let pp = PatchParams::default();
    let c = cms
        .patch("a", &pp, &Patch::Merge(json!({"data": {"y": "2"}})))
        .await
        .unwrap();
    assert_eq!(c.data.unwrap().len(), 2);
    let c = cms
        .patch("a", &pp, &Patch::Strategic(json!({"data": {"x": null}})))
        .await
        .unwrap();
    assert_eq!(c.data.unwrap().len(), 1);
    let ops =
        serde_json::from_value(json!([{"op": "add", "path": "/data/z", "value": "3"}])).unwrap();
    let c = cms.patch("a", &pp, &Patch::Json::<()>(ops)).await.unwrap();
    assert_eq!(c.data.unwrap()["z"], "3");

    let apply = PatchParams::apply("test-manager");
    let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"k": "v"}});
    let c = cms
        .patch("applied", &apply, &Patch::Apply(&cfg))
        .await
        .unwrap();
    assert_eq!(c.data.unwrap()["k"], "v");
    let mf = c.metadata.managed_fields.unwrap();
    assert!(mf
        .iter()
        .any(|m| m.manager.as_deref() == Some("test-manager")
            && m.operation.as_deref() == Some("Apply")));

    // apply without a field manager is rejected
    let e = status(
        cms.patch("applied", &PatchParams::default(), &Patch::Apply(&cfg))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    // a patch that would change the resourceVersion precondition conflicts
    let e = status(
        cms.patch(
            "a",
            &pp,
            &Patch::Merge(json!({"metadata": {"resourceVersion": "1"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 409);
    // patching a missing object is 404
    let e = status(
        cms.patch("ghost", &pp, &Patch::Merge(json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 404);
}

#[tokio::test]
async fn missing_or_unknown_token_is_401() {
    let (server, _client) = start().await;
    let bad = server.client_for_token("not-a-token").await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(bad, "default");
    let e = status(cms.list(&ListParams::default()).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (401, "Unauthorized"));
}

#[tokio::test]
async fn token_with_list_but_not_watch_gets_403_on_watch() {
    let (server, _c) = start_with(ApiServerConfig::default().token(
        "lister",
        User::with_rules("lister", vec![Rule::new(&["get", "list"], &["pods"])]),
    ))
    .await;
    let client = server.client_for_token("lister").await.unwrap();
    let pods: Api<Pod> = Api::all(client.clone());
    assert!(pods.list(&ListParams::default()).await.is_ok());
    let e = match pods.watch(&WatchParams::default(), "0").await {
        Err(e) => status(e),
        Ok(_) => panic!("watch must be forbidden"),
    };
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        e.message,
        "pods is forbidden: User \"lister\" cannot watch resource \"pods\" in API group \"\" at the cluster scope"
    );
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    assert_eq!(
        status(cms.list(&ListParams::default()).await.unwrap_err()).code,
        403
    );
}

#[tokio::test]
async fn token_with_a_namespaced_rule_reads_only_in_that_namespace() {
    // What a RoleBinding in "default" grants: pods there, and (RBAC's
    // rule for Namespace objects) the Namespace "default" itself.
    let (server, admin) = start_with(ApiServerConfig::default().token(
        "ns-reader",
        User::with_rules(
            "ns-reader",
            vec![
                Rule::new(&["get", "list", "watch"], &["pods", "namespaces"])
                    .in_namespace("default"),
            ],
        ),
    ))
    .await;
    for ns in ["default", "kube-public"] {
        Api::<Pod>::namespaced(admin.clone(), ns)
            .create(&PostParams::default(), &pod("p", json!({})))
            .await
            .unwrap();
    }
    let client = server.client_for_token("ns-reader").await.unwrap();
    let forbidden = |e: Error, message: &str| {
        let e = status(e);
        assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
        assert_eq!(e.message, message);
    };

    // In its namespace: list, get and watch.
    let own: Api<Pod> = Api::namespaced(client.clone(), "default");
    let listed = own.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(
        own.get("p").await.unwrap().metadata.name.as_deref(),
        Some("p")
    );
    assert!(own.watch(&WatchParams::default(), "0").await.is_ok());

    // All namespaces is a cluster-scope request.
    let all: Api<Pod> = Api::all(client.clone());
    forbidden(
        all.list(&ListParams::default()).await.unwrap_err(),
        "pods is forbidden: User \"ns-reader\" cannot list resource \"pods\" in API group \"\" at the cluster scope",
    );
    match all.watch(&WatchParams::default(), "0").await {
        Err(e) => forbidden(
            e,
            "pods is forbidden: User \"ns-reader\" cannot watch resource \"pods\" in API group \"\" at the cluster scope",
        ),
        Ok(_) => panic!("watching pods in all namespaces must be forbidden"),
    }

    // Another namespace.
    let other: Api<Pod> = Api::namespaced(client.clone(), "kube-public");
    forbidden(
        other.list(&ListParams::default()).await.unwrap_err(),
        "pods is forbidden: User \"ns-reader\" cannot list resource \"pods\" in API group \"\" in the namespace \"kube-public\"",
    );
    forbidden(
        other.get("p").await.unwrap_err(),
        "pods \"p\" is forbidden: User \"ns-reader\" cannot get resource \"pods\" in API group \"\" in the namespace \"kube-public\"",
    );

    // A Namespace object is in its own namespace; listing them is cluster scope.
    let namespaces: Api<Namespace> = Api::all(client);
    assert!(namespaces.get("default").await.is_ok());
    forbidden(
        namespaces.get("kube-public").await.unwrap_err(),
        "namespaces \"kube-public\" is forbidden: User \"ns-reader\" cannot get resource \"namespaces\" in API group \"\" in the namespace \"kube-public\"",
    );
    forbidden(
        namespaces.list(&ListParams::default()).await.unwrap_err(),
        "namespaces is forbidden: User \"ns-reader\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope",
    );
}

#[tokio::test]
async fn token_with_resource_names_reaches_only_the_named_object() {
    let (server, admin) = start_with(ApiServerConfig::default().token(
        "named",
        User::with_rules(
            "named",
            vec![Rule::new(&["get", "list", "watch", "update", "create"], &["configmaps"])
                .named(&["mine"])],
        ),
    ))
    .await;
    let admin_cms: Api<ConfigMap> = Api::namespaced(admin, "default");
    for name in ["mine", "theirs"] {
        admin_cms
            .create(&PostParams::default(), &cm(name, json!({"k": name})))
            .await
            .unwrap();
    }
    let cms: Api<ConfigMap> =
        Api::namespaced(server.client_for_token("named").await.unwrap(), "default");
    assert!(cms.get("mine").await.is_ok());
    let e = status(cms.get("theirs").await.unwrap_err());
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            403,
            "configmaps \"theirs\" is forbidden: User \"named\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"default\""
        )
    );
    // A list or watch names the object only through a metadata.name field selector.
    let one = cms
        .list(&ListParams::default().fields("metadata.name=mine"))
        .await
        .unwrap();
    assert_eq!(one.items.len(), 1);
    assert!(cms
        .watch(&WatchParams::default().fields("metadata.name=mine"), "0")
        .await
        .is_ok());
    let e = status(cms.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            403,
            "configmaps is forbidden: User \"named\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
        )
    );
    let e = status(
        cms.list(&ListParams::default().fields("metadata.name=theirs"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            403,
            "configmaps \"theirs\" is forbidden: User \"named\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
        )
    );
    // A create names no object in its URL, so resourceNames never allow it.
    let e = status(
        cms.create(&PostParams::default(), &cm("mine2", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            403,
            "configmaps is forbidden: User \"named\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\""
        )
    );
}

#[tokio::test]
async fn injected_429_is_retried_by_kube_after_retry_after() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    server.faults().fail(
        FailRequests::new(429, 1)
            .verb("list")
            .resource("configmaps")
            .retry_after(1),
    );
    let started = Instant::now();
    cms.list(&ListParams::default()).await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "Retry-After was honoured"
    );
    assert_eq!(server.faults().injected_failures(), 1);
}

#[tokio::test]
async fn injected_500_and_409_reach_the_client_once() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    server
        .faults()
        .fail(FailRequests::new(500, 1).verb("create"));
    let e = status(
        cms.create(&PostParams::default(), &cm("a", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (500, "InternalError"));
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    server
        .faults()
        .fail(FailRequests::new(409, 1).verb("update"));
    let cur = cms.get("a").await.unwrap();
    let e = status(
        cms.replace("a", &PostParams::default(), &cur)
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    cms.replace("a", &PostParams::default(), &cur)
        .await
        .unwrap();
}

#[tokio::test]
async fn injected_503_is_retried_by_default_and_surfaces_without_retries() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &cm("x", json!({})))
        .await
        .unwrap();
    server
        .faults()
        .fail(FailRequests::new(503, 2).verb("get").retry_after(0));
    cms.get("x").await.unwrap();
    assert_eq!(
        server.faults().injected_failures(),
        2,
        "both 503s were retried"
    );

    let mut config = server
        .kube_config_for_token(server.admin_token())
        .await
        .unwrap();
    config.default_retry = false;
    let no_retry: Api<ConfigMap> = Api::namespaced(Client::try_from(config).unwrap(), "default");
    server.faults().fail(FailRequests::new(503, 1).verb("get"));
    let e = status(no_retry.get("x").await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (503, "ServiceUnavailable"));
    assert_eq!(server.faults().injected_failures(), 3);
}

#[tokio::test]
async fn denied_verb_and_latency_faults_are_observed() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    server.faults().deny_verb("delete");
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let e = status(cms.delete("a", &DeleteParams::default()).await.unwrap_err());
    assert_eq!(e.code, 403);
    assert!(e.message.contains("cannot delete resource \"configmaps\""));
    server.faults().set_latency(Duration::from_millis(300));
    let started = Instant::now();
    cms.get("a").await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    server.faults().clear();
    cms.delete("a", &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn listener_restart_keeps_state_and_ends_open_watches() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("kept", json!({})))
        .await
        .unwrap();
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = cms
        .watch(&WatchParams::default().timeout(30), &rv)
        .await
        .unwrap()
        .boxed();
    server.stop_listener().await.unwrap();
    let ended = tokio::time::timeout(WAIT, stream.try_next()).await.unwrap();
    assert!(
        !matches!(ended, Ok(Some(_))),
        "watch ended when the listener stopped"
    );
    assert!(cms.get("kept").await.is_err(), "no server while stopped");
    server.restart_listener().await.unwrap();
    let fresh = server.client().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(fresh, "default");
    assert!(cms.get("kept").await.is_ok());
}

#[tokio::test]
async fn dropped_watch_ends_the_stream() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = cms
        .watch(&WatchParams::default().timeout(30), &rv)
        .await
        .unwrap()
        .boxed();
    tokio::time::sleep(Duration::from_millis(50)).await;
    server.faults().drop_watches();
    let ended = tokio::time::timeout(WAIT, stream.try_next())
        .await
        .unwrap()
        .unwrap();
    assert!(ended.is_none());
}

#[tokio::test]
async fn discovery_lists_core_and_group_resources() {
    let (_s, client) = start().await;
    let v = client.apiserver_version().await.unwrap();
    assert_eq!(v.major, "1");
    let core = client.list_core_api_resources("v1").await.unwrap();
    let pods = core.resources.iter().find(|r| r.name == "pods").unwrap();
    assert_eq!(pods.short_names.as_deref(), Some(&["po".to_string()][..]));
    assert!(core.resources.iter().any(|r| r.name == "pods/status"));
    let groups = client.list_api_groups().await.unwrap();
    assert!(groups
        .groups
        .iter()
        .any(|g| g.name == "coordination.k8s.io"));
    let ns: Api<Namespace> = Api::all(client);
    let names: Vec<_> = ns
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| n.metadata.name.unwrap())
        .collect();
    assert!(names.contains(&"default".to_string()) && names.contains(&"kube-system".to_string()));
}

#[tokio::test]
async fn leases_and_namespaces_round_trip_and_namespace_delete_empties_it() {
    let (_s, client) = start().await;
    let ns: Api<Namespace> = Api::all(client.clone());
    let created = ns
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "work"}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Active"));
    let leases: Api<Lease> = Api::namespaced(client.clone(), "work");
    let l: Lease = serde_json::from_value(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "leader"}, "spec": {"holderIdentity": "me"}})).unwrap();
    leases.create(&PostParams::default(), &l).await.unwrap();
    let got = leases.get("leader").await.unwrap();
    assert_eq!(got.spec.unwrap().holder_identity.as_deref(), Some("me"));
    // Deleting a namespace makes it Terminating at once; new content is
    // refused; the content, then the namespace, go in the background.
    let deleting = ns
        .delete("work", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("the namespace is returned, terminating");
    assert_eq!(
        deleting.status.unwrap().phase.as_deref(),
        Some("Terminating")
    );
    assert!(deleting.metadata.deletion_timestamp.is_some());
    let mut late = l.clone();
    late.metadata.name = Some("late".into());
    let refused = status(
        leases
            .create(&PostParams::default(), &late)
            .await
            .unwrap_err(),
    );
    assert_eq!(refused.code, 403);
    assert_eq!(
        refused.message,
        "leases.coordination.k8s.io \"late\" is forbidden: unable to create new content in namespace work because it is being terminated"
    );
    let started = Instant::now();
    while ns.get_opt("work").await.unwrap().is_some() {
        assert!(
            started.elapsed() < WAIT,
            "the namespace is removed once empty"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status(leases.get("leader").await.unwrap_err()).code, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_namespace_waits_for_its_running_pods_to_terminate() {
    let (_s, client) = start().await;
    let ns: Api<Namespace> = Api::all(client.clone());
    ns.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "job"}})).unwrap(),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "job");
    pods.create(&PostParams::default(), &scheduled("runner", 1))
        .await
        .unwrap();
    ns.delete("job", &DeleteParams::default()).await.unwrap();
    // The sweep deletes the pod like anyone would: gracefully.
    let started = Instant::now();
    loop {
        match pods.get_opt("runner").await.unwrap() {
            Some(p) if p.metadata.deletion_timestamp.is_some() => break,
            Some(_) => assert!(started.elapsed() < WAIT, "the pod starts terminating"),
            None => panic!("a running pod must terminate gracefully, not vanish"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        ns.get_opt("job").await.unwrap().is_some(),
        "still terminating"
    );
    while ns.get_opt("job").await.unwrap().is_some() {
        assert!(
            started.elapsed() < WAIT,
            "gone after the pod's grace period"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(started.elapsed() >= Duration::from_millis(800));
    assert!(pods.get_opt("runner").await.unwrap().is_none());
}

#[tokio::test]
async fn custom_resources_are_served_after_their_crd_is_created() {
    use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
    let (_s, client) = start().await;
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> = Api::all(client.clone());
    let crd = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}}}]}
    }))
    .unwrap();
    let made = crds.create(&PostParams::default(), &crd).await.unwrap();
    let conds = made.status.unwrap().conditions.unwrap();
    assert!(conds
        .iter()
        .any(|c| c.type_ == "Established" && c.status == "True"));
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let w: DynamicObject = serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}, "status": {"ignored": true}})).unwrap();
    let w = widgets.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(w.metadata.generation, Some(1));
    assert!(
        w.data.get("status").is_none(),
        "status is dropped on create"
    );
    let w = widgets
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}})),
        )
        .await
        .unwrap();
    assert_eq!(w.data["status"]["ready"], true);
    assert_eq!(w.metadata.generation, Some(1));
    let w = widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(w.metadata.generation, Some(2));
    let e = status(
        widgets
            .patch(
                "w",
                &PatchParams::default(),
                &Patch::Strategic(json!({"spec": {}})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (415, "UnsupportedMediaType"));
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(status(widgets.get("w").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn apply_conflicts_between_managers_are_409_with_field_causes_until_forced() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let cfg = |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owned"}, "data": {"key": v}});
    cms.patch(
        "owned",
        &PatchParams::apply("alice"),
        &Patch::Apply(&cfg("a")),
    )
    .await
    .unwrap();
    let e = status(
        cms.patch(
            "owned",
            &PatchParams::apply("bob"),
            &Patch::Apply(&cfg("b")),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        "Apply failed with 1 conflict: conflict with \"alice\": .data.key"
    );
    let causes = e.details.unwrap().causes;
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].reason, "FieldManagerConflict");
    assert_eq!(causes[0].field, ".data.key");
    // same value is no conflict; force transfers ownership
    cms.patch(
        "owned",
        &PatchParams::apply("bob"),
        &Patch::Apply(&cfg("a")),
    )
    .await
    .unwrap();
    let c = cms
        .patch(
            "owned",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(&cfg("b")),
        )
        .await
        .unwrap();
    assert_eq!(c.data.unwrap()["key"], "b");
    // an Update by another manager takes the field away from the appliers
    let c = cms
        .patch(
            "owned",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"key": "c"}})),
        )
        .await
        .unwrap();
    assert_eq!(c.data.unwrap()["key"], "c");
    let e = status(
        cms.patch(
            "owned",
            &PatchParams::apply("bob"),
            &Patch::Apply(&cfg("d")),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 409);
}

async fn post_fault(client: &Client, body: serde_json::Value) -> Result<serde_json::Value, Error> {
    let req = axum::http::Request::post("/wasmctrl/faults")
        .header("content-type", "application/json")
        .body(body.to_string().into_bytes())
        .unwrap();
    client.request::<serde_json::Value>(req).await
}

#[tokio::test]
async fn admin_fault_endpoint_injects_failures_and_restarts_the_listener() {
    let (server, client) = start_with(
        ApiServerConfig::default().token("user", User::with_rules("user", vec![Rule::all()])),
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("kept", json!({})))
        .await
        .unwrap();

    let user = server.client_for_token("user").await.unwrap();
    let e = status(
        post_fault(&user, json!({"action": "drop-watches"}))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 403, "only admin tokens may inject faults");

    let ok = post_fault(
        &client,
        json!({"action": "fail", "verb": "get", "resource": "configmaps", "count": 1, "code": 500}),
    )
    .await
    .unwrap();
    assert_eq!(ok["status"], "Success");
    assert_eq!(status(cms.get("kept").await.unwrap_err()).code, 500);
    assert!(cms.get("kept").await.is_ok());

    post_fault(
        &client,
        json!({"action": "restart-listener", "down_millis": 400}),
    )
    .await
    .unwrap();
    let deadline = Instant::now() + WAIT;
    let mut was_down = false;
    loop {
        assert!(
            Instant::now() < deadline,
            "listener never came back (down seen: {was_down})"
        );
        let fresh = server.client().await.unwrap();
        let api: Api<ConfigMap> = Api::namespaced(fresh, "default");
        match api.get("kept").await {
            Ok(_) if was_down => break,
            Ok(_) => {}
            Err(Error::Api(s)) => panic!("unexpected API error {s:?}"),
            Err(_) => was_down = true,
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn delete_collection_removes_only_selected_objects() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    for (name, app) in [("a", "x"), ("b", "x"), ("c", "y")] {
        let mut obj = cm(name, json!({}));
        obj.metadata.labels = Some([("app".to_string(), app.to_string())].into());
        cms.create(&PostParams::default(), &obj).await.unwrap();
    }
    cms.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("app=x"),
    )
    .await
    .unwrap();
    let left: Vec<_> = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| c.metadata.name.unwrap())
        .collect();
    assert_eq!(left, ["c"]);
}

#[tokio::test]
async fn events_are_served_in_core_and_events_k8s_io() {
    let (_s, client) = start().await;
    let core: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "default");
    let ev = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
        "reason": "Scheduled", "message": "m", "type": "Normal"
    }))
    .unwrap();
    core.create(&PostParams::default(), &ev).await.unwrap();
    let found = core
        .list(&ListParams::default().fields("involvedObject.name=p,reason=Scheduled"))
        .await
        .unwrap();
    assert_eq!(found.items.len(), 1);
    let new: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client, "default");
    let ev = serde_json::from_value(json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e2"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "wasmctrl",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}, "note": "n",
        "reportingInstance": "i", "action": "Reconcile", "reason": "Done", "type": "Normal"
    }))
    .unwrap();
    let made = new.create(&PostParams::default(), &ev).await.unwrap();
    assert_eq!(made.reason.as_deref(), Some("Done"));
    // both APIs serve the same stored events, converted per version
    let as_new = new.get("e1").await.unwrap();
    assert_eq!(as_new.note.as_deref(), Some("m"));
    assert_eq!(as_new.regarding.unwrap().name.as_deref(), Some("p"));
    let as_core = core.get("e2").await.unwrap();
    assert_eq!(as_core.reporting_component.as_deref(), Some("wasmctrl"));
    assert_eq!(
        core.list(&ListParams::default()).await.unwrap().items.len(),
        2
    );
}

#[tokio::test]
async fn list_resource_version_semantics_match_the_real_server() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let before_b = server.current_resource_version();
    cms.create(&PostParams::default(), &cm("b", json!({})))
        .await
        .unwrap();
    let current = server.current_resource_version();
    let any = cms.list(&ListParams::default().match_any()).await.unwrap();
    assert_eq!(any.items.len(), 2);
    // An older exact version is served as it was, while history holds it ...
    let older = ListParams::default()
        .at(&before_b.to_string())
        .matching(kube::api::VersionMatch::Exact);
    let l = cms.list(&older).await.unwrap();
    assert_eq!(l.metadata.resource_version, Some(before_b.to_string()));
    assert_eq!(l.items.len(), 1);
    // ... and is 410 Expired once compacted.
    server.faults().compact_history();
    let any = cms.list(&ListParams::default().match_any()).await.unwrap();
    assert_eq!(any.items.len(), 2);
    let exact = ListParams::default()
        .at(&current.to_string())
        .matching(kube::api::VersionMatch::Exact);
    assert_eq!(
        cms.list(&exact).await.unwrap().metadata.resource_version,
        Some(current.to_string())
    );
    let old = ListParams::default()
        .at(&before_b.to_string())
        .matching(kube::api::VersionMatch::Exact);
    let e = status(cms.list(&old).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
    let future = ListParams::default()
        .at(&(current + 100).to_string())
        .matching(kube::api::VersionMatch::NotOlderThan);
    let mut config = server
        .kube_config_for_token(server.admin_token())
        .await
        .unwrap();
    config.default_retry = false;
    let no_retry: Api<ConfigMap> = Api::namespaced(Client::try_from(config).unwrap(), "default");
    let e = status(no_retry.list(&future).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (504, "Timeout"));
    assert!(e.message.starts_with("Too large resource version"));
}

async fn raw(
    client: &Client,
    method: &str,
    path: &str,
    content_type: &str,
    accept: &str,
    body: &str,
) -> kube::core::Status {
    let req = axum::http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .header("accept", accept)
        .body(body.as_bytes().to_vec())
        .unwrap();
    match client.request::<serde_json::Value>(req).await {
        Err(e) => status(e),
        Ok(v) => panic!("expected a failure, got {v}"),
    }
}

#[tokio::test]
async fn malformed_requests_get_status_errors_not_panics() {
    let (_s, client) = start().await;
    let json = "application/json";
    let cms = "/api/v1/namespaces/default/configmaps";
    let s = raw(&client, "POST", cms, json, json, "{not json").await;
    assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"));
    assert!(s.message.contains("json parse error"), "{}", s.message);
    let s = raw(
        &client,
        "POST",
        cms,
        json,
        json,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"}}"#,
    )
    .await;
    assert_eq!(s.code, 400, "kind must match the URL");
    let s = raw(&client, "POST", cms, json, json, "[1]").await;
    assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"));
    // Like the real server, a body without kind/apiVersion takes the URL's
    // (the Python client sends typed objects that way).
    let req = axum::http::Request::builder()
        .method("POST")
        .uri(cms)
        .header("content-type", json)
        .body(br#"{"metadata":{"name":"untyped"}}"#.to_vec())
        .unwrap();
    let created: serde_json::Value = client.request(req).await.unwrap();
    assert_eq!(
        (&created["apiVersion"], &created["kind"]),
        (&json!("v1"), &json!("ConfigMap"))
    );
    let s = raw(&client, "GET", "/api/v1/widgets", json, json, "").await;
    assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
    let s = raw(&client, "GET", "/nope", json, json, "").await;
    assert_eq!(s.code, 404);
    let s = raw(&client, "POST", &format!("{cms}/x"), json, json, "{}").await;
    assert_eq!((s.code, s.reason.as_str()), (405, "MethodNotAllowed"));
    let s = raw(
        &client,
        "PATCH",
        &format!("{cms}/x"),
        "text/plain",
        json,
        "{}",
    )
    .await;
    assert_eq!((s.code, s.reason.as_str()), (415, "UnsupportedMediaType"));
    let s = raw(
        &client,
        "GET",
        cms,
        json,
        "application/vnd.kubernetes.protobuf",
        "",
    )
    .await;
    assert_eq!((s.code, s.reason.as_str()), (406, "NotAcceptable"));
    let s = raw(
        &client,
        "GET",
        &format!("{cms}?labelSelector=a%20in%20b"),
        json,
        json,
        "",
    )
    .await;
    assert_eq!(s.code, 400);
    let s = raw(
        &client,
        "GET",
        &format!("{cms}?continue=garbage"),
        json,
        json,
        "",
    )
    .await;
    assert_eq!(s.code, 400);
    let s = raw(&client, "GET", &format!("{cms}?limit=x"), json, json, "").await;
    assert_eq!(s.code, 400);
}

#[tokio::test]
async fn single_object_watch_path_sees_only_that_object() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &cm("b", json!({})))
        .await
        .unwrap();
    let req = axum::http::Request::get(
        "/api/v1/namespaces/default/configmaps/a?watch=true&resourceVersion=0&timeoutSeconds=1",
    )
    .body(Vec::new())
    .unwrap();
    let body = tokio::time::timeout(WAIT, client.request_text(req))
        .await
        .unwrap()
        .unwrap();
    let names: Vec<String> = body
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|e| {
            e["object"]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(names, ["a"]);
}

#[tokio::test]
async fn kube_runtime_finalizer_patches_are_accepted() {
    // the exact JSON patches kube::runtime::finalizer sends to add and remove its finalizer
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &cm("f", json!({})))
        .await
        .unwrap();
    let add = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/cleanup"]}
    ]))
    .unwrap();
    let c = cms
        .patch("f", &PatchParams::default(), &Patch::Json::<()>(add))
        .await
        .unwrap();
    assert_eq!(
        c.metadata.finalizers.as_deref(),
        Some(&["example.com/cleanup".to_string()][..])
    );
    cms.delete("f", &DeleteParams::default()).await.unwrap();
    let remove = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers/0", "value": "example.com/cleanup"},
        {"op": "remove", "path": "/metadata/finalizers/0"}
    ]))
    .unwrap();
    cms.patch("f", &PatchParams::default(), &Patch::Json::<()>(remove))
        .await
        .unwrap();
    assert_eq!(status(cms.get("f").await.unwrap_err()).code, 404);
}

fn scheduled(name: &str, grace: i64) -> Pod {
    let mut p = serde_json::to_value(pod(name, json!({}))).unwrap();
    p["spec"]["nodeName"] = json!("n1");
    p["spec"]["terminationGracePeriodSeconds"] = json!(grace);
    serde_json::from_value(p).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_scheduled_pod_is_graceful_until_its_kubelet_removes_it() {
    let (_s, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(&PostParams::default(), &scheduled("p", 2))
        .await
        .unwrap();
    let mut stream = pods
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let started = Instant::now();
    // The DELETE answers with the pod, now terminating; it is still there.
    let out = pods.delete("p", &DeleteParams::default()).await.unwrap();
    let p = out.left().expect("graceful deletion returns the object");
    assert_eq!(p.metadata.deletion_grace_period_seconds, Some(2));
    let ts = p.metadata.deletion_timestamp.clone().unwrap().0;
    let now = chrono_now_secs();
    assert!(
        (ts.as_second() - now - 2).abs() <= 1,
        "deletionTimestamp is now + grace: {ts} vs now {now}"
    );
    let still = pods.get("p").await.unwrap();
    assert_eq!(
        still.metadata.deletion_timestamp,
        p.metadata.deletion_timestamp
    );
    // A second delete without a shorter period changes nothing.
    let again = pods
        .delete("p", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(again.metadata.resource_version, p.metadata.resource_version);
    // Watchers see MODIFIED (terminating), then DELETED once the grace
    // period is over.
    let mut kinds = Vec::new();
    while kinds.last() != Some(&"DELETED") {
        let ev = tokio::time::timeout(WAIT, stream.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        kinds.push(match ev {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(e) => panic!("{e:?}"),
        });
    }
    assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"]);
    assert!(started.elapsed() >= Duration::from_millis(1500));
    assert!(pods.get_opt("p").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminating_pod_stays_without_a_kubelet_and_a_shorter_grace_period_removes_it() {
    let (_s, client) = start_with(ApiServerConfig::default().kubelet(false)).await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(&PostParams::default(), &scheduled("p", 30))
        .await
        .unwrap();
    pods.delete("p", &DeleteParams::default()).await.unwrap();
    let shortened = pods
        .delete("p", &DeleteParams::default().grace_period(10))
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(shortened.metadata.deletion_grace_period_seconds, Some(10));
    // Longer is ignored.
    let same = pods
        .delete("p", &DeleteParams::default().grace_period(60))
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(same.metadata.deletion_grace_period_seconds, Some(10));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        pods.get_opt("p").await.unwrap().is_some(),
        "no kubelet: still terminating"
    );
    // Zero means now (kubectl delete --force --grace-period=0).
    pods.delete("p", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    assert!(pods.get_opt("p").await.unwrap().is_none());

    // Unscheduled and terminal pods never wait.
    pods.create(&PostParams::default(), &pod("pending", json!({})))
        .await
        .unwrap();
    pods.delete("pending", &DeleteParams::default())
        .await
        .unwrap();
    assert!(pods.get_opt("pending").await.unwrap().is_none());
    pods.create(&PostParams::default(), &scheduled("done", 30))
        .await
        .unwrap();
    pods.patch_status(
        "done",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .unwrap();
    pods.delete("done", &DeleteParams::default()).await.unwrap();
    assert!(pods.get_opt("done").await.unwrap().is_none());
}

fn chrono_now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Sends a raw request (kube-rs 5's `PostParams` has no `fieldValidation`);
/// returns the status code, the `Warning` headers and the JSON body.
async fn send_json(
    client: &Client,
    method: &str,
    uri: &str,
    body: &str,
) -> (u16, Vec<String>, serde_json::Value) {
    let req = axum::http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(kube::client::Body::from(body.as_bytes().to_vec()))
        .unwrap();
    let res = client.send(req).await.unwrap();
    let code = res.status().as_u16();
    let warnings = res
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let bytes = res.into_body().collect_bytes().await.unwrap();
    (code, warnings, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn unknown_fields_are_refused_warned_about_or_dropped_by_field_validation() {
    let (_s, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let ar = kube::api::ApiResource::erase::<Pod>(&());
    let dyn_pods: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &ar);
    // unknown fields in spec and in a container, `spec.foo` first in the document
    let manifest = |name: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}"}},
            "spec":{{"foo":"bar","containers":[{{"name":"c","image":"busybox:1.36","bar":1}}]}}}}"#
        )
    };
    let uri = "/api/v1/namespaces/default/pods";

    // Strict: 400 with the real server's message, in document order; nothing stored
    let (code, warnings, body) = send_json(
        &client,
        "POST",
        &format!("{uri}?fieldValidation=Strict"),
        &manifest("strict"),
    )
    .await;
    assert_eq!((code, &body["reason"]), (400, &json!("BadRequest")));
    assert_eq!(
        body["message"],
        r#"Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.foo", unknown field "spec.containers[0].bar""#
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(status(pods.get("strict").await.unwrap_err()).code, 404);

    // Warn: created, one Warning header per unknown field, the fields not stored
    let (code, warnings, body) = send_json(
        &client,
        "POST",
        &format!("{uri}?fieldValidation=Warn"),
        &manifest("warned"),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        warnings,
        [
            r#"299 - "unknown field \"spec.foo\"""#,
            r#"299 - "unknown field \"spec.containers[0].bar\"""#
        ]
    );
    assert!(body["spec"].get("foo").is_none(), "{body}");

    // absent is Warn: kube-rs's create succeeds and GET shows the fields gone
    let obj: kube::api::DynamicObject = serde_json::from_str(&manifest("default")).unwrap();
    assert_eq!(obj.data["spec"]["foo"], "bar", "the client did send it");
    dyn_pods.create(&PostParams::default(), &obj).await.unwrap();
    let got = dyn_pods.get("default").await.unwrap();
    assert!(got.data["spec"].get("foo").is_none(), "{:?}", got.data);
    let container = &got.data["spec"]["containers"][0];
    assert!(container.get("bar").is_none(), "{container}");
    assert_eq!(container["image"], "busybox:1.36");

    // Ignore: created without warnings
    let (code, warnings, _) = send_json(
        &client,
        "POST",
        &format!("{uri}?fieldValidation=Ignore"),
        &manifest("ignored"),
    )
    .await;
    assert_eq!((code, warnings.len()), (201, 0));

    // an unsupported directive is 422 about the options
    let (code, _, body) = send_json(
        &client,
        "POST",
        &format!("{uri}?fieldValidation=strict"),
        &manifest("bad"),
    )
    .await;
    assert_eq!(code, 422);
    assert!(
        body["message"].as_str().unwrap().starts_with(
            r#"CreateOptions "" is invalid: fieldValidation: Unsupported value: "strict""#
        ),
        "{body}"
    );

    // patches are judged on the patched object: Strict is 422, Warn drops
    let merge = Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}, "spec": {"foo": 1}}));
    let e = status(
        pods.patch(
            "default",
            &PatchParams::default().validation_strict(),
            &merge,
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(
        e.message
            .starts_with(r#" "" is invalid: patch: Invalid value: "{"#)
            && e.message
                .ends_with(r#"": strict decoding error: unknown field "spec.foo""#),
        "{}",
        e.message
    );
    let patched = pods
        .patch("default", &PatchParams::default(), &merge)
        .await
        .unwrap();
    assert_eq!(patched.metadata.labels.unwrap()["a"], "b");
    let got = dyn_pods.get("default").await.unwrap();
    assert!(got.data["spec"].get("foo").is_none(), "{:?}", got.data);

    // server-side apply: structured-merge-diff's 500, whatever the directive
    let config: serde_json::Value = serde_json::from_str(&manifest("default")).unwrap();
    for pp in [
        PatchParams::apply("t").validation_ignore(),
        PatchParams::apply("t"),
    ] {
        let e = status(
            dyn_pods
                .patch("default", &pp, &Patch::Apply(&config))
                .await
                .unwrap_err(),
        );
        assert_eq!((e.code, e.reason.as_str()), (500, ""));
        assert_eq!(
            e.message,
            "failed to create typed patch object (/default; /v1, Kind=Pod): errors:\n  .spec.containers[name=\"c\"].bar: field not declared in schema\n  .spec.foo: field not declared in schema"
        );
    }
}

#[tokio::test]
async fn an_apply_that_creates_is_authorized_as_create_too() {
    let (server, admin) = start().await;
    server.add_token(
        "patcher",
        User::with_rules(
            "patcher",
            vec![Rule::new(&["get", "patch"], &["configmaps"])],
        ),
    );
    let patcher = server.client_for_token("patcher").await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(patcher, "default");
    let apply = PatchParams::apply("test").force();
    let doc = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}});
    let err = status(
        cms.patch("c", &apply, &Patch::Apply(&doc))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 403);
    assert_eq!(
        err.message,
        "configmaps \"c\" is forbidden: User \"patcher\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    // Once it exists, patch alone is enough.
    Api::<ConfigMap>::namespaced(admin, "default")
        .create(&PostParams::default(), &cm("c", json!({})))
        .await
        .unwrap();
    let applied = cms.patch("c", &apply, &Patch::Apply(&doc)).await.unwrap();
    assert_eq!(applied.data.unwrap()["k"], "v");
}
