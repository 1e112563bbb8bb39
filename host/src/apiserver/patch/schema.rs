//! The small table of list semantics the patch functions need: which lists
//! are associative (and by which keys), which are sets, which are atomic;
//! and the strategic-merge-patch strategy of each list.
//!
//! It mirrors the `+listType`/`+listMapKey` and `patchStrategy`/
//! `patchMergeKey` markers of the core types for the fields controllers
//! touch; anything not in the table is atomic (server-side apply) and
//! replaced (strategic merge patch), as for a custom resource whose schema
//! says nothing about the list.

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

const BUILTIN_GROUPS: &[&str] = &[
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
        ("Node", ["status", "addresses"]) => {
            Some((ListType::Atomic, PatchStrategy::MergeByKey("type")))
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
