//! A guest that watches a kind the API server does not serve yet (a CRD not
//! installed) waits: the host keeps running its other guests, reports not
//! ready naming the guest and the kind, retries, and starts the guest once
//! the CRD is installed.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client};
use serde_json::json;
use wasmctrl::controller::ControllerConfig;
use wasmctrl::guest::RuntimeConfig;
use wasmctrl::supervisor::SupervisorConfig;

use crate::guest_runtime::println_guest_path;
use crate::support::{
    eventually, guest_path, pod, run_host, server, summary_becomes, HOST_NS, PODS_NS,
};

async fn install_widget_crd(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
}

async fn create_widget(client: &Client, name: &str) {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), PODS_NS, &ar);
    let w = serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name}, "spec": {"size": 1}}))
    .unwrap();
    widgets.create(&PostParams::default(), &w).await.unwrap();
}

/// What the waiting guest last wrote: `data.objects` of ConfigMap `widgets`.
async fn widgets_seen(client: &Client) -> Option<String> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    cms.get_opt("widgets")
        .await
        .unwrap()?
        .data?
        .remove("objects")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_watching_a_crd_not_installed_waits_and_starts_once_it_is() {
    let (_server, client) = server().await;
    let mut guest_config = BTreeMap::new();
    guest_config.insert(
        "println".to_string(),
        BTreeMap::from([
            ("watch".to_string(), "example.com/v1/Widget".to_string()),
            ("output".to_string(), "widgets".to_string()),
        ]),
    );
    let config = SupervisorConfig {
        guests: vec![guest_path(), println_guest_path()],
        namespace: HOST_NS.into(),
        guest_config,
        controller: ControllerConfig::default(),
        runtime: RuntimeConfig::default().cache_dir(None),
        ..SupervisorConfig::default()
    };
    let host = run_host(&client, config, None).await;

    let why = host.host.readiness().unwrap_err();
    assert_eq!(why.guest, "println");
    assert!(
        why.to_string()
            .contains("waiting for example.com/v1/Widget to be served"),
        "{why}"
    );
    // The other guest runs meanwhile.
    pod("p").on("n1").requesting("2").create(&client).await;
    summary_becomes(&client, &[("n1", "2")]).await;
    assert!(host.host.readiness().is_err(), "still waiting");
    assert!(!host.is_finished(), "the host keeps running");

    install_widget_crd(&client).await;
    create_widget(&client, "w1").await;
    eventually("the waiting guest starts and reconciles", || async {
        widgets_seen(&client).await.as_deref() == Some("1")
    })
    .await;
    eventually("ready", || async { host.host.readiness().is_ok() }).await;
    create_widget(&client, "w2").await;
    eventually("its watch follows new widgets", || async {
        widgets_seen(&client).await.as_deref() == Some("2")
    })
    .await;
    host.stop().await.unwrap();
}
