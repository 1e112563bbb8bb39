//! The operator's policy: what each guest may watch and write, and the caps
//! on what it can make the host do. A guest's manifest is a request; this
//! policy is the grant (Kubewarden's `contextAwareResources` idea). Owns the
//! policy file format (`--policy FILE`, YAML or JSON), the built-in default
//! limits, and admission of a validated manifest. It never loads guests,
//! starts informers or enforces the limits itself: the guest runtime and
//! the controller read [`Limits`] from here.
//!
//! # Admission
//! - Every watch and write rule that no grant covers is listed, not just
//!   the first.
//! - Core `Secret`s are denied unless a grant names the kind `Secret`
//!   explicitly — with or without a policy file — so a guest cannot copy
//!   credentials into an object it writes.
//! - Admission runs twice: on the kinds the manifest declares (at load),
//!   and on the resources API discovery resolved them to (at start, before
//!   any informer), so the grant is checked against what the host actually
//!   lists and writes, whatever the guest called it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::api::ApiResource;
use serde::Deserialize;

use crate::guest::{GuestManifest, Gvk};

/// Result alias for this module.
pub type Result<T, E = PolicyError> = std::result::Result<T, E>;

/// A policy file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("cannot read policy {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid policy document.
    #[error("policy {path}: {problem}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong (the YAML error with its line, or the field).
        problem: String,
    },
}

/// A manifest asked for more than the policy grants. Lists every denial.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("refused by the operator policy (section {section:?}), {} denied: {}", .denied.len(), .denied.join("; "))]
pub struct PolicyDenied {
    /// The policy section that applied (the guest's name, or "default").
    pub section: String,
    /// Each watch, write rule or count the policy does not allow.
    pub denied: Vec<String>,
}

/// Caps on what one guest can make the host do. Every field has a default
/// ([`Limits::default`]); a policy section overrides any of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Shortest requeue delay a plan may ask for; shorter ones are raised to
    /// it (logged once per guest, counted in
    /// `wasmctrl_guest_limited_total{limit="min_requeue"}`).
    pub min_requeue: Duration,
    /// Most writes one plan may hold.
    pub max_plan_writes: usize,
    /// Most events one plan may hold.
    pub max_plan_events: usize,
    /// Most bytes of documents and event text one plan may hold.
    pub max_plan_bytes: usize,
    /// Most watches a manifest may declare (each is an informer).
    pub max_watches: usize,
    /// Longest `log` message; longer ones are truncated.
    pub max_log_message_bytes: usize,
    /// Most `log` bytes one guest call may emit; the rest is dropped.
    pub max_log_bytes_per_call: usize,
    /// Most `log` bytes a guest may emit per second, all calls together.
    pub max_log_bytes_per_second: usize,
}

/// The defaults, one named constant each (documented in README).
pub mod defaults {
    use std::time::Duration;
    /// [`super::Limits::min_requeue`].
    pub const MIN_REQUEUE: Duration = Duration::from_secs(1);
    /// [`super::Limits::max_plan_writes`].
    pub const MAX_PLAN_WRITES: usize = 10_000;
    /// [`super::Limits::max_plan_events`].
    pub const MAX_PLAN_EVENTS: usize = 1_000;
    /// [`super::Limits::max_plan_bytes`]: 16 MiB (a ConfigMap holds at most 1 MiB).
    pub const MAX_PLAN_BYTES: usize = 16 << 20;
    /// [`super::Limits::max_watches`].
    pub const MAX_WATCHES: usize = 32;
    /// [`super::Limits::max_log_message_bytes`].
    pub const MAX_LOG_MESSAGE_BYTES: usize = 4 << 10;
    /// [`super::Limits::max_log_bytes_per_call`].
    pub const MAX_LOG_BYTES_PER_CALL: usize = 64 << 10;
    /// [`super::Limits::max_log_bytes_per_second`].
    pub const MAX_LOG_BYTES_PER_SECOND: usize = 256 << 10;
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            min_requeue: defaults::MIN_REQUEUE,
            max_plan_writes: defaults::MAX_PLAN_WRITES,
            max_plan_events: defaults::MAX_PLAN_EVENTS,
            max_plan_bytes: defaults::MAX_PLAN_BYTES,
            max_watches: defaults::MAX_WATCHES,
            max_log_message_bytes: defaults::MAX_LOG_MESSAGE_BYTES,
            max_log_bytes_per_call: defaults::MAX_LOG_BYTES_PER_CALL,
            max_log_bytes_per_second: defaults::MAX_LOG_BYTES_PER_SECOND,
        }
    }
}

