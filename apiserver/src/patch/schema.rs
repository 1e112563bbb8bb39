//! The list semantics the patch functions need: which lists are
//! associative (and by which keys), which are sets, which are atomic;
//! which object fields are atomic maps; and the strategic-merge-patch
//! strategy of each list. Built-in kinds answer from the real server's
//! OpenAPI (`builtin_schema`), custom resources from their CRD schema
//! ([`SchemaOverrides`]); anything undeclared is atomic (server-side apply)
//! and replaced (strategic merge patch).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::kind::{ListType, ObjectKind, PatchStrategy};

/// True when `kind` is of a built-in group (its semantics come from the
/// embedded OpenAPI extract, see `builtin_schema`); anything else is a
/// custom resource.
pub(super) fn is_builtin(kind: &ObjectKind) -> bool {
    crate::storage::builtin::resources()
        .iter()
        .any(|r| r.group == kind.group)
}

const BY_UID: &[(&str, Option<&str>)] = &[("uid", None)];

fn lookup(kind: &ObjectKind, path: &[&str]) -> Option<(ListType, PatchStrategy)> {
    if is_builtin(kind) {
        return super::builtin_schema::list(kind, path);
    }
    // a custom resource's metadata is an ObjectMeta too
    match path {
        ["metadata", "ownerReferences"] => {
            Some((ListType::Map(BY_UID), PatchStrategy::MergeByKey("uid")))
        }
        ["metadata", "finalizers"] => Some((ListType::Set, PatchStrategy::MergePrimitives)),
        _ => None,
    }
}

/// The server-side-apply list type of the list at `path` (field names from
/// the object root, list items skipped, e.g. `["spec", "containers",
/// "env"]`). Unknown lists are [`ListType::Atomic`].
#[must_use]
pub fn list_type(kind: &ObjectKind, path: &[&str]) -> ListType {
    lookup(kind, path).map_or(ListType::Atomic, |(t, _)| t)
}

/// The strategic-merge-patch strategy of the list at `path` (same path
/// convention as [`list_type`]). Unknown lists are
/// [`PatchStrategy::Replace`].
#[must_use]
pub fn patch_strategy(kind: &ObjectKind, path: &[&str]) -> PatchStrategy {
    lookup(kind, path).map_or(PatchStrategy::Replace, |(_, s)| s)
}

/// True when the object-valued field at `path` (same convention as
/// [`list_type`]) is atomic for server-side apply: owned, compared and
/// replaced as one value (`f:selector: {}`), like a `LabelSelector`, a
/// Service selector or a pod `nodeSelector`. Custom resources have none.
#[must_use]
pub fn is_atomic_map(kind: &ObjectKind, path: &[&str]) -> bool {
    is_builtin(kind) && super::builtin_schema::atomic_map(kind, path).unwrap_or(false)
}

/// List and map semantics declared by a CustomResourceDefinition's
/// structural schema (`x-kubernetes-list-type`,
/// `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`), layered over the
/// built-in table for server-side apply of that resource.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchemaOverrides {
    /// Field-name paths (`*` for any `additionalProperties` key) to list
    /// semantics.
    lists: BTreeMap<Vec<String>, ListKind>,
    /// Field-name paths of atomic maps and structs.
    atomic_maps: BTreeSet<Vec<String>>,
}

/// Owned list semantics: [`ListType`] with key names and JSON-encoded
/// key defaults that may come from a CRD schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ListKind {
    Atomic,
    Set,
    Map(Vec<(String, Option<String>)>),
}

impl From<ListType> for ListKind {
    fn from(t: ListType) -> Self {
        match t {
            ListType::Atomic => Self::Atomic,
            ListType::Set => Self::Set,
            ListType::Map(keys) => Self::Map(
                keys.iter()
                    .map(|(k, d)| {
                        (
                            (*k).to_owned(),
                            d.map(|d| Value::String(d.to_owned()).to_string()),
                        )
                    })
                    .collect(),
            ),
        }
    }
}

impl SchemaOverrides {
    /// Reads the list and map extensions of a CRD version's
    /// `schema.openAPIV3Schema`. Arrays without `x-kubernetes-list-type`
    /// stay atomic, as on the real server; `allOf`/`anyOf`/`oneOf` are not
    /// followed.
    #[must_use]
    pub fn from_openapi_v3(schema: &Value) -> Self {
        let mut out = Self::default();
        out.walk(schema, &mut Vec::new());
        out
    }

