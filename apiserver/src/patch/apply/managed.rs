//! Managers and their `metadata.managedFields` entries: apimachinery's
//! manager identity (manager, operation, apiVersion for Update entries,
//! subresource), decoding and encoding of `FieldsV1` entries in the
//! server's order, the `stripMeta` identity fields no entry ever owns, the
//! cap on Update entries and the wording of apply conflicts.
//!
//! This module owns *how ownership is recorded*; it never decides who owns
//! what (the apply and update steps in the parent module do) and never
//! touches an object beyond its `metadata.managedFields`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::patch::error::{ApplyError, FieldConflict};
use crate::patch::fields::{path_string, FieldPath, FieldSet, PathElement};

/// How many Update entries an object keeps before the oldest are merged
/// (apimachinery `DefaultMaxUpdateManagers`).
pub const MAX_UPDATE_MANAGERS: usize = 10;

/// The manager the oldest Update entries are merged into beyond
/// [`MAX_UPDATE_MANAGERS`].
pub const ANCIENT_CHANGES_MANAGER: &str = "ancient-changes";

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
    fields: Fields,
}

/// An entry's field set: decoded, or still the `fieldsV1` object it was
/// read from when that object is exactly what encoding its set gives back
/// (see [`canonical`]) and owns none of the [`STRIPPED`] paths. A large
/// set that a write leaves alone, or changes by a few paths, is then never
/// decoded nor encoded again: the few paths are changed in the object
/// itself, keeping it in that encoding.
#[derive(Debug, Clone)]
enum Fields {
    Set(FieldSet),
    Raw(Map<String, Value>),
}

impl Entry {
    pub(super) fn new(api_version: String, time: Option<String>, set: FieldSet) -> Self {
        Self {
            api_version,
            time,
            fields: Fields::Set(set),
        }
    }

    /// The decoded set (decoding it now if needed).
    pub(super) fn set(&mut self) -> &mut FieldSet {
        if let Fields::Raw(raw) = &self.fields {
            // a canonical object decodes (see `canonical`)
            let set = FieldSet::from_fields_v1_map(raw).unwrap_or_default();
            self.fields = Fields::Set(set);
        }
        match &mut self.fields {
            Fields::Set(set) => set,
            Fields::Raw(_) => unreachable!("decoded above"),
        }
    }

    fn is_empty(&self) -> bool {
        match &self.fields {
            Fields::Set(set) => set.is_empty(),
            // canonical: every key is a member or leads to one
            Fields::Raw(raw) => raw.is_empty(),
        }
    }

    /// `set = set.difference(paths)`: the exact paths of `paths` leave the
    /// set (their descendants stay).
    pub(super) fn remove_paths(&mut self, paths: &FieldSet) {
        match &mut self.fields {
            Fields::Set(set) => *set = set.difference(paths),
            Fields::Raw(raw) => {
                for path in paths.paths() {
                    raw_remove(raw, &path);
                }
            }
        }
    }

    /// `set = set.union(paths)`, for paths none of which is [`STRIPPED`].
    pub(super) fn add_paths(&mut self, paths: &FieldSet) {
        match &mut self.fields {
            Fields::Set(set) => *set = set.union(paths),
            Fields::Raw(raw) => {
                for path in paths.paths() {
                    raw_insert(raw, &path);
                }
            }
        }
    }

    /// An entry whose set is `set`, already stripped, kept as its
    /// encoding `fields_v1` (`set.to_fields_v1()`).
    pub(super) fn encoded(api_version: String, time: Option<String>, fields_v1: Value) -> Self {
        let fields = match fields_v1 {
            Value::Object(raw) => Fields::Raw(raw),
            _ => Fields::Set(FieldSet::new()),
        };
        Self {
            api_version,
            time,
            fields,
        }
    }

    /// Whether the set is still encoded (not decoded) and is `set`.
    pub(super) fn is_encoded_set(&self, set: &FieldSet) -> bool {
        match &self.fields {
            Fields::Raw(raw) => set.encodes_as(raw),
            Fields::Set(_) => false,
        }
    }

    /// The entry's `fieldsV1` encoding, when it is still encoded.
    pub(super) fn into_encoded(self) -> Option<Value> {
        match self.fields {
            Fields::Raw(raw) => Some(Value::Object(raw)),
            Fields::Set(_) => None,
        }
    }

