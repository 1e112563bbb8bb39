//! Typed views of common built-in kinds — [`Namespace`], [`ConfigMap`],
//! [`Secret`], [`Pod`], [`Service`], [`Deployment`], [`ResourceQuota`],
//! [`LimitRange`], [`Role`], [`RoleBinding`] — each a `#[derive(View)]`
//! over the fields a controller of that kind usually reads, and its type
//! ([`Kind::gvk`]). Use one as any view: `Watch::new("namespaces",
//! Namespace::gvk()).fields(Namespace::FIELDS)` declares the watch,
//! `Namespace::resolve(&watch)` in `Guest::fields` resolves it, and
//! `fields.read(&object)` reads a snapshot object. A field a view lacks is
//! a view of your own away (`#[derive(View)]`, [`crate::view`]). This
//! module declares paths only: how each type reads is the SDK's
//! `FieldValue`, and it never sees an object a watch did not project.
//!
//! ```
//! use wasmctrl_guest_sdk::kinds::{Kind, Namespace, ResourceQuota};
//! use wasmctrl_guest_sdk::{View, Watch};
//!
//! let namespaces = Watch::new("namespaces", Namespace::gvk())
//!     .label_selector("tier")
//!     .fields(Namespace::FIELDS)
//!     .per_object();
//! let quotas = Watch::new("quotas", ResourceQuota::gvk())
//!     .fields(ResourceQuota::FIELDS)
//!     .owner("namespaces");
//! assert_eq!(namespaces.fields, ["metadata.labels", "status.phase"]);
//! assert_eq!(quotas.gvk.api_version(), "v1");
//! ```

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::{Condition, GroupVersionKind, View};

/// A Kubernetes type a view is of.
pub trait Kind {
    /// API group ("" for core).
    const GROUP: &'static str;
    /// API version.
    const VERSION: &'static str;
    /// Kind.
    const KIND: &'static str;

    /// The type, for [`Watch::new`](crate::Watch::new) and
    /// [`WriteRule::new`](crate::WriteRule::new).
    fn gvk() -> GroupVersionKind {
        GroupVersionKind::new(Self::GROUP, Self::VERSION, Self::KIND)
    }
}

/// Implements [`Kind`] for each view.
macro_rules! kinds {
    ($($view:ident $(<$l:lifetime>)? = $group:literal / $version:literal;)*) => {
        $(impl Kind for $view $(<$l>)? {
            const GROUP: &'static str = $group;
            const VERSION: &'static str = $version;
            const KIND: &'static str = stringify!($view);
        })*
    };
}

kinds! {
    Namespace<'_> = "" / "v1";
    ConfigMap = "" / "v1";
    Secret<'_> = "" / "v1";
    Pod<'_> = "" / "v1";
    Service<'_> = "" / "v1";
    Deployment<'_> = "apps" / "v1";
    ResourceQuota = "" / "v1";
    LimitRange = "" / "v1";
    Role = "rbac.authorization.k8s.io" / "v1";
    RoleBinding<'_> = "rbac.authorization.k8s.io" / "v1";
}

/// A Namespace (cluster-scoped).
#[derive(View, Debug, PartialEq)]
pub struct Namespace<'a> {
    /// `metadata.labels`.
    #[field("metadata.labels")]
    pub labels: BTreeMap<String, String>,
    /// `status.phase`: `Active` or `Terminating`.
    #[field("status.phase")]
    pub phase: Option<&'a str>,
}

/// A ConfigMap.
#[derive(View, Debug, PartialEq)]
pub struct ConfigMap {
    /// `data`.
    #[field("data")]
    pub data: BTreeMap<String, String>,
    /// `immutable`.
    #[field("immutable")]
    pub immutable: Option<bool>,
}

/// A Secret. Its `data` values are base64, as the API server stores them.
#[derive(View, Debug, PartialEq)]
pub struct Secret<'a> {
    /// `type` (`Opaque`, `kubernetes.io/tls`, ...).
    #[field("type")]
    pub secret_type: Option<&'a str>,
    /// `data`, base64-encoded values.
    #[field("data")]
    pub data: BTreeMap<String, String>,
    /// `immutable`.
    #[field("immutable")]
    pub immutable: Option<bool>,
}

