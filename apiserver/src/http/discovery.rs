//! Discovery documents (`/version`, `/api`, `/api/v1`, `/apis`,
//! `/apis/{group}/{version}`) built from the [`Registry`], legacy and
//! aggregated (`apidiscovery.k8s.io/v2` on `/api` and `/apis`, for clients
//! that ask for it, as kubectl does: one request instead of one per group).
//! It reads only the [`Registry`]: it never touches objects or the store,
//! and never advertises a resource the registry does not serve.

use serde_json::{json, Value};

use crate::storage::registry::{Registry, ResourceInfo};

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

fn resource_entries(r: &ResourceInfo) -> Vec<Value> {
    let mut main = json!({
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": r.verbs,
    });
    if !r.short_names.is_empty() {
        main["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        main["categories"] = json!(r.categories);
    }
    let mut out = vec![main];
    if r.group.is_empty() && r.plural == "pods" {
        out.push(json!({
            "name": "pods/binding",
            "singularName": "",
            "namespaced": true,
            "kind": "Binding",
            "verbs": ["create"],
        }));
    }
    if r.scale.is_some() {
        out.push(json!({
            "name": format!("{}/scale", r.plural),
            "singularName": "",
            "namespaced": r.namespaced,
            "group": "autoscaling",
            "version": "v1",
            "kind": "Scale",
            "verbs": ["get", "patch", "update"],
        }));
    }
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

/// The media type of aggregated discovery (`APIGroupDiscoveryList`, v2).
pub const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether an `Accept` header asks for aggregated discovery v2.
pub fn wants_aggregated(accept: &str) -> bool {
    accept.split(',').any(|t| {
        let params: Vec<&str> = t.split(';').map(str::trim).collect();
        params.contains(&"g=apidiscovery.k8s.io")
            && params.contains(&"v=v2")
            && params.contains(&"as=APIGroupDiscoveryList")
            && params.first().is_some_and(|m| m.ends_with("json"))
    })
}

fn aggregated_resource(r: &ResourceInfo) -> Value {
    let kind = |k: &str| json!({"group": "", "version": "", "kind": k});
    let mut out = json!({
        "resource": r.plural,
        "responseKind": kind(&r.kind),
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": r.verbs,
    });
    if !r.short_names.is_empty() {
        out["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        out["categories"] = json!(r.categories);
    }
    let mut subs = Vec::new();
    if r.group.is_empty() && r.plural == "pods" {
        subs.push(
            json!({"subresource": "binding", "responseKind": kind("Binding"), "verbs": ["create"]}),
        );
    }
    if r.scale.is_some() {
        subs.push(json!({"subresource": "scale",
            "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "verbs": ["get", "patch", "update"]}));
    }
    if r.has_status {
        subs.push(json!({"subresource": "status", "responseKind": kind(&r.kind), "verbs": ["get", "patch", "update"]}));
    }
    if !subs.is_empty() {
        out["subresources"] = Value::Array(subs);
    }
    out
}

/// Aggregated discovery of the core group (`core: true`, `/api`) or of
/// every other group (`/apis`), each group's versions in preference order.
pub fn aggregated(reg: &Registry, core: bool) -> Value {
    let groups: Vec<(String, Vec<String>)> = if core {
        vec![(String::new(), vec!["v1".to_string()])]
    } else {
        reg.groups()
    };
    let items: Vec<Value> = groups
        .into_iter()
        .map(|(g, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = reg
                        .resources_in(&g, v)
                        .iter()
                        .map(aggregated_resource)
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            let mut metadata = json!({"creationTimestamp": null});
            if !g.is_empty() {
                metadata["name"] = json!(g);
            }
            json!({"metadata": metadata, "versions": versions})
        })
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {}, "items": items})
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

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3` root: one entry per served group/version.
pub fn openapi_v3_root(reg: &Registry) -> Value {
    let mut paths = serde_json::Map::new();
    let mut gvs: Vec<(String, String)> = Vec::new();
    for r in reg.all() {
        let gv = (r.group.clone(), r.version.clone());
        if !gvs.contains(&gv) {
            gvs.push(gv);
        }
    }
    for (g, v) in gvs {
        let p = gv_path(&g, &v);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}")}),
        );
    }
    json!({"paths": paths})
}

/// `/openapi/v3/{api/v1|apis/g/v}`: a minimal OpenAPI 3 document that
/// declares, per resource, the PATCH operation and its `fieldValidation`
/// parameter. kubectl reads exactly this to decide it may leave validation
/// to the server (`--validate=strict` then needs no client-side schema).
/// Object schemas are not published.
pub fn openapi_v3_group_version(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let list = reg.resources_in(group, version);
    if list.is_empty() {
        return None;
    }
    let prefix = gv_path(group, version);
    let mut paths = serde_json::Map::new();
    for r in &list {
        let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
        let params = json!([
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}},
        ]);
        let op = |action: &str| {
            json!({
                "operationId": format!("{action}{}", r.kind),
                "parameters": params,
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
            })
        };
        let item = if r.namespaced {
            format!("/{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
        } else {
            format!("/{prefix}/{}/{{name}}", r.plural)
        };
        paths.insert(item, json!({"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete")}));
        let coll = if r.namespaced {
            format!("/{prefix}/namespaces/{{namespace}}/{}", r.plural)
        } else {
            format!("/{prefix}/{}", r.plural)
        };
        paths.insert(coll, json!({"get": op("list"), "post": op("post")}));
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": paths,
        "components": {"schemas": {}},
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
    fn openapi_v3_declares_field_validation_on_patch() {
        let reg = Registry::new();
        let root = openapi_v3_root(&reg);
        assert_eq!(
            root["paths"]["api/v1"]["serverRelativeURL"],
            "/openapi/v3/api/v1"
        );
        let doc = openapi_v3_group_version(&reg, "", "v1").unwrap();
        let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"]["kind"],
            "ConfigMap"
        );
        assert_eq!(patch["parameters"][0]["name"], "fieldValidation");
    }

    #[test]
    fn aggregated_discovery_lists_every_group_with_its_resources() {
        assert!(wants_aggregated(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
        ));
        assert!(!wants_aggregated("application/json, */*"));
        let reg = Registry::new();
        let apis = aggregated(&reg, false);
        let apps = apis["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["metadata"]["name"] == "apps")
            .unwrap();
        let deploy = apps["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "deployments")
            .unwrap();
        assert_eq!(deploy["scope"], "Namespaced");
        assert_eq!(deploy["subresources"].as_array().unwrap().len(), 2);
        let core = aggregated(&reg, true);
        assert!(core["items"][0]["metadata"].get("name").is_none());
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
