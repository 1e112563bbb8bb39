//! Server-side apply and field ownership (`metadata.managedFields`),
//! following structured-merge-diff and apimachinery's field manager: the
//! merge, prune, conflict and ownership-transfer rules of `Updater.Apply`
//! and `Updater.Update`, the manager identity and entry ordering of
//! `managedfields`, the `stripMeta` identity fields and the
//! `before-first-apply` manager.
//!
//! This module owns the entry points ([`server_side_apply`],
//! [`record_update`] and their `_with` variants), their [`ApplyOptions`]
//! and the checks of an applied configuration; it strings together the
//! steps its submodules own: `managed` (managers, their entries and the
//! `managedFields` encoding, conflict messages), `fieldset` (the field set
//! of a configuration and the comparison of two objects) and `merge` (the
//! merge, prune and reset steps that build the applied object). It never
//! touches storage or HTTP and never decides which fields a registry
//! strategy resets: callers say so in [`ApplyOptions`].

mod fieldset;
mod managed;
mod merge;
#[cfg(test)]
mod tests;

use serde_json::{Map, Value};

use self::fieldset::{compare, compare_without_managed_fields, to_field_set};
use self::managed::{
    conflict_error, decode_managed_fields, decode_sent_managed_fields, set_managed_fields, strip,
    strip_paths, take_managed_fields, without_managed_fields, Entry, ManagerKey, Managers, Sent,
    APPLY, UPDATE,
};
use self::merge::{drop_applied_nulls, merge_into, prune, reset_ignored};
use super::error::ApplyError;
use super::fields::{FieldPath, FieldSet, PathElement};
use super::kind::ObjectKind;
use super::schema::{is_builtin, SchemaOverrides, Types};

/// The manager that is given ownership of every existing field when an
/// object without any `managedFields` is applied to for the first time
/// (apimachinery's `skipNonAppliedManager`).
pub const BEFORE_FIRST_APPLY_MANAGER: &str = "before-first-apply";

pub use managed::{ANCIENT_CHANGES_MANAGER, MAX_UPDATE_MANAGERS};

/// Per-request settings of an apply or update beyond the contract's
/// defaults (main resource, nothing ignored).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplyOptions {
    /// The subresource written (`Some("status")` for `/status`); recorded
    /// in the manager's entry and part of its identity.
    pub subresource: Option<String>,
    /// Top-level field paths (e.g. `["status"]` for a main-resource write
    /// of a kind with a status subresource, `["spec"]` for a status write)
    /// that the registry strategy resets. They are never owned, never
    /// conflict, and an apply keeps their live value.
    pub ignored_fields: Vec<Vec<String>>,
    /// List and map semantics from the CRD schema of a custom resource;
    /// `None` uses the built-in table only.
    pub schema: Option<SchemaOverrides>,
}

impl ApplyOptions {
    /// Options for a write to the main resource of a kind that has a status
    /// subresource: `status` is ignored.
    #[must_use]
    pub fn main_resource_with_status() -> Self {
        Self {
            subresource: None,
            ignored_fields: vec![vec!["status".to_owned()]],
            schema: None,
        }
    }

    /// Options for a write to the `status` subresource: `spec` is ignored
    /// and entries carry `subresource: "status"`.
    #[must_use]
    pub fn status_subresource() -> Self {
        Self {
            subresource: Some("status".to_owned()),
            ignored_fields: vec![vec!["spec".to_owned()]],
            schema: None,
        }
    }

    /// Sets the subresource.
    #[must_use]
    pub fn subresource(mut self, subresource: &str) -> Self {
        self.subresource = Some(subresource.to_owned());
        self
    }

    /// Uses the list and map semantics of a custom resource's CRD schema.
    #[must_use]
    pub fn schema(mut self, schema: SchemaOverrides) -> Self {
        self.schema = Some(schema);
        self
    }

