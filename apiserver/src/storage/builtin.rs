//! The built-in resources, read from a real kube-apiserver 1.32's aggregated
//! discovery documents (`data/k8s-1.32/aggregated-api{,s}.json`, embedded;
//! see the README there): group, version, kind, plural, singular, scope,
//! short names, categories, verbs and the status/scale subresources. A new
//! Kubernetes minor is a data update. It only parses the documents once;
//! it never decides what a verb does (see `http::handlers`).

use std::sync::OnceLock;

use serde::Deserialize;

use super::resource::{ResourceInfo, ScaleSubresource};

const CORE: &str = include_str!("../../data/k8s-1.32/aggregated-api.json");
const GROUPS: &str = include_str!("../../data/k8s-1.32/aggregated-apis.json");

/// The embedded discovery could not be read (a broken data update).
#[derive(Debug, thiserror::Error)]
pub enum BuiltinError {
    /// A document is not an `APIGroupDiscoveryList`.
    #[error("embedded discovery document {doc} is invalid: {source}")]
    Parse {
        /// Which document.
        doc: &'static str,
        /// The decoder's error.
        source: serde_json::Error,
    },
}

#[derive(Deserialize)]
struct GroupList {
    items: Vec<Group>,
}

#[derive(Deserialize)]
struct Group {
    #[serde(default)]
    metadata: GroupMeta,
    versions: Vec<Version>,
}

#[derive(Deserialize, Default)]
struct GroupMeta {
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
struct Version {
    version: String,
    #[serde(default)]
    resources: Vec<Resource>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Resource {
    resource: String,
    response_kind: Kind,
    scope: String,
    #[serde(default)]
    singular_resource: String,
    #[serde(default)]
    verbs: Vec<String>,
    #[serde(default)]
    short_names: Vec<String>,
    #[serde(default)]
    categories: Vec<String>,
    #[serde(default)]
    subresources: Vec<Subresource>,
}

#[derive(Deserialize)]
struct Kind {
    kind: String,
}

#[derive(Deserialize)]
struct Subresource {
    subresource: String,
}

/// The scale subresource of a built-in kind (`ScaleREST` of apps and core):
/// desired replicas in the spec, observed in the status.
fn builtin_scale() -> ScaleSubresource {
    ScaleSubresource {
        spec_replicas_path: ".spec.replicas".into(),
        status_replicas_path: ".status.replicas".into(),
        label_selector_path: None,
    }
}

fn parse(doc: &'static str, text: &str) -> Result<Vec<ResourceInfo>, BuiltinError> {
    let list: GroupList =
        serde_json::from_str(text).map_err(|source| BuiltinError::Parse { doc, source })?;
    let mut out = Vec::new();
    for g in list.items {
        let group = g.metadata.name.unwrap_or_default();
        for v in g.versions {
            for r in v.resources {
                let has = |s: &str| r.subresources.iter().any(|x| x.subresource == s);
                out.push(ResourceInfo {
                    group: group.clone(),
                    version: v.version.clone(),
                    kind: r.response_kind.kind.clone(),
                    singular: r.singular_resource.clone(),
                    namespaced: r.scope == "Namespaced",
                    has_status: has("status"),
                    scale: has("scale").then(builtin_scale),
                    short_names: r.short_names.clone(),
                    categories: r.categories.clone(),
                    printer_columns: Vec::new(),
                    verbs: r.verbs.clone(),
                    plural: r.resource,
                });
            }
        }
    }
    Ok(out)
}

fn load() -> Result<Vec<ResourceInfo>, BuiltinError> {
    let mut all = parse("aggregated-api.json", CORE)?;
    all.extend(parse("aggregated-apis.json", GROUPS)?);
    Ok(all)
}

/// Every built-in resource, core first, then the groups in the real
/// server's order (each group's preferred version first). Empty (and
/// logged) only if the embedded data is broken, which a test rules out.
pub fn resources() -> &'static [ResourceInfo] {
    static ALL: OnceLock<Vec<ResourceInfo>> = OnceLock::new();
    ALL.get_or_init(|| {
        load().unwrap_or_else(|e| {
            tracing::error!("{e}");
            Vec::new()
        })
    })
}

/// True if `info` is a custom resource (served because of a CRD)
/// (not one of the built-in resources).
pub fn is_custom(info: &ResourceInfo) -> bool {
    !resources()
        .iter()
        .any(|b| b.group == info.group && b.plural == info.plural)
}

/// Whether `info` is a create-only resource that stores nothing (reviews,
/// `bindings`): its create is answered, not stored.
pub fn is_virtual(info: &ResourceInfo) -> bool {
    info.verbs.len() == 1 && info.verbs[0] == "create"
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_discovery_parses_into_the_real_servers_resources() {
        let all = load().unwrap();
        // kubectl api-resources of the real server lists 58 built-in
        // resources of preferred versions; autoscaling/v1 adds one.
        assert_eq!(all.len(), 59);
        let deploy = all.iter().find(|r| r.plural == "deployments").unwrap();
        assert_eq!(deploy.group, "apps");
        assert_eq!(deploy.short_names, ["deploy"]);
        assert_eq!(deploy.categories, ["all"]);
        assert!(deploy.has_status && deploy.scale.is_some());
        let ns = all.iter().find(|r| r.plural == "namespaces").unwrap();
        assert!(!ns.namespaced && !ns.verbs.contains(&"deletecollection".to_string()));
        let bindings = all.iter().find(|r| r.plural == "bindings").unwrap();
        assert!(is_virtual(bindings));
        assert!(!all.iter().any(|r| r.group.ends_with("example.com")));
    }

    #[test]
    fn a_broken_document_is_a_typed_error() {
        assert!(matches!(
            parse("x", "{"),
            Err(BuiltinError::Parse { doc: "x", .. })
        ));
    }
}
