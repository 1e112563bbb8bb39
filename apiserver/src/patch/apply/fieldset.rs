//! Typed walks over objects: the field set an applied configuration
//! owns (structured-merge-diff `ToFieldSet`) and the comparison of two
//! objects (`Compare`), with the path element of each list item chosen by
//! the list's type (index, set value or associative keys).
//!
//! This module owns *which fields a value has and which of them differ*;
//! it never changes an object (the merge and prune steps do) and never
//! reads or writes `managedFields`.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::patch::fields::{FieldPath, FieldSet, PathElement};
use crate::patch::schema::{ListKind, Types};

fn names_of(names: &[String]) -> Vec<&str> {
    names.iter().map(String::as_str).collect()
}

pub(super) fn type_of_list(kind: &Types<'_>, names: &[String]) -> ListKind {
    kind.list(&names_of(names))
}

pub(super) fn atomic_map(kind: &Types<'_>, names: &[String]) -> bool {
    kind.atomic_map(&names_of(names))
}

/// The path element of a list item, or why it has none.
pub(super) fn item_element(
    list: &ListKind,
    index: usize,
    item: &Value,
) -> Result<PathElement, String> {
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

/// How a compare walks the node of `lhs` and `rhs`: 1 as an object, 2 as
/// a list (by the side that has one, or both of one shape), 3 as a leaf (a
/// scalar, or two different shapes), 0 when both are absent.
fn node_shape(lhs: Option<&Value>, rhs: Option<&Value>) -> u8 {
    let shape = |v: Option<&Value>| match v {
        None => 0,
        Some(Value::Object(_)) => 1,
        Some(Value::Array(_)) => 2,
        Some(_) => 3,
    };
    let (ls, rs) = (shape(lhs), shape(rhs));
    if ls == 0 {
        rs
    } else if rs == 0 || ls == rs {
        ls
    } else {
        3
    }
}

/// The items of a list on both sides of a compare, paired by their path
/// element: the left side's in order, then the right side's new ones;
/// `None` when the list compares as one value (atomic, or empty on both
/// sides).
fn list_items<'a>(
    kind: &Types<'_>,
    names: &[String],
    lhs: Option<&'a Value>,
    rhs: Option<&'a Value>,
) -> Option<ListItems<'a>> {
    let l = lhs.and_then(Value::as_array);
    let r = rhs.and_then(Value::as_array);
    let list = type_of_list(kind, names);
    if list == ListKind::Atomic || (l.is_none_or(Vec::is_empty) && r.is_none_or(Vec::is_empty)) {
        return None;
    }
    let li = index_items(&list, l.map_or(&[][..], Vec::as_slice));
    let ri = index_items(&list, r.map_or(&[][..], Vec::as_slice));
    let mut pes: Vec<PathElement> = li.iter().map(|(p, _)| p.clone()).collect();
    pes.extend(
        ri.iter()
            .map(|(p, _)| p.clone())
            .filter(|p| find_item(&li, p).is_none()),
    );
    Some(
        pes.into_iter()
            .map(|pe| {
                let (lv, rv) = (find_item(&li, &pe), find_item(&ri, &pe));
                (pe, lv, rv)
            })
            .collect(),
    )
}

/// A list's items on both sides, by path element (see [`list_items`]).
type ListItems<'a> = Vec<(PathElement, Option<&'a Value>, Option<&'a Value>)>;

pub(super) fn find_item<'a>(
    items: &[(PathElement, &'a Value)],
    pe: &PathElement,
) -> Option<&'a Value> {
    items.iter().find(|(p, _)| p == pe).map(|(_, v)| *v)
}

