//! The `Widget` custom resource (`example.com/v1`, namespaced, with a
//! status subresource and any fields) that the hand-written guests'
//! tests reconcile: its resource, CRD, documents and watch.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::Client;
use serde_json::json;

use super::wat::{WatKeys, WatRule, WatWatch};
use super::{eventually, PODS_NS};

pub fn widgets() -> ApiResource {
    ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    }
}

/// The Widgets of `namespace`.
pub fn widget_api(client: &Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &widgets())
}

/// Installs the Widget CRD and waits until the resource is served.
pub async fn install_widget_crd(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(crd).unwrap(),
    )
    .await
    .unwrap();
    let api = widget_api(client, PODS_NS);
    eventually("the Widget resource is served", || async {
        api.list(&Default::default()).await.is_ok()
    })
    .await;
}

/// Widget `name` in [`PODS_NS`] with `spec.cycle`.
pub fn widget(name: &str, cycle: u32) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name, "namespace": PODS_NS}, "spec": {"cycle": cycle}}))
    .unwrap()
}

impl WatWatch {
    /// Widgets in every namespace, projecting `spec.cycle`, keyed by
    /// `keys`, with the host-managed `finalizer` if any.
    pub fn widgets(name: &str, keys: WatKeys, finalizer: Option<&str>) -> Self {
        WatWatch {
            name: name.into(),
            group: "example.com".into(),
            version: "v1".into(),
            kind: "Widget".into(),
            plural: Some("widgets".into()),
            namespace: None,
            fields: vec!["spec.cycle".into()],
            indexes: Vec::new(),
            keys,
            finalizer: finalizer.map(str::to_string),
            label_selector: None,
        }
    }
}

impl WatRule {
    /// The status of Widgets in [`PODS_NS`], any name.
    pub fn widget_status() -> Self {
        WatRule {
            group: "example.com".into(),
            version: "v1".into(),
            kind: "Widget".into(),
            namespace: Some(PODS_NS.into()),
            names: Vec::new(),
            status: true,
        }
    }
}
