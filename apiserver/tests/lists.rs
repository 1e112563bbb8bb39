//! Lists: paging with continue tokens served from the first page's
//! snapshot (410 once compacted), label and field selectors, and the
//! resourceVersion and resourceVersionMatch semantics of the real server.
//!
//! Like every kube-client module, it talks to the server only over HTTPS
//! (kube's typed calls, raw requests where kube has none) and never
//! reaches into the server's internals beyond its fault handle.

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::json;

use crate::common::{
    bind, client_without_retries, cm, create, list_names, merge_patch, pod, start, status,
};

#[tokio::test]
async fn paging_with_continue_returns_every_item_once_and_expired_token_is_410() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    for i in 0..7 {
        create(&cms, &cm(&format!("cm-{i}"), json!({}))).await;
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
    create(&cms, &cm("later", json!({}))).await;
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
        create(&cms, &cm(&format!("cm-{i}"), json!({"v": "old"}))).await;
    }
    let first = cms.list(&ListParams::default().limit(3)).await.unwrap();
    let rv = first.metadata.resource_version.clone().unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    // Changes after the first page: none may show in the later pages.
    create(&cms, &cm("cm-3a", json!({}))).await;
    cms.delete("cm-4", &DeleteParams::default()).await.unwrap();
    merge_patch(&cms, "cm-5", json!({"data": {"v": "new"}})).await;
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
    let names = list_names(&cms, &ListParams::default()).await;
    assert_eq!(names, ["cm-0", "cm-1", "cm-2", "cm-3", "cm-3a", "cm-5"]);
}

#[tokio::test]
async fn label_and_field_selectors_filter_lists() {
    let (_s, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    create(&pods, &pod("web-1", json!({"app": "web", "tier": "fe"}))).await;
    create(&pods, &pod("web-2", json!({"app": "web"}))).await;
    create(&pods, &pod("db-1", json!({"app": "db"}))).await;
    bind(&pods, "db-1", "n1").await;
    let q = |s: &str| ListParams::default().labels(s);
    assert_eq!(list_names(&pods, &q("app=web")).await, ["web-1", "web-2"]);
    assert_eq!(list_names(&pods, &q("app!=web")).await, ["db-1"]);
    assert_eq!(list_names(&pods, &q("app in (db,x)")).await, ["db-1"]);
    assert_eq!(
        list_names(&pods, &q("app notin (db)")).await,
        ["web-1", "web-2"]
    );
    assert_eq!(list_names(&pods, &q("tier")).await, ["web-1"]);
    assert_eq!(list_names(&pods, &q("!tier")).await, ["db-1", "web-2"]);
    let f = |s: &str| ListParams::default().fields(s);
    assert_eq!(list_names(&pods, &f("spec.nodeName=n1")).await, ["db-1"]);
    assert_eq!(
        list_names(&pods, &f("spec.nodeName=")).await,
        ["web-1", "web-2"]
    );
    assert_eq!(
        list_names(&pods, &f("metadata.name!=web-1,status.phase=Pending")).await,
        ["db-1", "web-2"]
    );
    let e = status(pods.list(&f("spec.bogus=x")).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
    assert_eq!(e.message, "field label not supported: spec.bogus");
    let all: Api<Pod> = Api::all(client);
    assert_eq!(all.list(&q("app=web")).await.unwrap().items.len(), 2);
}

#[tokio::test]
async fn list_resource_version_semantics_match_the_real_server() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    create(&cms, &cm("a", json!({}))).await;
    let before_b = server.current_resource_version();
    create(&cms, &cm("b", json!({}))).await;
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
    let no_retry: Api<ConfigMap> =
        Api::namespaced(client_without_retries(&server).await, "default");
    let e = status(no_retry.list(&future).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (504, "Timeout"));
    assert!(e.message.starts_with("Too large resource version"));
}
