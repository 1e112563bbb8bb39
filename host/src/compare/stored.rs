//! The stored-form compare: whether the live object, as the API server
//! stores it, already holds what a document sets ([`contains`], with the
//! document first rewritten to the stored form by [`sent_form`] and
//! [`compare_form`]), and whether an apply is still needed to remove a
//! field this manager set before ([`drops_owned_field`]). Pure functions
//! of JSON; it never reads a cache and never decides what to write.

use serde_json::Value as Json;
use wasmctrl_kube_rules::builtin;
use wasmctrl_kube_rules::numbers::same_number;

use super::managed::co_owned;

/// Whether `live` already has every field of `desired` with the same value.
/// Scalars compare whole (numbers by value when either is a float, as the
/// server prints a whole float as an integer); a list holds a desired list of as many items,
/// item by item in order (so the fields the API server defaults inside
/// items — a container's `imagePullPolicy`, a port's `protocol` — are not a
/// difference; a list of another length is); an empty map or list in
/// `desired` matches an absent field (the API server omits empty maps).
/// A field this manager set before and `desired` now omits is
/// [`drops_owned_field`]'s to find.
pub fn contains(live: &Json, desired: &Json) -> bool {
    match (live, desired) {
        (Json::Object(l), Json::Object(d)) => d.iter().all(|(k, dv)| match l.get(k) {
            Some(lv) => contains(lv, dv),
            None => is_empty(dv),
        }),
        (Json::Array(l), Json::Array(d)) => {
            l.len() == d.len() && l.iter().zip(d).all(|(lv, dv)| contains(lv, dv))
        }
        // `2.0` is stored as `2` ([`same_number`]).
        (Json::Number(l), Json::Number(d)) => same_number(l, d),
        (l, d) => l == d || (is_empty(l) && is_empty(d)),
    }
}

/// `desired`, a document of kind `group`/`version`/`kind`, as it is sent: a Secret's
/// `stringData` merged into its `data`, base64-encoded
/// ([`builtin::merge_string_data`]), as the server stores it anyway; the
/// apply then owns those `data` keys (the Kubernetes documentation warns
/// that `stringData` does not work well with server-side apply). None for
/// every other document.
pub fn sent_form(group: &str, version: &str, kind: &str, desired: &Json) -> Option<Json> {
    desired.get("stringData")?;
    let mut doc = desired.clone();
    builtin::merge_string_data(group, version, kind, &mut doc).then_some(doc)
}

/// `desired`, a document of kind `group`/`version`/`kind`, to be compared with the live object
/// the server stores from it ([`builtin::compare_form`]: a built-in kind's
/// resource quantities in canonical form, `1000m` → `1`, and the fields Go
/// leaves out at their zero value as `null`, "absent or zero"); None when
/// that changes nothing (a ConfigMap, a custom resource: their one rewrite,
/// a whole float stored as an integer, is `contains`' to allow).
pub fn compare_form(group: &str, version: &str, kind: &str, desired: &Json) -> Option<Json> {
    if !builtin::rewrites_kind(group, version, kind) {
        return None;
    }
    let mut doc = desired.clone();
    builtin::compare_form(group, version, kind, &mut doc).then_some(doc)
}

