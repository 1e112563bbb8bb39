//! What a patch is applied to and what a schema says of a list: an
//! object's group, version and kind, a list's server-side apply type and
//! its strategic merge strategy. Plain data; it never reads a schema
//! (`schema` does).

/// The group, version and kind of the object a patch applies to; it selects
/// the merge keys and list types used by strategic merge patch and
/// server-side apply.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ObjectKind {
    /// API group; empty for the core group.
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `ConfigMap`.
    pub kind: String,
}

impl ObjectKind {
    /// Builds an [`ObjectKind`] from its parts.
    #[must_use]
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
        }
    }

    /// The `apiVersion` string: `version` for the core group,
    /// `group/version` otherwise.
    #[must_use]
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// How server-side apply treats a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListType {
    /// The list is one value, owned and replaced as a whole.
    Atomic,
    /// A set of scalars; each value is owned separately (`v:"value"`).
    Set,
    /// An associative list keyed by these fields (name, default used when an
    /// item omits the key); each item is owned separately
    /// (`k:{"name":"app"}`).
    Map(&'static [(&'static str, Option<&'static str>)]),
}

/// How strategic merge patch treats a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchStrategy {
    /// The patch list replaces the live list.
    Replace,
    /// Items are objects merged by this key (`patchMergeKey`).
    MergeByKey(&'static str),
    /// A list of scalars merged as a set (`patchStrategy: merge`, no key).
    MergePrimitives,
}
