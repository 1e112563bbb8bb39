//! Defaulting of custom objects from their CRD's structural schema, as the
//! real server does on every write (apiextensions-apiserver
//! `pkg/apiserver/schema/defaulting`): a missing property with a `default`
//! gets it (and the defaults below it), and a `null` where the schema is not
//! `nullable` is replaced by the default or, without one, dropped
//! (`PruneNonNullableNullsWithoutDefaults`). It never validates.

use serde_json::Value;

/// Applies `schema`'s defaults to `obj` in place.
pub(crate) fn apply(obj: &mut Value, schema: &Value) {
    match obj {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, ps) in props {
                    let nullable = ps.get("nullable").and_then(Value::as_bool) == Some(true);
                    match (map.get(k), ps.get("default")) {
                        (None, Some(d)) => {
                            map.insert(k.clone(), d.clone());
                        }
                        (Some(Value::Null), Some(d)) if !nullable => {
                            map.insert(k.clone(), d.clone());
                        }
                        (Some(Value::Null), None) if !nullable => {
                            map.remove(k);
                        }
                        _ => {}
                    }
                    if let Some(child) = map.get_mut(k) {
                        apply(child, ps);
                    }
                }
            }
            if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                let known = schema.get("properties").and_then(Value::as_object);
                for (k, child) in map.iter_mut() {
                    if known.is_none_or(|p| !p.contains_key(k)) {
                        apply(child, ap);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = schema.get("items") {
                for item in items {
                    apply(item, is);
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
    fn missing_and_null_fields_take_defaults_and_other_nulls_go() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "default": {}, "properties": {
            "replicas": {"type": "integer", "default": 1},
            "mode": {"type": "string", "default": "fast"},
            "note": {"type": "string"},
            "keep": {"type": "string", "nullable": true},
            "ports": {"type": "array", "items": {"type": "object",
                "properties": {"proto": {"type": "string", "default": "TCP"}}}},
        }}}});
        let mut obj = json!({"spec": {"mode": null, "note": null, "keep": null, "ports": [{}]}});
        apply(&mut obj, &schema);
        assert_eq!(
            obj,
            json!({"spec": {"replicas": 1, "mode": "fast", "keep": null, "ports": [{"proto": "TCP"}]}})
        );
        let mut empty = json!({});
        apply(&mut empty, &schema);
        assert_eq!(empty, json!({"spec": {"replicas": 1, "mode": "fast"}}));
    }
}
