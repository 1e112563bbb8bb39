//! The selectors of the workload kinds as a kube client meets them: 422
//! with the real 1.32 server's field errors when a selector is missing,
//! empty, or does not match its pod template, when a Job's selector is not
//! the generated one, and when an update changes a selector the real
//! server keeps fixed. The bodies are sent untyped, since k8s-openapi
//! cannot leave out a selector its type requires. Wording:
//! `pkg/apis/apps/validation`, `pkg/apis/batch/validation`,
//! `pkg/apis/core/validation` and the apps registry strategies.

use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ReplicationController;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::Client;
use serde_json::{json, Value};

use crate::common::{create, create_error, start, status};

const MISMATCH: &str = r#"spec.template.metadata.labels: Invalid value: map[string]string{"app":"web"}: `selector` does not match template `labels`"#;

fn api<K: kube::Resource<DynamicType = ()>>(client: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), "default", &ApiResource::erase::<K>(&()))
}

/// A workload of `kind` named `name` whose pods are labelled `app: web`,
/// with `spec` merged over its spec.
fn workload(api_version: &str, kind: &str, name: &str, spec: Value) -> DynamicObject {
    let restart = if kind == "Job" { "Never" } else { "Always" };
    let mut s = json!({"template": {"metadata": {"labels": {"app": "web"}},
        "spec": {"restartPolicy": restart, "containers": [{"name": "c", "image": "nginx"}]}}});
    if kind == "StatefulSet" {
        s["serviceName"] = json!("web");
    }
    if let (Some(base), Some(extra)) = (s.as_object_mut(), spec.as_object()) {
        base.extend(extra.clone());
    }
    serde_json::from_value(json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"name": name}, "spec": s}))
    .unwrap()
}

async fn refused(api: &Api<DynamicObject>, obj: &DynamicObject) -> String {
    let st = create_error(api, obj).await;
    assert_eq!(st.code, 422, "{}", st.message);
    st.message
}

async fn patch_error(api: &Api<DynamicObject>, name: &str, patch: Value) -> String {
    let err = api
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap_err();
    status(err).message
}

const WEB: &str = r#"{"matchLabels": {"app": "web"}}"#;

fn web() -> Value {
    json!({"selector": serde_json::from_str::<Value>(WEB).unwrap()})
}

/// The selector change every apps/v1 kind refuses, with template labels
/// changed along so the selector still matches them.
fn moved_selector() -> Value {
    json!({"spec": {"selector": {"matchLabels": {"app": "api"}},
        "template": {"metadata": {"labels": {"app": "api"}}}}})
}

const IMMUTABLE: &str = r#"spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"api"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"#;

#[tokio::test]
async fn a_statefulset_needs_a_matching_selector_and_keeps_its_spec_but_for_a_few_fields() {
    let (_s, client) = start().await;
    let api = api::<StatefulSet>(&client);
    let none = workload("apps/v1", "StatefulSet", "none", json!({}));
    assert_eq!(
        refused(&api, &none).await,
        format!(
            "StatefulSet.apps \"none\" is invalid: [spec.selector: Required value, {MISMATCH}]"
        )
    );
    create(&api, &workload("apps/v1", "StatefulSet", "web", web())).await;
    assert_eq!(
        patch_error(&api, "web", moved_selector()).await,
        "StatefulSet.apps \"web\" is invalid: spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
    );
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_daemonset_selector_must_match_its_template_and_never_changes() {
    let (_s, client) = start().await;
    let api = api::<DaemonSet>(&client);
    let other = workload(
        "apps/v1",
        "DaemonSet",
        "other",
        json!({"selector": {"matchLabels": {"app": "db"}}}),
    );
    assert_eq!(
        refused(&api, &other).await,
        format!("DaemonSet.apps \"other\" is invalid: {MISMATCH}")
    );
    create(&api, &workload("apps/v1", "DaemonSet", "web", web())).await;
    assert_eq!(
        patch_error(&api, "web", moved_selector()).await,
        format!("DaemonSet.apps \"web\" is invalid: {IMMUTABLE}")
    );
}

#[tokio::test]
async fn a_replicaset_selector_may_not_be_empty_and_never_changes() {
    let (_s, client) = start().await;
    let api = api::<ReplicaSet>(&client);
    let empty = workload("apps/v1", "ReplicaSet", "empty", json!({"selector": {}}));
    assert_eq!(
        refused(&api, &empty).await,
        "ReplicaSet.apps \"empty\" is invalid: spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"
    );
    create(&api, &workload("apps/v1", "ReplicaSet", "web", web())).await;
    assert_eq!(
        patch_error(&api, "web", moved_selector()).await,
        format!("ReplicaSet.apps \"web\" is invalid: {IMMUTABLE}")
    );
}

#[tokio::test]
async fn a_job_selector_is_generated_unless_manual_and_never_changes() {
    let (_s, client) = start().await;
    let api = api::<Job>(&client);
    let job = create(&api, &workload("batch/v1", "Job", "gen", json!({}))).await;
    let uid = job.metadata.uid.clone().unwrap();
    assert_eq!(
        job.data["spec"]["selector"],
        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
    );
    assert_eq!(
        job.data["spec"]["template"]["metadata"]["labels"]["job-name"],
        "gen"
    );
    // A selector of one's own without manualSelector is not the generated one.
    let own = workload("batch/v1", "Job", "own", web());
    let message = refused(&api, &own).await;
    assert!(
        message.starts_with(r#"Job.batch "own" is invalid: spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"web", "batch.kubernetes.io/controller-uid":""#)
            && message.ends_with("`selector` not auto-generated"),
        "{message}"
    );
    let manual = workload("batch/v1", "Job", "manual", json!({"manualSelector": true}));
    assert_eq!(
        refused(&api, &manual).await,
        format!("Job.batch \"manual\" is invalid: [spec.selector: Required value, {MISMATCH}]")
    );
    let mut manual = workload("batch/v1", "Job", "manual", json!({"manualSelector": true}));
    manual.data["spec"]["selector"] = serde_json::from_str(WEB).unwrap();
    create(&api, &manual).await;
    let message = patch_error(
        &api,
        "manual",
        json!({"spec": {"selector": {"matchLabels": {"app": "web", "tier": "x"}}}}),
    )
    .await;
    // The new selector no longer matches the template either, as the real
    // server says first.
    assert!(
        message.ends_with(&format!(
            "{MISMATCH}, spec.selector: Invalid value: v1.LabelSelector{{MatchLabels:map[string]string{{\"app\":\"web\", \"tier\":\"x\"}}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}}: field is immutable]"
        )),
        "{message}"
    );
}

#[tokio::test]
async fn a_replication_controller_selector_comes_from_its_template_or_must_match_it() {
    let (_s, client) = start().await;
    let api = api::<ReplicationController>(&client);
    let defaulted = create(
        &api,
        &workload("v1", "ReplicationController", "web", json!({})),
    )
    .await;
    assert_eq!(defaulted.data["spec"]["selector"], json!({"app": "web"}));
    let other = workload(
        "v1",
        "ReplicationController",
        "other",
        json!({"selector": {"app": "db"}}),
    );
    assert_eq!(
        refused(&api, &other).await,
        format!("ReplicationController \"other\" is invalid: {MISMATCH}")
    );
    let mut bare = workload("v1", "ReplicationController", "bare", json!({}));
    bare.data["spec"]["template"]["metadata"] = json!({});
    assert_eq!(
        refused(&api, &bare).await,
        "ReplicationController \"bare\" is invalid: spec.selector: Required value"
    );
}
