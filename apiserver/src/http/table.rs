//! Server-side printing (`meta.k8s.io/v1 Table`) for `kubectl get`: the
//! Table itself (one row per object, its metadata as
//! `PartialObjectMetadata`), choosing the columns: a CRD's
//! `additionalPrinterColumns` (`printer_columns`), a built-in
//! kind's printer (`printers`), else Name and Age. Only
//! presentation; never filters.

use serde_json::{json, Value};

pub use super::printers::human_duration;
use crate::storage::registry::ResourceInfo;

/// True if the `Accept` header asks for a Table.
pub fn wants_table(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| a.contains("as=Table"))
}

fn age(obj: &Value) -> String {
    let created = obj
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
    match created {
        Some(t) => {
            human_duration((chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_seconds())
        }
        None => "<unknown>".into(),
    }
}

fn col(name: &str, ty: &str, priority: u8) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": ty, "format": format, "description": "", "priority": priority})
}

fn columns(info: &ResourceInfo) -> Vec<Value> {
    if !info.printer_columns.is_empty() {
        return super::printer_columns::definitions(&info.printer_columns);
    }
    match super::printers::printer(&info.group, &info.plural) {
        Some(p) => p.definitions(),
        None => vec![col("Name", "string", 0), col("Age", "string", 0)],
    }
}

fn cells(info: &ResourceInfo, obj: &Value) -> Vec<Value> {
    if !info.printer_columns.is_empty() {
        return super::printer_columns::cells(&info.printer_columns, obj);
    }
    if let Some(p) = super::printers::printer(&info.group, &info.plural) {
        return p.cells(obj);
    }
    let name = obj
        .pointer("/metadata/name")
        .cloned()
        .unwrap_or(Value::Null);
    vec![name, json!(age(obj))]
}

/// A row's `conditions` (a built-in printer's; CRD rows have none).
fn row_conditions(info: &ResourceInfo, obj: &Value) -> Option<Value> {
    if !info.printer_columns.is_empty() {
        return None;
    }
    super::printers::printer(&info.group, &info.plural)?.row_conditions(obj)
}

/// A Table of `objects`; `with_columns` includes the column definitions
/// (omitted after the first event of a watch). Rows carry the object's
/// metadata as `PartialObjectMetadata`.
pub fn table(
    info: &ResourceInfo,
    objects: &[Value],
    with_columns: bool,
    list_meta: Option<Value>,
) -> Value {
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut row = json!({
                "cells": cells(info, o),
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": o.get("metadata").cloned().unwrap_or_else(|| json!({})),
                },
            });
            if let Some(c) = row_conditions(info, o) {
                row["conditions"] = c;
            }
            row
        })
        .collect();
    let mut t = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta.unwrap_or_else(|| json!({})),
        "rows": rows,
    });
    if with_columns {
        t["columnDefinitions"] = Value::Array(columns(info));
    }
    t
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::storage::registry::Registry;

    #[test]
    fn pod_rows_show_ready_status_and_age() {
        let info = Registry::new().lookup("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p", "creationTimestamp": "2000-01-01T00:00:00Z"}, "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Pending"}});
        let t = table(&info, &[pod], true, None);
        assert_eq!(t["columnDefinitions"][0]["name"], "Name");
        let cells = &t["rows"][0]["cells"];
        assert_eq!(cells[0], "p");
        assert_eq!(cells[1], "0/1");
        assert_eq!(cells[2], "Pending");
    }

    #[test]
    fn ages_print_like_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(192), "3m12s");
        assert_eq!(human_duration(4 * 3600), "4h");
        assert_eq!(human_duration(3 * 86400), "3d");
        assert_eq!(human_duration(180), "3m");
        assert_eq!(human_duration(3 * 3600 + 60), "3h1m");
        assert_eq!(human_duration(9 * 86400), "9d");
        assert_eq!(human_duration(3 * 365 * 86400 + 5 * 86400), "3y5d");
        assert_eq!(human_duration(-1), "0s");
        assert_eq!(human_duration(-5), "<invalid>");
    }
}