/// Limits as a policy file gives them: any subset.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct LimitsFile {
    min_requeue_ms: Option<u64>,
    max_plan_writes: Option<usize>,
    max_plan_events: Option<usize>,
    max_plan_bytes: Option<usize>,
    max_watches: Option<usize>,
    max_log_message_bytes: Option<usize>,
    max_log_bytes_per_call: Option<usize>,
    max_log_bytes_per_second: Option<usize>,
}

impl LimitsFile {
    fn over(&self, base: Limits) -> Limits {
        Limits {
            min_requeue: self
                .min_requeue_ms
                .map_or(base.min_requeue, Duration::from_millis),
            max_plan_writes: self.max_plan_writes.unwrap_or(base.max_plan_writes),
            max_plan_events: self.max_plan_events.unwrap_or(base.max_plan_events),
            max_plan_bytes: self.max_plan_bytes.unwrap_or(base.max_plan_bytes),
            max_watches: self.max_watches.unwrap_or(base.max_watches),
            max_log_message_bytes: self
                .max_log_message_bytes
                .unwrap_or(base.max_log_message_bytes),
            max_log_bytes_per_call: self
                .max_log_bytes_per_call
                .unwrap_or(base.max_log_bytes_per_call),
            max_log_bytes_per_second: self
                .max_log_bytes_per_second
                .unwrap_or(base.max_log_bytes_per_second),
        }
    }
}

/// One grant: a group, kinds, and optionally namespaces and (for writes)
/// names.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    /// API group ("" is core, "*" any group).
    pub group: String,
    /// Kinds ("*" any kind except `Secret`, which must be named).
    pub kinds: Vec<String>,
    /// Namespaces (empty: all, cluster-wide watches included).
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Object names a write may target (empty: any). Writes only.
    #[serde(default)]
    pub names: Vec<String>,
}

/// What a grant is checked against: a resource's group and kind, and
/// whether it is the core Secrets resource.
#[derive(Debug, Clone, Copy)]
struct Subject<'a> {
    group: &'a str,
    kind: &'a str,
    secret: bool,
}

impl<'a> Subject<'a> {
    /// A kind as the manifest declares it.
    fn declared(gvk: &'a Gvk) -> Self {
        Subject {
            group: &gvk.group,
            kind: &gvk.kind,
            secret: is_secret(gvk),
        }
    }

    /// A resource as discovery resolved it: core Secrets by its plural as
    /// well as by its kind, the plural being what a list reads.
    fn resolved(ar: &'a ApiResource) -> Self {
        Subject {
            group: &ar.group,
            kind: &ar.kind,
            secret: ar.group.is_empty() && (ar.plural == "secrets" || ar.kind == "Secret"),
        }
    }
}

impl Grant {
    fn covers_kind(&self, s: Subject<'_>) -> bool {
        let group = self.group == "*" || self.group == s.group;
        // A Secret is covered only by a grant that names it, in the core
        // group or any.
        let kind = if s.secret {
            self.kinds.iter().any(|k| k == "Secret")
        } else {
            self.kinds.iter().any(|k| k == s.kind || k == "*")
        };
        group && kind
    }

