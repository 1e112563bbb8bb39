//! Problems in the words of the real server: strict-decoding problems
//! deduplicated and capped like the decoder's, their JSON paths,
//! structured-merge-diff's error for an apply configuration with
//! undeclared fields, and the Go quoting and `%v` formatting those
//! messages embed.
//!
//! This module owns *how a problem reads*; it never finds problems itself
//! and never decides whether a write fails.

use std::collections::{BTreeSet, HashSet};
use std::fmt::Write as _;

use serde_json::Value;

use crate::patch::{self, ListType, ObjectKind, PathElement};
use crate::rules::go_words::{go_float, go_quote, Path, Seg};
use crate::storage::registry::ResourceInfo;

/// Most strict-decoding problems one decode reports (the real decoder's cap).
const MAX_PROBLEMS: usize = 100;

/// Strict-decoding problems, deduplicated and capped like the real decoder's.
#[derive(Default)]
pub(super) struct Problems {
    pub(super) list: Vec<String>,
    seen: HashSet<String>,
}

impl Problems {
    pub(super) fn push(&mut self, text: String) {
        if self.list.len() < MAX_PROBLEMS && self.seen.insert(text.clone()) {
            self.list.push(text);
        }
    }

    pub(super) fn unknown(&mut self, unknown: &[Path]) {
        for p in unknown {
            self.push(format!("unknown field {}", go_quote(&json_path(p))));
        }
    }
}

/// sigs.k8s.io/json's strict-error path: `spec.containers[0].name`, map
/// keys as they are (dots included).
pub(super) fn json_path(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Index(i) => {
                let _ = write!(s, "[{i}]");
            }
        }
    }
    s
}

/// `failed to create typed patch object (ns/name; /v1, Kind=Pod):
/// .spec.foo: field not declared in schema`. structured-merge-diff stops
/// at the first undeclared field of each object (in Go's random map order;
/// here the first in key order), and lists several errors as `errors:`
/// lines.
pub(super) fn apply_message(
    info: &ResourceInfo,
    obj: &Value,
    unknown: &[Path],
    namespace: &str,
    name: &str,
) -> String {
    let kind = ObjectKind::new(&info.group, &info.version, &info.kind);
    let unknown_set: BTreeSet<&Path> = unknown.iter().collect();
    let mut errs = Vec::new();
    let mut walk = SmdWalk {
        kind: &kind,
        unknown: &unknown_set,
        path: Vec::new(),
        names: Vec::new(),
        errs: &mut errs,
    };
    walk.value(obj, "");
    let detail = if errs.len() == 1 {
        errs.concat()
    } else {
        let lines: Vec<String> = errs.iter().map(|e| format!("  {e}")).collect();
        format!("errors:\n{}", lines.join("\n"))
    };
    format!(
        "failed to create typed patch object ({namespace}/{name}; {}/{}, Kind={}): {detail}",
        info.group, info.version, info.kind
    )
}

/// A walk of an apply configuration that renders structured-merge-diff
/// paths: `.spec.containers[name="c"].foo` for associative lists, `[="v"]`
/// for sets, `[0]` for atomic lists.
struct SmdWalk<'a> {
    kind: &'a ObjectKind,
    unknown: &'a BTreeSet<&'a Path>,
    /// JSON path of the current value.
    path: Path,
    /// Field names of the current value (list items skipped), for list types.
    names: Vec<String>,
    errs: &'a mut Vec<String>,
}

impl SmdWalk<'_> {
    fn value(&mut self, v: &Value, rendered: &str) {
        match v {
            Value::Object(m) => {
                for (k, child) in m {
                    let here = format!("{rendered}.{k}");
                    self.path.push(Seg::Key(k.clone()));
                    if self.unknown.contains(&self.path) {
                        self.errs
                            .push(format!("{here}: field not declared in schema"));
                        self.path.pop();
                        break;
                    }
                    self.names.push(k.clone());
                    self.value(child, &here);
                    self.names.pop();
                    self.path.pop();
                }
            }
            Value::Array(items) => {
                let names: Vec<&str> = self.names.iter().map(String::as_str).collect();
                let list = patch::list_type(self.kind, &names);
                for (i, item) in items.iter().enumerate() {
                    let here = format!("{rendered}{}", list_element(list, i, item));
                    self.path.push(Seg::Index(i));
                    self.value(item, &here);
                    self.path.pop();
                }
            }
            _ => {}
        }
    }
}

/// The path element of item `i` of a list of type `list` (its index when
/// an associative item lacks a key).
fn list_element(list: ListType, i: usize, item: &Value) -> PathElement {
    match list {
        ListType::Atomic => PathElement::Index(i),
        ListType::Set => PathElement::Value(item.to_string()),
        ListType::Map(keys) => {
            let mut fields = Vec::with_capacity(keys.len());
            for (key, default) in keys {
                let value = match (item.get(*key), default) {
                    (Some(v), _) if !v.is_null() => v.to_string(),
                    (_, Some(d)) => Value::String((*d).to_owned()).to_string(),
                    _ => return PathElement::Index(i),
                };
                fields.push(((*key).to_owned(), value));
            }
            fields.sort();
            PathElement::Key(fields)
        }
    }
}

/// Go's `fmt.Sprintf("%+v", m)` of a patch decoded into
/// `map[string]interface{}` (integers as `int64`, other numbers `float64`):
/// `map[spec:map[replicas:2 paused:<nil>]]`, keys sorted.
pub(super) fn go_format(v: &Value) -> String {
    let mut out = String::new();
    go_format_into(v, &mut out);
    out
}

fn go_format_into(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => {
            let _ = write!(out, "{b}");
        }
        Value::Number(n) => match n.as_i64() {
            Some(i) => {
                let _ = write!(out, "{i}");
            }
            None => out.push_str(&go_float(n.as_f64().unwrap_or_default())),
        },
        Value::String(s) => out.push_str(s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                go_format_into(item, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push_str("map[");
            for (i, (k, item)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(k);
                out.push(':');
                go_format_into(item, out);
            }
            out.push(']');
        }
    }
}
