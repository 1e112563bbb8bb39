//! The built-in kinds `wasmctrl new --for` scaffolds a controller of: read
//! from the aggregated discovery documents a real kube-apiserver 1.32
//! served (`apiserver/data/k8s-1.32/aggregated-api{,s}.json`, embedded),
//! each group's preferred version, only resources that can be listed and
//! watched. Resolves what a kubectl user types — a plural, a singular, a
//! short name or a kind, any of them `.group`-qualified — and suggests close
//! matches for an unknown name. It keeps no table of its own and never
//! reaches a server.

use std::sync::OnceLock;

use serde_json::Value as Json;

const CORE: &str = include_str!("../../../../apiserver/data/k8s-1.32/aggregated-api.json");
const GROUPS: &str = include_str!("../../../../apiserver/data/k8s-1.32/aggregated-apis.json");

/// One built-in resource a controller can watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuiltinKind {
    /// API group ("" for core).
    pub group: String,
    /// The group's preferred version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource name.
    pub plural: String,
    /// Singular resource name.
    pub singular: String,
    /// kubectl short names.
    pub short_names: Vec<String>,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
}

impl BuiltinKind {
    /// `plural` for the core group, `plural.group` otherwise: the name
    /// kubectl and RBAC rules use.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// Every name it answers to, lowercase, unqualified.
    fn names(&self) -> impl Iterator<Item = String> + '_ {
        [
            self.plural.clone(),
            self.singular.clone(),
            self.kind.to_ascii_lowercase(),
        ]
        .into_iter()
        .chain(self.short_names.iter().cloned())
    }
}

/// Why `--for` names no kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KindError {
    /// No built-in resource has this name.
    #[error("{name:?} is not a built-in kind of Kubernetes 1.32 that can be watched{}", suggest(.close))]
    Unknown {
        /// The name given.
        name: String,
        /// The closest built-in names, qualified.
        close: Vec<String>,
    },
    /// Several resources of different groups have this name.
    #[error("{name:?} names more than one built-in kind: {}; write one of them", .choices.join(", "))]
    Ambiguous {
        /// The name given.
        name: String,
        /// The candidates, qualified.
        choices: Vec<String>,
    },
    /// The embedded discovery is broken (a bad data update).
    #[error("the embedded discovery data is invalid: {0}")]
    Data(String),
}

fn suggest(close: &[String]) -> String {
    if close.is_empty() {
        String::new()
    } else {
        format!(" (did you mean {}?)", close.join(", "))
    }
}

/// The resources of one aggregated discovery document, preferred versions
/// only (each group lists it first).
fn parse(doc: &str) -> Result<Vec<BuiltinKind>, KindError> {
    let root: Json = serde_json::from_str(doc).map_err(|e| KindError::Data(e.to_string()))?;
    let text = |v: &Json, key: &str| v.get(key).and_then(Json::as_str).unwrap_or("").to_string();
    let list = |v: &Json, key: &str| -> Vec<String> {
        v.get(key)
            .and_then(Json::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Json::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default()
    };
    let groups = root
        .get("items")
        .and_then(Json::as_array)
        .ok_or_else(|| KindError::Data("no items".to_string()))?;
    let mut out = Vec::new();
    for g in groups {
        let group = g
            .pointer("/metadata/name")
            .and_then(Json::as_str)
            .unwrap_or("");
        let Some(preferred) = g.pointer("/versions/0") else {
            continue;
        };
        let version = text(preferred, "version");
        for r in preferred
            .get("resources")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
        {
            let verbs = list(r, "verbs");
            if !(verbs.iter().any(|v| v == "list") && verbs.iter().any(|v| v == "watch")) {
                continue;
            }
            out.push(BuiltinKind {
                group: group.to_string(),
                version: version.clone(),
                kind: r
                    .pointer("/responseKind/kind")
                    .and_then(Json::as_str)
                    .unwrap_or("")
                    .to_string(),
                plural: text(r, "resource"),
                singular: text(r, "singularResource"),
                short_names: list(r, "shortNames"),
                namespaced: text(r, "scope") == "Namespaced",
            });
        }
    }
    Ok(out)
}

/// Every watchable built-in resource: core first, then the groups in the
/// real server's order.
pub fn kinds() -> Result<&'static [BuiltinKind], KindError> {
    static ALL: OnceLock<Result<Vec<BuiltinKind>, KindError>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut all = parse(CORE)?;
        all.extend(parse(GROUPS)?);
        Ok(all)
    })
    .as_ref()
    .map(Vec::as_slice)
    .map_err(Clone::clone)
}

/// Whether `group` is a built-in API group ("" is the core group).
pub fn is_builtin_group(group: &str) -> Result<bool, KindError> {
    Ok(group.is_empty() || kinds()?.iter().any(|k| k.group == group))
}

