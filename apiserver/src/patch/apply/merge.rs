//! Building the applied object: structured-merge-diff's `Merge` with the
//! applied configuration winning (list items in its order), the prune step
//! that removes what the applier gave up and nobody else owns, applied
//! `null`s and the reset of ignored fields.
//!
//! This module owns *what the object looks like after an apply*; it never
//! decides ownership or conflicts and never touches `managedFields`.

use std::collections::{BTreeSet, VecDeque};

use serde_json::Value;

use super::fieldset::{atomic_map, find_item, index_items, item_element, type_of_list};
use crate::patch::fields::{FieldSet, PathElement};
use crate::patch::schema::{ListKind, Types};

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

/// structured-merge-diff `Merge` with the applied value winning: maps
/// merge, associative lists and sets merge item by item in the order
/// structured-merge-diff produces, everything else is replaced.
#[cfg(test)]
pub(super) fn merge(kind: &Types<'_>, lhs: Option<&Value>, rhs: &Value) -> Value {
    merge_node(kind, &mut Vec::new(), lhs, rhs)
}

/// [`merge`] of `lhs`, which becomes the result (nothing of `lhs` is
/// copied but list items).
pub(super) fn merge_into(kind: &Types<'_>, lhs: &mut Value, rhs: &Value) {
    merge_in_place(kind, &mut Vec::new(), lhs, rhs);
}

/// `*lhs = merge_node(kind, names, Some(lhs), rhs)`.
fn merge_in_place(kind: &Types<'_>, names: &mut Vec<String>, lhs: &mut Value, rhs: &Value) {
    match (lhs, rhs) {
        (Value::Object(l), Value::Object(r)) if !atomic_map(kind, names) => {
            for (k, rv) in r {
                names.push(k.clone());
                match l.get_mut(k) {
                    Some(slot) => merge_in_place(kind, names, slot, rv),
                    None => {
                        let merged = merge_node(kind, names, None, rv);
                        l.insert(k.clone(), merged);
                    }
                }
                names.pop();
            }
        }
        (lhs @ Value::Array(_), Value::Array(r)) => {
            let merged = match &*lhs {
                Value::Array(l) => {
                    let list = type_of_list(kind, names);
                    if list == ListKind::Atomic || (l.is_empty() && r.is_empty()) {
                        rhs.clone()
                    } else {
                        Value::Array(merge_list(kind, names, &list, l, r))
                    }
                }
                _ => rhs.clone(),
            };
            *lhs = merged;
        }
        (lhs, _) => *lhs = rhs.clone(),
    }
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
    let mut shared: VecDeque<&PathElement> = rhs
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
pub(super) fn prune(
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
pub(super) fn drop_applied_nulls(merged: &mut Value, applied: &Value) {
    let (Value::Object(m), Value::Object(a)) = (merged, applied) else {
        return;
    };
    for (k, av) in a {
        if av.is_null() {
            if m.get(k).is_some_and(Value::is_null) {
                m.remove(k);
            }
        } else if av.is_object() {
            // (below anything but an object there is nothing to drop)
            if let Some(child) = m.get_mut(k) {
                drop_applied_nulls(child, av);
            }
        }
    }
}

/// Puts the live value of each ignored top-level path back, as the
/// registry strategy would.
pub(super) fn reset_ignored(merged: &mut Value, base: &Value, ignored: &[Vec<String>]) {
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

fn get_path_mut<'a>(v: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    let mut cur = v;
    for k in path {
        cur = cur.get_mut(k)?;
    }
    Some(cur)
}
