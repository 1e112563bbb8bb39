//! Structural-schema pruning of custom objects: which fields a CRD's schema
//! does not specify, and so the real server drops on write
//! (apiextensions-apiserver `pkg/apiserver/schema/pruning`). Everything
//! under `x-kubernetes-preserve-unknown-fields: true` is kept (specified
//! properties below it are still pruned), `additionalProperties` specify
//! every key, embedded resources keep `apiVersion`, `kind` and `metadata`.
//!
//! This module only *finds* the paths; `validation` removes them and tells
//! the client (warning or strict error), as for built-in kinds. It never
//! judges values.

use serde_json::Value;

use super::schema::flag;
use crate::rules::go_words::{Path, Seg};

/// The paths of `obj` that `schema` (a version's `openAPIV3Schema`) does
/// not specify, in depth-first order of sorted keys. The root's
/// `apiVersion`, `kind` and `metadata` are always known.
pub(crate) fn unknown_paths(obj: &Value, schema: &Value) -> Vec<Path> {
    let mut out = Vec::new();
    walk(obj, schema, true, &mut Vec::new(), &mut out);
    out
}

fn walk(v: &Value, s: &Value, object_meta: bool, path: &mut Path, out: &mut Vec<Path>) {
    if flag(s, "x-kubernetes-int-or-string") {
        return;
    }
    match v {
        Value::Object(map) => {
            let preserve = flag(s, "x-kubernetes-preserve-unknown-fields");
            let keeps_meta = object_meta || flag(s, "x-kubernetes-embedded-resource");
            let props = s.get("properties").and_then(Value::as_object);
            let additional = s.get("additionalProperties");
            for (k, child) in map {
                if keeps_meta && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                path.push(Seg::Key(k.clone()));
                match (props.and_then(|p| p.get(k)), additional) {
                    (Some(ps), _) => walk(child, ps, false, path, out),
                    (None, Some(a)) if a.is_object() => walk(child, a, false, path, out),
                    (None, Some(Value::Bool(true))) => {}
                    (None, _) if preserve => {}
                    (None, _) if !child.is_null() => out.push(path.clone()),
                    (None, _) => {}
                }
                path.pop();
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.get("items") {
                for (i, item) in items.iter().enumerate() {
                    path.push(Seg::Index(i));
                    walk(item, is, false, path, out);
                    path.pop();
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unspecified_fields_are_unknown_unless_preserved() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "limit": {"type": "integer"},
                "items": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "string"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {"fixed": {"type": "object"}}},
            }},
        }});
        let obj = json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "w"},
            "spec": {"limit": 1, "extra": true,
                "items": [{"n": "a", "junk": 1}],
                "labels": {"any": "thing"},
                "free": {"anything": 1, "fixed": {"gone": 1}}},
            "status": {}});
        let got: Vec<Path> = unknown_paths(&obj, &schema);
        let key = |s: &str| Seg::Key(s.into());
        assert_eq!(
            got,
            vec![
                vec![key("spec"), key("extra")],
                vec![key("spec"), key("free"), key("fixed"), key("gone")],
                vec![key("spec"), key("items"), Seg::Index(0), key("junk")],
                vec![key("status")],
            ]
        );
    }
}
