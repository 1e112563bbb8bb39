//! A custom resource's `additionalPrinterColumns` in Table responses, as
//! the apiextensions server's `tableconvertor` builds them: a `Name`
//! column, then each declared column, its cell the first result of the
//! column's JSONPath converted by the column's type (`cellForJSONValue`;
//! `date` printed as an age). Only the simple JSONPath subset CRDs use is
//! evaluated (fields, `['key']`, `[n]`, `[*]`, `[?(@.a.b=="v")]`); a path
//! outside it, or with no result, gives an empty cell (null). This module
//! only presents; it never filters or validates.

use serde_json::{json, Value};

use super::printers::{human_duration, NAME_DESCRIPTION};
use crate::storage::registry::PrinterColumn;

/// Column definitions: Name, then the declared columns.
pub(crate) fn definitions(columns: &[PrinterColumn]) -> Vec<Value> {
    let mut out = vec![json!({"name": "Name", "type": "string", "format": "name",
        "description": NAME_DESCRIPTION, "priority": 0})];
    out.extend(columns.iter().map(|c| {
        json!({"name": c.name, "type": c.type_, "format": c.format,
            "description": c.description, "priority": c.priority})
    }));
    out
}

/// One row's cells for `obj`.
pub(crate) fn cells(columns: &[PrinterColumn], obj: &Value) -> Vec<Value> {
    let mut out = vec![obj
        .pointer("/metadata/name")
        .cloned()
        .unwrap_or(Value::Null)];
    for c in columns {
        let cell = match find(obj, &c.json_path).first() {
            None => Value::Null,
            Some(v) if c.type_ == "string" => json!(go_text(v)),
            Some(v) => typed_cell(&c.type_, v),
        };
        out.push(cell);
    }
    out
}

/// `cellForJSONValue`: a value of the wrong type for its column is null.
fn typed_cell(ty: &str, v: &Value) -> Value {
    match (ty, v) {
        ("integer", Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .map_or(Value::Null, |i| json!(i)),
        ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, |f| json!(f)),
        ("boolean", Value::Bool(b)) => json!(b),
        ("date", Value::String(s)) => match chrono::DateTime::parse_from_rfc3339(s) {
            Ok(t) => json!(human_duration(
                (chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_seconds()
            )),
            Err(_) => json!("<invalid>"),
        },
        _ => Value::Null,
    }
}

/// A value as Go's `fmt.Fprint` prints the decoded JSON (what kubectl's
/// JSONPath printer, and so a `string` column, shows).
fn go_text(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_text).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k}:{}", go_text(&m[k])))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

#[derive(Debug, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
    All,
    /// `[?(@.path=="literal")]` (or `!=`).
    Filter(Vec<String>, bool, Value),
}

/// Parses a simple JSONPath (with or without the `{}` template braces);
/// None when it is outside the subset.
fn parse(path: &str) -> Option<Vec<Step>> {
    let p = path.trim();
    let p = p
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(p);
    let p = p.strip_prefix('$').unwrap_or(p);
    let mut steps = Vec::new();
    let mut rest = p;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return None;
            }
            steps.push(Step::Field(r[..end].to_string()));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = r[..end].trim();
            rest = &r[end + 1..];
            steps.push(bracket(inner)?);
        } else {
            return None;
        }
    }
    Some(steps)
}

fn bracket(inner: &str) -> Option<Step> {
    if inner == "*" {
        return Some(Step::All);
    }
    if let Ok(i) = inner.parse::<usize>() {
        return Some(Step::Index(i));
    }
    for q in ['\'', '"'] {
        if let Some(k) = inner.strip_prefix(q).and_then(|k| k.strip_suffix(q)) {
            return Some(Step::Field(k.to_string()));
        }
    }
    let cond = inner.strip_prefix("?(")?.strip_suffix(')')?;
    let (lhs, eq, rhs) = match cond.split_once("==") {
        Some((l, r)) => (l, true, r),
        None => {
            let (l, r) = cond.split_once("!=")?;
            (l, false, r)
        }
    };
    let field: Vec<String> = lhs
        .trim()
        .strip_prefix("@.")?
        .split('.')
        .map(str::to_string)
        .collect();
    let rhs = rhs.trim();
    let literal = match rhs.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')) {
        Some(s) => json!(s),
        None => serde_json::from_str(rhs).ok()?,
    };
    Some(Step::Filter(field, eq, literal))
}