/// The built-in kind `name` names: a plural (`deployments`), singular,
/// short name (`deploy`) or kind (`Deployment`, any case), optionally
/// followed by `.group` (`deployments.apps`, `roles.rbac.authorization.k8s.io`).
/// An unqualified name of kinds in several groups resolves to the core
/// group's, as kubectl does (`events`), else it is ambiguous.
pub fn resolve(name: &str) -> Result<BuiltinKind, KindError> {
    let all = kinds()?;
    let wanted = name.to_ascii_lowercase();
    let matches: Vec<&BuiltinKind> = all
        .iter()
        .filter(|k| {
            k.names().any(|n| {
                wanted == n
                    || wanted
                        .strip_prefix(n.as_str())
                        .and_then(|rest| rest.strip_prefix('.'))
                        .is_some_and(|group| !k.group.is_empty() && group == k.group)
            })
        })
        .collect();
    match matches.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(KindError::Unknown {
            name: name.to_string(),
            close: close_matches(&wanted, all),
        }),
        several => match several.iter().find(|k| k.group.is_empty()) {
            Some(core) if !wanted.contains('.') => Ok((*core).clone()),
            _ => Err(KindError::Ambiguous {
                name: name.to_string(),
                choices: several.iter().map(|k| k.qualified()).collect(),
            }),
        },
    }
}

/// Up to three qualified names whose plural or kind is within two edits of
/// `wanted` (its unqualified part), or starts with it, closest first.
fn close_matches(wanted: &str, all: &[BuiltinKind]) -> Vec<String> {
    let head = wanted.split('.').next().unwrap_or(wanted);
    let mut scored: Vec<(usize, String)> = all
        .iter()
        .filter_map(|k| {
            let distance = [k.plural.as_str(), &k.kind.to_ascii_lowercase()]
                .into_iter()
                .map(|n| {
                    if n.starts_with(head) && head.len() >= 3 {
                        1
                    } else {
                        edit_distance(head, n)
                    }
                })
                .min()?;
            (distance <= 2).then(|| (distance, k.qualified()))
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(3).map(|(_, n)| n).collect()
}

/// Levenshtein distance over bytes (names are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.bytes().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(name: &str) -> (String, String, String, bool) {
        let k = resolve(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        (k.group, k.version, k.kind, k.namespaced)
    }

    #[test]
    fn kubectl_s_names_resolve_to_the_discovered_kind_and_scope() {
        let ns = ("".into(), "v1".into(), "Namespace".into(), false);
        for name in ["namespaces", "namespace", "ns", "Namespace", "NAMESPACES"] {
            assert_eq!(resolved(name), ns, "{name}");
        }
        let deploy = ("apps".into(), "v1".into(), "Deployment".into(), true);
        for name in ["deployments", "deploy", "Deployment", "deployments.apps"] {
            assert_eq!(resolved(name), deploy, "{name}");
        }
        let role = resolve("roles.rbac.authorization.k8s.io").expect("a role");
        assert_eq!((role.kind.as_str(), role.namespaced), ("Role", true));
        assert_eq!(role.qualified(), "roles.rbac.authorization.k8s.io");
        assert!(!resolve("clusterroles").expect("a kind").namespaced);
        assert_eq!(resolved("services").2, "Service");
        // The preferred version, not autoscaling/v1.
        assert_eq!(resolved("hpa").1, "v2");
    }

    #[test]
    fn a_name_of_two_groups_is_core_s_unless_qualified() {
        assert_eq!(resolved("events").0, "");
        assert_eq!(resolved("events.events.k8s.io").0, "events.k8s.io");
    }

    #[test]
    fn unknown_and_unwatchable_names_are_refused_with_close_matches() {
        let e = resolve("deploymnets").unwrap_err().to_string();
        assert!(e.contains("\"deploymnets\" is not a built-in kind"), "{e}");
        assert!(e.contains("did you mean deployments.apps"), "{e}");
        let e = resolve("namespac").unwrap_err().to_string();
        assert!(e.contains("namespaces"), "{e}");
        // Create-only and list-only resources cannot be watched.
        for name in ["bindings", "tokenreviews", "componentstatuses"] {
            assert!(
                matches!(resolve(name), Err(KindError::Unknown { .. })),
                "{name}"
            );
        }
        let e = resolve("widgets.example.com").unwrap_err().to_string();
        assert!(e.contains("\"widgets.example.com\""), "{e}");
        assert!(matches!(
            resolve("deployments.batch"),
            Err(KindError::Unknown { .. })
        ));
    }

    #[test]
    fn built_in_groups_are_known() {
        for group in ["", "apps", "rbac.authorization.k8s.io", "batch"] {
            assert!(is_builtin_group(group).expect("valid data"), "{group}");
        }
        assert!(!is_builtin_group("example.com").expect("valid data"));
    }
}
