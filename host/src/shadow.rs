//! Shadow guests: a new version of a guest run beside the active one on
//! the same snapshots, its plans compared with the active plans write by
//! write, so an operator sees where it would act differently before
//! promoting it. Owns the comparison queue, the worker that calls the
//! shadow, and the report (counts, the first differing keys with a compact
//! diff, recent errors, an Event on the host's Pod at the first
//! difference). It never writes, never emits an Event about a watched
//! object and never adds a finalizer: a shadow's plan is only read.
//!
//! # How a key is compared
//! The controller hands each reconciled key over after the active call,
//! off the write path: a per-object key with the snapshot the active guest
//! saw and its plan; an aggregate key (reconciled incrementally) by name,
//! and the worker calls both versions on one whole snapshot of the caches.
//! Cases wait in a bounded queue (a key already waiting is not queued
//! twice); when it is full the case is counted `skipped`, never waited
//! for, so a slow shadow never delays the active guest. Plans are compared
//! normalised: writes and events as multisets, object keys sorted.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value as Json};
use tokio::sync::mpsc;

use crate::guest::{Environment, GuestManifest, GuestModule, PlannedWrite, Request, SnapshotData};
use crate::metrics::{Metrics, ShadowLabels};
use crate::relations::{snapshot_for, WatchCache};
use crate::request::RequestKey;
use crate::sync::lock;

/// Cases waiting for the shadow, per guest.
const QUEUE: usize = 256;
/// Differing keys kept in the report (the first ones).
const DIFFERENCES_KEPT: usize = 20;
/// Errors kept in the report (the latest ones).
const ERRORS_KEPT: usize = 20;
/// The longest a write or event is shown in a report, in bytes.
const SHOWN_BYTES: usize = 1024;
/// At most one log line about a new difference per this interval.
const LOG_EVERY: Duration = Duration::from_secs(1);

/// Why a shadow cannot run beside its target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShadowError {
    /// No guest of that name runs.
    #[error("shadow {file}: no running guest named {target}")]
    NoTarget {
        /// The shadow's file.
        file: String,
        /// The guest it shadows.
        target: String,
    },
    /// The shadow's manifest is another guest's, or watches other objects.
    #[error("shadow {file} of guest {target}: {problem}")]
    Mismatch {
        /// The shadow's file.
        file: String,
        /// The guest it shadows.
        target: String,
        /// What differs.
        problem: String,
    },
}

/// A loaded shadow: the module and its manifest, checked against its
/// target's, and the report kept across swaps of either.
#[derive(Clone)]
pub struct ShadowSpec {
    module: GuestModule,
    manifest: Arc<GuestManifest>,
    report: Arc<Mutex<Report>>,
    file: String,
}

impl ShadowSpec {
    /// A shadow of `target` (whose manifest is `active`): `module`, which
    /// described itself as `manifest`. Refused unless it declares the same
    /// name and the same watches (it runs on its target's snapshots).
    pub fn new(
        file: &str,
        module: GuestModule,
        manifest: GuestManifest,
        active: &GuestManifest,
    ) -> Result<Self, ShadowError> {
        let mismatch = |problem: String| ShadowError::Mismatch {
            file: file.to_string(),
            target: active.name.clone(),
            problem,
        };
        if manifest.name != active.name {
            return Err(mismatch(format!(
                "it declares the name {}; a shadow declares its target's",
                manifest.name
            )));
        }
        // The snapshot's layout follows the watches: a shadow watching
        // anything else could not read its target's snapshots.
        if format!("{:?}", manifest.watches) != format!("{:?}", active.watches) {
            return Err(mismatch(
                "its watches differ from its target's (a shadow runs on its target's snapshots); load it as a guest of its own instead".into(),
            ));
        }
        Ok(ShadowSpec {
            module,
            manifest: Arc::new(manifest),
            report: Arc::new(Mutex::new(Report::new(active.name.clone(), file))),
            file: file.to_string(),
        })
    }

