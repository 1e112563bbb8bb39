//! Validation of a guest's plan before the host acts on it. Owns turning
//! the guest's raw plan (typed writes, events) into checked values: the
//! write allowlist (status writes included), pinning writes to the uids the
//! snapshot saw, and checking every name. Nothing here sends a request: a
//! plan that fails validation is rejected whole, so a half-valid plan never
//! reaches the cluster.
//!
//! # Rules
//! - Every update, status and finalizer write is pinned to the uid of the
//!   object as the snapshot saw it — a write aimed at an object the guest
//!   did not see is refused here, so the host never creates what it meant
//!   to update.
//! - Every name and namespace a plan gives (documents, delete and finalizer
//!   targets, events' `regarding` and `related`) must be a valid Kubernetes
//!   object name for its kind, so none can become more than one URL path
//!   segment (`../secrets/x`, `p5/status`, `%2F`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value as Json;

use super::bindings::wasmctrl::controller::types as wit;
use super::manifest::{namespace_problem, object_name_problem, shown, GuestManifest, Gvk};
use wasmctrl_kube_rules::configmap_key::{check_config_map_key, ConfigMapKeyError};
use wasmctrl_kube_rules::names::is_qualified_finalizer;
use wasmctrl_snapshot::SnapshotView;

/// Why a plan was rejected. `writes[i]` positions name the write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A document is not a JSON object.
    #[error("writes[{index}] ({verb}) is not a JSON object: {problem}")]
    NotAnObject {
        /// Position in `writes`.
        index: usize,
        /// The write's kind.
        verb: &'static str,
        /// Parse error or what was found instead.
        problem: String,
    },
    /// A document or reference lacks a required field.
    #[error("writes[{index}] ({verb}) has no {field}")]
    MissingField {
        /// Position in `writes`.
        index: usize,
        /// The write's kind.
        verb: &'static str,
        /// The missing field.
        field: &'static str,
    },
    /// A name or namespace that is not a valid Kubernetes object name (for
    /// a name, as the API server validates names of its kind): it could
    /// address another object or a subresource.
    #[error("{at}: {field} {value} {problem}")]
    BadName {
        /// Where: `writes[3] (apply)`, `events[0].regarding`.
        at: String,
        /// The field: `metadata.name`, `metadata.namespace`, `name`,
        /// `namespace`.
        field: &'static str,
        /// The value, quoted (its first 64 characters when longer).
        value: String,
        /// What is wrong, as the API server's rule words it: "is not a
        /// valid Pod name: ...".
        problem: String,
    },
    /// A write outside the guest's allowlist.
    #[error("{verb} of {gvk} {target} is outside the guest's write allowlist")]
    NotAllowed {
        /// "apply", "update", "apply-status", "delete", "add-finalizer" or
        /// "remove-finalizer".
        verb: &'static str,
        /// The type.
        gvk: String,
        /// "namespace/name" or "name".
        target: String,
    },
    /// A status write the allowlist does not grant (`write-rule.status`).
    #[error("apply-status of {gvk} {target}: no write rule with status: true allows it")]
    StatusNotAllowed {
        /// The type.
        gvk: String,
        /// "namespace/name" or "name".
        target: String,
    },
    /// A write pinned to an object the snapshot did not hold: the host has
    /// no uid to pin it to, and must never create it.
    #[error("{verb} of {gvk} {target}: the snapshot did not hold that object (only objects the guest saw can be updated; use apply to create)")]
    NotSeen {
        /// The write's kind.
        verb: &'static str,
        /// The type.
        gvk: String,
        /// "namespace/name" or "name".
        target: String,
    },
    /// A finalizer that is not a qualified name.
    #[error(
        "writes[{index}] ({verb}): finalizer {finalizer:?} is not a qualified name (prefix/name)"
    )]
    BadFinalizer {
        /// Position in `writes`.
        index: usize,
        /// The write's kind.
        verb: &'static str,
        /// The finalizer.
        finalizer: String,
    },
    /// An event with an empty reason or regarding no object.
    #[error("events[{index}]: {problem}")]
    BadEvent {
        /// Position in `events`.
        index: usize,
        /// What is wrong.
        problem: &'static str,
    },
    /// More bytes crossed out of the guest in one call than any plan
    /// within the operator's caps needs ([`super::limits::copy_budget`]):
    /// refused by the runtime while the result was still being copied out,
    /// before it could be counted.
    #[error(
        "plan too large: over {max} bytes copied out of the guest in one call, more than a plan \
         within maxPlanWrites, maxPlanEvents and maxPlanBytes can take"
    )]
    OverCopyBudget {
        /// The budget, in bytes.
        max: usize,
    },
    /// A plan over one of the operator's caps ([`crate::guest::policy::Limits`]);
    /// checked before any document is parsed.
    #[error("plan too large: {found} {what}, over the limit of {max} ({limit})")]
    TooLarge {
        /// "writes", "events" or "bytes".
        what: &'static str,
        /// How many the plan holds.
        found: usize,
        /// The cap.
        max: usize,
        /// The policy field that sets the cap.
        limit: &'static str,
    },
    /// A ConfigMap or Secret key the API server would refuse (a 422 for the
    /// whole write).
    #[error(
        "writes[{index}] ({object}): {field} key {key:?} is not a valid ConfigMap key: {problem}"
    )]
    BadDataKey {
        /// Position in `writes`.
        index: usize,
        /// The object: "v1/ConfigMap namespace/name".
        object: String,
        /// "data", "binaryData" or "stringData".
        field: &'static str,
        /// The key (its first 64 characters when longer).
        key: String,
        /// What the API server would say.
        problem: ConfigMapKeyError,
    },
    /// The same object written twice the same way in one plan.
    #[error("{gvk} {target} appears more than once in the plan as {what}")]
    Duplicate {
        /// The type.
        gvk: String,
        /// "namespace/name" or "name".
        target: String,
        /// "apply/update", "status", "delete" or the finalizer.
        what: String,
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
    /// "namespace/name", or "name" when cluster-scoped.
    pub fn target(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        }
    }

    pub(crate) fn from_ref(r: &wit::ObjectRef) -> Self {
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
    /// A second object involved.
    pub related: Option<ObjectKey>,
    /// Severity.
    pub event_type: EventType,
    /// Reason.
    pub reason: String,
    /// What the controller did ("Reconcile" when the guest left it empty).
    pub action: String,
    /// Message.
    pub message: String,
}

