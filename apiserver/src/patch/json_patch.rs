//! JSON patch (RFC 6902) over JSON pointers (RFC 6901): `add`, `remove`,
//! `replace`, `move`, `copy`, `test`, applied atomically in order.
//! It never knows the object's kind and never returns a half-patched
//! document: the first failing operation fails the whole patch.

use serde_json::Value;

use super::error::{PatchError, Result};

/// Applies an RFC 6902 JSON patch (an array of operation objects) to
/// `target`.
///
/// Operations apply in order to a copy; the first failing operation aborts
/// the whole patch and `target` is never half-patched. Errors name the
/// operation (with its index) and the pointer that failed. Pointers use RFC
/// 6901 escaping (`~1` is `/`, `~0` is `~`); `-` as the last array token
/// appends on `add`.
///
/// # Errors
///
/// [`PatchError::InvalidPatch`] for a malformed patch document,
/// [`PatchError::InvalidPointer`] for a malformed pointer,
/// [`PatchError::OperationFailed`] when an operation does not apply and
/// [`PatchError::TestFailed`] when a `test` finds another value.
pub fn json_patch(target: &Value, patch: &Value) -> Result<Value> {
    let Value::Array(ops) = patch else {
        return Err(PatchError::InvalidPatch(
            "a JSON patch must be an array of operations".into(),
        ));
    };
    let mut doc = target.clone();
    for (index, op) in ops.iter().enumerate() {
        apply_op(&mut doc, op, index)?;
    }
    Ok(doc)
}

fn apply_op(doc: &mut Value, op: &Value, index: usize) -> Result<()> {
    let Value::Object(obj) = op else {
        return Err(PatchError::InvalidPatch(format!(
            "operation {index} is not an object"
        )));
    };
    let name = obj.get("op").and_then(Value::as_str).ok_or_else(|| {
        PatchError::InvalidPatch(format!("operation {index} has no string \"op\" member"))
    })?;
    let label = format!("{name} (op {index})");
    let member = |key: &str| -> Result<String> {
        obj.get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| {
                PatchError::InvalidPatch(format!("{label}: missing string \"{key}\" member"))
            })
    };
    let path = member("path")?;
    let value = || -> Result<Value> {
        obj.get("value").cloned().ok_or_else(|| {
            PatchError::InvalidPatch(format!("{label}: missing \"value\" member (path {path:?})"))
        })
    };
    let tokens = parse_pointer(&path)?;
    match name {
        "add" => add(doc, &tokens, value()?).map_err(|r| failed(&label, &path, r)),
        "remove" => remove(doc, &tokens)
            .map(drop)
            .map_err(|r| failed(&label, &path, r)),
        "replace" => {
            let v = value()?;
            let slot = get_mut(doc, &tokens).map_err(|r| failed(&label, &path, r))?;
            *slot = v;
            Ok(())
        }
        "move" => {
            let from = member("from")?;
            let from_tokens = parse_pointer(&from)?;
            if tokens.len() > from_tokens.len() && tokens[..from_tokens.len()] == from_tokens[..] {
                return Err(failed(
                    &label,
                    &path,
                    format!("cannot move {from:?} into one of its own children"),
                ));
            }
            let moved = remove(doc, &from_tokens)
                .map_err(|r| failed(&label, &from, format!("from: {r}")))?;
            add(doc, &tokens, moved).map_err(|r| failed(&label, &path, r))
        }
        "copy" => {
            let from = member("from")?;
            let from_tokens = parse_pointer(&from)?;
            let copied = get(doc, &from_tokens)
                .map_err(|r| failed(&label, &from, format!("from: {r}")))?
                .clone();
            add(doc, &tokens, copied).map_err(|r| failed(&label, &path, r))
        }
        "test" => {
            let want = value()?;
            let got = test_target(doc, &tokens).map_err(|reason| PatchError::TestFailed {
                path: path.clone(),
                reason,
            })?;
            let got = got.unwrap_or(&Value::Null);
            if *got == want {
                Ok(())
            } else {
                Err(PatchError::TestFailed {
                    path: path.clone(),
                    reason: format!("expected {want}, found {got}"),
                })
            }
        }
        other => Err(PatchError::InvalidPatch(format!(
            "operation {index}: unknown op {other:?} (path {path:?})"
        ))),
    }
}

fn failed(label: &str, path: &str, reason: String) -> PatchError {
    PatchError::OperationFailed {
        op: label.to_owned(),
        path: path.to_owned(),
        reason,
    }
}

