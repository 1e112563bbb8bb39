//! Entries of non-apply writes (create, update, patch): the writer takes
//! what it added or changed, entries combine per manager identity, times
//! move only when fields are taken, and the list is sorted and capped as
//! apimachinery does.
//! They call the pure functions only: never storage, HTTP or a clock.

use super::*;
use crate::patch::apply::managed::ManagerKey;
use crate::patch::apply::{
    record_update_with, ApplyOptions, ANCIENT_CHANGES_MANAGER, MAX_UPDATE_MANAGERS,
};

#[test]
fn record_update_on_create_marks_new_maps_with_dot() {
    let mut obj = cm(json!({"a":"1"}));
    obj["metadata"]["labels"] = json!({"x":"y"});
    record_update(None, &mut obj, "kubectl-create", "Update", None, T0);
    assert_eq!(
        obj["metadata"]["managedFields"],
        json!([{
            "manager":"kubectl-create","operation":"Update","apiVersion":"v1","time":T0,
            "fieldsType":"FieldsV1",
            "fieldsV1":{"f:data":{".":{},"f:a":{}},"f:metadata":{"f:labels":{".":{},"f:x":{}}}}
        }])
    );
}

#[test]
fn record_update_on_create_treats_builtin_spec_as_preexisting() {
    let mut pod = json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"app","image":"i"}]}});
    record_update(None, &mut pod, "kubectl-create", "Update", None, T0);
    assert_eq!(
        entry(&pod, "kubectl-create")["fieldsV1"],
        json!({"f:spec":{"f:containers":{".":{},"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{}}}}})
    );
    let mut cr = json!({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}});
    record_update(None, &mut cr, "kubectl-create", "Update", None, T0);
    assert_eq!(
        entry(&cr, "kubectl-create")["fieldsV1"],
        json!({"f:spec":{".":{},"f:size":{}}})
    );
}

#[test]
fn record_update_takes_changed_fields_from_other_managers() {
    let v1 = ok(apply(None, &cm(json!({"a":"1","b":"1"})), "ctrl", false));
    let mut v2 = v1.clone();
    v2["data"]["a"] = json!("2");
    record_update(Some(&v1), &mut v2, "kubectl-edit", "Update", None, T2);
    assert_eq!(entry(&v2, "ctrl")["fieldsV1"], json!({"f:data":{"f:b":{}}}));
    assert_eq!(
        entry(&v2, "kubectl-edit")["fieldsV1"],
        json!({"f:data":{"f:a":{}}})
    );
    // Apply entries sort before Update entries.
    assert_eq!(owners(&v2)[0].1, "Apply");
    // Removing a field via update removes it from its owner.
    let mut v3 = v2.clone();
    if let Some(d) = v3["data"].as_object_mut() {
        d.remove("b");
    }
    record_update(Some(&v2), &mut v3, "kubectl-edit", "Update", None, T2);
    assert_eq!(
        owners(&v3),
        vec![(
            "kubectl-edit".into(),
            "Update".into(),
            json!({"f:data":{"f:a":{}}})
        )]
    );
}

#[test]
fn record_update_combines_entries_and_moves_time_only_when_taking_fields() {
    let mut v1 = cm(json!({"a":"1"}));
    record_update(None, &mut v1, "m", "Update", None, T0);
    let mut v2 = v1.clone();
    v2["data"]["b"] = json!("2");
    record_update(Some(&v1), &mut v2, "m", "Update", None, T1);
    assert_eq!(
        owners(&v2),
        vec![(
            "m".into(),
            "Update".into(),
            json!({"f:data":{".":{},"f:a":{},"f:b":{}}})
        )]
    );
    assert_eq!(entry(&v2, "m")["time"], T1);
    let mut v3 = v2.clone();
    record_update(Some(&v2), &mut v3, "m", "Update", None, T2);
    assert_eq!(entry(&v3, "m")["time"], T1, "a no-op update keeps the time");
    let mut v4 = v3.clone();
    record_update(Some(&v3), &mut v4, "noop", "Update", None, T2);
    assert_eq!(owners(&v4).len(), 1, "a no-op manager gets no entry");
}

#[test]
fn record_update_status_subresource_entry_carries_subresource() {
    let kind = ObjectKind::new("", "v1", "Pod");
    let mut v1 = json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"i"}]}});
    record_update(None, &mut v1, "creator", "Update", None, T0);
    let mut v2 = v1.clone();
    v2["status"] = json!({"phase":"Running","conditions":[{"type":"Ready","status":"True"}]});
    record_update_with(
        Some(&v1),
        &mut v2,
        "kubelet",
        "Update",
        T1,
        &ApplyOptions::status_subresource(),
        &kind,
    );
    let e = entry(&v2, "kubelet");
    assert_eq!(e["subresource"], "status");
    assert_eq!(
        e["fieldsV1"],
        json!({"f:status":{".":{},"f:phase":{},"f:conditions":{".":{},"k:{\"type\":\"Ready\"}":{".":{},"f:status":{},"f:type":{}}}}})
    );
    assert_eq!(entry(&v2, "creator").get("subresource"), None);
}

