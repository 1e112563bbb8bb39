//! Apply entries own exactly what was applied: identity metadata never,
//! omitted fields are pruned unless someone else owns them, changing
//! another manager's field is a conflict (worded as apimachinery does)
//! unless forced, and a no-op apply changes nothing.

use super::*;
use crate::patch::apply::{server_side_apply_with, ApplyOptions, BEFORE_FIRST_APPLY_MANAGER};

#[test]
fn apply_creates_object_with_exact_apply_entry() {
    let mut applied = cm(json!({"a":"1"}));
    applied["metadata"]["labels"] = json!({"app":"x"});
    let got = ok(apply(None, &applied, "ctrl", false));
    assert_eq!(got["data"], json!({"a":"1"}));
    assert_eq!(
        got["metadata"]["managedFields"],
        json!([{
            "manager":"ctrl","operation":"Apply","apiVersion":"v1","time":T1,
            "fieldsType":"FieldsV1",
            "fieldsV1":{"f:data":{"f:a":{}},"f:metadata":{"f:labels":{"f:app":{}}}}
        }])
    );
}

#[test]
fn apply_does_not_own_identity_metadata() {
    let got = ok(apply(
        None,
        &json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg"}}),
        "ctrl",
        false,
    ));
    assert_eq!(
        got.pointer("/metadata/managedFields"),
        None,
        "a manager owning nothing has no entry"
    );
    assert_eq!(got["metadata"]["name"], "cfg");
}

#[test]
fn apply_omitting_owned_key_removes_it() {
    let v1 = ok(apply(None, &cm(json!({"a":"1","b":"2"})), "ctrl", false));
    let v2 = ok(apply(Some(&v1), &cm(json!({"a":"1"})), "ctrl", false));
    assert_eq!(v2["data"], json!({"a":"1"}));
    assert_eq!(
        owners(&v2),
        vec![("ctrl".into(), "Apply".into(), json!({"f:data":{"f:a":{}}}))]
    );
    // Omitting the whole map removes it when nobody else owns anything in it.
    let v3 = ok(apply(
        Some(&v2),
        &json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg"}}),
        "ctrl",
        false,
    ));
    assert_eq!(v3.get("data"), None);
    assert_eq!(v3["metadata"]["name"], "cfg");
    assert_eq!(v3.pointer("/metadata/managedFields"), None);
}

#[test]
fn apply_omitting_key_owned_by_another_manager_only_disowns_it() {
    let v1 = ok(apply(None, &cm(json!({"a":"1"})), "one", false));
    let v2 = ok(apply(
        Some(&v1),
        &cm(json!({"a":"1","b":"2"})),
        "two",
        false,
    ));
    let v3 = ok(apply(Some(&v2), &cm(json!({"b":"2"})), "one", false));
    assert_eq!(v3["data"], json!({"a":"1","b":"2"}));
    assert_eq!(entry(&v3, "one")["fieldsV1"], json!({"f:data":{"f:b":{}}}));
    assert_eq!(
        entry(&v3, "two")["fieldsV1"],
        json!({"f:data":{"f:a":{},"f:b":{}}})
    );
}

#[test]
fn apply_omitting_key_keeps_keys_set_by_updates() {
    let v1 = ok(apply(None, &cm(json!({"a":"1"})), "ctrl", false));
    let mut v2 = v1.clone();
    v2["data"]["manual"] = json!("x");
    record_update(Some(&v1), &mut v2, "kubectl-edit", "Update", None, T2);
    let v3 = ok(apply(Some(&v2), &cm(json!({})), "ctrl", false));
    assert_eq!(v3["data"], json!({"manual":"x"}));
}

#[test]
fn apply_conflicts_with_other_manager_unless_forced() {
    let v1 = ok(apply(None, &cm(json!({"a":"1"})), "one", false));
    let (list, message) = conflicts(apply(Some(&v1), &cm(json!({"a":"2"})), "two", false));
    assert_eq!(
        message,
        "Apply failed with 1 conflict: conflict with \"one\": .data.a"
    );
    assert_eq!(
        list,
        vec![FieldConflict {
            manager: "one".into(),
            field: ".data.a".into(),
            message: "conflict with \"one\"".into()
        }]
    );
    let forced = ok(apply(Some(&v1), &cm(json!({"a":"2"})), "two", true));
    assert_eq!(forced["data"]["a"], "2");
    assert_eq!(
        owners(&forced),
        vec![("two".into(), "Apply".into(), json!({"f:data":{"f:a":{}}}))]
    );
}