/// Splits an RFC 6901 pointer into unescaped reference tokens.
fn parse_pointer(pointer: &str) -> Result<Vec<String>> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(PatchError::InvalidPointer {
            pointer: pointer.to_owned(),
            reason: "must be empty or start with '/'".into(),
        });
    };
    rest.split('/')
        .map(|raw| {
            let mut out = String::with_capacity(raw.len());
            let mut chars = raw.chars();
            while let Some(c) = chars.next() {
                if c == '~' {
                    match chars.next() {
                        Some('0') => out.push('~'),
                        Some('1') => out.push('/'),
                        _ => {
                            return Err(PatchError::InvalidPointer {
                                pointer: pointer.to_owned(),
                                reason: format!(
                                "bad escape in token {raw:?}: '~' must be followed by '0' or '1'"
                            ),
                            })
                        }
                    }
                } else {
                    out.push(c);
                }
            }
            Ok(out)
        })
        .collect()
}

/// Parses an array index token: digits only, no leading zeros.
fn array_index(token: &str, len: usize, allow_end: bool) -> std::result::Result<usize, String> {
    if token == "-" {
        return if allow_end {
            Ok(len)
        } else {
            Err("\"-\" refers to a nonexistent array element".into())
        };
    }
    let valid = !token.is_empty()
        && token.bytes().all(|b| b.is_ascii_digit())
        && (token == "0" || !token.starts_with('0'));
    if !valid {
        return Err(format!("{token:?} is not a valid array index"));
    }
    let index: usize = token
        .parse()
        .map_err(|_| format!("{token:?} is not a valid array index"))?;
    let limit = if allow_end {
        len
    } else {
        len.saturating_sub(1)
    };
    if index > limit || (!allow_end && len == 0) {
        return Err(format!(
            "index {index} is out of range (array length {len})"
        ));
    }
    Ok(index)
}

fn get<'a>(doc: &'a Value, tokens: &[String]) -> std::result::Result<&'a Value, String> {
    let mut cur = doc;
    for token in tokens {
        cur = match cur {
            Value::Object(m) => m
                .get(token)
                .ok_or_else(|| format!("missing key {token:?}"))?,
            Value::Array(a) => {
                let i = array_index(token, a.len(), false)?;
                &a[i]
            }
            _ => return Err(format!("cannot descend into a scalar at token {token:?}")),
        };
    }
    Ok(cur)
}

/// The value a `test` operation compares against, as the real server's JSON
/// patch library (evanphx/json-patch, used by apimachinery) resolves it: a
/// key missing from an existing object reads as `None` (compared as `null`),
/// while a missing parent, an out-of-range array index or a scalar parent is
/// an error. kube-runtime's finalizer helper relies on the missing-key rule
/// (`test /metadata/finalizers == null` before adding the first finalizer).
fn test_target<'a>(
    doc: &'a Value,
    tokens: &[String],
) -> std::result::Result<Option<&'a Value>, String> {
    let Some((last, parent)) = tokens.split_last() else {
        return Ok(Some(doc));
    };
    match get(doc, parent).map_err(|r| format!("parent: {r}"))? {
        Value::Object(m) => Ok(m.get(last)),
        Value::Array(a) => Ok(Some(&a[array_index(last, a.len(), false)?])),
        _ => Err("parent is not an object or array".into()),
    }
}

fn get_mut<'a>(
    doc: &'a mut Value,
    tokens: &[String],
) -> std::result::Result<&'a mut Value, String> {
    let mut cur = doc;
    for token in tokens {
        cur = match cur {
            Value::Object(m) => m
                .get_mut(token)
                .ok_or_else(|| format!("missing key {token:?}"))?,
            Value::Array(a) => {
                let i = array_index(token, a.len(), false)?;
                &mut a[i]
            }
            _ => return Err(format!("cannot descend into a scalar at token {token:?}")),
        };
    }
    Ok(cur)
}

