//! Validation of a guest's plan before the host acts on it.
//!
//! Owns turning the guest's raw plan (JSON documents, references, events)
//! into typed, checked values, and enforcing the write allowlist. Nothing
//! here sends a request: a plan that fails validation is rejected whole, so
//! a half-valid plan never reaches the cluster.

use std::time::Duration;

use serde_json::Value as Json;

use super::bindings::wasmctrl::controller::types as wit;
use super::manifest::{GuestManifest, Gvk};

/// Why a plan was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// An `apply` entry is not a JSON object.
    #[error("apply[{index}] is not a JSON object: {problem}")]
    NotAnObject {
        /// Position in `apply`.
        index: usize,
        /// Parse error or what was found instead.
        problem: String,
    },
    /// An `apply` entry lacks a required field.
    #[error("apply[{index}] has no {field}")]
    MissingField {
        /// Position in `apply`.
        index: usize,
        /// The missing field.
        field: &'static str,
    },
    /// A write outside the guest's allowlist.
    #[error("{verb} of {gvk} {target} is outside the guest's write allowlist")]
    NotAllowed {
        /// "apply" or "delete".
        verb: &'static str,
        /// The type.
        gvk: String,
        /// "namespace/name" or "name".
        target: String,
    },
    /// An event with an empty reason or regarding no object.
    #[error("events[{index}]: {problem}")]
    BadEvent {
        /// Position in `events`.
        index: usize,
        /// What is wrong.
        problem: &'static str,
    },
    /// The same object appears twice in one plan.
    #[error("{gvk} {target} appears more than once in the plan")]
    Duplicate {
        /// The type.
        gvk: String,
        /// "namespace/name" or "name".
        target: String,
    },
}

/// A reference to one object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// Its type.
    pub gvk: Gvk,
    /// Namespace (None for cluster-scoped).
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.gvk, self.name),
            None => write!(f, "{} {}", self.gvk, self.name),
        }
    }
}

impl ObjectKey {
    fn target(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        }
    }

    fn from_ref(r: &wit::ObjectRef) -> Self {
        ObjectKey {
            gvk: Gvk::from_api_version(&r.api_version, &r.kind),
            namespace: r.namespace.clone().filter(|n| !n.is_empty()),
            name: r.name.clone(),
        }
    }
}

/// Event severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum EventType {
    /// "Normal".
    Normal,
    /// "Warning".
    Warning,
}

/// A checked event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedEvent {
    /// The object it is about.
    pub regarding: ObjectKey,
    /// Severity.
    pub event_type: EventType,
    /// Reason.
    pub reason: String,
    /// Message.
    pub message: String,
}

/// A checked plan.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidatedPlan {
    /// Objects to apply, with their keys.
    pub apply: Vec<(ObjectKey, Json)>,
    /// Objects to delete.
    pub delete: Vec<ObjectKey>,
    /// Events to record.
    pub events: Vec<PlannedEvent>,
    /// Requeue delay.
    pub requeue_after: Option<Duration>,
}

/// Checks a plan against the manifest's allowlist.
pub fn validate(plan: &wit::Plan, manifest: &GuestManifest) -> Result<ValidatedPlan, PlanError> {
    let mut apply = Vec::with_capacity(plan.apply.len());
    let mut seen = std::collections::BTreeSet::new();
    for (index, doc) in plan.apply.iter().enumerate() {
        let obj: Json = serde_json::from_str(doc).map_err(|e| PlanError::NotAnObject {
            index,
            problem: e.to_string(),
        })?;
        if !obj.is_object() {
            return Err(PlanError::NotAnObject {
                index,
                problem: format!("found {}", type_name(&obj)),
            });
        }
        let text = |f: &str| obj.get(f).and_then(Json::as_str).filter(|s| !s.is_empty());
        let meta = |f: &str| {
            obj.get("metadata")
                .and_then(|m| m.get(f))
                .and_then(Json::as_str)
                .filter(|s| !s.is_empty())
        };
        let api_version = text("apiVersion").ok_or(PlanError::MissingField {
            index,
            field: "apiVersion",
        })?;
        let kind = text("kind").ok_or(PlanError::MissingField {
            index,
            field: "kind",
        })?;
        let name = meta("name").ok_or(PlanError::MissingField {
            index,
            field: "metadata.name",
        })?;
        let key = ObjectKey {
            gvk: Gvk::from_api_version(api_version, kind),
            namespace: meta("namespace").map(str::to_string),
            name: name.to_string(),
        };
        check_allowed("apply", &key, manifest)?;
        if !seen.insert(key.clone()) {
            return Err(PlanError::Duplicate {
                gvk: key.gvk.to_string(),
                target: key.target(),
            });
        }
        apply.push((key, obj));
    }
    let mut delete = Vec::with_capacity(plan.delete.len());
    for r in &plan.delete {
        let key = ObjectKey::from_ref(r);
        check_allowed("delete", &key, manifest)?;
        if !seen.insert(key.clone()) {
            return Err(PlanError::Duplicate {
                gvk: key.gvk.to_string(),
                target: key.target(),
            });
        }
        delete.push(key);
    }
    let mut events = Vec::with_capacity(plan.events.len());
    for (index, e) in plan.events.iter().enumerate() {
        if e.reason.is_empty() {
            return Err(PlanError::BadEvent {
                index,
                problem: "empty reason",
            });
        }
        if e.regarding.name.is_empty()
            || e.regarding.kind.is_empty()
            || e.regarding.api_version.is_empty()
        {
            return Err(PlanError::BadEvent {
                index,
                problem: "regarding needs apiVersion, kind and name",
            });
        }
        events.push(PlannedEvent {
            regarding: ObjectKey::from_ref(&e.regarding),
            event_type: match e.event_type {
                wit::EventType::Normal => EventType::Normal,
                wit::EventType::Warning => EventType::Warning,
            },
            reason: e.reason.clone(),
            message: e.message.clone(),
        });
    }
    Ok(ValidatedPlan {
        apply,
        delete,
        events,
        requeue_after: plan.requeue_after_ms.map(Duration::from_millis),
    })
}

fn check_allowed(
    verb: &'static str,
    key: &ObjectKey,
    manifest: &GuestManifest,
) -> Result<(), PlanError> {
    if manifest.may_write(&key.gvk, key.namespace.as_deref(), &key.name) {
        Ok(())
    } else {
        Err(PlanError::NotAllowed {
            verb,
            gvk: key.gvk.to_string(),
            target: key.target(),
        })
    }
}

fn type_name(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "a list",
        Json::Object(_) => "an object",
    }
}
