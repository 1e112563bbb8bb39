//! Validation of a guest's manifest into the host's own types.
//!
//! Owns the checks that make a manifest safe to act on (names, kinds, field
//! paths, selectors' basic shape, the write allowlist) and the allowlist test
//! itself. It never starts informers or talks to the cluster.

use std::time::Duration;

use super::bindings::wasmctrl::controller::types as wit;
use crate::projection::{FieldPath, PathError, Projection};

/// Why a manifest was rejected. Every variant names the manifest field
/// (`watches[1] (pods).keys`), and the guest is named by the
/// [`super::GuestError`] that carries it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// The guest's own `describe` returned an error.
    #[error("the guest rejected its configuration: {0}")]
    Rejected(String),
    /// The guest name is not a DNS label.
    #[error("name: {0:?} is not a lowercase DNS label (a-z, 0-9, '-', at most 63)")]
    BadName(String),
    /// A guest that watches nothing can never be triggered.
    #[error("watches: the manifest declares no watches")]
    NoWatches,
    /// A field of the manifest is unusable.
    #[error("{field}: {problem}")]
    Invalid {
        /// Where, e.g. `watches[1] (pods).keys.by-index.index`.
        field: String,
        /// What is wrong.
        problem: String,
    },
}

fn invalid(field: impl Into<String>, problem: impl Into<String>) -> ManifestError {
    ManifestError::Invalid {
        field: field.into(),
        problem: problem.into(),
    }
}

/// group/version/kind on the host side.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gvk {
    /// "" for core.
    pub group: String,
    /// e.g. "v1".
    pub version: String,
    /// e.g. "Pod".
    pub kind: String,
}

impl Gvk {
    /// `apiVersion` as written in objects ("v1", "apps/v1").
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Splits an `apiVersion` + kind.
    pub fn from_api_version(api_version: &str, kind: &str) -> Self {
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), api_version.to_string()),
        };
        Gvk {
            group,
            version,
            kind: kind.to_string(),
        }
    }

    fn from_wit(g: &wit::GroupVersionKind) -> Self {
        Gvk {
            group: g.group.clone(),
            version: g.version.clone(),
            kind: g.kind.clone(),
        }
    }
}

impl std::fmt::Display for Gvk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.api_version(), self.kind)
    }
}

/// How object changes become request keys (validated: watch and index
/// references are positions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyMapping {
    /// "namespace/name" (or "name"): the watch is a primary.
    PerObject,
    /// One fixed key.
    Aggregate(String),
    /// Never enqueue.
    None,
    /// Enqueue the controller owner, an object of primary watch `.0`.
    Owner(usize),
    /// Enqueue every object of primary watch `.0` in the same namespace.
    SameNamespace(usize),
    /// Enqueue the objects of `primary` whose index `index` (position in
    /// its `indexes`) holds a value of this watch's visible field `field`.
    ByIndex {
        /// The primary watch.
        primary: usize,
        /// The index, by position in the primary's `indexes`.
        index: usize,
        /// This watch's field, by position in its projection.
        field: usize,
    },
}

impl KeyMapping {
    /// The primary watch this secondary watch relates to, if any.
    pub fn primary(&self) -> Option<usize> {
        match self {
            KeyMapping::Owner(p) | KeyMapping::SameNamespace(p) => Some(*p),
            KeyMapping::ByIndex { primary, .. } => Some(*primary),
            _ => None,
        }
    }
}

/// One validated watch.
#[derive(Debug, Clone)]
pub struct WatchSpec {
    /// Unique name within the manifest (a DNS label).
    pub name: String,
    /// The type.
    pub gvk: Gvk,
    /// Resource plural, when the guest gave one.
    pub plural: Option<String>,
    /// Namespace scope (None = all).
    pub namespace: Option<String>,
    /// Label selector, passed to the API server.
    pub label_selector: Option<String>,
    /// Field selector, passed to the API server.
    pub field_selector: Option<String>,
    /// The projection (visible fields, then index fields).
    pub projection: Projection,
    /// Index names; index `i` reads projection path `visible + i`.
    pub indexes: Vec<String>,
    /// Key mapping.
    pub keys: KeyMapping,
    /// The finalizer the host manages on this watch's objects.
    pub finalizer: Option<String>,
}

impl WatchSpec {
    /// The projection position of index `i`'s field.
    pub fn index_path(&self, i: usize) -> usize {
        self.projection.visible() + i
    }

    /// The projection paths whose values the store must index for this
    /// watch: its declared indexes' fields, and the field of its
    /// `by-index` link.
    pub fn indexed_paths(&self) -> Vec<FieldPath> {
        let paths = self.projection.paths();
        let mut out: Vec<FieldPath> = paths[self.projection.visible()..].to_vec();
        if let KeyMapping::ByIndex { field, .. } = self.keys {
            if let Some(p) = paths.get(field) {
                out.push(p.clone());
            }
        }
        out
    }
}

/// One write allowlist entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteRule {
    /// The type.
    pub gvk: Gvk,
    /// Namespace restriction.
    pub namespace: Option<String>,
    /// Name restriction (empty = any).
    pub names: Vec<String>,
    /// Whether the status subresource may be written.
    pub status: bool,
}

