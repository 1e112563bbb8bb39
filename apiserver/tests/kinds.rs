//! The kinds the server serves and how a client discovers them: the
//! version and discovery documents, custom resources served once their CRD
//! exists (and gone with it), and events served in both the core and the
//! events.k8s.io group from one store.
//!
//! Like every kube-client module, it talks to the server only over HTTPS
//! (kube's typed calls, raw requests where kube has none) and never
//! reaches into the server's internals beyond its fault handle.

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::{core, events};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::json;

use crate::common::{create, list_names, merge_patch, start, status};

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
    let names = list_names(&ns, &ListParams::default()).await;
    assert!(names.contains(&"default".to_string()) && names.contains(&"kube-system".to_string()));
}

#[tokio::test]
async fn custom_resources_are_served_after_their_crd_is_created() {
    let (_s, client) = start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
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
    let made = create(&crds, &crd).await;
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
    let w = create(&widgets, &w).await;
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
    let w = merge_patch(&widgets, "w", json!({"spec": {"size": 2}})).await;
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
async fn events_are_served_in_core_and_events_k8s_io() {
    let (_s, client) = start().await;
    let core: Api<core::v1::Event> = Api::namespaced(client.clone(), "default");
    let ev = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
        "reason": "Scheduled", "message": "m", "type": "Normal"
    }))
    .unwrap();
    create(&core, &ev).await;
    let found = core
        .list(&ListParams::default().fields("involvedObject.name=p,reason=Scheduled"))
        .await
        .unwrap();
    assert_eq!(found.items.len(), 1);
    let new: Api<events::v1::Event> = Api::namespaced(client, "default");
    let ev = serde_json::from_value(json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e2"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "wasmctrl",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}, "note": "n",
        "reportingInstance": "i", "action": "Reconcile", "reason": "Done", "type": "Normal"
    }))
    .unwrap();
    let made = create(&new, &ev).await;
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
