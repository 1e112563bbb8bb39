//! Custom resources as their CRD's schema shapes them: fields the
//! structural schema does not specify are pruned (kept under
//! `x-kubernetes-preserve-unknown-fields`), `default`s are filled in, values
//! that break the schema are refused with the real server's 422 and leave
//! the stored object as it was, status writes are validated too, and a CRD
//! whose schema is not structural is refused.
//!
//! Like every kube-client module, it talks to the server only over HTTPS
//! and never reaches into the server's internals.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::common::{create, create_error, start, status, widget, widgets};

/// A Widget schema with one field of each kind the tests need.
fn schema() -> serde_json::Value {
    json!({"type": "object", "properties": {
        "spec": {"type": "object", "required": ["size"], "properties": {
            "size": {"type": "integer", "minimum": 0},
            "limit": {"type": "integer", "minimum": 0, "format": "int32"},
            "mode": {"type": "string", "enum": ["fast", "safe"], "default": "safe"},
            "name": {"type": "string", "maxLength": 8, "pattern": "^[a-z-]+$"},
            "port": {"x-kubernetes-int-or-string": true},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        }},
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
    }})
}

#[tokio::test]
async fn unspecified_fields_are_pruned_and_defaults_filled_in() {
    let (_s, client) = start().await;
    let ws = widgets(&client, schema(), json!({})).await;
    let w = create(
        &ws,
        &widget(
            "w",
            json!({"spec": {"size": 1, "bogus": true, "extra": {"anything": [1, 2]}}, "junk": 1}),
        ),
    )
    .await;
    assert_eq!(w.data["spec"]["mode"], "safe", "default applied");
    assert!(w.data["spec"].get("bogus").is_none(), "{:?}", w.data);
    assert!(w.data.get("junk").is_none(), "{:?}", w.data);
    assert_eq!(w.data["spec"]["extra"]["anything"], json!([1, 2]));
    let stored = ws.get("w").await.unwrap();
    assert!(stored.data["spec"].get("bogus").is_none());
}

/// A whole float is stored as an integer, as the real server's JSON
/// decoding and Go's printing leave it (an `integer` field accepts it); a
/// fraction stays.
#[tokio::test]
async fn whole_floats_are_stored_as_integers() {
    let (_s, client) = start().await;
    let ws = widgets(&client, schema(), json!({})).await;
    let w = create(
        &ws,
        &widget(
            "w",
            json!({"spec": {"size": 2.0, "extra": {"ratio": 0.5, "big": 1e3, "list": [4.0]}}}),
        ),
    )
    .await;
    let text = serde_json::to_string(&w.data["spec"]).unwrap();
    assert!(
        text.contains(r#""size":2"#) && !text.contains("2.0"),
        "{text}"
    );
    assert_eq!(
        w.data["spec"]["extra"].to_string(),
        json!({"ratio": 0.5, "big": 1000, "list": [4]}).to_string()
    );
}

#[tokio::test]
async fn values_that_break_the_schema_are_invalid_and_change_nothing() {
    let (_s, client) = start().await;
    let ws = widgets(&client, schema(), json!({})).await;
    let s = create_error(
        &ws,
        &widget("bad", json!({"spec": {"size": 1, "limit": "two"}})),
    )
    .await;
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        s.message,
        r#"Widget.example.com "bad" is invalid: spec.limit: Invalid value: "string": spec.limit in body must be of type integer: "string""#
    );
    let s = create_error(
        &ws,
        &widget("bad", json!({"spec": {"size": 1, "limit": -1}})),
    )
    .await;
    assert_eq!(
        s.message,
        r#"Widget.example.com "bad" is invalid: spec.limit: Invalid value: -1: spec.limit in body should be greater than or equal to 0"#
    );
    assert_eq!(status(ws.get("bad").await.unwrap_err()).code, 404);

    let before = create(&ws, &widget("w", json!({"spec": {"size": 1}}))).await;
    for (patch, want) in [
        (json!({"spec": {"size": null}}), "spec.size: Required value"),
        (
            json!({"spec": {"mode": "slow"}}),
            r#"spec.mode: Unsupported value: "slow": supported values: "fast", "safe""#,
        ),
        (
            json!({"spec": {"name": "Not_OK"}}),
            r#"spec.name: Invalid value: "Not_OK": spec.name in body should match '^[a-z-]+$'"#,
        ),
        (
            json!({"spec": {"name": "much-too-long"}}),
            "spec.name: Too long: may not be longer than 8",
        ),
        (
            json!({"spec": {"limit": 3_000_000_000_i64}}),
            "spec.limit: Invalid value: 3000000000: spec.limit in body must be of type int32",
        ),
    ] {
        let err = ws
            .patch("w", &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap_err();
        let s = status(err);
        assert_eq!(s.code, 422);
        assert_eq!(
            s.message,
            format!("Widget.example.com \"w\" is invalid: {want}")
        );
    }
    let after = ws.get("w").await.unwrap();
    assert_eq!(
        after.metadata.resource_version,
        before.metadata.resource_version
    );
    // int-or-string takes both
    for port in [json!(80), json!("http")] {
        ws.patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"port": port}})),
        )
        .await
        .unwrap();
    }
}