/// A Pod.
#[derive(View, Debug, PartialEq)]
pub struct Pod<'a> {
    /// `spec.nodeName`, once scheduled.
    #[field("spec.nodeName")]
    pub node_name: Option<&'a str>,
    /// Each container's `image`, in order.
    #[field("spec.containers[*].image")]
    pub images: Vec<&'a str>,
    /// `status.phase`: `Pending`, `Running`, `Succeeded`, `Failed`,
    /// `Unknown`.
    #[field("status.phase")]
    pub phase: Option<&'a str>,
    /// `status.podIP`.
    #[field("status.podIP")]
    pub pod_ip: Option<&'a str>,
    /// `status.conditions` (`Ready`, `PodScheduled`, ...).
    #[conditions("status.conditions")]
    pub conditions: Vec<Condition>,
}

/// A Service.
#[derive(View, Debug, PartialEq)]
pub struct Service<'a> {
    /// `spec.type` (`ClusterIP` when the server defaulted it).
    #[field("spec.type")]
    pub service_type: Option<&'a str>,
    /// `spec.clusterIP`.
    #[field("spec.clusterIP")]
    pub cluster_ip: Option<&'a str>,
    /// `spec.selector`: the pods it sends traffic to.
    #[field("spec.selector")]
    pub selector: BTreeMap<String, String>,
    /// Each port's `port`, in order.
    #[field("spec.ports[*].port")]
    pub ports: Vec<i64>,
}

/// A Deployment (`apps/v1`).
#[derive(View, Debug, PartialEq)]
pub struct Deployment<'a> {
    /// `spec.replicas`.
    #[field("spec.replicas")]
    pub replicas: Option<i64>,
    /// `spec.selector.matchLabels`.
    #[field("spec.selector.matchLabels")]
    pub match_labels: BTreeMap<String, String>,
    /// Each container's `image` in the pod template, in order.
    #[field("spec.template.spec.containers[*].image")]
    pub images: Vec<&'a str>,
    /// `status.observedGeneration`: the generation the status is of.
    #[field("status.observedGeneration")]
    pub observed_generation: Option<i64>,
    /// `status.readyReplicas`.
    #[field("status.readyReplicas")]
    pub ready_replicas: Option<i64>,
    /// `status.availableReplicas`.
    #[field("status.availableReplicas")]
    pub available_replicas: Option<i64>,
    /// `status.conditions` (`Available`, `Progressing`, ...).
    #[conditions("status.conditions")]
    pub conditions: Vec<Condition>,
}

/// A ResourceQuota. Quantities are as the server stores them; parse one
/// with [`crate::quantity::parse_quantity`].
#[derive(View, Debug, PartialEq)]
pub struct ResourceQuota {
    /// `spec.hard`: the limits, by resource name.
    #[field("spec.hard")]
    pub hard: BTreeMap<String, String>,
    /// `status.used`: what the namespace uses, as the quota controller
    /// last counted it.
    #[field("status.used")]
    pub used: BTreeMap<String, String>,
}

/// A LimitRange.
#[derive(View, Debug, PartialEq)]
pub struct LimitRange {
    /// `spec.limits`: the list of `LimitRangeItem`s, as JSON.
    #[field("spec.limits")]
    pub limits: Option<Json>,
}

/// A Role (`rbac.authorization.k8s.io/v1`).
#[derive(View, Debug, PartialEq)]
pub struct Role {
    /// `rules`: the list of `PolicyRule`s, as JSON.
    #[field("rules")]
    pub rules: Option<Json>,
}

