//! The rules every object's metadata obeys and the data limits of
//! ConfigMaps and Secrets, as a kube client meets them: 422 with the real
//! server's field errors, on create and on update alike, and nothing
//! stored. Wording: apimachinery `pkg/api/validation/objectmeta.go`,
//! `pkg/util/validation/validation.go`, kubernetes
//! `pkg/apis/core/validation/validation.go`, `field.TooLong`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::ByteString;
use kube::api::{Api, ObjectMeta, PostParams};
use serde_json::json;

use crate::common::{cm, create, create_error, merge_patch, start, status};

const NAME_PART: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

fn with_meta(name: &str, labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> ConfigMap {
    let map = |kv: &[(&str, &str)]| {
        Some(
            kv.iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect::<BTreeMap<_, _>>(),
        )
    };
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: map(labels),
            annotations: map(annotations),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

#[tokio::test]
async fn invalid_label_and_annotation_keys_and_values_are_refused() {
    let (_s, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let st = create_error(&api, &with_meta("a", &[("bad key", "v")], &[])).await;
    assert_eq!(st.code, 422);
    assert_eq!(st.reason, "Invalid");
    assert_eq!(
        st.message,
        format!(
            "ConfigMap \"a\" is invalid: metadata.labels: Invalid value: \"bad key\": {NAME_PART}"
        )
    );
    let st = create_error(&api, &with_meta("b", &[("k", "-v-")], &[])).await;
    assert_eq!(
        st.message,
        "ConfigMap \"b\" is invalid: metadata.labels: Invalid value: \"-v-\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    );
    let st = create_error(&api, &with_meta("c", &[], &[("/x", "v")])).await;
    assert_eq!(
        st.message,
        "ConfigMap \"c\" is invalid: metadata.annotations: Invalid value: \"/x\": prefix part must be non-empty"
    );
    // upper case is fine in annotation keys (compared lower-cased), not in prefixes of labels
    create(&api, &with_meta("d", &[], &[("Example.com/Key", "v")])).await;
    let st = create_error(&api, &with_meta("e", &[("Example.com/k", "v")], &[])).await;
    assert!(st.message.contains("metadata.labels: Invalid value: \"Example.com/k\": prefix part a lowercase RFC 1123 subdomain"), "{}", st.message);

    // annotations are limited in total
    let big = "x".repeat(256 * 1024);
    let st = create_error(&api, &with_meta("f", &[], &[("a", &big)])).await;
    assert_eq!(
        st.message,
        "ConfigMap \"f\" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes"
    );
    // an update is judged the same way and leaves the stored object alone
    create(&api, &cm("g", json!({"k": "v"}))).await;
    let err = api
        .patch(
            "g",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"labels": {"bad key": "v"}}})),
        )
        .await
        .unwrap_err();
    let st = status(err);
    assert_eq!(st.code, 422);
    assert_eq!(
        st.message,
        format!(
            "ConfigMap \"g\" is invalid: metadata.labels: Invalid value: \"bad key\": {NAME_PART}"
        )
    );
    assert!(api.get("g").await.unwrap().metadata.labels.is_none());
    merge_patch(&api, "g", json!({"metadata": {"labels": {"ok": "fine"}}})).await;
}

#[tokio::test]
async fn configmap_and_secret_data_are_limited_to_one_mebibyte() {
    let (_s, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let half = "x".repeat(512 * 1024);
    let mut at_limit = cm("full", json!({"a": half}));
    at_limit.binary_data = Some(BTreeMap::from([(
        "b".to_string(),
        ByteString(half.clone().into_bytes()),
    )]));
    create(&cms, &at_limit).await;
    let mut over = at_limit.clone();
    over.metadata.name = Some("over".into());
    over.data.as_mut().unwrap().insert("c".into(), "y".into());
    let st = create_error(&cms, &over).await;
    assert_eq!(st.code, 422);
    assert_eq!(
        st.message,
        "ConfigMap \"over\" is invalid: []: Too long: may not be more than 1048576 bytes"
    );
    let secrets: Api<Secret> = Api::namespaced(client, "default");
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("s".into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "a".to_string(),
            ByteString("x".repeat(1024 * 1024 + 1).into_bytes()),
        )])),
        ..Secret::default()
    };
    let err = secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap_err();
    let st = status(err);
    assert_eq!(st.code, 422);
    assert_eq!(
        st.message,
        "Secret \"s\" is invalid: data: Too long: may not be more than 1048576 bytes"
    );
}

