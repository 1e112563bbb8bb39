//! The provisioner's decision, as plain functions: a tier's [`Limits`] (the
//! guest's defaults, overridden entry by entry by the text of the
//! `tier-overrides` ConfigMap) and the bodies of the three children a
//! namespace of that tier gets ([`quota_spec`], [`limit_range_spec`],
//! [`role_binding`]). No snapshot, no plan, no I/O: the glue in `lib.rs`
//! reads the snapshot, calls these and writes the results.

use std::collections::BTreeMap;

use serde::Serialize;
use wasmctrl_guest_sdk::quantity::parse_quantity;

/// The label whose value names a namespace's tier.
pub const TIER_LABEL: &str = "platform.example.com/tier";

/// The tiers this guest provisions; a namespace labelled with any other
/// value is not selected.
pub const TIERS: [&str; 2] = ["small", "large"];

/// The label selector of the Namespaces this guest provisions.
pub fn tier_selector() -> String {
    format!("{TIER_LABEL} in ({})", TIERS.join(","))
}

/// The API group of RoleBindings, ClusterRoles and Groups.
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// What a tier allows a namespace, each entry a Kubernetes quantity.
///
/// Written as text, `cpu=2,memory=4Gi,pods=10,container-cpu=250m,container-memory=256Mi`
/// (any subset, in any order, each entry replacing the one it names): in the
/// guest's configuration (`--config namespaces.small=...`) and in the
/// `tier-overrides` ConfigMap (`data.small`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The namespace's total CPU requests (`requests.cpu` of its quota).
    pub cpu: String,
    /// The namespace's total memory requests (`requests.memory`).
    pub memory: String,
    /// How many pods it may hold (`pods`).
    pub pods: String,
    /// A container's CPU request and limit when it states none (its
    /// LimitRange's `defaultRequest` and `default`).
    pub container_cpu: String,
    /// A container's memory request and limit when it states none.
    pub container_memory: String,
}

/// Why a limits text was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LimitsError {
    /// An entry is not `key=value`.
    #[error("{0:?} is not KEY=QUANTITY")]
    NotAnEntry(String),
    /// The key is none of [`Limits::KEYS`].
    #[error("unknown key {0:?} (known: cpu, memory, pods, container-cpu, container-memory)")]
    UnknownKey(String),
    /// The value is not a Kubernetes quantity.
    #[error("{key}: {value:?} is not a quantity")]
    NotAQuantity {
        /// The entry's key.
        key: String,
        /// Its value.
        value: String,
    },
}

impl Limits {
    /// The keys of the text form, in field order.
    pub const KEYS: [&'static str; 5] =
        ["cpu", "memory", "pods", "container-cpu", "container-memory"];

    /// The built-in limits of `tier` (`small`, or anything else for the
    /// large ones), before the guest's configuration.
    pub fn builtin(tier: &str) -> Limits {
        let [cpu, memory, pods, container_cpu, container_memory] = if tier == "small" {
            ["2", "4Gi", "10", "250m", "256Mi"]
        } else {
            ["16", "64Gi", "100", "1", "1Gi"]
        };
        Limits {
            cpu: cpu.into(),
            memory: memory.into(),
            pods: pods.into(),
            container_cpu: container_cpu.into(),
            container_memory: container_memory.into(),
        }
    }

    /// These limits with the entries of `text` replacing the ones they
    /// name (blank text, or blank entries, replace nothing). The first bad
    /// entry refuses the whole text: half an override is never applied.
    pub fn overridden(&self, text: &str) -> Result<Limits, LimitsError> {
        let mut out = self.clone();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (key, value) = entry
                .split_once('=')
                .map(|(k, v)| (k.trim(), v.trim()))
                .ok_or_else(|| LimitsError::NotAnEntry(entry.to_string()))?;
            let slot = match key {
                "cpu" => &mut out.cpu,
                "memory" => &mut out.memory,
                "pods" => &mut out.pods,
                "container-cpu" => &mut out.container_cpu,
                "container-memory" => &mut out.container_memory,
                _ => return Err(LimitsError::UnknownKey(key.to_string())),
            };
            if parse_quantity(value).is_err() {
                return Err(LimitsError::NotAQuantity {
                    key: key.to_string(),
                    value: value.to_string(),
                });
            }
            *slot = value.to_string();
        }
        Ok(out)
    }
}

/// A ResourceQuota's `spec`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct QuotaSpec<'a> {
    /// `hard`: the namespace's totals.
    pub hard: BTreeMap<&'static str, &'a str>,
}

/// The `spec` of the quota a namespace with `limits` gets.
pub fn quota_spec(limits: &Limits) -> QuotaSpec<'_> {
    QuotaSpec {
        hard: BTreeMap::from([
            ("pods", limits.pods.as_str()),
            ("requests.cpu", limits.cpu.as_str()),
            ("requests.memory", limits.memory.as_str()),
        ]),
    }
}

