//! Patches as a client sends them: merge, strategic, JSON and apply
//! patches, apply conflicts between field managers (409 with one
//! `FieldManagerConflict` cause per field until forced) and the exact JSON
//! patches kube-runtime's finalizer helper sends.
//!
//! Like every kube-client module, it talks to the server only over HTTPS
//! (kube's typed calls, raw requests where kube has none) and never
//! reaches into the server's internals beyond its fault handle.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::common::{cm, create, merge_patch, start, status};

#[tokio::test]
async fn every_patch_type_is_accepted() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create(&cms, &cm("a", json!({"x": "1"}))).await;
    let pp = PatchParams::default();
    let c = cms
        .patch("a", &pp, &Patch::Merge(json!({"data": {"y": "2"}})))
        .await
        .unwrap();
    assert_eq!(c.data.unwrap().len(), 2);
    let c = cms
        .patch("a", &pp, &Patch::Strategic(json!({"data": {"x": null}})))
        .await
        .unwrap();
    assert_eq!(c.data.unwrap().len(), 1);
    let ops =
        serde_json::from_value(json!([{"op": "add", "path": "/data/z", "value": "3"}])).unwrap();
    let c = cms.patch("a", &pp, &Patch::Json::<()>(ops)).await.unwrap();
    assert_eq!(c.data.unwrap()["z"], "3");

    let apply = PatchParams::apply("test-manager");
    let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"k": "v"}});
    let c = cms
        .patch("applied", &apply, &Patch::Apply(&cfg))
        .await
        .unwrap();
    assert_eq!(c.data.unwrap()["k"], "v");
    let mf = c.metadata.managed_fields.unwrap();
    assert!(mf
        .iter()
        .any(|m| m.manager.as_deref() == Some("test-manager")
            && m.operation.as_deref() == Some("Apply")));

    // apply without a field manager is rejected
    let e = status(
        cms.patch("applied", &PatchParams::default(), &Patch::Apply(&cfg))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    // a patch that would change the resourceVersion precondition conflicts
    let e = status(
        cms.patch(
            "a",
            &pp,
            &Patch::Merge(json!({"metadata": {"resourceVersion": "1"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 409);
    // patching a missing object is 404
    let e = status(
        cms.patch("ghost", &pp, &Patch::Merge(json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 404);
}

#[tokio::test]
async fn apply_conflicts_between_managers_are_409_with_field_causes_until_forced() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let cfg = |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owned"}, "data": {"key": v}});
    let apply = async |params: PatchParams, v: &str| {
        cms.patch("owned", &params, &Patch::Apply(&cfg(v))).await
    };
    apply(PatchParams::apply("alice"), "a").await.unwrap();
    let e = status(apply(PatchParams::apply("bob"), "b").await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        "Apply failed with 1 conflict: conflict with \"alice\": .data.key"
    );
    let causes = e.details.unwrap().causes;
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].reason, "FieldManagerConflict");
    assert_eq!(causes[0].field, ".data.key");
    // same value is no conflict; force transfers ownership
    apply(PatchParams::apply("bob"), "a").await.unwrap();
    let c = apply(PatchParams::apply("bob").force(), "b").await.unwrap();
    assert_eq!(c.data.unwrap()["key"], "b");
    // an Update by another manager takes the field away from the appliers
    let c = merge_patch(&cms, "owned", json!({"data": {"key": "c"}})).await;
    assert_eq!(c.data.unwrap()["key"], "c");
    let e = status(apply(PatchParams::apply("bob"), "d").await.unwrap_err());
    assert_eq!(e.code, 409);
}

#[tokio::test]
async fn kube_runtime_finalizer_patches_are_accepted() {
    // the exact JSON patches kube::runtime::finalizer sends to add and remove its finalizer
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    create(&cms, &cm("f", json!({}))).await;
    let add = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/cleanup"]}
    ]))
    .unwrap();
    let c = cms
        .patch("f", &PatchParams::default(), &Patch::Json::<()>(add))
        .await
        .unwrap();
    assert_eq!(
        c.metadata.finalizers.as_deref(),
        Some(&["example.com/cleanup".to_string()][..])
    );
    cms.delete("f", &DeleteParams::default()).await.unwrap();
    let remove = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers/0", "value": "example.com/cleanup"},
        {"op": "remove", "path": "/metadata/finalizers/0"}
    ]))
    .unwrap();
    cms.patch("f", &PatchParams::default(), &Patch::Json::<()>(remove))
        .await
        .unwrap();
    assert_eq!(status(cms.get("f").await.unwrap_err()).code, 404);
}

/// A patch that names no resourceVersion is applied to whatever is stored
/// when it lands, as the real server's patcher re-applies it after a
/// conflict: concurrent patches of one object all succeed. One naming a
/// stale resourceVersion is still a 409.
#[tokio::test]
async fn concurrent_patches_without_a_resource_version_all_succeed() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create(&cms, &cm("busy", json!({}))).await;
    let patches = (0..40).map(|i| {
        let cms = cms.clone();
        async move {
            let (pp, kind) = (PatchParams::default(), i % 3);
            let body = json!({"data": {format!("k{i}"): "v"}});
            match kind {
                0 => cms.patch("busy", &pp, &Patch::Merge(body)).await,
                1 => cms.patch("busy", &pp, &Patch::Strategic(body)).await,
                _ => {
                    let op = json!([{"op": "add", "path": format!("/data/k{i}"), "value": "v"}]);
                    cms.patch(
                        "busy",
                        &pp,
                        &Patch::Json::<()>(serde_json::from_value(op).unwrap()),
                    )
                    .await
                }
            }
        }
    });
    for (i, result) in futures::future::join_all(patches)
        .await
        .into_iter()
        .enumerate()
    {
        result.unwrap_or_else(|e| panic!("patch {i}: {e}"));
    }
    let data = cms.get("busy").await.unwrap().data.unwrap();
    assert_eq!(data.len(), 40);
    let stale = json!({"metadata": {"resourceVersion": "1"}, "data": {"late": "v"}});
    let e = status(
        cms.patch("busy", &PatchParams::default(), &Patch::Merge(stale))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 409);
}
