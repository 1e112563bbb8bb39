//! An informer's identity ([`InformerKey`]): type, namespace and
//! selectors; the registry shares one informer per key. Plain values.

use kube::api::ApiResource;

/// Identity of a shared informer.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InformerKey {
    /// API group ("" for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Resource plural.
    pub plural: String,
    /// Namespace scope (None = all namespaces / cluster-scoped).
    pub namespace: Option<String>,
    /// Label selector.
    pub label_selector: Option<String>,
    /// Field selector.
    pub field_selector: Option<String>,
}

impl std::fmt::Display for InformerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gr = if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        };
        write!(f, "{gr}")?;
        if let Some(ns) = &self.namespace {
            write!(f, " in namespace {ns}")?;
        }
        if let Some(l) = &self.label_selector {
            write!(f, " labels {l:?}")?;
        }
        if let Some(l) = &self.field_selector {
            write!(f, " fields {l:?}")?;
        }
        Ok(())
    }
}

impl InformerKey {
    /// The kube dynamic resource for this key.
    pub fn api_resource(&self) -> ApiResource {
        ApiResource {
            group: self.group.clone(),
            version: self.version.clone(),
            api_version: if self.group.is_empty() {
                self.version.clone()
            } else {
                format!("{}/{}", self.group, self.version)
            },
            kind: self.kind.clone(),
            plural: self.plural.clone(),
        }
    }
}