/// A Service's node ports as the real server refuses them: forbidden on a
/// ClusterIP Service, duplicates per protocol (validation), then out of
/// range or held by another Service (the allocator).
#[tokio::test]
async fn node_ports_out_of_range_duplicated_or_taken_are_refused() {
    use k8s_openapi::api::core::v1::Service;
    let (_s, client) = start().await;
    let api: Api<Service> = Api::namespaced(client, "default");
    let svc = |name: &str, ty: &str, ports: serde_json::Value| -> Service {
        serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"type": ty, "selector": {"app": "web"}, "ports": ports}}))
        .unwrap()
    };
    let cases = [
        (
            svc("low", "NodePort", json!([{"port": 80, "nodePort": 80}])),
            "Service \"low\" is invalid: spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767",
        ),
        (
            svc("cip", "ClusterIP", json!([{"port": 80, "nodePort": 30001}])),
            "Service \"cip\" is invalid: spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'",
        ),
        (
            svc("dup", "NodePort", json!([{"name": "a", "port": 80, "nodePort": 30001}, {"name": "b", "port": 81, "nodePort": 30001}])),
            "Service \"dup\" is invalid: spec.ports[1].nodePort: Duplicate value: 30001",
        ),
    ];
    for (s, message) in cases {
        let st = create_error(&api, &s).await;
        assert_eq!((st.code, st.message.as_str()), (422, message));
    }
    create(
        &api,
        &svc(
            "first",
            "NodePort",
            json!([{"port": 80, "nodePort": 30080}]),
        ),
    )
    .await;
    let st = create_error(
        &api,
        &svc(
            "second",
            "NodePort",
            json!([{"port": 80, "nodePort": 30080}]),
        ),
    )
    .await;
    assert_eq!(
        st.message,
        "Service \"second\" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
    );
    assert!(api.get_opt("second").await.unwrap().is_none());

    // Updates too: a Service turned NodePort gets its node port, and one
    // moved out of the range or onto a taken port is refused.
    create(&api, &svc("grows", "ClusterIP", json!([{"port": 80}]))).await;
    let grown = merge_patch(&api, "grows", json!({"spec": {"type": "NodePort"}})).await;
    let port = grown.spec.unwrap().ports.unwrap()[0].node_port.unwrap();
    assert!((30000..=32767).contains(&port) && port != 30080, "{port}");
    let moved =
        |n: i32| json!({"spec": {"ports": [{"port": 80, "protocol": "TCP", "nodePort": n}]}});
    for (n, why) in [
        (
            80,
            "80: provided port is not in the valid range. The range of valid ports is 30000-32767",
        ),
        (30080, "30080: provided port is already allocated"),
    ] {
        let err = api
            .patch(
                "grows",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(moved(n)),
            )
            .await
            .unwrap_err();
        assert_eq!(
            status(err).message,
            format!("Service \"grows\" is invalid: spec.ports[0].nodePort: Invalid value: {why}")
        );
    }
    // Its own port is not "taken".
    let kept = merge_patch(&api, "grows", moved(port)).await;
    assert_eq!(kept.spec.unwrap().ports.unwrap()[0].node_port, Some(port));
}

#[tokio::test]
async fn a_deployment_whose_selector_does_not_match_its_template_is_refused() {
    use k8s_openapi::api::apps::v1::Deployment;
    let (_s, client) = start().await;
    let api: Api<Deployment> = Api::namespaced(client, "default");
    let dep: Deployment = serde_json::from_value(json!({"metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "b"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}))
    .unwrap();
    let st = create_error(&api, &dep).await;
    assert_eq!(st.code, 422);
    assert_eq!(
        st.message,
        "Deployment.apps \"web\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"b\"}: `selector` does not match template `labels`"
    );
}
