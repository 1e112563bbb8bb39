//! Unknown fields as a client meets them (`fieldValidation`): Strict
//! refuses them in the real server's words, Warn (the default) stores the
//! object without them and sends one `Warning` header each, Ignore drops
//! them silently; patches are judged on the patched object and server-side
//! apply fails with structured-merge-diff's 500 whatever the directive.
//!
//! Like every kube-client module, it talks to the server only over HTTPS
//! (kube's typed calls, raw requests where kube has none) and never
//! reaches into the server's internals beyond its fault handle.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::Client;
use serde_json::json;

use crate::common::{create, start, status};

/// POSTs a raw JSON body (kube-rs 5's `PostParams` has no
/// `fieldValidation`); returns the status code, the `Warning` headers and
/// the JSON body.
pub(crate) async fn post_json(
    client: &Client,
    uri: &str,
    body: &str,
) -> (u16, Vec<String>, serde_json::Value) {
    let req = axum::http::Request::builder()
        .method("POST")
        .uri(uri)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(kube::client::Body::from(body.as_bytes().to_vec()))
        .unwrap();
    let res = client.send(req).await.unwrap();
    let code = res.status().as_u16();
    let warnings = res
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let bytes = res.into_body().collect_bytes().await.unwrap();
    (code, warnings, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn unknown_fields_are_refused_warned_about_or_dropped_by_field_validation() {
    let (_s, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let ar = ApiResource::erase::<Pod>(&());
    let dyn_pods: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    // unknown fields in spec and in a container, `spec.foo` first in the document
    let manifest = |name: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}"}},
            "spec":{{"foo":"bar","containers":[{{"name":"c","image":"busybox:1.36","bar":1}}]}}}}"#
        )
    };
    let uri = "/api/v1/namespaces/default/pods";
    let create_with = async |directive: &str, name: &str| {
        let uri = format!("{uri}?fieldValidation={directive}");
        post_json(&client, &uri, &manifest(name)).await
    };

    // Strict: 400 with the real server's message, in document order; nothing stored
    let (code, warnings, body) = create_with("Strict", "strict").await;
    assert_eq!((code, &body["reason"]), (400, &json!("BadRequest")));
    assert_eq!(
        body["message"],
        r#"Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.foo", unknown field "spec.containers[0].bar""#
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(status(pods.get("strict").await.unwrap_err()).code, 404);

    // Warn: created, one Warning header per unknown field, the fields not stored
    let (code, warnings, body) = create_with("Warn", "warned").await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        warnings,
        [
            r#"299 - "unknown field \"spec.foo\"""#,
            r#"299 - "unknown field \"spec.containers[0].bar\"""#
        ]
    );
    assert!(body["spec"].get("foo").is_none(), "{body}");

    // absent is Warn: kube-rs's create succeeds and GET shows the fields gone
    let obj: DynamicObject = serde_json::from_str(&manifest("default")).unwrap();
    assert_eq!(obj.data["spec"]["foo"], "bar", "the client did send it");
    create(&dyn_pods, &obj).await;
    let got = dyn_pods.get("default").await.unwrap();
    assert!(got.data["spec"].get("foo").is_none(), "{:?}", got.data);
    let container = &got.data["spec"]["containers"][0];
    assert!(container.get("bar").is_none(), "{container}");
    assert_eq!(container["image"], "busybox:1.36");

    // Ignore: created without warnings
    let (code, warnings, _) = create_with("Ignore", "ignored").await;
    assert_eq!((code, warnings.len()), (201, 0));

    // an unsupported directive is 422 about the options
    let (code, _, body) = create_with("strict", "bad").await;
    assert_eq!(code, 422);
    assert!(
        body["message"].as_str().unwrap().starts_with(
            r#"CreateOptions "" is invalid: fieldValidation: Unsupported value: "strict""#
        ),
        "{body}"
    );

    // patches are judged on the patched object: Strict is 422, Warn drops
    let merge = Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}, "spec": {"foo": 1}}));
    let e = status(
        pods.patch(
            "default",
            &PatchParams::default().validation_strict(),
            &merge,
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(
        e.message
            .starts_with(r#" "" is invalid: patch: Invalid value: "{"#)
            && e.message
                .ends_with(r#"": strict decoding error: unknown field "spec.foo""#),
        "{}",
        e.message
    );
    let patched = pods
        .patch("default", &PatchParams::default(), &merge)
        .await
        .unwrap();
    assert_eq!(patched.metadata.labels.unwrap()["a"], "b");
    let got = dyn_pods.get("default").await.unwrap();
    assert!(got.data["spec"].get("foo").is_none(), "{:?}", got.data);

    // server-side apply: structured-merge-diff's 500, whatever the directive
    let config: serde_json::Value = serde_json::from_str(&manifest("default")).unwrap();
    for pp in [
        PatchParams::apply("t").validation_ignore(),
        PatchParams::apply("t"),
    ] {
        let e = status(
            dyn_pods
                .patch("default", &pp, &Patch::Apply(&config))
                .await
                .unwrap_err(),
        );
        assert_eq!((e.code, e.reason.as_str()), (500, ""));
        assert_eq!(
            e.message,
            "failed to create typed patch object (/default; /v1, Kind=Pod): errors:\n  .spec.containers[name=\"c\"].bar: field not declared in schema\n  .spec.foo: field not declared in schema"
        );
    }
}

/// A `null`-valued unknown key is still an unknown key (`sigs.k8s.io/json`
/// strict decoding judges the key before its value); a `null` known field
/// is not.
#[tokio::test]
async fn a_null_valued_unknown_field_is_an_unknown_field() {
    let (_s, client) = start().await;
    let uri = "/api/v1/namespaces/default/configmaps";
    let body = |name: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","labels":null}},"bogus":null,"data":null}}"#
        )
    };
    let (code, _, st) = post_json(
        &client,
        &format!("{uri}?fieldValidation=Strict"),
        &body("s"),
    )
    .await;
    assert_eq!(code, 400, "{st}");
    assert_eq!(
        st["message"],
        r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "bogus""#
    );
    let (code, warnings, stored) = post_json(&client, uri, &body("w")).await;
    assert_eq!(code, 201, "{stored}");
    assert_eq!(
        warnings,
        vec![r#"299 - "unknown field \"bogus\"""#.to_string()]
    );
    assert!(stored.get("bogus").is_none());
    let (code, warnings, _) = post_json(
        &client,
        &format!("{uri}?fieldValidation=Ignore"),
        &body("i"),
    )
    .await;
    assert_eq!((code, warnings.len()), (201, 0));
}
