//! Garbage collection of dependents as a client sees it: background,
//! foreground and orphan propagation, `blockOwnerDeletion`, dependents
//! held by their own finalizers, dependents whose owner is gone (or was
//! never there) when they are created, and the same cascades through
//! `kubectl delete --cascade=...`.
//!
//! Owners and dependents are ConfigMaps (and a pod), related only by
//! `metadata.ownerReferences`, as a controller's owned outputs are.

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use kube::Client;
use serde_json::json;
use wasmctrl_apiserver::ApiServerConfig;
use wasmctrl_test_support::Kubectl;

use crate::common::{cm, create, eventually, merge_patch, pod, start, start_with, status};

/// A ConfigMap `name` owned by the ConfigMap `owner` (with `uid`).
fn owned(name: &str, owner: &str, uid: &str, block: bool) -> ConfigMap {
    let mut obj = cm(name, json!({}));
    obj.metadata.owner_references = Some(vec![serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": uid,
        "blockOwnerDeletion": block}))
    .unwrap()]);
    obj
}

async fn exists(api: &Api<ConfigMap>, name: &str) -> bool {
    api.get_opt(name).await.unwrap().is_some()
}

async fn gone(api: &Api<ConfigMap>, name: &str) {
    let api = api.clone();
    eventually(&format!("{name} is deleted"), async || {
        !exists(&api, name).await
    })
    .await;
}

/// Creates the owner `o` and returns its uid.
async fn owner(cms: &Api<ConfigMap>) -> String {
    create(cms, &cm("o", json!({}))).await.metadata.uid.unwrap()
}

fn cms(client: &Client) -> Api<ConfigMap> {
    Api::namespaced(client.clone(), "default")
}

#[tokio::test]
async fn background_deletion_removes_the_owner_at_once_and_its_dependents_after() {
    let (_s, client) = start().await;
    let cms = cms(&client);
    let uid = owner(&cms).await;
    create(&cms, &owned("a", "o", &uid, false)).await;
    create(&cms, &owned("b", "o", &uid, true)).await;
    // a second, live owner keeps "shared"; only the reference to "o" goes
    let other = create(&cms, &cm("other", json!({}))).await;
    let mut shared = owned("shared", "o", &uid, false);
    let refs = shared.metadata.owner_references.as_mut().unwrap();
    refs.push(
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "name": "other", "uid": other.metadata.uid.unwrap()}))
        .unwrap(),
    );
    create(&cms, &shared).await;

    cms.delete("o", &DeleteParams::background()).await.unwrap();
    assert!(!exists(&cms, "o").await, "the owner goes at once");
    gone(&cms, "a").await;
    gone(&cms, "b").await;
    let c = cms.clone();
    eventually("shared loses its reference to the gone owner", async || {
        let refs = c.get("shared").await.unwrap().metadata.owner_references;
        refs.is_some_and(|r| r.len() == 1 && r[0].name == "other")
    })
    .await;
    assert!(exists(&cms, "other").await);
}

#[tokio::test]
async fn default_propagation_is_background() {
    let (_s, client) = start().await;
    let cms = cms(&client);
    let uid = owner(&cms).await;
    create(&cms, &owned("a", "o", &uid, false)).await;
    cms.delete("o", &DeleteParams::default()).await.unwrap();
    assert!(!exists(&cms, "o").await);
    gone(&cms, "a").await;
}

#[tokio::test]
async fn foreground_deletion_waits_for_blocking_dependents_even_with_finalizers() {
    let (_s, client) = start().await;
    let cms = cms(&client);
    let uid = owner(&cms).await;
    let mut held = owned("held", "o", &uid, true);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    create(&cms, &held).await;
    create(&cms, &owned("free", "o", &uid, false)).await;

    let deleted = cms.delete("o", &DeleteParams::foreground()).await.unwrap();
    let pending = deleted
        .left()
        .expect("the owner stays while dependents remain");
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert_eq!(
        pending.metadata.finalizers,
        Some(vec!["foregroundDeletion".into()])
    );
    // the non-blocking dependent goes; the blocking one is marked and waits
    gone(&cms, "free").await;
    let c = cms.clone();
    eventually("the held dependent is being deleted", async || {
        c.get("held")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    })
    .await;
    assert!(
        exists(&cms, "o").await,
        "a blocking dependent holds the owner"
    );

    merge_patch(&cms, "held", json!({"metadata": {"finalizers": null}})).await;
    gone(&cms, "held").await;
    gone(&cms, "o").await;
}

#[tokio::test]
async fn foreground_deletion_of_an_owner_without_blocking_dependents_finishes() {
    let (_s, client) = start().await;
    let cms = cms(&client);
    owner(&cms).await;
    cms.delete("o", &DeleteParams::foreground()).await.unwrap();
    gone(&cms, "o").await;
}

#[tokio::test]
async fn orphan_deletion_keeps_dependents_without_the_reference() {
    let (_s, client) = start().await;
    let cms = cms(&client);
    let uid = owner(&cms).await;
    create(&cms, &owned("a", "o", &uid, true)).await;
    let deleted = cms.delete("o", &DeleteParams::orphan()).await.unwrap();
    if let Some(pending) = deleted.left() {
        assert_eq!(pending.metadata.finalizers, Some(vec!["orphan".into()]));
    }
    gone(&cms, "o").await;
    let a = cms.get("a").await.unwrap();
    assert_eq!(a.metadata.owner_references, None);
    assert!(a.metadata.deletion_timestamp.is_none());
}

