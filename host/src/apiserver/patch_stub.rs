//! Stand-in for the `patch` module (owned by another engineer) with the same
//! contract, so the server compiles until `patch/mod.rs` lands. It
//! implements JSON merge patch and JSON patch fully, strategic merge patch
//! as a merge patch that merges `name`-keyed lists, and server-side apply
//! without field ownership (no conflicts). Never used once `patch/` exists.

use serde_json::{Map, Value};

/// Group/version/kind of the patched object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectKind {
    /// API group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
}

/// A patch that cannot be applied.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PatchError {
    /// The patch document is malformed or an operation failed.
    #[error("{0}")]
    Invalid(String),
}

/// One field owned by another manager.
#[derive(Debug, Clone)]
pub struct FieldConflict {
    /// Manager owning the field.
    pub manager: String,
    /// Field path, e.g. `.data.key`.
    pub field: String,
}

/// Server-side apply failure.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApplyError {
    /// Fields owned by other managers would change.
    #[error("{message}")]
    Conflict {
        /// Each conflicting field.
        conflicts: Vec<FieldConflict>,
        /// Full message.
        message: String,
    },
    /// The applied configuration is invalid.
    #[error("{0}")]
    Invalid(String),
}

/// RFC 7386 JSON merge patch.
pub fn json_merge_patch(target: &Value, patch: &Value) -> Value {
    match patch {
        Value::Object(p) => {
            let mut out = match target {
                Value::Object(t) => t.clone(),
                _ => Map::new(),
            };
            for (k, v) in p {
                if v.is_null() {
                    out.remove(k);
                } else {
                    let merged = json_merge_patch(out.get(k).unwrap_or(&Value::Null), v);
                    out.insert(k.clone(), merged);
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn unescape(seg: &str) -> String {
    seg.replace("~1", "/").replace("~0", "~")
}

fn split_path(path: &str) -> Result<Vec<String>, PatchError> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let rest = path
        .strip_prefix('/')
        .ok_or_else(|| PatchError::Invalid(format!("invalid JSON pointer {path:?}")))?;
    Ok(rest.split('/').map(unescape).collect())
}

fn parent_mut<'a>(doc: &'a mut Value, segs: &[String]) -> Result<&'a mut Value, PatchError> {
    let mut cur = doc;
    for s in segs {
        cur = match cur {
            Value::Object(m) => m
                .get_mut(s)
                .ok_or_else(|| PatchError::Invalid(format!("missing path segment {s:?}")))?,
            Value::Array(a) => {
                let i: usize = s
                    .parse()
                    .map_err(|_| PatchError::Invalid(format!("bad index {s:?}")))?;
                a.get_mut(i)
                    .ok_or_else(|| PatchError::Invalid(format!("index {i} out of range")))?
            }
            _ => return Err(PatchError::Invalid(format!("cannot descend into {s:?}"))),
        };
    }
    Ok(cur)
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), PatchError> {
    let segs = split_path(path)?;
    let Some((last, parents)) = segs.split_last() else {
        *doc = value;
        return Ok(());
    };
    match parent_mut(doc, parents)? {
        Value::Object(m) => {
            m.insert(last.clone(), value);
        }
        Value::Array(a) => {
            if last == "-" {
                a.push(value);
            } else {
                let i: usize = last
                    .parse()
                    .map_err(|_| PatchError::Invalid(format!("bad index {last:?}")))?;
                if i > a.len() {
                    return Err(PatchError::Invalid(format!("index {i} out of range")));
                }
                a.insert(i, value);
            }
        }
        _ => return Err(PatchError::Invalid(format!("cannot add at {path:?}"))),
    }
    Ok(())
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, PatchError> {
    let segs = split_path(path)?;
    let (last, parents) = segs
        .split_last()
        .ok_or_else(|| PatchError::Invalid("cannot remove the root".into()))?;
    match parent_mut(doc, parents)? {
        Value::Object(m) => m
            .remove(last)
            .ok_or_else(|| PatchError::Invalid(format!("path {path:?} does not exist"))),
        Value::Array(a) => {
            let i: usize = last
                .parse()
                .map_err(|_| PatchError::Invalid(format!("bad index {last:?}")))?;
            if i >= a.len() {
                return Err(PatchError::Invalid(format!("index {i} out of range")));
            }
            Ok(a.remove(i))
        }
        _ => Err(PatchError::Invalid(format!("cannot remove {path:?}"))),
    }
}

/// RFC 6902 JSON patch.
pub fn json_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    let ops = patch
        .as_array()
        .ok_or_else(|| PatchError::Invalid("a JSON patch must be an array".into()))?;
    let mut doc = target.clone();
    for op in ops {
        let kind = op.get("op").and_then(Value::as_str).unwrap_or_default();
        let path = op.get("path").and_then(Value::as_str).unwrap_or_default();
        let value = || {
            op.get("value")
                .cloned()
                .ok_or_else(|| PatchError::Invalid(format!("operation {kind} needs a value")))
        };
        match kind {
            "add" => add(&mut doc, path, value()?)?,
            "remove" => {
                remove(&mut doc, path)?;
            }
            "replace" => {
                remove(&mut doc, path)?;
                add(&mut doc, path, value()?)?;
            }
            "test" => {
                let segs = split_path(path)?;
                if *parent_mut(&mut doc, &segs)? != value()? {
                    return Err(PatchError::Invalid(format!("test failed at {path:?}")));
                }
            }
            "move" | "copy" => {
                let from = op.get("from").and_then(Value::as_str).unwrap_or_default();
                let v = if kind == "move" {
                    remove(&mut doc, from)?
                } else {
                    parent_mut(&mut doc, &split_path(from)?)?.clone()
                };
                add(&mut doc, path, v)?;
            }
            other => return Err(PatchError::Invalid(format!("unknown op {other:?}"))),
        }
    }
    Ok(doc)
}

fn strategic(target: &Value, patch: &Value) -> Value {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            let mut out = t.clone();
            for (k, v) in p {
                if k.starts_with("$setElementOrder") || k == "$retainKeys" {
                    continue;
                }
                if v.is_null() {
                    out.remove(k);
                } else if let Some(cur) = out.get(k) {
                    let merged = strategic(cur, v);
                    out.insert(k.clone(), merged);
                } else {
                    out.insert(k.clone(), strategic(&Value::Null, v));
                }
            }
            Value::Object(out)
        }
        (Value::Array(t), Value::Array(p))
            if p.iter().all(|e| e.get("name").is_some()) && !p.is_empty() =>
        {
            let mut out = t.clone();
            for e in p {
                let name = e.get("name");
                match out.iter_mut().find(|x| x.get("name") == name) {
                    Some(existing) => *existing = strategic(existing, e),
                    None => out.push(e.clone()),
                }
            }
            Value::Array(out)
        }
        (_, Value::Object(p)) => strategic(&Value::Object(Map::new()), &Value::Object(p.clone())),
        (_, other) => other.clone(),
    }
}

