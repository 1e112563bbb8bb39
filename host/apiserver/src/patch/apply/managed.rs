//! Managers and their `metadata.managedFields` entries: apimachinery's
//! manager identity (manager, operation, apiVersion for Update entries,
//! subresource), decoding and encoding of `FieldsV1` entries in the
//! server's order, the `stripMeta` identity fields no entry ever owns, the
//! cap on Update entries and the wording of apply conflicts.
//!
//! This module owns *how ownership is recorded*; it never decides who owns
//! what (the apply and update steps in the parent module do) and never
//! touches an object beyond its `metadata.managedFields`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{ANCIENT_CHANGES_MANAGER, MAX_UPDATE_MANAGERS};
use crate::patch::fields::{path_string, FieldPath, FieldSet, PathElement};
use crate::patch::{ApplyError, FieldConflict};

/// The `operation` of a server-side apply entry.
pub(super) const APPLY: &str = "Apply";
/// The `operation` of every other write's entry.
pub(super) const UPDATE: &str = "Update";

/// Identity fields the real server never records as owned
/// (apimachinery `stripMetaManager`); removal is exact, not recursive, so
/// `metadata.labels` etc. stay owned.
const STRIPPED: &[&[&str]] = &[
    &["apiVersion"],
    &["kind"],
    &["metadata"],
    &["metadata", "name"],
    &["metadata", "namespace"],
    &["metadata", "creationTimestamp"],
    &["metadata", "selfLink"],
    &["metadata", "uid"],
    &["metadata", "clusterName"],
    &["metadata", "generation"],
    &["metadata", "managedFields"],
    &["metadata", "resourceVersion"],
];

/// apimachinery's manager identity: manager, operation, apiVersion (Update
/// only) and subresource.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct ManagerKey {
    manager: String,
    operation: String,
    api_version: String,
    subresource: String,
}

impl ManagerKey {
    pub(super) fn new(
        manager: &str,
        operation: &str,
        api_version: &str,
        subresource: Option<&str>,
    ) -> Self {
        Self {
            manager: manager.to_owned(),
            operation: operation.to_owned(),
            api_version: if operation == APPLY {
                String::new()
            } else {
                api_version.to_owned()
            },
            subresource: subresource.unwrap_or_default().to_owned(),
        }
    }

    /// The JSON identifier apimachinery sorts conflicts by.
    fn identifier(&self) -> String {
        let mut s = format!(
            "{{\"manager\":{},\"operation\":{}",
            Value::String(self.manager.clone()),
            Value::String(self.operation.clone())
        );
        if !self.api_version.is_empty() {
            s.push_str(&format!(
                ",\"apiVersion\":{}",
                Value::String(self.api_version.clone())
            ));
        }
        if !self.subresource.is_empty() {
            s.push_str(&format!(
                ",\"subresource\":{}",
                Value::String(self.subresource.clone())
            ));
        }
        s.push('}');
        s
    }

    /// apimachinery `printManager`: `"mgr"`, `"mgr" with subresource
    /// "status"`, plus ` using v1` for Update managers.
    pub(super) fn printed(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == UPDATE {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }
}

#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) api_version: String,
    pub(super) time: Option<String>,
    pub(super) set: FieldSet,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Managers {
    pub(super) entries: BTreeMap<ManagerKey, Entry>,
}

impl Managers {
    /// Strips identity fields from every set and drops managers that own
    /// nothing.
    pub(super) fn finish(&mut self) {
        for e in self.entries.values_mut() {
            e.set = strip(&e.set);
        }
        self.entries.retain(|_, e| !e.set.is_empty());
        self.cap_update_managers();
    }

    /// apimachinery's `capManagersManager`: beyond [`MAX_UPDATE_MANAGERS`]
    /// Update entries, the oldest are merged per apiVersion into an
    /// [`ANCIENT_CHANGES_MANAGER`] bucket entry.
    fn cap_update_managers(&mut self) {
        let mut updaters: Vec<(Option<String>, ManagerKey)> = self
            .entries
            .iter()
            .filter(|(k, _)| k.operation != APPLY)
            .map(|(k, e)| (e.time.clone(), k.clone()))
            .collect();
        if updaters.len() <= MAX_UPDATE_MANAGERS {
            return;
        }
        updaters.sort_by(|(ta, ka), (tb, kb)| {
            ta.cmp(tb)
                .then_with(|| ka.identifier().cmp(&kb.identifier()))
        });
        let mut length = updaters.len();
        let mut first_by_version: BTreeMap<String, ManagerKey> = BTreeMap::new();
        for (time, key) in updaters {
            if length <= MAX_UPDATE_MANAGERS {
                break;
            }
            let Some(entry) = self.entries.get(&key).cloned() else {
                continue;
            };
            let version = entry.api_version.clone();
            let bucket = ManagerKey::new(ANCIENT_CHANGES_MANAGER, UPDATE, &version, None);
            match first_by_version.get(&version) {
                Some(first) => {
                    if !self.entries.contains_key(&bucket) {
                        if let Some(first_entry) = self.entries.remove(first) {
                            self.entries.insert(bucket.clone(), first_entry);
                        }
                    }
                    self.entries.remove(&key);
                    if let Some(b) = self.entries.get_mut(&bucket) {
                        b.set = entry.set.union(&b.set);
                        b.time = time;
                    }
                    length -= 1;
                }
                None => {
                    first_by_version.insert(version, key);
                }
            }
        }
    }

