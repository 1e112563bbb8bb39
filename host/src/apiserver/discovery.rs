//! Discovery documents (`/version`, `/api`, `/api/v1`, `/apis`,
//! `/apis/{group}/{version}`) built from the [`Registry`]. Only the legacy
//! (unaggregated) discovery types are served: clients asking for aggregated
//! discovery also accept `application/json` and fall back to these.

use serde_json::{json, Value};

use super::registry::{Registry, ResourceInfo};

/// Kubernetes version this server imitates.
pub const GIT_VERSION: &str = "v1.32.0-wasmctrl";

/// `/version` document.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": GIT_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.23",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `/api` document.
pub fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    })
}

/// `/apis` document.
pub fn groups(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg
        .groups()
        .into_iter()
        .map(|(g, versions)| {
            let vs: Vec<Value> = versions
                .iter()
                .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
                .collect();
            let preferred = vs.first().cloned().unwrap_or(Value::Null);
            json!({"name": g, "versions": vs, "preferredVersion": preferred})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}` document, or None if the group is not served.
pub fn group(reg: &Registry, name: &str) -> Option<Value> {
    let (g, versions) = reg.groups().into_iter().find(|(g, _)| g == name)?;
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
        .collect();
    let preferred = vs.first().cloned().unwrap_or(Value::Null);
    Some(
        json!({"kind": "APIGroup", "apiVersion": "v1", "name": g, "versions": vs, "preferredVersion": preferred}),
    )
}

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn resource_entries(r: &ResourceInfo) -> Vec<Value> {
    let mut main = json!({
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": VERBS,
    });
    if !r.short_names.is_empty() {
        main["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        main["categories"] = json!(r.categories);
    }
    let mut out = vec![main];
    if r.has_status {
        out.push(json!({
            "name": format!("{}/status", r.plural),
            "singularName": "",
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": ["get", "patch", "update"],
        }));
    }
    out
}

/// `APIResourceList` for one group/version, or None if it is not served.
pub fn resources(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let list = reg.resources_in(group, version);
    if list.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let resources: Vec<Value> = list.iter().flat_map(resource_entries).collect();
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn core_v1_lists_pods_with_short_name_and_status_subresource() {
        let doc = resources(&Registry::new(), "", "v1").unwrap();
        let rs = doc["resources"].as_array().unwrap();
        let pods = rs.iter().find(|r| r["name"] == "pods").unwrap();
        assert_eq!(pods["shortNames"], json!(["po"]));
        assert!(rs.iter().any(|r| r["name"] == "pods/status"));
        assert!(resources(&Registry::new(), "nope", "v1").is_none());
    }

    #[test]
    fn apis_lists_coordination_group() {
        let doc = groups(&Registry::new());
        assert!(doc["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "coordination.k8s.io"));
    }
}
