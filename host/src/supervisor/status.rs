//! Each guest's state as an operator sees it (`GET /guests`,
//! `wasmctrl guests`): where it came from, the digest and contract of the
//! version that runs, whether it is loaded, compiling, waiting or refused
//! (and why), the newer version that did not replace it, its shadow, when
//! it was last swapped.
//!
//! Owns the per-guest record and the rule that turns a report into a
//! [`Change`] (the Event's reason comes from it, so the record and the
//! Events never disagree). The supervisor's load, swap, refusal and shadow
//! paths report here; it never loads, swaps or counts anything itself: the
//! reconcile counts it shows are the guest's metrics, read when asked.

use std::collections::BTreeMap;
use std::sync::Mutex;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use super::guest_dir::GuestFile;
use crate::sync::lock;

/// Where a version of a guest comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum GuestSource {
    /// A component file named by `--guest` or `--shadow`.
    File {
        /// The file's path.
        path: String,
    },
    /// A file of the watched guest directory (`--guest-dir`): the key of
    /// the ConfigMap mounted there.
    #[serde(rename = "configmap")]
    ConfigMap {
        /// The file's name: the ConfigMap key (`gpu-summary.wasm.gz`).
        key: String,
        /// The file's path as the host reads it.
        path: String,
        /// How the file is compressed (`gzip`, `zstd`), if it is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        compression: Option<String>,
    },
    /// A component pulled from an OCI registry.
    Oci {
        /// The reference as configured (`oci://REGISTRY/REPO@sha256:…`).
        reference: String,
    },
}

impl GuestSource {
    /// Where a file of the guest directory comes from.
    pub fn of_file(file: &GuestFile) -> Self {
        if let Some(reference) = &file.oci {
            return GuestSource::Oci {
                reference: reference.clone(),
            };
        }
        GuestSource::ConfigMap {
            key: file.file_name(),
            path: file.path.display().to_string(),
            compression: file
                .compression
                .clone()
                .ok()
                .flatten()
                .map(|c| c.name().to_string()),
        }
    }
}

impl std::fmt::Display for GuestSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GuestSource::File { path } | GuestSource::ConfigMap { path, .. } => f.write_str(path),
            GuestSource::Oci { reference } => f.write_str(reference),
        }
    }
}

/// Where a version of a guest stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum LoadState {
    /// It runs.
    Loaded,
    /// It is being read, compiled, described and its caches synced.
    Compiling,
    /// It cannot start yet and is tried again (a kind not served, a
    /// registry not reachable).
    Waiting {
        /// Why, as a metric label (`not_served`, ...).
        reason: String,
        /// Why, for a person.
        message: String,
    },
    /// It was refused: not tried again until its source changes.
    Refused {
        /// Why, as a metric label (`policy`, `compile`, ...), the
        /// `reason` of `wasmctrl_guests_refused_total`.
        reason: String,
        /// Why, for a person.
        message: String,
    },
}

impl LoadState {
    /// The state's name: `loaded`, `compiling`, `waiting`, `refused`.
    pub fn name(&self) -> &'static str {
        match self {
            LoadState::Loaded => "loaded",
            LoadState::Compiling => "compiling",
            LoadState::Waiting { .. } => "waiting",
            LoadState::Refused { .. } => "refused",
        }
    }

    /// The person-readable reason of a waiting or refused version.
    pub fn message(&self) -> Option<&str> {
        match self {
            LoadState::Waiting { message, .. } | LoadState::Refused { message, .. } => {
                Some(message)
            }
            LoadState::Loaded | LoadState::Compiling => None,
        }
    }
}

/// One version of a guest (the one that runs, a newer one, or a shadow).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    /// Where it comes from.
    pub source: GuestSource,
    /// SHA-256 (hex) of the component, decompressed: what `sha256sum` of
    /// the `.wasm` prints. None until the component has been read.
    pub digest: Option<String>,
    /// The contract it was built against (`wasmctrl:controller@0.3.0`),
    /// once known.
    pub contract: Option<String>,
    /// Where it stands.
    #[serde(flatten)]
    pub state: LoadState,
    /// When it entered that state (RFC 3339, UTC).
    #[serde(serialize_with = "rfc3339")]
    pub since: DateTime<Utc>,
}