#[test]
fn record_update_honours_reset_and_untracked_objects() {
    let mut v1 = cm(json!({"a":"1"}));
    record_update(None, &mut v1, "m", "Update", None, T0);
    let mut reset = v1.clone();
    reset["metadata"]["managedFields"] = json!([{}]);
    record_update(Some(&v1), &mut reset, "m", "Update", None, T1);
    assert_eq!(
        reset.pointer("/metadata/managedFields"),
        None,
        "[{{}}] resets and the object stays untracked"
    );
    let mut again = reset.clone();
    again["data"]["b"] = json!("2");
    record_update(Some(&reset), &mut again, "m", "Update", None, T1);
    assert_eq!(again.pointer("/metadata/managedFields"), None);
    // Managed fields sent by the client replace the live ones.
    let mut sent = v1.clone();
    sent["metadata"]["managedFields"] = json!([{"manager":"x","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:a":{}}}}]);
    record_update(Some(&v1), &mut sent, "m", "Update", None, T1);
    assert_eq!(
        owners(&sent),
        vec![("x".into(), "Update".into(), json!({"f:data":{"f:a":{}}}))]
    );
}

/// Where an update's ownership starts, as apimachinery's
/// `decodeLiveOrNew`: a reset, the sent entries or the live ones.
#[test]
fn record_update_starts_from_sent_entries_a_reset_or_the_live_ones() {
    let mut v1 = cm(json!({"a":"1"}));
    record_update(None, &mut v1, "m", "Update", None, T0);
    let with = |mf: Option<Value>| {
        let mut new = v1.clone();
        match mf {
            Some(mf) => new["metadata"]["managedFields"] = mf,
            None => {
                new["metadata"]
                    .as_object_mut()
                    .unwrap()
                    .remove("managedFields");
            }
        }
        new["data"]["b"] = json!("2");
        record_update(Some(&v1), &mut new, "u", "Update", None, T1);
        new
    };
    let mine = (
        "u".to_owned(),
        "Update".to_owned(),
        json!({"f:data":{"f:b":{}}}),
    );
    // `[]` and a single entry that decodes to the zero entry reset (and
    // the object is untracked, so not even `u` gets an entry)
    for reset in [
        json!([]),
        json!([{}]),
        json!([{"manager":"","operation":null,"time":null,"fieldsV1":null,"unknown":1}]),
    ] {
        assert_eq!(
            with(Some(reset.clone())).pointer("/metadata/managedFields"),
            None,
            "{reset}"
        );
    }
    // none, null or any undecodable entry: the live ones
    let mut live = owners(&v1);
    live.push(mine.clone());
    let good = json!({"manager":"x","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:a":{}}}});
    let bad = |k: &str, v: Value| {
        let mut e = good.clone();
        match v {
            Value::Null if k != "operation" => {
                e.as_object_mut().unwrap().remove(k);
            }
            v => e[k] = v,
        }
        json!([good.clone(), e])
    };
    for sent in [
        None,
        Some(Value::Null),
        Some(bad("operation", json!("Bogus"))),
        Some(bad("operation", Value::Null)),
        Some(bad("apiVersion", json!(""))),
        Some(bad("apiVersion", Value::Null)),
        Some(bad("fieldsType", json!(""))),
        Some(bad("fieldsType", json!("FieldsV2"))),
        Some(bad("fieldsV1", json!({"x:bad":{}}))),
        Some(bad("fieldsV1", json!([]))),
        Some(json!([{}, {}])),
        Some(json!([good.clone(), {}])),
    ] {
        assert_eq!(owners(&with(sent.clone())), live, "{sent:?}");
    }
    // decodable entries replace the live ones: a missing fieldsV1 is the
    // empty set (an entry that then owns nothing and goes), and of one
    // manager identity the last entry wins, time included
    let mut first = good.clone();
    first["fieldsV1"] = json!({"f:data":{"f:c":{}}});
    first["time"] = json!(T0);
    let mut empty = good.clone();
    empty["manager"] = json!("y");
    empty.as_object_mut().unwrap().remove("fieldsV1");
    let got = with(Some(json!([first, empty, good.clone()])));
    assert_eq!(
        owners(&got),
        vec![
            (
                "x".to_owned(),
                "Update".to_owned(),
                json!({"f:data":{"f:a":{}}})
            ),
            mine
        ]
    );
    assert_eq!(
        entry(&got, "x").get("time"),
        None,
        "the last entry's (no) time"
    );
}

