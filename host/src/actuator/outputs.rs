//! A guest's outputs, as its actuator sees them: the objects it may write,
//! their live state, who asked for each, and which of their changes are
//! merely the echo of our own write. Owns the outputs informers, each
//! written object's producer, and the echo bookkeeping ([`Echoes`]); its
//! change handler is the loop's feedback edge. It never writes and never
//! reconciles.
//!
//! # What it keeps
//! - The outputs informers: one per write rule, whole objects, so a hand
//!   edit or delete is seen.
//! - The producer of each written object: the request key that last
//!   planned it.
//! - [`Echoes`]: several of our writes to one object — an update, then its
//!   status — may be due at once.
//!
//! # The feedback edge
//! Like controller-runtime's `Owns`: a change to an output that is not our
//! own echo enqueues the key that produced it (or, for an object no key
//! has planned since this process started, every aggregate key), noting
//! for the hot-loop bookkeeping that someone else woke it — except while
//! the object's writes are held back by a write war. The echo of a large
//! object the host merge-patched is parsed ahead, on the blocking pool, for
//! the write that follows. The deletion of an output, by anyone, ends its
//! claim among the host's guests ([`Claims::gone`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value as Json;

use crate::actuator::contest::{controller_uid, ContestConfig, Contests};
use crate::actuator::entries::Chains;
use crate::actuator::hotloop::HotLoops;
use crate::actuator::keys::Keys;
use crate::claims::Claims;
use crate::discovery::{Discovery, DiscoveryError};
use crate::guest::{GuestManifest, KeyMapping, ObjectKey, WriteRule};
use crate::informer::{Informer, InformerKey, InformerRegistry};
use crate::projection::{whole_object, whole_text};
use crate::projection::{FieldPath, ProjectedObject};
use crate::request::RequestKey;
use crate::store::{Change, ChangeKind};
use crate::sync::lock;
use crate::workqueue::Workqueue;

/// Where the watch echoes of our writes to one object stand.
#[derive(Debug)]
enum Echo {
    /// A write is in flight; `seen` holds the resourceVersions the outputs
    /// cache reported meanwhile ("" for a delete), `ours` those of earlier
    /// writes (in the same plan) whose echo is still to come.
    InFlight {
        /// Reported while in flight.
        seen: Vec<String>,
        /// Our earlier writes' versions.
        ours: Vec<String>,
    },
    /// The writes returned these resourceVersions, oldest first; their
    /// echoes are still to come.
    Due(Vec<String>),
}

/// Our writes whose watch echo has not been seen yet. Only equality of
/// resourceVersions is used: they are opaque, never ordered.
#[derive(Debug, Default)]
pub struct Echoes {
    /// The shared copies of the keys (see [`super::keys`]).
    keys: Arc<Keys>,
    pending: Mutex<HashMap<Arc<ObjectKey>, Echo>>,
    /// Objects some of whose entries we wrote by merge patch (owned through
    /// our `Update` entry, which a later apply does not remove).
    merged: Mutex<std::collections::HashSet<Arc<ObjectKey>>>,
    /// Writes waiting for our previous write's echo: since when. The echo
    /// wakes the producer instead of being swallowed.
    waiting: Mutex<HashMap<Arc<ObjectKey>, std::time::Instant>>,
}

impl Echoes {
    /// Echoes keyed by `keys`' shared copies.
    pub(crate) fn sharing(keys: Arc<Keys>) -> Self {
        Echoes {
            keys,
            ..Echoes::default()
        }
    }

    /// A write of `target` is about to be sent (echoes of earlier writes
    /// still due stay ours).
    pub fn begin(&self, target: &ObjectKey) {
        let mut pending = lock(&self.pending);
        let ours = match pending.remove(target) {
            Some(Echo::Due(rvs)) => rvs,
            Some(Echo::InFlight { ours, .. }) => ours,
            None => Vec::new(),
        };
        pending.insert(
            self.keys.get(target),
            Echo::InFlight {
                seen: Vec::new(),
                ours,
            },
        );
    }

    /// Notes that some entries of `target` were written by merge patch.
    pub fn merged(&self, target: &ObjectKey) {
        let mut merged = lock(&self.merged);
        if !merged.contains(target) {
            merged.insert(self.keys.get(target));
        }
    }