    /// Adds an ignored field path (field names from the root).
    #[must_use]
    pub fn ignore(mut self, path: &[&str]) -> Self {
        self.ignored_fields
            .push(path.iter().map(|s| (*s).to_owned()).collect());
        self
    }

    fn ignored_set(&self) -> FieldSet {
        let mut set = FieldSet::new();
        for p in &self.ignored_fields {
            let path: FieldPath = p.iter().map(|s| PathElement::Field(s.clone())).collect();
            set.insert(&path);
        }
        set
    }
}

/// Applies `applied` for `manager` (server-side apply) and returns the new
/// object with updated `metadata.managedFields`.
///
/// `live` is `None` when the apply creates the object. The manager's `Apply`
/// entry afterwards owns exactly the fields of `applied` (minus identity
/// metadata); fields it owned before and omits now are deleted unless
/// another manager owns them; fields owned by another manager whose value
/// would change are conflicts unless `force`, which transfers them. The
/// result is unchanged apart from ownership when nothing differs, and the
/// entry's `time` is `now` only when the object changed (a no-op apply
/// keeps the old time, or has none for a new manager).
///
/// # Errors
///
/// [`ApplyError::Conflict`] when, without `force`, other managers own fields
/// whose value would change; [`ApplyError::Invalid`] when `applied` is not
/// an object of `kind`, sets `metadata.managedFields`, or has an
/// associative list item without its key or with a duplicate key.
pub fn server_side_apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    kind: &ObjectKind,
    now: &str,
) -> Result<Value, ApplyError> {
    server_side_apply_with(
        live,
        applied,
        manager,
        force,
        kind,
        now,
        &ApplyOptions::default(),
    )
}

/// [`server_side_apply`] with a subresource and ignored fields.
///
/// # Errors
///
/// As [`server_side_apply`].
#[allow(clippy::too_many_arguments)]
pub fn server_side_apply_with(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    kind: &ObjectKind,
    now: &str,
    options: &ApplyOptions,
) -> Result<Value, ApplyError> {
    validate_applied(applied, kind)?;
    let types = Types {
        kind,
        overrides: options.schema.as_ref(),
    };
    let api_version = kind.api_version();
    let subresource = options.subresource.as_deref();
    let ignored = options.ignored_set();

    let mut managers = match live {
        Some(obj) => decode_managed_fields(obj)
            .map_err(|e| ApplyError::Invalid(format!("failed to decode managed fields: {e}")))?,
        None => Managers::default(),
    };
    let base = live.map_or_else(|| Value::Object(Map::new()), without_managed_fields);

    if live.is_some() && managers.entries.is_empty() {
        let cmp = compare(&types, &Value::Object(Map::new()), &base);
        let set = strip(
            &cmp.added
                .union(&cmp.modified)
                .recursive_difference(&ignored),
        );
        if !set.is_empty() {
            managers.entries.insert(
                ManagerKey::new(BEFORE_FIRST_APPLY_MANAGER, UPDATE, &api_version, None),
                Entry::new(api_version.clone(), Some(now.to_owned()), set),
            );
        }
    }

    let config_set = to_field_set(&types, applied).map_err(ApplyError::Invalid)?;
    let config_set = if ignored.is_empty() {
        config_set
    } else {
        config_set.recursive_difference(&ignored)
    };
    let mut merged = base.clone();
    match applied.pointer("/metadata/managedFields") {
        None => merge_into(&types, &mut merged, applied),
        Some(_) => merge_into(&types, &mut merged, &without_managed_fields(applied)),
    }
    reset_ignored(&mut merged, &base, &options.ignored_fields);

    let key = ManagerKey::new(manager, APPLY, &api_version, subresource);
    let mut previous = managers.entries.remove(&key);
    // The set the applier gets, stripped now rather than by `finish`
    // (which changes nothing); `config_set` is it plus `stripped`.
    let mut mine = config_set;
    let stripped = strip_paths(&mut mine);
    // An applier that applies the same fields as last time gives up none:
    // the prune below would remove nothing (all it owned is still owned),
    // and its entry need be neither decoded nor encoded again.
    let same_fields = previous.as_ref().is_some_and(|p| p.is_encoded_set(&mine));
    if !same_fields {
        let last_set = previous
            .as_mut()
            .map(|e| e.set().clone())
            .unwrap_or_default();
        if !last_set.is_empty() {
            let mut config_set = mine.clone();
            for path in &stripped {
                config_set.insert(path);
            }
            let owned_after = managers
                .entries
                .values_mut()
                .fold(config_set, |acc, e| acc.union(e.set()));
            prune(
                &mut merged,
                &last_set,
                Some(&owned_after),
                &types,
                &mut Vec::new(),
            );
        }
    }
    drop_applied_nulls(&mut merged, applied);

    let cmp = compare(&types, &base, &merged).exclude(&ignored);
    let changed = cmp.added.union(&cmp.modified);
    let conflicts: Vec<(ManagerKey, FieldSet)> = managers
        .entries
        .iter()
        .filter_map(|(k, e)| {
            let c = strip(&e.intersection(&changed));
            (!c.is_empty()).then(|| (k.clone(), c))
        })
        .collect();
    if !force && !conflicts.is_empty() {
        return Err(conflict_error(&conflicts));
    }
    for (k, c) in &conflicts {
        if let Some(e) = managers.entries.get_mut(k) {
            e.remove_paths(c);
        }
    }
    for e in managers.entries.values_mut() {
        e.remove_paths(&cmp.removed);
    }

    // As apimachinery's managedFieldsUpdater: the time moves only when the
    // object changed, so a no-op apply by a new manager has no time.
    let (previous_time, previous_encoding) = match previous {
        Some(prev) => (prev.time.clone(), prev.into_encoded()),
        None => (None, None),
    };
    let time = if merged == base {
        previous_time
    } else {
        Some(now.to_owned())
    };
    let entry = match previous_encoding {
        Some(encoded) if same_fields => Entry::encoded(api_version, time, encoded),
        _ => Entry::new(api_version, time, mine),
    };
    managers.entries.insert(key, entry);
    managers.finish();
    set_managed_fields(&mut merged, managers.encode());
    Ok(merged)
}

