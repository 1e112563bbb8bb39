//! Recorded reconcile cases and their replay: a guest's request, the
//! environment, the snapshot's objects in their projected form and the
//! plan, kept as readable JSON files in a bounded ring per guest
//! (`--record DIR`), and run again through another version of the guest
//! offline (`wasmctrl replay`), reporting every plan that differs. It owns
//! the case format and the ring; it never writes to a cluster, and never
//! records a guest watching Secrets unless the operator allows it.
//!
//! # Case format
//! `{"guest", "digest", "request": {"key", "watch", "presence"}, "environment":
//! {"namespace", "config", "now-ms"}, "snapshot": {"objects": [{"watch",
//! "namespace", "name", "uid", "generation", "deletionTimestamp",
//! "fields": {PATH: [VALUE, ...]}}], "indexes": [{"watch", "name",
//! "buckets": {KEY: [OBJECT, ...]}}]}, "plan"}`; a value is `null`, a
//! string, an integer, a float, a boolean, or `{"json": TEXT}`.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value as Json};
use wasmctrl_snapshot::{kind, Builder, SnapshotView, Value};

use crate::guest::{Environment, GuestManifest, GuestModule, Presence, Request, SnapshotData};
use crate::shadow::{handoff, normalise, Case, Cases, Handoff, Offered, Resolved, Target};
use crate::sync::lock;

/// Cases waiting to be written, per guest.
const QUEUE: usize = 256;

/// Why recording or replaying failed.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A case file is not a case.
    #[error("{path}: not a recorded case: {problem}")]
    Case {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
}

/// How much a host records, per guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordConfig {
    /// The directory (one subdirectory per guest).
    pub dir: PathBuf,
    /// The most cases kept per guest (the oldest go first).
    pub max_cases: usize,
    /// The most bytes of cases kept per guest.
    pub max_bytes: u64,
    /// Record guests that watch Secrets too (their data lands on disk).
    pub secrets: bool,
}

/// The most cases [`RecordConfig::new`] keeps per guest.
pub const DEFAULT_MAX_CASES: usize = 1000;
/// The most bytes of cases [`RecordConfig::new`] keeps per guest: 64 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;

impl RecordConfig {
    /// Recording under `dir`, at most [`DEFAULT_MAX_CASES`] cases and
    /// [`DEFAULT_MAX_BYTES`] per guest, guests watching Secrets left out.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        RecordConfig {
            dir: dir.into(),
            max_cases: DEFAULT_MAX_CASES,
            max_bytes: DEFAULT_MAX_BYTES,
            secrets: false,
        }
    }

    /// Sets the most cases kept per guest (the oldest go first).
    #[must_use]
    pub fn max_cases(mut self, n: usize) -> Self {
        self.max_cases = n;
        self
    }

    /// Sets the most bytes of cases kept per guest.
    #[must_use]
    pub fn max_bytes(mut self, n: u64) -> Self {
        self.max_bytes = n;
        self
    }

    /// Sets whether guests that watch Secrets are recorded too: their data
    /// then lands on disk.
    #[must_use]
    pub fn secrets(mut self, secrets: bool) -> Self {
        self.secrets = secrets;
        self
    }
}