    /// `set.intersection(paths)`.
    pub(super) fn intersection(&self, paths: &FieldSet) -> FieldSet {
        match &self.fields {
            Fields::Set(set) => set.intersection(paths),
            Fields::Raw(raw) => {
                let mut both = FieldSet::new();
                for path in paths.paths() {
                    if raw_has(raw, &path) {
                        both.insert(&path);
                    }
                }
                both
            }
        }
    }

    fn into_fields_v1(self) -> Value {
        match self.fields {
            Fields::Set(set) => set.to_fields_v1(),
            Fields::Raw(raw) => Value::Object(raw),
        }
    }
}

/// Whether `raw` is exactly the `FieldsV1` encoding of the set it decodes
/// to ([`FieldSet::to_fields_v1`] of [`FieldSet::from_fields_v1`]): every
/// key but `"."` is a path element in its own encoding, every value an
/// object, `"."` (as `{}`) only beside other keys below the root, and no
/// object without a key unless it is a member's.
fn canonical(raw: &Map<String, Value>, root: bool) -> bool {
    for (key, inner) in raw {
        if key == "." {
            if root || raw.len() < 2 || !inner.as_object().is_some_and(Map::is_empty) {
                return false;
            }
            continue;
        }
        let same_key = match key.as_bytes().get(..2) {
            Some(b"f:") => true,
            _ => {
                PathElement::from_fields_v1_key(key).is_some_and(|pe| pe.to_fields_v1_key() == *key)
            }
        };
        if !same_key {
            return false;
        }
        let Value::Object(inner) = inner else {
            return false;
        };
        if !inner.is_empty() && !canonical(inner, false) {
            return false;
        }
    }
    true
}

/// Whether the canonical `raw` has any [`STRIPPED`] path as a member.
fn owns_stripped(raw: &Map<String, Value>) -> bool {
    STRIPPED.iter().any(|path| {
        let mut node = raw;
        let mut member = false;
        for (i, name) in path.iter().enumerate() {
            let Some(Value::Object(next)) = node.get(&format!("f:{name}")) else {
                return false;
            };
            if i + 1 == path.len() {
                member = next.is_empty() || next.contains_key(".");
            }
            node = next;
        }
        member
    })
}

/// Removes the member `path` from the canonical `raw`, keeping it
/// canonical; a path that is no member changes nothing. True when it was
/// a member.
fn raw_remove(raw: &mut Map<String, Value>, path: &[PathElement]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return false;
    };
    let key = first.to_fields_v1_key();
    let Some(Value::Object(node)) = raw.get_mut(&key) else {
        return false;
    };
    if rest.is_empty() {
        if node.is_empty() {
            raw.remove(&key);
            return true;
        }
        return node.remove(".").is_some();
    }
    if !raw_remove(node, rest) {
        return false;
    }
    if node.is_empty() {
        // it was no member and lost its last child
        raw.remove(&key);
    } else if node.len() == 1 && node.contains_key(".") {
        // a member that lost its last child
        node.clear();
    }
    true
}

/// Whether `path` is a member of the canonical `raw`.
fn raw_has(raw: &Map<String, Value>, path: &[PathElement]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return false;
    };
    let Some(Value::Object(node)) = raw.get(&first.to_fields_v1_key()) else {
        return false;
    };
    if rest.is_empty() {
        node.is_empty() || node.contains_key(".")
    } else {
        raw_has(node, rest)
    }
}

/// Adds the member `path` to the canonical `raw`, keeping it canonical.
fn raw_insert(raw: &mut Map<String, Value>, path: &[PathElement]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let key = first.to_fields_v1_key();
    let existed = raw.contains_key(&key);
    let node = raw.entry(key).or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(node) = node else {
        return;
    };
    if rest.is_empty() {
        if existed && !node.is_empty() {
            node.insert(".".to_owned(), Value::Object(Map::new()));
        }
        return;
    }
    if existed && node.is_empty() {
        // a member without children gets its first
        node.insert(".".to_owned(), Value::Object(Map::new()));
    }
    raw_insert(node, rest);
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
            if let Fields::Set(set) = &mut e.fields {
                strip_in_place(set);
            }
        }
        self.entries.retain(|_, e| !e.is_empty());
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
            let Some(mut entry) = self.entries.get(&key).cloned() else {
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
                        let set = entry.set().union(b.set());
                        *b.set() = set;
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
    pub(super) fn encode(self) -> Vec<Value> {
        let mut list: Vec<(ManagerKey, Entry)> = self.entries.into_iter().collect();
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
                obj.insert("manager".into(), Value::String(k.manager));
                obj.insert("operation".into(), Value::String(k.operation));
                obj.insert("apiVersion".into(), Value::String(e.api_version.clone()));
                if let Some(t) = &e.time {
                    obj.insert("time".into(), Value::String(t.clone()));
                }
                obj.insert("fieldsType".into(), Value::String("FieldsV1".into()));
                obj.insert("fieldsV1".into(), e.into_fields_v1());
                if !k.subresource.is_empty() {
                    obj.insert("subresource".into(), Value::String(k.subresource));
                }
                Value::Object(obj)
            })
            .collect()
    }
}

