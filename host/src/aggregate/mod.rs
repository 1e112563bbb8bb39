//! Incremental aggregates: one aggregate key of an `aggregate-controller`
//! guest kept up to date at the cost of the objects that changed. Owns the
//! set of objects changed since the last reconcile, each object's cached
//! contributions and diagnostics (what `map-objects` last returned for it),
//! the per-group reductions over them, and, for an entry-wise `render`,
//! every group's entry. It never writes to the cluster (the controller
//! hands the plan to the actuator) and never reads the informers except
//! through their stores.
//!
//! # One reconcile
//! The watch handlers only record changes (each object's newest projection,
//! or that it is gone) and enqueue. One reconcile of the key: map the
//! changed objects still there in guest calls over snapshots of just them
//! (at most [`MAP_BATCH`] objects per call), subtract the gone ones'
//! cached contributions (no guest call), and render the reduced groups;
//! the plan is `render`'s with every cached diagnostic appended in object
//! order. A failed map puts the changes back, and a failed render leaves
//! its groups to be rendered again, so nothing is lost.
//!
//! # Mapping ahead
//! The projections of changed objects are held here until mapped, not
//! read back from the stores: a cache whose only reader is this aggregate
//! keeps identities only (`store::Retention`). So that the initial list
//! does not hold every projection until the first reconcile,
//! [`Aggregate::map_ahead`] maps whole batches while the caches still
//! sync (no render: nothing is written before they have).
//!
//! # Entry-wise render
//! For a guest whose `render` is entry-wise (the optional `entrywise`
//! export) only the groups touched since the last reconcile are rendered,
//! the plan's promise is checked, and the apply becomes an
//! [`PlannedWrite::ApplyEntries`] carrying the frame, every entry and the
//! entries changed since the last plan handed out.
//!
//! # Cost
//! Apart from appending the cached diagnostics, nothing here is O(cached
//! objects) per change, and with an entry-wise render nothing is O(groups)
//! either.

mod contributions;
pub mod reduce;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::Value as Json;
use std::time::Duration;

use crate::guest::aggregate::{AggregateSpec, ObjectOutput};
use crate::guest::snapshot::{self, WatchView};
use crate::guest::{
    EntryWrite, Environment, GuestError, GuestErrorKind, GuestManifest, GuestModule, KeyMapping,
    PlannedEvent, PlannedWrite, ValidatedPlan,
};
use crate::projection::ProjectedObject;
use crate::relations::WatchCache;
use crate::store::{Change, ChangeKind, Handler, Retention};
use crate::sync::lock;
use contributions::Contributions;
use reduce::Reductions;

/// Objects mapped per `map-objects` call.
pub const MAP_BATCH: usize = 4096;

/// An object of a watch: (watch index, namespace, name). Sorted like a
/// snapshot's objects.
pub type ObjectId = (usize, Arc<str>, Arc<str>);

/// What one incremental reconcile did.
#[derive(Debug, Clone, Copy, Default)]
pub struct AggregateStats {
    /// Changed objects looked at.
    pub changed: usize,
    /// Of those, mapped (still cached).
    pub mapped: usize,
    /// Of those, gone (contributions subtracted, no guest call).
    pub removed: usize,
    /// Groups handed to `render`.
    pub groups: usize,
    /// Instantiation time over both guest calls.
    pub instantiate: Duration,
    /// Time inside the guest over both calls.
    pub call: Duration,
    /// The plan's requeue delay was raised to the policy's minimum.
    pub requeue_clamped: bool,
    /// `log` messages truncated or dropped over budget, both calls.
    pub log_limited: u64,
}

struct State {
    /// Each contributing object's (group, value) pairs, as added to the
    /// reductions.
    objects: HashMap<ObjectId, Contributions>,
    diagnostics: BTreeMap<ObjectId, Vec<PlannedEvent>>,
    reductions: Reductions,
    /// For an entry-wise `render`: every group's entry.
    entries: Option<Entries>,
}

