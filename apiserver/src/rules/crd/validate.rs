//! OpenAPI v3 validation of custom objects against their CRD's schema, with
//! the real server's wording: kube-openapi's `errors` texts (`%s in body
//! must be of type %s: %q`, `%s in body should be greater than or equal to
//! %v`, `%s in body should match '%s'`, ...) wrapped in `field.Error`s the
//! way apiextensions-apiserver `pkg/apiserver/validation/validation.go`
//! (`kubeOpenAPIResultToFieldErrors`) does: type and format failures as
//! `Invalid value: <actual>`, `required` as `Required value`, `enum` as
//! `Unsupported value`, `maxLength` as `Too long`, `maxItems` as `Too many`,
//! the rest as `Invalid value: <value>`. Array items are named `[i]`.
//!
//! Checked: type (and `nullable`), format (date-time, date, int32, int64),
//! minimum/maximum (and their exclusive forms), minLength/maxLength,
//! pattern, enum, required, items, minItems/maxItems, properties,
//! additionalProperties, `x-kubernetes-int-or-string` and, below the root,
//! allOf/anyOf/oneOf/not (kube-openapi `validate/schema_props.go`; their
//! errors are not `*Validation`s, so `kubeOpenAPIResultToFieldErrors`
//! reports them as `field.Invalid(nil, "", ...)`: `<nil>: Invalid value:
//! "": "spec.x" must validate one and only one schema (oneOf). Found none
//! valid`). For a failed anyOf/oneOf kube-openapi adds the errors of the
//! failing alternative with the most successful checks (`MatchCount`);
//! here those of the first failing alternative are added. Not checked:
//! multipleOf, uniqueItems, CEL rules. The root's
//! `apiVersion`, `kind` and `metadata` are the server's, not the schema's.
//! It never changes the object.

use serde_json::Value;

use super::schema::flag;
use crate::rules::go_words::{go_float, go_quote};

/// `(field, message)` for every place where `obj` breaks `schema`.
pub(crate) fn validate(obj: &Value, schema: &Value) -> Vec<(String, String)> {
    let mut errs = Vec::new();
    if let Value::Object(map) = obj {
        let props = schema.get("properties").and_then(Value::as_object);
        required(map, schema, "", &mut errs);
        for (k, v) in map {
            if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if let Some(ps) = props.and_then(|p| p.get(k)) {
                node(v, ps, k, &mut errs);
            }
        }
    }
    errs
}

/// How field.Error prints a bad value: numbers and booleans as they are,
/// strings Go-quoted.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => go_quote(s),
        Value::Number(n) if n.is_f64() => go_float(n.as_f64().unwrap_or_default()),
        other => other.to_string(),
    }
}

/// kube-openapi's name for the JSON type of a value.
fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(declared: &str, v: &Value) -> bool {
    let actual = type_of(v);
    actual == declared
        // a float with no fraction is an integer; an integer is a number
        || (declared == "integer" && v.as_f64().is_some_and(|f| f.fract() == 0.0) && actual == "number")
        || (declared == "number" && actual == "integer")
}

fn invalid_type(path: &str, declared: &str, actual: &str) -> (String, String) {
    // errors.InvalidType with a string value: typeFailWithData
    let q = go_quote(actual);
    (
        path.to_string(),
        format!("Invalid value: {q}: {path} in body must be of type {declared}: {q}"),
    )
}

