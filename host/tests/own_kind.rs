//! A guest that watches the kind it writes: the watch and the outputs
//! cache then share one resource (and, with the same selectors, the
//! registry's informer widened with the whole object). No-op avoidance,
//! echo bookkeeping and explicit deletes must work exactly as for a guest
//! writing a kind it does not watch — cluster-wide and namespaced.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;
use wasmctrl::controller::ControllerConfig;
use wasmctrl::supervisor::SupervisorConfig;

use crate::support::wat::{
    configmap_doc, guest, Behaviour, WatKeys, WatManifest, WatRef, WatRule, WatWatch, WatWrite,
};
use crate::support::*;

/// ConfigMaps watched in `namespace` (None: every namespace), all under one
/// key, and ConfigMaps writable in the same scope.
fn watching_what_it_writes(namespace: Option<&str>) -> WatManifest {
    WatManifest {
        name: "mirror".into(),
        watches: vec![WatWatch {
            name: "maps".into(),
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            plural: None,
            namespace: namespace.map(str::to_string),
            fields: vec!["data.source".into()],
            indexes: Vec::new(),
            keys: WatKeys::Aggregate("all".into()),
            finalizer: None,
            label_selector: None,
        }],
        writes: vec![WatRule {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: namespace.map(str::to_string),
            names: Vec::new(),
            status: false,
        }],
    }
}

async fn start(
    client: &Client,
    dir: &std::path::Path,
    manifest: &WatManifest,
    behaviour: Behaviour,
) -> RunningHost {
    let path = dir.join("mirror.wasm");
    std::fs::write(&path, guest(manifest, behaviour)).unwrap();
    let controller = ControllerConfig::default().resync(Duration::from_millis(300));
    let config = SupervisorConfig {
        guests: vec![path],
        ..host_config(controller)
    };
    run_host(client, config, None).await
}

async fn no_op_writes_are_skipped(namespace: Option<&str>) {
    let (_server, client) = server().await;
    let dir = tempfile::tempdir().unwrap();
    let doc = configmap_doc(HOST_NS, "written", &[("k", "v")]);
    let host = start(
        &client,
        dir.path(),
        &watching_what_it_writes(namespace),
        Behaviour::Apply(vec![doc]),
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    eventually("the ConfigMap is written", || async {
        cms.get_opt("written").await.unwrap().is_some()
    })
    .await;
    let metrics = host.controller().metrics().clone();
    eventually("resyncs find nothing to write", || async {
        metrics.resyncs() >= 2 && metrics.skipped() >= 2
    })
    .await;
    let applies = metrics.applies();
    let skipped = metrics.skipped();
    stays_for(
        Duration::from_secs(2),
        "no apply while nothing changes",
        || async { metrics.applies() == applies },
    )
    .await;
    assert!(
        metrics.skipped() > skipped,
        "resyncs went on and were skipped"
    );
    assert!(applies <= 2, "{applies} applies for one unchanged document");
}

#[tokio::test]
async fn a_guest_watching_the_kind_it_writes_cluster_wide_skips_no_op_writes() {
    no_op_writes_are_skipped(None).await;
}

#[tokio::test]
async fn a_guest_watching_the_kind_it_writes_in_one_namespace_skips_no_op_writes() {
    no_op_writes_are_skipped(Some(HOST_NS)).await;
}

async fn deletes_are_sent(namespace: Option<&str>) {
    let (_server, client) = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "victim"}, "data": {"k": "v"}}))
            .unwrap(),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let host = start(
        &client,
        dir.path(),
        &watching_what_it_writes(namespace),
        Behaviour::Plan {
            writes: vec![WatWrite::Delete(WatRef {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some(HOST_NS.into()),
                name: "victim".into(),
            })],
            events: Vec::new(),
        },
    )
    .await;
    eventually("the guest's delete is sent", || async {
        cms.get_opt("victim").await.unwrap().is_none()
    })
    .await;
    assert_eq!(host.controller().metrics().deletes(), 1);
}

#[tokio::test]
async fn a_guest_watching_the_kind_it_writes_cluster_wide_sends_its_deletes() {
    deletes_are_sent(None).await;
}

#[tokio::test]
async fn a_guest_watching_the_kind_it_writes_in_one_namespace_sends_its_deletes() {
    deletes_are_sent(Some(HOST_NS)).await;
}

/// A guest writing its Widget's status with a whole number as a float
/// (`score: 2.0`, what a Rust `f64` field serializes to): the API server
/// reads and prints a custom object's numbers as JSON numbers, so it stores
/// `2`. That is no difference: a person editing the spec now and then
/// wakes the key, and nothing is written again nor fought over.
#[tokio::test]
async fn a_float_the_server_stores_as_an_integer_is_no_difference() {
    let (_server, client) = server().await;
    crate::support::widget::install_widget_crd(&client).await;
    let dir = tempfile::tempdir().unwrap();
    let manifest = WatManifest {
        name: "scores".into(),
        watches: vec![WatWatch::widgets("widgets", WatKeys::PerObject, None)],
        writes: vec![WatRule::widget_status()],
    };
    let status = format!(
        r#"{{"apiVersion":"example.com/v1","kind":"Widget","metadata":{{"name":"w0","namespace":"{PODS_NS}"}},"status":{{"score":2.0,"ratio":0.5,"big":1e3}}}}"#
    );
    let behaviour = Behaviour::ByLifecycle {
        live: vec![WatWrite::ApplyStatus(status)],
        deleting: Vec::new(),
    };
    let host = start(&client, dir.path(), &manifest, behaviour).await;
    let api = crate::support::widget::widget_api(&client, PODS_NS);
    api.create(
        &PostParams::default(),
        &crate::support::widget::widget("w0", 0),
    )
    .await
    .unwrap();
    let score = || async { api.get("w0").await.unwrap().data["status"]["score"].clone() };
    eventually("the status written", || async { !score().await.is_null() }).await;
    assert_eq!(
        score().await,
        json!(2),
        "stored as the real server prints it"
    );
    let m = host.controller().metrics().clone();
    let writes = m.writes();
    for cycle in 1..=4 {
        let reconciles = m.reconciles();
        let patch = json!({"spec": {"cycle": cycle}});
        api.patch(
            "w0",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
        eventually("the spec edit reconciled", || async {
            m.reconciles() > reconciles
        })
        .await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(m.writes(), writes, "2 taken for a difference from 2.0");
    assert_eq!(m.held_back_writes(), 0, "a person's spec edits are no war");
    assert_eq!(m.errors(), 0);
    host.stop().await.unwrap();
}