    /// `target` is gone: a re-created object holds no entry of our
    /// patches, and no write waits for its echo.
    pub fn forget(&self, target: &ObjectKey) {
        lock(&self.merged).remove(target);
        lock(&self.waiting).remove(target);
    }

    /// How many objects are noted as merge-patched.
    fn merged_count(&self) -> usize {
        lock(&self.merged).len()
    }

    /// Whether some entries of `target` were written by merge patch.
    pub fn is_merged(&self, target: &ObjectKey) -> bool {
        lock(&self.merged).contains(target)
    }

    /// After a full apply of an object we merge-patched: its echo wakes
    /// the producer, whose next reconcile (against the current object)
    /// removes by patch any entry our patches own and the plan dropped,
    /// which the apply leaves.
    pub fn wake_on_echo(&self, target: &ObjectKey) {
        if lock(&self.merged).contains(target) {
            lock(&self.waiting).insert(self.keys.get(target), std::time::Instant::now());
        }
    }

    /// Whether a write of `target` should wait for our previous write's
    /// echo rather than go out now: only for an object we merge-patched
    /// (deciding that write needs the live object: a full apply would not
    /// remove entries our patches own), while the echo is due, and for at
    /// most `max` (then the write goes out as an apply, as for any object).
    /// When it should, the echo wakes the producer.
    pub fn wait_for_echo(&self, target: &ObjectKey, max: std::time::Duration) -> bool {
        if !self.awaiting(target) || !lock(&self.merged).contains(target) {
            lock(&self.waiting).remove(target);
            return false;
        }
        let now = std::time::Instant::now();
        let mut waiting = lock(&self.waiting);
        let since = *waiting.entry(self.keys.get(target)).or_insert(now);
        if now.saturating_duration_since(since) > max {
            waiting.remove(target);
            return false;
        }
        true
    }

    /// Whether a write of `target` is in flight or its echo is still to
    /// come: the cache is then older than the object, and no skip may be
    /// decided on it.
    pub fn awaiting(&self, target: &ObjectKey) -> bool {
        lock(&self.pending).contains_key(target)
    }

    /// Called for every change of an output, with the resourceVersion the
    /// outputs cache now holds (None: gone). Returns true when the change
    /// needs no reconcile: it is the watch echo of one of our writes (the
    /// cache now shows exactly what a write returned), or it arrived while a
    /// write of that object was in flight — then the write's response
    /// decides (see [`Echoes::applied`]). Any other change (someone else's
    /// write, an older event, a delete we did not send) forgets our writes
    /// and must be reconciled.
    pub fn settle(&self, target: &ObjectKey, cached_rv: Option<&str>) -> bool {
        let mut pending = lock(&self.pending);
        match pending.get_mut(target) {
            Some(Echo::InFlight { seen, .. }) => {
                seen.push(cached_rv.unwrap_or_default().to_string());
                true
            }
            Some(Echo::Due(rvs)) => {
                // A deletion's echo is held as "" (see `applied`).
                let cached = cached_rv.unwrap_or_default();
                let Some(at) = rvs.iter().position(|rv| rv == cached) else {
                    pending.remove(target);
                    return false;
                };
                rvs.drain(..=at);
                if rvs.is_empty() {
                    pending.remove(target);
                    // A write was waiting for this echo: wake its producer.
                    if lock(&self.waiting).remove(target).is_some() {
                        return false;
                    }
                }
                true
            }
            None => false,
        }
    }

    /// Settles a write of `target` that returned `rv` (None: it failed;
    /// "": a delete that removed the object at once, whose echo is the
    /// watch's deletion)
    /// against what the cache reported while it was in flight, given the
    /// resourceVersion the cache holds now. Returns whether someone else
    /// changed the object meanwhile.
    pub fn applied(&self, target: &ObjectKey, rv: Option<&str>, cached_rv: Option<&str>) -> bool {
        let mut pending = lock(&self.pending);
        let (seen, mut ours) = match pending.remove(target) {
            Some(Echo::InFlight { seen, ours }) => (seen, ours),
            _ => (Vec::new(), Vec::new()),
        };
        let foreign = seen
            .iter()
            .any(|s| Some(s.as_str()) != rv && !ours.contains(s));
        // Echoes of earlier writes that came while this one was in flight
        // are settled.
        if let Some(last) = seen
            .iter()
            .rev()
            .find_map(|s| ours.iter().position(|o| o == s))
        {
            ours.drain(..=last);
        }
        if let Some(rv) = rv {
            // The echo already came, or the write changed nothing (the
            // cache holds that version): nothing to wait for.
            if !seen.iter().any(|s| s == rv) && cached_rv != Some(rv) {
                ours.push(rv.to_string());
            } else {
                ours.clear();
            }
        }
        if !ours.is_empty() {
            pending.insert(self.keys.get(target), Echo::Due(ours));
        }
        foreign
    }
}

