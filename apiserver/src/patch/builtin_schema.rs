//! The list and map semantics of the built-in kinds, from a real 1.32
//! server's OpenAPI v3 documents (`wasmctrl_kube_rules::builtin::OPENAPI_LISTS`,
//! an extract shared with the host): per field, its
//! `x-kubernetes-list-type`, list-map keys, map type, patch strategy and
//! merge key, and which schema it refers to. It answers for a path from a
//! kind's root; it never knows custom resources (their CRD schema does).

use std::collections::HashMap;
use std::sync::OnceLock;

use serde::Deserialize;

use super::kind::{ListType, ObjectKind, PatchStrategy};

const EXTRACT: &str = wasmctrl_kube_rules::builtin::OPENAPI_LISTS;

#[derive(Deserialize)]
struct Extract {
    #[serde(borrow)]
    kinds: HashMap<&'static str, &'static str>,
    #[serde(borrow)]
    schemas: HashMap<&'static str, Schema>,
}

#[derive(Deserialize, Default)]
struct Schema {
    #[serde(default)]
    atomic: bool,
    #[serde(default, borrow)]
    props: HashMap<&'static str, Prop>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Prop {
    #[serde(rename = "ref", borrow)]
    ref_: Option<&'static str>,
    #[serde(borrow)]
    items: Option<&'static str>,
    #[serde(borrow)]
    values: Option<&'static str>,
    #[serde(borrow)]
    list_type: Option<&'static str>,
    #[serde(borrow)]
    map_type: Option<&'static str>,
    #[serde(borrow)]
    patch_strategy: Option<&'static str>,
    #[serde(borrow)]
    merge_key: Option<&'static str>,
    #[serde(default, borrow)]
    keys: Vec<(&'static str, Option<&'static str>)>,
    #[serde(default)]
    array: bool,
}

fn extract() -> Option<&'static Extract> {
    static TABLE: OnceLock<Option<Extract>> = OnceLock::new();
    TABLE
        .get_or_init(|| match serde_json::from_str(EXTRACT) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::error!("embedded openapi-lists.json is invalid: {e}");
                None
            }
        })
        .as_ref()
}

/// The property at `path` (field names from the root, list items and map
/// keys of object-valued maps as in [`super::schema::list_type`]), with
/// the schema holding it.
fn prop_at(kind: &ObjectKind, path: &[&str]) -> Option<&'static Prop> {
    let t = extract()?;
    let gvk = format!("{}/{}/{}", kind.group, kind.version, kind.kind);
    let mut schema = t.schemas.get(t.kinds.get(gvk.as_str())?)?;
    let mut i = 0;
    loop {
        let prop = schema.props.get(*path.get(i)?)?;
        i += 1;
        if i == path.len() {
            return Some(prop);
        }
        let next = match (prop.ref_.or(prop.items), prop.values) {
            (Some(r), _) => r,
            (None, Some(v)) => {
                i += 1; // the map key
                if i == path.len() {
                    return None;
                }
                v
            }
            (None, None) => return None,
        };
        schema = t.schemas.get(next)?;
    }
}

/// The list semantics at `path`, or None when `kind` is not built-in or
/// the path names no list there.
pub(super) fn list(kind: &ObjectKind, path: &[&str]) -> Option<(ListType, PatchStrategy)> {
    let p = prop_at(kind, path)?;
    if p.list_type.is_none() && !p.array && p.items.is_none() {
        return None;
    }
    let merge = p.patch_strategy.is_some_and(|s| s.contains("merge"));
    let strategy = match (merge, p.merge_key) {
        (true, Some(k)) => PatchStrategy::MergeByKey(k),
        (true, None) => PatchStrategy::MergePrimitives,
        _ => PatchStrategy::Replace,
    };
    let list_type = match p.list_type {
        Some("map") => ListType::Map(&p.keys),
        Some("set") => ListType::Set,
        Some(_) => ListType::Atomic,
        // A patch merge key without `+listType` makes the list associative
        // for server-side apply too (kube-openapi `schemaconv`).
        None => match p.merge_key {
            Some(_) => ListType::Map(std::slice::from_ref(merge_key_of(p)?)),
            None => ListType::Atomic,
        },
    };
    Some((list_type, strategy))
}

/// The merge key as a list-map key without default, kept alongside the
/// extract so it lives as long.
fn merge_key_of(p: &'static Prop) -> Option<&'static (&'static str, Option<&'static str>)> {
    static KEYS: OnceLock<HashMap<&'static str, &'static (&'static str, Option<&'static str>)>> =
        OnceLock::new();
    let keys = KEYS.get_or_init(|| {
        let mut m = HashMap::new();
        for s in extract().map(|t| t.schemas.values()).into_iter().flatten() {
            for p in s.props.values() {
                if let Some(k) = p.merge_key {
                    m.entry(k)
                        .or_insert_with(|| &*Box::leak(Box::new((k, None))));
                }
            }
        }
        m
    });
    keys.get(p.merge_key?).copied()
}

/// Whether the object-valued field at `path` is atomic
/// (`x-kubernetes-map-type: atomic` on the field or on its schema), or
/// None when `kind` is not built-in or the path is unknown.
pub(super) fn atomic_map(kind: &ObjectKind, path: &[&str]) -> Option<bool> {
    let p = prop_at(kind, path)?;
    if p.map_type == Some("atomic") {
        return Some(true);
    }
    let t = extract()?;
    Some(
        p.ref_
            .and_then(|r| t.schemas.get(r))
            .is_some_and(|s| s.atomic),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn kind(group: &str, kind: &str) -> ObjectKind {
        ObjectKind {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
        }
    }

    #[test]
    fn the_extract_gives_the_real_list_keys() {
        assert!(extract().is_some());
        let d = kind("apps", "Deployment");
        let (t, s) = list(&d, &["spec", "template", "spec", "containers", "ports"]).unwrap();
        assert_eq!(
            t,
            ListType::Map(&[("containerPort", None), ("protocol", Some("TCP"))])
        );
        assert_eq!(s, PatchStrategy::MergeByKey("containerPort"));
        let (t, _) = list(&d, &["spec", "template", "spec", "containers", "env"]).unwrap();
        assert_eq!(t, ListType::Map(&[("name", None)]));
        let (t, _) = list(&kind("", "Service"), &["spec", "ports"]).unwrap();
        assert_eq!(
            t,
            ListType::Map(&[("port", None), ("protocol", Some("TCP"))])
        );
        let (t, _) = list(&kind("", "Service"), &["spec", "externalIPs"]).unwrap();
        assert_eq!(t, ListType::Atomic);
        assert_eq!(atomic_map(&d, &["spec", "selector"]), Some(true));
        assert_eq!(atomic_map(&d, &["spec", "template"]), Some(false));
        assert_eq!(
            atomic_map(&kind("", "Service"), &["spec", "selector"]),
            Some(true)
        );
        assert!(list(&kind("example.com", "Widget"), &["spec", "x"]).is_none());
    }
}
