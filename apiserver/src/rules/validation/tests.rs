//! Unit tests of field validation: what each directive reports for each
//! write, in the real server's order and words, and that only unknown
//! fields are ever removed.
//! They call `check` and its helpers directly, never a server.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::rules::go_words::go_float;
use crate::storage::registry::Registry;
use serde_json::json;

/// [`super::check`] for built-in kinds (no CRD schema).
fn check(
    info: &ResourceInfo,
    obj: &mut Value,
    directive: Directive,
    write: &Write<'_>,
) -> Result<Vec<String>, ApiError> {
    super::check(info, obj, directive, write, None)
}

fn info(group: &str, plural: &str) -> ResourceInfo {
    let version = "v1";
    Registry::new().lookup(group, version, plural).unwrap()
}

fn pod() -> ResourceInfo {
    info("", "pods")
}

/// A Pod with an unknown field at the top, in `spec` and in a container,
/// as a JSON body in that (unsorted) document order.
const POD_BODY: &str = r#"{"apiVersion":"v1","kind":"Pod","foo":1,"metadata":{"name":"p"},
    "spec":{"foo":true,"containers":[{"name":"c","image":"i","bar":"x"}]}}"#;

fn strict_create(info: &ResourceInfo, body: &[u8], obj: &mut Value) -> ApiError {
    check(info, obj, Directive::Strict, &Write::Create { body }).unwrap_err()
}

#[test]
fn unknown_top_level_nested_and_list_element_fields_fail_strict_create_in_document_order() {
    let mut obj: Value = serde_json::from_str(POD_BODY).unwrap();
    let before = obj.clone();
    let e = strict_create(&pod(), POD_BODY.as_bytes(), &mut obj);
    assert_eq!(e.code(), 400);
    assert_eq!(e.reason(), "BadRequest");
    assert_eq!(
        e.to_string(),
        r#"Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "foo", unknown field "spec.foo", unknown field "spec.containers[0].bar""#
    );
    assert_eq!(obj, before, "a refused write is left alone");
}

#[test]
fn non_json_bodies_report_in_sorted_order_like_converted_yaml() {
    let mut obj: Value = serde_json::from_str(POD_BODY).unwrap();
    let e = strict_create(&pod(), b"kind: Pod\n", &mut obj);
    assert!(
        e.to_string().ends_with(
            r#"unknown field "foo", unknown field "spec.containers[0].bar", unknown field "spec.foo""#
        ),
        "{e}"
    );
}

#[test]
fn warn_drops_unknown_fields_and_returns_one_warning_each() {
    let mut obj: Value = serde_json::from_str(POD_BODY).unwrap();
    let body = POD_BODY.as_bytes();
    let warnings = check(&pod(), &mut obj, Directive::Warn, &Write::Update { body }).unwrap();
    assert_eq!(
        warnings,
        [
            r#"unknown field "foo""#,
            r#"unknown field "spec.foo""#,
            r#"unknown field "spec.containers[0].bar""#
        ]
    );
    assert!(obj.get("foo").is_none());
    assert!(obj["spec"].get("foo").is_none());
    assert_eq!(
        obj["spec"]["containers"][0],
        json!({"name": "c", "image": "i"})
    );
    assert_eq!(obj["metadata"]["name"], "p");
}

#[test]
fn ignore_drops_unknown_fields_silently() {
    let mut obj: Value = serde_json::from_str(POD_BODY).unwrap();
    let body = POD_BODY.as_bytes();
    let warnings = check(&pod(), &mut obj, Directive::Ignore, &Write::Create { body }).unwrap();
    assert!(warnings.is_empty());
    assert!(obj.get("foo").is_none() && obj["spec"].get("foo").is_none());
}