impl WriteRule {
    /// Whether this rule allows writing (gvk, namespace, name).
    pub fn allows(&self, gvk: &Gvk, namespace: Option<&str>, name: &str) -> bool {
        self.gvk == *gvk
            && self
                .namespace
                .as_deref()
                .is_none_or(|ns| Some(ns) == namespace)
            && (self.names.is_empty() || self.names.iter().any(|n| n == name))
    }
}

/// A validated manifest.
#[derive(Debug, Clone)]
pub struct GuestManifest {
    /// Guest name.
    pub name: String,
    /// Watches, in declaration order (the `watch` index in snapshots).
    pub watches: Vec<WatchSpec>,
    /// Write allowlist.
    pub writes: Vec<WriteRule>,
    /// Resync period, if the guest chose one.
    pub resync: Option<Duration>,
}

impl GuestManifest {
    /// Whether any write rule allows writing this object.
    pub fn may_write(&self, gvk: &Gvk, namespace: Option<&str>, name: &str) -> bool {
        self.writes.iter().any(|w| w.allows(gvk, namespace, name))
    }

    /// Whether a write rule allows writing this object's status.
    pub fn may_write_status(&self, gvk: &Gvk, namespace: Option<&str>, name: &str) -> bool {
        self.writes
            .iter()
            .any(|w| w.status && w.allows(gvk, namespace, name))
    }

    /// Whether `finalizer` is the declared finalizer of a watch that can
    /// hold this object (the guest may always release what the host adds
    /// for it).
    pub fn declares_finalizer(&self, gvk: &Gvk, namespace: Option<&str>, finalizer: &str) -> bool {
        self.watches.iter().any(|w| {
            w.finalizer.as_deref() == Some(finalizer)
                && w.gvk == *gvk
                && w.namespace
                    .as_deref()
                    .is_none_or(|ns| Some(ns) == namespace)
        })
    }

    /// Position of the watch named `name`.
    pub fn watch_named(&self, name: &str) -> Option<usize> {
        self.watches.iter().position(|w| w.name == name)
    }
}

/// Whether `s` is a Kubernetes qualified name with a prefix, as finalizers
/// should be: `prefix/name`, the prefix a DNS subdomain, the name at most
/// 63 characters of alphanumerics, `-`, `_` and `.`, starting and ending
/// alphanumeric.
pub fn is_qualified_finalizer(s: &str) -> bool {
    let Some((prefix, name)) = s.split_once('/') else {
        return false;
    };
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    wasmctrl_kube_rules::names::is_dns1123_subdomain(prefix)
        && !name.is_empty()
        && name.len() <= 63
        && alnum(name.chars().next())
        && alnum(name.chars().last())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn check_selector(field: &str, s: &Option<String>) -> Result<(), ManifestError> {
    let Some(sel) = s else { return Ok(()) };
    let bad = |problem: &str| invalid(field, format!("invalid selector {sel:?}: {problem}"));
    let mut depth = 0i32;
    for c in sel.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(bad("unbalanced parentheses"));
        }
    }
    if depth != 0 {
        return Err(bad("unbalanced parentheses"));
    }
    if field.ends_with("field-selector") {
        for term in sel.split(',').filter(|t| !t.trim().is_empty()) {
            if !term.contains('=') {
                return Err(bad(&format!("term {term:?} needs =, == or !=")));
            }
        }
    }
    Ok(())
}

fn check_gvk(field: &str, g: &wit::GroupVersionKind) -> Result<Gvk, ManifestError> {
    if g.version.is_empty() || g.kind.is_empty() {
        return Err(invalid(
            format!("{field}.gvk"),
            format!("group/version/kind needs a version and a kind, got {g:?}"),
        ));
    }
    Ok(Gvk::from_wit(g))
}

