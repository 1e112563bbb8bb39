//! Writes of only what changed: when a forced server-side apply would
//! change nothing but some entries of string maps (a summary ConfigMap's
//! `data`, say), the same result as a JSON merge patch of just those
//! entries. Owns the decision and the patch ([`merge_patch_for`]). It never
//! sends anything and never decides whether a write is needed at all (the
//! caller's no-op test comes first).
//!
//! # When it answers
//! Only when the patch leaves the object's content exactly as the apply
//! would: every other desired field already holds its value, and every
//! entry the apply would remove (owned by this manager alone, entry by
//! entry, and no longer desired) is removed by a `null`. Otherwise it
//! declines, so the caller applies: when identity, metadata, status or a
//! field that is not a map of strings would change, for an atomic map or a
//! map dropped whole, when an entry this manager's `Apply` entry shares
//! with another manager is dropped, and when the live object shows no
//! `managedFields`. A `metadata.uid` in the desired document travels in the
//! patch, so a replaced object refuses it as it would refuse the apply.
//!
//! # Ownership afterwards
//! Entries the patch writes are then owned by this manager through an
//! `Update` entry of `managedFields` rather than its `Apply` entry;
//! [`super::drops_owned_field`] counts both (an entry another manager also
//! owns stays, as the apply would leave its value).

use serde_json::{Map, Value as Json};

use super::managed::{applied_owns, claimed_by_entry, co_owned, entries, Whose};
use super::stored::contains;

/// Whether `v` is a map of strings (`data`, `binaryData`): merged entry by
/// entry alike by a merge patch and by an apply of a granular map.
fn string_map(v: &Json) -> Option<&Map<String, Json>> {
    v.as_object().filter(|m| m.values().all(Json::is_string))
}