#[test]
fn a_null_valued_unknown_field_is_unknown_and_a_null_known_one_is_not() {
    // sigs.k8s.io/json object(): the key is judged before its value
    let body = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","creationTimestamp":null},
        "spec":{"bogus":null,"hostname":null,"containers":[{"name":"c","image":"i"}]}}"#;
    let write = Write::Create {
        body: body.as_bytes(),
    };
    let parsed: Value = serde_json::from_str(body).unwrap();
    let mut obj = parsed.clone();
    let err = check(&pod(), &mut obj, Directive::Strict, &write).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.bogus""#
    );
    assert_eq!(obj, parsed);
    let mut obj = parsed.clone();
    let warnings = check(&pod(), &mut obj, Directive::Warn, &write).unwrap();
    assert_eq!(warnings, vec![r#"unknown field "spec.bogus""#.to_string()]);
    assert!(obj["spec"].get("bogus").is_none());
    assert!(obj["spec"]["hostname"].is_null());
    assert!(obj["metadata"]["creationTimestamp"].is_null());
    let mut obj = parsed.clone();
    assert!(check(&pod(), &mut obj, Directive::Ignore, &write)
        .unwrap()
        .is_empty());
    assert!(obj["spec"].get("bogus").is_none());
}

#[test]
fn a_value_the_go_type_cannot_hold_fails_the_write_whatever_the_directive() {
    // a label value must be a string; the decode error trumps the unknown field
    let body = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":1}},
        "spec":{"foo":1,"containers":[{"name":"c","image":"i"}]}}"#;
    let mut obj: Value = serde_json::from_str(body).unwrap();
    let before = obj.clone();
    for directive in [Directive::Strict, Directive::Warn, Directive::Ignore] {
        let write = Write::Create {
            body: body.as_bytes(),
        };
        let err = check(&pod(), &mut obj, directive, &write).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Pod in version \"v1\" cannot be handled as a Pod: json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string"
        );
        assert_eq!(obj, before);
    }
}

#[test]
fn numeric_quantities_and_partial_objects_still_decode() {
    let body = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},
        "spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"c",
        "resources":{"limits":{"cpu":1}},"imagee":"x"}]}}}}"#;
    let mut obj: Value = serde_json::from_str(body).unwrap();
    let e = strict_create(&info("apps", "deployments"), body.as_bytes(), &mut obj);
    assert!(
        e.to_string().starts_with(r#"Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec.template.spec.containers[0].imagee""#),
        "{e}"
    );
}

#[test]
fn duplicate_json_keys_are_reported_in_document_order_with_unknown_ones() {
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","name":"b"},
        "zzz":1,"data":{"k":"1","k":"2"},"zzz":2}"#;
    let mut obj: Value = serde_json::from_str(body).unwrap();
    let e = strict_create(&info("", "configmaps"), body.as_bytes(), &mut obj);
    assert!(
        e.to_string().ends_with(
            r#"strict decoding error: duplicate field "metadata.name", unknown field "zzz", duplicate field "data.k""#
        ),
        "{e}"
    );
    let warnings = check(
        &info("", "configmaps"),
        &mut obj,
        Directive::Warn,
        &Write::Create {
            body: body.as_bytes(),
        },
    )
    .unwrap();
    assert_eq!(warnings.len(), 3);
    assert_eq!(obj["metadata"]["name"], "b", "the last duplicate wins");
}

#[test]
fn map_keys_with_dots_are_printed_as_they_are() {
    let crd = info("apiextensions.k8s.io", "customresourcedefinitions");
    let mut obj = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "ws.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "ws", "kind": "W"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "properties": {"a.b": {"type": "string", "bogus": 1}}}}}]}});
    let e = strict_create(&crd, b"", &mut obj);
    assert!(
        e.to_string().ends_with(
            r#"unknown field "spec.versions[0].schema.openAPIV3Schema.properties.a.b.bogus""#
        ),
        "{e}"
    );
}

#[test]
fn custom_resources_are_left_alone() {
    let mut custom = pod();
    custom.group = "example.com".into();
    custom.kind = "Widget".into();
    let mut obj = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"anything": 1}});
    let before = obj.clone();
    assert!(check(
        &custom,
        &mut obj,
        Directive::Strict,
        &Write::Create { body: b"" }
    )
    .unwrap()
    .is_empty());
    assert_eq!(obj, before);
}

#[test]
fn strict_merge_patch_is_422_about_the_patched_object() {
    let cm = info("", "configmaps");
    let patch = br#"{"data":{"a":"1","a":"2"},"foo":"x"}"#;
    let mut obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "2"}, "foo": "x"});
    let e = check(
        &cm,
        &mut obj,
        Directive::Strict,
        &Write::MergePatch { patch },
    )
    .unwrap_err();
    assert_eq!((e.code(), e.reason()), (422, "Invalid"));
    let quoted = go_quote(&obj.to_string());
    assert_eq!(
        e.to_string(),
        format!(
            r#" "" is invalid: patch: Invalid value: {quoted}: strict decoding error: duplicate field "data.a", unknown field "foo""#
        )
    );
    let status = e.to_status();
    assert_eq!(status["details"]["causes"][0]["field"], "patch");
    assert_eq!(
        status["details"]["causes"][0]["reason"],
        "FieldValueInvalid"
    );
    let warnings = check(&cm, &mut obj, Directive::Warn, &Write::MergePatch { patch }).unwrap();
    assert_eq!(
        warnings,
        [r#"duplicate field "data.a""#, r#"unknown field "foo""#]
    );
    assert!(obj.get("foo").is_none());
}