/// Validates a guest-returned manifest: everything that can be checked
/// without the cluster (the status subresource is checked against
/// discovery when the controller starts).
pub fn validate(m: &wit::Manifest) -> Result<GuestManifest, ManifestError> {
    if !wasmctrl_kube_rules::names::is_dns1123_label(&m.name) {
        return Err(ManifestError::BadName(m.name.clone()));
    }
    if m.watches.is_empty() {
        return Err(ManifestError::NoWatches);
    }
    let names: Vec<&str> = m.watches.iter().map(|w| w.name.as_str()).collect();
    let mut watches = Vec::with_capacity(m.watches.len());
    for (i, w) in m.watches.iter().enumerate() {
        let at = format!("watches[{i}] ({})", w.name);
        if !wasmctrl_kube_rules::names::is_dns1123_label(&w.name) {
            return Err(invalid(
                format!("watches[{i}].name"),
                format!("{:?} is not a lowercase DNS label", w.name),
            ));
        }
        if names[..i].contains(&w.name.as_str()) {
            return Err(invalid(
                format!("watches[{i}].name"),
                format!("watch name {:?} is declared twice", w.name),
            ));
        }
        let gvk = check_gvk(&at, &w.gvk)?;
        check_selector(&format!("{at}.label-selector"), &w.label_selector)?;
        check_selector(&format!("{at}.field-selector"), &w.field_selector)?;
        let parse = |what: String, p: &String| {
            FieldPath::parse(p).map_err(|e: PathError| invalid(what, e.to_string()))
        };
        let fields = w
            .fields
            .iter()
            .enumerate()
            .map(|(f, p)| parse(format!("{at}.fields[{f}]"), p))
            .collect::<Result<Vec<_>, _>>()?;
        let mut index_names: Vec<String> = Vec::new();
        let mut index_paths = Vec::new();
        for (x, spec) in w.indexes.iter().enumerate() {
            if spec.name.is_empty() || index_names.contains(&spec.name) {
                return Err(invalid(
                    format!("{at}.indexes[{x}].name"),
                    format!("index name {:?} is empty or declared twice", spec.name),
                ));
            }
            index_names.push(spec.name.clone());
            index_paths.push(parse(format!("{at}.indexes[{x}].field"), &spec.field)?);
        }
        let finalizer = match &w.finalizer {
            Some(f) if !is_qualified_finalizer(f) => {
                return Err(invalid(
                    format!("{at}.finalizer"),
                    format!("{f:?} is not a qualified name (prefix/name, the prefix a DNS subdomain, e.g. example.com/cleanup)"),
                ))
            }
            Some(f) if !matches!(w.keys, wit::KeyMapping::PerObject) => {
                return Err(invalid(
                    format!("{at}.finalizer"),
                    format!("finalizer {f:?} needs per-object keys: only a primary watch's objects get a reconcile of their own"),
                ))
            }
            other => other.clone(),
        };
        watches.push(WatchSpec {
            name: w.name.clone(),
            gvk,
            plural: w.plural.clone().filter(|p| !p.is_empty()),
            namespace: w.namespace.clone().filter(|n| !n.is_empty()),
            label_selector: w.label_selector.clone().filter(|s| !s.is_empty()),
            field_selector: w.field_selector.clone().filter(|s| !s.is_empty()),
            projection: Projection::new(fields, index_paths),
            indexes: index_names,
            keys: KeyMapping::None,
            finalizer,
        });
    }
    // Key mappings refer to other watches by name: resolve them once every
    // watch is known.
    for (i, w) in m.watches.iter().enumerate() {
        let at = format!("watches[{i}] ({}).keys", w.name);
        let primary = |variant: &str, name: &str| -> Result<usize, ManifestError> {
            let field = format!("{at}.{variant}");
            let p = watches.iter().position(|x| x.name == name).ok_or_else(|| {
                invalid(
                    &field,
                    format!("names watch {name:?}, which the manifest does not declare"),
                )
            })?;
            if p != i && matches!(m.watches[p].keys, wit::KeyMapping::PerObject) {
                return Ok(p);
            }
            Err(invalid(
                field,
                format!(
                    "names watch {name:?}, which is not a primary (its keys are not per-object)"
                ),
            ))
        };
        let keys = match &w.keys {
            wit::KeyMapping::PerObject => KeyMapping::PerObject,
            wit::KeyMapping::None => KeyMapping::None,
            wit::KeyMapping::Aggregate(k) if k.is_empty() => {
                return Err(invalid(
                    format!("{at}.aggregate"),
                    "the aggregate key must not be empty",
                ))
            }
            wit::KeyMapping::Aggregate(k) => KeyMapping::Aggregate(k.clone()),
            wit::KeyMapping::Owner(p) => KeyMapping::Owner(primary("owner", p)?),
            wit::KeyMapping::SameNamespace(p) => {
                KeyMapping::SameNamespace(primary("same-namespace", p)?)
            }
            wit::KeyMapping::ByIndex(link) => {
                let p = primary("by-index.primary", &link.primary)?;
                let index = watches[p]
                    .indexes
                    .iter()
                    .position(|x| *x == link.index)
                    .ok_or_else(|| {
                        invalid(
                            format!("{at}.by-index.index"),
                            format!(
                                "names index {:?}, which watch {:?} does not declare",
                                link.index, link.primary
                            ),
                        )
                    })?;
                let field = w
                    .fields
                    .iter()
                    .position(|f| *f == link.field)
                    .ok_or_else(|| {
                        invalid(
                            format!("{at}.by-index.field"),
                            format!(
                                "names field {:?}, which is not in this watch's fields",
                                link.field
                            ),
                        )
                    })?;
                KeyMapping::ByIndex {
                    primary: p,
                    index,
                    field,
                }
            }
        };
        watches[i].keys = keys;
    }
    let mut writes = Vec::with_capacity(m.writes.len());
    for (i, w) in m.writes.iter().enumerate() {
        writes.push(WriteRule {
            gvk: check_gvk(&format!("writes[{i}]"), &w.gvk)?,
            namespace: w.namespace.clone().filter(|n| !n.is_empty()),
            names: w.names.clone(),
            status: w.status,
        });
    }
    Ok(GuestManifest {
        name: m.name.clone(),
        watches,
        writes,
        resync: m.resync_seconds.map(|s| Duration::from_secs(u64::from(s))),
    })
}
