//! Managed-fields sets are kept in their stored `fieldsV1` encoding until
//! a write needs them decoded (see `managed::Fields`); these properties
//! pin that doing so changes nothing: every apply and update gives the
//! same object and the same `managedFields` (entries, order, times,
//! `fieldsV1`) and the same errors as decoding every set at once.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use serde_json::Map;

use super::*;
use crate::patch::apply::managed::EAGER;
use crate::patch::apply::{record_update_with, server_side_apply_with, ApplyOptions};

fn widget_kind() -> ObjectKind {
    ObjectKind::new("example.com", "v1", "Widget")
}

/// A small tree: nested maps with keys `a`..`c`, scalars, nulls, lists.
fn tree() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        (0i64..3).prop_map(Value::from),
        Just(Value::Null),
        Just(json!([1, 2])),
        Just(json!({})),
    ];
    leaf.prop_recursive(3, 24, 3, |inner| {
        prop::collection::btree_map(prop::sample::select(vec!["a", "b", "c"]), inner, 0..4)
            .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
    })
}

/// A `fieldsV1`-like object: canonical or not (`.` anywhere, a member
/// spelled `{".":{}}`, identity fields, odd keys), rarely malformed.
fn fields_v1() -> impl Strategy<Value = Value> {
    let keys = prop::sample::select(vec![
        "f:a",
        "f:b",
        "f:c",
        "f:spec",
        "f:metadata",
        "f:name",
        "f:labels",
        ".",
        "i:0",
        "i:01",
        "k:{\"name\":\"x\"}",
        "k:{ \"name\":\"x\"}",
        "v:1",
        "v: 1",
    ]);
    let leaf = prop_oneof![
        20 => Just(json!({})),
        1 => Just(json!(1)),
    ];
    leaf.prop_recursive(4, 32, 4, move |inner| {
        prop::collection::btree_map(keys.clone(), inner, 0..4)
            .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
    })
}

/// A `fieldsV1` set of the paths of a generated object (always canonical
/// and mostly about fields that exist).
fn spec_fields() -> impl Strategy<Value = Value> {
    tree().prop_map(|t| {
        let mut set = crate::patch::FieldSet::new();
        fn walk(
            v: &Value,
            path: &mut Vec<crate::patch::PathElement>,
            set: &mut crate::patch::FieldSet,
        ) {
            if let Value::Object(m) = v {
                if !path.is_empty() && !m.is_empty() && path.len().is_multiple_of(2) {
                    set.insert(path);
                }
                for (k, c) in m {
                    path.push(crate::patch::PathElement::Field(k.clone()));
                    walk(c, path, set);
                    path.pop();
                }
            } else {
                set.insert(path);
            }
        }
        walk(&json!({"spec": t}), &mut Vec::new(), &mut set);
        set.to_fields_v1()
    })
}

fn managed_fields() -> impl Strategy<Value = Value> {
    let entry = (
        prop::sample::select(vec!["m1", "m2", "m3"]),
        prop::sample::select(vec!["Apply", "Update"]),
        prop::sample::select(vec![None, Some(T0), Some(T1)]),
        prop::sample::select(vec![None, Some("status")]),
        prop_oneof![3 => spec_fields(), 2 => fields_v1()],
    )
        .prop_map(|(m, op, time, sub, f)| {
            let mut e = Map::new();
            e.insert("manager".into(), json!(m));
            e.insert("operation".into(), json!(op));
            e.insert("apiVersion".into(), json!("example.com/v1"));
            if let Some(t) = time {
                e.insert("time".into(), json!(t));
            }
            e.insert("fieldsType".into(), json!("FieldsV1"));
            e.insert("fieldsV1".into(), f);
            if let Some(s) = sub {
                e.insert("subresource".into(), json!(s));
            }
            Value::Object(e)
        });
    prop::collection::vec(entry, 0..4).prop_map(Value::Array)
}

