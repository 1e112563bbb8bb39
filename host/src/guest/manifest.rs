//! Validation of a guest's manifest into the host's own types.
//!
//! Owns the checks that make a manifest safe to act on (names, kinds, field
//! paths, selectors' basic shape, the write allowlist), the allowlist test
//! itself, and the syntax of what ends up in a URL path: groups, versions
//! and namespaces, and object names as the API server validates them per
//! kind ([`object_name_problem`], which plans are held to as well), so no
//! value a guest gives can be more than one path segment. It never starts
//! informers or talks to the cluster.

use std::time::Duration;

use super::bindings::wasmctrl::controller::types as wit;
use crate::projection::{FieldPath, PathError, Projection};
use wasmctrl_kube_rules::names::is_qualified_finalizer;

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
    /// its `indexes`) holds a value of this watch's visible field `field`
    /// (and, with `same_namespace`, that are in this object's namespace).
    ByIndex {
        /// The primary watch.
        primary: usize,
        /// The index, by position in the primary's `indexes`.
        index: usize,
        /// This watch's field, by position in its projection.
        field: usize,
        /// Whether the link only relates objects of one namespace (the
        /// link named its primary `same-namespace:NAME`).
        same_namespace: bool,
    },
    /// A shared input: a change enqueues every object of primary watch
    /// `.0`, and every one of its snapshots holds all of this watch's
    /// objects.
    All(usize),
}

/// The prefix of an `index-link.primary` that restricts the link to the
/// object's own namespace: `same-namespace:apps`.
pub const SAME_NAMESPACE_PREFIX: &str = "same-namespace:";

/// An `index-link.primary` split into the primary watch's name and whether
/// the link is namespace-qualified (`same-namespace:NAME`). Watch names are
/// DNS labels, so no name can be mistaken for the qualified form.
pub fn split_link_primary(primary: &str) -> (&str, bool) {
    match primary.strip_prefix(SAME_NAMESPACE_PREFIX) {
        Some(name) => (name, true),
        None => (primary, false),
    }
}

