//! What the controller hands over after an active reconcile, and the queue
//! it waits in: a [`Case`] (a per-object key with the snapshot and plan the
//! active guest saw, or an aggregate key by name), resolved into the
//! snapshot and active plan it stands for, through a bounded queue that
//! never makes the controller wait. Shared by the shadow and the
//! recording; it never calls the shadow and never writes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value as Json;
use tokio::sync::mpsc;

use super::compare::normalise;
use crate::guest::{Environment, GuestManifest, GuestModule, Request, SnapshotData};
use crate::relations::{guest_request, snapshot_for, WatchCache};
use crate::request::RequestKey;
use crate::sync::lock;

/// What the active guest did with one key, handed to the shadow.
pub enum Case {
    /// A per-object key: the snapshot and clock the active guest saw, and
    /// its plan (normalised, see [`normalise`]).
    Seen {
        /// The key.
        key: RequestKey,
        /// The request the active guest got (its presence the server's
        /// word at the time, not asked again).
        request: Request,
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

/// A case with what it stands for: the snapshot, the environment and the
/// active guest's plan for it (normalised).
pub struct Resolved {
    /// The key.
    pub key: RequestKey,
    /// The request the active plan was made for.
    pub request: Request,
    /// The environment the active plan was made with.
    pub env: Environment,
    /// The snapshot.
    pub snapshot: SnapshotData,
    /// The active plan, normalised.
    pub active: Json,
}

impl Case {
    /// The key reconciled.
    pub fn key(&self) -> &RequestKey {
        match self {
            Case::Seen { key, .. } | Case::Aggregate(key) => key,
        }
    }

    /// The snapshot and active plan this case stands for: a per-object
    /// case as handed over; an aggregate key's made now, by calling the
    /// active guest on a whole snapshot of the caches. None when the
    /// active guest fails on it (its own reconcile reports that), or while
    /// a cache is getting its projections back.
    pub fn resolve(self, target: &Target) -> Option<Resolved> {
        match self {
            Case::Seen {
                key,
                request,
                env,
                snapshot,
                active,
            } => Some(Resolved {
                key,
                request,
                env,
                snapshot: *snapshot,
                active,
            }),
            Case::Aggregate(key) => {
                // A cache getting its projections back (it kept identities
                // only until the shadow or recording came) would give a
                // snapshot missing fields: no case until it has them; the
                // updates bringing them back wake the key again.
                if target.caches.iter().any(|c| !c.store.holds_projections()) {
                    return None;
                }
                let env = target.env.at(crate::guest::now_ms());
                let snapshot = snapshot_for(&target.manifest, &target.caches, &key);
                let request = guest_request(&target.manifest, &key, None);
                let (plan, _) =
                    target
                        .module
                        .reconcile(&target.manifest, &env, &request, snapshot.clone());
                let active = normalise(&plan.ok()?.to_json());
                Some(Resolved {
                    key,
                    request,
                    env,
                    snapshot,
                    active,
                })
            }
        }
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

/// The sending end of a bounded queue of cases in which a key waits at
/// most once, as its newest case: [`Handoff::offer`] never waits.
pub struct Handoff {
    tx: mpsc::Sender<RequestKey>,
    waiting: Arc<Mutex<HashMap<RequestKey, Case>>>,
}

/// The receiving end of a [`Handoff`].
pub struct Cases {
    /// The keys in the order they began to wait; each one's case is in
    /// `waiting`.
    rx: mpsc::Receiver<RequestKey>,
    waiting: Arc<Mutex<HashMap<RequestKey, Case>>>,
    /// When each aggregate key was last handed out.
    aggregates: HashMap<RequestKey, tokio::time::Instant>,
    /// Aggregate keys received too soon after their previous case, and
    /// when each is due.
    deferred: HashMap<RequestKey, tokio::time::Instant>,
}

/// The least time between two cases of one aggregate key: each builds a
/// whole snapshot of the caches and calls a guest on it (at 100,000 pods,
/// tens of milliseconds), while an aggregate guest is woken by every
/// change; the case handed out after the wait is made from the caches as
/// they are then, so it covers every change it waited for.
pub const AGGREGATE_EVERY: Duration = Duration::from_secs(1);

/// What became of an offered case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offered {
    /// Queued.
    Queued,
    /// Its key was already waiting: this newer case took the waiting one's
    /// place in the queue (a per-object case carries the snapshot its
    /// reconcile saw, so the newest is the one to compare and record).
    Replaced,
    /// The queue was full: dropped.
    Full,
}

/// A queue of at most `capacity` cases.
pub fn handoff(capacity: usize) -> (Handoff, Cases) {
    let (tx, rx) = mpsc::channel(capacity);
    let waiting = Arc::new(Mutex::new(HashMap::new()));
    (
        Handoff {
            tx,
            waiting: waiting.clone(),
        },
        Cases {
            rx,
            waiting,
            aggregates: HashMap::new(),
            deferred: HashMap::new(),
        },
    )
}

impl Handoff {
    /// Queues `case` without waiting.
    pub fn offer(&self, case: Case) -> Offered {
        let key = case.key().clone();
        let mut waiting = lock(&self.waiting);
        if let Some(older) = waiting.get_mut(&key) {
            *older = case;
            return Offered::Replaced;
        }
        // Under the lock, so the receiver never finds a key without its case.
        if self.tx.try_send(key.clone()).is_err() {
            return Offered::Full;
        }
        waiting.insert(key, case);
        Offered::Queued
    }
}

impl Cases {
    /// The next case (its key may be queued again from now on); None when
    /// the sending end is gone and nothing waits. An aggregate key's case is
    /// handed out no sooner than [`AGGREGATE_EVERY`] after its previous one;
    /// until then it waits aside, so the cases behind it are not held back.
    pub async fn next(&mut self) -> Option<Case> {
        loop {
            let due = self
                .deferred
                .iter()
                .min_by_key(|(_, at)| **at)
                .map(|(key, at)| (key.clone(), *at));
            let key = match due {
                None => self.rx.recv().await?,
                Some((key, at)) => {
                    let received = tokio::select! {
                        biased;
                        () = tokio::time::sleep_until(at) => None,
                        key = self.rx.recv() => key,
                    };
                    match received {
                        Some(key) => key,
                        // Due, or nothing more will come: the waiting one.
                        None => {
                            tokio::time::sleep_until(at).await;
                            self.deferred.remove(&key);
                            key
                        }
                    }
                }
            };
            let mut waiting = lock(&self.waiting);
            if matches!(waiting.get(&key), Some(Case::Aggregate(_))) {
                let now = tokio::time::Instant::now();
                match self.aggregates.get(&key) {
                    Some(last) if now < *last + AGGREGATE_EVERY => {
                        // Left in `waiting`, so an offer of this key finds
                        // it there and it stands for every change meanwhile.
                        self.deferred.insert(key, *last + AGGREGATE_EVERY);
                        continue;
                    }
                    _ => {
                        self.aggregates.insert(key.clone(), now);
                    }
                }
            }
            if let Some(case) = waiting.remove(&key) {
                return Some(case);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_aggregate_keys_cases_are_spaced_and_one_waits_for_many_changes() {
        let (handoff, mut cases) = handoff(8);
        let key = RequestKey::aggregate("summary");
        let start = tokio::time::Instant::now();
        assert_eq!(handoff.offer(Case::Aggregate(key.clone())), Offered::Queued);
        assert!(cases.next().await.is_some());
        assert_eq!(start.elapsed(), Duration::ZERO, "the first at once");
        // Ten changes while the next case waits: one case stands for them.
        let offered: Vec<Offered> = (0..10)
            .map(|_| handoff.offer(Case::Aggregate(key.clone())))
            .collect();
        assert_eq!(offered.iter().filter(|o| **o == Offered::Queued).count(), 1);
        assert!(cases.next().await.is_some());
        assert_eq!(start.elapsed(), AGGREGATE_EVERY, "the next one spaced");
        // Another key is not held back by this one's spacing.
        let other = RequestKey::aggregate("other");
        assert_eq!(handoff.offer(Case::Aggregate(other)), Offered::Queued);
        let before = tokio::time::Instant::now();
        assert!(cases.next().await.is_some());
        assert_eq!(
            before.elapsed(),
            Duration::ZERO,
            "another key's first case at once"
        );
    }

    /// A per-object case whose plan is `plan`.
    fn seen(key: &RequestKey, plan: &str) -> Case {
        Case::Seen {
            key: key.clone(),
            request: Request {
                key: key.key.to_string(),
                watch: Some("w".into()),
                presence: Some(crate::guest::Presence::Present),
            },
            env: Environment {
                namespace: "ops".into(),
                config: Vec::new(),
                now_ms: 0,
            },
            snapshot: Box::default(),
            active: Json::from(plan),
        }
    }

    #[tokio::test]
    async fn a_newer_case_of_a_waiting_key_takes_its_place() {
        let (handoff, mut cases) = handoff(8);
        let (a, b) = (RequestKey::object(0, "ns/a"), RequestKey::object(0, "ns/b"));
        assert_eq!(handoff.offer(seen(&a, "first")), Offered::Queued);
        assert_eq!(handoff.offer(seen(&b, "b")), Offered::Queued);
        // `a` reconciled again before its first case was taken: the newer
        // snapshot and plan are what is compared and recorded.
        assert_eq!(handoff.offer(seen(&a, "second")), Offered::Replaced);
        let plans: Vec<(String, Json)> = [cases.next().await, cases.next().await]
            .into_iter()
            .flatten()
            .map(|c| match c {
                Case::Seen { key, active, .. } => (key.to_string(), active),
                Case::Aggregate(key) => (key.to_string(), Json::Null),
            })
            .collect();
        assert_eq!(
            plans,
            [
                ("ns/a".to_string(), Json::from("second")),
                ("ns/b".to_string(), Json::from("b"))
            ],
            "in the order the keys began to wait, each its newest case"
        );
        drop(handoff);
        assert!(cases.next().await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_spaced_aggregate_key_never_holds_back_the_cases_behind_it() {
        let (handoff, mut cases) = handoff(8);
        let (summary, other) = (
            RequestKey::aggregate("summary"),
            RequestKey::aggregate("other"),
        );
        let start = tokio::time::Instant::now();
        handoff.offer(Case::Aggregate(summary.clone()));
        assert!(cases.next().await.is_some());
        // `summary` again, too soon, then `other` behind it.
        handoff.offer(Case::Aggregate(summary.clone()));
        handoff.offer(Case::Aggregate(other.clone()));
        assert_eq!(cases.next().await.map(|c| c.key().clone()), Some(other));
        assert_eq!(start.elapsed(), Duration::ZERO, "`other` at once");
        // `summary` still waits: one more offer joins it, no second case.
        assert_eq!(
            handoff.offer(Case::Aggregate(summary.clone())),
            Offered::Replaced
        );
        assert_eq!(cases.next().await.map(|c| c.key().clone()), Some(summary));
        assert_eq!(start.elapsed(), AGGREGATE_EVERY, "`summary` when due");
        // Nothing else waits; with the sender gone, the end.
        drop(handoff);
        assert!(cases.next().await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_waits_once_a_full_queue_drops_and_a_taken_key_queues_again() {
        let (handoff, mut cases) = handoff(2);
        let (a, b, c) = (
            RequestKey::aggregate("a"),
            RequestKey::aggregate("b"),
            RequestKey::aggregate("c"),
        );
        assert_eq!(handoff.offer(Case::Aggregate(a.clone())), Offered::Queued);
        assert_eq!(handoff.offer(Case::Aggregate(a.clone())), Offered::Replaced);
        assert_eq!(handoff.offer(Case::Aggregate(b.clone())), Offered::Queued);
        assert_eq!(handoff.offer(Case::Aggregate(c.clone())), Offered::Full);
        assert_eq!(cases.next().await.map(|c| c.key().clone()), Some(a.clone()));
        // Taken: `a` may wait again, and `c` (dropped) was not left pending.
        assert_eq!(handoff.offer(Case::Aggregate(a)), Offered::Queued);
        assert_eq!(cases.next().await.map(|c| c.key().clone()), Some(b));
        assert_eq!(handoff.offer(Case::Aggregate(c)), Offered::Queued);
        drop(handoff);
        // `c` first: `a`, taken a moment ago, is not due yet.
        let order = [cases.next().await, cases.next().await]
            .map(|c| c.map(|c| c.key().to_string()).unwrap_or_default());
        assert_eq!(order, ["c", "a"]);
        assert!(cases.next().await.is_none());
    }
}
