//! The tombstone path: a primary whose deletion the host saw as a watch
//! DELETE event (no finalizer, no 404 from any write of ours) is known gone,
//! and a guest's later create of a child whose controller owner reference
//! names it is dropped and counted, never sent: on a cluster without a
//! garbage collector that child would stay forever.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams};
use kube::Client;
use serde_json::json;
use wasmctrl::controller::ControllerConfig;
use wasmctrl::guest::RuntimeConfig;
use wasmctrl::metrics::WriteVerb;
use wasmctrl::supervisor::SupervisorConfig;
use wasmctrl_apiserver::ApiServerConfig;

use crate::support::wat::{guest, Behaviour, WatKeys, WatManifest, WatRule, WatWatch, WatWrite};
use crate::support::widget::{install_widget_crd, widget, widget_api};
use crate::support::*;

/// Where the test's trigger ConfigMap goes.
const TRIGGERS: &str = "triggers";

/// A guest that, once a ConfigMap exists in [`TRIGGERS`], applies a child
/// ConfigMap controlled by the Widget with `owner_uid`; it watches Widgets
/// per object (no finalizer, no selector) so their deletions reach its
/// cache.
fn child_of(owner_uid: &str) -> Vec<u8> {
    let m = WatManifest {
        name: "late".into(),
        watches: vec![
            WatWatch {
                name: "triggers".into(),
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                plural: None,
                namespace: Some(TRIGGERS.into()),
                fields: Vec::new(),
                indexes: Vec::new(),
                keys: WatKeys::Aggregate("all".into()),
                finalizer: None,
                label_selector: None,
            },
            WatWatch::widgets("widgets", WatKeys::PerObject, None),
        ],
        writes: vec![WatRule {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some(PODS_NS.into()),
            names: vec!["p-child".into()],
            status: false,
        }],
    };
    let child = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "p-child", "namespace": PODS_NS,
            "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "Widget", "name": "p",
                "uid": owner_uid, "controller": true, "blockOwnerDeletion": true}]},
        "data": {"of": "p"}});
    guest(
        &m,
        Behaviour::ByLifecycle {
            live: vec![WatWrite::Apply(child.to_string())],
            deleting: Vec::new(),
        },
    )
}

async fn start(client: &Client, dir: &std::path::Path, bytes: Vec<u8>) -> RunningHost {
    let path = dir.join("late.wasm");
    std::fs::write(&path, bytes).unwrap();
    let config = SupervisorConfig {
        guests: vec![path],
        namespace: HOST_NS.into(),
        controller: ControllerConfig::default().resync(Duration::from_secs(600)),
        runtime: RuntimeConfig::default().cache_dir(None),
        ..SupervisorConfig::default()
    };
    run_host(client, config, None).await
}

#[tokio::test]
async fn a_child_of_a_primary_seen_deleted_by_the_watch_is_dropped_and_counted() {
    let (_server, client) = server_with(ApiServerConfig::default().garbage_collector(false)).await;
    install_widget_crd(&client).await;
    create_namespace(&client, TRIGGERS).await;
    let widgets = widget_api(&client, PODS_NS);
    let p = widgets
        .create(&PostParams::default(), &widget("p", 0))
        .await
        .unwrap();
    let uid = p.metadata.uid.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let host = start(&client, dir.path(), child_of(&uid)).await;
    let m = host.controller().metrics().clone();
    eventually("the host reconciled the widget and is idle", || async {
        m.reconciles() >= 2 && host.idle()
    })
    .await;
    let reconciled = m.reconciles();
    widgets.delete("p", &DeleteParams::default()).await.unwrap();
    // The widget's key is reconciled once its DELETE event is in the cache.
    eventually("the widget's deletion reached the host's cache", || async {
        m.reconciles() > reconciled && host.idle()
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), PODS_NS);
    assert!(cms.get_opt("p-child").await.unwrap().is_none());
    let triggers: Api<ConfigMap> = Api::namespaced(client.clone(), TRIGGERS);
    triggers
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "go"}})).unwrap(),
        )
        .await
        .unwrap();
    eventually("the child's create is dropped and counted", || async {
        m.dropped(WriteVerb::Apply) == 1
    })
    .await;
    stays_for(
        Duration::from_secs(1),
        "no child of the gone widget",
        || async { cms.get_opt("p-child").await.unwrap().is_none() },
    )
    .await;
    assert_eq!(m.applies(), 0, "applies sent");
    host.stop().await.unwrap();
}