/// An entry-wise render's entries (see `entrywise` in the WIT).
struct Entries {
    /// The top-level field holding them.
    field: String,
    /// Every entry; shared with the plans handed out.
    all: Arc<BTreeMap<String, String>>,
    /// The entries' size in the document (JSON, compact).
    bytes: usize,
    /// Whether a plan was handed out yet: the first one says every entry
    /// may have changed.
    handed_out: bool,
}

/// The compact JSON size of `"key":"value",`.
fn entry_bytes(key: &str, value: &str) -> usize {
    let quoted = |s: &str| serde_json::to_string(s).map_or(s.len() + 2, |q| q.len());
    quoted(key) + quoted(value) + 2
}

impl State {
    fn forget(&mut self, id: &ObjectId) {
        if let Some(old) = self.objects.remove(id) {
            for (group, value) in old.pairs() {
                self.reductions.remove(group, *value);
            }
        }
        self.diagnostics.remove(id);
    }

    fn replace(&mut self, id: ObjectId, out: ObjectOutput) {
        self.forget(&id);
        // Collected into a new vector, not in place: the guest's pairs
        // hold Strings, and an in-place collect would keep their whole
        // allocation alive for as long as the object is cached.
        let mut pairs = Vec::with_capacity(out.contributions.len());
        for (group, value) in out.contributions {
            pairs.push((self.reductions.add(&group, value), value));
        }
        if let Some(contributions) = Contributions::new(pairs) {
            self.objects.insert(id.clone(), contributions);
        }
        if !out.diagnostics.is_empty() {
            self.diagnostics.insert(id, out.diagnostics);
        }
    }
}

/// The incremental state of one guest's aggregate key.
pub struct Aggregate {
    spec: AggregateSpec,
    /// Per watch of the manifest: whether its objects are mapped.
    mapped_watches: Vec<bool>,
    /// Changed objects: the newest projection, or None when gone.
    pending: Mutex<BTreeMap<ObjectId, Option<Arc<ProjectedObject>>>>,
    state: Mutex<State>,
    /// Told when a whole batch of changes waits (see [`Aggregate::map_ahead`]).
    batch_ready: tokio::sync::Notify,
}

impl Aggregate {
    /// Empty state for `spec` (its key already checked against
    /// `manifest`). Every object a handler replays is mapped at the first
    /// reconcile.
    pub fn new(spec: AggregateSpec, manifest: &GuestManifest, entry_field: Option<String>) -> Self {
        let mapped_watches = manifest
            .watches
            .iter()
            .map(|w| matches!(&w.keys, KeyMapping::Aggregate(k) if k.as_str() == spec.key))
            .collect();
        Aggregate {
            state: Mutex::new(State {
                objects: HashMap::new(),
                diagnostics: BTreeMap::new(),
                reductions: Reductions::new(spec.reduction),
                entries: entry_field.map(|field| Entries {
                    field,
                    all: Arc::default(),
                    bytes: 0,
                    handed_out: false,
                }),
            }),
            spec,
            mapped_watches,
            pending: Mutex::new(BTreeMap::new()),
            batch_ready: tokio::sync::Notify::new(),
        }
    }

    /// The aggregate key.
    pub fn key(&self) -> &str {
        &self.spec.key
    }

    /// What watch `w`'s cache must keep of each object for this guest:
    /// identities only when this aggregate is the guest's one reader of
    /// it — every watch of `manifest` wakes only the aggregate key (no
    /// per-object reconcile builds a snapshot from any cache), `w` is
    /// mapped and indexes no field. A shadow, a recording or another user
    /// of the informer needing them restores the projections (see
    /// `informer`, "Identities only").
    pub fn retention_for(&self, manifest: &GuestManifest, w: usize) -> Retention {
        let only_this_key = manifest.watches.iter().all(
            |watch| matches!(&watch.keys, KeyMapping::Aggregate(k) if k.as_str() == self.spec.key),
        );
        let indexes = manifest
            .watches
            .get(w)
            .is_some_and(|watch| !watch.indexed_paths().is_empty());
        match only_this_key && self.maps(w) && !indexes {
            true => Retention::Identity,
            false => Retention::Projections,
        }
    }

