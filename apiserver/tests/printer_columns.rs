//! Custom resources as `kubectl get` and autoscalers see them: the CRD's
//! `additionalPrinterColumns` in Table output (Name plus the declared
//! columns, `date` as an age, wide-only columns by priority), and the scale
//! subresource (`/scale` GET, PUT and PATCH through `specReplicasPath`,
//! `kubectl scale`).

use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{json, Value};
use wasmctrl_test_support::Kubectl;

use crate::common::{create, start, status, widget, widgets};

fn columns() -> Value {
    json!({"subresources": {"status": {}, "scale": {
            "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector"}},
        "additionalPrinterColumns": [
            {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
            {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
            {"name": "Size", "type": "string", "priority": 1, "jsonPath": ".spec.size"}]})
}

fn schema() -> Value {
    json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "replicas": {"type": "integer", "minimum": 0}, "size": {"type": "string"}}},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
}

#[tokio::test]
async fn kubectl_get_shows_the_declared_printer_columns() {
    let (server, client) = start().await;
    let Some(k) = Kubectl::admin(&server) else {
        return;
    };
    let api = widgets(&client, schema(), columns()).await;
    create(
        &api,
        &widget("w", json!({"spec": {"replicas": 2, "size": "big"}})),
    )
    .await;
    let out = k.ok(&["get", "widgets"]).await;
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0], ["NAME", "REPLICAS", "READY", "AGE"], "{out}");
    // no status yet: the Ready cell is null, which kubectl prints empty
    assert_eq!(lines[1][..2], ["w", "2"], "{out}");
    assert_eq!(lines[1].len(), 3, "{out}");
    assert!(lines[1][2].ends_with('s'), "an age: {out}");
    let wide = k.ok(&["get", "widgets", "-o", "wide"]).await;
    assert!(wide.lines().next().unwrap().ends_with("SIZE"), "{wide}");
    assert!(wide.lines().nth(1).unwrap().ends_with("big"), "{wide}");
    // status written later shows up through the filter expression
    api.patch_status(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})),
    )
    .await
    .unwrap();
    let out = k.ok(&["get", "widget", "w", "--no-headers"]).await;
    assert_eq!(out.split_whitespace().nth(2), Some("True"), "{out}");
}

#[tokio::test]
async fn the_scale_subresource_reads_and_writes_spec_replicas() {
    let (server, client) = start().await;
    let api = widgets(&client, schema(), columns()).await;
    let w = create(
        &api,
        &widget("w", json!({"spec": {"replicas": 1, "size": "s"}})),
    )
    .await;
    let scale = api.get_scale("w").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(1));
    assert_eq!(scale.status.unwrap().replicas, 0);
    assert_eq!(scale.metadata.uid, w.metadata.uid);

    let scaled = api
        .patch_scale(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(4));
    let w2 = api.get("w").await.unwrap();
    assert_eq!(w2.data["spec"], json!({"replicas": 4, "size": "s"}));
    assert_eq!(w2.metadata.generation, Some(2));

    let mut bad = api.get_scale("w").await.unwrap();
    bad.spec.as_mut().unwrap().replicas = Some(-1);
    let e = status(
        api.replace_scale("w", &PostParams::default(), &bad)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    assert_eq!(
        e.message,
        "Scale.autoscaling \"w\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
    );
    assert_eq!(api.get("w").await.unwrap().data["spec"]["replicas"], 4);

    if let Some(k) = Kubectl::admin(&server) {
        let out = k.ok(&["scale", "widget", "w", "--replicas=7"]).await;
        assert_eq!(out.trim(), "widget.example.com/w scaled");
        assert_eq!(api.get("w").await.unwrap().data["spec"]["replicas"], 7);
    }
}
