//! A guest's outputs, read from the cluster: the objects it may write,
//! their live state, who asked for each, which of their changes are merely
//! the echo of our own write, and what woke each key. Owns the outputs
//! informers (an `Owns` watch), each written object's producer, the echo
//! bookkeeping ([`Echoes`]), what is known of entry-wise objects' entries
//! ([`Chains`]) and the record of wakes ([`Wakes`]); its change handler is
//! the loop's feedback edge. It never writes, never reconciles and never
//! judges a write: whether someone else's change wakes its producer is the
//! guard's to say, through [`ForeignChange`].
//!
//! # What it keeps
//! - The outputs informers: one per write rule, whole objects, so a hand
//!   edit or delete is seen.
//! - The producer of each written object: the request key that last
//!   planned it.
//! - [`Echoes`]: several of our writes to one object — an update, then its
//!   status — may be due at once.
//! - [`Keys`]: one shared copy of each output's key for all of the write
//!   path's bookkeeping.
//!
//! # The feedback edge
//! Like controller-runtime's `Owns`: a change to an output that is not our
//! own echo enqueues the key that produced it (or, for an object no key
//! has planned since this process started, every aggregate key), noting
//! in [`Wakes`] that someone else woke it — unless the [`ForeignChange`]
//! judge (the guard: the object's writes are held back by a write war)
//! says it wakes nobody. The echo of a large object the host merge-patched
//! is parsed ahead, on the blocking pool, for the write that follows. The
//! deletion of an output, by anyone, ends its claim among the host's
//! guests ([`Claims::gone`]).
//!
//! # Layout
//! - `mod.rs`: [`Outputs`], its handler, [`informer_key`], [`ForeignChange`].
//! - `echoes`: [`Echoes`]. `chains`: [`Chains`]. `wakes`: [`Wakes`],
//!   [`Written`]. `keys`: [`Keys`]. `parsed`: live objects parsed once per
//!   version.

mod chains;
mod echoes;
mod keys;
mod parsed;
mod wakes;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value as Json;

use crate::claims::Claims;
use crate::compare::controller_uid;
use crate::discovery::{Discovery, DiscoveryError};
use crate::guest::{GuestManifest, KeyMapping, ObjectKey, WriteRule};
use crate::informer::{Informer, InformerKey, InformerRegistry};
use crate::projection::whole_object;
use crate::projection::{whole_text, FieldPath, ProjectedObject};
use crate::request::RequestKey;
use crate::store::{Change, ChangeKind};
use crate::sync::lock;
use crate::workqueue::Workqueue;
use parsed::{ParsedCache, PARSE_AHEAD_BYTES};

pub use chains::{Chains, Decision};
pub use echoes::{Echoes, Settled};
pub use keys::Keys;
pub use wakes::{Wakes, Woke, Written};

/// Someone else's change of an output, as the outputs handler reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Foreign<'a> {
    /// The object changed.
    Changed,
    /// The object was deleted; `uid` is its uid, `owner` the uid of the
    /// controller owner it had.
    Deleted {
        /// The uid of the object deleted.
        uid: Option<&'a str>,
        /// The uid of its last controller owner reference.
        owner: Option<&'a str>,
    },
}

