//! Unit tests of server-side apply and managed-fields bookkeeping, run on
//! plain JSON objects: `ownership` (apply entries, prune, conflicts and
//! their messages), `updates` (entries of non-apply writes, their order
//! and cap) and `lists` (associative, set and atomic lists and maps,
//! built-in and CRD-declared). Fixtures live here; no test touches
//! storage or HTTP.

use serde_json::{json, Value};

use super::{record_update, server_side_apply};
use crate::patch::{ApplyError, FieldConflict, ObjectKind};

mod lazy;
mod lists;
mod ownership;
mod updates;

const T0: &str = "2026-01-01T00:00:00Z";

const T1: &str = "2026-01-01T00:01:00Z";

const T2: &str = "2026-01-01T00:02:00Z";

fn cm_kind() -> ObjectKind {
    ObjectKind::new("", "v1", "ConfigMap")
}

fn cm(data: Value) -> Value {
    json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg","namespace":"default"},"data":data})
}

fn apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
) -> Result<Value, ApplyError> {
    server_side_apply(live, applied, manager, force, &cm_kind(), T1)
}

fn ok(r: Result<Value, ApplyError>) -> Value {
    r.unwrap_or_else(|e| panic!("apply failed: {e}"))
}

/// (manager, operation, fieldsV1) of each entry, in stored order.
fn owners(obj: &Value) -> Vec<(String, String, Value)> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap_or_default().to_owned(),
                        e["operation"].as_str().unwrap_or_default().to_owned(),
                        e["fieldsV1"].clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn entry<'a>(obj: &'a Value, manager: &str) -> &'a Value {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .and_then(|es| es.iter().find(|e| e["manager"] == manager))
        .unwrap_or_else(|| panic!("no entry for {manager} in {obj}"))
}

fn conflicts(r: Result<Value, ApplyError>) -> (Vec<FieldConflict>, String) {
    match r {
        Err(ApplyError::Conflict { conflicts, message }) => (conflicts, message),
        other => panic!("expected a conflict, got {other:?}"),
    }
}

fn pod(containers: Value) -> Value {
    json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default"},"spec":{"containers":containers}})
}

fn pod_apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
) -> Result<Value, ApplyError> {
    server_side_apply(
        live,
        applied,
        manager,
        force,
        &ObjectKind::new("", "v1", "Pod"),
        T1,
    )
}