/// A live object parsed: (its resourceVersion, the object).
type Parsed = (Arc<str>, Arc<Json>);

/// Live objects kept parsed at most.
const PARSED_CACHE: usize = 64;

/// The size of a whole object's text from which the echo of our merge
/// patch is parsed ahead; a smaller object (a child ConfigMap of a few
/// hundred bytes) is parsed only when a write needs it.
const PARSE_AHEAD_BYTES: usize = 16 * 1024;

/// Each written object's live state parsed once per version: the cache
/// keeps it as text, and a large summary is read several times per write.
#[derive(Default)]
struct ParsedCache(Mutex<HashMap<ObjectKey, Parsed>>);

impl ParsedCache {
    /// `obj` (the cached version of `target`) parsed: kept from before
    /// when that version was parsed already.
    fn get_or_parse(
        &self,
        target: &ObjectKey,
        obj: &ProjectedObject,
        at: usize,
    ) -> Option<Arc<Json>> {
        if let Some((rv, json)) = lock(&self.0).get(target) {
            if !rv.is_empty() && *rv == obj.resource_version {
                return Some(json.clone());
            }
        }
        let json = Arc::new(whole_object(obj, at)?);
        let mut parsed = lock(&self.0);
        // Bounded: a guest writing many objects keeps only recent ones.
        if parsed.len() >= PARSED_CACHE {
            parsed.clear();
        }
        parsed.insert(target.clone(), (obj.resource_version.clone(), json.clone()));
        Some(json)
    }

    fn forget(&self, target: &ObjectKey) {
        lock(&self.0).remove(target);
    }
}

/// The informer key of `rule`'s outputs cache (`plural`: its resource's,
/// from discovery): the rule's namespace, and a field selector when it
/// names exactly one object. A watch of the guest's with this very key
/// shares the informer when it asks for the whole object too (see the
/// controller's start).
pub fn informer_key(rule: &WriteRule, plural: String) -> InformerKey {
    let field_selector = match rule.names.as_slice() {
        [one] => Some(format!("metadata.name={one}")),
        _ => None,
    };
    InformerKey {
        group: rule.gvk.group.clone(),
        version: rule.gvk.version.clone(),
        kind: rule.gvk.kind.clone(),
        plural,
        namespace: rule.namespace.clone(),
        label_selector: None,
        field_selector,
    }
}

struct Output {
    rule: WriteRule,
    informer: Informer,
    /// Where the whole object sits in the informer's projection: the
    /// registry shares one informer per resource and selectors, so a guest
    /// watching the kind it writes widens the watch's projection with the
    /// whole object, after the watch's own fields.
    whole: usize,
    handler: u64,
}

/// The objects one guest writes: caches, producers and echoes.
pub struct Outputs {
    outputs: Vec<Output>,
    producers: Arc<Mutex<HashMap<Arc<ObjectKey>, RequestKey>>>,
    keys: Arc<Keys>,
    echoes: Arc<Echoes>,
    contests: Arc<Contests>,
    loops: Arc<HotLoops>,
    parsed: Arc<ParsedCache>,
    chains: Arc<Chains>,
}

impl Drop for Outputs {
    fn drop(&mut self) {
        for o in &self.outputs {
            o.informer.remove_handler(o.handler);
        }
    }
}