    /// Whether watch `w`'s objects are mapped.
    pub fn maps(&self, w: usize) -> bool {
        self.mapped_watches.get(w).copied().unwrap_or(false)
    }

    /// Notes that an object of watch `w` changed (added, updated, deleted,
    /// left the selector or vanished in a relist), keeping its newest
    /// projection until it is mapped.
    pub fn record(&self, w: usize, change: &Change) {
        if !self.maps(w) {
            return;
        }
        let now = match change.kind {
            ChangeKind::Deleted => None,
            ChangeKind::Added | ChangeKind::Updated => Some(change.object.clone()),
        };
        let id = (w, change.namespace.clone(), change.name.clone());
        let mut pending = lock(&self.pending);
        pending.insert(id, now);
        if pending.len() == MAP_BATCH {
            self.batch_ready.notify_one();
        }
    }

    /// Waits until a whole batch of changes waits to be mapped (or one did
    /// since the last call).
    pub async fn batch_ready(&self) {
        self.batch_ready.notified().await;
    }

    /// `inner` (the key mapping's handler for watch `w`), recording the
    /// change first, so the key is never enqueued before its change is
    /// recorded.
    pub fn handler(self: &Arc<Self>, w: usize, inner: Handler) -> Handler {
        let this = self.clone();
        Arc::new(move |change: &Change| {
            this.record(w, change);
            inner(change);
        })
    }

    /// Objects changed and not yet reconciled.
    pub fn pending(&self) -> usize {
        lock(&self.pending).len()
    }

    /// Cached objects that contribute, and non-empty groups.
    pub fn sizes(&self) -> (usize, usize) {
        let state = lock(&self.state);
        (state.objects.len(), state.reductions.len())
    }

    /// One reconcile of the aggregate key from `caches` (one per watch of
    /// `manifest`): maps what changed, renders the groups.
    pub fn reconcile(
        &self,
        module: &GuestModule,
        manifest: &GuestManifest,
        caches: &[WatchCache],
        env: &Environment,
    ) -> (Result<ValidatedPlan, GuestError>, AggregateStats) {
        let mut stats = AggregateStats::default();
        let mut state = lock(&self.state);
        let changed = std::mem::take(&mut *lock(&self.pending));
        if let Err(e) = self.map(
            &mut state, changed, module, manifest, caches, env, &mut stats,
        ) {
            return (Err(e), stats);
        }
        self.render(&mut state, module, manifest, env, stats)
    }

    /// Maps whole batches of the changes waiting (at most `batches` of
    /// them) without rendering: while the caches sync, so that their
    /// projections are not all held until the first reconcile. A failed
    /// map puts its changes back for the reconcile.
    pub fn map_ahead(
        &self,
        module: &GuestModule,
        manifest: &GuestManifest,
        caches: &[WatchCache],
        env: &Environment,
        batches: usize,
    ) -> Result<AggregateStats, GuestError> {
        let mut stats = AggregateStats::default();
        for _ in 0..batches {
            let mut state = lock(&self.state);
            let changed = {
                let mut pending = lock(&self.pending);
                if pending.len() < MAP_BATCH {
                    break;
                }
                let rest = match pending.keys().nth(MAP_BATCH).cloned() {
                    Some(first_left) => pending.split_off(&first_left),
                    None => BTreeMap::new(),
                };
                std::mem::replace(&mut *pending, rest)
            };
            self.map(
                &mut state, changed, module, manifest, caches, env, &mut stats,
            )?;
        }
        Ok(stats)
    }