#[test]
fn strict_strategic_merge_patch_prints_the_patch_as_a_go_map() {
    let doc = json!({"spec": {"activeDeadlineSeconds": 5, "foo": 1.5, "x": [null, "a b", true]}});
    let patch = doc.to_string();
    let mut obj = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"activeDeadlineSeconds": 5, "foo": 1.5, "x": [], "containers": [{"name": "c"}]}});
    let write = Write::StrategicMergePatch {
        patch: patch.as_bytes(),
        doc: &doc,
    };
    let e = check(&pod(), &mut obj, Directive::Strict, &write).unwrap_err();
    assert_eq!(
        e.to_string(),
        r#" "" is invalid: patch: Invalid value: "map[spec:map[activeDeadlineSeconds:5 foo:1.5 x:[<nil> a b true]]]": strict decoding error: unknown field "spec.foo", unknown field "spec.x""#
    );
}

#[test]
fn json_patch_operations_are_checked_too() {
    let patch = br#"[{"op":"add","path":"/data/a","value":"1","foo":"bar"},
        {"op":"add","path":"/x","path":"/metadata/labels","value":{"k":"1","k":"2"}}]"#;
    let mut obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "labels": {"k": "2"}}, "data": {"a": "1"}});
    let warnings = check(
        &info("", "configmaps"),
        &mut obj,
        Directive::Warn,
        &Write::JsonPatch { patch },
    )
    .unwrap();
    assert_eq!(
        warnings,
        [
            r#"json patch unknown field "[0].foo""#,
            r#"json patch duplicate field "[1].path""#,
            r#"json patch duplicate field "[1].value.k""#,
        ]
    );
}