impl Outputs {
    /// Acquires an informer on every write rule of `manifest` whose changes
    /// (other than our echoes, and other than changes to an object whose
    /// writes are held back by a write war judged by `contests`) enqueue
    /// their producer on `queue`, telling `loops` that someone else woke
    /// it; a deleted output's claim in `claims` ends.
    pub async fn start(
        registry: &InformerRegistry,
        discovery: &Discovery,
        manifest: &GuestManifest,
        queue: &Workqueue<RequestKey>,
        contests: ContestConfig,
        loops: Arc<HotLoops>,
        claims: Claims,
    ) -> Result<Self, DiscoveryError> {
        let producers: Arc<Mutex<HashMap<Arc<ObjectKey>, RequestKey>>> = Arc::default();
        let keys: Arc<Keys> = Arc::default();
        let echoes = Arc::new(Echoes::sharing(keys.clone()));
        let contests = Arc::new(Contests::new(contests).sharing(keys.clone()));
        let parsed: Arc<ParsedCache> = Arc::default();
        let chains: Arc<Chains> = Arc::default();
        let aggregate_keys: Arc<[RequestKey]> = manifest
            .watches
            .iter()
            .filter_map(|w| match &w.keys {
                KeyMapping::Aggregate(k) => Some(RequestKey::aggregate(k.as_str())),
                _ => None,
            })
            .collect();
        let mut outputs = Vec::new();
        for rule in &manifest.writes {
            let ar = discovery.resource(&rule.gvk).await?;
            let key = informer_key(rule, ar.plural);
            let informer = registry.acquire(&key, &[FieldPath::whole()], &[]);
            let whole = whole_position(&informer);
            let (q, gvk) = (queue.clone(), rule.gvk.clone());
            let (producers, echoes) = (producers.clone(), echoes.clone());
            let (contests, parsed) = (contests.clone(), parsed.clone());
            let (chains, loops) = (chains.clone(), loops.clone());
            let (aggregate_keys, claims) = (aggregate_keys.clone(), claims.clone());
            let handler = informer.add_handler(Arc::new(move |change: &Change| {
                let written = ObjectKey {
                    gvk: gvk.clone(),
                    namespace: (!change.namespace.is_empty()).then(|| change.namespace.to_string()),
                    name: change.name.to_string(),
                };
                // Gone, whoever deleted it: nobody's object any more, what
                // our patches knew of it is stale, and its producer is
                // forgotten (woken below unless the delete was ours; it
                // is noted again when a plan names the object again).
                // Without this, every object ever written stayed in
                // these maps for the life of the process.
                let vanished_producer = (change.kind == ChangeKind::Deleted)
                    .then(|| {
                        claims.gone(&written);
                        chains.forget(&written);
                        echoes.forget(&written);
                        lock(&producers).remove(&written)
                    })
                    .flatten();
                let cached_rv = (change.kind != ChangeKind::Deleted)
                    .then_some(change.resource_version.as_ref());
                if echoes.settle(&written, cached_rv) {
                    // Our echo. A large object we merge-patch is written
                    // again soon, and that write is decided on this version
                    // (unless its entries are known: see `Chains`): parse
                    // it now, off the next reconcile's path. A small one is
                    // not: the echo's own reconcile mostly skips without
                    // parsing (`Contests::unchanged`), and at scale the
                    // next write of it finds the parse evicted.
                    if change.kind != ChangeKind::Deleted
                        && whole_text(&change.object, whole).map_or(0, str::len)
                            >= PARSE_AHEAD_BYTES
                        && echoes.is_merged(&written)
                        && !chains.holds(&written)
                    {
                        if let Ok(rt) = tokio::runtime::Handle::try_current() {
                            let (parsed, obj) = (parsed.clone(), change.object.clone());
                            rt.spawn_blocking(move || parsed.get_or_parse(&written, &obj, whole));
                        }
                    }
                    return;
                }
                // Someone else's change: what our patches knew is stale.
                chains.forget(&written);
                let now = tokio::time::Instant::now();
                if change.kind == ChangeKind::Deleted {
                    let last = whole_object(&change.object, whole);
                    let owner = last.as_ref().and_then(controller_uid);
                    contests.vanished(&written, owner, now);
                }
                if contests.held_back(&written, now).is_some() {
                    // A write war: the other manager's writes do not wake
                    // us; the producer comes back when the hold-back ends.
                    return;
                }
                // Someone else's change wakes the producer: whatever it
                // writes now is a reaction, not a hot loop.
                let producer =
                    vanished_producer.or_else(|| lock(&producers).get(&written).cloned());
                match producer {
                    Some(k) => {
                        loops.woken_by_other(&k);
                        q.add(k);
                    }
                    None => aggregate_keys.iter().for_each(|k| {
                        loops.woken_by_other(k);
                        q.add(k.clone());
                    }),
                }
            }));
            outputs.push(Output {
                rule: rule.clone(),
                informer,
                whole,
                handler,
            });
        }
        Ok(Outputs {
            outputs,
            producers,
            keys,
            echoes,
            contests,
            loops,
            parsed,
            chains,
        })
    }

