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
//! twice: the newer case replaces the waiting one); when it is full the case is counted `skipped`, never waited
//! for, so a slow shadow never delays the active guest. Plans are compared
//! normalised: writes and events as multisets, object keys sorted.

mod case;
mod compare;
mod report;
pub mod verdict;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value as Json;

use crate::guest::{GuestManifest, GuestModule, PlannedWrite};
use crate::metrics::{Metrics, ShadowLabels};
use crate::sync::lock;

pub use case::{handoff, Case, Cases, Handoff, Offered, Resolved, Target, AGGREGATE_EVERY};
use compare::{canonical, diff, Diff};
pub use compare::{normalise, plan_diff};
use report::Report;

/// Cases waiting for the shadow, per guest.
const QUEUE: usize = 256;
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

/// The running shadow of one active controller: a queue and its worker.
pub struct Shadow {
    spec: ShadowSpec,
    handoff: Handoff,
    metrics: Arc<Metrics>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Shadow {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Shadow {
    /// Starts the worker comparing `spec` with `target`.
    pub fn start(spec: ShadowSpec, target: Target, metrics: Arc<Metrics>) -> Self {
        let (handoff, cases) = handoff(QUEUE);
        let task = tokio::spawn(work(spec.clone(), target, cases, metrics.clone()));
        Shadow {
            spec,
            handoff,
            metrics,
            task,
        }
    }

    /// The spec (module, manifest, report).
    pub fn spec(&self) -> &ShadowSpec {
        &self.spec
    }

    /// Hands a case over without waiting: a key already waiting is not
    /// queued again (this newer case replaces its waiting one); a full
    /// queue counts the case `skipped`.
    pub fn offer(&self, case: Case) {
        if self.handoff.offer(case) == Offered::Full {
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

async fn work(spec: ShadowSpec, target: Target, mut cases: Cases, metrics: Arc<Metrics>) {
    let target = Arc::new(target);
    let mut last_log: Option<tokio::time::Instant> = None;
    let mut unlogged = 0u64;
    while let Some(case) = cases.next().await {
        let key = case.key().clone();
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

fn compare(spec: &ShadowSpec, target: &Target, case: Case) -> Compared {
    // The active version failing on this snapshot leaves nothing to
    // compare with (its own reconcile reports it).
    let Some(Resolved {
        key: _,
        request,
        env,
        snapshot,
        active,
    }) = case.resolve(target)
    else {
        return Compared::Same;
    };
    let (plan, _) = spec
        .module
        .reconcile(&spec.manifest, &env, &request, snapshot);
    let plan = match plan {
        Ok(plan) => plan,
        Err(e) => return Compared::Error(e.to_string()),
    };
    let printed = plan.to_json();
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
