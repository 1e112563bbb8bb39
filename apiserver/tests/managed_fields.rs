//! `metadata.managedFields` a client writes with an update (PUT) or a
//! non-apply patch, as the real server's field manager takes them
//! (apimachinery `decodeLiveOrNew`): entries that decode replace the live
//! ones as the starting point of the write's own ownership; `[]` or a
//! single empty entry `[{}]` strips them all and leaves the object
//! untracked (no entry, not even the writer's, as kubernetes'
//! `TestClearManagedFieldsWith*` integration tests check); none, `null` or
//! entries that do not decode leave the live ones; a `/status` write never
//! sets them.
//!
//! Like every kube-client module, it talks to the server only over HTTPS
//! and never reaches into the server's internals.

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{json, Value};

use crate::common::{create, pod, start};

fn patch_as(manager: &str) -> PatchParams {
    PatchParams {
        field_manager: Some(manager.into()),
        ..PatchParams::default()
    }
}

fn post_as(manager: &str) -> PostParams {
    PostParams {
        field_manager: Some(manager.into()),
        ..PostParams::default()
    }
}

/// The managedFields of `c` as JSON (`null` when there are none).
fn managed(c: &ConfigMap) -> Value {
    serde_json::to_value(&c.metadata.managed_fields).unwrap()
}

/// (manager, operation, fieldsV1) of each entry, in the server's order.
fn owners(mf: &Value) -> Vec<(String, String, Value)> {
    mf.as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap_or_default().to_owned(),
                        e["operation"].as_str().unwrap_or_default().to_owned(),
                        e["fieldsV1"].clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn owner(manager: &str, operation: &str, fields: Value) -> (String, String, Value) {
    (manager.to_owned(), operation.to_owned(), fields)
}

/// The two entries of [`tracked`] in the server's order.
fn tracked_owners() -> Vec<(String, String, Value)> {
    vec![
        owner("applier", "Apply", json!({"f:data": {"f:a": {}}})),
        owner("editor", "Update", json!({"f:data": {"f:b": {}}})),
    ]
}

/// The ConfigMap `name`, applied by `applier` (`data.a`) and then
/// merge-patched by `editor` (`data.b`): an Apply and an Update entry.
async fn tracked(cms: &Api<ConfigMap>, name: &str) -> ConfigMap {
    let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}});
    cms.patch(name, &PatchParams::apply("applier"), &Patch::Apply(&cfg))
        .await
        .unwrap();
    let c = cms
        .patch(
            name,
            &patch_as("editor"),
            &Patch::Merge(json!({"data": {"b": "2"}})),
        )
        .await
        .unwrap();
    assert_eq!(owners(&managed(&c)), tracked_owners());
    c
}

/// An entry for `manager` owning `data.a`, valid but for `overrides`.
fn entry(manager: &str, overrides: Value) -> Value {
    let mut e = json!({"manager": manager, "operation": "Update", "apiVersion": "v1",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}});
    if let (Some(e), Some(o)) = (e.as_object_mut(), overrides.as_object()) {
        e.extend(o.clone());
    }
    e
}

fn entries(list: Value) -> Option<Vec<ManagedFieldsEntry>> {
    Some(serde_json::from_value(list).unwrap())
}

#[tokio::test]
async fn put_with_one_empty_entry_strips_every_entry_and_untracks_the_object() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut c = tracked(&cms, "c").await;
    c.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
    c.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
    let put = cms.replace("c", &post_as("updater"), &c).await.unwrap();
    assert_eq!(
        managed(&put),
        Value::Null,
        "no entry, not even the updater's"
    );
    assert_eq!(
        put.metadata.labels.unwrap()["x"],
        "y",
        "the rest of the PUT is stored"
    );
    assert_eq!(managed(&cms.get("c").await.unwrap()), Value::Null);
    // untracked: later updates record nothing until an apply
    let later = cms
        .patch(
            "c",
            &patch_as("editor"),
            &Patch::Merge(json!({"data": {"c": "3"}})),
        )
        .await
        .unwrap();
    assert_eq!(managed(&later), Value::Null);
}