    /// What is known of entry-wise objects' entries.
    pub fn chains(&self) -> &Chains {
        &self.chains
    }

    /// The outputs caches (the controller waits for them to sync).
    pub fn informers(&self) -> impl Iterator<Item = &Informer> {
        self.outputs.iter().map(|o| &o.informer)
    }

    /// The echo bookkeeping.
    pub fn echoes(&self) -> &Echoes {
        &self.echoes
    }

    /// The write-war bookkeeping.
    pub fn contests(&self) -> &Contests {
        &self.contests
    }

    /// The hot-loop bookkeeping (shared with the watches' handlers).
    pub fn loops(&self) -> &HotLoops {
        &self.loops
    }

    /// The copy of `target` the write path's bookkeeping shares.
    pub(crate) fn key(&self, target: &ObjectKey) -> Arc<ObjectKey> {
        self.keys.get(target)
    }

    /// Remembers that request `key` planned `target`: a later foreign
    /// change of `target` wakes `key`.
    pub fn produced_by(&self, target: &ObjectKey, key: &RequestKey) {
        let mut producers = lock(&self.producers);
        match producers.get_mut(target) {
            Some(k) => k.clone_from(key),
            None => {
                producers.insert(self.keys.get(target), key.clone());
            }
        }
    }

    /// Like [`Outputs::produced_by`], for a planned delete: only while the
    /// cache holds `target` (a delete of what is gone changes nothing, and
    /// its deletion event, which forgets the producer, has passed).
    pub fn deleting(&self, target: &ObjectKey, key: &RequestKey) {
        if self.cached(target).is_some() {
            self.produced_by(target, key);
        }
    }

    /// How many objects the bookkeeping keeps a record of (their producer,
    /// or that we merge-patched them): at most the objects the guest has
    /// planned that still exist, plus those a plan names before they exist.
    pub fn tracked(&self) -> usize {
        lock(&self.producers).len() + self.echoes.merged_count()
    }

    /// The objects this guest planned a write of that the cache holds
    /// now (what it wrote and still exists).
    pub fn written(&self) -> Vec<ObjectKey> {
        let planned: Vec<ObjectKey> = lock(&self.producers)
            .keys()
            .map(|k| ObjectKey::clone(k))
            .collect();
        planned
            .into_iter()
            .filter(|t| self.cached(t).is_some())
            .collect()
    }

    fn cached(&self, target: &ObjectKey) -> Option<(Arc<ProjectedObject>, usize)> {
        let output = self.outputs.iter().find(|o| {
            o.rule
                .allows(&target.gvk, target.namespace.as_deref(), &target.name)
        })?;
        let obj = output
            .informer
            .get(target.namespace.as_deref().unwrap_or(""), &target.name)?;
        Some((obj, output.whole))
    }

    /// The cached live object, if the cache has it (parsed once per
    /// version and shared).
    pub fn live(&self, target: &ObjectKey) -> Option<Arc<Json>> {
        let Some((obj, whole)) = self.cached(target) else {
            self.parsed.forget(target);
            return None;
        };
        self.parsed.get_or_parse(target, &obj, whole)
    }

    /// Drops the parsed form of `target` kept for its next write (its
    /// writes no longer read it: see [`Chains`]).
    pub fn forget_parsed(&self, target: &ObjectKey) {
        self.parsed.forget(target);
    }

    /// The cached live object's resourceVersion, without parsing it.
    pub fn live_version(&self, target: &ObjectKey) -> Option<Arc<str>> {
        self.cached(target)
            .map(|(o, _)| o.resource_version.clone())
            .filter(|rv| !rv.is_empty())
    }
}

/// Where [`FieldPath::whole`] sits in `informer`'s projection (an outputs
/// informer always projects it: [`InformerRegistry::acquire`] only widens).
fn whole_position(informer: &Informer) -> usize {
    let whole = FieldPath::whole();
    informer
        .projection()
        .paths()
        .iter()
        .position(|p| *p == whole)
        .unwrap_or(usize::MAX)
}

