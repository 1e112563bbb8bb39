//! The small table of list semantics the patch functions need: which lists
//! are associative (and by which keys), which are sets, which are atomic;
//! which object fields are atomic maps; and the strategic-merge-patch
//! strategy of each list.
//!
//! It mirrors the `+listType`/`+listMapKey` and `patchStrategy`/
//! `patchMergeKey` markers of the core types for the fields controllers
//! touch; anything not in the table is atomic (server-side apply) and
//! replaced (strategic merge patch), as for a custom resource whose schema
//! says nothing about the list.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::ObjectKind;

/// How server-side apply treats a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListType {
    /// The list is one value, owned and replaced as a whole.
    Atomic,
    /// A set of scalars; each value is owned separately (`v:"value"`).
    Set,
    /// An associative list keyed by these fields (name, default used when an
    /// item omits the key); each item is owned separately
    /// (`k:{"name":"app"}`).
    Map(&'static [(&'static str, Option<&'static str>)]),
}

/// How strategic merge patch treats a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchStrategy {
    /// The patch list replaces the live list.
    Replace,
    /// Items are objects merged by this key (`patchMergeKey`).
    MergeByKey(&'static str),
    /// A list of scalars merged as a set (`patchStrategy: merge`, no key).
    MergePrimitives,
}

/// API groups served by the built-in types (everything else is a custom
/// resource).
pub(super) const BUILTIN_GROUPS: &[&str] = &[
    "",
    "apps",
    "batch",
    "coordination.k8s.io",
    "events.k8s.io",
    "policy",
    "networking.k8s.io",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "autoscaling",
    "apiextensions.k8s.io",
    "scheduling.k8s.io",
    "discovery.k8s.io",
    "node.k8s.io",
    "admissionregistration.k8s.io",
    "certificates.k8s.io",
];

const BY_NAME: &[(&str, Option<&str>)] = &[("name", None)];
const BY_UID: &[(&str, Option<&str>)] = &[("uid", None)];
const BY_TYPE: &[(&str, Option<&str>)] = &[("type", None)];
const BY_MOUNT_PATH: &[(&str, Option<&str>)] = &[("mountPath", None)];
const BY_DEVICE_PATH: &[(&str, Option<&str>)] = &[("devicePath", None)];
const BY_IP: &[(&str, Option<&str>)] = &[("ip", None)];
const BY_CONTAINER_PORT: &[(&str, Option<&str>)] =
    &[("containerPort", None), ("protocol", Some("TCP"))];
const BY_SERVICE_PORT: &[(&str, Option<&str>)] = &[("port", None), ("protocol", Some("TCP"))];
const BY_TOPOLOGY: &[(&str, Option<&str>)] = &[("topologyKey", None), ("whenUnsatisfiable", None)];

/// Where the pod spec sits inside objects of this kind, if it has one.
fn pod_spec_prefix(kind: &ObjectKind) -> Option<&'static [&'static str]> {
    match (kind.group.as_str(), kind.kind.as_str()) {
        ("", "Pod") => Some(&["spec"]),
        ("", "PodTemplate") => Some(&["template", "spec"]),
        ("", "ReplicationController")
        | ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet")
        | ("batch", "Job") => Some(&["spec", "template", "spec"]),
        ("batch", "CronJob") => Some(&["spec", "jobTemplate", "spec", "template", "spec"]),
        _ => None,
    }
}