    /// True when the schema declares nothing beyond the defaults.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.lists.is_empty() && self.atomic_maps.is_empty()
    }

    fn walk(&mut self, schema: &Value, path: &mut Vec<String>) {
        let Some(obj) = schema.as_object() else {
            return;
        };
        if obj.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic") {
            self.atomic_maps.insert(path.clone());
        }
        if let Some(list_type) = obj.get("x-kubernetes-list-type").and_then(Value::as_str) {
            let kind = match list_type {
                "set" => ListKind::Set,
                "map" => {
                    let item_props = obj.get("items").and_then(|i| i.get("properties"));
                    let keys = obj
                        .get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .map(|keys| {
                            keys.iter()
                                .filter_map(Value::as_str)
                                .map(|k| {
                                    let default = item_props
                                        .and_then(|p| p.get(k))
                                        .and_then(|p| p.get("default"))
                                        .map(Value::to_string);
                                    (k.to_owned(), default)
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    ListKind::Map(keys)
                }
                _ => ListKind::Atomic,
            };
            self.lists.insert(path.clone(), kind);
        }
        if let Some(props) = obj.get("properties").and_then(Value::as_object) {
            for (name, sub) in props {
                path.push(name.clone());
                self.walk(sub, path);
                path.pop();
            }
        }
        if let Some(items) = obj.get("items") {
            self.walk(items, path);
        }
        if let Some(additional) = obj.get("additionalProperties").filter(|a| a.is_object()) {
            path.push("*".to_owned());
            self.walk(additional, path);
            path.pop();
        }
    }

    fn matches(pattern: &[String], path: &[&str]) -> bool {
        pattern.len() == path.len() && pattern.iter().zip(path).all(|(p, s)| p == "*" || p == s)
    }

    fn list(&self, path: &[&str]) -> Option<&ListKind> {
        self.lists
            .iter()
            .find(|(pattern, _)| Self::matches(pattern, path))
            .map(|(_, kind)| kind)
    }

    fn atomic_map(&self, path: &[&str]) -> bool {
        self.atomic_maps
            .iter()
            .any(|pattern| Self::matches(pattern, path))
    }
}

/// The type information one apply or update walks with: the built-in
/// table for `kind`, overlaid by a CRD schema when there is one.
#[derive(Debug, Clone, Copy)]
pub(super) struct Types<'a> {
    pub(super) kind: &'a ObjectKind,
    pub(super) overrides: Option<&'a SchemaOverrides>,
}

impl Types<'_> {
    pub(super) fn list(&self, path: &[&str]) -> ListKind {
        self.overrides
            .and_then(|o| o.list(path))
            .cloned()
            .unwrap_or_else(|| list_type(self.kind, path).into())
    }

    pub(super) fn atomic_map(&self, path: &[&str]) -> bool {
        self.overrides.is_some_and(|o| o.atomic_map(path)) || is_atomic_map(self.kind, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_lists_have_their_core_merge_keys() {
        let pod = ObjectKind::new("", "v1", "Pod");
        let deploy = ObjectKind::new("apps", "v1", "Deployment");
        let cases: &[(&ObjectKind, &[&str], PatchStrategy)] = &[
            (
                &pod,
                &["spec", "containers"],
                PatchStrategy::MergeByKey("name"),
            ),
            (
                &pod,
                &["spec", "initContainers"],
                PatchStrategy::MergeByKey("name"),
            ),
            (
                &pod,
                &["spec", "containers", "ports"],
                PatchStrategy::MergeByKey("containerPort"),
            ),
            (
                &pod,
                &["spec", "containers", "env"],
                PatchStrategy::MergeByKey("name"),
            ),
            (
                &pod,
                &["spec", "containers", "volumeMounts"],
                PatchStrategy::MergeByKey("mountPath"),
            ),
            (
                &pod,
                &["spec", "volumes"],
                PatchStrategy::MergeByKey("name"),
            ),
            (
                &pod,
                &["spec", "imagePullSecrets"],
                PatchStrategy::MergeByKey("name"),
            ),
            (&pod, &["spec", "tolerations"], PatchStrategy::Replace),
            (
                &pod,
                &["status", "conditions"],
                PatchStrategy::MergeByKey("type"),
            ),
            (
                &pod,
                &["metadata", "ownerReferences"],
                PatchStrategy::MergeByKey("uid"),
            ),
            (
                &pod,
                &["metadata", "finalizers"],
                PatchStrategy::MergePrimitives,
            ),
            (
                &deploy,
                &["spec", "template", "spec", "containers"],
                PatchStrategy::MergeByKey("name"),
            ),
            (&deploy, &["spec", "containers"], PatchStrategy::Replace),
        ];
        for (kind, path, want) in cases {
            assert_eq!(patch_strategy(kind, path), *want, "{path:?}");
        }
    }

    #[test]
    fn selectors_are_atomic_maps_for_builtin_kinds_only() {
        let deploy = ObjectKind::new("apps", "v1", "Deployment");
        let svc = ObjectKind::new("", "v1", "Service");
        let pod = ObjectKind::new("", "v1", "Pod");
        let cr = ObjectKind::new("example.com", "v1", "Widget");
        assert!(is_atomic_map(&deploy, &["spec", "selector"]));
        assert!(is_atomic_map(&svc, &["spec", "selector"]));
        assert!(is_atomic_map(&pod, &["spec", "nodeSelector"]));
        assert!(is_atomic_map(
            &deploy,
            &["spec", "template", "spec", "nodeSelector"]
        ));
        assert!(is_atomic_map(
            &pod,
            &["spec", "containers", "env", "valueFrom", "secretKeyRef"]
        ));
        assert!(!is_atomic_map(&pod, &["metadata", "labels"]));
        assert!(!is_atomic_map(&cr, &["spec", "selector"]));
    }

    #[test]
    fn crd_schema_extensions_override_the_defaults() {
        let schema = serde_json::json!({"type":"object","properties":{
            "spec":{"type":"object","properties":{
                "selector":{"type":"object","x-kubernetes-map-type":"atomic"},
                "tags":{"type":"array","x-kubernetes-list-type":"set","items":{"type":"string"}},
                "routes":{"type":"object","additionalProperties":{"type":"array","x-kubernetes-list-type":"map",
                    "x-kubernetes-list-map-keys":["port","protocol"],
                    "items":{"type":"object","properties":{"port":{"type":"integer"},"protocol":{"type":"string","default":"TCP"}}}}}}},
            "status":{"type":"object","properties":{"conditions":{"type":"array","x-kubernetes-list-type":"map",
                "x-kubernetes-list-map-keys":["type"],"items":{"type":"object"}}}}}});
        let overrides = SchemaOverrides::from_openapi_v3(&schema);
        let cr = ObjectKind::new("example.com", "v1", "Widget");
        let types = Types {
            kind: &cr,
            overrides: Some(&overrides),
        };
        assert_eq!(
            types.list(&["status", "conditions"]),
            ListKind::Map(vec![("type".into(), None)])
        );
        assert_eq!(types.list(&["spec", "tags"]), ListKind::Set);
        assert_eq!(
            types.list(&["spec", "routes", "web"]),
            ListKind::Map(vec![
                ("port".into(), None),
                ("protocol".into(), Some("\"TCP\"".into()))
            ])
        );
        assert_eq!(types.list(&["spec", "other"]), ListKind::Atomic);
        assert_eq!(types.list(&["metadata", "finalizers"]), ListKind::Set);
        assert!(types.atomic_map(&["spec", "selector"]));
        assert!(!types.atomic_map(&["spec"]));
    }

    #[test]
    fn custom_resource_lists_are_atomic_except_metadata() {
        let cr = ObjectKind::new("example.com", "v1", "Widget");
        assert_eq!(list_type(&cr, &["status", "conditions"]), ListType::Atomic);
        assert_eq!(list_type(&cr, &["spec", "containers"]), ListType::Atomic);
        assert_eq!(list_type(&cr, &["metadata", "finalizers"]), ListType::Set);
        assert_eq!(
            list_type(&cr, &["metadata", "ownerReferences"]),
            ListType::Map(BY_UID)
        );
    }
}