impl KeyMapping {
    /// The primary watch this secondary watch relates to, if any.
    pub fn primary(&self) -> Option<usize> {
        match self {
            KeyMapping::Owner(p) | KeyMapping::SameNamespace(p) | KeyMapping::All(p) => Some(*p),
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
    /// The resource (plural) watched: as declared, else the conventional
    /// lowercase plural of the kind (discovery resolves the real one).
    pub fn resource_name(&self) -> String {
        self.plural
            .clone()
            .unwrap_or_else(|| format!("{}s", self.gvk.kind.to_lowercase()))
    }

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

    /// The manifest's kind an Event the guest emits may regard this object
    /// as (None: it may not regard it): the kind of a watch that can hold
    /// it (same group and kind, within the watch's namespace), or of a
    /// write rule that allows its namespace and name. A guest reports on
    /// what it watches or writes, nothing else.
    pub fn event_kind(&self, gvk: &Gvk, namespace: Option<&str>, name: &str) -> Option<&Gvk> {
        let same = |g: &Gvk| g.group == gvk.group && g.kind == gvk.kind;
        let watched = self.watches.iter().find(|w| {
            same(&w.gvk)
                && w.namespace
                    .as_deref()
                    .is_none_or(|ns| Some(ns) == namespace)
        });
        let written = || {
            self.writes.iter().find(|r| {
                same(&r.gvk)
                    && r.namespace
                        .as_deref()
                        .is_none_or(|ns| Some(ns) == namespace)
                    && (r.names.is_empty() || r.names.iter().any(|n| n == name))
            })
        };
        watched
            .map(|w| &w.gvk)
            .or_else(|| written().map(|r| &r.gvk))
    }

    /// Position of the watch named `name`.
    pub fn watch_named(&self, name: &str) -> Option<usize> {
        self.watches.iter().position(|w| w.name == name)
    }
}

/// Why `name` cannot name an object of kind `gvk` (None: it can), as the
/// API server's name validation decides for the kind: a DNS-1123 label for
/// a Namespace, one path segment for RBAC objects (whose names may hold
/// `:`), a DNS-1123 subdomain — at most 253 characters of lowercase
/// alphanumerics, '-' and '.' — for every other kind. No name it accepts
/// can change a URL path: none holds '/' or '%' or is '.' or '..'.
pub fn object_name_problem(gvk: &Gvk, name: &str) -> Option<String> {
    use wasmctrl_kube_rules::names;
    let problems = match (gvk.group.as_str(), gvk.kind.as_str()) {
        ("", "Namespace") => label_problems(name),
        ("rbac.authorization.k8s.io", _) if name.is_empty() => vec!["must not be empty".into()],
        ("rbac.authorization.k8s.io", _) => names::path_segment_name_errors(name),
        _ => names::dns1123_subdomain_errors(name),
    };
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// Why `namespace` is not a namespace name (None: it is): a DNS-1123
/// label, at most 63 characters.
pub fn namespace_problem(namespace: &str) -> Option<String> {
    let problems = label_problems(namespace);
    (!problems.is_empty()).then(|| problems.join("; "))
}

fn label_problems(s: &str) -> Vec<String> {
    wasmctrl_kube_rules::names::dns1123_label_errors(s)
}

/// A value as an error message shows it: at most 64 characters, and how
/// long it was when longer.
pub fn shown(value: &str) -> String {
    if value.chars().count() <= 64 {
        format!("{value:?}")
    } else {
        let head: String = value.chars().take(64).collect();
        format!("{head:?}… ({} bytes)", value.len())
    }
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
    // Group and version become URL path segments (discovery, lists,
    // writes): only the shapes the API server itself allows.
    use wasmctrl_kube_rules::names::{is_dns1123_label, is_dns1123_subdomain};
    if !(g.group.is_empty() || is_dns1123_subdomain(&g.group)) {
        return Err(invalid(
            format!("{field}.gvk.group"),
            format!("{} is not an API group (\"\" for core, else a lowercase DNS subdomain such as apps or example.com)", shown(&g.group)),
        ));
    }
    if !is_dns1123_label(&g.version) {
        return Err(invalid(
            format!("{field}.gvk.version"),
            format!(
                "{} is not an API version (a lowercase DNS label such as v1 or v1beta1)",
                shown(&g.version)
            ),
        ));
    }
    let kind_ok = g.kind.len() <= 63
        && g.kind.starts_with(|c: char| c.is_ascii_alphabetic())
        && g.kind.chars().all(|c| c.is_ascii_alphanumeric());
    if !kind_ok {
        return Err(invalid(
            format!("{field}.gvk.kind"),
            format!("{} is not a kind (ASCII letters and digits, starting with a letter, such as ConfigMap)", shown(&g.kind)),
        ));
    }
    Ok(Gvk::from_wit(g))
}

/// Refuses a namespace that is not a namespace name.
fn check_namespace(field: String, namespace: Option<&str>) -> Result<(), ManifestError> {
    match namespace.and_then(|ns| namespace_problem(ns).map(|p| (ns, p))) {
        Some((ns, problem)) => Err(invalid(field, format!("{} {problem}", shown(ns)))),
        None => Ok(()),
    }
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
        let namespace = w.namespace.clone().filter(|n| !n.is_empty());
        check_namespace(format!("{at}.namespace"), namespace.as_deref())?;
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
            namespace,
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
            wit::KeyMapping::All(p) => KeyMapping::All(primary("all", p)?),
            wit::KeyMapping::ByIndex(link) => {
                let (named, same_namespace) = split_link_primary(&link.primary);
                let p = primary("by-index.primary", named)?;
                let index = watches[p]
                    .indexes
                    .iter()
                    .position(|x| *x == link.index)
                    .ok_or_else(|| {
                        invalid(
                            format!("{at}.by-index.index"),
                            format!(
                                "names index {:?}, which watch {:?} does not declare",
                                link.index, named
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
                    same_namespace,
                }
            }
        };
        watches[i].keys = keys;
    }
    let mut writes = Vec::with_capacity(m.writes.len());
    for (i, w) in m.writes.iter().enumerate() {
        let gvk = check_gvk(&format!("writes[{i}]"), &w.gvk)?;
        let namespace = w.namespace.clone().filter(|n| !n.is_empty());
        check_namespace(format!("writes[{i}].namespace"), namespace.as_deref())?;
        for (n, name) in w.names.iter().enumerate() {
            if let Some(problem) = object_name_problem(&gvk, name) {
                return Err(invalid(
                    format!("writes[{i}].names[{n}]"),
                    format!(
                        "{} is not a valid {} name: {problem}",
                        shown(name),
                        gvk.kind
                    ),
                ));
            }
        }
        writes.push(WriteRule {
            gvk,
            namespace,
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

/// Manifest pieces the host's unit tests build guests' manifests from.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::wit;

    /// Watch `name` of `gvk` (in `namespace`; None: every namespace): no
    /// selector, field, index or finalizer, every object under key "k".
    pub(crate) fn watch(
        name: &str,
        gvk: wit::GroupVersionKind,
        namespace: Option<&str>,
    ) -> wit::Watch {
        wit::Watch {
            name: name.into(),
            gvk,
            plural: None,
            namespace: namespace.map(str::to_string),
            label_selector: None,
            field_selector: None,
            fields: vec![],
            indexes: vec![],
            keys: wit::KeyMapping::Aggregate("k".into()),
            finalizer: None,
        }
    }

    /// A write rule for `gvk` in `namespace` (None: every namespace),
    /// limited to `names` (empty: any name), status not included.
    pub(crate) fn rule(
        gvk: wit::GroupVersionKind,
        namespace: Option<&str>,
        names: &[&str],
    ) -> wit::WriteRule {
        wit::WriteRule {
            gvk,
            namespace: namespace.map(str::to_string),
            names: names.iter().map(|n| n.to_string()).collect(),
            status: false,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::fixtures::rule;
    use super::*;

    fn gvk(group: &str, version: &str, kind: &str) -> wit::GroupVersionKind {
        wit::GroupVersionKind {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    fn watch(g: wit::GroupVersionKind, namespace: Option<&str>) -> wit::Watch {
        super::fixtures::watch("w", g, namespace)
    }

    fn manifest(
        watches: Vec<wit::Watch>,
        writes: Vec<wit::WriteRule>,
    ) -> Result<GuestManifest, ManifestError> {
        validate(&wit::Manifest {
            name: "g".into(),
            watches,
            writes,
            resync_seconds: None,
        })
    }

    fn field_of(r: Result<GuestManifest, ManifestError>) -> String {
        match r {
            Err(ManifestError::Invalid { field, .. }) => field,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn groups_versions_kinds_and_namespaces_that_could_reach_another_path_are_refused() {
        let pods = || gvk("", "v1", "Pod");
        let cases = [
            (
                watch(gvk("../api", "v1", "Secret"), None),
                "watches[0] (w).gvk.group",
            ),
            (
                watch(gvk("", "v1/../../api/v1", "Secret"), None),
                "watches[0] (w).gvk.version",
            ),
            (
                watch(gvk("", "v1", "Pod/status"), None),
                "watches[0] (w).gvk.kind",
            ),
            (
                watch(pods(), Some("kube-system/../x")),
                "watches[0] (w).namespace",
            ),
            (watch(pods(), Some("Ops")), "watches[0] (w).namespace"),
        ];
        for (w, field) in cases {
            assert_eq!(field_of(manifest(vec![w], vec![])), field);
        }
        let writes = |r| manifest(vec![watch(pods(), None)], vec![r]);
        assert_eq!(
            field_of(writes(rule(gvk("", "v1", "ConfigMap"), Some("a/b"), &[]))),
            "writes[0].namespace"
        );
        let e = writes(rule(
            gvk("", "v1", "ConfigMap"),
            Some("ops"),
            &["ok", "../secrets"],
        ))
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "writes[0].names[1]: \"../secrets\" is not a valid ConfigMap name: {}",
                wasmctrl_kube_rules::names::DNS1123_SUBDOMAIN_MSG
            )
        );
        // What real manifests use stays valid.
        manifest(
            vec![watch(gvk("apps", "v1beta1", "Deployment"), Some("ml"))],
            vec![rule(
                gvk("example.com", "v1alpha1", "GpuQuota"),
                None,
                &["a.b-c"],
            )],
        )
        .unwrap();
    }

    #[test]
    fn an_event_may_regard_only_what_the_guest_watches_or_may_write() {
        let m = manifest(
            vec![watch(gvk("", "v1", "Pod"), Some("ml"))],
            vec![rule(gvk("", "v1", "ConfigMap"), Some("ops"), &["summary"])],
        )
        .unwrap();
        let at = |kind: &str, ns: Option<&str>, name: &str| {
            m.event_kind(&Gvk::from_api_version("v1", kind), ns, name)
                .map(|g| g.kind.clone())
        };
        assert_eq!(at("Pod", Some("ml"), "p1").as_deref(), Some("Pod"));
        assert_eq!(
            at("ConfigMap", Some("ops"), "summary").as_deref(),
            Some("ConfigMap")
        );
        // Outside the watch's namespace, the rule's namespace or names, or
        // a kind of neither.
        assert_eq!(at("Pod", Some("kube-system"), "p1"), None);
        assert_eq!(at("ConfigMap", Some("kube-system"), "summary"), None);
        assert_eq!(at("ConfigMap", Some("ops"), "other"), None);
        assert_eq!(at("Secret", Some("ml"), "p1"), None);
    }
}