/// A JSON merge patch that brings `live` to what a forced server-side apply
/// of `desired` by `manager` would leave, when the two differ only in
/// entries of top-level string maps; `None` when an apply is needed (the
/// object's identity, metadata, a non-map field, an atomic map, a map
/// dropped whole, or an entry another manager also owns would change), and
/// when `live` shows no `managedFields` (nobody's claims are known).
/// A `metadata.uid` in `desired` travels in the patch, so a replaced
/// object refuses it as it would refuse the apply.
pub fn merge_patch_for(live: &Json, desired: &Json, manager: &str) -> Option<Json> {
    // Without the live object's managedFields nobody's claims are known:
    // only the apply knows what it may remove.
    live.pointer("/metadata/managedFields")
        .and_then(Json::as_array)
        .filter(|m| !m.is_empty())?;
    let (live_obj, desired_obj) = (live.as_object()?, desired.as_object()?);
    let mut patch = Map::new();
    for (k, dv) in desired_obj {
        let lv = live_obj.get(k).unwrap_or(&Json::Null);
        match k.as_str() {
            "apiVersion" | "kind" | "metadata" | "status" => {
                if !contains(lv, dv) {
                    return None;
                }
            }
            _ if contains(lv, dv) => {}
            _ => {
                let (want, have) = (string_map(dv)?, lv.as_object());
                let mut entries = Map::new();
                for (ek, ev) in want {
                    if have.and_then(|h| h.get(ek)) != Some(ev) {
                        entries.insert(ek.clone(), ev.clone());
                    }
                }
                patch.insert(k.clone(), Json::Object(entries));
            }
        }
    }
    // What the apply would remove: fields this manager owns that `desired`
    // no longer sets.
    for fields in entries(live, manager, Whose::Mine) {
        for (fk, child) in fields.as_object()? {
            let Some(name) = fk.strip_prefix("f:") else {
                continue;
            };
            let dv = desired_obj.get(name);
            let granular = child
                .as_object()
                .filter(|c| c.keys().any(|k| k.starts_with("f:")));
            match (name, dv, granular) {
                // Identity and metadata (finalizer patches own entries
                // there; the apply does not set them): never merged.
                ("apiVersion" | "kind" | "metadata" | "status", _, _) => {}
                (_, Some(dv), Some(owned)) if string_map(dv).is_some() => {
                    let live_map = live_obj.get(name).and_then(Json::as_object);
                    for ek in owned.keys().filter_map(|k| k.strip_prefix("f:")) {
                        let gone = dv.get(ek).is_none();
                        let present = live_map.is_some_and(|m| m.contains_key(ek));
                        if !(gone && present) {
                            continue;
                        }
                        if co_owned(live, manager, name, ek) {
                            // The apply keeps the value and only drops our
                            // claim: only it can drop an Apply claim; an
                            // Update claim (our earlier patch) is left.
                            if applied_owns(live, manager, name, ek) {
                                return None;
                            }
                            continue;
                        }
                        patch
                            .entry(name.to_string())
                            .or_insert_with(|| Json::Object(Map::new()))
                            .as_object_mut()?
                            .insert(ek.to_string(), Json::Null);
                    }
                }
                // Owned as a whole value and still set: compared above,
                // except that an atomic map the apply would replace must
                // match exactly (extra live entries would go).
                (_, Some(dv), None) => {
                    let live_map = live_obj.get(name).and_then(Json::as_object);
                    // A claim on the map as a whole: atomic, unless some
                    // manager claims entries of it one by one (then it is
                    // a granular map whose claim only says it exists — the
                    // claim an apply of an empty map leaves). An empty live
                    // map ends the same either way.
                    if dv.is_object()
                        && live_obj.get(name) != Some(dv)
                        && live_map.is_some_and(|m| !m.is_empty())
                        && !claimed_by_entry(live, name)
                    {
                        return None;
                    }
                }
                // A map dropped whole, an atomic map, a nested field.
                _ => return None,
            }
        }
    }
    patch.retain(|_, v| v.as_object().is_some_and(|m| !m.is_empty()));
    if patch.is_empty() {
        return None;
    }
    if let Some(uid) = desired.pointer("/metadata/uid") {
        patch.insert("metadata".into(), serde_json::json!({ "uid": uid }));
    }
    Some(Json::Object(patch))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ME: &str = "wasmctrl/gpu-summary";

    fn live(data: Json, owned: &[&str], others: Json) -> Json {
        let mine: Map<String, Json> = owned
            .iter()
            .map(|k| (format!("f:{k}"), json!({})))
            .collect();
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "s", "namespace": "ops", "uid": "u1", "resourceVersion": "7",
                "managedFields": [
                    {"manager": ME, "operation": "Apply", "fieldsV1": {"f:data": mine}},
                    {"manager": "kubectl", "operation": "Update", "fieldsV1": others},
                ]},
            "data": data,
        })
    }

    fn desired(data: Json) -> Json {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "s", "namespace": "ops"}, "data": data})
    }

    #[test]
    fn a_changed_entry_is_patched_alone() {
        let l = live(json!({"a": "1", "b": "2"}), &["a", "b"], json!({}));
        let p = merge_patch_for(&l, &desired(json!({"a": "1", "b": "3"})), ME);
        assert_eq!(p, Some(json!({"data": {"b": "3"}})));
    }

    #[test]
    fn an_owned_entry_no_longer_desired_is_removed_and_a_foreign_one_is_kept() {
        let l = live(
            json!({"a": "1", "b": "2", "x": "9"}),
            &["a", "b"],
            json!({"f:data": {"f:x": {}}}),
        );
        let p = merge_patch_for(&l, &desired(json!({"a": "1", "c": "4"})), ME);
        assert_eq!(p, Some(json!({"data": {"b": null, "c": "4"}})));
    }

    #[test]
    fn an_entry_another_manager_also_owns_needs_the_apply() {
        let l = live(
            json!({"a": "1", "b": "2"}),
            &["a", "b"],
            json!({"f:data": {"f:b": {}}}),
        );
        assert_eq!(
            merge_patch_for(&l, &desired(json!({"a": "5"})), ME),
            None,
            "the apply would keep b (kubectl's) and only drop our claim"
        );
    }

    #[test]
    fn metadata_identity_and_non_map_changes_need_the_apply() {
        let l = live(json!({"a": "1"}), &["a"], json!({}));
        let mut d = desired(json!({"a": "2"}));
        d["metadata"]["labels"] = json!({"team": "ml"});
        assert_eq!(merge_patch_for(&l, &d, ME), None, "labels");
        let mut d = desired(json!({"a": "2"}));
        d["immutable"] = json!(true);
        assert_eq!(merge_patch_for(&l, &d, ME), None, "a non-map field");
        let mut d = desired(json!({"a": "2"}));
        d["kind"] = json!("Secret");
        assert_eq!(merge_patch_for(&l, &d, ME), None, "another kind");
        let d = json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "s", "namespace": "ops"}});
        assert_eq!(merge_patch_for(&l, &d, ME), None, "data dropped whole");
    }

    #[test]
    fn an_atomic_map_needs_the_apply() {
        let mut l = live(json!({"a": "1", "b": "2"}), &[], json!({}));
        l["metadata"]["managedFields"][0]["fieldsV1"] = json!({"f:data": {}});
        assert_eq!(merge_patch_for(&l, &desired(json!({"a": "1"})), ME), None);
    }

    #[test]
    fn a_summary_first_applied_empty_then_patched_is_still_patched() {
        // Applied with `data: {}` (a claim on the map only), entries then
        // written by patch (our Update entry claims them one by one).
        let l = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "s", "namespace": "ops", "managedFields": [
                {"manager": ME, "operation": "Apply", "fieldsV1": {"f:data": {}}},
                {"manager": ME, "operation": "Update", "fieldsV1": {"f:data": {"f:n1": {}, "f:n2": {}}}},
            ]},
            "data": {"n1": "2", "n2": "1"},
        });
        assert_eq!(
            merge_patch_for(&l, &desired(json!({"n1": "2"})), ME),
            Some(json!({"data": {"n2": null}}))
        );
    }

    #[test]
    fn a_pinned_write_carries_its_uid() {
        let l = live(json!({"a": "1"}), &["a"], json!({}));
        let mut d = desired(json!({"a": "2"}));
        d["metadata"]["uid"] = json!("u1");
        assert_eq!(
            merge_patch_for(&l, &d, ME),
            Some(json!({"data": {"a": "2"}, "metadata": {"uid": "u1"}}))
        );
    }

    /// The property: whenever a merge patch is offered, it leaves the
    /// object's content exactly as the forced apply would, with the
    /// embedded API server's server-side apply and merge patch (which
    /// follow the real server's) as the oracle; and a one-entry change of
    /// a summary the host applied is always offered as a patch.
    mod equivalence {
        use super::*;
        use crate::compare::managed::names;
        use proptest::prelude::*;
        use wasmctrl_apiserver::patch::{
            json_merge_patch, record_update, server_side_apply, ObjectKind,
        };

        const NOW: &str = "2026-12-01T00:00:00Z";

        fn kind() -> ObjectKind {
            ObjectKind::new("", "v1", "ConfigMap")
        }

        fn doc(data: &Map<String, Json>) -> Json {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "s", "namespace": "ops"}, "data": data})
        }

        /// One write to the object's history.
        #[derive(Debug, Clone)]
        enum Step {
            /// We apply this data (force).
            Apply(Map<String, Json>),
            /// A manager merge-patches entries (`None`: remove), as us
            /// (`true`) or as someone else.
            Merge(bool, Vec<(String, Option<String>)>),
            /// Someone else applies these entries (force).
            OtherApply(Map<String, Json>),
        }

        fn key() -> impl Strategy<Value = String> {
            prop::sample::select(vec!["a", "b", "c", "d", "e"]).prop_map(str::to_string)
        }

        fn value() -> impl Strategy<Value = String> {
            prop::sample::select(vec!["1", "2", "3"]).prop_map(str::to_string)
        }

        fn data() -> impl Strategy<Value = Map<String, Json>> {
            prop::collection::btree_map(key(), value(), 0..5)
                .prop_map(|m| m.into_iter().map(|(k, v)| (k, Json::String(v))).collect())
        }

        fn step() -> impl Strategy<Value = Step> {
            prop_oneof![
                data().prop_map(Step::Apply),
                (
                    any::<bool>(),
                    prop::collection::vec((key(), prop::option::of(value())), 1..3)
                )
                    .prop_map(|(me, e)| Step::Merge(me, e)),
                data().prop_map(Step::OtherApply),
            ]
        }

        fn run(live: Option<Json>, step: &Step) -> Option<Json> {
            match step {
                Step::Apply(d) => {
                    server_side_apply(live.as_ref(), &doc(d), ME, true, &kind(), NOW).ok()
                }
                Step::OtherApply(d) => {
                    let mut applied = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "s", "namespace": "ops"}, "data": d});
                    if d.is_empty() {
                        applied.as_object_mut()?.remove("data");
                    }
                    server_side_apply(live.as_ref(), &applied, "other", true, &kind(), NOW).ok()
                }
                Step::Merge(me, entries) => {
                    let old = live?;
                    let patch: Map<String, Json> = entries
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone().map_or(Json::Null, Json::String)))
                        .collect();
                    let mut new = json_merge_patch(&old, &json!({ "data": patch }));
                    let manager = if *me { ME } else { "other" };
                    record_update(Some(&old), &mut new, manager, "Update", None, NOW);
                    Some(new)
                }
            }
        }

        fn content(obj: &Json) -> Json {
            obj.get("data").cloned().unwrap_or_else(|| json!({}))
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]
            #[test]
            fn a_merge_patch_leaves_what_the_apply_would(
                first in data(),
                steps in prop::collection::vec(step(), 0..5),
                want in data(),
            ) {
                let mut live = run(None, &Step::Apply(first)).unwrap();
                for s in &steps {
                    if let Some(next) = run(Some(live.clone()), s) {
                        live = next;
                    }
                }
                let desired = doc(&want);
                if let Some(patch) = merge_patch_for(&live, &desired, ME) {
                    let merged = json_merge_patch(&live, &patch);
                    // What a host that only ever applied would hold: the
                    // desired entries, plus the live ones it does not own
                    // alone (through Apply or, here, its patches' Update).
                    let mut expected = want.clone();
                    for (k, v) in live["data"].as_object().cloned().unwrap_or_default() {
                        let ours = entries(&live, ME, Whose::Mine).any(|f| names(f, "data", &k));
                        if !want.contains_key(&k) && (!ours || co_owned(&live, ME, "data", &k)) {
                            expected.insert(k, v);
                        }
                    }
                    prop_assert_eq!(content(&merged), Json::Object(expected), "patch {}", patch);
                    // Where the host's own patches own nothing, that is
                    // exactly what the server's apply leaves.
                    let patched_before = live["metadata"]["managedFields"]
                        .as_array()
                        .is_some_and(|m| m.iter().any(|e| e["manager"] == ME && e["operation"] == "Update"));
                    if !patched_before {
                        let applied = server_side_apply(Some(&live), &desired, ME, true, &kind(), NOW).unwrap();
                        prop_assert_eq!(content(&merged), content(&applied), "patch {}", patch);
                    }
                }
            }

            #[test]
            fn one_changed_entry_of_an_applied_summary_is_a_patch(
                first in data().prop_filter("the apply claims entries", |d| !d.is_empty()),
                changed in key(),
                v in value(),
            ) {
                let live = run(None, &Step::Apply(first.clone())).unwrap();
                let mut want = first;
                want.insert(changed.clone(), Json::String(format!("{v}0")));
                let patch = merge_patch_for(&live, &doc(&want), ME);
                prop_assert_eq!(patch, Some(json!({"data": {changed: format!("{v}0")}})));
            }
        }
    }

    #[test]
    fn nothing_to_merge_is_no_patch() {
        let l = live(json!({"a": "1"}), &["a"], json!({}));
        assert_eq!(merge_patch_for(&l, &desired(json!({"a": "1"})), ME), None);
    }
}