    fn covers_namespace(&self, namespace: Option<&str>) -> bool {
        self.namespaces.is_empty()
            || namespace.is_some_and(|ns| self.namespaces.iter().any(|g| g == ns))
    }

    fn covers_names(&self, names: &[String]) -> bool {
        self.names.is_empty() || (!names.is_empty() && names.iter().all(|n| self.names.contains(n)))
    }
}

/// One section of the policy: the default, or one guest's.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SectionFile {
    /// `None`: inherit the default section's; `None` there too: not
    /// restricted, except for Secrets.
    watch: Option<Vec<Grant>>,
    write: Option<Vec<Grant>>,
    #[serde(default)]
    limits: LimitsFile,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    default: SectionFile,
    #[serde(default)]
    guests: BTreeMap<String, SectionFile>,
}

/// The operator's policy. [`Policy::default`] is the policy without a file:
/// every watch and write a manifest asks for except core Secrets, and the
/// default [`Limits`].
#[derive(Debug, Clone, Default)]
pub struct Policy {
    file: PolicyFile,
    source: Option<PathBuf>,
}

impl Policy {
    /// Reads a policy file (YAML, so JSON too).
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text)
            .map(|p| p.with_source(path))
            .map_err(|problem| PolicyError::Invalid {
                path: path.to_path_buf(),
                problem,
            })
    }

    /// Parses a policy document; the error names what is wrong.
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let file: PolicyFile = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
        let sections = std::iter::once(("default", &file.default))
            .chain(file.guests.iter().map(|(n, s)| (n.as_str(), s)));
        for (name, s) in sections {
            for (i, g) in s.watch.iter().flatten().enumerate() {
                if !g.names.is_empty() {
                    return Err(format!(
                        "{name}.watch[{i}]: names apply to writes only (a watch lists a whole kind)"
                    ));
                }
            }
            for (what, grants) in [("watch", &s.watch), ("write", &s.write)] {
                for (i, g) in grants.iter().flatten().enumerate() {
                    if g.kinds.is_empty() {
                        return Err(format!(
                            "{name}.{what}[{i}]: kinds is empty (use [\"*\"] for any kind)"
                        ));
                    }
                }
            }
        }
        Ok(Policy { file, source: None })
    }

    /// Where the policy came from, for messages (`None`: built in).
    pub fn source(&self) -> Option<&Path> {
        self.source.as_deref()
    }

    /// Records the file the policy was read from.
    #[must_use]
    pub fn with_source(mut self, path: &Path) -> Self {
        self.source = Some(path.to_path_buf());
        self
    }

    fn section(&self, guest: &str) -> (&str, Option<&SectionFile>) {
        match self.file.guests.get_key_value(guest) {
            Some((name, s)) => (name.as_str(), Some(s)),
            None => ("default", None),
        }
    }

    /// The limits for `guest`: its section over the default section over
    /// the built-in defaults.
    pub fn limits(&self, guest: &str) -> Limits {
        let base = self.file.default.limits.over(Limits::default());
        match self.section(guest).1 {
            Some(s) => s.limits.over(base),
            None => base,
        }
    }

    fn grants<'a>(
        &'a self,
        section: Option<&'a SectionFile>,
        pick: fn(&SectionFile) -> &Option<Vec<Grant>>,
    ) -> Option<&'a [Grant]> {
        section
            .and_then(|s| pick(s).as_deref())
            .or_else(|| pick(&self.file.default).as_deref())
    }

    /// Checks a validated manifest against the policy: every watch and
    /// write rule must be covered by a grant of the guest's section (or the
    /// default's), and the watch count must be within its limit. Lists
    /// every denial.
    pub fn admit(&self, manifest: &GuestManifest) -> std::result::Result<(), PolicyDenied> {
        let watches: Vec<_> = manifest
            .watches
            .iter()
            .map(|w| (Subject::declared(&w.gvk), w.gvk.to_string()))
            .collect();
        let writes: Vec<_> = manifest
            .writes
            .iter()
            .map(|r| (Subject::declared(&r.gvk), r.gvk.to_string()))
            .collect();
        self.check(manifest, &watches, &writes)
    }

    /// Checks a manifest again against the resources discovery resolved
    /// its watches (`watches[i]` for `manifest.watches[i]`) and write rules
    /// (`writes[i]`) to: what the host lists and writes, whatever the
    /// manifest called it. Core Secrets need a grant naming `Secret` by any
    /// spelling of kind, plural, group or version that resolves to them.
    pub fn admit_resolved(
        &self,
        manifest: &GuestManifest,
        watches: &[ApiResource],
        writes: &[ApiResource],
    ) -> std::result::Result<(), PolicyDenied> {
        let describe =
            |ar: &ApiResource| format!("{}/{} (resource {})", ar.api_version, ar.kind, ar.plural);
        let watches: Vec<_> = watches
            .iter()
            .map(|ar| (Subject::resolved(ar), describe(ar)))
            .collect();
        let writes: Vec<_> = writes
            .iter()
            .map(|ar| (Subject::resolved(ar), describe(ar)))
            .collect();
        self.check(manifest, &watches, &writes)
    }

    /// Admission of `manifest` whose watch `i` is `watches[i]` and write
    /// rule `i` is `writes[i]` (the subject, and how a denial names it).
    fn check(
        &self,
        manifest: &GuestManifest,
        watches: &[(Subject<'_>, String)],
        writes: &[(Subject<'_>, String)],
    ) -> std::result::Result<(), PolicyDenied> {
        let (section_name, section) = self.section(&manifest.name);
        let limits = self.limits(&manifest.name);
        let mut denied = Vec::new();
        if manifest.watches.len() > limits.max_watches {
            denied.push(format!(
                "{} watches, over the limit of {} (maxWatches)",
                manifest.watches.len(),
                limits.max_watches
            ));
        }
        let watch_grants = self.grants(section, |s| &s.watch);
        for (w, (subject, what)) in manifest.watches.iter().zip(watches) {
            let ok = match watch_grants {
                None => !subject.secret,
                Some(gs) => gs
                    .iter()
                    .any(|g| g.covers_kind(*subject) && g.covers_namespace(w.namespace.as_deref())),
            };
            if !ok {
                denied.push(format!(
                    "watch {:?} of {what} in {}{}",
                    w.name,
                    where_(w.namespace.as_deref()),
                    secret_note(*subject)
                ));
            }
        }
        let write_grants = self.grants(section, |s| &s.write);
        for (r, (subject, what)) in manifest.writes.iter().zip(writes) {
            let ok = match write_grants {
                None => !subject.secret,
                Some(gs) => gs.iter().any(|g| {
                    g.covers_kind(*subject)
                        && g.covers_namespace(r.namespace.as_deref())
                        && g.covers_names(&r.names)
                }),
            };
            if !ok {
                let names = if r.names.is_empty() {
                    "any name".to_string()
                } else {
                    format!("names {}", r.names.join(", "))
                };
                denied.push(format!(
                    "write {what} in {}, {names}{}",
                    where_(r.namespace.as_deref()),
                    secret_note(*subject)
                ));
            }
        }
        if denied.is_empty() {
            Ok(())
        } else {
            Err(PolicyDenied {
                section: section_name.to_string(),
                denied,
            })
        }
    }
}

fn is_secret(gvk: &Gvk) -> bool {
    gvk.group.is_empty() && gvk.kind == "Secret"
}

fn secret_note(subject: Subject<'_>) -> &'static str {
    if subject.secret {
        " (Secrets need a grant that names the kind Secret)"
    } else {
        ""
    }
}

fn where_(namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => format!("namespace {ns}"),
        None => "all namespaces".to_string(),
    }
}

#[cfg(test)]
mod tests;