/// One checked write. Every variant but `Apply` is pinned to the uid of the
/// object as the snapshot saw it (`Delete` when the snapshot saw it), so it
/// can never create or touch a namesake.
#[derive(Debug, Clone, PartialEq)]
pub enum PlannedWrite {
    /// Create-or-update server-side apply.
    Apply {
        /// The object.
        target: ObjectKey,
        /// The document.
        doc: Json,
    },
    /// Update-only server-side apply (the document carries the uid).
    Update {
        /// The object.
        target: ObjectKey,
        /// The uid the snapshot saw.
        uid: String,
        /// The document, `metadata.uid` set.
        doc: Json,
    },
    /// Server-side apply to the status subresource.
    ApplyStatus {
        /// The object.
        target: ObjectKey,
        /// The uid the snapshot saw.
        uid: String,
        /// The document, `metadata.uid` set.
        doc: Json,
    },
    /// Delete, with a uid precondition when the snapshot saw the object.
    Delete {
        /// The object.
        target: ObjectKey,
        /// The uid the snapshot saw.
        uid: Option<String>,
    },
    /// Add a finalizer.
    AddFinalizer {
        /// The object.
        target: ObjectKey,
        /// The uid the snapshot saw.
        uid: String,
        /// The finalizer.
        finalizer: String,
    },
    /// Remove a finalizer (exactly that entry).
    RemoveFinalizer {
        /// The object.
        target: ObjectKey,
        /// The uid the snapshot saw.
        uid: String,
        /// The finalizer.
        finalizer: String,
    },
    /// Create-or-update server-side apply of an entry-wise aggregate's
    /// document ([`EntryWrite::doc`]), with the entries that changed since
    /// the previous plan for it, so the actuator can write only those.
    ApplyEntries {
        /// The object.
        target: ObjectKey,
        /// The document, as its frame, its entries and what changed.
        entries: Arc<EntryWrite>,
    },
}

