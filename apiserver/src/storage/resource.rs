//! What the server knows of one served resource: its group, version,
//! kind, plural, scope, verbs, printer columns and status/scale
//! subresources. Plain data; it never decides which resources are served
//! (`registry` does) and never holds objects.

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
