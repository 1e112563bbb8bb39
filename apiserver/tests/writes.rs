//! What a write that names the wrong object, or the wrong part of one,
//! gets back: a `metadata.uid` that no longer matches (409 when the object
//! is gone, 422 when another stands there), `/status` writes to a missing
//! object (404, nothing created), and how `metadata.generation` counts a
//! custom resource's status with and without a status subresource.
//!
//! Like every kube-client module, it talks to the server only over HTTPS
//! and never reaches into the server's internals.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{cm, create, start, status, widget, widgets};

const GHOST_UID: &str = "7d1a3c55-0000-4000-8000-00000000dead";

#[tokio::test]
async fn apply_naming_the_uid_of_a_missing_object_conflicts_and_creates_nothing() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut obj = cm("gone", json!({"k": "v"}));
    obj.metadata.uid = Some(GHOST_UID.into());
    let err = cms
        .patch("gone", &PatchParams::apply("test"), &Patch::Apply(&obj))
        .await
        .unwrap_err();
    let s = status(err);
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        s.message,
        format!("Operation cannot be fulfilled on configmaps \"gone\": uid mismatch: the provided object specified uid {GHOST_UID}, and no existing object was found")
    );
    assert_eq!(status(cms.get("gone").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn writes_naming_another_uid_are_invalid_and_change_nothing() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let stored = create(&cms, &cm("c", json!({"k": "v"}))).await;
    let want = format!(
        "ConfigMap \"c\" is invalid: metadata.uid: Invalid value: \"{GHOST_UID}\": field is immutable"
    );

    let mut applied = cm("c", json!({"k": "applied"}));
    applied.metadata.uid = Some(GHOST_UID.into());
    let err = cms
        .patch(
            "c",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&applied),
        )
        .await
        .unwrap_err();
    let s = status(err);
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert_eq!(s.message, want);

    let merge = json!({"metadata": {"uid": GHOST_UID}, "data": {"k": "merged"}});
    let err = cms
        .patch("c", &PatchParams::default(), &Patch::Merge(merge))
        .await
        .unwrap_err();
    assert_eq!(status(err).message, want);

    let mut replaced = stored.clone();
    replaced.metadata.uid = Some(GHOST_UID.into());
    replaced.data = Some([("k".to_string(), "replaced".to_string())].into());
    let err = cms
        .replace("c", &PostParams::default(), &replaced)
        .await
        .unwrap_err();
    assert_eq!(status(err).message, want);

    let now = cms.get("c").await.unwrap();
    assert_eq!(now.data.unwrap()["k"], "v");
    assert_eq!(
        now.metadata.resource_version,
        stored.metadata.resource_version
    );

    // naming the object's own uid is a precondition that holds
    let mut own = cm("c", json!({"k": "own"}));
    own.metadata.uid = stored.metadata.uid.clone();
    let out = cms
        .patch(
            "c",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&own),
        )
        .await
        .unwrap();
    assert_eq!(out.data.unwrap()["k"], "own");
}

#[tokio::test]
async fn status_writes_to_a_missing_object_are_not_found_and_create_nothing() {
    let (_s, client) = start().await;
    let schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let ws = widgets(&client, schema, json!({"subresources": {"status": {}}})).await;
    let obj = widget("w", json!({"status": {"ready": true}}));
    let err = ws
        .patch_status("w", &PatchParams::apply("test"), &Patch::Apply(&obj))
        .await
        .unwrap_err();
    let s = status(err);
    assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
    assert_eq!(s.message, "widgets.example.com \"w\" not found");
    let err = ws
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}})),
        )
        .await
        .unwrap_err();
    assert_eq!(status(err).code, 404);
    assert_eq!(status(ws.get("w").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn without_a_status_subresource_a_status_change_bumps_generation() {
    let (_s, client) = start().await;
    let schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let ws = widgets(&client, schema, json!({})).await;
    let made = create(
        &ws,
        &widget(
            "w",
            json!({"spec": {"size": 1}, "status": {"ready": false}}),
        ),
    )
    .await;
    assert_eq!(
        made.data["status"]["ready"], false,
        "status is kept on create"
    );
    assert_eq!(made.metadata.generation, Some(1));
    let w = ws
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}})),
        )
        .await
        .unwrap();
    assert_eq!(w.data["status"]["ready"], true);
    assert_eq!(w.metadata.generation, Some(2));
    let w = ws
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        w.metadata.generation,
        Some(2),
        "metadata changes never count"
    );
}

#[tokio::test]
async fn with_a_status_subresource_status_writes_keep_generation() {
    let (_s, client) = start().await;
    let schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let ws = widgets(&client, schema, json!({"subresources": {"status": {}}})).await;
    create(&ws, &widget("w", json!({"spec": {"size": 1}}))).await;
    let w = ws
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}})),
        )
        .await
        .unwrap();
    assert_eq!(w.data["status"]["ready"], true);
    assert_eq!(w.metadata.generation, Some(1));
}