/// Items of a non-atomic list with their path elements, first occurrence
/// of a duplicate winning; items without a key fall back to their index.
pub(super) fn index_items<'a>(
    list: &ListKind,
    items: &'a [Value],
) -> Vec<(PathElement, &'a Value)> {
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
pub(super) fn to_field_set(kind: &Types<'_>, applied: &Value) -> Result<FieldSet, String> {
    // the root is the child of a node of its own (its own path, the empty
    // one, is never a member)
    let root = PathElement::Field(String::new());
    let mut top = FieldSet::new();
    field_set_child(kind, &mut Vec::new(), &mut top, &root, applied)?;
    Ok(top.take_child(&root))
}

/// Adds to `parent` the paths `v`, its child at `pe`, owns (the paths
/// [`field_set_node`] inserts, built below `parent` rather than from the
/// root).
fn field_set_child(
    kind: &Types<'_>,
    names: &mut Vec<String>,
    parent: &mut FieldSet,
    pe: &PathElement,
    v: &Value,
) -> Result<(), String> {
    match v {
        Value::Object(_) if atomic_map(kind, names) => parent.insert_member(pe.clone()),
        Value::Object(m) => {
            let mut node = FieldSet::new();
            for (k, child) in m {
                let child_pe = PathElement::Field(k.clone());
                if matches!(child, Value::Object(_) | Value::Array(_)) {
                    names.push(k.clone());
                    field_set_child(kind, names, &mut node, &child_pe, child)?;
                    names.pop();
                } else {
                    node.insert_member(child_pe);
                }
            }
            parent.insert_child(pe.clone(), node);
        }
        Value::Array(items) => {
            let list = type_of_list(kind, names);
            if list == ListKind::Atomic {
                parent.insert_member(pe.clone());
                return Ok(());
            }
            let mut node = FieldSet::new();
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                let item_pe = item_element(&list, i, item)
                    .map_err(|e| format!(".{}: {e}", names.join(".")))?;
                if !seen.insert(item_pe.clone()) {
                    return Err(format!(
                        ".{}: duplicate entries for key {item_pe}",
                        names.join(".")
                    ));
                }
                field_set_child(kind, names, &mut node, &item_pe, item)?;
                node.insert_member(item_pe);
            }
            parent.insert_child(pe.clone(), node);
        }
        _ => parent.insert_member(pe.clone()),
    }
    Ok(())
}

/// The path-by-path [`to_field_set`] that [`field_set_child`] replaces;
/// the reference it is tested against.
#[cfg(test)]
pub(super) fn to_field_set_by_paths(kind: &Types<'_>, applied: &Value) -> Result<FieldSet, String> {
    let mut set = FieldSet::new();
    field_set_node(kind, &mut Vec::new(), &mut Vec::new(), applied, &mut set)?;
    Ok(set)
}

#[cfg(test)]
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
pub(super) struct Comparison {
    pub(super) added: FieldSet,
    pub(super) modified: FieldSet,
    pub(super) removed: FieldSet,
}

impl Comparison {
    pub(super) fn exclude(self, ignored: &FieldSet) -> Self {
        Self {
            added: self.added.recursive_difference(ignored),
            modified: self.modified.recursive_difference(ignored),
            removed: self.removed.recursive_difference(ignored),
        }
    }
}

pub(super) fn compare(kind: &Types<'_>, lhs: &Value, rhs: &Value) -> Comparison {
    let mut c = Comparison::default();
    let mut walk = Walk {
        kind,
        skip_managed_fields: false,
    };
    walk.node(
        &mut Vec::new(),
        &mut Vec::new(),
        Some(lhs),
        Some(rhs),
        &mut c,
    );
    c
}

/// [`compare`] of `lhs` and `rhs` as if neither had
/// `metadata.managedFields` (without copying them to remove it).
pub(super) fn compare_without_managed_fields(
    kind: &Types<'_>,
    lhs: &Value,
    rhs: &Value,
) -> Comparison {
    let mut c = Comparison::default();
    let mut walk = Walk {
        kind,
        skip_managed_fields: true,
    };
    walk.node(
        &mut Vec::new(),
        &mut Vec::new(),
        Some(lhs),
        Some(rhs),
        &mut c,
    );
    c
}