fn rfc3339<S: serde::Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&t.to_rfc3339_opts(SecondsFormat::Secs, true))
}

fn rfc3339_opt<S: serde::Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => rfc3339(t, s),
        None => s.serialize_none(),
    }
}

impl Version {
    /// A version from `source` in `state` since now; digest and contract
    /// unknown.
    pub fn new(source: GuestSource, state: LoadState) -> Self {
        Version {
            source,
            digest: None,
            contract: None,
            state,
            since: Utc::now(),
        }
    }

    /// A version from `source` being read and compiled (its component's
    /// digest once known).
    pub fn compiling(source: GuestSource, digest: Option<String>) -> Self {
        Version {
            digest,
            ..Version::new(source, LoadState::Compiling)
        }
    }

    /// A version from `source` that runs, its component's digest `digest`
    /// (a running guest was built against this host's contract).
    pub fn loaded(source: GuestSource, digest: &str) -> Self {
        Version::new(source, LoadState::Loaded)
            .digest(digest)
            .contract(Some(crate::guest::CONTRACT_VERSION.to_string()))
    }

    /// A version from `source` waiting for `kind` to be served.
    pub fn waiting_for_kind(source: GuestSource, digest: &str, kind: &str) -> Self {
        let state = LoadState::Waiting {
            reason: "not_served".into(),
            message: super::waiting::waiting_for(kind),
        };
        Version::new(source, state)
            .digest(digest)
            .contract(Some(crate::guest::CONTRACT_VERSION.to_string()))
    }

    /// Sets the component's digest.
    #[must_use]
    pub fn digest(mut self, digest: impl Into<String>) -> Self {
        let digest = digest.into();
        self.digest = (!digest.is_empty()).then_some(digest);
        self
    }

    /// Sets the contract it was built against.
    #[must_use]
    pub fn contract(mut self, contract: Option<String>) -> Self {
        self.contract = contract;
        self
    }

    /// The digest's first 12 hex digits (what `wasmctrl guests` prints).
    pub fn short_digest(&self) -> &str {
        self.digest
            .as_deref()
            .map_or("-", |d| &d[..d.len().min(12)])
    }

    /// Its source, and its digest's first 12 hex digits once known:
    /// `/guests/g.wasm.gz (sha256 0123456789ab)`.
    pub fn label(&self) -> String {
        match &self.digest {
            Some(_) => format!("{} (sha256 {})", self.source, self.short_digest()),
            None => self.source.to_string(),
        }
    }

    /// Whether it is the same version in the same state (not when).
    fn same(&self, other: &Version) -> bool {
        self.source == other.source
            && self.digest == other.digest
            && self.contract == other.contract
            && self.state == other.state
    }
}

/// One guest's state: what `GET /guests` lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestStatus {
    /// The supervisor's key: the file stem (`gpu-summary` for
    /// `gpu-summary.wasm.gz`).
    pub key: String,
    /// The name the guest declares (its key until it has been described).
    pub name: String,
    /// The version that runs, or, when none runs, the one tried.
    #[serde(flatten)]
    pub current: Version,
    /// A newer version that is not running (compiling, waiting or
    /// refused) while `current` runs.
    pub candidate: Option<Version>,
    /// The shadow beside the guest (`NAME.shadow.wasm`, `--shadow`).
    pub shadow: Option<Version>,
    /// When a new version last replaced a running one (RFC 3339, UTC).
    #[serde(serialize_with = "rfc3339_opt")]
    pub last_swap: Option<DateTime<Utc>>,
    /// Reconciles of the running guest since the host started (its
    /// `controller_runtime_reconcile_total`), when it runs.
    pub reconciles: Option<u64>,
    /// Of those, the failed ones.
    pub errors: Option<u64>,
    /// With per-guest leadership (`--leader-elect=per-guest`): the guest's
    /// Lease, whether this replica leads the guest, and who holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<GuestLeader>,
}