/// An entry-wise aggregate's document: the frame `render` returns with
/// the entry field left out, and every entry the groups render to. Its
/// whole document is the one `render` over every group returns (the guest
/// promised so by declaring the field).
#[derive(Debug, Clone, PartialEq)]
pub struct EntryWrite {
    /// The top-level field holding the entries.
    pub field: String,
    /// The document without `field`.
    pub frame: Json,
    /// Every entry (shared with the aggregate's state, never edited once
    /// handed out).
    pub all: Arc<BTreeMap<String, String>>,
    /// The entries whose value changed since the previous plan handed out
    /// for this object (None: the entry is gone).
    pub changed: Vec<(String, Option<String>)>,
    /// The previous plans' entries are unknown (the first plan of this
    /// aggregate, or after a render whose changes were lost): every entry
    /// may have changed.
    pub complete: bool,
}

impl EntryWrite {
    /// The whole document: the frame with `field` holding every entry
    /// (an empty map when there are none).
    pub fn doc(&self) -> Json {
        let mut doc = self.frame.clone();
        if let Some(obj) = doc.as_object_mut() {
            let entries: serde_json::Map<String, Json> = self
                .all
                .iter()
                .map(|(k, v)| (k.clone(), Json::String(v.clone())))
                .collect();
            obj.insert(self.field.clone(), Json::Object(entries));
        }
        doc
    }
}

impl PlannedWrite {
    /// The object written.
    pub fn target(&self) -> &ObjectKey {
        match self {
            PlannedWrite::Apply { target, .. }
            | PlannedWrite::ApplyEntries { target, .. }
            | PlannedWrite::Update { target, .. }
            | PlannedWrite::ApplyStatus { target, .. }
            | PlannedWrite::Delete { target, .. }
            | PlannedWrite::AddFinalizer { target, .. }
            | PlannedWrite::RemoveFinalizer { target, .. } => target,
        }
    }

    /// The contract's name for this kind of write.
    pub fn verb(&self) -> &'static str {
        match self {
            PlannedWrite::Apply { .. } | PlannedWrite::ApplyEntries { .. } => "apply",
            PlannedWrite::Update { .. } => "update",
            PlannedWrite::ApplyStatus { .. } => "apply-status",
            PlannedWrite::Delete { .. } => "delete",
            PlannedWrite::AddFinalizer { .. } => "add-finalizer",
            PlannedWrite::RemoveFinalizer { .. } => "remove-finalizer",
        }
    }
}

/// A checked plan.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidatedPlan {
    /// Writes, in the guest's order.
    pub writes: Vec<PlannedWrite>,
    /// Events to record.
    pub events: Vec<PlannedEvent>,
    /// Requeue delay.
    pub requeue_after: Option<Duration>,
}

/// The uid of `key` as the snapshot saw it: from any watch of its group and
/// kind that holds it.
pub fn seen_uid(
    manifest: &GuestManifest,
    view: &SnapshotView<'_>,
    key: &ObjectKey,
) -> Option<String> {
    let ns = key.namespace.as_deref().unwrap_or("");
    manifest
        .watches
        .iter()
        .enumerate()
        .filter(|(_, w)| w.gvk.group == key.gvk.group && w.gvk.kind == key.gvk.kind)
        .find_map(|(w, _)| view.find(u32::try_from(w).ok()?, ns, &key.name))
        .map(|o| view.uid(o).to_string())
        .filter(|uid| !uid.is_empty())
}