/// The resourceVersion of a live object.
pub fn resource_version(live: &Json) -> Option<&str> {
    live.pointer("/metadata/resourceVersion")
        .and_then(Json::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guest::Gvk;

    /// A cached whole ConfigMap at resourceVersion `rv`.
    fn cached_at(rv: &str) -> ProjectedObject {
        let obj = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "s", "namespace": "ops", "resourceVersion": rv},
            "data": {"n1": "2"}});
        let projection = crate::projection::Projection::new(vec![FieldPath::whole()], vec![]);
        projection.project(&obj, &mut crate::projection::Interner::default())
    }

    #[test]
    fn a_live_object_is_parsed_once_per_version() {
        let cache = ParsedCache::default();
        let v1 = cached_at("1");
        let a = cache.get_or_parse(&target(), &v1, 0).unwrap();
        assert_eq!(a["data"]["n1"], "2");
        let again = cache.get_or_parse(&target(), &v1, 0).unwrap();
        assert!(Arc::ptr_eq(&a, &again), "the same version is parsed once");
        let v2 = cache.get_or_parse(&target(), &cached_at("2"), 0).unwrap();
        assert!(!Arc::ptr_eq(&a, &v2));
        assert_eq!(resource_version(&v2), Some("2"));
        cache.forget(&target());
        let after = cache.get_or_parse(&target(), &cached_at("2"), 0).unwrap();
        assert!(!Arc::ptr_eq(&v2, &after), "forgotten: parsed anew");
    }

    fn target() -> ObjectKey {
        ObjectKey {
            gvk: Gvk {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
            },
            namespace: Some("ops".into()),
            name: "s".into(),
        }
    }

    #[test]
    fn an_echo_that_beats_the_apply_response_is_swallowed() {
        let e = Echoes::default();
        e.begin(&target());
        assert!(e.settle(&target(), Some("5")), "held for the response");
        assert!(!e.applied(&target(), Some("5"), Some("5")), "it was ours");
        assert!(!e.awaiting(&target()), "nothing left to wait for");
        // The next change is someone else's.
        assert!(!e.settle(&target(), Some("6")));
    }

    #[test]
    fn an_echo_after_the_response_is_swallowed_and_anything_else_is_not() {
        let e = Echoes::default();
        e.begin(&target());
        assert!(!e.applied(&target(), Some("5"), Some("4")));
        assert!(e.settle(&target(), Some("5")), "our echo");
        e.begin(&target());
        assert!(!e.applied(&target(), Some("7"), Some("4")));
        assert!(!e.settle(&target(), Some("8")), "someone else's write");
        assert!(
            !e.settle(&target(), Some("7")),
            "forgotten after a foreign change"
        );
        e.begin(&target());
        assert!(!e.applied(&target(), Some("9"), Some("4")));
        assert!(!e.settle(&target(), None), "a delete is never an echo");
    }

    #[test]
    fn a_foreign_write_during_the_apply_asks_for_another_look() {
        let e = Echoes::default();
        e.begin(&target());
        assert!(e.settle(&target(), Some("5")));
        assert!(e.applied(&target(), Some("6"), Some("5")), "5 was not ours");
        assert!(e.settle(&target(), Some("6")), "6 still is");
        // A failed apply: whatever came meanwhile is someone else's.
        e.begin(&target());
        assert!(e.settle(&target(), Some("7")));
        assert!(e.applied(&target(), None, Some("7")));
        assert!(!e.awaiting(&target()));
    }

    #[test]
    fn our_deletes_watch_event_is_its_echo_before_or_after_the_response() {
        let e = Echoes::default();
        // The deletion event beats the response.
        e.begin(&target());
        assert!(e.settle(&target(), None), "held for the response");
        assert!(!e.applied(&target(), Some(""), None), "it was ours");
        assert!(!e.awaiting(&target()));
        // The response comes first, while the cache still holds the object.
        e.begin(&target());
        assert!(!e.applied(&target(), Some(""), Some("4")));
        assert!(e.awaiting(&target()), "its echo is due");
        assert!(e.settle(&target(), None), "our deletion's echo");
        assert!(!e.awaiting(&target()));
        // A delete that left the object being deleted, at a new version.
        e.begin(&target());
        assert!(!e.applied(&target(), Some("6"), Some("5")));
        assert!(e.settle(&target(), Some("6")));
        assert!(!e.settle(&target(), None), "its later removal is not ours");
    }

    #[test]
    fn an_apply_that_changed_nothing_waits_for_no_echo() {
        let e = Echoes::default();
        e.begin(&target());
        assert!(!e.applied(&target(), Some("4"), Some("4")));
        assert!(!e.awaiting(&target()));
        assert!(
            !e.settle(&target(), Some("5")),
            "a later change is reconciled"
        );
    }
}