/// Strategic merge patch (stub: merge patch with `name`-keyed list merging).
pub fn strategic_merge_patch(
    target: &Value,
    patch: &Value,
    _kind: &ObjectKind,
) -> Result<Value, PatchError> {
    if !patch.is_object() {
        return Err(PatchError::Invalid(
            "a strategic merge patch must be a JSON object".into(),
        ));
    }
    Ok(strategic(target, patch))
}

/// Server-side apply (stub: merges the configuration, records an Apply entry, never conflicts).
pub fn server_side_apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    _force: bool,
    _kind: &ObjectKind,
    now: &str,
) -> Result<Value, ApplyError> {
    let base = live.cloned().unwrap_or_else(|| Value::Object(Map::new()));
    let mut out = strategic(&base, applied);
    set_entry(&mut out, manager, "Apply", None, now);
    Ok(out)
}

fn set_entry(obj: &mut Value, manager: &str, operation: &str, sub: Option<&str>, now: &str) {
    let api_version = obj.get("apiVersion").cloned().unwrap_or(Value::Null);
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let entries = meta
        .entry("managedFields")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !entries.is_array() {
        *entries = Value::Array(Vec::new());
    }
    if let Value::Array(list) = entries {
        list.retain(|e| {
            !(e.get("manager").and_then(Value::as_str) == Some(manager)
                && e.get("operation").and_then(Value::as_str) == Some(operation)
                && e.get("subresource").and_then(Value::as_str) == sub)
        });
        let mut e = serde_json::json!({
            "manager": manager,
            "operation": operation,
            "apiVersion": api_version,
            "time": now,
            "fieldsType": "FieldsV1",
            "fieldsV1": {},
        });
        if let Some(s) = sub {
            e["subresource"] = Value::String(s.into());
        }
        list.push(e);
    }
}

/// Records an Update managedFields entry for `manager` (stub: without field sets).
pub fn record_update(
    _old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    operation: &str,
    subresource: Option<&str>,
    now: &str,
) {
    set_entry(new, manager, operation, subresource, now);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_removes_nulls() {
        let out = json_merge_patch(
            &json!({"a": 1, "b": {"c": 2}}),
            &json!({"a": null, "b": {"d": 3}}),
        );
        assert_eq!(out, json!({"b": {"c": 2, "d": 3}}));
    }

    #[test]
    fn json_patch_adds_and_tests() {
        let out = json_patch(
            &json!({"a": [1]}),
            &json!([{"op": "add", "path": "/a/-", "value": 2}, {"op": "test", "path": "/a/1", "value": 2}]),
        )
        .unwrap();
        assert_eq!(out, json!({"a": [1, 2]}));
    }
}