struct Walk<'a, 'k> {
    kind: &'a Types<'k>,
    /// Whether `metadata.managedFields` (the root's `metadata` object's
    /// key) is left out on both sides.
    skip_managed_fields: bool,
}

fn compare_leaf(path: &FieldPath, lhs: Option<&Value>, rhs: Option<&Value>, c: &mut Comparison) {
    match (lhs, rhs) {
        (None, Some(_)) => c.added.insert(path),
        (Some(_), None) => c.removed.insert(path),
        (Some(a), Some(b)) if a != b => c.modified.insert(path),
        _ => {}
    }
}

impl Walk<'_, '_> {
    /// Whether `k`, a key of the object at `path`, is left out.
    fn skipped(&self, path: &FieldPath, k: &str) -> bool {
        self.skip_managed_fields
            && k == "managedFields"
            && matches!(path.as_slice(), [PathElement::Field(m)] if m == "metadata")
    }

    fn node(
        &mut self,
        names: &mut Vec<String>,
        path: &mut FieldPath,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
        c: &mut Comparison,
    ) {
        // Equal values have no difference anywhere below (a walk of them
        // finds every item and field on both sides, equal).
        if let (Some(l), Some(r)) = (lhs, rhs) {
            if l == r {
                return;
            }
        }
        let kind = self.kind;
        match node_shape(lhs, rhs) {
            1 => {
                let l = lhs.and_then(Value::as_object);
                let r = rhs.and_then(Value::as_object);
                let skipping = self.skip_managed_fields
                    && matches!(path.as_slice(), [PathElement::Field(m)] if m == "metadata");
                let empty = |m: &Map<String, Value>| {
                    m.is_empty() || (skipping && m.keys().all(|k| k == "managedFields"))
                };
                if atomic_map(kind, names) || (l.is_none_or(empty) && r.is_none_or(empty)) {
                    if skipping {
                        // compare the objects without the left-out key
                        let strip = |m: Option<&Map<String, Value>>| {
                            m.map(|m| {
                                let mut m = m.clone();
                                m.remove("managedFields");
                                Value::Object(m)
                            })
                        };
                        let (l2, r2) = (strip(l), strip(r));
                        let pick = |orig: Option<&Value>, s: Option<Value>| match orig {
                            Some(Value::Object(_)) => s,
                            other => other.cloned(),
                        };
                        let (l2, r2) = (pick(lhs, l2), pick(rhs, r2));
                        compare_leaf(path, l2.as_ref(), r2.as_ref(), c);
                    } else {
                        compare_leaf(path, lhs, rhs, c);
                    }
                    return;
                }
                let no_keys = Map::new();
                let both = SortedUnion::new(l.unwrap_or(&no_keys), r.unwrap_or(&no_keys));
                for (k, lv, rv) in both {
                    if skipping && self.skipped(path, k) {
                        continue;
                    }
                    if lv.is_some() && lv == rv {
                        continue;
                    }
                    names.push(k.clone());
                    path.push(PathElement::Field(k.clone()));
                    self.node(names, path, lv, rv, c);
                    path.pop();
                    names.pop();
                }
                post_item(path, lhs, rhs, c);
            }
            2 => {
                let Some(items) = list_items(kind, names, lhs, rhs) else {
                    compare_leaf(path, lhs, rhs, c);
                    return;
                };
                for (pe, lv, rv) in items {
                    path.push(pe);
                    self.node(names, path, lv, rv, c);
                    path.pop();
                }
                post_item(path, lhs, rhs, c);
            }
            _ => compare_leaf(path, lhs, rhs, c),
        }
    }
}

/// The keys of two maps in sorted order, each with its value in either
/// (a merge of the two sorted iterations: no key is looked up).
struct SortedUnion<'a> {
    l: std::iter::Peekable<serde_json::map::Iter<'a>>,
    r: std::iter::Peekable<serde_json::map::Iter<'a>>,
}