fn add(doc: &mut Value, tokens: &[String], value: Value) -> std::result::Result<(), String> {
    let Some((last, parent)) = tokens.split_last() else {
        *doc = value;
        return Ok(());
    };
    match get_mut(doc, parent).map_err(|r| format!("parent: {r}"))? {
        Value::Object(m) => {
            m.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(a) => {
            let i = array_index(last, a.len(), true)?;
            a.insert(i, value);
            Ok(())
        }
        _ => Err("parent is not an object or array".into()),
    }
}

fn remove(doc: &mut Value, tokens: &[String]) -> std::result::Result<Value, String> {
    let Some((last, parent)) = tokens.split_last() else {
        return Err("cannot remove the whole document".into());
    };
    match get_mut(doc, parent).map_err(|r| format!("parent: {r}"))? {
        Value::Object(m) => m
            .remove(last)
            .ok_or_else(|| format!("missing key {last:?}")),
        Value::Array(a) => {
            let i = array_index(last, a.len(), false)?;
            Ok(a.remove(i))
        }
        _ => Err("parent is not an object or array".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Cases from RFC 6902 appendix A that must succeed.
    #[test]
    fn json_patch_applies_rfc6902_examples() {
        let cases = [
            (
                json!({"foo":"bar"}),
                json!([{"op":"add","path":"/baz","value":"qux"}]),
                json!({"baz":"qux","foo":"bar"}),
            ),
            (
                json!({"foo":["bar","baz"]}),
                json!([{"op":"add","path":"/foo/1","value":"qux"}]),
                json!({"foo":["bar","qux","baz"]}),
            ),
            (
                json!({"baz":"qux","foo":"bar"}),
                json!([{"op":"remove","path":"/baz"}]),
                json!({"foo":"bar"}),
            ),
            (
                json!({"foo":["bar","qux","baz"]}),
                json!([{"op":"remove","path":"/foo/1"}]),
                json!({"foo":["bar","baz"]}),
            ),
            (
                json!({"baz":"qux","foo":"bar"}),
                json!([{"op":"replace","path":"/baz","value":"boo"}]),
                json!({"baz":"boo","foo":"bar"}),
            ),
            (
                json!({"foo":{"bar":"baz","waldo":"fred"},"qux":{"corge":"grault"}}),
                json!([{"op":"move","from":"/foo/waldo","path":"/qux/thud"}]),
                json!({"foo":{"bar":"baz"},"qux":{"corge":"grault","thud":"fred"}}),
            ),
            (
                json!({"foo":["all","grass","cows","eat"]}),
                json!([{"op":"move","from":"/foo/1","path":"/foo/3"}]),
                json!({"foo":["all","cows","eat","grass"]}),
            ),
            (
                json!({"baz":"qux","foo":["a",2,"c"]}),
                json!([{"op":"test","path":"/baz","value":"qux"},{"op":"test","path":"/foo/1","value":2}]),
                json!({"baz":"qux","foo":["a",2,"c"]}),
            ),
            (
                json!({"foo":"bar"}),
                json!([{"op":"add","path":"/child","value":{"grandchild":{}}}]),
                json!({"foo":"bar","child":{"grandchild":{}}}),
            ),
            (
                json!({"foo":["bar"]}),
                json!([{"op":"add","path":"/foo/-","value":["abc","def"]}]),
                json!({"foo":["bar",["abc","def"]]}),
            ),
            (
                json!({"/":9,"~1":10}),
                json!([{"op":"test","path":"/~01","value":10}]),
                json!({"/":9,"~1":10}),
            ),
            (
                json!({"a":{"b":1}}),
                json!([{"op":"copy","from":"/a","path":"/c"}]),
                json!({"a":{"b":1},"c":{"b":1}}),
            ),
            (
                json!({"a":1}),
                json!([{"op":"add","path":"","value":[1]}]),
                json!([1]),
            ),
        ];
        for (target, patch, want) in cases {
            assert_eq!(json_patch(&target, &patch), Ok(want), "patch {patch}");
        }
    }

    #[test]
    fn json_patch_escapes_slash_and_tilde_in_annotation_keys() {
        let obj = json!({"metadata":{"annotations":{"example.com/a~b":"1"}}});
        let got = json_patch(
            &obj,
            &json!([
                {"op":"replace","path":"/metadata/annotations/example.com~1a~0b","value":"2"},
                {"op":"add","path":"/metadata/labels","value":{}},
                {"op":"add","path":"/metadata/labels/app.kubernetes.io~1name","value":"x"}
            ]),
        );
        assert_eq!(
            got,
            Ok(
                json!({"metadata":{"annotations":{"example.com/a~b":"2"},"labels":{"app.kubernetes.io/name":"x"}}})
            )
        );
    }

    #[test]
    fn json_patch_errors_name_failing_op_and_path() {
        let doc = json!({"foo":"bar","arr":[1]});
        let cases: [(Value, &str); 9] = [
            (json!([{"op":"remove","path":"/nope"}]), "remove (op 0)"),
            (
                json!([{"op":"replace","path":"/nope","value":1}]),
                "replace (op 0)",
            ),
            (json!([{"op":"add","path":"/a/b","value":1}]), "add (op 0)"),
            (
                json!([{"op":"add","path":"/arr/5","value":1}]),
                "add (op 0)",
            ),
            (
                json!([{"op":"add","path":"/arr/01","value":1}]),
                "add (op 0)",
            ),
            (json!([{"op":"test","path":"/foo","value":"x"}]), "/foo"),
            (
                json!([{"op":"test","path":"/foo","value":"bar"},{"op":"move","from":"/arr","path":"/arr/0"}]),
                "move (op 1)",
            ),
            (
                json!([{"op":"copy","from":"/missing","path":"/x"}]),
                "/missing",
            ),
            (json!([{"op":"frob","path":"/foo"}]), "frob"),
        ];
        for (patch, needle) in cases {
            let err = json_patch(&doc, &patch).expect_err("patch must fail");
            assert!(
                err.to_string().contains(needle),
                "{err} should mention {needle}"
            );
        }
    }

    #[test]
    fn json_patch_rejects_malformed_documents_and_pointers() {
        let doc = json!({"a":1});
        for patch in [
            json!({"op":"add"}),
            json!([1]),
            json!([{"path":"/a"}]),
            json!([{"op":"add","path":"/b"}]),
            json!([{"op":"add","path":"b","value":1}]),
            json!([{"op":"add","path":"/~2","value":1}]),
            json!([{"op":"move","path":"/b"}]),
        ] {
            assert!(
                json_patch(&doc, &patch).is_err(),
                "{patch} must be rejected"
            );
        }
    }

    #[test]
    fn json_patch_failure_leaves_no_partial_result() {
        let doc = json!({"a":1});
        let patch = json!([{"op":"add","path":"/b","value":2},{"op":"remove","path":"/zzz"}]);
        assert!(json_patch(&doc, &patch).is_err());
        assert_eq!(doc, json!({"a":1}));
    }

    /// kube-runtime's finalizer helper sends `test /metadata/finalizers ==
    /// null` on an object without finalizers; evanphx/json-patch reads the
    /// missing key as null, so the real server accepts it.
    #[test]
    fn json_patch_test_treats_missing_key_under_existing_parent_as_null() {
        let obj = json!({"metadata":{"name":"a"}});
        let got = json_patch(
            &obj,
            &json!([
                {"op":"test","path":"/metadata/finalizers","value":null},
                {"op":"add","path":"/metadata/finalizers","value":["x"]}
            ]),
        );
        assert_eq!(got, Ok(json!({"metadata":{"name":"a","finalizers":["x"]}})));
        // An explicit null also matches; a missing key never matches a value.
        let explicit = json!({"metadata":{"finalizers":null}});
        let null_test = json!([{"op":"test","path":"/metadata/finalizers","value":null}]);
        assert_eq!(json_patch(&explicit, &null_test), Ok(explicit.clone()));
        for (doc, patch) in [
            (
                obj.clone(),
                json!([{"op":"test","path":"/metadata/finalizers","value":[]}]),
            ),
            // The parent must exist ...
            (
                obj.clone(),
                json!([{"op":"test","path":"/spec/finalizers","value":null}]),
            ),
            // ... array indices are not keys ...
            (
                json!({"a":[1]}),
                json!([{"op":"test","path":"/a/3","value":null}]),
            ),
            // ... and a present value is not null.
            (json!({"metadata":{"finalizers":["x"]}}), null_test.clone()),
        ] {
            assert!(
                matches!(json_patch(&doc, &patch), Err(PatchError::TestFailed { .. })),
                "{patch} on {doc} must fail its test"
            );
        }
    }

    #[test]
    fn json_patch_remove_last_finalizer_by_index() {
        let obj = json!({"metadata":{"finalizers":["a","b"]}});
        let got = json_patch(
            &obj,
            &json!([{"op":"test","path":"/metadata/finalizers/1","value":"b"},{"op":"remove","path":"/metadata/finalizers/1"}]),
        );
        assert_eq!(got, Ok(json!({"metadata":{"finalizers":["a"]}})));
    }
}