#[test]
fn apply_with_same_value_shares_ownership_without_conflict() {
    let v1 = ok(apply(None, &cm(json!({"a":"1"})), "one", false));
    let v2 = ok(apply(Some(&v1), &cm(json!({"a":"1"})), "two", false));
    assert_eq!(entry(&v2, "one")["fieldsV1"], json!({"f:data":{"f:a":{}}}));
    assert_eq!(entry(&v2, "two")["fieldsV1"], json!({"f:data":{"f:a":{}}}));
    // Now that both own it, neither can change it alone.
    let (_, message) = conflicts(apply(Some(&v2), &cm(json!({"a":"3"})), "one", false));
    assert_eq!(
        message,
        "Apply failed with 1 conflict: conflict with \"two\": .data.a"
    );
}

#[test]
fn apply_conflict_messages_match_apimachinery_forms() {
    let mut live = cm(json!({"a":"1","b":"1"}));
    record_update(None, &mut live, "kubectl-edit", "Update", None, T0);
    let (_, one) = conflicts(apply(Some(&live), &cm(json!({"a":"2"})), "ctrl", false));
    assert_eq!(
        one,
        "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1: .data.a"
    );

    let live2 = ok(apply(Some(&live), &cm(json!({"c":"1"})), "other", false));
    let (list, many) = conflicts(apply(
        Some(&live2),
        &cm(json!({"a":"2","b":"2","c":"2"})),
        "ctrl",
        false,
    ));
    assert_eq!(
        many,
        "Apply failed with 3 conflicts: conflicts with \"kubectl-edit\" using v1:\n- .data.a\n- .data.b\nconflicts with \"other\":\n- .data.c"
    );
    assert_eq!(list.len(), 3);
    assert_eq!(list[2].message, "conflict with \"other\"");
}

#[test]
fn apply_on_untracked_object_gives_existing_fields_to_before_first_apply() {
    let live = cm(json!({"a":"1"}));
    let (_, message) = conflicts(apply(Some(&live), &cm(json!({"a":"2"})), "ctrl", false));
    assert_eq!(
        message,
        "Apply failed with 1 conflict: conflict with \"before-first-apply\" using v1: .data.a"
    );
    let got = ok(apply(Some(&live), &cm(json!({"b":"2"})), "ctrl", false));
    assert_eq!(
        entry(&got, BEFORE_FIRST_APPLY_MANAGER)["fieldsV1"],
        json!({"f:data":{".":{},"f:a":{}}})
    );
}

#[test]
fn apply_noop_keeps_time_and_object() {
    let v1 = ok(apply(None, &cm(json!({"a":"1"})), "ctrl", false));
    let v2 = ok(server_side_apply(
        Some(&v1),
        &cm(json!({"a":"1"})),
        "ctrl",
        false,
        &cm_kind(),
        T2,
    ));
    assert_eq!(v2, v1);
}

#[test]
fn apply_noop_by_new_manager_records_entry_without_time() {
    let v1 = ok(apply(None, &cm(json!({"a":"1"})), "one", false));
    let v2 = ok(apply(Some(&v1), &cm(json!({"a":"1"})), "two", false));
    assert_eq!(entry(&v2, "two").get("time"), None);
    assert_eq!(entry(&v2, "two")["fieldsV1"], json!({"f:data":{"f:a":{}}}));
}

