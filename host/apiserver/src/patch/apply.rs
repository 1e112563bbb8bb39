//! Server-side apply and field ownership (`metadata.managedFields`),
//! following structured-merge-diff and apimachinery's field manager: the
//! merge, prune, conflict and ownership-transfer rules of `Updater.Apply`
//! and `Updater.Update`, the manager identity and entry ordering of
//! `managedfields`, the `stripMeta` identity fields and the
//! `before-first-apply` manager.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::fields::{path_string, FieldPath, FieldSet, PathElement};
use super::schema::{ListKind, SchemaOverrides, Types, BUILTIN_GROUPS};
use super::{ApplyError, FieldConflict, ObjectKind};

/// The manager that is given ownership of every existing field when an
/// object without any `managedFields` is applied to for the first time
/// (apimachinery's `skipNonAppliedManager`).
pub const BEFORE_FIRST_APPLY_MANAGER: &str = "before-first-apply";

/// How many Update entries an object keeps before the oldest are merged
/// (apimachinery `DefaultMaxUpdateManagers`).
pub const MAX_UPDATE_MANAGERS: usize = 10;

/// The manager the oldest Update entries are merged into beyond
/// [`MAX_UPDATE_MANAGERS`].
pub const ANCIENT_CHANGES_MANAGER: &str = "ancient-changes";

const APPLY: &str = "Apply";
const UPDATE: &str = "Update";

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

