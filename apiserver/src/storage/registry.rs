//! The resource registry: which group/version/kind/plural the server serves,
//! whether each is namespaced, its verbs and status/scale subresources.
//! Built-in types come from a real server's discovery (see `builtin`);
//! CustomResourceDefinitions add and remove entries at runtime.
//! The registry never stores objects.

use std::sync::{Arc, RwLock};

pub(crate) use super::resource::VERBS;
pub use super::resource::{PrinterColumn, ResourceInfo, ScaleSubresource};

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
