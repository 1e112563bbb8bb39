//! Lists and maps by type: associative lists merge and conflict per item
//! key, sets per value, atomic lists and maps are owned whole, and a CRD's
//! `x-kubernetes-list-type` makes a custom resource's list associative.
//! They call the pure functions only: never storage, HTTP or a clock.

use super::*;
use crate::patch::apply::{server_side_apply_with, ApplyOptions};
use crate::patch::SchemaOverrides;

#[test]
fn apply_omitting_field_inside_owned_container_removes_only_that_field() {
    let v1 = ok(pod_apply(
        None,
        &pod(json!([{"name":"app","image":"i:1","args":["--x"]}])),
        "one",
        false,
    ));
    let v2 = ok(pod_apply(
        Some(&v1),
        &pod(json!([{"name":"app","image":"i:1"}])),
        "one",
        false,
    ));
    assert_eq!(
        v2["spec"]["containers"],
        json!([{"name":"app","image":"i:1"}])
    );
}

#[test]
fn apply_pod_containers_are_associative_by_name() {
    let v1 = ok(pod_apply(
        None,
        &pod(json!([{"name":"app","image":"app:1","ports":[{"containerPort":80}]}])),
        "one",
        false,
    ));
    assert_eq!(
        entry(&v1, "one")["fieldsV1"],
        json!({"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{},
            "f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{}}}}}}})
    );
    let v2 = ok(pod_apply(
        Some(&v1),
        &pod(json!([{"name":"side","image":"side:1"}])),
        "two",
        false,
    ));
    assert_eq!(v2["spec"]["containers"].as_array().map(Vec::len), Some(2));
    let (list, message) = conflicts(pod_apply(
        Some(&v2),
        &pod(json!([{"name":"app","image":"app:2"}])),
        "two",
        false,
    ));
    assert_eq!(list[0].field, ".spec.containers[name=\"app\"].image");
    assert_eq!(
        message,
        "Apply failed with 1 conflict: conflict with \"one\": .spec.containers[name=\"app\"].image"
    );
    // "one" drops its container: only its own item goes.
    let v3 = ok(pod_apply(Some(&v2), &pod(json!([])), "one", false));
    assert_eq!(
        v3["spec"]["containers"],
        json!([{"name":"side","image":"side:1"}])
    );
    assert_eq!(owners(&v3).len(), 1);
}

#[test]
fn apply_merges_owner_references_by_uid_and_finalizers_as_set() {
    let base = |meta: Value| json!({"apiVersion":"v1","kind":"ConfigMap","metadata":meta});
    let v1 = ok(apply(
        None,
        &base(
            json!({"name":"c","finalizers":["a.io/x"],"ownerReferences":[{"apiVersion":"v1","kind":"Foo","name":"f","uid":"u1"}]}),
        ),
        "one",
        false,
    ));
    assert_eq!(
        entry(&v1, "one")["fieldsV1"],
        json!({"f:metadata":{"f:finalizers":{"v:\"a.io/x\"":{}},"f:ownerReferences":{"k:{\"uid\":\"u1\"}":{".":{},"f:apiVersion":{},"f:kind":{},"f:name":{},"f:uid":{}}}}})
    );
    let v2 = ok(apply(
        Some(&v1),
        &base(
            json!({"name":"c","finalizers":["b.io/y"],"ownerReferences":[{"apiVersion":"v1","kind":"Foo","name":"g","uid":"u2"}]}),
        ),
        "two",
        false,
    ));
    assert_eq!(v2["metadata"]["finalizers"], json!(["a.io/x", "b.io/y"]));
    assert_eq!(
        v2["metadata"]["ownerReferences"].as_array().map(Vec::len),
        Some(2)
    );
    let v3 = ok(apply(Some(&v2), &base(json!({"name":"c"})), "one", false));
    assert_eq!(v3["metadata"]["finalizers"], json!(["b.io/y"]));
    assert_eq!(v3["metadata"]["ownerReferences"][0]["uid"], "u2");
}

#[test]
fn apply_atomic_lists_are_owned_whole() {
    let v1 = ok(pod_apply(
        None,
        &json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"tolerations":[{"key":"a"}]}}),
        "one",
        false,
    ));
    assert_eq!(
        entry(&v1, "one")["fieldsV1"],
        json!({"f:spec":{"f:tolerations":{}}})
    );
    let (list, _) = conflicts(pod_apply(
        Some(&v1),
        &json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"tolerations":[{"key":"b"}]}}),
        "two",
        false,
    ));
    assert_eq!(list[0].field, ".spec.tolerations");
}

#[test]
fn apply_owns_atomic_selectors_whole() {
    let kind = ObjectKind::new("apps", "v1", "Deployment");
    let d = |sel: Value| json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"selector":sel}});
    let apply_d = |live: Option<&Value>, selector: Value, manager: &str, now: &str| {
        server_side_apply(live, &d(selector), manager, false, &kind, now)
    };
    let v1 = apply_d(
        None,
        json!({"matchLabels":{"app":"a","tier":"x"}}),
        "one",
        T0,
    )
    .expect("create");
    assert_eq!(
        entry(&v1, "one")["fieldsV1"],
        json!({"f:spec":{"f:selector":{}}})
    );
    let narrower = json!({"matchLabels":{"app":"a"}});
    let (list, _) = conflicts(apply_d(Some(&v1), narrower.clone(), "two", T1));
    assert_eq!(list[0].field, ".spec.selector");
    let v2 = apply_d(Some(&v1), narrower, "one", T1).expect("replace");
    assert_eq!(
        v2["spec"]["selector"],
        json!({"matchLabels":{"app":"a"}}),
        "atomic maps are replaced, not merged"
    );
}