#[tokio::test]
async fn status_writes_of_the_wrong_type_are_invalid() {
    let (_s, client) = start().await;
    let ws = widgets(&client, schema(), json!({"subresources": {"status": {}}})).await;
    create(&ws, &widget("w", json!({"spec": {"size": 1}}))).await;
    let err = ws
        .patch_status(
            "w",
            &PatchParams::apply("test"),
            &Patch::Apply(widget("w", json!({"status": {"ready": "yes"}}))),
        )
        .await
        .unwrap_err();
    let s = status(err);
    assert_eq!(s.code, 422);
    assert_eq!(
        s.message,
        r#"Widget.example.com "w" is invalid: status.ready: Invalid value: "string": status.ready in body must be of type boolean: "string""#
    );
    let ok = ws
        .patch_status(
            "w",
            &PatchParams::apply("test"),
            &Patch::Apply(widget("w", json!({"status": {"ready": true}}))),
        )
        .await
        .unwrap();
    assert_eq!(ok.data["status"]["ready"], true);
}

#[tokio::test]
async fn a_crd_whose_schema_is_not_structural_is_refused() {
    let (_s, client) = start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "properties": {"spec": {"properties": {"size": {"type": "integer"}}}}}}}]}
    }))
    .unwrap();
    let s = create_error(&crds, &crd).await;
    assert_eq!(s.code, 422);
    assert_eq!(
        s.message,
        "CustomResourceDefinition.apiextensions.k8s.io \"widgets.example.com\" is invalid: spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"
    );
    assert_eq!(
        status(crds.get("widgets.example.com").await.unwrap_err()).code,
        404
    );
}

/// allOf/anyOf/oneOf/not below the root, with kube-openapi's words wrapped
/// as `kubeOpenAPIResultToFieldErrors` wraps errors that are not
/// `*Validation`s (`field.Invalid(nil, "", ...)`).
#[tokio::test]
async fn composite_schemas_are_enforced_with_the_real_messages() {
    let (_s, client) = start().await;
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object",
            "oneOf": [{"required": ["cpu"]}, {"required": ["gpu"]}],
            "properties": {
                "cpu": {"type": "integer"},
                "gpu": {"type": "integer", "not": {"enum": [0]}},
                "name": {"type": "string", "anyOf": [{"pattern": "^a"}, {"pattern": "^b"}]},
            }},
    }});
    let api = widgets(&client, schema, json!({})).await;
    create(
        &api,
        &widget("ok", json!({"spec": {"gpu": 1, "name": "alpha"}})),
    )
    .await;
    let st = create_error(&api, &widget("both", json!({"spec": {"cpu": 1, "gpu": 1}}))).await;
    assert_eq!(st.code, 422);
    assert_eq!(
        st.message,
        r#"Widget.example.com "both" is invalid: <nil>: Invalid value: "": "spec" must validate one and only one schema (oneOf). Found 2 valid alternatives"#
    );
    let st = create_error(
        &api,
        &widget("zero", json!({"spec": {"gpu": 0, "name": "c"}})),
    )
    .await;
    assert_eq!(
        st.message,
        r#"Widget.example.com "zero" is invalid: [<nil>: Invalid value: "": "spec.gpu" must not validate the schema (not), <nil>: Invalid value: "": "spec.name" must validate at least one schema (anyOf), spec.name: Invalid value: "c": spec.name in body should match '^a']"#
    );
}