/// A LimitRange's `spec`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LimitRangeSpec<'a> {
    /// `limits`: here one item, for containers.
    pub limits: [LimitRangeItem<'a>; 1],
}

/// One item of a LimitRange.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LimitRangeItem<'a> {
    /// `type`: `Container`.
    #[serde(rename = "type")]
    pub type_: &'static str,
    /// `default`: the limits of a container that states none.
    pub default: BTreeMap<&'static str, &'a str>,
    /// `defaultRequest`: the requests of a container that states none.
    pub default_request: BTreeMap<&'static str, &'a str>,
}

/// The `spec` of the LimitRange a namespace with `limits` gets: a container
/// stating no CPU or memory gets the tier's container values as its
/// request and its limit (so every pod counts against the quota's
/// `requests.*`, which the server demands of pods in a namespace with such
/// a quota).
pub fn limit_range_spec(limits: &Limits) -> LimitRangeSpec<'_> {
    let container = BTreeMap::from([
        ("cpu", limits.container_cpu.as_str()),
        ("memory", limits.container_memory.as_str()),
    ]);
    LimitRangeSpec {
        limits: [LimitRangeItem {
            type_: "Container",
            default: container.clone(),
            default_request: container,
        }],
    }
}

/// A RoleBinding's body (`roleRef`, `subjects`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Binding<'a> {
    /// The ClusterRole bound (immutable once created).
    pub role_ref: Subject<'a>,
    /// Who gets it: one Group.
    pub subjects: [Subject<'a>; 1],
}

/// A `roleRef` or a subject: an RBAC kind and name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Subject<'a> {
    /// `rbac.authorization.k8s.io`.
    pub api_group: &'static str,
    /// `ClusterRole` or `Group`.
    pub kind: &'static str,
    /// Its name.
    pub name: &'a str,
}

/// The name of the RoleBinding granting `role`: named after the role, since
/// a RoleBinding's `roleRef` cannot change (a new role is a new binding, and
/// the old one is deleted).
pub fn binding_name(role: &str) -> String {
    format!("tier-{role}")
}

/// The group a namespace's people are in: named after the namespace.
pub fn group_name(namespace: &str) -> String {
    format!("{namespace}:members")
}

/// The binding of the ClusterRole `role` to the group `group`.
pub fn role_binding<'a>(role: &'a str, group: &'a str) -> Binding<'a> {
    Binding {
        role_ref: Subject {
            api_group: RBAC_GROUP,
            kind: "ClusterRole",
            name: role,
        },
        subjects: [Subject {
            api_group: RBAC_GROUP,
            kind: "Group",
            name: group,
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_override_replaces_only_the_entries_it_names() {
        let small = Limits::builtin("small");
        let got = small
            .overridden(" cpu = 4 ,pods=20,, ")
            .expect("valid entries");
        assert_eq!(
            got,
            Limits {
                cpu: "4".into(),
                pods: "20".into(),
                ..small.clone()
            }
        );
        assert_eq!(small.overridden("").as_ref(), Ok(&small));
        assert_ne!(Limits::builtin("large"), small);
    }

    #[test]
    fn a_bad_entry_refuses_the_whole_text_naming_it() {
        let small = Limits::builtin("small");
        let cases = [
            ("cpu=4,cpus=8", LimitsError::UnknownKey("cpus".into())),
            ("cpu=4,memory", LimitsError::NotAnEntry("memory".into())),
            (
                "pods=20,memory=lots",
                LimitsError::NotAQuantity {
                    key: "memory".into(),
                    value: "lots".into(),
                },
            ),
        ];
        for (text, want) in cases {
            assert_eq!(small.overridden(text), Err(want), "{text}");
        }
        let message = small.overridden("cpus=8").unwrap_err().to_string();
        assert!(message.contains("\"cpus\"") && message.contains("container-cpu"));
    }

    #[test]
    fn the_children_state_the_limits_in_their_kubernetes_fields() {
        let limits = Limits::builtin("small");
        assert_eq!(
            json(&quota_spec(&limits)),
            r#"{"hard":{"pods":"10","requests.cpu":"2","requests.memory":"4Gi"}}"#
        );
        assert_eq!(
            json(&limit_range_spec(&limits)),
            r#"{"limits":[{"type":"Container","default":{"cpu":"250m","memory":"256Mi"},"defaultRequest":{"cpu":"250m","memory":"256Mi"}}]}"#
        );
        assert_eq!(
            json(&role_binding("edit", &group_name("team-a"))),
            r#"{"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"edit"},"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"Group","name":"team-a:members"}]}"#
        );
        assert_eq!(binding_name("view"), "tier-view");
        assert_eq!(
            tier_selector(),
            "platform.example.com/tier in (small,large)"
        );
    }

    fn json(body: &impl Serialize) -> String {
        wasmctrl_guest_sdk::serde_json::to_string(body).expect("serialisable")
    }
}