/// Metadata the apply prune step never deletes, whoever owned it.
const NEVER_PRUNED: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "selfLink",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

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
                Entry {
                    api_version: api_version.clone(),
                    time: Some(now.to_owned()),
                    set,
                },
            );
        }
    }

    let config_set = to_field_set(&types, applied)
        .map_err(ApplyError::Invalid)?
        .recursive_difference(&ignored);
    let mut merged = merge(&types, Some(&base), &without_managed_fields(applied));
    reset_ignored(&mut merged, &base, &options.ignored_fields);

    let key = ManagerKey::new(manager, APPLY, &api_version, subresource);
    let previous = managers.entries.remove(&key);
    let last_set = previous.as_ref().map(|e| e.set.clone()).unwrap_or_default();
    let owned_after = managers
        .entries
        .values()
        .fold(config_set.clone(), |acc, e| acc.union(&e.set));
    if !last_set.is_empty() {
        prune(
            &mut merged,
            &last_set,
            Some(&owned_after),
            &types,
            &mut Vec::new(),
        );
    }
    drop_applied_nulls(&mut merged, applied);

    let cmp = compare(&types, &base, &merged).exclude(&ignored);
    let changed = cmp.added.union(&cmp.modified);
    let conflicts: Vec<(ManagerKey, FieldSet)> = managers
        .entries
        .iter()
        .filter_map(|(k, e)| {
            let c = strip(&e.set.intersection(&changed));
            (!c.is_empty()).then(|| (k.clone(), c))
        })
        .collect();
    if !force && !conflicts.is_empty() {
        return Err(conflict_error(&conflicts));
    }
    for (k, c) in &conflicts {
        if let Some(e) = managers.entries.get_mut(k) {
            e.set = e.set.difference(c);
        }
    }
    for e in managers.entries.values_mut() {
        e.set = e.set.difference(&cmp.removed);
    }

    // As apimachinery's managedFieldsUpdater: the time moves only when the
    // object changed, so a no-op apply by a new manager has no time.
    let time = if merged == base {
        previous.and_then(|prev| prev.time)
    } else {
        Some(now.to_owned())
    };
    managers.entries.insert(
        key,
        Entry {
            api_version,
            time,
            set: config_set,
        },
    );
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
/// Managed fields sent in `new` replace the live ones (as on the real
/// server), `[{}]` resets them, and an existing object without managed
/// fields stays untracked.
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
    let mut managers = if subresource.is_some() {
        old_managers()
    } else {
        match new.pointer("/metadata/managedFields") {
            Some(Value::Array(items))
                if items.len() == 1 && items[0] == Value::Object(Map::new()) =>
            {
                Managers::default()
            }
            _ => match decode_managed_fields(new) {
                Ok(m) if !m.entries.is_empty() => m,
                _ => old_managers(),
            },
        }
    };
    remove_managed_fields(new);
    if old.is_some() && managers.entries.is_empty() {
        return;
    }
    let lhs = old.map_or_else(|| empty_object(kind, new), without_managed_fields);
    let cmp = compare(&types, &lhs, new).exclude(&ignored);
    let taken = cmp.added.union(&cmp.modified);
    for e in managers.entries.values_mut() {
        e.set = e.set.difference(&taken).difference(&cmp.removed);
    }
    let mine = strip(&taken);
    if !mine.is_empty() {
        let key = ManagerKey::new(manager, operation, &api_version, subresource);
        let set = match managers.entries.get(&key) {
            Some(prev) => prev.set.union(&mine),
            None => mine,
        };
        managers.entries.insert(
            key,
            Entry {
                api_version,
                time: Some(now.to_owned()),
                set,
            },
        );
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
    if BUILTIN_GROUPS.contains(&kind.group.as_str()) {
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

// ---------------------------------------------------------------------------
// Managers and their entries.

/// apimachinery's manager identity: manager, operation, apiVersion (Update
/// only) and subresource.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ManagerKey {
    manager: String,
    operation: String,
    api_version: String,
    subresource: String,
}

impl ManagerKey {
    fn new(manager: &str, operation: &str, api_version: &str, subresource: Option<&str>) -> Self {
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
    fn printed(&self) -> String {
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
struct Entry {
    api_version: String,
    time: Option<String>,
    set: FieldSet,
}

#[derive(Debug, Clone, Default)]
struct Managers {
    entries: BTreeMap<ManagerKey, Entry>,
}

impl Managers {
    /// Strips identity fields from every set and drops managers that own
    /// nothing.
    fn finish(&mut self) {
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
    fn encode(&self) -> Vec<Value> {
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

fn decode_managed_fields(obj: &Value) -> Result<Managers, String> {
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

fn remove_managed_fields(obj: &mut Value) {
    if let Some(Value::Object(meta)) = obj.get_mut("metadata") {
        meta.remove("managedFields");
    }
}

fn without_managed_fields(obj: &Value) -> Value {
    let mut copy = obj.clone();
    remove_managed_fields(&mut copy);
    copy
}

fn set_managed_fields(obj: &mut Value, entries: Vec<Value>) {
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

fn strip(set: &FieldSet) -> FieldSet {
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

fn conflict_error(conflicts: &[(ManagerKey, FieldSet)]) -> ApplyError {
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

// ---------------------------------------------------------------------------
// Validation.

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

// ---------------------------------------------------------------------------
// Typed walks: field sets, comparison, merge, prune.

fn names_of(names: &[String]) -> Vec<&str> {
    names.iter().map(String::as_str).collect()
}

fn type_of_list(kind: &Types<'_>, names: &[String]) -> ListKind {
    kind.list(&names_of(names))
}

fn atomic_map(kind: &Types<'_>, names: &[String]) -> bool {
    kind.atomic_map(&names_of(names))
}

/// The path element of a list item, or why it has none.
fn item_element(list: &ListKind, index: usize, item: &Value) -> Result<PathElement, String> {
    match list {
        ListKind::Atomic => Ok(PathElement::Index(index)),
        ListKind::Set => Ok(PathElement::Value(item.to_string())),
        ListKind::Map(keys) => {
            let mut fields = Vec::with_capacity(keys.len());
            for (key, default) in keys {
                let value = match (item.get(key.as_str()), default) {
                    (Some(v), _) if !v.is_null() => v.to_string(),
                    (_, Some(d)) => d.clone(),
                    _ => {
                        return Err(format!(
                            "element {index}: associative list with keys has an element that omits key field {key:?} (and doesn't have default value)"
                        ))
                    }
                };
                fields.push((key.clone(), value));
            }
            fields.sort();
            Ok(PathElement::Key(fields))
        }
    }
}

fn find_item<'a>(items: &[(PathElement, &'a Value)], pe: &PathElement) -> Option<&'a Value> {
    items.iter().find(|(p, _)| p == pe).map(|(_, v)| *v)
}

fn get_path_mut<'a>(v: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    let mut cur = v;
    for k in path {
        cur = cur.get_mut(k)?;
    }
    Some(cur)
}

/// Items of a non-atomic list with their path elements, first occurrence
/// of a duplicate winning; items without a key fall back to their index.
fn index_items<'a>(list: &ListKind, items: &'a [Value]) -> Vec<(PathElement, &'a Value)> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let pe = item_element(list, i, item).unwrap_or(PathElement::Index(i));
        if seen.insert(pe.clone()) {
            out.push((pe, item));
        }
    }
    out
}

/// structured-merge-diff `ToFieldSet` of an applied configuration.
fn to_field_set(kind: &Types<'_>, applied: &Value) -> Result<FieldSet, String> {
    let mut set = FieldSet::new();
    field_set_node(kind, &mut Vec::new(), &mut Vec::new(), applied, &mut set)?;
    Ok(set)
}

fn field_set_node(
    kind: &Types<'_>,
    names: &mut Vec<String>,
    path: &mut FieldPath,
    v: &Value,
    set: &mut FieldSet,
) -> Result<(), String> {
    match v {
        Value::Object(_) if atomic_map(kind, names) => set.insert(path),
        Value::Object(m) => {
            for (k, child) in m {
                names.push(k.clone());
                path.push(PathElement::Field(k.clone()));
                // A null is owned like a scalar (below); an empty object owns
                // nothing, as structured-merge-diff's ToFieldSet does for
                // declared fields.
                field_set_node(kind, names, path, child, set)?;
                path.pop();
                names.pop();
            }
        }
        Value::Array(items) => {
            let list = type_of_list(kind, names);
            if list == ListKind::Atomic {
                set.insert(path);
                return Ok(());
            }
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                let pe = item_element(&list, i, item)
                    .map_err(|e| format!(".{}: {e}", names.join(".")))?;
                if !seen.insert(pe.clone()) {
                    return Err(format!(
                        ".{}: duplicate entries for key {pe}",
                        names.join(".")
                    ));
                }
                path.push(pe);
                field_set_node(kind, names, path, item, set)?;
                set.insert(path);
                path.pop();
            }
        }
        _ => set.insert(path),
    }
    Ok(())
}

/// What changed between two objects, as structured-merge-diff's `Compare`
/// reports it (added maps and list items are themselves members of
/// `added`, which is where the `.` entries of Update managers come from).
#[derive(Debug, Default)]
struct Comparison {
    added: FieldSet,
    modified: FieldSet,
    removed: FieldSet,
}

impl Comparison {
    fn exclude(self, ignored: &FieldSet) -> Self {
        Self {
            added: self.added.recursive_difference(ignored),
            modified: self.modified.recursive_difference(ignored),
            removed: self.removed.recursive_difference(ignored),
        }
    }
}

fn compare(kind: &Types<'_>, lhs: &Value, rhs: &Value) -> Comparison {
    let mut c = Comparison::default();
    compare_node(
        kind,
        &mut Vec::new(),
        &mut Vec::new(),
        Some(lhs),
        Some(rhs),
        &mut c,
    );
    c
}

fn compare_leaf(path: &FieldPath, lhs: Option<&Value>, rhs: Option<&Value>, c: &mut Comparison) {
    match (lhs, rhs) {
        (None, Some(_)) => c.added.insert(path),
        (Some(_), None) => c.removed.insert(path),
        (Some(a), Some(b)) if a != b => c.modified.insert(path),
        _ => {}
    }
}

fn compare_node(
    kind: &Types<'_>,
    names: &mut Vec<String>,
    path: &mut FieldPath,
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    c: &mut Comparison,
) {
    let shape = |v: Option<&Value>| match v {
        None => 0,
        Some(Value::Object(_)) => 1,
        Some(Value::Array(_)) => 2,
        Some(_) => 3,
    };
    let (ls, rs) = (shape(lhs), shape(rhs));
    let node = if ls == 0 {
        rs
    } else if rs == 0 || ls == rs {
        ls
    } else {
        3
    };
    match node {
        1 => {
            let l = lhs.and_then(Value::as_object);
            let r = rhs.and_then(Value::as_object);
            if atomic_map(kind, names)
                || (l.is_none_or(Map::is_empty) && r.is_none_or(Map::is_empty))
            {
                compare_leaf(path, lhs, rhs, c);
                return;
            }
            let mut keys: Vec<&String> = l.map(|m| m.keys().collect()).unwrap_or_default();
            if let Some(r) = r {
                keys.extend(r.keys().filter(|k| !l.is_some_and(|l| l.contains_key(*k))));
            }
            for k in keys {
                names.push(k.clone());
                path.push(PathElement::Field(k.clone()));
                compare_node(
                    kind,
                    names,
                    path,
                    l.and_then(|m| m.get(k)),
                    r.and_then(|m| m.get(k)),
                    c,
                );
                path.pop();
                names.pop();
            }
            post_item(path, lhs, rhs, c);
        }
        2 => {
            let empty = Vec::new();
            let l = lhs.and_then(Value::as_array);
            let r = rhs.and_then(Value::as_array);
            let list = type_of_list(kind, names);
            if list == ListKind::Atomic
                || (l.is_none_or(Vec::is_empty) && r.is_none_or(Vec::is_empty))
            {
                compare_leaf(path, lhs, rhs, c);
                return;
            }
            let li = index_items(&list, l.unwrap_or(&empty));
            let ri = index_items(&list, r.unwrap_or(&empty));
            let find = find_item;
            let mut pes: Vec<PathElement> = li.iter().map(|(p, _)| p.clone()).collect();
            pes.extend(
                ri.iter()
                    .map(|(p, _)| p.clone())
                    .filter(|p| find(&li, p).is_none()),
            );
            for pe in pes {
                let (lv, rv) = (find(&li, &pe), find(&ri, &pe));
                path.push(pe);
                compare_node(kind, names, path, lv, rv, c);
                path.pop();
            }
            post_item(path, lhs, rhs, c);
        }
        _ => compare_leaf(path, lhs, rhs, c),
    }
}

fn post_item(path: &FieldPath, lhs: Option<&Value>, rhs: Option<&Value>, c: &mut Comparison) {
    if lhs.is_none() {
        c.added.insert(path);
    } else if rhs.is_none() {
        c.removed.insert(path);
    }
}

/// structured-merge-diff `Merge` with the applied value winning: maps
/// merge, associative lists and sets merge item by item in the order
/// structured-merge-diff produces, everything else is replaced.
fn merge(kind: &Types<'_>, lhs: Option<&Value>, rhs: &Value) -> Value {
    merge_node(kind, &mut Vec::new(), lhs, rhs)
}

fn merge_node(
    kind: &Types<'_>,
    names: &mut Vec<String>,
    lhs: Option<&Value>,
    rhs: &Value,
) -> Value {
    match (lhs, rhs) {
        (Some(Value::Object(l)), Value::Object(r)) if !atomic_map(kind, names) => {
            let mut out = l.clone();
            for (k, rv) in r {
                names.push(k.clone());
                let merged = merge_node(kind, names, l.get(k), rv);
                names.pop();
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Some(Value::Array(l)), Value::Array(r)) => {
            let list = type_of_list(kind, names);
            if list == ListKind::Atomic || (l.is_empty() && r.is_empty()) {
                return rhs.clone();
            }
            Value::Array(merge_list(kind, names, &list, l, r))
        }
        _ => rhs.clone(),
    }
}

/// Port of structured-merge-diff's `visitListItems` ordering: live order,
/// with items shared with the applied list kept in the applied order and
/// new applied items inserted where the applied list puts them.
fn merge_list(
    kind: &Types<'_>,
    names: &mut Vec<String>,
    list: &ListKind,
    l: &[Value],
    r: &[Value],
) -> Vec<Value> {
    let lhs = index_items(list, l);
    let rhs = index_items(list, r);
    let find = find_item;
    let mut shared: std::collections::VecDeque<&PathElement> = rhs
        .iter()
        .map(|(p, _)| p)
        .filter(|p| find(&lhs, p).is_some())
        .collect();
    let mut next_shared = shared.pop_front();
    let mut merged_rhs = BTreeSet::new();
    let mut out = Vec::with_capacity(lhs.len().max(rhs.len()));
    let (mut li, mut ri) = (0, 0);
    let item = |names: &mut Vec<String>, lv: Option<&Value>, rv: Option<&Value>| match rv {
        Some(rv) => merge_node(kind, names, lv, rv),
        None => lv.cloned().unwrap_or(Value::Null),
    };
    while li < lhs.len() || ri < rhs.len() {
        if li < lhs.len() && ri < rhs.len() {
            let pe = &lhs[li].0;
            if *pe == rhs[ri].0 {
                merged_rhs.insert(pe.clone());
                out.push(item(names, Some(lhs[li].1), Some(rhs[ri].1)));
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if find(&rhs, pe).is_some() && next_shared.is_some_and(|n| n != pe) {
                li += 1;
                continue;
            }
        }
        if li < lhs.len() {
            let pe = &lhs[li].0;
            if find(&rhs, pe).is_none() {
                out.push(item(names, Some(lhs[li].1), None));
                li += 1;
                continue;
            } else if merged_rhs.contains(pe) {
                li += 1;
                continue;
            }
        }
        if ri < rhs.len() {
            let pe = &rhs[ri].0;
            merged_rhs.insert(pe.clone());
            out.push(item(names, find(&lhs, pe), Some(rhs[ri].1)));
            ri += 1;
            if next_shared.is_some_and(|n| n == pe) {
                next_shared = shared.pop_front();
            }
        }
    }
    out
}

/// Removes from `v` what the applier owned before (`last`) and nobody owns
/// now (`owned`), as structured-merge-diff's prune plus add-back steps do.
/// Returns true when `v` is a container that this emptied.
fn prune(
    v: &mut Value,
    last: &FieldSet,
    owned: Option<&FieldSet>,
    kind: &Types<'_>,
    names: &mut Vec<String>,
) -> bool {
    let covers = |set: Option<&FieldSet>, pe: &PathElement, member_only: bool| {
        set.is_some_and(|s| s.has_member(pe) || (!member_only && s.child(pe).is_some()))
    };
    match v {
        Value::Object(_) if atomic_map(kind, names) => false,
        Value::Object(m) => {
            let before = m.len();
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                let pe = PathElement::Field(k.clone());
                if !covers(Some(last), &pe, false) {
                    continue;
                }
                let protected = is_protected(names, &k);
                if !protected && !covers(owned, &pe, false) {
                    m.remove(&k);
                    continue;
                }
                if let (Some(lc), Some(child)) = (last.child(&pe), m.get_mut(&k)) {
                    names.push(k.clone());
                    let emptied = prune(child, lc, owned.and_then(|o| o.child(&pe)), kind, names);
                    names.pop();
                    if emptied && !protected && !owned.is_some_and(|o| o.has_member(&pe)) {
                        m.remove(&k);
                    }
                }
            }
            before > 0 && m.is_empty()
        }
        Value::Array(items) => {
            let list = type_of_list(kind, names);
            if list == ListKind::Atomic {
                return false;
            }
            let before = items.len();
            let mut kept = Vec::with_capacity(items.len());
            for (i, mut item) in std::mem::take(items).into_iter().enumerate() {
                let pe = item_element(&list, i, &item).unwrap_or(PathElement::Index(i));
                if covers(Some(last), &pe, true) && !covers(owned, &pe, true) {
                    continue;
                }
                if let Some(lc) = last.child(&pe) {
                    prune(&mut item, lc, owned.and_then(|o| o.child(&pe)), kind, names);
                }
                kept.push(item);
            }
            *items = kept;
            before > 0 && items.is_empty()
        }
        _ => false,
    }
}

fn is_protected(names: &[String], key: &str) -> bool {
    match names {
        [] => matches!(key, "apiVersion" | "kind" | "metadata"),
        [m] if m == "metadata" => NEVER_PRUNED.contains(&key),
        _ => false,
    }
}

/// Applied `null`s clear fields: where the applied configuration has a
/// `null` map value (outside lists), the merged object loses that key, as
/// decoding into the typed object does on the real server. Other nulls in
/// the live object are left alone.
fn drop_applied_nulls(merged: &mut Value, applied: &Value) {
    let (Value::Object(m), Value::Object(a)) = (merged, applied) else {
        return;
    };
    for (k, av) in a {
        if av.is_null() {
            if m.get(k).is_some_and(Value::is_null) {
                m.remove(k);
            }
        } else if let Some(child) = m.get_mut(k) {
            drop_applied_nulls(child, av);
        }
    }
}

/// Puts the live value of each ignored top-level path back, as the
/// registry strategy would.
fn reset_ignored(merged: &mut Value, base: &Value, ignored: &[Vec<String>]) {
    for path in ignored {
        let Some((last, parents)) = path.split_last() else {
            continue;
        };
        let original = parents
            .iter()
            .try_fold(base, |cur, k| cur.get(k))
            .and_then(|p| p.get(last))
            .cloned();
        if let Some(Value::Object(m)) = get_path_mut(merged, parents) {
            match original {
                Some(v) => {
                    m.insert(last.clone(), v);
                }
                None => {
                    m.remove(last);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    #[test]
    fn apply_creates_object_with_exact_apply_entry() {
        let mut applied = cm(json!({"a":"1"}));
        applied["metadata"]["labels"] = json!({"app":"x"});
        let got = ok(apply(None, &applied, "ctrl", false));
        assert_eq!(got["data"], json!({"a":"1"}));
        assert_eq!(
            got["metadata"]["managedFields"],
            json!([{
                "manager":"ctrl","operation":"Apply","apiVersion":"v1","time":T1,
                "fieldsType":"FieldsV1",
                "fieldsV1":{"f:data":{"f:a":{}},"f:metadata":{"f:labels":{"f:app":{}}}}
            }])
        );
    }

    #[test]
    fn apply_does_not_own_identity_metadata() {
        let got = ok(apply(
            None,
            &json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg"}}),
            "ctrl",
            false,
        ));
        assert_eq!(
            got.pointer("/metadata/managedFields"),
            None,
            "a manager owning nothing has no entry"
        );
        assert_eq!(got["metadata"]["name"], "cfg");
    }

    #[test]
    fn apply_omitting_owned_key_removes_it() {
        let v1 = ok(apply(None, &cm(json!({"a":"1","b":"2"})), "ctrl", false));
        let v2 = ok(apply(Some(&v1), &cm(json!({"a":"1"})), "ctrl", false));
        assert_eq!(v2["data"], json!({"a":"1"}));
        assert_eq!(
            owners(&v2),
            vec![("ctrl".into(), "Apply".into(), json!({"f:data":{"f:a":{}}}))]
        );
        // Omitting the whole map removes it when nobody else owns anything in it.
        let v3 = ok(apply(
            Some(&v2),
            &json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg"}}),
            "ctrl",
            false,
        ));
        assert_eq!(v3.get("data"), None);
        assert_eq!(v3["metadata"]["name"], "cfg");
        assert_eq!(v3.pointer("/metadata/managedFields"), None);
    }

    #[test]
    fn apply_omitting_key_owned_by_another_manager_only_disowns_it() {
        let v1 = ok(apply(None, &cm(json!({"a":"1"})), "one", false));
        let v2 = ok(apply(
            Some(&v1),
            &cm(json!({"a":"1","b":"2"})),
            "two",
            false,
        ));
        let v3 = ok(apply(Some(&v2), &cm(json!({"b":"2"})), "one", false));
        assert_eq!(v3["data"], json!({"a":"1","b":"2"}));
        assert_eq!(entry(&v3, "one")["fieldsV1"], json!({"f:data":{"f:b":{}}}));
        assert_eq!(
            entry(&v3, "two")["fieldsV1"],
            json!({"f:data":{"f:a":{},"f:b":{}}})
        );
    }

    #[test]
    fn apply_omitting_key_keeps_keys_set_by_updates() {
        let v1 = ok(apply(None, &cm(json!({"a":"1"})), "ctrl", false));
        let mut v2 = v1.clone();
        v2["data"]["manual"] = json!("x");
        record_update(Some(&v1), &mut v2, "kubectl-edit", "Update", None, T2);
        let v3 = ok(apply(Some(&v2), &cm(json!({})), "ctrl", false));
        assert_eq!(v3["data"], json!({"manual":"x"}));
    }

    #[test]
    fn apply_conflicts_with_other_manager_unless_forced() {
        let v1 = ok(apply(None, &cm(json!({"a":"1"})), "one", false));
        let (list, message) = conflicts(apply(Some(&v1), &cm(json!({"a":"2"})), "two", false));
        assert_eq!(
            message,
            "Apply failed with 1 conflict: conflict with \"one\": .data.a"
        );
        assert_eq!(
            list,
            vec![FieldConflict {
                manager: "one".into(),
                field: ".data.a".into(),
                message: "conflict with \"one\"".into()
            }]
        );
        let forced = ok(apply(Some(&v1), &cm(json!({"a":"2"})), "two", true));
        assert_eq!(forced["data"]["a"], "2");
        assert_eq!(
            owners(&forced),
            vec![("two".into(), "Apply".into(), json!({"f:data":{"f:a":{}}}))]
        );
    }

    #[test]
    fn apply_with_same_value_shares_ownership_without_conflict() {
        let v1 = ok(apply(None, &cm(json!({"a":"1"})), "one", false));
        let v2 = ok(apply(Some(&v1), &cm(json!({"a":"1"})), "two", false));
        assert_eq!(entry(&v2, "one")["fieldsV1"], json!({"f:data":{"f:a":{}}}));
        assert_eq!(entry(&v2, "two")["fieldsV1"], json!({"f:data":{"f:a":{}}}));
        // Now that both own it, neither can change it alone.
        let (_, message) = conflicts(apply(Some(&v2), &cm(json!({"a":"3"})), "one", false));
        assert_eq!(
            message,
            "Apply failed with 1 conflict: conflict with \"two\": .data.a"
        );
    }

    #[test]
    fn apply_conflict_messages_match_apimachinery_forms() {
        let mut live = cm(json!({"a":"1","b":"1"}));
        record_update(None, &mut live, "kubectl-edit", "Update", None, T0);
        let (_, one) = conflicts(apply(Some(&live), &cm(json!({"a":"2"})), "ctrl", false));
        assert_eq!(
            one,
            "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1: .data.a"
        );

        let live2 = ok(apply(Some(&live), &cm(json!({"c":"1"})), "other", false));
        let (list, many) = conflicts(apply(
            Some(&live2),
            &cm(json!({"a":"2","b":"2","c":"2"})),
            "ctrl",
            false,
        ));
        assert_eq!(
            many,
            "Apply failed with 3 conflicts: conflicts with \"kubectl-edit\" using v1:\n- .data.a\n- .data.b\nconflicts with \"other\":\n- .data.c"
        );
        assert_eq!(list.len(), 3);
        assert_eq!(list[2].message, "conflict with \"other\"");
    }

    #[test]
    fn subresource_managers_print_with_subresource() {
        let key = ManagerKey::new("kubelet", "Update", "v1", Some("status"));
        assert_eq!(
            key.printed(),
            "\"kubelet\" with subresource \"status\" using v1"
        );
        assert_eq!(
            ManagerKey::new("m", "Apply", "v1", Some("status")).printed(),
            "\"m\" with subresource \"status\""
        );
    }

    #[test]
    fn record_update_on_create_marks_new_maps_with_dot() {
        let mut obj = cm(json!({"a":"1"}));
        obj["metadata"]["labels"] = json!({"x":"y"});
        record_update(None, &mut obj, "kubectl-create", "Update", None, T0);
        assert_eq!(
            obj["metadata"]["managedFields"],
            json!([{
                "manager":"kubectl-create","operation":"Update","apiVersion":"v1","time":T0,
                "fieldsType":"FieldsV1",
                "fieldsV1":{"f:data":{".":{},"f:a":{}},"f:metadata":{"f:labels":{".":{},"f:x":{}}}}
            }])
        );
    }

    #[test]
    fn record_update_on_create_treats_builtin_spec_as_preexisting() {
        let mut pod = json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"app","image":"i"}]}});
        record_update(None, &mut pod, "kubectl-create", "Update", None, T0);
        assert_eq!(
            entry(&pod, "kubectl-create")["fieldsV1"],
            json!({"f:spec":{"f:containers":{".":{},"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{}}}}})
        );
        let mut cr = json!({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}});
        record_update(None, &mut cr, "kubectl-create", "Update", None, T0);
        assert_eq!(
            entry(&cr, "kubectl-create")["fieldsV1"],
            json!({"f:spec":{".":{},"f:size":{}}})
        );
    }

    #[test]
    fn apply_omitting_field_inside_owned_container_removes_only_that_field() {
        let v1 = ok(pod_apply(
            None,
            &pod(json!([{"name":"app","image":"i:1","args":["--x"]}])),
            "one",
            false,
        ));
        let v2 = ok(pod_apply(
            Some(&v1),
            &pod(json!([{"name":"app","image":"i:1"}])),
            "one",
            false,
        ));
        assert_eq!(
            v2["spec"]["containers"],
            json!([{"name":"app","image":"i:1"}])
        );
    }

    #[test]
    fn record_update_takes_changed_fields_from_other_managers() {
        let v1 = ok(apply(None, &cm(json!({"a":"1","b":"1"})), "ctrl", false));
        let mut v2 = v1.clone();
        v2["data"]["a"] = json!("2");
        record_update(Some(&v1), &mut v2, "kubectl-edit", "Update", None, T2);
        assert_eq!(entry(&v2, "ctrl")["fieldsV1"], json!({"f:data":{"f:b":{}}}));
        assert_eq!(
            entry(&v2, "kubectl-edit")["fieldsV1"],
            json!({"f:data":{"f:a":{}}})
        );
        // Apply entries sort before Update entries.
        assert_eq!(owners(&v2)[0].1, "Apply");
        // Removing a field via update removes it from its owner.
        let mut v3 = v2.clone();
        if let Some(d) = v3["data"].as_object_mut() {
            d.remove("b");
        }
        record_update(Some(&v2), &mut v3, "kubectl-edit", "Update", None, T2);
        assert_eq!(
            owners(&v3),
            vec![(
                "kubectl-edit".into(),
                "Update".into(),
                json!({"f:data":{"f:a":{}}})
            )]
        );
    }

    #[test]
    fn record_update_combines_entries_and_moves_time_only_when_taking_fields() {
        let mut v1 = cm(json!({"a":"1"}));
        record_update(None, &mut v1, "m", "Update", None, T0);
        let mut v2 = v1.clone();
        v2["data"]["b"] = json!("2");
        record_update(Some(&v1), &mut v2, "m", "Update", None, T1);
        assert_eq!(
            owners(&v2),
            vec![(
                "m".into(),
                "Update".into(),
                json!({"f:data":{".":{},"f:a":{},"f:b":{}}})
            )]
        );
        assert_eq!(entry(&v2, "m")["time"], T1);
        let mut v3 = v2.clone();
        record_update(Some(&v2), &mut v3, "m", "Update", None, T2);
        assert_eq!(entry(&v3, "m")["time"], T1, "a no-op update keeps the time");
        let mut v4 = v3.clone();
        record_update(Some(&v3), &mut v4, "noop", "Update", None, T2);
        assert_eq!(owners(&v4).len(), 1, "a no-op manager gets no entry");
    }

    #[test]
    fn record_update_status_subresource_entry_carries_subresource() {
        let kind = ObjectKind::new("", "v1", "Pod");
        let mut v1 = json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"i"}]}});
        record_update(None, &mut v1, "creator", "Update", None, T0);
        let mut v2 = v1.clone();
        v2["status"] = json!({"phase":"Running","conditions":[{"type":"Ready","status":"True"}]});
        record_update_with(
            Some(&v1),
            &mut v2,
            "kubelet",
            "Update",
            T1,
            &ApplyOptions::status_subresource(),
            &kind,
        );
        let e = entry(&v2, "kubelet");
        assert_eq!(e["subresource"], "status");
        assert_eq!(
            e["fieldsV1"],
            json!({"f:status":{".":{},"f:phase":{},"f:conditions":{".":{},"k:{\"type\":\"Ready\"}":{".":{},"f:status":{},"f:type":{}}}}})
        );
        assert_eq!(entry(&v2, "creator").get("subresource"), None);
    }

    #[test]
    fn record_update_honours_reset_and_untracked_objects() {
        let mut v1 = cm(json!({"a":"1"}));
        record_update(None, &mut v1, "m", "Update", None, T0);
        let mut reset = v1.clone();
        reset["metadata"]["managedFields"] = json!([{}]);
        record_update(Some(&v1), &mut reset, "m", "Update", None, T1);
        assert_eq!(
            reset.pointer("/metadata/managedFields"),
            None,
            "[{{}}] resets and the object stays untracked"
        );
        let mut again = reset.clone();
        again["data"]["b"] = json!("2");
        record_update(Some(&reset), &mut again, "m", "Update", None, T1);
        assert_eq!(again.pointer("/metadata/managedFields"), None);
        // Managed fields sent by the client replace the live ones.
        let mut sent = v1.clone();
        sent["metadata"]["managedFields"] = json!([{"manager":"x","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:a":{}}}}]);
        record_update(Some(&v1), &mut sent, "m", "Update", None, T1);
        assert_eq!(
            owners(&sent),
            vec![("x".into(), "Update".into(), json!({"f:data":{"f:a":{}}}))]
        );
    }

    #[test]
    fn apply_on_untracked_object_gives_existing_fields_to_before_first_apply() {
        let live = cm(json!({"a":"1"}));
        let (_, message) = conflicts(apply(Some(&live), &cm(json!({"a":"2"})), "ctrl", false));
        assert_eq!(
            message,
            "Apply failed with 1 conflict: conflict with \"before-first-apply\" using v1: .data.a"
        );
        let got = ok(apply(Some(&live), &cm(json!({"b":"2"})), "ctrl", false));
        assert_eq!(
            entry(&got, BEFORE_FIRST_APPLY_MANAGER)["fieldsV1"],
            json!({"f:data":{".":{},"f:a":{}}})
        );
    }

    #[test]
    fn apply_noop_keeps_time_and_object() {
        let v1 = ok(apply(None, &cm(json!({"a":"1"})), "ctrl", false));
        let v2 = ok(server_side_apply(
            Some(&v1),
            &cm(json!({"a":"1"})),
            "ctrl",
            false,
            &cm_kind(),
            T2,
        ));
        assert_eq!(v2, v1);
    }

    #[test]
    fn apply_noop_by_new_manager_records_entry_without_time() {
        let v1 = ok(apply(None, &cm(json!({"a":"1"})), "one", false));
        let v2 = ok(apply(Some(&v1), &cm(json!({"a":"1"})), "two", false));
        assert_eq!(entry(&v2, "two").get("time"), None);
        assert_eq!(entry(&v2, "two")["fieldsV1"], json!({"f:data":{"f:a":{}}}));
    }

    #[test]
    fn update_managers_beyond_ten_merge_into_ancient_changes() {
        let mut obj = cm(json!({}));
        record_update(
            None,
            &mut obj,
            "m00",
            "Update",
            None,
            "2026-01-01T00:00:00Z",
        );
        for i in 1..=11 {
            let mut next = obj.clone();
            next["data"][format!("k{i}")] = json!("v");
            record_update(
                Some(&obj),
                &mut next,
                &format!("m{i:02}"),
                "Update",
                None,
                &format!("2026-01-01T00:00:{i:02}Z"),
            );
            obj = next;
        }
        let names: Vec<String> = owners(&obj).into_iter().map(|(m, _, _)| m).collect();
        assert_eq!(names.len(), MAX_UPDATE_MANAGERS);
        assert!(
            names.contains(&ANCIENT_CHANGES_MANAGER.to_owned()),
            "{names:?}"
        );
        assert_eq!(
            entry(&obj, ANCIENT_CHANGES_MANAGER)["fieldsV1"],
            json!({"f:data":{".":{},"f:k1":{},"f:k2":{}}})
        );
        assert!(!names.contains(&"m01".to_owned()) && names.contains(&"m03".to_owned()));
    }

    #[test]
    fn apply_is_idempotent_for_every_kind() {
        let cases = [
            (
                ObjectKind::new("", "v1", "ConfigMap"),
                json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","labels":{"a":"b"}},"data":{"k":"v"},"binaryData":{"b":"AA=="}}),
            ),
            (
                ObjectKind::new("", "v1", "Pod"),
                json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","finalizers":["x/y"]},"spec":{"containers":[{"name":"a","image":"i","env":[{"name":"E","value":"1"}],"ports":[{"containerPort":80,"protocol":"UDP"}]}],"tolerations":[{"key":"k"}]}}),
            ),
            (
                ObjectKind::new("coordination.k8s.io", "v1", "Lease"),
                json!({"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l"},"spec":{"holderIdentity":"h","leaseDurationSeconds":15,"renewTime":"2026-01-01T00:00:00.000000Z"}}),
            ),
            (
                ObjectKind::new("apps", "v1", "Deployment"),
                json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"replicas":2,"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"a","image":"i"}]}}}}),
            ),
            (
                ObjectKind::new("example.com", "v1", "Widget"),
                json!({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"nested":{"deep":{"x":1}},"list":[{"a":1}]}}),
            ),
        ];
        for (kind, applied) in cases {
            let first = server_side_apply(None, &applied, "m", false, &kind, T0).expect("create");
            let second =
                server_side_apply(Some(&first), &applied, "m", false, &kind, T1).expect("re-apply");
            assert_eq!(first, second, "{} re-apply must be a no-op", kind.kind);
            let mut noop = second.clone();
            record_update(Some(&second), &mut noop, "other", "Update", None, T2);
            assert_eq!(
                noop, second,
                "{} no-op update must not change ownership",
                kind.kind
            );
        }
    }

    #[test]
    fn managed_fields_sort_apply_first_then_by_time() {
        let v1 = ok(server_side_apply(
            None,
            &cm(json!({"a":"1"})),
            "zeta",
            false,
            &cm_kind(),
            T1,
        ));
        let mut v2 = v1.clone();
        v2["data"]["b"] = json!("2");
        record_update(Some(&v1), &mut v2, "alpha", "Update", None, T0);
        let v3 = ok(server_side_apply(
            Some(&v2),
            &cm(json!({"c":"3"})),
            "beta",
            false,
            &cm_kind(),
            T2,
        ));
        let order: Vec<String> = owners(&v3).into_iter().map(|(m, _, _)| m).collect();
        assert_eq!(order, vec!["zeta", "beta", "alpha"]);
    }

    #[test]
    fn apply_rejects_invalid_configurations() {
        let mut with_mf = cm(json!({}));
        with_mf["metadata"]["managedFields"] = json!([]);
        let cases = [
            (with_mf, "metadata.managedFields must be nil"),
            (
                json!({"apiVersion":"v2","kind":"ConfigMap","metadata":{"name":"x"}}),
                "Incorrect version specified in apply patch",
            ),
            (json!({"metadata":{"name":"x"}}), "Object 'Kind' is missing"),
            (json!([1]), "must be an object"),
        ];
        for (applied, want) in cases {
            match apply(None, &applied, "m", false) {
                Err(ApplyError::Invalid(msg)) => {
                    assert!(msg.contains(want), "{msg} should contain {want}")
                }
                other => panic!("expected Invalid for {applied}, got {other:?}"),
            }
        }
        let pod = ObjectKind::new("", "v1", "Pod");
        let dup = json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"a"},{"name":"a"}]}});
        assert!(
            matches!(server_side_apply(None, &dup, "m", false, &pod, T0), Err(ApplyError::Invalid(m)) if m.contains("duplicate entries"))
        );
        let nokey = json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"image":"a"}]}});
        assert!(
            matches!(server_side_apply(None, &nokey, "m", false, &pod, T0), Err(ApplyError::Invalid(m)) if m.contains("omits key field \"name\""))
        );
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

    #[test]
    fn apply_pod_containers_are_associative_by_name() {
        let v1 = ok(pod_apply(
            None,
            &pod(json!([{"name":"app","image":"app:1","ports":[{"containerPort":80}]}])),
            "one",
            false,
        ));
        assert_eq!(
            entry(&v1, "one")["fieldsV1"],
            json!({"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{},
                "f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{}}}}}}})
        );
        let v2 = ok(pod_apply(
            Some(&v1),
            &pod(json!([{"name":"side","image":"side:1"}])),
            "two",
            false,
        ));
        assert_eq!(v2["spec"]["containers"].as_array().map(Vec::len), Some(2));
        let (list, message) = conflicts(pod_apply(
            Some(&v2),
            &pod(json!([{"name":"app","image":"app:2"}])),
            "two",
            false,
        ));
        assert_eq!(list[0].field, ".spec.containers[name=\"app\"].image");
        assert_eq!(message, "Apply failed with 1 conflict: conflict with \"one\": .spec.containers[name=\"app\"].image");
        // "one" drops its container: only its own item goes.
        let v3 = ok(pod_apply(Some(&v2), &pod(json!([])), "one", false));
        assert_eq!(
            v3["spec"]["containers"],
            json!([{"name":"side","image":"side:1"}])
        );
        assert_eq!(owners(&v3).len(), 1);
    }

    #[test]
    fn apply_merges_owner_references_by_uid_and_finalizers_as_set() {
        let base = |meta: Value| json!({"apiVersion":"v1","kind":"ConfigMap","metadata":meta});
        let v1 = ok(apply(
            None,
            &base(
                json!({"name":"c","finalizers":["a.io/x"],"ownerReferences":[{"apiVersion":"v1","kind":"Foo","name":"f","uid":"u1"}]}),
            ),
            "one",
            false,
        ));
        assert_eq!(
            entry(&v1, "one")["fieldsV1"],
            json!({"f:metadata":{"f:finalizers":{"v:\"a.io/x\"":{}},"f:ownerReferences":{"k:{\"uid\":\"u1\"}":{".":{},"f:apiVersion":{},"f:kind":{},"f:name":{},"f:uid":{}}}}})
        );
        let v2 = ok(apply(
            Some(&v1),
            &base(
                json!({"name":"c","finalizers":["b.io/y"],"ownerReferences":[{"apiVersion":"v1","kind":"Foo","name":"g","uid":"u2"}]}),
            ),
            "two",
            false,
        ));
        assert_eq!(v2["metadata"]["finalizers"], json!(["a.io/x", "b.io/y"]));
        assert_eq!(
            v2["metadata"]["ownerReferences"].as_array().map(Vec::len),
            Some(2)
        );
        let v3 = ok(apply(Some(&v2), &base(json!({"name":"c"})), "one", false));
        assert_eq!(v3["metadata"]["finalizers"], json!(["b.io/y"]));
        assert_eq!(v3["metadata"]["ownerReferences"][0]["uid"], "u2");
    }

    #[test]
    fn apply_atomic_lists_are_owned_whole() {
        let v1 = ok(pod_apply(
            None,
            &json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"tolerations":[{"key":"a"}]}}),
            "one",
            false,
        ));
        assert_eq!(
            entry(&v1, "one")["fieldsV1"],
            json!({"f:spec":{"f:tolerations":{}}})
        );
        let (list, _) = conflicts(pod_apply(
            Some(&v1),
            &json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"tolerations":[{"key":"b"}]}}),
            "two",
            false,
        ));
        assert_eq!(list[0].field, ".spec.tolerations");
    }

    #[test]
    fn apply_owns_atomic_selectors_whole() {
        let kind = ObjectKind::new("apps", "v1", "Deployment");
        let d = |sel: Value| json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"selector":sel}});
        let v1 = server_side_apply(
            None,
            &d(json!({"matchLabels":{"app":"a","tier":"x"}})),
            "one",
            false,
            &kind,
            T0,
        )
        .expect("create");
        assert_eq!(
            entry(&v1, "one")["fieldsV1"],
            json!({"f:spec":{"f:selector":{}}})
        );
        let (list, _) = conflicts(server_side_apply(
            Some(&v1),
            &d(json!({"matchLabels":{"app":"a"}})),
            "two",
            false,
            &kind,
            T1,
        ));
        assert_eq!(list[0].field, ".spec.selector");
        let v2 = server_side_apply(
            Some(&v1),
            &d(json!({"matchLabels":{"app":"a"}})),
            "one",
            false,
            &kind,
            T1,
        )
        .expect("replace");
        assert_eq!(
            v2["spec"]["selector"],
            json!({"matchLabels":{"app":"a"}}),
            "atomic maps are replaced, not merged"
        );
    }

    #[test]
    fn apply_lease_holder_conflicts_between_candidates() {
        let kind = ObjectKind::new("coordination.k8s.io", "v1", "Lease");
        let lease = |holder: &str| json!({"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l"},"spec":{"holderIdentity":holder,"leaseDurationSeconds":15}});
        let v1 = server_side_apply(None, &lease("a"), "a", false, &kind, T0).expect("create");
        assert_eq!(entry(&v1, "a")["apiVersion"], "coordination.k8s.io/v1");
        let (list, _) = conflicts(server_side_apply(
            Some(&v1),
            &lease("b"),
            "b",
            false,
            &kind,
            T1,
        ));
        assert_eq!(
            list.iter().map(|c| c.field.as_str()).collect::<Vec<_>>(),
            vec![".spec.holderIdentity"]
        );
        let v2 = server_side_apply(Some(&v1), &lease("b"), "b", true, &kind, T1).expect("forced");
        assert_eq!(
            entry(&v2, "a")["fieldsV1"],
            json!({"f:spec":{"f:leaseDurationSeconds":{}}})
        );
        assert_eq!(v2["spec"]["holderIdentity"], "b");
    }

    #[test]
    fn apply_custom_resource_maps_are_granular() {
        let kind = ObjectKind::new("example.com", "v1", "Widget");
        let w = |spec: Value| json!({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":spec});
        let v1 = server_side_apply(
            None,
            &w(json!({"config":{"a":{"x":1},"b":2},"items":[1,2]})),
            "one",
            false,
            &kind,
            T0,
        )
        .expect("create");
        assert_eq!(
            entry(&v1, "one")["fieldsV1"],
            json!({"f:spec":{"f:config":{"f:a":{"f:x":{}},"f:b":{}},"f:items":{}}})
        );
        let v2 = server_side_apply(
            Some(&v1),
            &w(json!({"config":{"a":{"y":3}}})),
            "two",
            false,
            &kind,
            T1,
        )
        .expect("merge");
        assert_eq!(v2["spec"]["config"], json!({"a":{"x":1,"y":3},"b":2}));
        let v3 = server_side_apply(
            Some(&v2),
            &w(json!({"config":{"b":2}})),
            "one",
            false,
            &kind,
            T2,
        )
        .expect("prune");
        assert_eq!(v3["spec"], json!({"config":{"a":{"y":3},"b":2}}));
    }

    #[test]
    fn apply_custom_resource_conditions_follow_crd_list_map_keys() {
        let kind = ObjectKind::new("example.com", "v1", "Widget");
        let schema = SchemaOverrides::from_openapi_v3(
            &json!({"type":"object","properties":{"status":{"type":"object","properties":{
            "conditions":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["type"],"items":{"type":"object"}}}}}}),
        );
        let options = ApplyOptions::status_subresource().schema(schema);
        let w = |conds: Value| json!({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"status":{"conditions":conds}});
        let live = json!({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}});
        let v1 = server_side_apply_with(
            Some(&live),
            &w(json!([{"type":"Ready","status":"True"}])),
            "ctrl",
            true,
            &kind,
            T0,
            &options,
        )
        .expect("first condition");
        let v2 = server_side_apply_with(
            Some(&v1),
            &w(json!([{"type":"Synced","status":"True"}])),
            "syncer",
            false,
            &kind,
            T1,
            &options,
        )
        .expect("second condition merges, no conflict");
        assert_eq!(v2["status"]["conditions"].as_array().map(Vec::len), Some(2));
        assert_eq!(
            entry(&v2, "syncer")["fieldsV1"],
            json!({"f:status":{"f:conditions":{"k:{\"type\":\"Synced\"}":{".":{},"f:status":{},"f:type":{}}}}})
        );
        assert_eq!(
            v2["spec"],
            json!({"size":1}),
            "a status apply never touches spec"
        );
        // Without the schema the same list is atomic: the second manager conflicts.
        let atomic = ApplyOptions::status_subresource();
        let a1 = server_side_apply_with(
            Some(&live),
            &w(json!([{"type":"Ready","status":"True"}])),
            "ctrl",
            true,
            &kind,
            T0,
            &atomic,
        )
        .expect("first condition");
        assert_eq!(
            entry(&a1, "ctrl")["fieldsV1"],
            json!({"f:status":{"f:conditions":{}}})
        );
        let (list, _) = conflicts(server_side_apply_with(
            Some(&a1),
            &w(json!([{"type":"Synced","status":"True"}])),
            "syncer",
            false,
            &kind,
            T1,
            &atomic,
        ));
        assert_eq!(list[0].field, ".status.conditions");
    }

    #[test]
    fn apply_ignores_reset_fields() {
        let kind = ObjectKind::new("", "v1", "Pod");
        let live = json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"a"}]},"status":{"phase":"Running"}});
        let applied = json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"a"}]},"status":{"phase":"Failed"}});
        let got = server_side_apply_with(
            Some(&live),
            &applied,
            "m",
            false,
            &kind,
            T0,
            &ApplyOptions::main_resource_with_status(),
        )
        .expect("apply");
        assert_eq!(got["status"]["phase"], "Running");
        assert!(entry(&got, "m")["fieldsV1"].get("f:status").is_none());
        let status = server_side_apply_with(
            Some(&got),
            &applied,
            "kubelet",
            false,
            &kind,
            T1,
            &ApplyOptions::status_subresource(),
        )
        .expect("status apply");
        assert_eq!(status["status"]["phase"], "Failed");
        let e = entry(&status, "kubelet");
        assert_eq!(e["subresource"], "status");
        assert_eq!(e["fieldsV1"], json!({"f:status":{"f:phase":{}}}));
    }

    #[test]
    fn apply_empty_object_owns_nothing() {
        let kind = ObjectKind::new("example.com", "v1", "Widget");
        let w = json!({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","labels":{}},"spec":{}});
        let got = server_side_apply(None, &w, "m", false, &kind, T0).expect("apply");
        assert_eq!(got.pointer("/metadata/managedFields"), None);
        assert_eq!(got["spec"], json!({}));
    }

    #[test]
    fn apply_null_clears_and_owns_field() {
        let v1 = ok(apply(None, &cm(json!({"a":"1","b":"2"})), "one", false));
        let v2 = ok(apply(
            Some(&v1),
            &cm(json!({"a":"1","b":null})),
            "one",
            false,
        ));
        assert_eq!(v2["data"], json!({"a":"1"}));
    }

    #[test]
    fn apply_list_merge_keeps_structured_merge_diff_order() {
        let v1 = ok(pod_apply(
            None,
            &pod(json!([{"name":"a"},{"name":"b"}])),
            "one",
            false,
        ));
        let v2 = ok(pod_apply(
            Some(&v1),
            &pod(json!([{"name":"c"},{"name":"b"}])),
            "two",
            false,
        ));
        let names: Vec<&str> = v2["spec"]["containers"]
            .as_array()
            .map(|a| a.iter().filter_map(|c| c["name"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(names, vec!["a", "c", "b"]);
    }
}
