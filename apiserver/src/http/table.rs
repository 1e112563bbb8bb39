//! Server-side printing (`meta.k8s.io/v1 Table`) for `kubectl get`: column
//! definitions and one row per object. Only presentation; never filters.

use serde_json::{json, Value};

use crate::storage::registry::ResourceInfo;

/// True if the `Accept` header asks for a Table.
pub fn wants_table(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| a.contains("as=Table"))
}

/// Human duration the way kubectl prints AGE (`5s`, `3m12s`, `4h`, `2d`).
pub fn human_duration(secs: i64) -> String {
    let s = secs.max(0);
    if s < 120 {
        format!("{s}s")
    } else if s < 600 {
        format!("{}m{}s", s / 60, s % 60)
    } else if s < 3 * 3600 {
        format!("{}m", s / 60)
    } else if s < 8 * 3600 {
        let m = (s / 60) % 60;
        if m == 0 {
            format!("{}h", s / 3600)
        } else {
            format!("{}h{}m", s / 3600, m)
        }
    } else if s < 48 * 3600 {
        format!("{}h", s / 3600)
    } else if s < 8 * 86400 {
        let h = (s / 3600) % 24;
        if h == 0 {
            format!("{}d", s / 86400)
        } else {
            format!("{}d{}h", s / 86400, h)
        }
    } else {
        format!("{}d", s / 86400)
    }
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
    match (info.group.as_str(), info.plural.as_str()) {
        ("", "pods") => vec![
            col("Name", "string", 0),
            col("Ready", "string", 0),
            col("Status", "string", 0),
            col("Restarts", "string", 0),
            col("Age", "string", 0),
            col("IP", "string", 1),
            col("Node", "string", 1),
        ],
        ("", "namespaces") | ("", "nodes") => vec![
            col("Name", "string", 0),
            col("Status", "string", 0),
            col("Age", "string", 0),
        ],
        ("", "configmaps") | ("", "secrets") => vec![
            col("Name", "string", 0),
            col("Data", "integer", 0),
            col("Age", "string", 0),
        ],
        _ => vec![col("Name", "string", 0), col("Age", "string", 0)],
    }
}

fn cells(info: &ResourceInfo, obj: &Value) -> Vec<Value> {
    if !info.printer_columns.is_empty() {
        return super::printer_columns::cells(&info.printer_columns, obj);
    }
    let name = obj
        .pointer("/metadata/name")
        .cloned()
        .unwrap_or(Value::Null);
    let s = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("<none>")
            .to_string()
    };
    match (info.group.as_str(), info.plural.as_str()) {
        ("", "pods") => {
            let total = obj
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let statuses = obj
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array);
            let ready = statuses.map_or(0, |s| {
                s.iter().filter(|c| c["ready"] == Value::Bool(true)).count()
            });
            let restarts: i64 = statuses.map_or(0, |s| {
                s.iter().filter_map(|c| c["restartCount"].as_i64()).sum()
            });
            let status = if obj.pointer("/metadata/deletionTimestamp").is_some() {
                "Terminating".to_string()
            } else {
                s("/status/phase")
            };
            vec![
                name,
                json!(format!("{ready}/{total}")),
                json!(status),
                json!(restarts.to_string()),
                json!(age(obj)),
                json!(s("/status/podIP")),
                json!(s("/spec/nodeName")),
            ]
        }
        ("", "namespaces") => vec![name, json!(s("/status/phase")), json!(age(obj))],
        ("", "nodes") => {
            let ready = obj
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
                .map(|c| c["status"] == "True");
            let st = match ready {
                Some(true) => "Ready",
                Some(false) => "NotReady",
                None => "Unknown",
            };
            vec![name, json!(st), json!(age(obj))]
        }
        ("", "configmaps") | ("", "secrets") => {
            let n = ["data", "binaryData", "stringData"]
                .iter()
                .filter_map(|k| obj.get(*k).and_then(Value::as_object))
                .map(serde_json::Map::len)
                .sum::<usize>();
            vec![name, json!(n), json!(age(obj))]
        }
        _ => vec![name, json!(age(obj))],
    }
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
            json!({
                "cells": cells(info, o),
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": o.get("metadata").cloned().unwrap_or_else(|| json!({})),
                },
            })
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
    }
}