/// A RoleBinding (`rbac.authorization.k8s.io/v1`).
#[derive(View, Debug, PartialEq)]
pub struct RoleBinding<'a> {
    /// `roleRef.kind`: `Role` or `ClusterRole`.
    #[field("roleRef.kind")]
    pub role_kind: Option<&'a str>,
    /// `roleRef.name`.
    #[field("roleRef.name")]
    pub role_name: Option<&'a str>,
    /// Each subject's `kind` (`User`, `Group`, `ServiceAccount`), in order.
    #[field("subjects[*].kind")]
    pub subject_kinds: Vec<&'a str>,
    /// Each subject's `name`, in order.
    #[field("subjects[*].name")]
    pub subject_names: Vec<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Obj, Val, World};
    use crate::{Manifest, Schema, Snapshot, Watch};

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn json(text: &str) -> Val {
        Val::Json(text.into())
    }

    /// A manifest watching each kind through its view.
    fn manifest() -> Manifest {
        let watch = |name: &str, gvk: GroupVersionKind, fields: &[&str]| {
            Watch::new(name, gvk).fields(fields.iter().copied())
        };
        Manifest::new("t")
            .watch(watch("ns", Namespace::gvk(), Namespace::FIELDS))
            .watch(watch("cm", ConfigMap::gvk(), ConfigMap::FIELDS))
            .watch(watch("secrets", Secret::gvk(), Secret::FIELDS))
            .watch(watch("pods", Pod::gvk(), Pod::FIELDS))
            .watch(watch("svc", Service::gvk(), Service::FIELDS))
            .watch(watch("deploy", Deployment::gvk(), Deployment::FIELDS))
            .watch(watch("quotas", ResourceQuota::gvk(), ResourceQuota::FIELDS))
            .watch(watch("limits", LimitRange::gvk(), LimitRange::FIELDS))
            .watch(watch("roles", Role::gvk(), Role::FIELDS))
            .watch(watch("bindings", RoleBinding::gvk(), RoleBinding::FIELDS))
    }

    #[test]
    fn each_view_names_its_kind() {
        let kinds: Vec<String> = manifest()
            .watches
            .iter()
            .map(|w| format!("{} {}", w.gvk.api_version(), w.gvk.kind))
            .collect();
        assert_eq!(
            kinds,
            [
                "v1 Namespace",
                "v1 ConfigMap",
                "v1 Secret",
                "v1 Pod",
                "v1 Service",
                "apps/v1 Deployment",
                "v1 ResourceQuota",
                "v1 LimitRange",
                "rbac.authorization.k8s.io/v1 Role",
                "rbac.authorization.k8s.io/v1 RoleBinding"
            ]
        );
    }

    #[test]
    fn each_view_reads_what_its_watch_projects() {
        let m = manifest();
        let data = World::new(&m)
            .with(
                Obj::new("ns", "", "team-a")
                    .label("tier", "gold")
                    .set("status.phase", "Active"),
            )
            .with(Obj::new("cm", "a", "c").set("data", json(r#"{"k":"v","n":"1"}"#)))
            .with(
                Obj::new("secrets", "a", "s")
                    .set("type", "Opaque")
                    .set("data", json(r#"{"k":"dg=="}"#))
                    .set("immutable", true),
            )
            .with(
                Obj::new("pods", "a", "p")
                    .set("spec.nodeName", "n1")
                    .set_list("spec.containers[*].image", ["nginx:1.27", "busybox"])
                    .set("status.phase", "Running")
                    .set_list("status.conditions[*].type", ["Ready"])
                    .set_list("status.conditions[*].status", ["True"]),
            )
            .with(
                Obj::new("svc", "a", "web")
                    .set("spec.type", "ClusterIP")
                    .set("spec.clusterIP", "10.0.0.7")
                    .set("spec.selector", json(r#"{"app":"web"}"#))
                    .set_list("spec.ports[*].port", [80, 443]),
            )
            .with(
                Obj::new("deploy", "a", "web")
                    .set("spec.replicas", 3)
                    .set("spec.selector.matchLabels", json(r#"{"app":"web"}"#))
                    .set_list("spec.template.spec.containers[*].image", ["nginx:1.27"])
                    .set("status.readyReplicas", 2),
            )
            .with(
                Obj::new("quotas", "a", "q")
                    .set("spec.hard", json(r#"{"pods":"10","requests.cpu":"4"}"#))
                    .set("status.used", json(r#"{"pods":"3"}"#)),
            )
            .with(
                Obj::new("limits", "a", "l").set("spec.limits", json(r#"[{"type":"Container"}]"#)),
            )
            .with(Obj::new("roles", "a", "r").set("rules", json(r#"[{"verbs":["get"]}]"#)))
            .with(
                Obj::new("bindings", "a", "b")
                    .set("roleRef.kind", "ClusterRole")
                    .set("roleRef.name", "view")
                    .set_list("subjects[*].kind", ["Group"])
                    .set_list("subjects[*].name", ["team-a"]),
            )
            .snapshot()
            .expect("every fixture path is a view's path");
        let schema = Schema::new(&m).expect("unique names");
        let snap = Snapshot::new(&schema, &data).expect("valid");
        macro_rules! read {
            ($snap:ident, $view:ident, $watch:literal, $ns:literal, $name:literal) => {{
                let fields = $view::resolve(&schema.watch($watch).expect("declared"))
                    .expect("the view's own paths");
                let object = $snap.get(fields.watch(), $ns, $name).expect("present");
                fields.read(&object)
            }};
        }
        let ns = read!(snap, Namespace, "ns", "", "team-a");
        assert_eq!(
            (ns.labels, ns.phase),
            (map(&[("tier", "gold")]), Some("Active"))
        );
        let cm = read!(snap, ConfigMap, "cm", "a", "c");
        assert_eq!(cm.data, map(&[("k", "v"), ("n", "1")]));
        assert_eq!(cm.immutable, None);
        let s = read!(snap, Secret, "secrets", "a", "s");
        assert_eq!(
            (s.secret_type, s.data, s.immutable),
            (Some("Opaque"), map(&[("k", "dg==")]), Some(true))
        );
        let p = read!(snap, Pod, "pods", "a", "p");
        assert_eq!(
            (p.node_name, p.phase, p.pod_ip),
            (Some("n1"), Some("Running"), None)
        );
        assert_eq!(p.images, ["nginx:1.27", "busybox"]);
        assert!(p.conditions.len() == 1 && p.conditions[0].is_true());
        let svc = read!(snap, Service, "svc", "a", "web");
        assert_eq!(
            (svc.service_type, svc.cluster_ip, svc.ports),
            (Some("ClusterIP"), Some("10.0.0.7"), vec![80, 443])
        );
        assert_eq!(svc.selector, map(&[("app", "web")]));
        let d = read!(snap, Deployment, "deploy", "a", "web");
        assert_eq!(
            (d.replicas, d.ready_replicas, d.available_replicas),
            (Some(3), Some(2), None)
        );
        assert_eq!(d.match_labels, map(&[("app", "web")]));
        assert_eq!(d.images, ["nginx:1.27"]);
        let q = read!(snap, ResourceQuota, "quotas", "a", "q");
        assert_eq!(q.hard, map(&[("pods", "10"), ("requests.cpu", "4")]));
        assert_eq!(q.used, map(&[("pods", "3")]));
        let l = read!(snap, LimitRange, "limits", "a", "l");
        assert_eq!(l.limits, Some(serde_json::json!([{"type": "Container"}])));
        let r = read!(snap, Role, "roles", "a", "r");
        assert_eq!(r.rules, Some(serde_json::json!([{"verbs": ["get"]}])));
        let b = read!(snap, RoleBinding, "bindings", "a", "b");
        assert_eq!(
            (b.role_kind, b.role_name, b.subject_kinds, b.subject_names),
            (
                Some("ClusterRole"),
                Some("view"),
                vec!["Group"],
                vec!["team-a"]
            )
        );
        // Absent values read as empty, not as an error.
        let bare = World::new(&m)
            .with(Obj::new("svc", "a", "bare").set("spec.selector", "not a map"))
            .snapshot()
            .expect("declared");
        let snap = Snapshot::new(&schema, &bare).expect("valid");
        let svc = read!(snap, Service, "svc", "a", "bare");
        assert!(svc.selector.is_empty() && svc.ports.is_empty() && svc.cluster_ip.is_none());
    }
}
