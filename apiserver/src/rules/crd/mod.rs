//! CustomResourceDefinitions and what they make of custom objects:
//! validating a CRD (structural schemas included), marking it Established,
//! keeping the [`Registry`] in step so its custom resources are served, and
//! — through `schema`, `prune`, `defaults` and `validate` — pruning,
//! defaulting and validating custom objects against their version's
//! schema on every write. No conversion between versions happens here, and
//! nothing here touches the network.

mod defaults;
mod prune;
mod schema;
mod validate;

use serde_json::{json, Value};

pub(crate) use prune::unknown_paths;
pub(crate) use schema::version_schema;

use crate::storage::registry::{PrinterColumn, Registry, ResourceInfo, ScaleSubresource};
use crate::storage::store::Store;

/// True if `info` is CustomResourceDefinitions themselves.
pub(crate) fn is_crd(info: &ResourceInfo) -> bool {
    info.group == "apiextensions.k8s.io" && info.plural == "customresourcedefinitions"
}

pub use crate::storage::builtin::is_custom;

/// Validation errors `(field, message)` of a CRD being created; empty for other objects.
pub fn validate(info: &ResourceInfo, obj: &Value) -> Vec<(String, String)> {
    if !is_crd(info) {
        return Vec::new();
    }
    let mut errs = Vec::new();
    let group = obj
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let plural = obj
        .pointer("/spec/names/plural")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if group.is_empty() {
        errs.push(("spec.group".into(), "Required value".into()));
    }
    if plural.is_empty() {
        errs.push(("spec.names.plural".into(), "Required value".into()));
    }
    if obj
        .pointer("/spec/names/kind")
        .and_then(Value::as_str)
        .is_none()
    {
        errs.push(("spec.names.kind".into(), "Required value".into()));
    }
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        errs.push((
            "metadata.name".into(),
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    if obj
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        errs.push((
            "spec.versions".into(),
            "Invalid value: must have exactly one version marked as storage version".into(),
        ));
    }
    errs.extend(schema::structural_errors(obj));
    errs
}

/// Defaults `obj` (a custom object about to be stored) from its version's
/// `schema` and validates it; the `(field, message)` errors say why it may
/// not be stored. Its whole floats are stored as integers first, as the
/// real server's decode and print leave them (`2.0` → `2`).
pub(crate) fn admit(obj: &mut Value, schema: &Value) -> Vec<(String, String)> {
    wasmctrl_kube_rules::numbers::whole_floats_as_integers(obj);
    defaults::apply(obj, schema);
    validate::validate(obj, schema)
}

/// Marks a new CRD Established with its accepted names, as the apiextensions controllers do at once.
pub fn on_create(info: &ResourceInfo, obj: &mut Value) {
    if !is_crd(info) {
        return;
    }
    let names = obj
        .pointer("/spec/names")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let now = super::meta::now_rfc3339();
    let cond = |t: &str, reason: &str| json!({"type": t, "status": "True", "lastTransitionTime": now, "reason": reason, "message": ""});
    let versions: Vec<Value> = obj
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter(|v| v["storage"] == Value::Bool(true))
                .filter_map(|v| v.get("name").cloned())
                .collect()
        })
        .unwrap_or_default();
    obj["status"] = json!({
        "acceptedNames": names,
        "conditions": [cond("NamesAccepted", "NoConflicts"), cond("Established", "InitialNamesAccepted")],
        "storedVersions": versions,
    });
}

/// Resources a CRD object defines.
fn infos(obj: &Value) -> Option<(String, String, Vec<ResourceInfo>)> {
    let spec = obj.get("spec")?;
    let group = spec.get("group")?.as_str()?.to_string();
    let names = spec.get("names")?;
    let plural = names.get("plural")?.as_str()?.to_string();
    let kind = names.get("kind")?.as_str()?.to_string();
    let singular = names
        .get("singular")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_ascii_lowercase());
    let strings = |k: &str| -> Vec<String> {
        names
            .get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let namespaced = spec.get("scope").and_then(Value::as_str) != Some("Cluster");
    let versions = spec
        .get("versions")?
        .as_array()?
        .iter()
        .filter(|v| v.get("served") != Some(&Value::Bool(false)))
        .filter_map(|v| {
            Some(ResourceInfo {
                group: group.clone(),
                version: v.get("name")?.as_str()?.to_string(),
                kind: kind.clone(),
                plural: plural.clone(),
                singular: singular.clone(),
                namespaced,
                has_status: v.pointer("/subresources/status").is_some(),
                short_names: strings("shortNames"),
                categories: strings("categories"),
                printer_columns: printer_columns(v),
                scale: scale(v),
                verbs: crate::storage::registry::VERBS.map(String::from).to_vec(),
            })
        })
        .collect();
    Some((group, plural, versions))
}

/// A CRD version's `additionalPrinterColumns`.
fn printer_columns(version: &Value) -> Vec<PrinterColumn> {
    let text = |c: &Value, k: &str| {
        c.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .map(|cols| {
            cols.iter()
                .map(|c| PrinterColumn {
                    name: text(c, "name"),
                    type_: text(c, "type"),
                    format: text(c, "format"),
                    description: text(c, "description"),
                    priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                    json_path: text(c, "jsonPath"),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A CRD version's `subresources.scale`.
fn scale(version: &Value) -> Option<ScaleSubresource> {
    let s = version.pointer("/subresources/scale")?;
    let path = |k: &str| s.get(k).and_then(Value::as_str).map(str::to_string);
    Some(ScaleSubresource {
        spec_replicas_path: path("specReplicasPath")?,
        status_replicas_path: path("statusReplicasPath")?,
        label_selector_path: path("labelSelectorPath"),
    })
}

/// After a CRD write: (re)registers its resources (removed while it is being deleted).
pub fn sync_registry(reg: &Registry, info: &ResourceInfo, obj: &Value) {
    if !is_crd(info) {
        return;
    }
    if let Some((group, plural, versions)) = infos(obj) {
        reg.set_custom(&group, &plural, versions);
    }
}

/// After a CRD is removed: unregisters its resources and drops their objects.
pub(crate) fn on_delete(registry: &Registry, store: &Store, info: &ResourceInfo, obj: &Value) {
    if !is_crd(info) {
        return;
    }
    if let Some((group, plural, versions)) = infos(obj) {
        registry.remove_custom(&group, &plural);
        if let Some(v) = versions.first() {
            let storage = v.storage_key();
            let page = store.list(&storage, None, None, 0, |_| true);
            for raw in page.items {
                let o: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
                let key = (
                    o.pointer("/metadata/namespace")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    o.pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                );
                let _ = store.delete(&storage, &key, None, None);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({"metadata": {"name": "widgets.example.com"}, "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }})
    }

    #[test]
    fn crd_registers_its_versions_with_status_subresource() {
        let reg = Registry::new();
        let info = reg
            .lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .unwrap();
        assert!(validate(&info, &crd()).is_empty());
        sync_registry(&reg, &info, &crd());
        let w = reg.lookup("example.com", "v1", "widgets").unwrap();
        assert!(w.namespaced && w.has_status);
        assert!(is_custom(&w));
        let mut obj = crd();
        on_create(&info, &mut obj);
        assert_eq!(obj["status"]["conditions"][1]["type"], "Established");
    }

    #[test]
    fn crd_name_must_be_plural_dot_group() {
        let reg = Registry::new();
        let info = reg
            .lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .unwrap();
        let mut bad = crd();
        bad["metadata"]["name"] = json!("nope");
        assert_eq!(validate(&info, &bad)[0].0, "metadata.name");
    }
}