/// Who leads one guest, with per-guest leadership.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestLeader {
    /// The guest's Lease (None when its keys are sharded: see `buckets`).
    pub lease: Option<String>,
    /// Whether this replica leads the guest (holds its Lease, within its
    /// renew deadline, not handing it over), or, sharded, any bucket of it.
    pub leads: bool,
    /// The Lease's holder as last listed (None: free, or sharded).
    pub holder: Option<String>,
    /// Whether this replica keeps the guest's caches: it runs the guest, or
    /// stands by warm (`--standby=warm`). False while it stands by cold.
    pub cached: bool,
    /// When its keys are sharded: each bucket's Lease, holder and whether
    /// this replica leads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buckets: Option<Vec<BucketLeader>>,
    /// When its keys are sharded: how many primaries (objects of its
    /// per-object watches) this replica caches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primaries: Option<usize>,
}

/// Who leads one bucket of a sharded guest's keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketLeader {
    /// The bucket.
    pub bucket: u32,
    /// Its Lease.
    pub lease: String,
    /// Whether this replica leads it.
    pub leads: bool,
    /// The Lease's holder as last listed (None: free).
    pub holder: Option<String>,
    /// Whether this replica caches the bucket's objects (all of them
    /// standing by warm; those of the buckets it leads, standing by cold).
    #[serde(default)]
    pub cached: bool,
}

/// What a report changed: the Event it is worth (see [`Change::event`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Nothing an operator would notice (the same state again, or a
    /// version started compiling).
    Quiet,
    /// A guest of which no version ran now runs.
    Loaded,
    /// A new version replaced the running one.
    Swapped,
    /// No version runs and this one waits.
    Waiting,
    /// A newer version waits; the running one keeps running.
    CandidateWaiting,
    /// No version runs and this one was refused.
    Refused,
    /// A newer version was refused; the running one keeps running.
    Rejected,
    /// A shadow was attached.
    ShadowLoaded,
    /// A shadow was refused or is waiting for its guest.
    ShadowRefused,
    /// A shadow was stopped.
    ShadowRemoved,
    /// The guest was removed.
    Removed,
}

impl Change {
    /// The Event's `(warning, reason)` for this change, None when it is
    /// worth none.
    pub fn event(self) -> Option<(bool, &'static str)> {
        Some(match self {
            Change::Quiet => return None,
            Change::Loaded => (false, "GuestLoaded"),
            Change::Swapped => (false, "GuestSwapped"),
            Change::Waiting | Change::CandidateWaiting => (true, "GuestWaiting"),
            Change::Refused => (true, "GuestRefused"),
            Change::Rejected => (true, "GuestRejected"),
            Change::ShadowLoaded => (false, "ShadowLoaded"),
            Change::ShadowRefused => (true, "ShadowRejected"),
            Change::ShadowRemoved => (false, "ShadowRemoved"),
            Change::Removed => (false, "GuestRemoved"),
        })
    }
}

#[derive(Debug, Clone)]
struct Entry {
    name: String,
    current: Version,
    candidate: Option<Version>,
    shadow: Option<Version>,
    last_swap: Option<DateTime<Utc>>,
}

impl Entry {
    fn runs(&self) -> bool {
        self.current.state == LoadState::Loaded
    }
}

/// Every guest's state, by key. Shared by the supervisor's paths.
#[derive(Debug, Default)]
pub struct Statuses {
    guests: Mutex<BTreeMap<String, Entry>>,
}

