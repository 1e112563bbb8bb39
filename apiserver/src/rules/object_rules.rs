//! Validation every write of an object gets after decoding: the label and
//! annotation rules of its metadata, and the size limits of ConfigMap and
//! Secret data, as `field.ErrorList` entries of a 422.
//!
//! Sources: apimachinery `pkg/api/validation/objectmeta.go`
//! (`ValidateObjectMetaAccessor` → `ValidateLabels`, `ValidateAnnotations`:
//! keys are qualified names, annotation keys compared lower-cased, keys
//! plus values at most `TotalAnnotationSizeLimitB` = 256 KiB),
//! `pkg/apis/meta/v1/validation/validation.go` (`ValidateLabels`),
//! kubernetes `pkg/apis/core/validation/validation.go` (`ValidateConfigMap`:
//! `data` plus `binaryData` at most `MaxSecretSize` = 1 MiB, reported on
//! the root path `[]`; `ValidateSecret`: `data` at most 1 MiB, with
//! `stringData` merged into it first as the conversion does), and
//! `field.TooLong` (`pkg/util/validation/field/errors.go`), whose 1.32
//! wording is "may not be more than N bytes" (e.g. k3s v1.32.3 in
//! open-telemetry/opentelemetry-demo#2166: `metadata.annotations: Too long:
//! may not be more than 262144 bytes`). Go reports map problems in map
//! order, which is random; here keys are taken sorted.
//!
//! This module owns those rules and their wording; it never decides the
//! HTTP error around them (the write handlers do), never checks names (see
//! `objects::validate_name`) and looks at no other field itself: the spec
//! rules of Services and Deployments are `spec_rules`'.

use base64::Engine as _;
use serde_json::{Map, Value};
use wasmctrl_kube_rules::names::{label_value_errors, qualified_name_errors};

use crate::rules::go_words::go_quote;
use crate::storage::registry::ResourceInfo;

/// `TotalAnnotationSizeLimitB`.
const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;
/// `core.MaxSecretSize`, also the ConfigMap limit.
const DATA_MAX_BYTES: usize = 1024 * 1024;

/// The problems of `obj` (a write of `info`'s kind) as (field, message)
/// pairs, metadata first as in Go's error lists; empty when it is valid.
pub(crate) fn validate(info: &ResourceInfo, obj: &Value) -> Vec<(String, String)> {
    let mut errs = Vec::new();
    let meta = obj.get("metadata");
    if let Some(labels) = meta
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
    {
        labels_errors(labels, &mut errs);
    }
    if let Some(annotations) = meta
        .and_then(|m| m.get("annotations"))
        .and_then(Value::as_object)
    {
        annotations_errors(annotations, &mut errs);
    }
    if info.group.is_empty() && info.version == "v1" {
        match info.kind.as_str() {
            "ConfigMap" => {
                let size = text_bytes(obj.get("data")) + decoded_bytes(obj.get("binaryData"));
                if size > DATA_MAX_BYTES {
                    // field.NewPath("") prints as "[]"
                    errs.push(("[]".into(), too_long(DATA_MAX_BYTES)));
                }
            }
            "Secret" if secret_bytes(obj) > DATA_MAX_BYTES => {
                errs.push(("data".into(), too_long(DATA_MAX_BYTES)));
            }
            _ => {}
        }
    }
    errs.extend(super::spec_rules::validate(info, obj));
    errs
}

fn too_long(max: usize) -> String {
    format!("Too long: may not be more than {max} bytes")
}

fn labels_errors(labels: &Map<String, Value>, errs: &mut Vec<(String, String)>) {
    let mut keys: Vec<&String> = labels.keys().collect();
    keys.sort();
    for k in keys {
        for msg in qualified_name_errors(k) {
            errs.push(("metadata.labels".into(), invalid(k, &msg)));
        }
        if let Some(v) = labels.get(k).and_then(Value::as_str) {
            for msg in label_value_errors(v) {
                errs.push(("metadata.labels".into(), invalid(v, &msg)));
            }
        }
    }
}

fn annotations_errors(annotations: &Map<String, Value>, errs: &mut Vec<(String, String)>) {
    let mut keys: Vec<&String> = annotations.keys().collect();
    keys.sort();
    for k in &keys {
        for msg in qualified_name_errors(&k.to_lowercase()) {
            errs.push(("metadata.annotations".into(), invalid(k, &msg)));
        }
    }
    let size: usize = keys
        .iter()
        .map(|k| {
            k.len()
                + annotations
                    .get(*k)
                    .and_then(Value::as_str)
                    .map_or(0, str::len)
        })
        .sum();
    if size > ANNOTATIONS_MAX_BYTES {
        errs.push((
            "metadata.annotations".into(),
            too_long(ANNOTATIONS_MAX_BYTES),
        ));
    }
}