fn lookup(kind: &ObjectKind, path: &[&str]) -> Option<(ListType, PatchStrategy)> {
    match path {
        ["metadata", "ownerReferences"] => {
            return Some((ListType::Map(BY_UID), PatchStrategy::MergeByKey("uid")))
        }
        ["metadata", "finalizers"] => return Some((ListType::Set, PatchStrategy::MergePrimitives)),
        _ => {}
    }
    if !BUILTIN_GROUPS.contains(&kind.group.as_str()) {
        return None;
    }
    if let ["status", "conditions"] = path {
        return Some((ListType::Map(BY_TYPE), PatchStrategy::MergeByKey("type")));
    }
    if let Some(rest) = pod_spec_prefix(kind).and_then(|p| path.strip_prefix(p)) {
        return pod_spec_list(rest);
    }
    match (kind.kind.as_str(), path) {
        // A patch merge key without `+listType` makes the list associative
        // for server-side apply too (kube-openapi `schemaconv`).
        ("Node", ["status", "addresses"]) => {
            Some((ListType::Map(BY_TYPE), PatchStrategy::MergeByKey("type")))
        }
        ("Pod", ["status", "podIPs" | "hostIPs"]) => {
            Some((ListType::Map(BY_IP), PatchStrategy::MergeByKey("ip")))
        }
        ("Node", ["spec", "podCIDRs"]) => Some((ListType::Set, PatchStrategy::MergePrimitives)),
        ("Service", ["spec", "ports"]) => Some((
            ListType::Map(BY_SERVICE_PORT),
            PatchStrategy::MergeByKey("port"),
        )),
        _ => None,
    }
}

fn pod_spec_list(rest: &[&str]) -> Option<(ListType, PatchStrategy)> {
    let by_name = (ListType::Map(BY_NAME), PatchStrategy::MergeByKey("name"));
    match rest {
        ["containers" | "initContainers" | "ephemeralContainers"]
        | ["volumes" | "imagePullSecrets" | "schedulingGates"] => Some(by_name),
        ["containers" | "initContainers" | "ephemeralContainers", field] => match *field {
            "ports" => Some((
                ListType::Map(BY_CONTAINER_PORT),
                PatchStrategy::MergeByKey("containerPort"),
            )),
            "env" => Some(by_name),
            "volumeMounts" => Some((
                ListType::Map(BY_MOUNT_PATH),
                PatchStrategy::MergeByKey("mountPath"),
            )),
            "volumeDevices" => Some((
                ListType::Map(BY_DEVICE_PATH),
                PatchStrategy::MergeByKey("devicePath"),
            )),
            _ => None,
        },
        ["hostAliases"] => Some((ListType::Map(BY_IP), PatchStrategy::MergeByKey("ip"))),
        ["topologySpreadConstraints"] => Some((
            ListType::Map(BY_TOPOLOGY),
            PatchStrategy::MergeByKey("topologyKey"),
        )),
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

/// Object-valued fields of built-in kinds that are atomic
/// (`+structType=atomic`/`+mapType=atomic`) wherever they appear.
const ATOMIC_MAP_FIELDS: &[&str] = &[
    "labelSelector",
    "namespaceSelector",
    "configMapKeyRef",
    "secretKeyRef",
    "fieldRef",
    "resourceFieldRef",
];

/// True when the object-valued field at `path` (same convention as
/// [`list_type`]) is atomic for server-side apply: owned, compared and
/// replaced as one value (`f:selector: {}`), like a `LabelSelector`, a
/// Service selector or a pod `nodeSelector`. Custom resources have none.
#[must_use]
pub fn is_atomic_map(kind: &ObjectKind, path: &[&str]) -> bool {
    if !BUILTIN_GROUPS.contains(&kind.group.as_str()) {
        return false;
    }
    if path
        .last()
        .is_some_and(|last| ATOMIC_MAP_FIELDS.contains(last))
    {
        return true;
    }
    if let Some(["nodeSelector"]) = pod_spec_prefix(kind).and_then(|p| path.strip_prefix(p)) {
        return true;
    }
    matches!(
        (kind.group.as_str(), kind.kind.as_str(), path),
        (
            "" | "apps" | "batch" | "policy",
            "Service"
                | "ReplicationController"
                | "Deployment"
                | "ReplicaSet"
                | "StatefulSet"
                | "DaemonSet"
                | "Job"
                | "PodDisruptionBudget",
            ["spec", "selector"]
        )
    )
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