fn node(v: &Value, s: &Value, path: &str, errs: &mut Vec<(String, String)>) {
    if flag(s, "x-kubernetes-int-or-string") {
        if !matches!(type_of(v), "integer" | "string") {
            errs.push(invalid_type(path, "integer,string", type_of(v)));
        }
        return;
    }
    if v.is_null() && s.get("nullable").and_then(Value::as_bool) == Some(true) {
        return;
    }
    if let Some(ty) = s.get("type").and_then(Value::as_str) {
        if !type_matches(ty, v) {
            errs.push(invalid_type(path, ty, type_of(v)));
            return;
        }
    }
    composites(v, s, path, errs);
    if let Some(allowed) = s.get("enum").and_then(Value::as_array) {
        if !allowed.contains(v) {
            let values: Vec<String> = allowed
                .iter()
                .map(|a| match a {
                    Value::String(s) => go_quote(s),
                    other => go_quote(&other.to_string()),
                })
                .collect();
            errs.push((
                path.to_string(),
                format!(
                    "Unsupported value: {}: supported values: {}",
                    shown(v),
                    values.join(", ")
                ),
            ));
        }
    }
    match v {
        Value::Number(_) => number(v, s, path, errs),
        Value::String(text) => string(text, s, path, errs),
        Value::Array(items) => array(items, s, path, errs),
        Value::Object(map) => {
            required(map, s, path, errs);
            let props = s.get("properties").and_then(Value::as_object);
            let additional = s.get("additionalProperties").filter(|a| a.is_object());
            for (k, child) in map {
                let child_path = format!("{path}.{k}");
                match (props.and_then(|p| p.get(k)), additional) {
                    (Some(ps), _) => node(child, ps, &child_path, errs),
                    (None, Some(a)) => node(child, a, &child_path, errs),
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// anyOf, oneOf, allOf and not of `s` at `v`, in kube-openapi's order and
/// words (`validate/messages.go`: `%q must validate at least one schema
/// (anyOf)`, `%q must validate one and only one schema (oneOf). %s`, `%q
/// must validate all the schemas (allOf)%s`, `%q must not validate the
/// schema (not)`).
fn composites(v: &Value, s: &Value, path: &str, errs: &mut Vec<(String, String)>) {
    let quoted = go_quote(path);
    // field.Invalid(nil, "", err.Error()): a nil path prints as "<nil>"
    let composite = |msg: String| ("<nil>".to_string(), format!("Invalid value: \"\": {msg}"));
    let run = |sub: &Value| {
        let mut e = Vec::new();
        node(v, sub, path, &mut e);
        e
    };
    let list = |k: &str| s.get(k).and_then(Value::as_array).filter(|a| !a.is_empty());
    if let Some(any) = list("anyOf") {
        let mut first_failure = None;
        let mut ok = false;
        for sub in any {
            let e = run(sub);
            if e.is_empty() {
                ok = true;
                break;
            }
            first_failure.get_or_insert(e);
        }
        if !ok {
            errs.push(composite(format!(
                "{quoted} must validate at least one schema (anyOf)"
            )));
            errs.extend(first_failure.unwrap_or_default());
        }
    }
    if let Some(one) = list("oneOf") {
        let results: Vec<Vec<(String, String)>> = one.iter().map(run).collect();
        let valid = results.iter().filter(|e| e.is_empty()).count();
        if valid != 1 {
            let detail = if valid == 0 {
                "Found none valid".to_string()
            } else {
                format!("Found {valid} valid alternatives")
            };
            errs.push(composite(format!(
                "{quoted} must validate one and only one schema (oneOf). {detail}"
            )));
            if valid == 0 {
                errs.extend(results.into_iter().next().unwrap_or_default());
            }
        }
    }
    if let Some(all) = list("allOf") {
        let mut valid = 0;
        for sub in all {
            let e = run(sub);
            if e.is_empty() {
                valid += 1;
            }
            errs.extend(e);
        }
        if valid != all.len() {
            let detail = if valid == 0 { ". None validated" } else { "" };
            errs.push(composite(format!(
                "{quoted} must validate all the schemas (allOf){detail}"
            )));
        }
    }
    if let Some(not) = s.get("not").filter(|n| n.is_object()) {
        if run(not).is_empty() {
            errs.push(composite(format!(
                "{quoted} must not validate the schema (not)"
            )));
        }
    }
}

fn required(
    map: &serde_json::Map<String, Value>,
    s: &Value,
    path: &str,
    errs: &mut Vec<(String, String)>,
) {
    for r in s
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !map.contains_key(r) {
            let field = if path.is_empty() {
                r.to_string()
            } else {
                format!("{path}.{r}")
            };
            errs.push((field, "Required value".into()));
        }
    }
}

fn number(v: &Value, s: &Value, path: &str, errs: &mut Vec<(String, String)>) {
    let x = v.as_f64().unwrap_or_default();
    let bound = |k: &str| s.get(k).and_then(Value::as_f64);
    let exclusive = |k: &str| s.get(k).and_then(Value::as_bool) == Some(true);
    let mut fail = |msg: String| {
        errs.push((
            path.to_string(),
            format!("Invalid value: {}: {path} in body {msg}", shown(v)),
        ));
    };
    if let Some(min) = bound("minimum") {
        if exclusive("exclusiveMinimum") && x <= min {
            fail(format!("should be greater than {}", go_float(min)));
        } else if x < min {
            fail(format!(
                "should be greater than or equal to {}",
                go_float(min)
            ));
        }
    }
    if let Some(max) = bound("maximum") {
        if exclusive("exclusiveMaximum") && x >= max {
            fail(format!("should be less than {}", go_float(max)));
        } else if x > max {
            fail(format!("should be less than or equal to {}", go_float(max)));
        }
    }
    let out_of_range = match s.get("format").and_then(Value::as_str) {
        Some("int32") => v.as_i64().is_none_or(|i| i32::try_from(i).is_err()),
        Some("int64") => v.as_i64().is_none() && v.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => false,
    };
    if out_of_range {
        let format = s.get("format").and_then(Value::as_str).unwrap_or_default();
        // errors.InvalidType with a non-string value: typeFail
        errs.push((
            path.to_string(),
            format!(
                "Invalid value: {}: {path} in body must be of type {format}",
                shown(v)
            ),
        ));
    }
}

fn string(text: &str, s: &Value, path: &str, errs: &mut Vec<(String, String)>) {
    let len = text.chars().count();
    let q = go_quote(text);
    if let Some(max) = s.get("maxLength").and_then(Value::as_u64) {
        if len as u64 > max {
            // field.TooLongMaxLength
            errs.push((
                path.to_string(),
                format!("Too long: may not be longer than {max}"),
            ));
        }
    }
    if let Some(min) = s.get("minLength").and_then(Value::as_u64) {
        if (len as u64) < min {
            errs.push((
                path.to_string(),
                format!("Invalid value: {q}: {path} in body should be at least {min} chars long"),
            ));
        }
    }
    if let Some(pattern) = s.get("pattern").and_then(Value::as_str) {
        // a pattern the CRD could not compile fails closed, as Go's MustCompile would refuse the CRD
        let matches = regex::Regex::new(pattern).is_ok_and(|re| re.is_match(text));
        if !matches {
            errs.push((
                path.to_string(),
                format!("Invalid value: {q}: {path} in body should match '{pattern}'"),
            ));
        }
    }
    let bad_format = match s.get("format").and_then(Value::as_str) {
        Some("date-time") => chrono::DateTime::parse_from_rfc3339(text).is_err(),
        Some("date") => chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").is_err(),
        _ => false,
    };
    if bad_format {
        let format = s.get("format").and_then(Value::as_str).unwrap_or_default();
        errs.push((
            path.to_string(),
            format!("Invalid value: {q}: {path} in body must be of type {format}: {q}"),
        ));
    }
}

fn array(items: &[Value], s: &Value, path: &str, errs: &mut Vec<(String, String)>) {
    let n = items.len() as u64;
    if let Some(max) = s.get("maxItems").and_then(Value::as_u64) {
        if n > max {
            errs.push((
                path.to_string(),
                format!("Too many: {n}: must have at most {max} items"),
            ));
        }
    }
    if let Some(min) = s.get("minItems").and_then(Value::as_u64) {
        if n < min {
            errs.push((
                path.to_string(),
                format!("Invalid value: {n}: {path} in body should have at least {min} items"),
            ));
        }
    }
    if let Some(is) = s.get("items") {
        for (i, item) in items.iter().enumerate() {
            node(item, is, &format!("{path}[{i}]"), errs);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
            "limit": {"type": "integer", "minimum": 0, "maximum": 10, "format": "int32"},
            "color": {"type": "string", "enum": ["red", "blue"]},
            "when": {"type": "string", "format": "date-time"},
            "port": {"x-kubernetes-int-or-string": true},
            "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
        }}}})
    }

    fn errs(spec: Value) -> Vec<String> {
        validate(&json!({"metadata": {"name": "x"}, "spec": spec}), &schema())
            .into_iter()
            .map(|(f, m)| format!("{f}: {m}"))
            .collect()
    }

    #[test]
    fn messages_are_the_real_servers() {
        assert!(errs(json!({"name": "ok", "limit": 3, "color": "red", "when": "2026-01-01T00:00:00Z", "port": "http", "tags": ["a"]})).is_empty());
        assert_eq!(
            errs(json!({"name": "ok", "limit": "two"})),
            [
                r#"spec.limit: Invalid value: "string": spec.limit in body must be of type integer: "string""#
            ]
        );
        assert_eq!(
            errs(json!({"name": "ok", "limit": -1})),
            ["spec.limit: Invalid value: -1: spec.limit in body should be greater than or equal to 0"]
        );
        assert_eq!(
            errs(json!({"name": "ok", "limit": 11})),
            ["spec.limit: Invalid value: 11: spec.limit in body should be less than or equal to 10"]
        );
        assert_eq!(errs(json!({})), ["spec.name: Required value"]);
        assert_eq!(
            errs(json!({"name": "TOOLONG"})),
            [
                "spec.name: Too long: may not be longer than 5",
                r#"spec.name: Invalid value: "TOOLONG": spec.name in body should match '^[a-z]+$'"#
            ]
        );
        assert_eq!(
            errs(json!({"name": "a"})),
            [r#"spec.name: Invalid value: "a": spec.name in body should be at least 2 chars long"#]
        );
        assert_eq!(
            errs(json!({"name": "ok", "color": "green"})),
            [r#"spec.color: Unsupported value: "green": supported values: "red", "blue""#]
        );
        assert_eq!(
            errs(json!({"name": "ok", "when": "soon"})),
            [
                r#"spec.when: Invalid value: "soon": spec.when in body must be of type date-time: "soon""#
            ]
        );
        assert_eq!(
            errs(json!({"name": "ok", "tags": ["a", 1]})),
            [
                r#"spec.tags[1]: Invalid value: "integer": spec.tags[1] in body must be of type string: "integer""#
            ]
        );
        assert_eq!(errs(json!({"name": "ok", "port": true})).len(), 1);
    }

    #[test]
    fn composites_are_reported_as_kube_openapi_words_them() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {
            "a": {"type": "integer", "anyOf": [{"minimum": 5}, {"maximum": 1}]},
            "o": {"type": "integer", "oneOf": [{"minimum": 0}, {"maximum": 10}]},
            "l": {"type": "string", "allOf": [{"minLength": 2}, {"pattern": "^x"}]},
            "n": {"type": "string", "not": {"enum": ["forbidden"]}},
        }}}});
        let errs = |spec: Value| -> Vec<String> {
            validate(&json!({"spec": spec}), &schema)
                .into_iter()
                .map(|(f, m)| format!("{f}: {m}"))
                .collect()
        };
        assert!(errs(json!({"a": 0, "o": 20, "l": "xy", "n": "ok"})).is_empty());
        assert_eq!(
            errs(json!({"a": 3})),
            [
                r#"<nil>: Invalid value: "": "spec.a" must validate at least one schema (anyOf)"#,
                "spec.a: Invalid value: 3: spec.a in body should be greater than or equal to 5",
            ]
        );
        assert_eq!(
            errs(json!({"o": 5})),
            [
                r#"<nil>: Invalid value: "": "spec.o" must validate one and only one schema (oneOf). Found 2 valid alternatives"#
            ]
        );
        assert_eq!(
            errs(json!({"l": "y"})),
            [
                r#"spec.l: Invalid value: "y": spec.l in body should be at least 2 chars long"#,
                r#"spec.l: Invalid value: "y": spec.l in body should match '^x'"#,
                r#"<nil>: Invalid value: "": "spec.l" must validate all the schemas (allOf). None validated"#,
            ]
        );
        assert_eq!(
            errs(json!({"n": "forbidden"})),
            [r#"<nil>: Invalid value: "": "spec.n" must not validate the schema (not)"#]
        );
    }
}