impl<'a> SortedUnion<'a> {
    fn new(l: &'a Map<String, Value>, r: &'a Map<String, Value>) -> Self {
        Self {
            l: l.iter().peekable(),
            r: r.iter().peekable(),
        }
    }
}

impl<'a> Iterator for SortedUnion<'a> {
    type Item = (&'a String, Option<&'a Value>, Option<&'a Value>);

    fn next(&mut self) -> Option<Self::Item> {
        let order = match (self.l.peek(), self.r.peek()) {
            (None, None) => return None,
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (Some((lk, _)), Some((rk, _))) => lk.cmp(rk),
        };
        match order {
            std::cmp::Ordering::Less => self.l.next().map(|(k, v)| (k, Some(v), None)),
            std::cmp::Ordering::Greater => self.r.next().map(|(k, v)| (k, None, Some(v))),
            std::cmp::Ordering::Equal => {
                let (k, lv) = self.l.next()?;
                let rv = self.r.next().map(|(_, v)| v);
                Some((k, Some(lv), rv))
            }
        }
    }
}

fn post_item(path: &FieldPath, lhs: Option<&Value>, rhs: Option<&Value>, c: &mut Comparison) {
    if lhs.is_none() {
        c.added.insert(path);
    } else if rhs.is_none() {
        c.removed.insert(path);
    }
}

/// The walk [`compare`] replaced (every key looked up, no shortcut for
/// equal values): the reference it is tested against.
#[cfg(test)]
pub(super) fn compare_reference(kind: &Types<'_>, lhs: &Value, rhs: &Value) -> Comparison {
    let mut c = Comparison::default();
    ref_compare_node(
        kind,
        &mut Vec::new(),
        &mut Vec::new(),
        Some(lhs),
        Some(rhs),
        &mut c,
    );
    c
}

#[cfg(test)]
fn ref_compare_leaf(
    path: &FieldPath,
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    c: &mut Comparison,
) {
    match (lhs, rhs) {
        (None, Some(_)) => c.added.insert(path),
        (Some(_), None) => c.removed.insert(path),
        (Some(a), Some(b)) if a != b => c.modified.insert(path),
        _ => {}
    }
}

#[cfg(test)]
fn ref_compare_node(
    kind: &Types<'_>,
    names: &mut Vec<String>,
    path: &mut FieldPath,
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    c: &mut Comparison,
) {
    match node_shape(lhs, rhs) {
        1 => {
            let l = lhs.and_then(Value::as_object);
            let r = rhs.and_then(Value::as_object);
            if atomic_map(kind, names)
                || (l.is_none_or(Map::is_empty) && r.is_none_or(Map::is_empty))
            {
                ref_compare_leaf(path, lhs, rhs, c);
                return;
            }
            let mut keys: Vec<&String> = l.map(|m| m.keys().collect()).unwrap_or_default();
            if let Some(r) = r {
                keys.extend(r.keys().filter(|k| !l.is_some_and(|l| l.contains_key(*k))));
            }
            for k in keys {
                names.push(k.clone());
                path.push(PathElement::Field(k.clone()));
                ref_compare_node(
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
            ref_post_item(path, lhs, rhs, c);
        }
        2 => {
            let Some(items) = list_items(kind, names, lhs, rhs) else {
                ref_compare_leaf(path, lhs, rhs, c);
                return;
            };
            for (pe, lv, rv) in items {
                path.push(pe);
                ref_compare_node(kind, names, path, lv, rv, c);
                path.pop();
            }
            ref_post_item(path, lhs, rhs, c);
        }
        _ => ref_compare_leaf(path, lhs, rhs, c),
    }
}

#[cfg(test)]
fn ref_post_item(path: &FieldPath, lhs: Option<&Value>, rhs: Option<&Value>, c: &mut Comparison) {
    if lhs.is_none() {
        c.added.insert(path);
    } else if rhs.is_none() {
        c.removed.insert(path);
    }
}