/// A normalised plan (see [`normalise`]: writes and events as canonical
/// JSON text) with its writes and events as JSON again, for people.
fn readable(plan: &Json) -> Json {
    let items = |field: &str| -> Json {
        plan.get(field)
            .and_then(Json::as_array)
            .map(|a| {
                a.iter()
                    .map(|v| match v.as_str() {
                        Some(text) => serde_json::from_str(text).unwrap_or_else(|_| v.clone()),
                        None => v.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    json!({
        "writes": items("writes"),
        "events": items("events"),
        "requeue-after-ms": plan.get("requeue-after-ms").cloned().unwrap_or(Json::Null),
    })
}

/// A case as JSON, from what one reconcile saw and planned (`plan`
/// normalised).
pub fn case_json(
    manifest: &GuestManifest,
    digest: &str,
    request: &Request,
    env: &Environment,
    snapshot: &SnapshotData,
    plan: &Json,
) -> Json {
    let config: BTreeMap<&str, &str> = env
        .config
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    json!({
        "guest": manifest.name,
        "digest": digest,
        "request": {
            "key": request.key,
            "watch": request.watch,
            "presence": request.presence.map(Presence::as_str),
        },
        "environment": {"namespace": env.namespace, "config": config, "now-ms": env.now_ms},
        "snapshot": snapshot_json(manifest, snapshot),
        "plan": readable(plan),
    })
}

fn value_json(v: Value<'_>) -> Json {
    match v {
        Value::Absent => Json::Null,
        Value::Str(s) => Json::from(s),
        Value::Int(i) => Json::from(i),
        Value::Float(x) => serde_json::Number::from_f64(x).map_or(Json::Null, Json::Number),
        Value::Bool(b) => Json::from(b),
        Value::Json(text) => json!({ "json": text }),
    }
}

/// The snapshot's objects and indexes, named by the manifest's watches and
/// field paths.
fn snapshot_json(manifest: &GuestManifest, snapshot: &SnapshotData) -> Json {
    let Ok(view) = SnapshotView::new(snapshot) else {
        return json!({"objects": [], "indexes": []});
    };
    let watch_name = |w: u32| {
        manifest
            .watches
            .get(w as usize)
            .map_or_else(|| w.to_string(), |s| s.name.clone())
    };
    let objects: Vec<Json> = (0..view.len())
        .map(|o| {
            let w = view.watch(o);
            let mut fields = serde_json::Map::new();
            if let Some(spec) = manifest.watches.get(w as usize) {
                let paths = &spec.projection.paths()[..spec.projection.visible()];
                for (f, path) in paths.iter().enumerate() {
                    let values: Vec<Json> = (0..view.field_len(o, f))
                        .map(|i| value_json(view.value(o, f, i)))
                        .collect();
                    fields.insert(path.to_string(), Json::from(values));
                }
            }
            json!({
                "watch": watch_name(w),
                "namespace": view.namespace(o),
                "name": view.name(o),
                "uid": view.uid(o),
                "generation": view.generation(o),
                "deletionTimestamp": view.deletion_timestamp(o),
                "fields": fields,
            })
        })
        .collect();
    let indexes: Vec<Json> = snapshot
        .indexes
        .iter()
        .map(|ix| {
            let buckets: serde_json::Map<String, Json> = ix
                .buckets
                .iter()
                .map(|(key, objects)| (view.string(*key).to_string(), Json::from(objects.clone())))
                .collect();
            json!({"watch": watch_name(ix.watch), "name": ix.name, "buckets": buckets})
        })
        .collect();
    json!({"objects": objects, "indexes": indexes})
}

/// A recorded case, read back.
#[derive(Debug, Clone)]
pub struct RecordedCase {
    /// The file.
    pub path: PathBuf,
    /// The request.
    pub request: Request,
    /// The environment, clock included.
    pub env: Environment,
    /// The recorded plan, normalised (see [`crate::shadow::normalise`]).
    pub plan: Json,
    case: Json,
}

impl RecordedCase {
    /// Reads one case file.
    pub fn read(path: &Path) -> Result<Self, RecordingError> {
        let text = std::fs::read_to_string(path).map_err(|source| RecordingError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let bad = |problem: &str| RecordingError::Case {
            path: path.to_path_buf(),
            problem: problem.to_string(),
        };
        let case: Json = serde_json::from_str(&text).map_err(|e| bad(&e.to_string()))?;
        let str_at = |p: &str| case.pointer(p).and_then(Json::as_str);
        let key = str_at("/request/key").ok_or_else(|| bad("no request.key"))?;
        let env = case
            .get("environment")
            .ok_or_else(|| bad("no environment"))?;
        let config = env
            .get("config")
            .and_then(Json::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let env = Environment {
            namespace: str_at("/environment/namespace")
                .unwrap_or_default()
                .to_string(),
            config,
            now_ms: env.get("now-ms").and_then(Json::as_u64).unwrap_or_default(),
        };
        let plan = case.get("plan").ok_or_else(|| bad("no plan"))?;
        if case
            .pointer("/snapshot/objects")
            .and_then(Json::as_array)
            .is_none()
        {
            return Err(bad("no snapshot.objects"));
        }
        let watch = str_at("/request/watch");
        let presence = match (watch, str_at("/request/presence")) {
            (_, Some(name)) => Some(
                Presence::from_name(name)
                    .ok_or_else(|| bad(&format!("request.presence {name:?}")))?,
            ),
            (None, None) => None,
            // Recorded by a host of contract 0.2, which had no presence:
            // its snapshot held the primary exactly when it was present.
            (Some(watch), None) => Some(legacy_presence(&case, watch, key)),
        };
        Ok(RecordedCase {
            path: path.to_path_buf(),
            request: Request {
                key: key.to_string(),
                watch: watch.map(str::to_string),
                presence,
            },
            env,
            plan: normalise(plan),
            case,
        })
    }

    /// The snapshot laid out for `manifest` (watches matched by name,
    /// fields by path); Err names a watch or field the recording lacks.
    pub fn snapshot_for(&self, manifest: &GuestManifest) -> Result<SnapshotData, String> {
        let empty = Vec::new();
        let objects = self
            .case
            .pointer("/snapshot/objects")
            .and_then(Json::as_array)
            .unwrap_or(&empty);
        let watch_of = |name: &str| manifest.watches.iter().position(|w| w.name == name);
        let mut b = Builder::with_capacity(objects.len(), objects.len() * 8);
        let mut positions = Vec::with_capacity(objects.len());
        for (n, o) in objects.iter().enumerate() {
            let text = |f: &str| o.get(f).and_then(Json::as_str).unwrap_or_default();
            let Some(w) = watch_of(text("watch")) else {
                return Err(format!(
                    "object {n} belongs to watch {:?}, which this version does not declare",
                    text("watch")
                ));
            };
            let spec = &manifest.watches[w];
            let (ns, name, uid) = (
                b.shared_string(text("namespace")),
                b.unique_string(text("name")),
                b.unique_string(text("uid")),
            );
            let deleting = o
                .get("deletionTimestamp")
                .and_then(Json::as_str)
                .map_or(0, |t| b.shared_string(t));
            let generation = o
                .get("generation")
                .and_then(Json::as_i64)
                .unwrap_or_default();
            positions.push(b.object(w as u32, ns, name, uid, generation, deleting));
            let fields = o.get("fields").and_then(Json::as_object);
            for path in &spec.projection.paths()[..spec.projection.visible()] {
                let path = path.to_string();
                let Some(values) = fields.and_then(|f| f.get(&path)).and_then(Json::as_array)
                else {
                    return Err(format!(
                        "field {path} of watch {} was not recorded",
                        spec.name
                    ));
                };
                for v in values {
                    push(&mut b, v);
                }
                b.end_slot();
            }
        }
        let indexes = self
            .case
            .pointer("/snapshot/indexes")
            .and_then(Json::as_array)
            .unwrap_or(&empty);
        for (w, spec) in manifest.watches.iter().enumerate() {
            for name in &spec.indexes {
                let recorded = indexes.iter().find(|ix| {
                    ix.get("watch").and_then(Json::as_str) == Some(spec.name.as_str())
                        && ix.get("name").and_then(Json::as_str) == Some(name.as_str())
                });
                let Some(buckets) = recorded
                    .and_then(|ix| ix.get("buckets"))
                    .and_then(Json::as_object)
                else {
                    return Err(format!(
                        "index {name} of watch {} was not recorded",
                        spec.name
                    ));
                };
                let entries: Vec<(&str, u32)> = buckets
                    .iter()
                    .flat_map(|(key, objs)| {
                        objs.as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(Json::as_u64)
                            .filter_map(|o| positions.get(o as usize).copied())
                            .map(move |o| (key.as_str(), o))
                    })
                    .collect();
                b.index(w as u32, name, entries);
            }
        }
        Ok(b.finish())
    }
}

fn push(b: &mut Builder, v: &Json) {
    match v {
        Json::Null => b.push_raw(kind::ABSENT, 0),
        Json::String(s) => b.push(Value::Str(s)),
        Json::Bool(x) => b.push(Value::Bool(*x)),
        Json::Number(n) => match n.as_i64() {
            Some(i) => b.push(Value::Int(i)),
            None => b.push(Value::Float(n.as_f64().unwrap_or_default())),
        },
        Json::Object(m) => match m.get("json").and_then(Json::as_str) {
            Some(text) => b.push(Value::Json(text)),
            None => b.push(Value::Json(&v.to_string())),
        },
        Json::Array(_) => b.push(Value::Json(&v.to_string())),
    }
}

/// Every case file under `dir` (recursively), in name order.
pub fn case_files(dir: &Path) -> Result<Vec<PathBuf>, RecordingError> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|source| RecordingError::Io {
            path: d.clone(),
            source,
        })?;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "json") {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// One guest's ring of case files.
struct Ring {
    dir: PathBuf,
    files: VecDeque<(PathBuf, u64)>,
    bytes: u64,
    next: u64,
    max_cases: usize,
    max_bytes: u64,
}

impl Ring {
    /// The ring in `dir`, adopting the cases already there.
    fn open(dir: PathBuf, config: &RecordConfig) -> Result<Self, RecordingError> {
        std::fs::create_dir_all(&dir).map_err(|source| RecordingError::Io {
            path: dir.clone(),
            source,
        })?;
        let mut files = VecDeque::new();
        let mut bytes = 0;
        let mut next = 0;
        for path in case_files(&dir)? {
            let size = std::fs::metadata(&path)
                .map(|m| m.len())
                .unwrap_or_default();
            if let Some(n) = path
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.parse::<u64>().ok())
            {
                next = next.max(n + 1);
            }
            bytes += size;
            files.push_back((path, size));
        }
        Ok(Ring {
            dir,
            files,
            bytes,
            next,
            max_cases: config.max_cases.max(1),
            max_bytes: config.max_bytes,
        })
    }

    /// Writes a case, then forgets the oldest ones over the bounds.
    fn write(&mut self, case: &Json) -> Result<(), RecordingError> {
        let text = format!("{case:#}\n");
        let path = self.dir.join(format!("{:010}.json", self.next));
        self.next += 1;
        std::fs::write(&path, &text).map_err(|source| RecordingError::Io {
            path: path.clone(),
            source,
        })?;
        self.bytes += text.len() as u64;
        self.files.push_back((path, text.len() as u64));
        while self.files.len() > self.max_cases
            || (self.bytes > self.max_bytes && self.files.len() > 1)
        {
            let Some((old, size)) = self.files.pop_front() else {
                break;
            };
            self.bytes -= size;
            let _ = std::fs::remove_file(old);
        }
        Ok(())
    }
}

/// Records one guest's reconciles: a queue and the worker writing them.
pub struct Recording {
    handoff: Handoff,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Recording {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Recording {
    /// Starts recording `target`'s cases under `config.dir/GUEST`; None
    /// (logged) when the guest watches Secrets and `config.secrets` is off,
    /// or its directory cannot be made.
    pub fn start(config: &RecordConfig, target: Target) -> Option<Self> {
        let guest = target.manifest.name.clone();
        let secrets = target
            .manifest
            .watches
            .iter()
            .any(|w| w.gvk.group.is_empty() && w.gvk.kind == "Secret");
        if secrets && !config.secrets {
            tracing::warn!(guest = %guest, "not recorded: it watches Secrets (--record-secrets records them)");
            return None;
        }
        let ring = match Ring::open(config.dir.join(&guest), config) {
            Ok(ring) => ring,
            Err(e) => {
                tracing::error!(guest = %guest, "not recorded: {e}");
                return None;
            }
        };
        let (handoff, cases) = handoff(QUEUE);
        let task = tokio::spawn(work(ring, target, cases));
        Some(Recording { handoff, task })
    }

    /// Hands a case over without waiting (a key already waiting is not
    /// queued twice: this newer case replaces its waiting one; a full
    /// queue drops the case, logged at debug).
    pub fn offer(&self, case: Case) {
        let key = case.key().clone();
        if self.handoff.offer(case) == Offered::Full {
            tracing::debug!(key = %key, "recording queue full; case not recorded");
        }
    }
}

async fn work(ring: Ring, target: Target, mut cases: Cases) {
    let (ring, target) = (Arc::new(Mutex::new(ring)), Arc::new(target));
    while let Some(case) = cases.next().await {
        let key = case.key().clone();
        let (ring, target) = (ring.clone(), target.clone());
        let written = tokio::task::spawn_blocking(move || {
            // An aggregate key the active guest fails on has no plan to keep.
            let Some(case) = to_json(&target, case) else {
                return Ok(());
            };
            lock(&ring).write(&case)
        })
        .await;
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(key = %key, "case not recorded: {e}"),
            Err(e) => tracing::warn!(key = %key, "recording task failed: {e}"),
        }
    }
}

fn to_json(target: &Target, case: Case) -> Option<Json> {
    let Resolved {
        request,
        env,
        key: _,
        snapshot,
        active,
    } = case.resolve(target)?;
    Some(case_json(
        &target.manifest,
        target.module.digest(),
        &request,
        &env,
        &snapshot,
        &active,
    ))
}

/// Whether a case recorded without a presence held its primary (`watch`'s
/// object named by `key`) in its snapshot: present if so, gone if not.
fn legacy_presence(case: &Json, watch: &str, key: &str) -> Presence {
    let (namespace, name) = key.split_once('/').unwrap_or(("", key));
    let held = case
        .pointer("/snapshot/objects")
        .and_then(Json::as_array)
        .is_some_and(|objects| {
            objects.iter().any(|o| {
                let at = |f: &str| o.get(f).and_then(Json::as_str).unwrap_or_default();
                at("watch") == watch && at("namespace") == namespace && at("name") == name
            })
        });
    if held {
        Presence::Present
    } else {
        Presence::Gone
    }
}

/// How one recorded case replayed.
#[derive(Debug)]
pub enum Replayed {
    /// The same plan.
    Same,
    /// Another plan: the writes and events only one side has.
    Differs {
        /// Only in the recorded plan.
        recorded_only: Vec<String>,
        /// Only in the replayed plan.
        replayed_only: Vec<String>,
    },
    /// The case cannot be replayed by this version, or its call failed.
    Error(String),
}

/// Runs `case` through `module` (described with the case's environment)
/// and compares its plan with the recorded one.
pub fn replay(module: &GuestModule, case: &RecordedCase) -> Replayed {
    let manifest = match module.manifest(&case.env) {
        Ok(m) => m,
        Err(e) => return Replayed::Error(e.to_string()),
    };
    let snapshot = match case.snapshot_for(&manifest) {
        Ok(s) => s,
        Err(why) => return Replayed::Error(why),
    };
    let (plan, _) = module.reconcile(&manifest, &case.env, &case.request, snapshot);
    let plan = match plan {
        Ok(plan) => normalise(&plan.to_json()),
        Err(e) => return Replayed::Error(e.to_string()),
    };
    match crate::shadow::plan_diff(&case.plan, &plan) {
        None => Replayed::Same,
        Some((recorded_only, replayed_only)) => Replayed::Differs {
            recorded_only,
            replayed_only,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_keeps_the_newest_cases_within_its_bounds_and_adopts_what_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let config = RecordConfig {
            dir: dir.path().to_path_buf(),
            max_cases: 3,
            max_bytes: 1 << 20,
            secrets: false,
        };
        let mut ring = Ring::open(dir.path().join("g"), &config).unwrap();
        for i in 0..5 {
            ring.write(&json!({"n": i})).unwrap();
        }
        let files = case_files(&dir.path().join("g")).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            ["0000000002.json", "0000000003.json", "0000000004.json"]
        );
        // Reopened (a restart): numbering goes on, the old cases count.
        let mut ring = Ring::open(dir.path().join("g"), &config).unwrap();
        ring.write(&json!({"n": 5})).unwrap();
        let files = case_files(&dir.path().join("g")).unwrap();
        assert_eq!(files.len(), 3);
        assert!(files[2].ends_with("0000000005.json"));
        // The byte bound: one case over it still keeps the newest.
        let tight = RecordConfig {
            max_bytes: 1,
            ..config
        };
        let mut ring = Ring::open(dir.path().join("h"), &tight).unwrap();
        ring.write(&json!({"n": 1})).unwrap();
        ring.write(&json!({"n": 2})).unwrap();
        assert_eq!(case_files(&dir.path().join("h")).unwrap().len(), 1);
    }

    #[test]
    fn values_survive_the_case_format() {
        let mut b = Builder::new();
        let (ns, name, uid) = (b.string("ml"), b.string("p"), b.string("u"));
        b.object(0, ns, name, uid, 3, 0);
        for v in [
            Value::Str("a"),
            Value::Int(-4),
            Value::Float(1.5),
            Value::Bool(true),
            Value::Json("{\"x\":1}"),
            Value::Absent,
        ] {
            b.push(v);
        }
        b.end_slot();
        let data = b.finish();
        let view = SnapshotView::new(&data).unwrap();
        let values: Vec<Json> = (0..view.field_len(0, 0))
            .map(|i| value_json(view.value(0, 0, i)))
            .collect();
        let mut again = Builder::new();
        let (ns, name, uid) = (again.string("ml"), again.string("p"), again.string("u"));
        again.object(0, ns, name, uid, 3, 0);
        for v in &values {
            push(&mut again, v);
        }
        again.end_slot();
        let again = again.finish();
        let view2 = SnapshotView::new(&again).unwrap();
        for i in 0..values.len() {
            assert_eq!(view.value(0, 0, i), view2.value(0, 0, i), "value {i}");
        }
    }
}