#[test]
fn apply_is_idempotent_for_every_kind() {
    let cases = [
        (
            ObjectKind::new("", "v1", "ConfigMap"),
            json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","labels":{"a":"b"}},"data":{"k":"v"},"binaryData":{"b":"AA=="}}),
        ),
        (
            ObjectKind::new("", "v1", "Pod"),
            json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","finalizers":["x/y"]},"spec":{"containers":[{"name":"a","image":"i","env":[{"name":"E","value":"1"}],"ports":[{"containerPort":80,"protocol":"UDP"}]}],"tolerations":[{"key":"k"}]}}),
        ),
        (
            ObjectKind::new("coordination.k8s.io", "v1", "Lease"),
            json!({"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l"},"spec":{"holderIdentity":"h","leaseDurationSeconds":15,"renewTime":"2026-01-01T00:00:00.000000Z"}}),
        ),
        (
            ObjectKind::new("apps", "v1", "Deployment"),
            json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"replicas":2,"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"a","image":"i"}]}}}}),
        ),
        (
            ObjectKind::new("example.com", "v1", "Widget"),
            json!({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"nested":{"deep":{"x":1}},"list":[{"a":1}]}}),
        ),
    ];
    for (kind, applied) in cases {
        let first = server_side_apply(None, &applied, "m", false, &kind, T0).expect("create");
        let second =
            server_side_apply(Some(&first), &applied, "m", false, &kind, T1).expect("re-apply");
        assert_eq!(first, second, "{} re-apply must be a no-op", kind.kind);
        let mut noop = second.clone();
        record_update(Some(&second), &mut noop, "other", "Update", None, T2);
        assert_eq!(
            noop, second,
            "{} no-op update must not change ownership",
            kind.kind
        );
    }
}

#[test]
fn apply_rejects_invalid_configurations() {
    let mut with_mf = cm(json!({}));
    with_mf["metadata"]["managedFields"] = json!([]);
    let cases = [
        (with_mf, "metadata.managedFields must be nil"),
        (
            json!({"apiVersion":"v2","kind":"ConfigMap","metadata":{"name":"x"}}),
            "Incorrect version specified in apply patch",
        ),
        (json!({"metadata":{"name":"x"}}), "Object 'Kind' is missing"),
        (json!([1]), "must be an object"),
    ];
    for (applied, want) in cases {
        match apply(None, &applied, "m", false) {
            Err(ApplyError::Invalid(msg)) => {
                assert!(msg.contains(want), "{msg} should contain {want}")
            }
            other => panic!("expected Invalid for {applied}, got {other:?}"),
        }
    }
    let pod = ObjectKind::new("", "v1", "Pod");
    let dup = json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"a"},{"name":"a"}]}});
    assert!(
        matches!(server_side_apply(None, &dup, "m", false, &pod, T0), Err(ApplyError::Invalid(m)) if m.contains("duplicate entries"))
    );
    let nokey = json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"image":"a"}]}});
    assert!(
        matches!(server_side_apply(None, &nokey, "m", false, &pod, T0), Err(ApplyError::Invalid(m)) if m.contains("omits key field \"name\""))
    );
}

#[test]
fn apply_ignores_reset_fields() {
    let kind = ObjectKind::new("", "v1", "Pod");
    let live = json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"a"}]},"status":{"phase":"Running"}});
    let applied = json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"a"}]},"status":{"phase":"Failed"}});
    let got = server_side_apply_with(
        Some(&live),
        &applied,
        "m",
        false,
        &kind,
        T0,
        &ApplyOptions::main_resource_with_status(),
    )
    .expect("apply");
    assert_eq!(got["status"]["phase"], "Running");
    assert!(entry(&got, "m")["fieldsV1"].get("f:status").is_none());
    let status = server_side_apply_with(
        Some(&got),
        &applied,
        "kubelet",
        false,
        &kind,
        T1,
        &ApplyOptions::status_subresource(),
    )
    .expect("status apply");
    assert_eq!(status["status"]["phase"], "Failed");
    let e = entry(&status, "kubelet");
    assert_eq!(e["subresource"], "status");
    assert_eq!(e["fieldsV1"], json!({"f:status":{"f:phase":{}}}));
}

#[test]
fn apply_empty_object_owns_nothing() {
    let kind = ObjectKind::new("example.com", "v1", "Widget");
    let w = json!({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","labels":{}},"spec":{}});
    let got = server_side_apply(None, &w, "m", false, &kind, T0).expect("apply");
    assert_eq!(got.pointer("/metadata/managedFields"), None);
    assert_eq!(got["spec"], json!({}));
}

#[test]
fn apply_null_clears_and_owns_field() {
    let v1 = ok(apply(None, &cm(json!({"a":"1","b":"2"})), "one", false));
    let v2 = ok(apply(
        Some(&v1),
        &cm(json!({"a":"1","b":null})),
        "one",
        false,
    ));
    assert_eq!(v2["data"], json!({"a":"1"}));
}