    /// Maps `changed` into `state`; on failure every one of them is put
    /// back in the pending set (a newer change recorded meanwhile wins).
    #[allow(clippy::too_many_arguments)]
    fn map(
        &self,
        state: &mut State,
        changed: BTreeMap<ObjectId, Option<Arc<ProjectedObject>>>,
        module: &GuestModule,
        manifest: &GuestManifest,
        caches: &[WatchCache],
        env: &Environment,
        stats: &mut AggregateStats,
    ) -> Result<(), GuestError> {
        stats.changed += changed.len();
        let mut present: Vec<(&ObjectId, &ProjectedObject)> = Vec::new();
        let mut gone = Vec::new();
        for (id, obj) in &changed {
            match obj {
                Some(obj) => present.push((id, obj)),
                None => gone.push(id),
            }
        }
        stats.mapped += present.len();
        stats.removed += gone.len();
        // In batches, so a guest instance never holds more than one batch
        // (the first reconcile maps every object): memory stays bounded and
        // each batch's instance is dropped before the next. The contract
        // lets the host batch as it likes (an object maps alone).
        for batch in present.chunks(MAP_BATCH) {
            let mut per_watch: Vec<Vec<&ProjectedObject>> = vec![Vec::new(); caches.len()];
            for (id, obj) in batch {
                if let Some(objects) = per_watch.get_mut(id.0) {
                    objects.push(obj);
                }
            }
            let views: Vec<WatchView<'_>> = per_watch
                .into_iter()
                .zip(caches)
                .map(|(objects, cache)| WatchView {
                    objects,
                    positions: cache.positions.clone(),
                })
                .collect();
            let data = snapshot::build(manifest, &views);
            drop(views);
            let (result, call) = module.map_objects(manifest, env, data);
            stats.instantiate += call.instantiate;
            stats.call += call.call;
            stats.log_limited += call.log_limited;
            match result {
                Ok(outputs) => {
                    for ((id, _), out) in batch.iter().zip(outputs) {
                        state.replace((*id).clone(), out);
                    }
                }
                Err(e) => {
                    // The next reconcile maps them all again (mapping an
                    // object again replaces what it contributed); a change
                    // recorded since is newer and stays.
                    drop(present);
                    drop(gone);
                    let mut pending = lock(&self.pending);
                    for (id, obj) in changed {
                        pending.entry(id).or_insert(obj);
                    }
                    return Err(e);
                }
            }
        }
        for id in gone {
            state.forget(id);
        }
        Ok(())
    }

    /// Renders the groups touched (entry-wise) or all of them.
    fn render(
        &self,
        state: &mut State,
        module: &GuestModule,
        manifest: &GuestManifest,
        env: &Environment,
        mut stats: AggregateStats,
    ) -> (Result<ValidatedPlan, GuestError>, AggregateStats) {
        let touched = state.reductions.take_touched();
        let groups = match state.entries {
            // Entry-wise: only the groups that changed are rendered.
            Some(_) => touched
                .iter()
                .filter_map(|k| state.reductions.group(k))
                .collect(),
            None => state.reductions.groups(),
        };
        stats.groups = groups.len();
        let (result, call) = module.render(manifest, env, &groups);
        stats.instantiate += call.instantiate;
        stats.call += call.call;
        stats.log_limited += call.log_limited;
        stats.requeue_clamped = call.requeue_clamped;
        let limits = module.limits(&manifest.name);
        let max_events = limits.max_plan_events;
        let result = result.and_then(|mut plan| {
            plan.events
                .extend(state.diagnostics.values().flatten().cloned());
            // The whole plan, diagnostics included, within the event cap,
            // as the whole-snapshot path's plan would have to be.
            if plan.events.len() > max_events {
                let e = crate::guest::PlanError::TooLarge {
                    what: "events",
                    found: plan.events.len(),
                    max: max_events,
                    limit: "maxPlanEvents",
                };
                return Err(GuestError {
                    guest: manifest.name.clone(),
                    kind: crate::guest::GuestErrorKind::Plan(e),
                });
            }
            Ok(plan)
        });
        // Last: taking the entries is the only step that changes state, and
        // it does so only when it succeeds.
        let result = match (&mut state.entries, result) {
            (Some(entries), Ok(plan)) => entries
                .take(plan, &touched, &groups, limits.max_plan_bytes)
                .map_err(|kind| GuestError {
                    guest: manifest.name.clone(),
                    kind,
                }),
            (_, result) => result,
        };
        if result.is_err() {
            // Rendered again next time: nothing a failed render saw is lost.
            state.reductions.touch(touched);
        }
        (result, stats)
    }
}