    /// Encodes the entries sorted as apimachinery does: by operation, time,
    /// manager, apiVersion, subresource.
    pub(super) fn encode(&self) -> Vec<Value> {
        let mut list: Vec<(&ManagerKey, &Entry)> = self.entries.iter().collect();
        list.sort_by(|(ka, ea), (kb, eb)| {
            ka.operation
                .cmp(&kb.operation)
                .then_with(|| ea.time.cmp(&eb.time))
                .then_with(|| ka.manager.cmp(&kb.manager))
                .then_with(|| ea.api_version.cmp(&eb.api_version))
                .then_with(|| ka.subresource.cmp(&kb.subresource))
        });
        list.into_iter()
            .map(|(k, e)| {
                let mut obj = Map::new();
                obj.insert("manager".into(), Value::String(k.manager.clone()));
                obj.insert("operation".into(), Value::String(k.operation.clone()));
                obj.insert("apiVersion".into(), Value::String(e.api_version.clone()));
                if let Some(t) = &e.time {
                    obj.insert("time".into(), Value::String(t.clone()));
                }
                obj.insert("fieldsType".into(), Value::String("FieldsV1".into()));
                obj.insert("fieldsV1".into(), e.set.to_fields_v1());
                if !k.subresource.is_empty() {
                    obj.insert("subresource".into(), Value::String(k.subresource.clone()));
                }
                Value::Object(obj)
            })
            .collect()
    }
}

pub(super) fn decode_managed_fields(obj: &Value) -> Result<Managers, String> {
    let mut managers = Managers::default();
    let items = match obj.pointer("/metadata/managedFields") {
        None | Some(Value::Null) => return Ok(managers),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(format!(
                "metadata.managedFields must be a list, got {other}"
            ))
        }
    };
    for item in items {
        let s = |k: &str| item.get(k).and_then(Value::as_str);
        let manager = s("manager").unwrap_or_default();
        let operation = s("operation").unwrap_or_default();
        let api_version = s("apiVersion").unwrap_or_default();
        match s("fieldsType") {
            Some("FieldsV1") => {}
            other => {
                return Err(format!(
                    "invalid fieldsType {other:?} for manager {manager:?}"
                ))
            }
        }
        let set = FieldSet::from_fields_v1(item.get("fieldsV1").unwrap_or(&Value::Null))
            .map_err(|e| format!("manager {manager:?}: {e}"))?;
        let key = ManagerKey::new(manager, operation, api_version, s("subresource"));
        let entry = managers.entries.entry(key).or_insert_with(|| Entry {
            api_version: api_version.to_owned(),
            time: s("time").map(str::to_owned),
            set: FieldSet::new(),
        });
        entry.set = entry.set.union(&set);
    }
    Ok(managers)
}

pub(super) fn remove_managed_fields(obj: &mut Value) {
    if let Some(Value::Object(meta)) = obj.get_mut("metadata") {
        meta.remove("managedFields");
    }
}

pub(super) fn without_managed_fields(obj: &Value) -> Value {
    let mut copy = obj.clone();
    remove_managed_fields(&mut copy);
    copy
}

pub(super) fn set_managed_fields(obj: &mut Value, entries: Vec<Value>) {
    let Value::Object(root) = obj else { return };
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        if entries.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(entries));
        }
    }
}

pub(super) fn strip(set: &FieldSet) -> FieldSet {
    let mut stripped = FieldSet::new();
    for p in STRIPPED {
        let path: FieldPath = p
            .iter()
            .map(|s| PathElement::Field((*s).to_owned()))
            .collect();
        stripped.insert(&path);
    }
    set.difference(&stripped)
}

pub(super) fn conflict_error(conflicts: &[(ManagerKey, FieldSet)]) -> ApplyError {
    let mut sorted: Vec<&(ManagerKey, FieldSet)> = conflicts.iter().collect();
    sorted.sort_by_key(|(k, _)| k.identifier());
    let mut list = Vec::new();
    let mut lines = Vec::new();
    for (key, set) in sorted {
        lines.push(format!("conflicts with {}:", key.printed()));
        for path in set.paths() {
            let field = path_string(&path);
            lines.push(format!("- {field}"));
            list.push(FieldConflict {
                manager: key.manager.clone(),
                field,
                message: format!("conflict with {}", key.printed()),
            });
        }
    }
    let message = if let [only] = list.as_slice() {
        format!(
            "Apply failed with 1 conflict: {}: {}",
            only.message, only.field
        )
    } else {
        format!(
            "Apply failed with {} conflicts: {}",
            list.len(),
            lines.join("\n")
        )
    };
    ApplyError::Conflict {
        conflicts: list,
        message,
    }
}
