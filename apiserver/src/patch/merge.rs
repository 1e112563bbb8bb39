//! JSON merge patch (RFC 7386): objects merge key by key, `null` deletes a
//! key, everything else (arrays included) replaces.
//! It never looks at list types, merge keys or the object's kind (that is
//! strategic merge patch) and never fails.

use serde_json::{Map, Value};

/// Applies an RFC 7386 JSON merge patch to `target` and returns the result.
///
/// A non-object patch replaces the target; an object patch turns a
/// non-object target into an object first; `null` members delete keys;
/// arrays are replaced, never merged. Never fails.
#[must_use]
pub fn json_merge_patch(target: &Value, patch: &Value) -> Value {
    if !patch.is_object() {
        return patch.clone();
    }
    let mut out = target.clone();
    merge_into(&mut out, patch);
    out
}

/// [`json_merge_patch`] of `target` in place (each value is copied at
/// most once, not once per level).
fn merge_into(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(out) = target else {
        return;
    };
    for (key, value) in patch_map {
        if value.is_null() {
            out.remove(key);
        } else {
            match out.get_mut(key) {
                Some(slot) => merge_into(slot, value),
                None => {
                    let mut slot = Value::Null;
                    merge_into(&mut slot, value);
                    out.insert(key.clone(), slot);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The examples of RFC 7386 appendix A, verbatim.
    #[test]
    fn merge_patch_matches_rfc7386_appendix_a() {
        let cases = [
            (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
            (json!({"a":"b"}), json!({"a":null}), json!({})),
            (
                json!({"a":"b","b":"c"}),
                json!({"a":null}),
                json!({"b":"c"}),
            ),
            (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
            (
                json!({"a":{"b":"c"}}),
                json!({"a":{"b":"d","c":null}}),
                json!({"a":{"b":"d"}}),
            ),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a":"b"}), json!(["c"]), json!(["c"])),
            (json!({"a":"foo"}), json!(null), json!(null)),
            (json!({"a":"foo"}), json!("bar"), json!("bar")),
            (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
            (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
            (
                json!({}),
                json!({"a":{"bb":{"ccc":null}}}),
                json!({"a":{"bb":{}}}),
            ),
        ];
        for (target, patch, want) in cases {
            assert_eq!(json_merge_patch(&target, &patch), want, "patch {patch}");
        }
    }

    #[test]
    fn merge_patch_deletes_configmap_key_and_keeps_others() {
        let cm = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","labels":{"a":"1","b":"2"}},"data":{"k":"v","j":"w"}});
        let got = json_merge_patch(
            &cm,
            &json!({"metadata":{"labels":{"a":null}},"data":{"k":null,"n":"new"}}),
        );
        assert_eq!(
            got,
            json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","labels":{"b":"2"}},"data":{"j":"w","n":"new"}})
        );
    }

    #[test]
    fn merge_patch_replaces_lists_wholesale() {
        let pod =
            json!({"spec":{"containers":[{"name":"a","image":"1"},{"name":"b","image":"2"}]}});
        let got = json_merge_patch(
            &pod,
            &json!({"spec":{"containers":[{"name":"a","image":"3"}]}}),
        );
        assert_eq!(
            got,
            json!({"spec":{"containers":[{"name":"a","image":"3"}]}})
        );
    }
}