#[tokio::test]
async fn without_a_collector_foreground_and_orphan_owners_keep_their_finalizer() {
    let (_s, client) = start_with(ApiServerConfig::default().garbage_collector(false)).await;
    let cms = cms(&client);
    let uid = owner(&cms).await;
    create(&cms, &owned("a", "o", &uid, true)).await;
    cms.delete("o", &DeleteParams::orphan()).await.unwrap();
    let o = cms.get("o").await.unwrap();
    assert_eq!(o.metadata.finalizers, Some(vec!["orphan".into()]));
    // a second delete with another policy swaps the finalizer
    cms.delete("o", &DeleteParams::foreground()).await.unwrap();
    let o = cms.get("o").await.unwrap();
    assert_eq!(
        o.metadata.finalizers,
        Some(vec!["foregroundDeletion".into()])
    );
    // background drops it, and with no finalizer left the owner goes
    cms.delete("o", &DeleteParams::background()).await.unwrap();
    assert!(!exists(&cms, "o").await);
    assert!(exists(&cms, "a").await, "nobody collects the dependent");
}

#[tokio::test]
async fn a_dependent_whose_owner_is_gone_at_creation_is_collected() {
    let (_s, client) = start().await;
    let cms = cms(&client);
    let uid = owner(&cms).await;
    // kinds this server does not serve cannot be resolved: left alone
    let mut unresolvable = cm("unresolvable", json!({}));
    unresolvable.metadata.owner_references = Some(vec![serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Gadget", "name": "g", "uid": "u-g"}))
    .unwrap()]);
    create(&cms, &unresolvable).await;
    create(&cms, &owned("never", "missing", "u-missing", false)).await;
    // the owner's name with another uid is another object: the owner is gone
    create(&cms, &owned("stale", "o", "not-the-uid", false)).await;
    create(&cms, &owned("live", "o", &uid, false)).await;
    gone(&cms, "never").await;
    gone(&cms, "stale").await;
    assert!(exists(&cms, "live").await);
    assert!(exists(&cms, "unresolvable").await);
}

#[tokio::test]
async fn a_dependent_pod_is_deleted_gracefully() {
    let (_s, client) = start_with(ApiServerConfig::default().kubelet(false)).await;
    let cms = cms(&client);
    let uid = owner(&cms).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut p = pod("p", json!({}));
    p.spec.as_mut().unwrap().node_name = Some("n1".into());
    p.metadata.owner_references = Some(vec![serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": uid}))
    .unwrap()]);
    pods.create(&PostParams::default(), &p).await.unwrap();
    cms.delete("o", &DeleteParams::background()).await.unwrap();
    let pods2 = pods.clone();
    eventually("the pod is terminating", async || {
        pods2
            .get("p")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    })
    .await;
    let p = pods.get("p").await.unwrap();
    assert_eq!(p.metadata.deletion_grace_period_seconds, Some(30));
}

#[tokio::test]
async fn orphan_dependents_and_propagation_policy_together_are_refused() {
    let (_s, client) = start().await;
    let cms = cms(&client);
    owner(&cms).await;
    let dp = DeleteParams {
        propagation_policy: Some(kube::api::PropagationPolicy::Foreground),
        ..DeleteParams::default()
    };
    // kube's DeleteParams has no orphanDependents: send the body by hand
    let body = json!({"kind": "DeleteOptions", "apiVersion": "v1",
        "propagationPolicy": "Foreground", "orphanDependents": false});
    let req = http::Request::delete("/api/v1/namespaces/default/configmaps/o")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).unwrap())
        .unwrap();
    let e = status(client.request::<ConfigMap>(req).await.unwrap_err());
    assert_eq!(e.code, 422);
    assert_eq!(
        e.message,
        "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: \"Foreground\": orphanDependents and deletionPropagation cannot be both set"
    );
    assert!(exists(&cms, "o").await, "a refused delete deletes nothing");
    cms.delete("o", &dp).await.unwrap();
    gone(&cms, "o").await;
}

#[tokio::test]
async fn kubectl_delete_cascade_foreground_orphan_and_background() {
    let (server, client) = start().await;
    let Some(k) = Kubectl::admin(&server) else {
        return;
    };
    let cms = cms(&client);
    for cascade in ["foreground", "orphan", "background"] {
        let uid = owner(&cms).await;
        create(&cms, &owned("a", "o", &uid, true)).await;
        let out = k
            .ok(&["delete", "configmap", "o", &format!("--cascade={cascade}")])
            .await;
        assert_eq!(out.trim(), "configmap \"o\" deleted", "{cascade}");
        assert!(!exists(&cms, "o").await, "kubectl waits for the owner");
        if cascade == "orphan" {
            let a = cms.get("a").await.unwrap();
            assert_eq!(a.metadata.owner_references, None);
            cms.delete("a", &DeleteParams::default()).await.unwrap();
        } else {
            gone(&cms, "a").await;
        }
    }
}
