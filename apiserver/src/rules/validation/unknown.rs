//! Unknown fields by the typed round trip: an object of a built-in kind is
//! decoded into its k8s-openapi type and encoded again, and every key the
//! round trip drops is unknown (a `null`-valued one only when the type does
//! not declare it).
//!
//! This module owns *which paths are unknown* and removes them on request;
//! it never words a problem (see `messages`) and never looks at kinds it
//! has no type for (custom resources are left alone).

use serde_json::Value;

use super::typed;
use crate::rules::go_words::{Path, Seg};

/// The paths of `obj` that `kind`'s typed form drops (`typed`: `obj`
/// decoded into it and encoded again), in depth-first order of sorted keys.
pub(super) fn unknown_in_round_trip(kind: typed::Kind, obj: &Value, typed: &Value) -> Vec<Path> {
    let mut out = Vec::new();
    let declared = |path: &[Seg]| typed::declares(kind, obj, path);
    dropped(obj, typed, &mut Vec::new(), &declared, &mut out);
    out
}

/// Collects the keys of `input` that `typed` lacks. A `null`-valued key is
/// absent from both a known and an unknown field's round trip, so
/// `declared` decides for those: Go's strict decoder calls a key unknown
/// before it looks at the value (`sigs.k8s.io/json` `object()`), so
/// `"x": null` is as unknown as `"x": 1`.
fn dropped(
    input: &Value,
    typed: &Value,
    path: &mut Path,
    declared: &dyn Fn(&[Seg]) -> bool,
    out: &mut Vec<Path>,
) {
    match (input, typed) {
        (Value::Object(i), Value::Object(t)) => {
            for (k, v) in i {
                path.push(Seg::Key(k.clone()));
                match t.get(k) {
                    None if v.is_null() => {
                        if !declared(path) {
                            out.push(path.clone());
                        }
                    }
                    None => out.push(path.clone()),
                    Some(tv) => dropped(v, tv, path, declared, out),
                }
                path.pop();
            }
        }
        (Value::Array(i), Value::Array(t)) => {
            for (n, (iv, tv)) in i.iter().zip(t).enumerate() {
                path.push(Seg::Index(n));
                dropped(iv, tv, path, declared, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// Removes every path of `paths` from `obj`.
pub(super) fn prune(obj: &mut Value, paths: &[Path]) {
    for path in paths {
        let Some((Seg::Key(last), parent)) = path.split_last() else {
            continue;
        };
        let parent = parent.iter().try_fold(&mut *obj, |cur, seg| match seg {
            Seg::Key(k) => cur.get_mut(k.as_str()),
            Seg::Index(i) => cur.get_mut(*i),
        });
        if let Some(Value::Object(m)) = parent {
            m.remove(last);
        }
    }
}