#[test]
fn apply_with_unknown_fields_is_500_whatever_the_directive() {
    // structured-merge-diff stops at the first undeclared field of each
    // object: `yyy` (after `bar` in the same object) is not reported
    let mut obj = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"zzz": 1, "containers": [{"name": "a", "yyy": 1, "bar": 2},
            {"name": "c", "image": "i", "ports": [{"containerPort": 80, "bogus": 1}]}]}});
    let before = obj.clone();
    for directive in [Directive::Ignore, Directive::Warn, Directive::Strict] {
        let write = Write::Apply {
            namespace: "",
            name: "p",
        };
        let e = check(&pod(), &mut obj, directive, &write).unwrap_err();
        assert_eq!(e.code(), 500);
        assert_eq!(e.reason(), "");
        assert!(e.to_status().get("reason").is_none());
        assert_eq!(
            e.to_string(),
            "failed to create typed patch object (/p; /v1, Kind=Pod): errors:\n  .spec.containers[name=\"a\"].bar: field not declared in schema\n  .spec.containers[name=\"c\"].ports[containerPort=80,protocol=\"TCP\"].bogus: field not declared in schema\n  .spec.zzz: field not declared in schema"
        );
        assert_eq!(obj, before);
    }
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "labels": {"a.b/c": "x"}}, "dataa": {}});
    let write = Write::Apply {
        namespace: "d",
        name: "c",
    };
    let e = check(&info("", "configmaps"), &mut cm, Directive::Strict, &write).unwrap_err();
    assert_eq!(
        e.to_string(),
        "failed to create typed patch object (d/c; /v1, Kind=ConfigMap): .dataa: field not declared in schema"
    );
    let mut ok = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}});
    assert!(
        check(&info("", "configmaps"), &mut ok, Directive::Strict, &write)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn unsupported_directives_are_422_about_the_options() {
    assert_eq!(
        Directive::from_query(None, "CreateOptions").unwrap(),
        Directive::Warn
    );
    assert_eq!(
        Directive::from_query(Some("Strict"), "CreateOptions").unwrap(),
        Directive::Strict
    );
    let e = Directive::from_query(Some("strict"), "PatchOptions").unwrap_err();
    assert_eq!(e.code(), 422);
    assert_eq!(
        e.to_string(),
        r#"PatchOptions "" is invalid: fieldValidation: Unsupported value: "strict": supported values: "", "Ignore", "Strict", "Warn""#
    );
}

#[test]
fn warning_headers_are_quoted_and_deduplicated() {
    let mut headers = HeaderMap::new();
    add_warning_headers(
        &mut headers,
        &[
            r#"unknown field "spec.foo""#.to_string(),
            r#"unknown field "spec.foo""#.to_string(),
            "bad\ntext".to_string(),
            r#"back\slash"#.to_string(),
        ],
    );
    let got: Vec<&str> = headers
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(
        got,
        [
            r#"299 - "unknown field \"spec.foo\"""#,
            r#"299 - "back\\slash""#
        ]
    );
}

#[test]
fn go_formatting_matches_fmt_and_strconv() {
    assert_eq!(go_quote("a\"b\\c\n\u{1}é"), r#""a\"b\\c\n\x01é""#);
    assert_eq!(go_float(1.5), "1.5");
    assert_eq!(go_float(100_000.0), "100000");
    assert_eq!(go_float(1_000_000.0), "1e+06");
    assert_eq!(go_float(1_234_567.0), "1.234567e+06");
    assert_eq!(go_float(0.0001), "0.0001");
    assert_eq!(go_float(0.000_015), "1.5e-05");
    assert_eq!(go_float(1e100), "1e+100");
    assert_eq!(
        go_format(&json!({"b": {"x": 1}, "a": [1, "s", null, false, 2.5e-7]})),
        "map[a:[1 s <nil> false 2.5e-07] b:map[x:1]]"
    );
}

/// Leaving the values the typed round trip passes unchanged out of it
/// (`typed::Kind::hold_verbatim`) changes no verdict, warning, error or
/// pruned object, for every directive and write.
#[test]
fn held_verbatim_values_change_no_verdict() {
    let mf = json!([{"manager":"m","operation":"Apply","apiVersion":"v1","fieldsType":"FieldsV1",
        "fieldsV1":{"f:data":{"f:a":{}, "f:x": null}}},
        {"manager":"n","operation":"Update","fieldsType":"FieldsV1","fieldsV1":{"f:data":{}}, "bogus": 1},
        {"manager":"o","fieldsV1":[1]}]);
    let bodies = [
        json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","managedFields":mf},"data":{"a":"1","b":"2"}}),
        json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","managedFields":mf},"data":{"a":"1"},"foo":1,"bar":null}),
        json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","managedFields":mf},"data":{"a":1}}),
        json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":null,"b":"x"},"binaryData":{"x":"!!"}}),
        json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","labels":"x","managedFields":mf},"data":{"a":"1"}}),
        json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","managedFields":[{"fieldsV1":{"f:a":{}},"time":1}]},"data":{"a":"1"}}),
        json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","managedFields":{"x":1}},"data":{}}),
        json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","managedFields":mf},"data":{"a":"1"},"immutable":"yes"}),
        json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","managedFields":mf},"spec":{"containers":[{"name":"c","image":"i","bar":1}]}}),
        json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","managedFields":mf},"spec":{"containers":[{"name":"c","image":"i","resources":{"limits":{"cpu":"lots"}}}]}}),
    ];
    for body in bodies {
        let raw = body.to_string();
        let plural = if body["kind"] == "Pod" {
            "pods"
        } else {
            "configmaps"
        };
        let info = info("", plural);
        let doc = body.clone();
        let writes = [
            Write::Create {
                body: raw.as_bytes(),
            },
            Write::Update {
                body: raw.as_bytes(),
            },
            Write::MergePatch {
                patch: raw.as_bytes(),
            },
            Write::JsonPatch { patch: b"[]" },
            Write::StrategicMergePatch {
                patch: raw.as_bytes(),
                doc: &doc,
            },
            Write::Apply {
                namespace: "",
                name: "c",
            },
        ];
        for write in &writes {
            for directive in [Directive::Ignore, Directive::Warn, Directive::Strict] {
                let run = |hold: bool| {
                    typed::HOLD.with(|h| h.set(hold));
                    let mut obj = body.clone();
                    let r = check(&info, &mut obj, directive, write).map_err(|e| e.to_string());
                    typed::HOLD.with(|h| h.set(true));
                    (r, obj)
                };
                assert_eq!(run(true), run(false), "{body} {write:?} {directive:?}");
            }
        }
    }
}