fn parse_doc(index: usize, verb: &'static str, doc: &str) -> Result<(ObjectKey, Json), PlanError> {
    let obj: Json = serde_json::from_str(doc).map_err(|e| PlanError::NotAnObject {
        index,
        verb,
        problem: e.to_string(),
    })?;
    if !obj.is_object() {
        return Err(PlanError::NotAnObject {
            index,
            verb,
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
    let missing = |field| PlanError::MissingField { index, verb, field };
    let api_version = text("apiVersion").ok_or(missing("apiVersion"))?;
    let kind = text("kind").ok_or(missing("kind"))?;
    let name = meta("name").ok_or(missing("metadata.name"))?;
    let key = ObjectKey {
        gvk: Gvk::from_api_version(api_version, kind),
        namespace: meta("namespace").map(str::to_string),
        name: name.to_string(),
    };
    check_names(
        || format!("writes[{index}] ({verb})"),
        ("metadata.name", "metadata.namespace"),
        &key,
    )?;
    Ok((key, obj))
}

/// Refuses a key whose name or namespace is not a valid object name
/// (`fields`: how the name and the namespace are called where `at` is).
fn check_names(
    at: impl Fn() -> String,
    fields: (&'static str, &'static str),
    key: &ObjectKey,
) -> Result<(), PlanError> {
    if let Some(problem) = object_name_problem(&key.gvk, &key.name) {
        return Err(PlanError::BadName {
            at: at(),
            field: fields.0,
            value: shown(&key.name),
            problem: format!("is not a valid {} name: {problem}", key.gvk.kind),
        });
    }
    if let Some(ns) = &key.namespace {
        if let Some(problem) = namespace_problem(ns) {
            return Err(PlanError::BadName {
                at: at(),
                field: fields.1,
                value: shown(ns),
                problem: format!("is not a valid namespace name: {problem}"),
            });
        }
    }
    Ok(())
}

fn check_ref(index: usize, verb: &'static str, r: &wit::ObjectRef) -> Result<ObjectKey, PlanError> {
    let missing = |field| PlanError::MissingField { index, verb, field };
    if r.api_version.is_empty() {
        return Err(missing("apiVersion"));
    }
    if r.kind.is_empty() {
        return Err(missing("kind"));
    }
    if r.name.is_empty() {
        return Err(missing("name"));
    }
    let key = ObjectKey::from_ref(r);
    check_names(
        || format!("writes[{index}] ({verb})"),
        ("name", "namespace"),
        &key,
    )?;
    Ok(key)
}

fn with_uid(mut doc: Json, uid: &str) -> Json {
    if let Some(meta) = doc
        .as_object_mut()
        .map(|o| {
            o.entry("metadata")
                .or_insert_with(|| Json::Object(Default::default()))
        })
        .and_then(Json::as_object_mut)
    {
        meta.insert("uid".into(), Json::String(uid.to_string()));
    }
    doc
}

/// Checks a plan against the manifest's allowlist and the snapshot the
/// guest was given (pinned writes take the uid it saw).
pub fn validate(
    plan: &wit::Plan,
    manifest: &GuestManifest,
    seen: &SnapshotView<'_>,
) -> Result<ValidatedPlan, PlanError> {
    let mut writes = Vec::with_capacity(plan.writes.len());
    let mut once = std::collections::BTreeSet::new();
    let pinned = |verb: &'static str, key: &ObjectKey| {
        seen_uid(manifest, seen, key).ok_or_else(|| PlanError::NotSeen {
            verb,
            gvk: key.gvk.to_string(),
            target: key.target(),
        })
    };
    for (index, w) in plan.writes.iter().enumerate() {
        let write = match w {
            wit::Write::Apply(doc) => {
                let (target, doc) = parse_doc(index, "apply", doc)?;
                check_allowed("apply", &target, manifest)?;
                check_data_keys(index, &target, &doc)?;
                PlannedWrite::Apply { target, doc }
            }
            wit::Write::Update(doc) => {
                let (target, doc) = parse_doc(index, "update", doc)?;
                check_allowed("update", &target, manifest)?;
                check_data_keys(index, &target, &doc)?;
                let uid = pinned("update", &target)?;
                let doc = with_uid(doc, &uid);
                PlannedWrite::Update { target, uid, doc }
            }
            wit::Write::ApplyStatus(doc) => {
                let (target, doc) = parse_doc(index, "apply-status", doc)?;
                if !manifest.may_write_status(
                    &target.gvk,
                    target.namespace.as_deref(),
                    &target.name,
                ) {
                    return Err(PlanError::StatusNotAllowed {
                        gvk: target.gvk.to_string(),
                        target: target.target(),
                    });
                }
                let uid = pinned("apply-status", &target)?;
                let doc = with_uid(doc, &uid);
                PlannedWrite::ApplyStatus { target, uid, doc }
            }
            wit::Write::Delete(r) => {
                let target = check_ref(index, "delete", r)?;
                check_allowed("delete", &target, manifest)?;
                let uid = seen_uid(manifest, seen, &target);
                PlannedWrite::Delete { target, uid }
            }
            wit::Write::AddFinalizer(f) | wit::Write::RemoveFinalizer(f) => {
                let add = matches!(w, wit::Write::AddFinalizer(_));
                let verb = if add {
                    "add-finalizer"
                } else {
                    "remove-finalizer"
                };
                let target = check_ref(index, verb, &f.target)?;
                if !is_qualified_finalizer(&f.finalizer) {
                    return Err(PlanError::BadFinalizer {
                        index,
                        verb,
                        finalizer: f.finalizer.clone(),
                    });
                }
                // A watch's declared finalizer is the host's to add and the
                // guest's to release: no write rule needed for it.
                if !manifest.declares_finalizer(
                    &target.gvk,
                    target.namespace.as_deref(),
                    &f.finalizer,
                ) {
                    check_allowed(verb, &target, manifest)?;
                }
                let uid = pinned(verb, &target)?;
                let finalizer = f.finalizer.clone();
                if add {
                    PlannedWrite::AddFinalizer {
                        target,
                        uid,
                        finalizer,
                    }
                } else {
                    PlannedWrite::RemoveFinalizer {
                        target,
                        uid,
                        finalizer,
                    }
                }
            }
        };
        let what = match &write {
            PlannedWrite::Apply { .. }
            | PlannedWrite::ApplyEntries { .. }
            | PlannedWrite::Update { .. } => "apply/update".to_string(),
            PlannedWrite::ApplyStatus { .. } => "status".to_string(),
            PlannedWrite::Delete { .. } => "delete".to_string(),
            PlannedWrite::AddFinalizer { finalizer, .. }
            | PlannedWrite::RemoveFinalizer { finalizer, .. } => format!("finalizer {finalizer}"),
        };
        if !once.insert((write.target().clone(), what.clone())) {
            return Err(PlanError::Duplicate {
                gvk: write.target().gvk.to_string(),
                target: write.target().target(),
                what,
            });
        }
        writes.push(write);
    }
    let mut events = Vec::with_capacity(plan.events.len());
    for (index, e) in plan.events.iter().enumerate() {
        if e.reason.is_empty() {
            return Err(PlanError::BadEvent {
                index,
                problem: "empty reason",
            });
        }
        let complete = |r: &wit::ObjectRef| {
            !(r.name.is_empty() || r.kind.is_empty() || r.api_version.is_empty())
        };
        if !complete(&e.regarding) {
            return Err(PlanError::BadEvent {
                index,
                problem: "regarding needs apiVersion, kind and name",
            });
        }
        if e.related.as_ref().is_some_and(|r| !complete(r)) {
            return Err(PlanError::BadEvent {
                index,
                problem: "related needs apiVersion, kind and name",
            });
        }
        let regarding = ObjectKey::from_ref(&e.regarding);
        check_names(
            || format!("events[{index}].regarding"),
            ("name", "namespace"),
            &regarding,
        )?;
        let related = e.related.as_ref().map(ObjectKey::from_ref);
        if let Some(r) = &related {
            check_names(
                || format!("events[{index}].related"),
                ("name", "namespace"),
                r,
            )?;
        }
        events.push(PlannedEvent {
            regarding,
            related,
            event_type: match e.event_type {
                wit::EventType::Normal => EventType::Normal,
                wit::EventType::Warning => EventType::Warning,
            },
            reason: e.reason.clone(),
            action: if e.action.is_empty() {
                "Reconcile".to_string()
            } else {
                e.action.clone()
            },
            message: e.message.clone(),
        });
    }
    Ok(ValidatedPlan {
        writes,
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

/// Refuses a core ConfigMap or Secret whose data keys the API server would
/// refuse, naming the first such key.
fn check_data_keys(index: usize, target: &ObjectKey, doc: &Json) -> Result<(), PlanError> {
    let fields: &[&'static str] = match (target.gvk.group.as_str(), target.gvk.kind.as_str()) {
        ("", "ConfigMap") => &["data", "binaryData"],
        ("", "Secret") => &["data", "stringData"],
        _ => return Ok(()),
    };
    for field in fields {
        let Some(map) = doc.get(*field).and_then(Json::as_object) else {
            continue;
        };
        for key in map.keys() {
            if let Err(problem) = check_config_map_key(key) {
                return Err(PlanError::BadDataKey {
                    index,
                    object: target.to_string(),
                    field,
                    key: key.chars().take(64).collect(),
                    problem,
                });
            }
        }
    }
    Ok(())
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

mod json;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
