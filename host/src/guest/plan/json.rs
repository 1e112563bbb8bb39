//! The printed form of a checked plan: JSON with the contract's field names
//! (the WIT `plan` record), as `wasmctrl reconcile` prints it, recordings
//! keep it and shadows compare it. Owns that shape only; it never reads or
//! changes what the plan says.

use std::time::Duration;

use serde_json::{json, Value as Json};

use super::{EventType, ObjectKey, PlannedWrite, ValidatedPlan};

impl ValidatedPlan {
    /// The printed form of the plan, with the contract's field names (the
    /// WIT `plan` record: `writes` as `{"<variant>": payload}`, `events`,
    /// `requeue-after-ms`).
    pub fn to_json(&self) -> Json {
        let writes: Vec<Json> = self
            .writes
            .iter()
            .map(|w| match w {
                PlannedWrite::Apply { doc, .. } => json!({"apply": doc}),
                PlannedWrite::ApplyEntries { entries, .. } => json!({"apply": entries.doc()}),
                PlannedWrite::Update { doc, .. } => json!({"update": doc}),
                PlannedWrite::ApplyStatus { doc, .. } => json!({"apply-status": doc}),
                PlannedWrite::Delete { target, .. } => json!({"delete": reference(target)}),
                PlannedWrite::AddFinalizer {
                    target, finalizer, ..
                } => {
                    json!({"add-finalizer": {"target": reference(target), "finalizer": finalizer}})
                }
                PlannedWrite::RemoveFinalizer {
                    target, finalizer, ..
                } => {
                    json!({"remove-finalizer": {"target": reference(target), "finalizer": finalizer}})
                }
            })
            .collect();
        let events: Vec<Json> = self
            .events
            .iter()
            .map(|e| {
                json!({
                    "regarding": reference(&e.regarding),
                    "related": e.related.as_ref().map(reference),
                    "event-type": match e.event_type { EventType::Normal => "normal", EventType::Warning => "warning" },
                    "reason": e.reason,
                    "action": e.action,
                    "message": e.message,
                })
            })
            .collect();
        let requeue = self
            .requeue_after
            .map(|d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        json!({"writes": writes, "events": events, "requeue-after-ms": requeue})
    }
}

fn reference(k: &ObjectKey) -> Json {
    let mut r = json!({"api-version": k.gvk.api_version(), "kind": k.gvk.kind, "name": k.name});
    if let Some(ns) = &k.namespace {
        r["namespace"] = json!(ns);
    }
    r
}