impl Entries {
    /// Takes the plan of `render` over the `given` groups (the `touched`
    /// ones that are not empty, sorted by key): checks it keeps the entry-wise promise, updates every entry
    /// of a touched group, and returns the plan with its apply as an
    /// [`PlannedWrite::ApplyEntries`] of the whole document.
    fn take(
        &mut self,
        mut plan: ValidatedPlan,
        touched: &BTreeSet<Arc<str>>,
        given: &[crate::guest::aggregate::Group],
        max_bytes: usize,
    ) -> Result<ValidatedPlan, GuestErrorKind> {
        let field = self.field.clone();
        let broken = |why: String| {
            GuestErrorKind::Aggregate(format!(
                "render is not entry-wise over {field:?} as the guest declared: {why}"
            ))
        };
        let (target, mut frame) = match std::mem::take(&mut plan.writes).as_slice() {
            [PlannedWrite::Apply { target, doc }] => (target.clone(), doc.clone()),
            other => {
                return Err(broken(format!(
                    "it returned {} writes, not one apply",
                    other.len()
                )))
            }
        };
        let rendered = match frame.as_object_mut().and_then(|o| o.remove(&field)) {
            None | Some(Json::Null) => serde_json::Map::new(),
            Some(Json::Object(m)) => m,
            Some(_) => return Err(broken(format!("{field} is not a map"))),
        };
        let mut fresh = BTreeMap::new();
        for (k, v) in rendered {
            let Json::String(v) = v else {
                return Err(broken(format!("entry {k:?} is not a string")));
            };
            if given.binary_search_by(|g| g.key.as_str().cmp(&k)).is_err() {
                return Err(broken(format!(
                    "entry {k:?} is not the key of a group it was given"
                )));
            }
            fresh.insert(k, v);
        }
        // The whole document must fit as a rendered one would have to.
        let frame_bytes = serde_json::to_string(&frame).map_or(0, |t| t.len());
        let mut bytes = self.bytes;
        for k in touched {
            let old = self.all.get(k.as_ref()).map(|v| entry_bytes(k, v));
            let new = fresh.get(k.as_ref()).map(|v| entry_bytes(k, v));
            bytes = bytes.saturating_sub(old.unwrap_or(0)) + new.unwrap_or(0);
        }
        let found = frame_bytes + field.len() + 5 + bytes;
        if found > max_bytes {
            return Err(GuestErrorKind::Plan(crate::guest::PlanError::TooLarge {
                what: "bytes",
                found,
                max: max_bytes,
                limit: "maxPlanBytes",
            }));
        }
        self.bytes = bytes;
        let all = Arc::make_mut(&mut self.all);
        let mut changed = Vec::new();
        for k in touched {
            let new = fresh.remove(k.as_ref());
            if all.get(k.as_ref()) == new.as_ref() {
                continue;
            }
            match &new {
                Some(v) => all.insert(k.to_string(), v.clone()),
                None => all.remove(k.as_ref()),
            };
            changed.push((k.to_string(), new));
        }
        let complete = !std::mem::replace(&mut self.handed_out, true);
        plan.writes = vec![PlannedWrite::ApplyEntries {
            target,
            entries: Arc::new(EntryWrite {
                field,
                frame,
                all: self.all.clone(),
                changed,
                complete,
            }),
        }];
        Ok(plan)
    }
}

#[cfg(test)]
mod tests;
