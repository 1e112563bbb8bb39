//! Validation of a guest's manifest into the host's own types.
//!
//! Owns the checks that make a manifest safe to act on (names, kinds, field
//! paths, selectors' basic shape, the write allowlist) and the allowlist test
//! itself. It never starts informers or talks to the cluster.

use std::time::Duration;

use super::bindings::wasmctrl::controller::types as wit;
use crate::projection::{FieldPath, PathError, Projection};

/// Why a manifest was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// The guest's own `manifest` returned an error.
    #[error("the guest rejected its configuration: {0}")]
    Rejected(String),
    /// The guest name is not a DNS label.
    #[error("guest name {0:?} is not a lowercase DNS label (a-z, 0-9, '-', at most 63)")]
    BadName(String),
    /// A watch or write rule names no kind or version.
    #[error("{what} {index}: group/version/kind needs a version and a kind, got {gvk:?}")]
    BadKind {
        /// "watch" or "write rule".
        what: &'static str,
        /// Position in the manifest.
        index: usize,
        /// What was given.
        gvk: String,
    },
    /// A projected field path does not parse.
    #[error("watch {index}: {source}")]
    BadPath {
        /// Watch position.
        index: usize,
        /// The parse error.
        #[source]
        source: PathError,
    },
    /// A selector is syntactically unusable.
    #[error("watch {index}: invalid {which} selector {selector:?}: {problem}")]
    BadSelector {
        /// Watch position.
        index: usize,
        /// "label" or "field".
        which: &'static str,
        /// The selector.
        selector: String,
        /// What is wrong.
        problem: String,
    },
    /// Two indexes of one watch share a name, or an index name is empty.
    #[error("watch {index}: index name {name:?} is empty or declared twice")]
    BadIndex {
        /// Watch position.
        index: usize,
        /// The name.
        name: String,
    },
    /// An aggregate key is empty.
    #[error("watch {index}: aggregate key must not be empty")]
    EmptyAggregateKey {
        /// Watch position.
        index: usize,
    },
    /// A guest that watches nothing can never be triggered.
    #[error("the manifest declares no watches")]
    NoWatches,
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

/// How object changes become request keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyMapping {
    /// "namespace/name" (or "name").
    PerObject,
    /// One fixed key.
    Aggregate(String),
    /// Never enqueue.
    None,
}

/// One validated watch.
#[derive(Debug, Clone)]
pub struct WatchSpec {
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
}

fn check_selector(
    index: usize,
    which: &'static str,
    s: &Option<String>,
) -> Result<(), ManifestError> {
    let Some(sel) = s else { return Ok(()) };
    let bad = |problem: &str| ManifestError::BadSelector {
        index,
        which,
        selector: sel.clone(),
        problem: problem.to_string(),
    };
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
    if which == "field" {
        for term in sel.split(',').filter(|t| !t.trim().is_empty()) {
            if !term.contains('=') {
                return Err(bad(&format!("term {term:?} needs =, == or !=")));
            }
        }
    }
    Ok(())
}

/// Validates a guest-returned manifest.
pub fn validate(m: &wit::Manifest) -> Result<GuestManifest, ManifestError> {
    if !wasmctrl_kube_rules::names::is_dns1123_label(&m.name) {
        return Err(ManifestError::BadName(m.name.clone()));
    }
    if m.watches.is_empty() {
        return Err(ManifestError::NoWatches);
    }
    let mut watches = Vec::with_capacity(m.watches.len());
    for (index, w) in m.watches.iter().enumerate() {
        if w.gvk.version.is_empty() || w.gvk.kind.is_empty() {
            return Err(ManifestError::BadKind {
                what: "watch",
                index,
                gvk: format!("{:?}", w.gvk),
            });
        }
        check_selector(index, "label", &w.label_selector)?;
        check_selector(index, "field", &w.field_selector)?;
        let parse = |p: &String| {
            FieldPath::parse(p).map_err(|source| ManifestError::BadPath { index, source })
        };
        let fields = w.fields.iter().map(parse).collect::<Result<Vec<_>, _>>()?;
        let mut names: Vec<String> = Vec::new();
        let mut index_paths = Vec::new();
        for spec in &w.indexes {
            if spec.name.is_empty() || names.contains(&spec.name) {
                return Err(ManifestError::BadIndex {
                    index,
                    name: spec.name.clone(),
                });
            }
            names.push(spec.name.clone());
            index_paths.push(parse(&spec.field)?);
        }
        let keys = match &w.keys {
            wit::KeyMapping::PerObject => KeyMapping::PerObject,
            wit::KeyMapping::None => KeyMapping::None,
            wit::KeyMapping::Aggregate(k) if k.is_empty() => {
                return Err(ManifestError::EmptyAggregateKey { index })
            }
            wit::KeyMapping::Aggregate(k) => KeyMapping::Aggregate(k.clone()),
        };
        watches.push(WatchSpec {
            gvk: Gvk::from_wit(&w.gvk),
            plural: w.plural.clone().filter(|p| !p.is_empty()),
            namespace: w.namespace.clone().filter(|n| !n.is_empty()),
            label_selector: w.label_selector.clone().filter(|s| !s.is_empty()),
            field_selector: w.field_selector.clone().filter(|s| !s.is_empty()),
            projection: Projection::new(fields, index_paths),
            indexes: names,
            keys,
        });
    }
    let mut writes = Vec::with_capacity(m.writes.len());
    for (index, w) in m.writes.iter().enumerate() {
        if w.gvk.version.is_empty() || w.gvk.kind.is_empty() {
            return Err(ManifestError::BadKind {
                what: "write rule",
                index,
                gvk: format!("{:?}", w.gvk),
            });
        }
        writes.push(WriteRule {
            gvk: Gvk::from_wit(&w.gvk),
            namespace: w.namespace.clone().filter(|n| !n.is_empty()),
            names: w.names.clone(),
        });
    }
    Ok(GuestManifest {
        name: m.name.clone(),
        watches,
        writes,
        resync: m.resync_seconds.map(|s| Duration::from_secs(u64::from(s))),
    })
}
