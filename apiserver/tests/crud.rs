//! Create, read, update and status writes of single objects: system
//! metadata and defaults, AlreadyExists/NotFound/Invalid/Conflict errors in
//! the real server's words, the status subresource and generation, and
//! malformed requests answered with a `Status`, never a panic.

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;

use crate::common::{cm, create, create_error, merge_patch, pod, start, status};

#[tokio::test]
async fn created_pod_gets_system_metadata_and_real_defaults() {
    let (_s, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let created = create(&pods, &pod("p", json!({}))).await;
    let got = pods.get("p").await.unwrap();
    assert_eq!(got.metadata.uid, created.metadata.uid);
    assert!(got.metadata.uid.is_some());
    assert!(got.metadata.creation_timestamp.is_some());
    assert_eq!(got.metadata.generation, Some(1));
    assert!(
        got.metadata
            .resource_version
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > 0
    );
    let status = got.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert_eq!(status.qos_class.as_deref(), Some("Guaranteed"));
    let spec = got.spec.unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    let requests = spec.containers[0]
        .resources
        .as_ref()
        .unwrap()
        .requests
        .as_ref()
        .unwrap();
    assert_eq!(
        requests["nvidia.com/gpu"].0, "1",
        "requests default from limits"
    );
    let mf = got.metadata.managed_fields.unwrap();
    assert_eq!(mf[0].operation.as_deref(), Some("Update"));
}

#[tokio::test]
async fn create_conflicts_and_missing_namespace_are_reported_like_the_real_server() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create(&cms, &cm("a", json!({}))).await;
    let e = create_error(&cms, &cm("a", json!({}))).await;
    assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(e.message, "configmaps \"a\" already exists");

    let missing: Api<ConfigMap> = Api::namespaced(client.clone(), "nope");
    let e = create_error(&missing, &cm("a", json!({}))).await;
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
    assert_eq!(e.message, "namespaces \"nope\" not found");

    let e = status(cms.get("ghost").await.unwrap_err());
    assert_eq!(e.code, 404);
    assert_eq!(e.details.unwrap().kind, "configmaps");
}

#[tokio::test]
async fn invalid_names_are_422_and_generate_name_fills_the_name() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let e = create_error(&cms, &cm("Bad_Name", json!({}))).await;
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(e
        .message
        .starts_with("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value"));

    let mut unnamed = cm("x", json!({}));
    unnamed.metadata.name = None;
    let e = create_error(&cms, &unnamed).await;
    assert_eq!(e.code, 422);
    assert!(e.message.contains("name or generateName is required"));

    unnamed.metadata.generate_name = Some("gen-".into());
    let made = create(&cms, &unnamed).await;
    let name = made.metadata.name.unwrap();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
}

#[tokio::test]
async fn body_namespace_must_match_url_namespace() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut obj = cm("a", json!({}));
    obj.metadata.namespace = Some("kube-system".into());
    let e = create_error(&cms, &obj).await;
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
    assert_eq!(
        e.message,
        "the namespace of the provided object does not match the namespace sent on the request"
    );
}

#[tokio::test]
async fn stale_resource_version_update_is_409_conflict() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let v1 = create(&cms, &cm("a", json!({"k": "1"}))).await;
    let mut v2 = v1.clone();
    v2.data = Some([("k".to_string(), "2".to_string())].into());
    let v2 = cms.replace("a", &PostParams::default(), &v2).await.unwrap();
    assert_ne!(v2.metadata.resource_version, v1.metadata.resource_version);
    let mut stale = v1.clone();
    stale.data = Some([("k".to_string(), "3".to_string())].into());
    let e = status(
        cms.replace("a", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );
    assert_eq!(cms.get("a").await.unwrap().data.unwrap()["k"], "2");
}