pub(super) fn decode_managed_fields(obj: &Value) -> Result<Managers, String> {
    match obj.pointer("/metadata/managedFields") {
        None | Some(Value::Null) => Ok(Managers::default()),
        Some(Value::Array(items)) => decode_items(items.iter().map(Cow::Borrowed)),
        Some(other) => Err(format!(
            "metadata.managedFields must be a list, got {other}"
        )),
    }
}

/// [`decode_managed_fields`] of an object whose `metadata.managedFields`
/// (`managed`, already taken out of it) is not needed any more: the
/// `fieldsV1` objects are moved, not copied.
pub(super) fn decode_taken_managed_fields(managed: Option<Value>) -> Result<Managers, String> {
    match managed {
        None | Some(Value::Null) => Ok(Managers::default()),
        Some(Value::Array(items)) => decode_items(items.into_iter().map(Cow::Owned)),
        Some(other) => Err(format!(
            "metadata.managedFields must be a list, got {other}"
        )),
    }
}

#[cfg(test)]
thread_local! {
    /// Decode every set at once, as before sets were kept encoded: the
    /// reference the lazy sets are tested against.
    pub(super) static EAGER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn lazy() -> bool {
    #[cfg(test)]
    if EAGER.with(std::cell::Cell::get) {
        return false;
    }
    true
}

fn decode_items<'a>(items: impl Iterator<Item = Cow<'a, Value>>) -> Result<Managers, String> {
    let mut managers = Managers::default();
    for item in items {
        let s = |k: &str| item.get(k).and_then(Value::as_str);
        let manager = s("manager").unwrap_or_default();
        let operation = s("operation").unwrap_or_default();
        let api_version = s("apiVersion").unwrap_or_default().to_owned();
        match s("fieldsType") {
            Some("FieldsV1") => {}
            other => {
                return Err(format!(
                    "invalid fieldsType {other:?} for manager {manager:?}"
                ))
            }
        }
        let key = ManagerKey::new(manager, operation, &api_version, s("subresource"));
        let time = s("time").map(str::to_owned);
        let fields_v1 = item.get("fieldsV1").unwrap_or(&Value::Null);
        let keep_raw = lazy()
            && !managers.entries.contains_key(&key)
            && fields_v1
                .as_object()
                .is_some_and(|raw| canonical(raw, true) && !owns_stripped(raw));
        if keep_raw {
            let raw = match item {
                Cow::Owned(Value::Object(mut item)) => match item.remove("fieldsV1") {
                    Some(Value::Object(raw)) => raw,
                    _ => Map::new(),
                },
                other => other
                    .get("fieldsV1")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default(),
            };
            managers.entries.insert(
                key,
                Entry {
                    api_version,
                    time,
                    fields: Fields::Raw(raw),
                },
            );
            continue;
        }
        let set =
            FieldSet::from_fields_v1(fields_v1).map_err(|e| format!("manager {manager:?}: {e}"))?;
        let entry = managers
            .entries
            .entry(key)
            .or_insert_with(|| Entry::new(api_version, time, FieldSet::new()));
        let merged = entry.set().union(&set);
        *entry.set() = merged;
    }
    Ok(managers)
}

/// Where a non-apply write to the main resource starts its managed fields
/// from, given the `metadata.managedFields` its request left in the object
/// (apimachinery `decodeLiveOrNew`).
#[derive(Debug)]
pub(super) enum Sent {
    /// `[]` or a single empty entry (`[{}]`): from none (`isResetManagedFields`).
    Reset,
    /// Entries that all decode, at least one: from them, not the live ones.
    Managers(Managers),
    /// Absent, `null`, not decodable or no entry: from the live ones, so a
    /// client unaware of the field never strips it.
    Live,
}

