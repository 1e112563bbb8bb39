//! The resource registry: which group/version/kind/plural the server serves,
//! whether each is namespaced, its verbs and status/scale subresources.
//! Built-in types come from a real server's discovery (see `builtin`);
//! CustomResourceDefinitions add and remove entries at runtime.
//! The registry never stores objects.

use std::sync::{Arc, RwLock};

/// One served resource (one version of one group's plural).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInfo {
    /// API group ("" for core).
    pub group: String,
    /// API version within the group.
    pub version: String,
    /// Kind of a single object.
    pub kind: String,
    /// Lower-case plural used in URLs.
    pub plural: String,
    /// Lower-case singular name.
    pub singular: String,
    /// True if objects live in namespaces.
    pub namespaced: bool,
    /// True if `/status` is a separate subresource (main writes ignore status).
    pub has_status: bool,
    /// kubectl short names.
    pub short_names: Vec<String>,
    /// Discovery categories (`all`).
    pub categories: Vec<String>,
    /// A custom resource version's `additionalPrinterColumns` (empty: the
    /// default Age column; always empty for built-in kinds).
    pub printer_columns: Vec<PrinterColumn>,
    /// The scale subresource (a CRD version's, or `.spec.replicas` /
    /// `.status.replicas` for the built-in kinds that have one).
    pub scale: Option<ScaleSubresource>,
    /// Verbs of the main resource, as discovery lists them (`create` only
    /// for reviews and bindings; no `deletecollection` on namespaces).
    pub verbs: Vec<String>,
}

/// One `additionalPrinterColumns` entry of a CRD version.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PrinterColumn {
    /// Column header.
    pub name: String,
    /// `integer`, `number`, `string`, `boolean` or `date`.
    pub type_: String,
    /// OpenAPI format hint.
    pub format: String,
    /// Human description.
    pub description: String,
    /// 0 shows always; higher only in wide output.
    pub priority: i64,
    /// Simple JSONPath evaluated against each object (`.spec.replicas`).
    pub json_path: String,
}

/// A CRD version's `subresources.scale`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScaleSubresource {
    /// JSONPath of the desired replicas (`.spec.replicas`).
    pub spec_replicas_path: String,
    /// JSONPath of the observed replicas (`.status.replicas`).
    pub status_replicas_path: String,
    /// JSONPath of the serialized label selector, if any.
    pub label_selector_path: Option<String>,
}

impl ResourceInfo {
    /// `group/version` or `version` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Key of the storage bucket: all versions of a group/plural share one,
    /// and `events.k8s.io` Events share core Events' bucket.
    pub fn storage_key(&self) -> String {
        if self.group.is_empty() || (self.group == "events.k8s.io" && self.plural == "events") {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// Kind of the list type.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }
}

/// The verbs of a resource with every verb (custom resources).
pub(crate) const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The table of served resources, shared by every request.
#[derive(Debug, Clone)]
pub struct Registry {
    inner: Arc<RwLock<Vec<ResourceInfo>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// Registry holding the built-in resources.
    pub fn new() -> Self {
        let list = super::builtin::resources().to_vec();
        Registry {
            inner: Arc::new(RwLock::new(list)),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<ResourceInfo>> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Looks up a resource by URL coordinates.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<ResourceInfo> {
        self.read()
            .iter()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
            .cloned()
    }

    /// Every served resource, in registration order.
    pub fn all(&self) -> Vec<ResourceInfo> {
        self.read().clone()
    }

    /// Served groups (excluding core) with their versions, in registration order.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for r in self.read().iter().filter(|r| !r.group.is_empty()) {
            match out.iter_mut().find(|(g, _)| *g == r.group) {
                Some((_, versions)) => {
                    if !versions.contains(&r.version) {
                        versions.push(r.version.clone());
                    }
                }
                None => out.push((r.group.clone(), vec![r.version.clone()])),
            }
        }
        out
    }

    /// Resources of one group/version.
    pub fn resources_in(&self, group: &str, version: &str) -> Vec<ResourceInfo> {
        self.read()
            .iter()
            .filter(|r| r.group == group && r.version == version)
            .cloned()
            .collect()
    }

    /// Replaces every entry of `group`/`plural` with `versions` (a CRD was created or changed).
    pub fn set_custom(&self, group: &str, plural: &str, versions: Vec<ResourceInfo>) {
        let mut w = self.inner.write().unwrap_or_else(|p| p.into_inner());
        w.retain(|r| !(r.group == group && r.plural == plural));
        w.extend(versions);
    }

    /// Removes every entry of `group`/`plural` (a CRD was deleted).
    pub fn remove_custom(&self, group: &str, plural: &str) {
        let mut w = self.inner.write().unwrap_or_else(|p| p.into_inner());
        w.retain(|r| !(r.group == group && r.plural == plural));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn core_pods_are_namespaced_with_status() {
        let r = Registry::new().lookup("", "v1", "pods").unwrap();
        assert!(r.namespaced && r.has_status);
        assert_eq!(r.storage_key(), "pods");
        assert_eq!(r.api_version(), "v1");
    }

    #[test]
    fn groups_list_each_group_once() {
        let groups = Registry::new().groups();
        assert!(groups
            .iter()
            .any(|(g, v)| g == "coordination.k8s.io" && v == &["v1"]));
        let n = groups.iter().filter(|(g, _)| g == "events.k8s.io").count();
        assert_eq!(n, 1);
    }
}