    /// The same shadow beside a new version of its target (`active`),
    /// keeping its report; refused when the watches no longer match.
    pub fn rebind(&self, active: &GuestManifest) -> Result<Self, ShadowError> {
        let rebound = ShadowSpec::new(
            &self.file,
            self.module.clone(),
            (*self.manifest).clone(),
            active,
        )?;
        Ok(ShadowSpec {
            report: self.report.clone(),
            ..rebound
        })
    }

    /// The shadow's file.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The report as JSON (what `/shadow/GUEST` serves).
    pub fn report(&self) -> Json {
        lock(&self.report).to_json()
    }

    /// Counts so far: (same, differs, errors, skipped).
    pub fn counts(&self) -> (u64, u64, u64, u64) {
        let r = lock(&self.report);
        (r.same, r.differs, r.errors, r.skipped)
    }
}

/// What the active guest did with one key, handed to the shadow.
pub enum Case {
    /// A per-object key: the snapshot and clock the active guest saw, and
    /// its plan (normalised, see [`normalise`]).
    Seen {
        /// The key.
        key: RequestKey,
        /// The active call's environment (its clock included).
        env: Environment,
        /// The snapshot.
        snapshot: Box<SnapshotData>,
        /// The active plan.
        active: Json,
    },
    /// An aggregate key: both versions run on one whole snapshot.
    Aggregate(RequestKey),
}

impl Case {
    fn key(&self) -> &RequestKey {
        match self {
            Case::Seen { key, .. } | Case::Aggregate(key) => key,
        }
    }
}

