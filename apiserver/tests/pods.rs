//! Pods as the real API server validates them: extended resources
//! (`nvidia.com/gpu`) are whole numbers, a request equals its limit and
//! needs one (and is defaulted from it), regular init containers take no
//! probes, an update may change only what Kubernetes lets it change, and a
//! scheduler binds a pod through `pods/binding`, once.
//!
//! Like every kube-client module, it talks to the server only over HTTPS
//! and never reaches into the server's internals.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{bind, create, create_error, merge_patch, pod, start, status};

fn gpu_pod(name: &str, resources: serde_json::Value) -> Pod {
    serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "x:1", "resources": resources}]}}),
    )
    .unwrap()
}

#[tokio::test]
async fn extended_resources_are_whole_numbers_with_a_request_equal_to_the_limit() {
    let (_s, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let made = create(
        &pods,
        &gpu_pod("ok", json!({"limits": {"nvidia.com/gpu": "2"}})),
    )
    .await;
    let req = made.spec.unwrap().containers[0]
        .resources
        .clone()
        .unwrap()
        .requests
        .unwrap();
    assert_eq!(
        req["nvidia.com/gpu"].0, "2",
        "the request defaults to the limit"
    );

    let s = create_error(
        &pods,
        &gpu_pod("a", json!({"requests": {"nvidia.com/gpu": "1"}})),
    )
    .await;
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        s.message,
        "Pod \"a\" is invalid: spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"
    );
    let s = create_error(
        &pods,
        &gpu_pod(
            "b",
            json!({"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "1"}}),
        ),
    )
    .await;
    assert_eq!(
        s.message,
        "Pod \"b\" is invalid: spec.containers[0].resources.requests: Invalid value: \"2\": must be equal to nvidia.com/gpu limit of 1"
    );
    let s = create_error(
        &pods,
        &gpu_pod("c", json!({"limits": {"nvidia.com/gpu": "500m"}})),
    )
    .await;
    let half = r#"resource.Quantity{i:resource.int64Amount{value:500, scale:-3}, d:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, s:"500m", Format:"DecimalSI"}"#;
    assert_eq!(
        s.message,
        format!("Pod \"c\" is invalid: [spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: {half}: must be an integer, spec.containers[0].resources.requests[nvidia.com/gpu]: Invalid value: {half}: must be an integer]")
    );
    for name in ["a", "b", "c"] {
        assert_eq!(status(pods.get(name).await.unwrap_err()).code, 404);
    }
    // cpu may be overcommitted
    create(
        &pods,
        &gpu_pod(
            "cpu",
            json!({"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}}),
        ),
    )
    .await;
}

#[tokio::test]
async fn regular_init_containers_take_no_probes() {
    let (_s, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let p: Pod = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"initContainers": [{"name": "init", "image": "x:1",
            "livenessProbe": {"exec": {"command": ["true"]}}}],
            "containers": [{"name": "c", "image": "x:1"}]}}),
    )
    .unwrap();
    let s = create_error(&pods, &p).await;
    assert_eq!(
        s.message,
        "Pod \"p\" is invalid: spec.initContainers[0].livenessProbe: Forbidden: may not be set for init containers without restartPolicy=Always"
    );
}

#[tokio::test]
async fn pod_updates_may_change_only_what_kubernetes_allows() {
    let (_s, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    create(&pods, &pod("p", json!({}))).await;
    let before = pods.get("p").await.unwrap();
    let forbidden = "Pod \"p\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n";
    for patch in [
        json!({"spec": {"nodeName": "n1"}}),
        json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2"}}}]}}),
    ] {
        let err = pods
            .patch("p", &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .unwrap_err();
        let s = status(err);
        assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
        assert!(s.message.starts_with(forbidden), "{}", s.message);
    }
    assert_eq!(
        pods.get("p").await.unwrap().metadata.resource_version,
        before.metadata.resource_version
    );
    let allowed = json!({"spec": {"containers": [{"name": "c", "image": "busybox:1.37"}],
        "activeDeadlineSeconds": 60, "tolerations": [{"key": "k", "operator": "Exists"}]}});
    pods.patch("p", &PatchParams::default(), &Patch::Strategic(allowed))
        .await
        .unwrap();
    let p = merge_patch(&pods, "p", json!({"spec": {"activeDeadlineSeconds": 30}})).await;
    let spec = p.spec.unwrap();
    assert_eq!(spec.containers[0].image.as_deref(), Some("busybox:1.37"));
    assert_eq!(spec.active_deadline_seconds, Some(30));
}

#[tokio::test]
async fn a_binding_assigns_an_unbound_pod_once() {
    let (_s, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    create(&pods, &pod("p", json!({}))).await;
    bind(&pods, "p", "n1").await;
    let bound = pods.get("p").await.unwrap();
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("n1"));
    let conds = bound.status.unwrap().conditions.unwrap();
    assert!(conds
        .iter()
        .any(|c| c.type_ == "PodScheduled" && c.status == "True"));
    let again = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
        "target": {"kind": "Node", "name": "n2"}});
    let err = pods
        .create_subresource::<_, serde_json::Value>("binding", "p", &PostParams::default(), &again)
        .await
        .unwrap_err();
    let s = status(err);
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        s.message,
        "Operation cannot be fulfilled on pods/binding \"p\": pod p is already assigned to node \"n1\""
    );
    let err = pods
        .create_subresource::<_, serde_json::Value>("binding", "gone", &PostParams::default(), &json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "gone"}, "target": {"name": "n1"}}))
        .await
        .unwrap_err();
    assert_eq!(status(err).code, 404);
}