#[tokio::test]
async fn status_subresource_is_separate_and_generation_tracks_spec() {
    let (_s, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    create(&pods, &pod("p", json!({}))).await;
    // main-resource writes ignore status
    let p = merge_patch(
        &pods,
        "p",
        json!({"status": {"phase": "Running"}, "metadata": {"labels": {"a": "b"}}}),
    )
    .await;
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Pending"));
    assert_eq!(
        p.metadata.generation,
        Some(1),
        "metadata changes do not bump generation"
    );
    // status writes change only status
    let p = pods
        .patch_status(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running"}, "spec": {"nodeName": "sneaky"}})),
        )
        .await
        .unwrap();
    assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Running"));
    assert_eq!(p.spec.as_ref().unwrap().node_name, None);
    assert_eq!(
        p.metadata.generation,
        Some(1),
        "status writes never bump generation"
    );
    let p = merge_patch(&pods, "p", json!({"spec": {"activeDeadlineSeconds": 5}})).await;
    assert_eq!(p.metadata.generation, Some(2));
    let mut full = pods.get_status("p").await.unwrap();
    full.status.as_mut().unwrap().phase = Some("Succeeded".into());
    let p = pods
        .replace_status("p", &PostParams::default(), &full)
        .await
        .unwrap();
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Succeeded"));
}

async fn raw(
    client: &Client,
    method: &str,
    path: &str,
    content_type: &str,
    accept: &str,
    body: &str,
) -> kube::core::Status {
    let req = axum::http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .header("accept", accept)
        .body(body.as_bytes().to_vec())
        .unwrap();
    match client.request::<serde_json::Value>(req).await {
        Err(e) => status(e),
        Ok(v) => panic!("expected a failure, got {v}"),
    }
}

#[tokio::test]
async fn malformed_requests_get_status_errors_not_panics() {
    let (_s, client) = start().await;
    let json = "application/json";
    let cms = "/api/v1/namespaces/default/configmaps";
    let s = raw(&client, "POST", cms, json, json, "{not json").await;
    assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"));
    assert!(s.message.contains("json parse error"), "{}", s.message);
    let s = raw(
        &client,
        "POST",
        cms,
        json,
        json,
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"}}"#,
    )
    .await;
    assert_eq!(s.code, 400, "kind must match the URL");
    let s = raw(&client, "POST", cms, json, json, "[1]").await;
    assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"));
    // Like the real server, a body without kind/apiVersion takes the URL's
    // (the Python client sends typed objects that way).
    let req = axum::http::Request::builder()
        .method("POST")
        .uri(cms)
        .header("content-type", json)
        .body(br#"{"metadata":{"name":"untyped"}}"#.to_vec())
        .unwrap();
    let created: serde_json::Value = client.request(req).await.unwrap();
    assert_eq!(
        (&created["apiVersion"], &created["kind"]),
        (&json!("v1"), &json!("ConfigMap"))
    );
    let s = raw(&client, "GET", "/api/v1/widgets", json, json, "").await;
    assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
    let s = raw(&client, "GET", "/nope", json, json, "").await;
    assert_eq!(s.code, 404);
    let s = raw(&client, "POST", &format!("{cms}/x"), json, json, "{}").await;
    assert_eq!((s.code, s.reason.as_str()), (405, "MethodNotAllowed"));
    let s = raw(
        &client,
        "PATCH",
        &format!("{cms}/x"),
        "text/plain",
        json,
        "{}",
    )
    .await;
    assert_eq!((s.code, s.reason.as_str()), (415, "UnsupportedMediaType"));
    let s = raw(
        &client,
        "GET",
        cms,
        json,
        "application/vnd.kubernetes.protobuf",
        "",
    )
    .await;
    assert_eq!((s.code, s.reason.as_str()), (406, "NotAcceptable"));
    for bad_query in ["labelSelector=a%20in%20b", "continue=garbage", "limit=x"] {
        let s = raw(
            &client,
            "GET",
            &format!("{cms}?{bad_query}"),
            json,
            json,
            "",
        )
        .await;
        assert_eq!(s.code, 400, "{bad_query}");
    }
}

/// Quantities are stored as the real server's typed objects print them,
/// on create, update and status writes; QoS compares amounts, not
/// spellings; an apply that differs only in a quantity's spelling stores
/// nothing new; and a field Go's `omitempty` leaves out at its zero value
/// is not stored.
#[tokio::test]
async fn built_in_kinds_are_stored_as_the_typed_round_trip_leaves_them() {
    let (_s, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let p: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "q"},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36", "resources": {
            "requests": {"cpu": "1000m", "memory": "1024Mi"},
            "limits": {"cpu": "1", "memory": "1Gi"}}}]}
    }))
    .unwrap();
    let got = serde_json::to_value(create(&pods, &p).await).unwrap();
    let r = &got["spec"]["containers"][0]["resources"];
    assert_eq!(r["requests"], json!({"cpu": "1", "memory": "1Gi"}));
    assert_eq!(got["status"]["qosClass"], "Guaranteed");

    let quotas: Api<k8s_openapi::api::core::v1::ResourceQuota> =
        Api::namespaced(client.clone(), "default");
    let apply = |cpu: &str| {
        json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "rq"},
            "spec": {"hard": {"cpu": cpu, "pods": 10}}})
    };
    let ssa = PatchParams::apply("me");
    let first = quotas
        .patch("rq", &ssa, &Patch::Apply(apply("0.5")))
        .await
        .unwrap();
    let stored = serde_json::to_value(&first).unwrap();
    assert_eq!(stored["spec"]["hard"], json!({"cpu": "500m", "pods": "10"}));
    let again = quotas
        .patch("rq", &ssa, &Patch::Apply(apply("500m")))
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version, first.metadata.resource_version,
        "another spelling of the same amount is no change"
    );
    let status = quotas
        .patch_status(
            "rq",
            &PatchParams::apply("kube-controller-manager"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ResourceQuota",
                "status": {"used": {"cpu": "0.25", "pods": 3}}})),
        )
        .await
        .unwrap();
    let stored = serde_json::to_value(&status).unwrap();
    assert_eq!(
        stored["status"]["used"],
        json!({"cpu": "250m", "pods": "3"})
    );

    let services: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(client, "default");
    let svc = services
        .patch(
            "s",
            &ssa,
            &Patch::Apply(
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                "spec": {"publishNotReadyAddresses": false,
                    "ports": [{"port": 80, "name": "", "nodePort": 0}]}}),
            ),
        )
        .await
        .unwrap();
    let stored = serde_json::to_value(&svc).unwrap();
    assert_eq!(stored["spec"].get("publishNotReadyAddresses"), None);
    let port = &stored["spec"]["ports"][0];
    assert_eq!((port.get("name"), port.get("nodePort")), (None, None));
    assert_eq!(
        (&port["port"], &port["protocol"]),
        (&json!(80), &json!("TCP"))
    );
}
