//! A custom resource's schema: finding the `openAPIV3Schema` of the version
//! being served, and refusing a CRD whose schemas are not structural, with
//! the real server's field paths and messages
//! (apiextensions-apiserver `pkg/apis/apiextensions/validation` and
//! `pkg/apiserver/schema/validation.go`). It reads schemas; it never looks
//! at a custom object.

use serde_json::Value;

use crate::storage::registry::ResourceInfo;
use crate::storage::store::Store;

/// Storage key of CustomResourceDefinitions.
const CRDS: &str = "customresourcedefinitions.apiextensions.k8s.io";

/// The `openAPIV3Schema` the CRD of `info` declares for `info.version`, if any.
pub(crate) fn version_schema(store: &Store, info: &ResourceInfo) -> Option<Value> {
    let key = (String::new(), format!("{}.{}", info.plural, info.group));
    let crd = store.get(CRDS, &key)?.value();
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v["name"] == info.version.as_str())?
        .pointer("/schema/openAPIV3Schema")
        .cloned()
}

/// True if `schema` sets the boolean extension `key`.
pub(crate) fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

/// The `(field, message)` errors that make a CRD's version schemas
/// unacceptable: a missing schema ("schemas are required") and every
/// place where the schema is not structural.
pub(crate) fn structural_errors(crd: &Value) -> Vec<(String, String)> {
    let mut errs = Vec::new();
    let Some(versions) = crd.pointer("/spec/versions").and_then(Value::as_array) else {
        return errs;
    };
    for (i, v) in versions.iter().enumerate() {
        let path = format!("spec.versions[{i}].schema.openAPIV3Schema");
        match v.pointer("/schema/openAPIV3Schema") {
            Some(s) if s.is_object() => walk(s, &path, Level::Root, &mut errs),
            _ => errs.push((path, "Required value: schemas are required".into())),
        }
    }
    errs
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Nested,
}

/// `validateStructuralInvariants`: every specified node has a type (unless
/// int-or-string, embedded or preserving unknown fields), arrays have
/// `items`, the root is an object.
fn walk(s: &Value, path: &str, level: Level, errs: &mut Vec<(String, String)>) {
    let ty = s.get("type").and_then(Value::as_str).unwrap_or_default();
    let untyped_ok = flag(s, "x-kubernetes-int-or-string")
        || flag(s, "x-kubernetes-embedded-resource")
        || flag(s, "x-kubernetes-preserve-unknown-fields");
    if ty.is_empty() && !untyped_ok {
        errs.push((
            format!("{path}.type"),
            "Required value: must not be empty for specified object fields".into(),
        ));
    }
    if level == Level::Root && !ty.is_empty() && ty != "object" {
        errs.push((
            format!("{path}.type"),
            format!(
                "Invalid value: {}: must be object at the root",
                serde_json::json!(ty)
            ),
        ));
    }
    if ty == "array" && s.get("items").is_none() {
        errs.push((
            format!("{path}.items"),
            "Required value: must be specified".into(),
        ));
    }
    if let Some(items) = s.get("items").filter(|i| i.is_object()) {
        walk(items, &format!("{path}.items"), Level::Nested, errs);
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        for (k, p) in props {
            walk(p, &format!("{path}.properties[{k}]"), Level::Nested, errs);
        }
    }
    if let Some(ap) = s.get("additionalProperties").filter(|a| a.is_object()) {
        walk(
            ap,
            &format!("{path}.additionalProperties"),
            Level::Nested,
            errs,
        );
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(schema: Value) -> Value {
        json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": schema}}]}})
    }

    #[test]
    fn untyped_fields_and_arrays_without_items_are_not_structural() {
        let errs = structural_errors(&crd(json!({"type": "object", "properties": {
            "spec": {"properties": {"list": {"type": "array"}}},
            "free": {"x-kubernetes-preserve-unknown-fields": true},
        }})));
        assert_eq!(
            errs,
            vec![
                (
                    "spec.versions[0].schema.openAPIV3Schema.properties[spec].type".to_string(),
                    "Required value: must not be empty for specified object fields".to_string()
                ),
                (
                    "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[list].items"
                        .to_string(),
                    "Required value: must be specified".to_string()
                ),
            ]
        );
        let errs = structural_errors(&json!({"spec": {"versions": [{"name": "v1"}]}}));
        assert_eq!(errs[0].1, "Required value: schemas are required");
    }
}