fn widget(spec: &Value, managed: Option<&Value>) -> Value {
    let mut obj = json!({"apiVersion":"example.com/v1","kind":"Widget",
        "metadata":{"name":"w","namespace":"default"},"spec":spec});
    if let Some(m) = managed {
        obj["metadata"]["managedFields"] = m.clone();
    }
    obj
}

fn eager_and_lazy<R>(f: impl Fn() -> R) -> (R, R) {
    EAGER.with(|e| e.set(true));
    let eager = f();
    EAGER.with(|e| e.set(false));
    (eager, f())
}

fn options(status: bool) -> ApplyOptions {
    if status {
        ApplyOptions::status_subresource()
    } else {
        ApplyOptions::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn lazy_managed_fields_record_updates_as_eager_decoding(
        old_spec in tree(),
        new_spec in tree(),
        next_spec in tree(),
        old_managed in managed_fields(),
        sent in prop::sample::select(vec![0u8, 1, 2, 3]),
        sent_managed in managed_fields(),
        status in any::<bool>(),
    ) {
        let old = widget(&old_spec, Some(&old_managed));
        let sent = match sent {
            0 => Some(old_managed.clone()),
            1 => None,
            2 => Some(json!([{}])),
            _ => Some(sent_managed),
        };
        let (eager, lazy) = eager_and_lazy(|| {
            let mut new = widget(&new_spec, sent.as_ref());
            record_update_with(Some(&old), &mut new, "m2", "Update", T1, &options(status), &widget_kind());
            // and the next merge patch of the same object
            let mut next = new.clone();
            next["spec"] = next_spec.clone();
            record_update_with(Some(&new), &mut next, "m1", "Update", T2, &options(status), &widget_kind());
            let mut created = widget(&new_spec, sent.as_ref());
            record_update_with(None, &mut created, "m3", "Update", T0, &options(status), &widget_kind());
            (new, next, created)
        });
        prop_assert_eq!(eager, lazy);
    }

    #[test]
    fn lazy_managed_fields_apply_as_eager_decoding(
        old_spec in tree(),
        applied_spec in tree(),
        next_spec in tree(),
        old_managed in managed_fields(),
        force in any::<bool>(),
        status in any::<bool>(),
    ) {
        let old = widget(&old_spec, Some(&old_managed));
        let (eager, lazy) = eager_and_lazy(|| {
            let applied = widget(&applied_spec, None);
            let first = server_side_apply_with(Some(&old), &applied, "m1", force, &widget_kind(), T1, &options(status));
            let next = first.as_ref().ok().map(|live| {
                let mut next = live.clone();
                next["spec"] = next_spec.clone();
                record_update_with(Some(live), &mut next, "m2", "Update", T2, &options(status), &widget_kind());
                let again = server_side_apply_with(Some(&next), &applied, "m1", force, &widget_kind(), T2, &options(status));
                (next, again)
            });
            (first, next)
        });
        prop_assert_eq!(eager, lazy);
    }

    #[test]
    fn a_set_encodes_as_exactly_its_fields_v1(a in fields_v1(), b in spec_fields()) {
        use crate::patch::FieldSet;
        let sets: Vec<FieldSet> = [&a, &b]
            .into_iter()
            .filter_map(|f| FieldSet::from_fields_v1(f).ok())
            .collect();
        for raw in [&a, &b] {
            let Value::Object(m) = raw else { continue };
            for set in &sets {
                prop_assert_eq!(set.encodes_as(m), set.to_fields_v1() == *raw, "{:?} {}", set, raw);
            }
        }
    }

    #[test]
    fn in_place_merge_and_managed_fields_skipping_walks_match_the_copying_ones(
        lhs in tree(),
        rhs in tree(),
        lmf in managed_fields(),
        rmf in prop::option::of(managed_fields()),
    ) {
        let kind = widget_kind();
        let types = crate::patch::schema::Types { kind: &kind, overrides: None };
        let mut merged = lhs.clone();
        crate::patch::apply::merge::merge_into(&types, &mut merged, &rhs);
        prop_assert_eq!(&merged, &crate::patch::apply::merge::merge(&types, Some(&lhs), &rhs));

        let applied = widget(&rhs, None);
        prop_assert_eq!(
            crate::patch::apply::fieldset::to_field_set(&types, &applied),
            crate::patch::apply::fieldset::to_field_set_by_paths(&types, &applied)
        );
        let pods = crate::patch::ObjectKind::new("", "v1", "Pod");
        let pod_types = crate::patch::schema::Types { kind: &pods, overrides: None };
        let pod = json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","finalizers":["a","b",lhs.clone()]},
            "spec":{"containers":[{"name":"a","ports":[{"containerPort":1},{"containerPort":2,"protocol":"UDP"}]},{"name":rhs.clone()}],"x":rhs.clone()}});
        prop_assert_eq!(
            crate::patch::apply::fieldset::to_field_set(&pod_types, &pod),
            crate::patch::apply::fieldset::to_field_set_by_paths(&pod_types, &pod)
        );
        let l = widget(&lhs, Some(&lmf));
        let r = widget(&rhs, rmf.as_ref());
        let strip = |v: &Value| {
            let mut v = v.clone();
            if let Some(Value::Object(m)) = v.get_mut("metadata") {
                m.remove("managedFields");
            }
            v
        };
        prop_assert_eq!(&crate::patch::apply::managed::without_managed_fields(&l), &strip(&l));
        let fast = crate::patch::apply::fieldset::compare_without_managed_fields(&types, &l, &r);
        let slow = crate::patch::apply::fieldset::compare_reference(&types, &strip(&l), &strip(&r));
        prop_assert_eq!(
            (fast.added, fast.modified, fast.removed),
            (slow.added, slow.modified, slow.removed)
        );
        let plain = crate::patch::apply::fieldset::compare(&types, &l, &r);
        let slow = crate::patch::apply::fieldset::compare_reference(&types, &l, &r);
        prop_assert_eq!(
            (plain.added, plain.modified, plain.removed),
            (slow.added, slow.modified, slow.removed)
        );
        let (lp, rp) = (json!({"spec": {"p": lhs.clone(), "q": [lhs.clone()]}}), json!({"spec": {"p": rhs.clone(), "q": [rhs.clone()]}}));
        let pod = ObjectKind::new("", "v1", "Pod");
        let pod_types = crate::patch::schema::Types { kind: &pod, overrides: None };
        let plain = crate::patch::apply::fieldset::compare(&pod_types, &lp, &rp);
        let slow = crate::patch::apply::fieldset::compare_reference(&pod_types, &lp, &rp);
        prop_assert_eq!(
            (plain.added, plain.modified, plain.removed),
            (slow.added, slow.modified, slow.removed)
        );
        // odd metadata: not an object, or only managedFields
        for meta in [json!("x"), json!({"managedFields": lmf.clone()}), json!({})] {
            let mut odd = l.clone();
            odd["metadata"] = meta;
            let fast = crate::patch::apply::fieldset::compare_without_managed_fields(&types, &odd, &r);
            let slow = crate::patch::apply::fieldset::compare_reference(&types, &strip(&odd), &strip(&r));
            prop_assert_eq!(
                (fast.added, fast.modified, fast.removed),
                (slow.added, slow.modified, slow.removed)
            );
        }
    }
}

/// `fieldset::compare` walks two maps' keys in one sorted pass, which
/// holds only while `serde_json::Map` iterates in key order (no
/// `preserve_order` feature).
#[test]
fn json_maps_iterate_in_key_order() {
    let m: Map<String, Value> = [("b", 1), ("a", 2), ("c", 3), ("B", 4)]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), json!(v)))
        .collect();
    let keys: Vec<&str> = m.keys().map(String::as_str).collect();
    assert_eq!(keys, ["B", "a", "b", "c"]);
}