impl Statuses {
    /// Records that `version` of guest `key` (declaring `name`) is where
    /// it says. A loaded version becomes the running one (a swap when
    /// another ran); any other state is the running guest's candidate
    /// when a version of it runs, else the guest's only version.
    pub fn report(&self, key: &str, name: &str, version: Version) -> Change {
        let mut guests = lock(&self.guests);
        let Some(entry) = guests.get_mut(key) else {
            let change = match &version.state {
                LoadState::Loaded => Change::Loaded,
                LoadState::Compiling => Change::Quiet,
                LoadState::Waiting { .. } => Change::Waiting,
                LoadState::Refused { .. } => Change::Refused,
            };
            guests.insert(
                key.to_string(),
                Entry {
                    name: name.to_string(),
                    current: version,
                    candidate: None,
                    shadow: None,
                    last_swap: None,
                },
            );
            return change;
        };
        let runs = entry.runs();
        let loaded = version.state == LoadState::Loaded;
        let as_candidate = runs && !loaded;
        let previous = if as_candidate {
            entry.candidate.as_ref()
        } else {
            Some(&entry.current)
        };
        // A retry that still waits for the same thing is no news (and
        // keeps its first `since`); every other report is.
        if matches!(version.state, LoadState::Waiting { .. })
            && previous.is_some_and(|p| p.same(&version))
        {
            return Change::Quiet;
        }
        let change = match (&version.state, runs) {
            (LoadState::Loaded, true) => Change::Swapped,
            (LoadState::Loaded, false) => Change::Loaded,
            (LoadState::Compiling, _) => Change::Quiet,
            (LoadState::Waiting { .. }, true) => Change::CandidateWaiting,
            (LoadState::Waiting { .. }, false) => Change::Waiting,
            (LoadState::Refused { .. }, true) => Change::Rejected,
            (LoadState::Refused { .. }, false) => Change::Refused,
        };
        if as_candidate {
            entry.candidate = Some(version);
        } else {
            entry.current = version;
        }
        if change == Change::Swapped {
            entry.last_swap = Some(entry.current.since);
        }
        if loaded {
            entry.candidate = None;
        }
        entry.name = name.to_string();
        change
    }

    /// Forgets the newer version of `key` that did not run (its source
    /// is back to the running version's).
    pub fn clear_candidate(&self, key: &str) {
        if let Some(entry) = lock(&self.guests).get_mut(key) {
            entry.candidate = None;
        }
    }

    /// Records the shadow beside the guest whose key or declared name is
    /// `target` (None: no shadow runs beside it any more).
    pub fn report_shadow(&self, target: &str, shadow: Option<Version>) -> Change {
        let mut guests = lock(&self.guests);
        let entry = match guests.get_mut(target) {
            Some(entry) => entry,
            None => match guests.values_mut().find(|e| e.name == target) {
                Some(entry) => entry,
                None => return Change::Quiet,
            },
        };
        let change = match (&shadow, &entry.shadow) {
            (None, None) => Change::Quiet,
            (None, Some(_)) => Change::ShadowRemoved,
            (Some(new), Some(old)) if new.same(old) => Change::Quiet,
            (Some(new), _) if new.state == LoadState::Loaded => Change::ShadowLoaded,
            (Some(new), _) if new.state == LoadState::Compiling => Change::Quiet,
            (Some(_), _) => Change::ShadowRefused,
        };
        entry.shadow = shadow;
        change
    }

    /// Forgets guest `key` (its source is gone). `Removed` when a version
    /// of it ran.
    pub fn remove(&self, key: &str) -> Change {
        match lock(&self.guests).remove(key) {
            Some(entry) if entry.runs() => Change::Removed,
            _ => Change::Quiet,
        }
    }

    /// The guest `key`'s state (without its reconcile counts).
    pub fn get(&self, key: &str) -> Option<GuestStatus> {
        lock(&self.guests).get(key).map(|e| status(key, e))
    }

    /// Every guest's state, by key (without reconcile counts).
    pub fn all(&self) -> Vec<GuestStatus> {
        lock(&self.guests)
            .iter()
            .map(|(key, e)| status(key, e))
            .collect()
    }
}

