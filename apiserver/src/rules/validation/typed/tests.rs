//! Unit tests of the typed decoding: every built-in kind has a typed
//! form, and wrong JSON types, Go's leniencies and unparseable quantities
//! read as the real server's decoder words them.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::storage::registry::Registry;

#[test]
fn every_built_in_kind_has_a_typed_form() {
    for info in crate::storage::builtin::resources() {
        assert!(kind(info).is_some(), "{info:?}");
    }
}

fn err(kind_name: &str, obj: Value) -> Option<String> {
    let reg = Registry::new();
    let info = reg
        .all()
        .into_iter()
        .find(|r| r.kind == kind_name && r.group.is_empty())
        .unwrap();
    decode_error(kind(&info).unwrap(), &obj)
}

fn cm(body: Value) -> Value {
    let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    v.as_object_mut()
        .unwrap()
        .extend(body.as_object().unwrap().clone());
    v
}

fn pod(container: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [container]}})
}

#[test]
fn wrong_json_types_read_as_the_go_decoder_words_them() {
    let cases = [
        (
            cm(json!({"data": [1, 2]})),
            "json: cannot unmarshal array into Go struct field ConfigMap.data of type map[string]string",
        ),
        (
            cm(json!({"data": {"a": 1}})),
            "json: cannot unmarshal number into Go struct field ConfigMap.data of type string",
        ),
        (
            cm(json!({"metadata": {"name": "c", "labels": "x"}})),
            "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.labels of type map[string]string",
        ),
        (
            cm(json!({"binaryData": {"a": "not base64!"}})),
            "illegal base64 data at input byte 3",
        ),
        (
            cm(json!({"immutable": "yes"})),
            "json: cannot unmarshal string into Go struct field ConfigMap.immutable of type bool",
        ),
    ];
    for (obj, want) in cases {
        assert_eq!(
            err("ConfigMap", obj.clone()).as_deref(),
            Some(want),
            "{obj}"
        );
    }
    assert_eq!(
        err(
            "Secret",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": "x"})
        )
        .as_deref(),
        Some("json: cannot unmarshal string into Go struct field Secret.data of type map[string][]uint8")
    );
    assert_eq!(
        err("Pod", pod(json!({"name": "c", "image": "i", "ports": [{"containerPort": "80"}]}))).as_deref(),
        Some("json: cannot unmarshal string into Go struct field ContainerPort.spec.containers.ports.containerPort of type int32")
    );
    assert_eq!(
        err("Pod", pod(json!({"name": "c", "image": "i", "ports": [{"containerPort": 1.5}]}))).as_deref(),
        Some("json: cannot unmarshal number 1.5 into Go struct field ContainerPort.spec.containers.ports.containerPort of type int32")
    );
    assert_eq!(
        err("Pod", json!({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [], "restartPolicy": 1}})).as_deref(),
        Some("json: cannot unmarshal number into Go struct field PodSpec.spec.restartPolicy of type v1.RestartPolicy")
    );
    assert_eq!(
        err("Namespace", json!({"kind": "Namespace", "metadata": {"name": "n"}, "spec": {"finalizers": [1]}})).as_deref(),
        Some("json: cannot unmarshal number into Go struct field NamespaceSpec.spec.finalizers of type v1.FinalizerName")
    );
    assert_eq!(
        err("Pod", json!({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": 1}})).as_deref(),
        Some("json: cannot unmarshal number into Go struct field PodSpec.spec.containers of type []v1.Container")
    );
}

#[test]
fn go_leniencies_are_kept() {
    // nulls, missing required fields, numeric quantities, any timestamp string
    assert_eq!(
        err("ConfigMap", cm(json!({"data": null, "bogus": null}))),
        None
    );
    assert_eq!(err("Pod", pod(json!({"image": "i"}))), None);
    assert_eq!(
        err(
            "Pod",
            pod(json!({"name": "c", "resources": {"limits": {"cpu": 2, "memory": "1Gi"}}}))
        ),
        None
    );
    assert_eq!(
        err(
            "ConfigMap",
            cm(json!({"metadata": {"name": "c", "creationTimestamp": "x"}}))
        ),
        None
    );
    // a missing required field does not hide a later wrong type
    assert_eq!(
        err("Pod", pod(json!({"image": 1}))).as_deref(),
        Some("json: cannot unmarshal number into Go struct field Container.spec.containers.image of type string")
    );
}

#[test]
fn an_unparseable_quantity_is_the_decoders_error() {
    assert_eq!(
        err(
            "Pod",
            pod(json!({"name": "c", "resources": {"requests": {"cpu": "lots"}}}))
        )
        .as_deref(),
        Some(wasmctrl_kube_rules::quantity::QuantityErrorKind::Format.message())
    );
    let node = json!({"kind": "Node", "metadata": {"name": "n"}, "status": {"capacity": {"nvidia.com/gpu": "1K"}}});
    assert_eq!(
        err("Node", node).as_deref(),
        Some("unable to parse quantity's suffix")
    );
}