/// Every value `path` selects in `obj` (empty when none, or unparsable).
fn find<'a>(obj: &'a Value, path: &str) -> Vec<&'a Value> {
    let Some(steps) = parse(path) else {
        return Vec::new();
    };
    let mut current = vec![obj];
    for step in &steps {
        let mut next = Vec::new();
        for v in current {
            match step {
                Step::Field(f) => next.extend(v.get(f.as_str())),
                Step::Index(i) => next.extend(v.get(*i)),
                Step::All => match v {
                    Value::Array(a) => next.extend(a.iter()),
                    Value::Object(m) => next.extend(m.values()),
                    _ => {}
                },
                Step::Filter(field, eq, lit) => {
                    let items = v.as_array().map(|a| a.iter()).into_iter().flatten();
                    next.extend(items.filter(|item| {
                        let got = field.iter().try_fold(*item, |o, f| o.get(f.as_str()));
                        got.is_some_and(|g| (g == lit) == *eq)
                    }));
                }
            }
        }
        current = next;
    }
    current
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn col(name: &str, ty: &str, path: &str) -> PrinterColumn {
        PrinterColumn {
            name: name.into(),
            type_: ty.into(),
            json_path: path.into(),
            ..PrinterColumn::default()
        }
    }

    #[test]
    fn simple_paths_select_fields_indexes_and_filtered_items() {
        let o = json!({"spec": {"replicas": 3, "labels": {"a.b/c": "x"}},
            "status": {"conditions": [{"type": "Synced", "status": "False"},
                                      {"type": "Ready", "status": "True"}]}});
        assert_eq!(find(&o, ".spec.replicas"), [&json!(3)]);
        assert_eq!(find(&o, "{.spec.labels['a.b/c']}"), [&json!("x")]);
        assert_eq!(find(&o, ".status.conditions[1].type"), [&json!("Ready")]);
        assert_eq!(
            find(&o, r#".status.conditions[?(@.type=="Ready")].status"#),
            [&json!("True")]
        );
        assert!(find(&o, ".spec.missing").is_empty());
        assert!(find(&o, "spec..x").is_empty());
    }

    #[test]
    fn cells_follow_the_column_type() {
        let o = json!({"metadata": {"name": "w", "creationTimestamp": "2000-01-01T00:00:00Z"},
            "spec": {"replicas": 3, "size": "big", "on": true, "m": {"b": 1, "a": [1, 2]}}});
        let cols = [
            col("Replicas", "integer", ".spec.replicas"),
            col("Size", "string", ".spec.size"),
            col("Wrong", "integer", ".spec.size"),
            col("On", "boolean", ".spec.on"),
            col("Age", "date", ".metadata.creationTimestamp"),
            col("Map", "string", ".spec.m"),
            col("None", "string", ".spec.none"),
        ];
        let c = cells(&cols, &o);
        assert_eq!(c[0], "w");
        assert_eq!(c[1], 3);
        assert_eq!(c[2], "big");
        assert_eq!(c[3], Value::Null);
        assert_eq!(c[4], true);
        assert!(c[5].as_str().unwrap().ends_with('y'), "{}", c[5]);
        assert_eq!(c[6], "map[a:[1 2] b:1]");
        assert_eq!(c[7], Value::Null);
        assert_eq!(definitions(&cols)[0]["format"], "name");
        assert_eq!(definitions(&cols).len(), 8);
    }
}