#[tokio::test]
async fn non_apply_patches_setting_one_empty_entry_strip_every_entry() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let reset = json!({"metadata": {"managedFields": [{}]}, "data": {"c": "3"}});
    let ops = json!([
        {"op": "replace", "path": "/metadata/managedFields", "value": [{}]},
        {"op": "add", "path": "/data/c", "value": "3"}
    ]);
    let patches = [
        ("merge", Patch::Merge(reset.clone())),
        ("strategic", Patch::Strategic(reset)),
        ("json", Patch::Json(serde_json::from_value(ops).unwrap())),
    ];
    for (name, patch) in patches {
        tracked(&cms, name).await;
        let c = cms.patch(name, &patch_as("patcher"), &patch).await.unwrap();
        assert_eq!(managed(&c), Value::Null, "{name} patch");
        assert_eq!(c.data.unwrap()["c"], "3", "{name} patch");
        assert_eq!(managed(&cms.get(name).await.unwrap()), Value::Null);
    }
}

#[tokio::test]
async fn an_empty_list_strips_every_entry_like_the_real_server_not_its_docs() {
    // kubernetes' isResetManagedFields: a non-nil empty list resets too
    // (TestClearManagedFieldsWithUpdateEmptyList), whatever the
    // Server-Side Apply page says; a Go client's omitempty never sends one.
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut c = tracked(&cms, "put").await;
    c.metadata.managed_fields = Some(Vec::new());
    let put = cms.replace("put", &post_as("updater"), &c).await.unwrap();
    assert_eq!(managed(&put), Value::Null);
    let later = cms
        .patch(
            "put",
            &patch_as("editor"),
            &Patch::Merge(json!({"data": {"c": "3"}})),
        )
        .await
        .unwrap();
    assert_eq!(managed(&later), Value::Null, "and stays untracked");

    tracked(&cms, "merge").await;
    let patch = json!({"metadata": {"managedFields": []}, "data": {"c": "3"}});
    let c = cms
        .patch("merge", &patch_as("patcher"), &Patch::Merge(patch))
        .await
        .unwrap();
    assert_eq!(managed(&c), Value::Null);
}

#[tokio::test]
async fn writes_without_managed_fields_or_with_null_keep_the_live_ones() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut c = tracked(&cms, "c").await;
    // a client unaware of the field
    c.metadata.managed_fields = None;
    c.data.as_mut().unwrap().insert("c".into(), "3".into());
    let put = cms.replace("c", &post_as("updater"), &c).await.unwrap();
    let mut want = tracked_owners();
    want.push(owner("updater", "Update", json!({"f:data": {"f:c": {}}})));
    assert_eq!(owners(&managed(&put)), want);
    // a merge patch deleting the field leaves none in the request object
    let patch = json!({"metadata": {"managedFields": null}, "data": {"d": "4"}});
    let patched = cms
        .patch("c", &patch_as("patcher"), &Patch::Merge(patch))
        .await
        .unwrap();
    want.push(owner("patcher", "Update", json!({"f:data": {"f:d": {}}})));
    // updater and patcher sort by time, then name: within one second either way
    let mut got = owners(&managed(&patched));
    got.sort_by(|a, b| a.0.cmp(&b.0));
    want.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(got, want);
}

#[tokio::test]
async fn a_put_with_another_valid_list_starts_from_it_instead_of_the_live_ones() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut c = tracked(&cms, "c").await;
    c.metadata.managed_fields = entries(json!([entry("imported", json!({}))]));
    c.data.as_mut().unwrap().insert("c".into(), "3".into());
    let put = cms.replace("c", &post_as("updater"), &c).await.unwrap();
    let want = vec![
        owner("imported", "Update", json!({"f:data": {"f:a": {}}})),
        owner("updater", "Update", json!({"f:data": {"f:c": {}}})),
    ];
    assert_eq!(owners(&managed(&put)), want, "applier and editor are gone");
    assert_eq!(owners(&managed(&cms.get("c").await.unwrap())), want);
    // the imported entry is kept as sent (it has no time)
    assert_eq!(managed(&put)[0].get("time"), None);

    // the same through a merge patch, which the updater's own change joins
    let patch = json!({"metadata": {"managedFields": [entry("merged", json!({"fieldsV1": {"f:data": {"f:b": {}}}}))]},
        "data": {"d": "4"}});
    let patched = cms
        .patch("c", &patch_as("patcher"), &Patch::Merge(patch))
        .await
        .unwrap();
    assert_eq!(
        owners(&managed(&patched)),
        vec![
            owner("merged", "Update", json!({"f:data": {"f:b": {}}})),
            owner("patcher", "Update", json!({"f:data": {"f:d": {}}})),
        ]
    );
}