/// Judges whether someone else's change of an output wakes its producer
/// (the guard's write-war rules implement it): told of every change of an
/// output that is not the echo of our own write.
pub trait ForeignChange: Send + Sync {
    /// Someone else's `change` of `target` at `now`: whether its producer
    /// is woken (false: the object's writes are held back, and the
    /// producer comes back when the hold-back ends).
    fn wakes(&self, target: &ObjectKey, change: Foreign<'_>, now: tokio::time::Instant) -> bool;
}

/// Where an outputs cache sends someone else's change of an output.
pub struct Feedback {
    /// The guest's queue: the producer is enqueued there.
    pub queue: Workqueue<RequestKey>,
    /// Where it notes that someone else woke the producer.
    pub wakes: Arc<Wakes>,
    /// Whether the change wakes anyone at all.
    pub judge: Arc<dyn ForeignChange>,
}

/// The informer key of `rule`'s outputs cache (`plural`: its resource's,
/// from discovery): the rule's namespace, and a field selector when it
/// names exactly one object; with `sharded` (the label selector term of a
/// guest whose caches hold only the buckets led here), that term, but for
/// a rule naming its objects (shared by every key). A watch of the guest's
/// with this very key shares the informer when it asks for the whole
/// object too (see the controller's start).
pub fn informer_key(rule: &WriteRule, plural: String, sharded: Option<&str>) -> InformerKey {
    let field_selector = match rule.names.as_slice() {
        [one] => Some(format!("metadata.name={one}")),
        _ => None,
    };
    // A sharded guest's writes carry its key's bucket label, except those
    // of named objects (shared by every key, never sharded).
    let label_selector = sharded
        .filter(|_| rule.names.is_empty())
        .map(str::to_string);
    InformerKey {
        group: rule.gvk.group.clone(),
        version: rule.gvk.version.clone(),
        kind: rule.gvk.kind.clone(),
        plural,
        namespace: rule.namespace.clone(),
        label_selector,
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

/// Enqueues `producer`, or every aggregate key when the object has none
/// (an aggregate guest's outputs), noting first with `note` what woke it.
fn wake(
    q: &Workqueue<RequestKey>,
    producer: Option<RequestKey>,
    aggregate_keys: &[RequestKey],
    note: impl Fn(&RequestKey),
) {
    match producer {
        Some(k) => {
            note(&k);
            q.add(k);
        }
        None => aggregate_keys.iter().for_each(|k| {
            note(k);
            q.add(k.clone());
        }),
    }
}

impl Outputs {
    /// Acquires an informer on every write rule of `manifest` whose changes
    /// (other than our echoes, and other than those `feedback`'s judge says
    /// wake nobody) enqueue their producer on `feedback`'s queue, noting in
    /// its wakes that someone else woke it; a deleted output's claim in
    /// `claims` ends. Its bookkeeping keys objects by `keys`' shared copies.
    /// `sharded`: the bucket label term of a sharded guest's caches (see
    /// [`informer_key`]).
    pub async fn start(
        registry: &InformerRegistry,
        discovery: &Discovery,
        manifest: &GuestManifest,
        keys: Arc<Keys>,
        feedback: Feedback,
        claims: Claims,
        sharded: Option<&str>,
    ) -> Result<Self, DiscoveryError> {
        let Feedback {
            queue,
            wakes,
            judge,
        } = feedback;
        let producers: Arc<Mutex<HashMap<Arc<ObjectKey>, RequestKey>>> = Arc::default();
        let echoes = Arc::new(Echoes::sharing(keys.clone()));
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
            let key = informer_key(rule, ar.plural, sharded);
            let informer = registry.acquire(&key, &[FieldPath::whole()], &[]);
            let whole = whole_position(&informer);
            let (q, gvk) = (queue.clone(), rule.gvk.clone());
            let (producers, echoes) = (producers.clone(), echoes.clone());
            let (judge, parsed) = (judge.clone(), parsed.clone());
            let (chains, wakes) = (chains.clone(), wakes.clone());
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
                match echoes.settle(&written, cached_rv) {
                    Settled::Foreign => {}
                    Settled::Ours => {
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
                                rt.spawn_blocking(move || {
                                    parsed.get_or_parse(&written, &obj, whole)
                                });
                            }
                        }
                        return;
                    }
                    Settled::Awaited => {
                        // Our echo, which a write of the object waits for:
                        // it wakes that write's producer as the echo of its
                        // own write (never as someone else's change).
                        let producer =
                            vanished_producer.or_else(|| lock(&producers).get(&written).cloned());
                        wake(&q, producer, &aggregate_keys, |k| {
                            wakes.woken_by(
                                k,
                                &gvk,
                                &change.namespace,
                                &change.name,
                                &change.resource_version,
                            );
                        });
                        return;
                    }
                }
                // Someone else's change: what our patches knew is stale.
                chains.forget(&written);
                let now = tokio::time::Instant::now();
                let last = (change.kind == ChangeKind::Deleted)
                    .then(|| whole_object(&change.object, whole))
                    .flatten();
                let foreign = match change.kind {
                    ChangeKind::Deleted => Foreign::Deleted {
                        uid: last
                            .as_ref()
                            .and_then(|o| o.pointer("/metadata/uid"))
                            .and_then(Json::as_str),
                        owner: last.as_ref().and_then(controller_uid),
                    },
                    _ => Foreign::Changed,
                };
                if !judge.wakes(&written, foreign, now) {
                    // A write war: the other manager's writes do not wake
                    // us; the producer comes back when the hold-back ends.
                    return;
                }
                // Someone else's change wakes the producer: whatever it
                // writes now is a reaction, not a hot loop.
                let producer =
                    vanished_producer.or_else(|| lock(&producers).get(&written).cloned());
                wake(&q, producer, &aggregate_keys, |k| wakes.woken_by_other(k));
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
