//! The chain's decisions against `merge_patch_for` on the object the chain
//! stands for: the same patch (restricted to the entries that changed), or
//! a hand-over to the whole-document path where that would apply.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{json, Value as Json};

use super::*;
use crate::compare::{contains, drops_owned_field, merge_patch_for};
use crate::guest::Gvk;

const ME: &str = "wasmctrl/g";

fn target(kind: &str) -> ObjectKey {
    ObjectKey {
        gvk: Gvk {
            group: String::new(),
            version: "v1".into(),
            kind: kind.into(),
        },
        namespace: Some("ops".into()),
        name: "s".into(),
    }
}

fn frame() -> Json {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s", "namespace": "ops"}})
}

fn write(all: &[(&str, &str)], changed: &[(&str, Option<&str>)], complete: bool) -> EntryWrite {
    EntryWrite {
        field: "data".into(),
        frame: frame(),
        all: Arc::new(
            all.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        changed: changed
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
            .collect(),
        complete,
    }
}

/// A live ConfigMap at `rv` whose `data` entries are owned as `owners`
/// says: (key, value, owned by me, owned by another).
fn live(rv: &str, entries: &[(&str, &str, bool, bool)]) -> Json {
    let data: serde_json::Map<String, Json> = entries
        .iter()
        .map(|(k, v, _, _)| (k.to_string(), json!(v)))
        .collect();
    let fields = |pick: fn(&(&str, &str, bool, bool)) -> bool| -> Json {
        let owned: serde_json::Map<String, Json> = entries
            .iter()
            .filter(|e| pick(e))
            .map(|(k, ..)| (format!("f:{k}"), json!({})))
            .collect();
        // No claim on the map itself (`merge_patch_for`, not knowing the
        // schema, takes one for an atomic map and declines).
        if owned.is_empty() {
            return json!({});
        }
        json!({"f:data": owned})
    };
    let mut doc = frame();
    doc["metadata"]["resourceVersion"] = json!(rv);
    doc["metadata"]["managedFields"] = json!([
        {"manager": ME, "operation": "Apply", "fieldsV1": fields(|e| e.2)},
        {"manager": "ops-team", "operation": "Update", "fieldsV1": fields(|e| e.3)},
    ]);
    doc["data"] = Json::Object(data);
    doc
}

#[test]
fn a_changed_entry_is_patched_alone_at_the_chain_version() {
    let chains = Chains::default();
    let t = target("ConfigMap");
    let first = write(&[("n1", "2"), ("n2", "1")], &[], true);
    let l = live("7", &[("n1", "2", true, false), ("n2", "1", true, false)]);
    chains.note(&t, &first);
    // The first plan of an aggregate goes whole; its skip starts the chain.
    assert_eq!(chains.decide(&t, &first, Some("7"), false), Decision::Whole);
    chains.restart(&t, &first, ME, Some((&l, "7")), None);
    assert!(chains.holds(&t));

    let next = write(&[("n1", "3"), ("n2", "1")], &[("n1", Some("3"))], false);
    chains.note(&t, &next);
    let Decision::Patch { rv, entries } = chains.decide(&t, &next, Some("7"), false) else {
        panic!("a patch");
    };
    assert_eq!(
        (rv.as_str(), Json::Object(entries.clone())),
        ("7", json!({"n1": "3"}))
    );
    chains.patched(&t, "8", &entries);
    // Nothing changed since: no write, even before the echo came.
    let same = write(&[("n1", "3"), ("n2", "1")], &[], false);
    chains.note(&t, &same);
    assert_eq!(chains.decide(&t, &same, Some("7"), true), Decision::Noop);
    // The cache at a version nobody told the chain about: whole again.
    assert_eq!(chains.decide(&t, &same, Some("9"), false), Decision::Whole);
    assert!(!chains.holds(&t));
}

#[test]
fn changes_not_written_stay_noted_until_a_write_succeeds() {
    let chains = Chains::default();
    let t = target("ConfigMap");
    let w = write(&[("a", "1")], &[], false);
    let l = live("3", &[("a", "1", true, false)]);
    chains.restart(&t, &w, ME, Some((&l, "3")), None);
    chains.note(&t, &write(&[("a", "2")], &[("a", Some("2"))], false));
    // That write failed; the next plan changes another entry only.
    let next = write(&[("a", "2"), ("b", "5")], &[("b", Some("5"))], false);
    chains.note(&t, &next);
    let Decision::Patch { entries, .. } = chains.decide(&t, &next, Some("3"), false) else {
        panic!("a patch");
    };
    assert_eq!(Json::Object(entries), json!({"a": "2", "b": "5"}));
}

#[test]
fn dropped_entries_go_by_owner_as_an_apply_would_leave_them() {
    let chains = Chains::default();
    let t = target("ConfigMap");
    let w = write(&[], &[], false);
    let l = live(
        "4",
        &[
            ("mine", "1", true, false),
            ("theirs", "1", false, true),
            ("nobodys", "1", false, false),
            ("shared", "1", true, true),
        ],
    );
    chains.restart(&t, &w, ME, Some((&l, "4")), None);
    let drop = |k: &str| write(&[], &[(k, None)], false);
    for (k, want) in [
        ("mine", Some(json!({"mine": null}))),
        ("theirs", None),
        ("nobodys", None),
    ] {
        let d = drop(k);
        chains.note(&t, &d);
        match (chains.decide(&t, &d, Some("4"), false), want) {
            (Decision::Patch { entries, .. }, Some(w)) => assert_eq!(Json::Object(entries), w),
            (Decision::Noop, None) => {}
            (other, w) => panic!("{k}: {other:?}, wanted {w:?}"),
        }
        chains.settled(&t);
    }
    // Shared with another manager: only the apply can drop our claim.
    let d = drop("shared");
    chains.note(&t, &d);
    assert_eq!(chains.decide(&t, &d, Some("4"), false), Decision::Whole);
}

#[test]
fn a_new_frame_or_an_unknown_field_or_kind_goes_whole() {
    let chains = Chains::default();
    let t = target("ConfigMap");
    let w = write(&[("a", "1")], &[], false);
    let l = live("3", &[("a", "1", true, false)]);
    chains.restart(&t, &w, ME, Some((&l, "3")), None);
    let mut relabelled = write(&[("a", "2")], &[("a", Some("2"))], false);
    relabelled.frame["metadata"]["labels"] = json!({"x": "y"});
    chains.note(&t, &relabelled);
    assert_eq!(
        chains.decide(&t, &relabelled, Some("3"), false),
        Decision::Whole
    );

    // A field the host does not know to be granular starts no chain.
    let other = target("Widget");
    chains.restart(&other, &w, ME, Some((&l, "3")), None);
    assert!(!chains.holds(&other));
    // Nor does an object without managedFields, or a full apply.
    let mut bare = l.clone();
    bare["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    chains.restart(&t, &w, ME, Some((&bare, "3")), None);
    assert!(!chains.holds(&t));
    chains.restart(&t, &w, ME, Some((&l, "3")), None);
    chains.restart(&t, &w, ME, None, None);
    assert!(!chains.holds(&t));
}

/// A random live entry: value and owners.
fn entry() -> impl Strategy<Value = (u8, bool, bool)> {
    (0..3u8, any::<bool>(), any::<bool>())
}

proptest! {
    /// On any live object the chain knows, and any change of the desired
    /// entries, the chain's patch is `merge_patch_for`'s on that object
    /// (which sees every entry), or it hands over where that one would
    /// need an apply or would leave a shared claim.
    #[test]
    fn the_chain_decides_as_merge_patch_for_on_the_live_object(
        before in proptest::collection::btree_map("[a-e]", entry(), 0..5),
        desired_after in proptest::collection::btree_map("[a-e]", 0..3u8, 0..5),
    ) {
        let t = target("ConfigMap");
        let owned: Vec<(String, String, bool, bool)> = before
            .iter()
            .map(|(k, (v, me, them))| (k.clone(), v.to_string(), *me, *them))
            .collect();
        let as_refs: Vec<(&str, &str, bool, bool)> = owned
            .iter()
            .map(|(k, v, a, b)| (k.as_str(), v.as_str(), *a, *b))
            .collect();
        let l = live("5", &as_refs);
        let to_map = |m: &BTreeMap<String, u8>| -> Vec<(String, String)> {
            m.iter().map(|(k, v)| (k.clone(), v.to_string())).collect()
        };
        let a = to_map(&desired_after);
        fn refs(v: &[(String, String)]) -> Vec<(&str, &str)> {
            v.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
        }
        let start_write = write(&[], &[], false);
        let chains = Chains::default();
        chains.restart(&t, &start_write, ME, Some((&l, "5")), None);
        // Every key may have changed.
        let keys: std::collections::BTreeSet<&String> =
            desired_after.keys().chain(before.keys()).collect();
        let changed: Vec<(&str, Option<&str>)> = keys
            .iter()
            .map(|k| (k.as_str(), a.iter().find(|(ak, _)| ak == *k).map(|(_, v)| v.as_str())))
            .collect();
        let w = write(&refs(&a), &changed, false);
        chains.note(&t, &w);
        let decision = chains.decide(&t, &w, Some("5"), false);
        // What the whole-document path decides on the live object: the
        // no-op test, then the merge patch, else the apply.
        let doc = w.doc();
        let noop = contains(&l, &doc) && !drops_owned_field(&l, &doc, ME, None);
        let shared_dropped = before
            .iter()
            .any(|(k, (_, me, them))| *me && *them && !desired_after.contains_key(k));
        match (noop, merge_patch_for(&l, &doc, ME), decision) {
            (true, _, d) => prop_assert_eq!(d, Decision::Noop),
            (false, Some(p), Decision::Patch { entries, .. }) => {
                prop_assert_eq!(Some(&Json::Object(entries)), p.get("data"));
            }
            // A shared entry dropped: handed over (merge_patch_for may
            // still patch, leaving our Update claim, or need the apply).
            (false, _, Decision::Whole) => prop_assert!(shared_dropped),
            (false, reference, d) => {
                prop_assert!(false, "chain decided {:?}, the live object {:?}", d, reference);
            }
        }
    }
}