/// Decodes the `metadata.managedFields` a non-apply request sent (taken out
/// of its object) as apimachinery's `DecodeManagedFields` does: any entry
/// without operation `Apply` or `Update`, without an apiVersion or with a
/// fieldsType other than `FieldsV1` or a `fieldsV1` that is no field set
/// makes the whole list undecodable ([`Sent::Live`]); a missing `fieldsV1`
/// is the empty set, and of entries with one manager identity the last
/// wins.
pub(super) fn decode_sent_managed_fields(sent: Option<Value>) -> Sent {
    let Some(Value::Array(mut items)) = sent else {
        return Sent::Live;
    };
    if items.is_empty() || (items.len() == 1 && is_empty_entry(&items[0])) {
        return Sent::Reset;
    }
    // which entries stay: the last of each manager identity
    let keep: Option<Vec<bool>> = {
        let mut last = BTreeMap::new();
        for (i, item) in items.iter().enumerate() {
            let s = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or_default();
            let (operation, api_version) = (s("operation"), s("apiVersion"));
            if !item.is_object()
                || !(operation == APPLY || operation == UPDATE)
                || api_version.is_empty()
            {
                return Sent::Live;
            }
            let version = if operation == APPLY { "" } else { api_version };
            last.insert((s("manager"), operation, version, s("subresource")), i);
        }
        (last.len() < items.len()).then(|| {
            let mut keep = vec![false; items.len()];
            for i in last.into_values() {
                keep[i] = true;
            }
            keep
        })
    };
    if let Some(keep) = keep {
        let mut kept = keep.into_iter();
        items.retain(|_| kept.next().unwrap_or(false));
    }
    for item in &mut items {
        if let Value::Object(entry) = item {
            if entry.get("fieldsV1").is_none_or(Value::is_null) {
                entry.insert("fieldsV1".to_owned(), Value::Object(Map::new()));
            }
        }
    }
    match decode_taken_managed_fields(Some(Value::Array(items))) {
        Ok(m) if !m.entries.is_empty() => Sent::Managers(m),
        _ => Sent::Live,
    }
}

/// Whether a sent entry decodes to the zero `ManagedFieldsEntry`: every
/// field it has is `null` or, for the string fields, `""` (fields the type
/// does not have are dropped by decoding).
fn is_empty_entry(entry: &Value) -> bool {
    let Value::Object(entry) = entry else {
        return false;
    };
    entry.iter().all(|(k, v)| match k.as_str() {
        "manager" | "operation" | "apiVersion" | "fieldsType" | "subresource" => {
            v.is_null() || v.as_str() == Some("")
        }
        "time" | "fieldsV1" => v.is_null(),
        _ => true,
    })
}

/// Removes `metadata.managedFields` from `obj` and returns it.
pub(super) fn take_managed_fields(obj: &mut Value) -> Option<Value> {
    match obj.get_mut("metadata") {
        Some(Value::Object(meta)) => meta.remove("managedFields"),
        _ => None,
    }
}

pub(super) fn without_managed_fields(obj: &Value) -> Value {
    let Some(Value::Object(meta)) = obj.get("metadata") else {
        return obj.clone();
    };
    let Value::Object(root) = obj else {
        return obj.clone();
    };
    // a copy of everything but `metadata.managedFields`
    let mut copy = Map::new();
    for (k, v) in root {
        if k == "metadata" {
            let rest = meta
                .iter()
                .filter(|(k, _)| *k != "managedFields")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            copy.insert(k.clone(), Value::Object(rest));
        } else {
            copy.insert(k.clone(), v.clone());
        }
    }
    Value::Object(copy)
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

/// `*set = strip(set)`, in place.
pub(super) fn strip_in_place(set: &mut FieldSet) {
    strip_paths(set);
}

/// `*set = strip(set)`, in place; returns the paths it removed.
pub(super) fn strip_paths(set: &mut FieldSet) -> Vec<FieldPath> {
    let mut removed = Vec::new();
    for p in STRIPPED {
        let path: FieldPath = p
            .iter()
            .map(|s| PathElement::Field((*s).to_owned()))
            .collect();
        if set.remove(&path) {
            removed.push(path);
        }
    }
    removed
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
