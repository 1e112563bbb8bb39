//! Watches as a client sees them: ADDED/MODIFIED/DELETED as objects move
//! into and out of a selector, synthetic ADDED events from resourceVersion
//! 0, timeouts, 410 Expired after compaction, bookmarks (streaming lists and
//! periodic), single-object watches, and kube-runtime's watcher and
//! reflector relisting and converging on top of them.
//!
//! Like every kube-client module, it talks to the server only over HTTPS
//! (kube's typed calls, raw requests where kube has none) and never
//! reaches into the server's internals beyond its fault handle.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, DeleteParams, WatchEvent, WatchParams};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use serde_json::json;
use wasmctrl_apiserver::ApiServerConfig;

use crate::common::{
    bind, cm, create, eventually, list_rv, merge_patch, next, next_event_types, next_or_end, pod,
    start, start_with, watch, WAIT,
};

#[tokio::test]
async fn watch_applies_selector_transitions_as_added_and_deleted() {
    let (_s, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    create(&pods, &pod("p", json!({"app": "x"}))).await;
    let rv = list_rv(&pods).await;
    let wp = WatchParams::default()
        .fields("spec.nodeName=n1")
        .labels("app=x")
        .timeout(10);
    let mut stream = watch(&pods, &wp, &rv).await;
    bind(&pods, "p", "n1").await;
    merge_patch(&pods, "p", json!({"metadata": {"annotations": {"a": "b"}}})).await;
    merge_patch(&pods, "p", json!({"metadata": {"labels": {"app": "y"}}})).await;
    merge_patch(&pods, "p", json!({"metadata": {"labels": {"app": "x"}}})).await;
    // Scheduled and running: only gracePeriodSeconds 0 removes it at once.
    pods.delete("p", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let seen = next_event_types(&mut stream, 5).await;
    assert_eq!(seen, ["ADDED", "MODIFIED", "DELETED", "ADDED", "DELETED"]);
}

#[tokio::test]
async fn watch_from_zero_starts_with_synthetic_added_events() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    create(&cms, &cm("a", json!({}))).await;
    let mut stream = watch(&cms, &WatchParams::default().timeout(10), "0").await;
    let ev = next(&mut stream).await;
    assert!(matches!(ev, WatchEvent::Added(c) if c.metadata.name.as_deref() == Some("a")));
    create(&cms, &cm("b", json!({}))).await;
    let ev = next(&mut stream).await;
    assert!(matches!(ev, WatchEvent::Added(c) if c.metadata.name.as_deref() == Some("b")));
}

#[tokio::test]
async fn watch_timeout_seconds_ends_the_stream() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let rv = list_rv(&cms).await;
    let started = Instant::now();
    let mut stream = watch(&cms, &WatchParams::default().timeout(1), &rv).await;
    let end = next_or_end(&mut stream).await;
    assert!(end.is_none());
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn watch_from_compacted_version_gets_410_expired_error_event() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let rv = list_rv(&cms).await;
    create(&cms, &cm("a", json!({}))).await;
    server.faults().compact_history();
    let mut stream = watch(&cms, &WatchParams::default().timeout(5), &rv).await;
    let ev = next(&mut stream).await;
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
    create(&cms, &cm("before", json!({}))).await;
    let mut events = watcher(cms.clone(), watcher::Config::default()).boxed();
    assert!(matches!(next(&mut events).await, watcher::Event::Init));
    assert!(matches!(
        next(&mut events).await,
        watcher::Event::InitApply(_)
    ));
    assert!(matches!(next(&mut events).await, watcher::Event::InitDone));
    // advance the global resourceVersion past what the configmap watcher saw
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
    create(&secrets, &serde_json::from_value(secret).unwrap()).await;
    server.faults().compact_history();
    server.faults().drop_watches();
    create(&cms, &cm("after", json!({}))).await;
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
        match next(&mut events).await {
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
    create(&cms, &cm("a", json!({}))).await;
    let mut events = watcher(cms.clone(), watcher::Config::default().streaming_lists()).boxed();
    assert!(matches!(next(&mut events).await, watcher::Event::Init));
    assert!(
        matches!(next(&mut events).await, watcher::Event::InitApply(c) if c.metadata.name.as_deref() == Some("a"))
    );
    assert!(matches!(next(&mut events).await, watcher::Event::InitDone));
    create(&cms, &cm("b", json!({}))).await;
    assert!(
        matches!(next(&mut events).await, watcher::Event::Apply(c) if c.metadata.name.as_deref() == Some("b"))
    );
}

/// Refusing streaming lists in its storage layer, the server answers as a
/// 1.32 kube-apiserver on its defaults over an etcd that cannot report
/// watch progress: 200, one ERROR event (byte for byte what that server
/// sent), the end of the stream. A plain watch and a paged list still work.
#[tokio::test]
async fn a_storage_refusing_watch_streams_answers_a_streaming_list_with_one_error_event() {
    use wasmctrl_apiserver::WatchList;
    let (_s, client) =
        start_with(ApiServerConfig::default().watch_list(WatchList::StorageRefused)).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create(&cms, &cm("a", json!({}))).await;
    let request = http::Request::get(
        "/api/v1/namespaces/default/configmaps?watch=true&sendInitialEvents=true\
         &resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=3600",
    )
    .body(Vec::new())
    .unwrap();
    // The stream ends after its one event, not at its timeout.
    let body = tokio::time::timeout(WAIT, client.request_text(request))
        .await
        .expect("the stream ends after its one event")
        .unwrap();
    assert_eq!(
        body,
        concat!(
            r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"#,
            r#""status":"Failure","message":"a watch stream was requested by the client but the required storage feature RequestWatchProgress is disabled","#,
            r#""reason":"InternalError","code":500}}"#,
            "\n"
        )
    );
    // Without sendInitialEvents nothing is refused.
    let mut stream = watch(&cms, &WatchParams::default().timeout(10), "0").await;
    assert!(matches!(next(&mut stream).await, WatchEvent::Added(_)));
    let names: Vec<_> = cms.list(&Default::default()).await.unwrap().items;
    assert_eq!(names.len(), 1);
}

#[tokio::test]
async fn periodic_bookmarks_carry_the_latest_resource_version() {
    let (_s, client) =
        start_with(ApiServerConfig::default().bookmark_interval(Duration::from_millis(200))).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let rv = list_rv(&cms).await;
    let mut stream = watch(&cms, &WatchParams::default().timeout(5), &rv).await;
    let leases: Api<Lease> = Api::namespaced(client, "default");
    let l: Lease = serde_json::from_value(
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}}),
    )
    .unwrap();
    let lease_rv = create(&leases, &l).await.metadata.resource_version.unwrap();
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(
            Instant::now() < deadline,
            "no bookmark at the lease's resourceVersion"
        );
        let ev = next(&mut stream).await;
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
    create(&cms, &cm("a", json!({}))).await;
    let (reader, writer) = reflector::store();
    let stream =
        reflector(writer, watcher(cms.clone(), watcher::Config::default())).applied_objects();
    let task = tokio::spawn(stream.for_each(|_| async {}));
    tokio::time::timeout(WAIT, reader.wait_until_ready())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reader.len(), 1);
    create(&cms, &cm("b", json!({}))).await;
    cms.delete("a", &DeleteParams::default()).await.unwrap();
    eventually("reflector never converged", async || {
        reader.len() == 1 && reader.state()[0].metadata.name.as_deref() == Some("b")
    })
    .await;
    task.abort();
}

#[tokio::test]
async fn single_object_watch_path_sees_only_that_object() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create(&cms, &cm("a", json!({}))).await;
    create(&cms, &cm("b", json!({}))).await;
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