#[tokio::test]
async fn a_put_sending_back_the_managed_fields_it_read_changes_only_the_updaters_entry() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    tracked(&cms, "c").await;
    let read = cms.get("c").await.unwrap();
    let before = managed(&read);
    let mut c = read.clone();
    c.data.as_mut().unwrap().insert("c".into(), "3".into());
    let put = cms.replace("c", &post_as("updater"), &c).await.unwrap();
    let after = managed(&put);
    let after = after.as_array().unwrap();
    assert_eq!(after.len(), 3);
    assert_eq!(
        &after[..2],
        before.as_array().unwrap().as_slice(),
        "byte for byte, times included"
    );
    assert_eq!(
        owners(&Value::Array(after[2..].to_vec())),
        vec![owner("updater", "Update", json!({"f:data": {"f:c": {}}}))]
    );
    // sent back unchanged with nothing else changed: a no-op
    let again = cms.replace("c", &post_as("updater"), &put).await.unwrap();
    assert_eq!(
        again.metadata.resource_version,
        put.metadata.resource_version
    );
    assert_eq!(managed(&again), managed(&put));
}

#[tokio::test]
async fn undecodable_managed_fields_in_a_write_fall_back_to_the_live_ones() {
    // apimachinery DecodeManagedFields fails on these; the write succeeds
    // with the live entries (TestErrorsDontFailUpdate / ...Patch)
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let bad = [
        entry("x", json!({"fieldsType": ""})),
        entry("x", json!({"fieldsType": "FieldsV2"})),
        entry("x", json!({"operation": "Bogus"})),
        entry("x", json!({"operation": null})),
        entry("x", json!({"apiVersion": ""})),
        entry("x", json!({"fieldsV1": {"x:nope": {}}})),
    ];
    for (i, e) in bad.into_iter().enumerate() {
        let name = format!("c{i}");
        let mut c = tracked(&cms, &name).await;
        c.metadata.managed_fields = entries(json!([entry("fine", json!({})), e]));
        c.data.as_mut().unwrap().insert("c".into(), "3".into());
        let put = cms.replace(&name, &post_as("updater"), &c).await.unwrap();
        let mut want = tracked_owners();
        want.push(owner("updater", "Update", json!({"f:data": {"f:c": {}}})));
        assert_eq!(owners(&managed(&put)), want, "{}", managed(&c));

        let patch = json!([{"op": "replace", "path": "/metadata/managedFields", "value": [entry("x", json!({"fieldsType": ""}))]}]);
        let patched = cms
            .patch(
                &name,
                &patch_as("patcher"),
                &Patch::Json::<()>(serde_json::from_value(patch).unwrap()),
            )
            .await
            .unwrap();
        assert_eq!(owners(&managed(&patched)), want);
    }
}

#[tokio::test]
async fn status_writes_never_set_managed_fields() {
    // TestApplyDoesNotChangeManagedFieldsViaSubresources
    let (_s, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let created = create(&pods, &pod("p", json!({"app": "p"}))).await;
    let live = serde_json::to_value(&created.metadata.managed_fields).unwrap();
    assert_eq!(live.as_array().unwrap().len(), 1);
    let patch = json!({
        "metadata": {"managedFields": [{"manager": "testing", "operation": "Update", "apiVersion": "v1",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:containers": {}}}}]},
        "status": {"conditions": [{"type": "MyStatus", "status": "True"}]}
    });
    let patched = pods
        .patch_status("p", &patch_as("kubelet"), &Patch::Merge(patch))
        .await
        .unwrap();
    let mf = serde_json::to_value(&patched.metadata.managed_fields).unwrap();
    let mf = mf.as_array().unwrap();
    assert_eq!(mf.len(), 2, "{mf:?}");
    let (kubelet, others): (Vec<&Value>, Vec<&Value>) =
        mf.iter().partition(|e| e["manager"] == "kubelet");
    assert_eq!(others, vec![&live[0]], "the live entry is untouched");
    assert_eq!(kubelet[0]["subresource"], "status");

    // reset through /status is no reset either
    let reset = json!({"metadata": {"managedFields": [{}]}, "status": {"phase": "Pending"}});
    let patched = pods
        .patch_status("p", &patch_as("kubelet"), &Patch::Merge(reset))
        .await
        .unwrap();
    assert!(patched
        .metadata
        .managed_fields
        .is_some_and(|m| m.len() == 2));
}