fn status(key: &str, e: &Entry) -> GuestStatus {
    GuestStatus {
        key: key.to_string(),
        name: e.name.clone(),
        current: e.current.clone(),
        candidate: e.candidate.clone(),
        shadow: e.shadow.clone(),
        last_swap: e.last_swap,
        reconciles: None,
        errors: None,
        leader: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str) -> GuestSource {
        GuestSource::ConfigMap {
            key: format!("{path}.wasm"),
            path: format!("/guests/{path}.wasm"),
            compression: None,
        }
    }

    fn refused(why: &str) -> LoadState {
        LoadState::Refused {
            reason: "compile".into(),
            message: why.into(),
        }
    }

    fn waiting(why: &str) -> LoadState {
        LoadState::Waiting {
            reason: "not_served".into(),
            message: why.into(),
        }
    }

    #[test]
    fn a_refused_new_version_is_the_candidate_and_the_running_one_stays_current() {
        let s = Statuses::default();
        let v1 = Version::new(file("g"), LoadState::Loaded).digest("aa");
        assert_eq!(s.report("g", "g", v1.clone()), Change::Loaded);
        let v2 = Version::new(file("g"), LoadState::Compiling).digest("bb");
        assert_eq!(s.report("g", "g", v2), Change::Quiet);
        let bad = Version::new(file("g"), refused("not a component")).digest("bb");
        assert_eq!(s.report("g", "g", bad.clone()), Change::Rejected);
        let g = s.get("g").unwrap();
        assert_eq!(g.current, v1, "the running version is unchanged");
        assert_eq!(g.candidate, Some(bad));
        assert_eq!(g.last_swap, None);

        let v3 = Version::new(file("g"), LoadState::Loaded).digest("cc");
        assert_eq!(s.report("g", "g", v3.clone()), Change::Swapped);
        let g = s.get("g").unwrap();
        assert_eq!((g.current, g.candidate), (v3.clone(), None));
        assert_eq!(g.last_swap, Some(v3.since));
    }

    #[test]
    fn a_guest_of_which_nothing_runs_is_its_only_version_whatever_its_state() {
        let s = Statuses::default();
        let w = Version::new(file("g"), waiting("Widgets not served"));
        assert_eq!(s.report("g", "g", w.clone()), Change::Waiting);
        // Retried and still missing the same kind: no news, first `since`.
        let again = Version::new(file("g"), waiting("Widgets not served"));
        assert_eq!(s.report("g", "g", again), Change::Quiet);
        assert_eq!(s.get("g").unwrap().current.since, w.since);
        let r = Version::new(file("g"), refused("forbidden"));
        assert_eq!(s.report("g", "g", r.clone()), Change::Refused);
        assert_eq!(
            s.report("g", "g", r.clone()),
            Change::Refused,
            "a retry refused again is news"
        );
        let g = s.get("g").unwrap();
        assert_eq!((g.current, g.candidate), (r, None));
        assert_eq!(s.remove("g"), Change::Quiet, "nothing of it ran");
        assert!(s.all().is_empty());
    }

    #[test]
    fn a_shadow_is_found_by_its_guests_key_or_declared_name() {
        let s = Statuses::default();
        s.report(
            "file-stem",
            "declared",
            Version::new(file("file-stem"), LoadState::Loaded),
        );
        let shadow = Version::new(file("declared.shadow"), LoadState::Loaded);
        assert_eq!(
            s.report_shadow("declared", Some(shadow.clone())),
            Change::ShadowLoaded
        );
        assert_eq!(s.get("file-stem").unwrap().shadow, Some(shadow));
        assert_eq!(s.report_shadow("file-stem", None), Change::ShadowRemoved);
        assert_eq!(s.report_shadow("nobody", None), Change::Quiet);
        assert_eq!(s.remove("file-stem"), Change::Removed);
    }

    #[test]
    fn the_json_field_names_are_the_documented_ones() {
        let s = Statuses::default();
        s.report(
            "g",
            "gpu",
            Version::new(file("g"), LoadState::Loaded)
                .digest("ab")
                .contract(Some("wasmctrl:controller@0.3.0".into())),
        );
        s.report("g", "gpu", Version::new(file("g"), refused("bad")));
        let json = serde_json::to_value(s.all()).unwrap();
        let g = &json[0];
        let mut fields: Vec<&str> = g.as_object().unwrap().keys().map(String::as_str).collect();
        fields.sort_unstable();
        assert_eq!(
            fields,
            [
                "candidate",
                "contract",
                "digest",
                "errors",
                "key",
                "last_swap",
                "name",
                "reconciles",
                "shadow",
                "since",
                "source",
                "state"
            ]
        );
        assert_eq!(g["state"], "loaded");
        assert_eq!(g["source"]["type"], "configmap");
        assert_eq!(g["source"]["key"], "g.wasm");
        assert_eq!(g["candidate"]["state"], "refused");
        assert_eq!(g["candidate"]["reason"], "compile");
        assert_eq!(g["candidate"]["message"], "bad");
        assert!(g["since"].as_str().unwrap().ends_with('Z'));
    }
}