/// `field.Invalid(path, value, msg)`'s body for a string value.
fn invalid(value: &str, msg: &str) -> String {
    format!("Invalid value: {}: {msg}", go_quote(value))
}

/// Bytes of the string values of a map.
fn text_bytes(map: Option<&Value>) -> usize {
    map.and_then(Value::as_object).map_or(0, |m| {
        m.values().filter_map(Value::as_str).map(str::len).sum()
    })
}

/// Decoded bytes of one base64 value (its encoded length when it does not
/// decode, which typed decoding has already refused for built-in kinds).
fn decoded_len(v: &Value) -> usize {
    let s = v.as_str().unwrap_or_default();
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_or(s.len(), |b| b.len())
}

/// Decoded bytes of the base64 values of a map.
fn decoded_bytes(map: Option<&Value>) -> usize {
    map.and_then(Value::as_object)
        .map_or(0, |m| m.values().map(decoded_len).sum())
}

/// A Secret's `data` size once `stringData` is merged into it (a
/// `stringData` key replaces the `data` key of the same name).
fn secret_bytes(secret: &Value) -> usize {
    let data = secret.get("data").and_then(Value::as_object);
    let strings = secret.get("stringData").and_then(Value::as_object);
    let from_data: usize = data.map_or(0, |d| {
        d.iter()
            .filter(|(k, _)| strings.is_none_or(|s| !s.contains_key(*k)))
            .map(|(_, v)| decoded_len(v))
            .sum()
    });
    from_data + text_bytes(secret.get("stringData"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::registry::Registry;
    use serde_json::json;

    fn info(kind: &str) -> ResourceInfo {
        Registry::new()
            .all()
            .into_iter()
            .find(|r| r.kind == kind && r.group.is_empty())
            .unwrap_or_else(|| panic!("{kind}"))
    }

    #[test]
    fn labels_and_annotations_follow_objectmeta_rules() {
        let cm = json!({"metadata": {"name": "c",
            "labels": {"ok": "fine", "bad key": "v", "k": "-bad"},
            "annotations": {"Example.com/Mixed": "case is fine", "a/b/c": "x"}}});
        let errs = validate(&info("ConfigMap"), &cm);
        let fields: Vec<&str> = errs.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            ["metadata.labels", "metadata.labels", "metadata.annotations"]
        );
        assert!(errs[0]
            .1
            .starts_with("Invalid value: \"bad key\": name part must consist"));
        assert!(errs[1]
            .1
            .starts_with("Invalid value: \"-bad\": a valid label must be"));
        assert!(errs[2]
            .1
            .starts_with("Invalid value: \"a/b/c\": a qualified name must"));
    }

    #[test]
    fn sizes_are_limited_as_core_validation_does() {
        let big = "x".repeat(ANNOTATIONS_MAX_BYTES);
        let cm = json!({"metadata": {"annotations": {"a": big}}});
        assert_eq!(
            validate(&info("ConfigMap"), &cm),
            vec![(
                "metadata.annotations".to_string(),
                "Too long: may not be more than 262144 bytes".to_string()
            )]
        );
        let half = "x".repeat(DATA_MAX_BYTES / 2);
        let b64 = base64::engine::general_purpose::STANDARD.encode(half.as_bytes());
        let at_limit = json!({"data": {"a": half}, "binaryData": {"b": b64}});
        assert!(validate(&info("ConfigMap"), &at_limit).is_empty());
        let over = json!({"data": {"a": half, "c": "y"}, "binaryData": {"b": b64}});
        assert_eq!(
            validate(&info("ConfigMap"), &over),
            vec![(
                "[]".to_string(),
                "Too long: may not be more than 1048576 bytes".to_string()
            )]
        );
        let secret = json!({"data": {"a": b64}, "stringData": {"b": half, "c": "y"}});
        assert_eq!(validate(&info("Secret"), &secret)[0].0, "data");
        // a stringData key replaces its data namesake
        let replaced = json!({"data": {"a": b64}, "stringData": {"a": half, "c": "y"}});
        assert!(validate(&info("Secret"), &replaced).is_empty());
    }
}