fn is_empty(v: &Json) -> bool {
    match v {
        Json::Null => true,
        Json::Object(m) => m.values().all(is_empty),
        Json::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// Whether `manager` owns (on the main resource when `subresource` is None,
/// else on that subresource) a field of `live` that `desired` no longer
/// sets — an apply is then needed to remove it. Fields owned through Apply
/// count, and fields outside `metadata` owned through Update (the entries
/// the merge patches wrote); our finalizer patches own `metadata` entries
/// the plan never sets.
pub fn drops_owned_field(
    live: &Json,
    desired: &Json,
    manager: &str,
    subresource: Option<&str>,
) -> bool {
    let Some(entries) = live
        .pointer("/metadata/managedFields")
        .and_then(Json::as_array)
    else {
        return false;
    };
    entries
        .iter()
        .filter(|e| {
            e.get("manager").and_then(Json::as_str) == Some(manager)
                && e.get("subresource").and_then(Json::as_str) == subresource
        })
        .any(|e| {
            let Some(fields) = e.get("fieldsV1").and_then(Json::as_object) else {
                return false;
            };
            match e.get("operation").and_then(Json::as_str) {
                Some("Apply") => owned_missing(fields, Some(desired)),
                Some("Update") => patched_missing(live, fields, desired, manager),
                _ => false,
            }
        })
}

/// Whether an Update entry of `manager` (what [`super::merge_patch_for`] patched)
/// owns a map entry, outside `metadata`, that `desired` lacks and no other
/// manager owns, or a top-level field `desired` lacks.
fn patched_missing(
    live: &Json,
    fields: &serde_json::Map<String, Json>,
    desired: &Json,
    manager: &str,
) -> bool {
    fields.iter().any(|(k, child)| {
        let Some(name) = k.strip_prefix("f:").filter(|n| *n != "metadata") else {
            return false;
        };
        let Some(want) = desired.get(name) else {
            return true;
        };
        child.as_object().is_some_and(|c| {
            c.keys()
                .filter_map(|e| e.strip_prefix("f:"))
                .any(|e| want.get(e).is_none() && !co_owned(live, manager, name, e))
        })
    })
}

/// Whether `map` (fieldsV1) names a field `desired` lacks, inside list
/// items too: a list-map item (`k:{KEY}`) is the desired item whose key
/// fields match (a key field the desired item leaves out, for the server
/// to default, matches any value), a set value (`v:VALUE`) must be in the
/// desired list, an item by position (`i:N`) must exist.
fn owned_missing(map: &serde_json::Map<String, Json>, desired: Option<&Json>) -> bool {
    map.iter().any(|(k, child)| {
        let target = if let Some(name) = k.strip_prefix("f:") {
            desired.and_then(|d| d.get(name))
        } else if let Some(key) = k.strip_prefix("k:") {
            let Ok(Json::Object(key)) = serde_json::from_str::<Json>(key) else {
                return false;
            };
            list_items(desired).find(|item| {
                key.iter().any(|(f, _)| item.get(f).is_some())
                    && key
                        .iter()
                        .all(|(f, v)| item.get(f).is_none_or(|have| have == v))
            })
        } else if let Some(value) = k.strip_prefix("v:") {
            let Ok(value) = serde_json::from_str::<Json>(value) else {
                return false;
            };
            list_items(desired).find(|item| **item == value)
        } else if let Some(at) = k.strip_prefix("i:") {
            let Ok(at) = at.parse::<usize>() else {
                return false;
            };
            list_items(desired).nth(at)
        } else {
            // ".": the item itself.
            return false;
        };
        match target {
            None => true,
            Some(d) => child
                .as_object()
                .is_some_and(|c| !c.is_empty() && owned_missing(c, Some(d))),
        }
    })
}

/// The items of `desired` when it is a list.
fn list_items(desired: Option<&Json>) -> impl Iterator<Item = &Json> {
    desired.and_then(Json::as_array).into_iter().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn live_object_with_extra_fields_contains_the_desired_ones() {
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "s", "namespace": "ops", "uid": "u", "resourceVersion": "9"},
            "data": {"n1": "2", "other": "x"}});
        let cases = [
            (
                json!({"metadata": {"name": "s", "namespace": "ops"}, "data": {"n1": "2"}}),
                true,
            ),
            (
                json!({"metadata": {"name": "s"}, "data": {"n1": "3"}}),
                false,
            ),
            (json!({"data": {"n2": "1"}}), false),
            (json!({"data": {}}), true),
            (json!({"binaryData": {}}), true),
            (json!({"spec": {"list": []}}), true),
            (json!({"spec": {"list": [1]}}), false),
            // An update pinned to another uid is never a no-op.
            (json!({"metadata": {"uid": "other"}}), false),
        ];
        for (desired, want) in cases {
            assert_eq!(contains(&live, &desired), want, "{desired}");
        }
    }

    #[test]
    fn fields_the_server_defaults_inside_list_items_are_no_difference() {
        let live = json!({"spec": {
            "containers": [{"name": "web", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent",
                "terminationMessagePath": "/dev/termination-log",
                "ports": [{"containerPort": 80, "protocol": "TCP"}]}],
            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}],
            "args": ["a", "b"]}});
        let cases = [
            (
                json!({"spec": {"containers": [{"name": "web", "image": "nginx:1.27",
                    "ports": [{"containerPort": 80}]}], "ports": [{"port": 80}]}}),
                true,
            ),
            // Another value inside an item, another length, another order.
            (
                json!({"spec": {"containers": [{"name": "web", "image": "nginx:1.28"}]}}),
                false,
            ),
            (
                json!({"spec": {"ports": [{"port": 80}, {"port": 443}]}}),
                false,
            ),
            (json!({"spec": {"args": ["b", "a"]}}), false),
            (json!({"spec": {"args": ["a"]}}), false),
            (json!({"spec": {"args": ["a", "b"]}}), true),
        ];
        for (desired, want) in cases {
            assert_eq!(contains(&live, &desired), want, "{desired}");
        }
    }

    #[test]
    fn a_field_this_manager_set_inside_a_list_item_and_omits_now_needs_an_apply() {
        let m = "wasmctrl/g";
        let live = json!({"metadata": {"managedFields": [
            {"manager": m, "operation": "Apply", "fieldsV1": {"f:spec": {
                "f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:name": {}, "f:image": {},
                    "f:imagePullPolicy": {},
                    "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}}},
                "f:finalizers": {"v:\"a\"": {}}}}}
        ]}, "spec": {
            "containers": [{"name": "web", "image": "nginx", "imagePullPolicy": "Always",
                "ports": [{"containerPort": 80, "protocol": "TCP"}]}],
            "finalizers": ["a"]}});
        let whole = json!({"spec": {
            "containers": [{"name": "web", "image": "nginx", "imagePullPolicy": "Always",
                "ports": [{"containerPort": 80}]}],
            "finalizers": ["a"]}});
        // Everything it set is still set (the port's protocol left to the
        // server's default matches the item's key).
        assert!(!drops_owned_field(&live, &whole, m, None));
        // A field inside a container it no longer sets.
        let mut without_policy = whole.clone();
        without_policy["spec"]["containers"][0]
            .as_object_mut()
            .unwrap()
            .remove("imagePullPolicy");
        assert!(contains(&live, &without_policy));
        assert!(drops_owned_field(&live, &without_policy, m, None));
        // An item it set, gone: a container, a port, a set value.
        let mut renamed = whole.clone();
        renamed["spec"]["containers"][0]["name"] = json!("api");
        assert!(drops_owned_field(&live, &renamed, m, None));
        let mut no_port = whole.clone();
        no_port["spec"]["containers"][0]["ports"] = json!([]);
        assert!(drops_owned_field(&live, &no_port, m, None));
        let mut no_finalizer = whole;
        no_finalizer["spec"]["finalizers"] = json!(["b"]);
        assert!(drops_owned_field(&live, &no_finalizer, m, None));
    }

    #[test]
    fn a_key_this_manager_applied_before_and_omits_now_needs_an_apply() {
        let live = json!({"metadata": {"managedFields": [
            {"manager": "wasmctrl/g", "operation": "Apply", "fieldsV1": {"f:data": {"f:n1": {}, "f:n2": {}}}},
            {"manager": "wasmctrl/g", "operation": "Apply", "subresource": "status", "fieldsV1": {"f:status": {"f:used": {}}}},
            {"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:data": {"f:x": {}}}}
        ]}, "data": {"n1": "1", "n2": "1", "x": "y"}, "status": {"used": 1}});
        let m = "wasmctrl/g";
        assert!(!drops_owned_field(
            &live,
            &json!({"data": {"n1": "1", "n2": "1"}}),
            m,
            None
        ));
        assert!(drops_owned_field(
            &live,
            &json!({"data": {"n1": "1"}}),
            m,
            None
        ));
        assert!(drops_owned_field(&live, &json!({}), m, None));
        // A manager's Update entry (our merge patches) counts too, outside
        // metadata and for entries no other manager owns.
        assert!(drops_owned_field(
            &live,
            &json!({"data": {"n1": "1", "n2": "1"}}),
            "kubectl",
            None
        ));
        assert!(!drops_owned_field(
            &live,
            &json!({"data": {"x": "y"}}),
            "kubectl",
            None
        ));
        // Status entries count only for status applies.
        assert!(!drops_owned_field(
            &live,
            &json!({"status": {"used": 2}}),
            m,
            Some("status")
        ));
        assert!(drops_owned_field(
            &live,
            &json!({"status": {}}),
            m,
            Some("status")
        ));
    }
}