/// Records the field ownership of a non-apply write (create, update,
/// merge/JSON/strategic patch) in `new`'s `metadata.managedFields`.
///
/// `manager` takes every field it added or changed relative to `old`
/// (`None` for a create), which removes them from all other managers; fields
/// it removed leave every manager. Entries are keyed by (manager,
/// operation, apiVersion, subresource), so repeated updates by one manager
/// combine; an entry's `time` moves to `now` only when it took fields.
/// Managed fields sent in `new` (as the request left them: sent with an
/// update, or the live ones a patch did not touch) are where ownership
/// starts from, as apimachinery's `decodeLiveOrNew`: entries that decode
/// replace the live ones; `[]` or a single empty entry `[{}]` resets them
/// (the object is then untracked, so even this write records nothing);
/// none, `null` or entries that do not decode (an operation other than
/// `Apply`/`Update`, no apiVersion, no `FieldsV1`) fall back to the live
/// ones. A subresource write always starts from the live ones. An existing
/// object without managed fields stays untracked.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    operation: &str,
    subresource: Option<&str>,
    now: &str,
) {
    let options = ApplyOptions {
        subresource: subresource.map(str::to_owned),
        ..ApplyOptions::default()
    };
    let kind = kind_of(new);
    record_update_with(old, new, manager, operation, now, &options, &kind);
}

