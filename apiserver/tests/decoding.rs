//! Typed decoding as a client meets it: a built-in kind whose body holds a
//! value its Go type cannot (a list for a map, a string for a number, a
//! quantity that does not parse, data that is not base64) is refused with
//! the decoder's own error, and nothing is stored, so typed clients keep
//! reading every object.
//!
//! Wording: apiserver `handlers/create.go` (`transformDecodeError`: "%s in
//! version %q cannot be handled as a %s: %v"), `handlers/patch.go`
//! (`applyPatchToCurrentObject`: 422 `field.Invalid(patch, ...)`),
//! `sigs.k8s.io/json` (`UnmarshalTypeError`: "json: cannot unmarshal %s
//! into Go struct field %s.%s of type %s"), apimachinery
//! `resource/quantity.go` (`ErrFormatWrong`).

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::common::{cm, create, start, status};
use crate::field_validation::post_json;

const CANNOT: &str = "json: cannot unmarshal";

#[tokio::test]
async fn values_the_go_types_cannot_hold_are_refused_at_decoding() {
    let (_s, client) = start().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let cases = [
        (
            cms,
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":[1,2]}"#,
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal array into Go struct field ConfigMap.data of type map[string]string",
        ),
        (
            cms,
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b","labels":"x"}}"#,
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal string into Go struct field ObjectMeta.metadata.labels of type map[string]string",
        ),
        (
            cms,
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"binaryData":{"k":"%%%"}}"#,
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: illegal base64 data at input byte 0",
        ),
        (
            "/api/v1/namespaces/default/secrets",
            r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"k":7}}"#,
            "Secret in version \"v1\" cannot be handled as a Secret: json: cannot unmarshal number into Go struct field Secret.data of type []uint8",
        ),
        (
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            r#"{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l"},"spec":{"leaseDurationSeconds":"15"}}"#,
            "Lease in version \"v1\" cannot be handled as a Lease: json: cannot unmarshal string into Go struct field LeaseSpec.spec.leaseDurationSeconds of type int32",
        ),
        (
            "/api/v1/namespaces/default/events",
            r#"{"apiVersion":"v1","kind":"Event","metadata":{"name":"e"},"involvedObject":{"kind":"Pod","name":"p"},"count":"2"}"#,
            "Event in version \"v1\" cannot be handled as a Event: json: cannot unmarshal string into Go struct field Event.count of type int32",
        ),
        (
            "/api/v1/nodes",
            r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"},"spec":{"unschedulable":"yes"}}"#,
            "Node in version \"v1\" cannot be handled as a Node: json: cannot unmarshal string into Go struct field NodeSpec.spec.unschedulable of type bool",
        ),
        (
            "/api/v1/namespaces",
            r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x","annotations":{"a":["b"]}}}"#,
            "Namespace in version \"v1\" cannot be handled as a Namespace: json: cannot unmarshal array into Go struct field ObjectMeta.metadata.annotations of type string",
        ),
        // kinds served from the recorded discovery, decoded by their k8s-openapi type
        (
            "/api/v1/namespaces/default/services",
            r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":"80"}}"#,
            "Service in version \"v1\" cannot be handled as a Service: json: cannot unmarshal string into Go struct field ServiceSpec.spec.ports of type []v1.ServicePort",
        ),
        (
            "/apis/batch/v1/namespaces/default/jobs",
            r#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},"spec":{"backoffLimit":"6","template":{}}}"#,
            "Job in version \"v1\" cannot be handled as a Job: json: cannot unmarshal string into Go struct field JobSpec.spec.backoffLimit of type int32",
        ),
        (
            "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies",
            r#"{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"n"},"spec":{"podSelector":[]}}"#,
            "NetworkPolicy in version \"v1\" cannot be handled as a NetworkPolicy: json: cannot unmarshal array into Go struct field NetworkPolicySpec.spec.podSelector of type v1.LabelSelector",
        ),
    ];
    for (uri, body, want) in cases {
        for directive in ["Strict", "Warn", "Ignore"] {
            let (code, _, st) =
                post_json(&client, &format!("{uri}?fieldValidation={directive}"), body).await;
            assert_eq!(code, 400, "{body}: {st}");
            assert_eq!(st["reason"], "BadRequest", "{st}");
            assert_eq!(st["message"], want, "{body}");
        }
    }
    // nothing was stored: a typed list still decodes
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    assert!(api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .is_empty());

    // a merge patch is judged on the patched object: 422 about `patch`
    create(&api, &cm("kept", json!({"k": "v"}))).await;
    let err = api
        .patch(
            "kept",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": ["v"]}})),
        )
        .await
        .unwrap_err();
    let st = status(err);
    assert_eq!(st.code, 422);
    // errors.NewInvalid(schema.GroupKind{}, "", ...): an empty kind and name
    assert!(
        st.message
            .starts_with(r#" "" is invalid: patch: Invalid value: ""#),
        "{}",
        st.message
    );
    assert!(
        st.message.ends_with(&format!(
            "\": {CANNOT} array into Go struct field ConfigMap.data of type string"
        )),
        "{}",
        st.message
    );
    assert_eq!(api.get("kept").await.unwrap().data.unwrap()["k"], "v");
}

#[tokio::test]
async fn a_pod_with_an_unparseable_quantity_is_refused_at_decoding() {
    let (_s, client) = start().await;
    let body = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[
        {"name":"c","image":"i","resources":{"requests":{"cpu":"lots"}}}]}}"#;
    let (code, _, st) = post_json(&client, "/api/v1/namespaces/default/pods", body).await;
    assert_eq!(code, 400, "{st}");
    assert_eq!(st["reason"], "BadRequest");
    assert_eq!(
        st["message"],
        "Pod in version \"v1\" cannot be handled as a Pod: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    );
    let pods: Api<Pod> = Api::namespaced(client, "default");
    assert!(pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .is_empty());
}