#[test]
fn update_managers_beyond_ten_merge_into_ancient_changes() {
    let mut obj = cm(json!({}));
    record_update(
        None,
        &mut obj,
        "m00",
        "Update",
        None,
        "2026-01-01T00:00:00Z",
    );
    for i in 1..=11 {
        let mut next = obj.clone();
        next["data"][format!("k{i}")] = json!("v");
        record_update(
            Some(&obj),
            &mut next,
            &format!("m{i:02}"),
            "Update",
            None,
            &format!("2026-01-01T00:00:{i:02}Z"),
        );
        obj = next;
    }
    let names: Vec<String> = owners(&obj).into_iter().map(|(m, _, _)| m).collect();
    assert_eq!(names.len(), MAX_UPDATE_MANAGERS);
    assert!(
        names.contains(&ANCIENT_CHANGES_MANAGER.to_owned()),
        "{names:?}"
    );
    assert_eq!(
        entry(&obj, ANCIENT_CHANGES_MANAGER)["fieldsV1"],
        json!({"f:data":{".":{},"f:k1":{},"f:k2":{}}})
    );
    assert!(!names.contains(&"m01".to_owned()) && names.contains(&"m03".to_owned()));
}

#[test]
fn managed_fields_sort_apply_first_then_by_time() {
    let v1 = ok(server_side_apply(
        None,
        &cm(json!({"a":"1"})),
        "zeta",
        false,
        &cm_kind(),
        T1,
    ));
    let mut v2 = v1.clone();
    v2["data"]["b"] = json!("2");
    record_update(Some(&v1), &mut v2, "alpha", "Update", None, T0);
    let v3 = ok(server_side_apply(
        Some(&v2),
        &cm(json!({"c":"3"})),
        "beta",
        false,
        &cm_kind(),
        T2,
    ));
    let order: Vec<String> = owners(&v3).into_iter().map(|(m, _, _)| m).collect();
    assert_eq!(order, vec!["zeta", "beta", "alpha"]);
}

#[test]
fn subresource_managers_print_with_subresource() {
    let key = ManagerKey::new("kubelet", "Update", "v1", Some("status"));
    assert_eq!(
        key.printed(),
        "\"kubelet\" with subresource \"status\" using v1"
    );
    assert_eq!(
        ManagerKey::new("m", "Apply", "v1", Some("status")).printed(),
        "\"m\" with subresource \"status\""
    );
}