/// [`record_update`] with ignored fields and an explicit kind (which
/// selects the associative lists; [`record_update`] reads it from `new`'s
/// `apiVersion` and `kind`).
pub fn record_update_with(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    operation: &str,
    now: &str,
    options: &ApplyOptions,
    kind: &ObjectKind,
) {
    let api_version = new
        .get("apiVersion")
        .and_then(Value::as_str)
        .map_or_else(|| kind.api_version(), str::to_owned);
    let subresource = options.subresource.as_deref();
    let ignored = options.ignored_set();
    let types = Types {
        kind,
        overrides: options.schema.as_ref(),
    };
    let old_managers = || {
        old.and_then(|o| decode_managed_fields(o).ok())
            .unwrap_or_default()
    };
    let sent = take_managed_fields(new);
    // A subresource write never sets managed fields (`decodeLiveOrNew`'s
    // ignoreManagedFieldsFromRequestObject).
    let mut managers = if subresource.is_some() {
        old_managers()
    } else {
        match decode_sent_managed_fields(sent) {
            Sent::Reset => Managers::default(),
            Sent::Managers(m) => m,
            Sent::Live => old_managers(),
        }
    };
    if old.is_some() && managers.entries.is_empty() {
        return;
    }
    let cmp = match old {
        Some(old) => compare_without_managed_fields(&types, old, new),
        None => compare(&types, &empty_object(kind, new), new),
    }
    .exclude(&ignored);
    let taken = cmp.added.union(&cmp.modified);
    for e in managers.entries.values_mut() {
        e.remove_paths(&taken);
        e.remove_paths(&cmp.removed);
    }
    let mine = strip(&taken);
    if !mine.is_empty() {
        let key = ManagerKey::new(manager, operation, &api_version, subresource);
        match managers.entries.get_mut(&key) {
            Some(prev) => {
                prev.add_paths(&mine);
                prev.api_version = api_version;
                prev.time = Some(now.to_owned());
            }
            None => {
                managers
                    .entries
                    .insert(key, Entry::new(api_version, Some(now.to_owned()), mine));
            }
        }
    }
    managers.finish();
    set_managed_fields(new, managers.encode());
}

/// What a create is compared against: the real server compares with the
/// empty typed object, in which the non-pointer `metadata`, `spec` and
/// `status` structs of built-in kinds already exist (so the creator's entry
/// has no `.` for them), while a custom resource starts from `{}`.
fn empty_object(kind: &ObjectKind, new: &Value) -> Value {
    let mut empty = Map::new();
    if is_builtin(kind) {
        for field in ["metadata", "spec", "status"] {
            if new.get(field).is_some_and(Value::is_object) {
                empty.insert(field.to_owned(), Value::Object(Map::new()));
            }
        }
    }
    Value::Object(empty)
}

/// The kind named by an object's `apiVersion` and `kind`.
fn kind_of(obj: &Value) -> ObjectKind {
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    ObjectKind::new(group, version, kind)
}

/// The checks the real server makes of an apply patch before converting
/// it: an object of exactly `kind`, without `metadata.managedFields`.
fn validate_applied(applied: &Value, kind: &ObjectKind) -> Result<(), ApplyError> {
    let Value::Object(obj) = applied else {
        return Err(ApplyError::Invalid(
            "an apply patch must be an object".to_owned(),
        ));
    };
    let api_version = obj.get("apiVersion").and_then(Value::as_str);
    let obj_kind = obj.get("kind").and_then(Value::as_str);
    let (Some(api_version), Some(obj_kind)) = (api_version, obj_kind) else {
        return Err(ApplyError::Invalid(format!(
            "Object 'Kind' is missing in '{applied}'"
        )));
    };
    if api_version != kind.api_version() {
        return Err(ApplyError::Invalid(format!(
            "Incorrect version specified in apply patch. Specified patch version: {api_version}, expected: {}",
            kind.api_version()
        )));
    }
    if obj_kind != kind.kind {
        return Err(ApplyError::Invalid(format!(
            "Incorrect kind specified in apply patch. Specified patch kind: {obj_kind}, expected: {}",
            kind.kind
        )));
    }
    match applied.pointer("/metadata/managedFields") {
        None | Some(Value::Null) => Ok(()),
        Some(_) => Err(ApplyError::Invalid(
            "metadata.managedFields must be nil".to_owned(),
        )),
    }
}