#[test]
fn apply_lease_holder_conflicts_between_candidates() {
    let kind = ObjectKind::new("coordination.k8s.io", "v1", "Lease");
    let lease = |holder: &str| json!({"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l"},"spec":{"holderIdentity":holder,"leaseDurationSeconds":15}});
    let v1 = server_side_apply(None, &lease("a"), "a", false, &kind, T0).expect("create");
    assert_eq!(entry(&v1, "a")["apiVersion"], "coordination.k8s.io/v1");
    let (list, _) = conflicts(server_side_apply(
        Some(&v1),
        &lease("b"),
        "b",
        false,
        &kind,
        T1,
    ));
    assert_eq!(
        list.iter().map(|c| c.field.as_str()).collect::<Vec<_>>(),
        vec![".spec.holderIdentity"]
    );
    let v2 = server_side_apply(Some(&v1), &lease("b"), "b", true, &kind, T1).expect("forced");
    assert_eq!(
        entry(&v2, "a")["fieldsV1"],
        json!({"f:spec":{"f:leaseDurationSeconds":{}}})
    );
    assert_eq!(v2["spec"]["holderIdentity"], "b");
}

#[test]
fn apply_custom_resource_maps_are_granular() {
    let kind = ObjectKind::new("example.com", "v1", "Widget");
    let w = |spec: Value| json!({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":spec});
    let apply_w = |live: Option<&Value>, spec: Value, manager: &str, now: &str| {
        server_side_apply(live, &w(spec), manager, false, &kind, now)
    };
    let v1 = apply_w(
        None,
        json!({"config":{"a":{"x":1},"b":2},"items":[1,2]}),
        "one",
        T0,
    )
    .expect("create");
    assert_eq!(
        entry(&v1, "one")["fieldsV1"],
        json!({"f:spec":{"f:config":{"f:a":{"f:x":{}},"f:b":{}},"f:items":{}}})
    );
    let v2 = apply_w(Some(&v1), json!({"config":{"a":{"y":3}}}), "two", T1).expect("merge");
    assert_eq!(v2["spec"]["config"], json!({"a":{"x":1,"y":3},"b":2}));
    let v3 = apply_w(Some(&v2), json!({"config":{"b":2}}), "one", T2).expect("prune");
    assert_eq!(v3["spec"], json!({"config":{"a":{"y":3},"b":2}}));
}

#[test]
fn apply_custom_resource_conditions_follow_crd_list_map_keys() {
    let kind = ObjectKind::new("example.com", "v1", "Widget");
    let schema = SchemaOverrides::from_openapi_v3(
        &json!({"type":"object","properties":{"status":{"type":"object","properties":{
        "conditions":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["type"],"items":{"type":"object"}}}}}}),
    );
    let options = ApplyOptions::status_subresource().schema(schema);
    let w = |conds: Value| json!({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"status":{"conditions":conds}});
    let live = json!({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}});
    let ready = || w(json!([{"type":"Ready","status":"True"}]));
    let synced = || w(json!([{"type":"Synced","status":"True"}]));
    // The controller forces its first condition; the syncer adds its own.
    let by_ctrl = |live: &Value, options: &ApplyOptions| {
        server_side_apply_with(Some(live), &ready(), "ctrl", true, &kind, T0, options)
    };
    let by_syncer = |live: &Value, options: &ApplyOptions| {
        server_side_apply_with(Some(live), &synced(), "syncer", false, &kind, T1, options)
    };
    let v1 = by_ctrl(&live, &options).expect("first condition");
    let v2 = by_syncer(&v1, &options).expect("second condition merges, no conflict");
    assert_eq!(v2["status"]["conditions"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        entry(&v2, "syncer")["fieldsV1"],
        json!({"f:status":{"f:conditions":{"k:{\"type\":\"Synced\"}":{".":{},"f:status":{},"f:type":{}}}}})
    );
    assert_eq!(
        v2["spec"],
        json!({"size":1}),
        "a status apply never touches spec"
    );
    // Without the schema the same list is atomic: the second manager conflicts.
    let atomic = ApplyOptions::status_subresource();
    let a1 = by_ctrl(&live, &atomic).expect("first condition");
    assert_eq!(
        entry(&a1, "ctrl")["fieldsV1"],
        json!({"f:status":{"f:conditions":{}}})
    );
    let (list, _) = conflicts(by_syncer(&a1, &atomic));
    assert_eq!(list[0].field, ".status.conditions");
}

#[test]
fn apply_list_merge_keeps_structured_merge_diff_order() {
    let v1 = ok(pod_apply(
        None,
        &pod(json!([{"name":"a"},{"name":"b"}])),
        "one",
        false,
    ));
    let v2 = ok(pod_apply(
        Some(&v1),
        &pod(json!([{"name":"c"},{"name":"b"}])),
        "two",
        false,
    ));
    let names: Vec<&str> = v2["spec"]["containers"]
        .as_array()
        .map(|a| a.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, vec!["a", "c", "b"]);
}