/// The running shadow of one active controller: a queue and its worker.
pub struct Shadow {
    spec: ShadowSpec,
    tx: mpsc::Sender<Case>,
    pending: Arc<Mutex<HashSet<RequestKey>>>,
    metrics: Arc<Metrics>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Shadow {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What the worker needs of the active controller for aggregate keys.
pub struct Target {
    /// The active module.
    pub module: GuestModule,
    /// The active manifest.
    pub manifest: Arc<GuestManifest>,
    /// The caches, one per watch.
    pub caches: Arc<[WatchCache]>,
    /// The active environment (the clock is set per call).
    pub env: Environment,
    /// Where to record an Event when the shadow first differs: the host's
    /// own Pod (namespace, name), through the guest's recorder.
    pub host_pod: Option<(crate::events::Recorder, (String, String))>,
    /// Dry-runs the shadow's differing writes against the API server
    /// (`--shadow-dry-run`), when given.
    pub dry_run: Option<crate::actuator::dry_run::DryRun>,
}

impl Shadow {
    /// Starts the worker comparing `spec` with `target`.
    pub fn start(spec: ShadowSpec, target: Target, metrics: Arc<Metrics>) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let pending = Arc::new(Mutex::new(HashSet::new()));
        let task = tokio::spawn(work(
            spec.clone(),
            target,
            rx,
            pending.clone(),
            metrics.clone(),
        ));
        Shadow {
            spec,
            tx,
            pending,
            metrics,
            task,
        }
    }

    /// The spec (module, manifest, report).
    pub fn spec(&self) -> &ShadowSpec {
        &self.spec
    }

    /// Hands a case over without waiting: a key already waiting is not
    /// queued again; a full queue counts the case `skipped`.
    pub fn offer(&self, case: Case) {
        let key = case.key().clone();
        if !lock(&self.pending).insert(key.clone()) {
            return;
        }
        if self.tx.try_send(case).is_err() {
            lock(&self.pending).remove(&key);
            let mut report = lock(&self.spec.report);
            report.skipped += 1;
            count(&self.metrics, &report.guest, "skipped");
        }
    }
}

fn count(metrics: &Metrics, guest: &str, outcome: &str) {
    metrics
        .shadow_reconciles
        .get_or_create(&ShadowLabels {
            guest: guest.to_string(),
            outcome: outcome.to_string(),
        })
        .inc();
}

async fn work(
    spec: ShadowSpec,
    target: Target,
    mut rx: mpsc::Receiver<Case>,
    pending: Arc<Mutex<HashSet<RequestKey>>>,
    metrics: Arc<Metrics>,
) {
    let target = Arc::new(target);
    let mut last_log: Option<tokio::time::Instant> = None;
    let mut unlogged = 0u64;
    while let Some(case) = rx.recv().await {
        let key = case.key().clone();
        lock(&pending).remove(&key);
        let (s, t) = (spec.clone(), target.clone());
        let span = tracing::info_span!("shadow", guest = %t.manifest.name, key = %key);
        let compared = tokio::task::spawn_blocking(move || span.in_scope(|| compare(&s, &t, case)))
            .await
            .unwrap_or_else(|e| Compared::Error(format!("shadow task failed: {e}")));
        // The report's lock is not held across the Event's await.
        let mut to_dry_run = Vec::new();
        let (guest, first_difference) = {
            let mut first_difference = None;
            let mut report = lock(&spec.report);
            let guest = report.guest.clone();
            match compared {
                Compared::Same => {
                    report.same += 1;
                    count(&metrics, &guest, "same");
                }
                Compared::Error(why) => {
                    report.errors += 1;
                    count(&metrics, &guest, "error");
                    report.error(&key, why);
                }
                Compared::Differs(diff, writes) => {
                    to_dry_run = writes;
                    report.differs += 1;
                    count(&metrics, &guest, "differs");
                    if report.differ(&key, diff) {
                        if report.differing_keys == 1 {
                            first_difference = Some(key.key.to_string());
                        }
                        // A key seen differing for the first time.
                        let now = tokio::time::Instant::now();
                        if last_log.is_none_or(|t| now.duration_since(t) >= LOG_EVERY) {
                            tracing::info!(guest = %guest, shadow = %spec.file, key = %key, more = unlogged,
                                "the shadow's plan differs from the active guest's");
                            last_log = Some(now);
                            unlogged = 0;
                        } else {
                            unlogged += 1;
                        }
                    }
                }
            }
            (guest, first_difference)
        };
        if let Some(dry_run) = &target.dry_run {
            for write in &to_dry_run {
                let answer = dry_run.send(write).await;
                let mut report = lock(&spec.report);
                report.dry_runs += 1;
                if let Err(e) = answer {
                    count(&metrics, &guest, "dry_run_refused");
                    tracing::info!(guest = %guest, shadow = %spec.file, key = %key,
                        "the API server would refuse a write of the shadow's: {e}");
                    report.dry_run_refused(&key, e.to_string());
                }
            }
        }
        if let (Some(key), Some((recorder, (namespace, pod)))) =
            (first_difference, &target.host_pod)
        {
            let event = crate::events::Event {
                type_: crate::events::EventType::Normal,
                reason: "ShadowDiffers".into(),
                note: Some(format!(
                    "shadow {} of guest {guest} plans differently for {key} (see /shadow/{guest} on the health address)",
                    spec.file
                )),
                action: "Compare".into(),
                secondary: None,
            };
            let reference = crate::events::pod_reference(namespace, pod);
            if let Err(err) = recorder.publish(&event, &reference).await {
                tracing::warn!("cannot record event ShadowDiffers on pod {namespace}/{pod}: {err}");
            }
        }
    }
}

/// One comparison's result.
enum Compared {
    Same,
    /// What differs, and the shadow's writes the active plan lacks.
    Differs(Diff, Vec<PlannedWrite>),
    Error(String),
}

/// The writes and events only one of the two plans has.
#[derive(Debug, Clone, PartialEq)]
struct Diff {
    active_only: Vec<String>,
    shadow_only: Vec<String>,
}

fn compare(spec: &ShadowSpec, target: &Target, case: Case) -> Compared {
    let (key, env, snapshot, active) = match case {
        Case::Seen {
            key,
            env,
            snapshot,
            active,
        } => (key, env, *snapshot, active),
        Case::Aggregate(key) => {
            let env = target.env.at(crate::guest::now_ms());
            let snapshot = snapshot_for(&target.manifest, &target.caches, &key);
            let request = request(&target.manifest, &key);
            let (plan, _) =
                target
                    .module
                    .reconcile(&target.manifest, &env, &request, snapshot.clone());
            match plan {
                Ok(plan) => (
                    key,
                    env,
                    snapshot,
                    normalise(&crate::offline::plan_json(&plan)),
                ),
                // The active version fails on this snapshot: nothing to
                // compare with (its own reconcile reports it).
                Err(_) => return Compared::Same,
            }
        }
    };
    let request = request(&spec.manifest, &key);
    let (plan, _) = spec
        .module
        .reconcile(&spec.manifest, &env, &request, snapshot);
    let plan = match plan {
        Ok(plan) => plan,
        Err(e) => return Compared::Error(e.to_string()),
    };
    let printed = crate::offline::plan_json(&plan);
    let Some(d) = diff(&active, &normalise(&printed)) else {
        return Compared::Same;
    };
    // The shadow's writes the active plan lacks (printed in plan order).
    let mut active_writes: Vec<&str> = active
        .get("writes")
        .and_then(Json::as_array)
        .map(|a| a.iter().filter_map(Json::as_str).collect())
        .unwrap_or_default();
    let printed_writes = printed.get("writes").and_then(Json::as_array);
    let mut only = Vec::new();
    for (write, json) in plan.writes.iter().zip(printed_writes.into_iter().flatten()) {
        let text = canonical(json);
        match active_writes.iter().position(|a| *a == text) {
            Some(at) => {
                active_writes.remove(at);
            }
            None => only.push(write.clone()),
        }
    }
    Compared::Differs(d, only)
}

fn request(manifest: &GuestManifest, key: &RequestKey) -> Request {
    Request {
        key: key.key.to_string(),
        watch: key.watch.map(|w| manifest.watches[w].name.clone()),
    }
}

/// A printed plan ([`crate::offline::plan_json`]) in a form two plans can
/// be compared by: its writes and events as sorted lists of canonical JSON
/// (object keys sorted), its requeue as it is.
pub fn normalise(plan: &Json) -> Json {
    let sorted = |field: &str| -> Json {
        let mut items: Vec<String> = plan
            .get(field)
            .and_then(Json::as_array)
            .map(|a| a.iter().map(canonical).collect())
            .unwrap_or_default();
        items.sort();
        Json::from(items)
    };
    json!({
        "writes": sorted("writes"),
        "events": sorted("events"),
        "requeue-after-ms": plan.get("requeue-after-ms").cloned().unwrap_or(Json::Null),
    })
}

/// `v` as JSON text with every object's keys sorted.
fn canonical(v: &Json) -> String {
    fn sort(v: &Json) -> Json {
        match v {
            Json::Object(m) => {
                let sorted: BTreeMap<&String, Json> = m.iter().map(|(k, v)| (k, sort(v))).collect();
                Json::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
            }
            Json::Array(a) => Json::Array(a.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    sort(v).to_string()
}

/// What differs between two normalised plans (see [`normalise`]): the
/// writes and events only the first has, and those only the second has;
/// None when they are the same.
pub fn plan_diff(a: &Json, b: &Json) -> Option<(Vec<String>, Vec<String>)> {
    diff(a, b).map(|d| (d.active_only, d.shadow_only))
}

/// What differs between two normalised plans, if anything.
fn diff(active: &Json, shadow: &Json) -> Option<Diff> {
    if active == shadow {
        return None;
    }
    let items = |p: &Json, field: &str| -> Vec<String> {
        p.get(field)
            .and_then(Json::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Json::as_str)
                    .map(|s| format!("{field}: {s}"))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut active_only = Vec::new();
    let mut shadow_only = items(shadow, "writes");
    shadow_only.extend(items(shadow, "events"));
    for item in items(active, "writes")
        .into_iter()
        .chain(items(active, "events"))
    {
        match shadow_only.iter().position(|s| *s == item) {
            Some(at) => {
                shadow_only.remove(at);
            }
            None => active_only.push(item),
        }
    }
    let requeue = |p: &Json| p.get("requeue-after-ms").cloned().unwrap_or(Json::Null);
    if requeue(active) != requeue(shadow) {
        active_only.push(format!("requeue-after-ms: {}", requeue(active)));
        shadow_only.push(format!("requeue-after-ms: {}", requeue(shadow)));
    }
    Some(Diff {
        active_only: active_only.into_iter().map(shorten).collect(),
        shadow_only: shadow_only.into_iter().map(shorten).collect(),
    })
}

fn shorten(mut s: String) -> String {
    if s.len() > SHOWN_BYTES {
        let mut at = SHOWN_BYTES;
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        s.truncate(at);
        s.push('…');
    }
    s
}

/// A shadow's report.
#[derive(Debug)]
struct Report {
    guest: String,
    file: String,
    same: u64,
    differs: u64,
    errors: u64,
    skipped: u64,
    /// The first keys seen differing, with their latest diff.
    differing: Vec<(String, Diff)>,
    /// How many distinct keys differed (beyond those kept too).
    differing_keys: u64,
    seen_differing: HashSet<String>,
    recent_errors: Vec<(String, String)>,
    /// Differing writes sent as dry runs, and the latest refusals.
    dry_runs: u64,
    dry_run_refusals: u64,
    recent_refusals: Vec<(String, String)>,
}

impl Report {
    fn new(guest: String, file: &str) -> Self {
        Report {
            guest,
            file: file.to_string(),
            same: 0,
            differs: 0,
            errors: 0,
            skipped: 0,
            differing: Vec::new(),
            differing_keys: 0,
            seen_differing: HashSet::new(),
            recent_errors: Vec::new(),
            dry_runs: 0,
            dry_run_refusals: 0,
            recent_refusals: Vec::new(),
        }
    }

    fn dry_run_refused(&mut self, key: &RequestKey, why: String) {
        self.dry_run_refusals += 1;
        if self.recent_refusals.len() >= ERRORS_KEPT {
            self.recent_refusals.remove(0);
        }
        self.recent_refusals
            .push((key.key.to_string(), shorten(why)));
    }

    /// Records `key` differing; true when it is a key not seen differing
    /// before. Only [`DIFFERENCES_KEPT`] keys' diffs are kept (bounded
    /// memory: the set of keys seen is bounded by the same number, and
    /// later ones are only counted).
    fn differ(&mut self, key: &RequestKey, diff: Diff) -> bool {
        let k = key.key.to_string();
        if let Some(kept) = self.differing.iter_mut().find(|(d, _)| *d == k) {
            kept.1 = diff;
            return false;
        }
        if self.differing.len() < DIFFERENCES_KEPT {
            self.differing.push((k.clone(), diff));
        }
        if self.seen_differing.len() >= 4 * DIFFERENCES_KEPT {
            // Beyond the keys kept, every difference counts as new once in
            // a while: the set is bounded, not exact.
            self.seen_differing.clear();
        }
        let new = self.seen_differing.insert(k);
        if new {
            self.differing_keys += 1;
        }
        new
    }

    fn error(&mut self, key: &RequestKey, why: String) {
        if self.recent_errors.len() >= ERRORS_KEPT {
            self.recent_errors.remove(0);
        }
        self.recent_errors.push((key.key.to_string(), shorten(why)));
    }

    fn to_json(&self) -> Json {
        json!({
            "guest": self.guest,
            "shadow": self.file,
            "same": self.same,
            "differs": self.differs,
            "errors": self.errors,
            "skipped": self.skipped,
            "differing_keys": self.differing_keys,
            "differences": self.differing.iter().map(|(key, d)| json!({
                "key": key,
                "active_only": d.active_only,
                "shadow_only": d.shadow_only,
            })).collect::<Vec<_>>(),
            "recent_errors": self.recent_errors.iter().map(|(key, why)| json!({
                "key": key, "error": why,
            })).collect::<Vec<_>>(),
            "dry_runs": self.dry_runs,
            "dry_run_refusals": self.dry_run_refusals,
            "recent_dry_run_refusals": self.recent_refusals.iter().map(|(key, why)| json!({
                "key": key, "error": why,
            })).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(writes: &[Json]) -> Json {
        normalise(&json!({"writes": writes, "events": [], "requeue-after-ms": null}))
    }

    #[test]
    fn plans_equal_up_to_write_order_and_key_order_are_the_same() {
        let a = plan(&[
            json!({"apply": {"kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x": "1", "y": "2"}}}),
            json!({"delete": {"name": "b"}}),
        ]);
        let b = plan(&[
            json!({"delete": {"name": "b"}}),
            json!({"apply": {"data": {"y": "2", "x": "1"}, "metadata": {"name": "a"}, "kind": "ConfigMap"}}),
        ]);
        assert_eq!(diff(&a, &b), None);
    }

    #[test]
    fn a_changed_write_shows_on_both_sides_and_a_shared_one_on_neither() {
        let a = plan(&[
            json!({"apply": {"data": {"n1": "2"}}}),
            json!({"delete": {"name": "x"}}),
        ]);
        let b = plan(&[
            json!({"apply": {"data": {"n1": "3"}}}),
            json!({"delete": {"name": "x"}}),
        ]);
        let d = diff(&a, &b).expect("differs");
        assert_eq!(d.active_only, [r#"writes: {"apply":{"data":{"n1":"2"}}}"#]);
        assert_eq!(d.shadow_only, [r#"writes: {"apply":{"data":{"n1":"3"}}}"#]);
    }

    #[test]
    fn a_duplicated_write_counts_as_many_times_as_it_appears() {
        let w = json!({"apply": {"metadata": {"name": "a"}}});
        let d = diff(&plan(std::slice::from_ref(&w)), &plan(&[w.clone(), w])).expect("differs");
        assert!(d.active_only.is_empty());
        assert_eq!(d.shadow_only.len(), 1);
    }

    #[test]
    fn a_different_requeue_differs() {
        let a = normalise(&json!({"writes": [], "events": [], "requeue-after-ms": 1000}));
        let b = normalise(&json!({"writes": [], "events": [], "requeue-after-ms": null}));
        let d = diff(&a, &b).expect("differs");
        assert_eq!(d.active_only, ["requeue-after-ms: 1000"]);
    }

    #[test]
    fn the_report_keeps_the_first_differing_keys_and_counts_the_rest() {
        let mut r = Report::new("g".into(), "g.shadow.wasm");
        let d = Diff {
            active_only: vec!["a".into()],
            shadow_only: vec![],
        };
        for i in 0..(DIFFERENCES_KEPT + 5) {
            let key = RequestKey::aggregate(format!("k{i}").as_str());
            assert!(r.differ(&key, d.clone()), "key {i} is new");
            assert!(!r.differ(&key, d.clone()), "key {i} again");
        }
        assert_eq!(r.differing.len(), DIFFERENCES_KEPT);
        assert_eq!(r.differing_keys, (DIFFERENCES_KEPT + 5) as u64);
        let long = "x".repeat(5000);
        r.error(&RequestKey::aggregate("k"), long);
        assert!(r.recent_errors[0].1.len() <= SHOWN_BYTES + '…'.len_utf8());
    }
}
