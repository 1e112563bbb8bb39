//! The write-war rule against a model of the API server: random
//! interleavings of our applies and deletes and their answers, watch events
//! delivered late, twice or out of date, cache reads at any point, and
//! other field managers' applies, updates, creates and deletes. A war (or
//! any take-back) is declared only when another writer took something
//! back, naming it; a writer that keeps taking back is met with a war
//! within the documented bound.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use serde_json::json;

use super::tests::{target, OURS};
use super::*;

/// The other field managers of the model.
const OTHERS: [&str; 2] = ["rival", "kubectl-patch"];
/// The field our applies set (`data.k`), and one they never set.
const OUR_FIELD: &str = "k";
const OTHER_FIELD: &str = "other";

/// A model time (ms since the start) as the API server writes timestamps:
/// RFC 3339 to the second.
fn timestamp(ms: u64) -> String {
    let s = ms / 1000;
    format!(
        "2026-12-01T{:02}:{:02}:{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// One managedFields entry: who owns which `data` keys, since when.
#[derive(Debug, Clone, PartialEq)]
struct Managed {
    manager: &'static str,
    apply: bool,
    time: u64,
    fields: BTreeSet<&'static str>,
}

/// The object as the server stores it.
#[derive(Debug, Clone, PartialEq)]
struct Obj {
    uid: u64,
    rv: u64,
    created: u64,
    data: BTreeMap<&'static str, String>,
    managed: Vec<Managed>,
}

impl Obj {
    fn uid(&self) -> String {
        format!("uid-{}", self.uid)
    }

    fn json(&self) -> Json {
        let managed: Vec<Json> = self
            .managed
            .iter()
            .map(|m| {
                let fields: serde_json::Map<String, Json> = m
                    .fields
                    .iter()
                    .map(|f| (format!("f:{f}"), json!({})))
                    .collect();
                json!({"manager": m.manager,
                    "operation": if m.apply { "Apply" } else { "Update" },
                    "time": timestamp(m.time),
                    "fieldsV1": {"f:data": fields}})
            })
            .collect();
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "summary", "namespace": "ops", "uid": self.uid(),
                "resourceVersion": self.rv.to_string(),
                "creationTimestamp": timestamp(self.created),
                "managedFields": managed},
            "data": self.data})
    }
}

/// A watch event, as the server sends them (in order).
#[derive(Debug, Clone)]
enum Event {
    Put(Obj),
    Deleted(Obj),
}

/// The API server: one object, uids and resourceVersions handed out in
/// order, every change a watch event.
#[derive(Debug, Default)]
struct Server {
    rv: u64,
    uids: u64,
    obj: Option<Obj>,
    events: Vec<Event>,
}

impl Server {
    /// A write by `manager` of `fields`: server-side apply (forced; it
    /// creates an absent object) when `apply`, else an update (a patch of
    /// an existing object), or, when `create`, a create (of an absent
    /// object only). Returns the object's uid and new resourceVersion, and
    /// whether it created the object; None when nothing was written.
    fn write(
        &mut self,
        manager: &'static str,
        apply: bool,
        fields: &[(&'static str, &str)],
        create: bool,
        now: u64,
    ) -> Option<(String, String, bool)> {
        let creates = self.obj.is_none();
        let refused = if create { !creates } else { creates && !apply };
        if refused {
            return None;
        }
        let obj = self.obj.get_or_insert_with(|| {
            self.uids += 1;
            Obj {
                uid: self.uids,
                rv: 0,
                created: now,
                data: BTreeMap::new(),
                managed: Vec::new(),
            }
        });
        let keys: BTreeSet<&'static str> = fields.iter().map(|(k, _)| *k).collect();
        for (k, v) in fields {
            obj.data.insert(k, (*v).to_string());
        }
        for m in &mut obj.managed {
            if m.manager != manager {
                m.fields.retain(|f| !keys.contains(f));
            }
        }
        match obj.managed.iter_mut().find(|m| m.manager == manager) {
            Some(m) => {
                if apply {
                    m.fields = keys;
                } else {
                    m.fields.extend(keys);
                }
                m.apply = apply;
                m.time = now;
            }
            None => obj.managed.push(Managed {
                manager,
                apply,
                time: now,
                fields: keys,
            }),
        }
        obj.managed.retain(|m| !m.fields.is_empty());
        self.rv += 1;
        obj.rv = self.rv;
        self.events.push(Event::Put(obj.clone()));
        Some((obj.uid(), obj.rv.to_string(), creates))
    }

    /// A delete, with a uid precondition when `uid` is given: the uid
    /// deleted and its last resourceVersion, or None (not found, or the
    /// precondition failed).
    fn delete(&mut self, uid: Option<&str>) -> Option<(String, u64)> {
        let obj = self.obj.as_ref()?;
        if uid.is_some_and(|u| u != obj.uid()) {
            return None;
        }
        let mut obj = self.obj.take()?;
        let last = obj.rv;
        self.rv += 1;
        obj.rv = self.rv;
        self.events.push(Event::Deleted(obj.clone()));
        Some((obj.uid(), last))
    }
}

/// What another field manager does.
#[derive(Debug, Clone, Copy)]
enum Foreign {
    /// Force-applies our field.
    ApplyOurs(usize),
    /// Updates our field (a JSON or merge patch: operation Update).
    UpdateOurs(usize),
    /// Applies a field we never set.
    ApplyOther(usize),
    /// Creates the object if it is absent.
    Create(usize),
    /// Deletes the object.
    Delete,
}

/// One step of an interleaving.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// The guest wants `data.k` = "a" or "b": our apply, decided on the
    /// cache as it is (held back, skipped, judged, sent).
    Apply(bool),
    /// The guest wants the object gone (pinned to the cached uid or not).
    Delete(bool),
    /// The answer to our write in flight arrives.
    Answer,
    /// The next watch event arrives.
    Deliver,
    /// The last delivered event arrives again (a relist, say).
    Duplicate,
    /// An older event arrives again: the cache goes back in time.
    Stale(usize),
    /// Time passes.
    Advance(u64),
    /// Another field manager writes.
    Other(Foreign),
}

/// Which rule a verdict came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Over {
    Fields,
    Existence,
    Removal,
}

/// Our write whose answer has not arrived yet.
#[derive(Debug)]
enum InFlight {
    Apply(String, String),
    /// The uid deleted and the version of the object the delete was
    /// decided on or, newer, the one the answer returned.
    Delete(Option<(String, u64)>),
}

/// The host around the rule: an outputs cache fed by the watch, and the
/// actuator's calls into [`Contests`].
struct Host {
    contests: Contests,
    server: Server,
    /// The cache: the object of the last event delivered.
    cache: Option<Obj>,
    /// Events delivered in order so far.
    delivered: usize,
    /// The last event delivered (in order or not).
    last: Option<usize>,
    in_flight: Option<InFlight>,
    start: Instant,
    ms: u64,
    /// Every verdict the rule gave: rule, verdict, manager named.
    verdicts: Vec<(Over, Verdict, String)>,
    /// Foreign writes that changed our field (manager), re-created the
    /// object (manager), deleted it.
    took_fields: Vec<&'static str>,
    created: Vec<&'static str>,
    deletions: usize,
    /// Every foreign write's manager.
    wrote_any: Vec<&'static str>,
}

impl Host {
    fn new(config: ContestConfig) -> Self {
        Host {
            contests: Contests::new(config),
            server: Server::default(),
            cache: None,
            delivered: 0,
            last: None,
            in_flight: None,
            start: Instant::now(),
            ms: 0,
            verdicts: Vec::new(),
            took_fields: Vec::new(),
            created: Vec::new(),
            deletions: 0,
            wrote_any: Vec::new(),
        }
    }

    /// A host that took `steps` from the start.
    fn ran(steps: Vec<Step>) -> Self {
        let mut host = Host::new(ContestConfig::default());
        for step in steps {
            host.step(step);
        }
        host
    }

    fn now(&self) -> Instant {
        self.start + Duration::from_millis(self.ms)
    }

    fn wars(&self) -> usize {
        self.verdicts
            .iter()
            .filter(|v| matches!(v.1, Verdict::War { .. }))
            .count()
    }

    /// Records a verdict; true when it is a war (the write is held back).
    fn judged(&mut self, over: Over, verdict: Option<(Verdict, String)>) -> bool {
        let Some((verdict, other)) = verdict else {
            return false;
        };
        let war = matches!(verdict, Verdict::War { .. });
        self.verdicts.push((over, verdict, other));
        war
    }

    fn step(&mut self, step: Step) {
        let now = self.now();
        match step {
            Step::Apply(b) => self.apply(if b { "b" } else { "a" }),
            Step::Delete(pinned) => self.delete(pinned),
            Step::Answer => match self.in_flight.take() {
                Some(InFlight::Apply(uid, rv)) => {
                    self.contests.wrote(&target(), Some(&uid), Some(&rv), now);
                    self.contests.applied(&target(), false, &rv);
                }
                Some(InFlight::Delete(Some((uid, rv)))) => {
                    let rv = rv.to_string();
                    self.contests.deleted(&target(), Some(&uid), Some(&rv), now);
                }
                Some(InFlight::Delete(None)) | None => {}
            },
            Step::Deliver => {
                if self.delivered < self.server.events.len() {
                    self.delivered += 1;
                    self.deliver(self.delivered - 1);
                }
            }
            Step::Duplicate => {
                if let Some(i) = self.last {
                    self.deliver(i);
                }
            }
            Step::Stale(i) => {
                if self.delivered > 0 {
                    self.deliver(i % self.delivered);
                }
            }
            Step::Advance(ms) => self.ms += ms,
            Step::Other(foreign) => self.foreign(foreign),
        }
    }

    /// The watch delivers event `i`: the cache takes it; a deletion is
    /// told to the rule (every one, our own echoes included).
    fn deliver(&mut self, i: usize) {
        self.last = Some(i);
        match self.server.events[i].clone() {
            Event::Put(obj) => self.cache = Some(obj),
            Event::Deleted(obj) => {
                self.cache = None;
                let uid = obj.uid();
                self.contests
                    .vanished(&target(), Some(&uid), None, self.now());
            }
        }
    }

    /// Delivers every event still to come, and the newest once more: the
    /// cache is current.
    fn catch_up(&mut self) {
        while self.delivered < self.server.events.len() {
            self.step(Step::Deliver);
        }
        if let Some(newest) = self.server.events.len().checked_sub(1) {
            if self.last != Some(newest) {
                self.deliver(newest);
            }
        }
    }

    fn apply(&mut self, value: &str) {
        if self.in_flight.is_some() {
            return;
        }
        let (t, now) = (target(), self.now());
        if self.contests.held_back(&t, now).is_some() {
            return;
        }
        let desired = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "summary", "namespace": "ops"}, "data": {OUR_FIELD: value}});
        match self.cache.as_ref().map(Obj::json) {
            Some(live) => {
                if crate::compare::contains(&live, &desired) {
                    return;
                }
                let verdict = self.contests.retaken(&t, &live, OURS, false, now);
                if self.judged(Over::Fields, verdict) {
                    return;
                }
            }
            None => {
                let verdict = self.contests.removed(&t, None, now);
                if self.judged(Over::Removal, verdict) {
                    return;
                }
            }
        }
        self.contests.sets(&t, false, &desired);
        let (uid, rv, _) = self
            .server
            .write(OURS, true, &[(OUR_FIELD, value)], false, self.ms)
            .expect("an apply always writes");
        self.in_flight = Some(InFlight::Apply(uid, rv));
    }

    fn delete(&mut self, pinned: bool) {
        if self.in_flight.is_some() {
            return;
        }
        let (t, now) = (target(), self.now());
        let Some(live) = self.cache.as_ref().map(Obj::json) else {
            return;
        };
        let uid = live.pointer("/metadata/uid").and_then(Json::as_str);
        if self.contests.held_back(&t, now).is_some() || self.contests.ours_deleted(&t, uid) {
            return;
        }
        let verdict = self.contests.recreated(&t, &live, OURS, now);
        if self.judged(Over::Existence, verdict) {
            return;
        }
        let decided_on = self.cache.as_ref().map_or(0, |o| o.rv);
        let deleted = self
            .server
            .delete(uid.filter(|_| pinned))
            .map(|(uid, answered)| (uid, answered.max(decided_on)));
        self.in_flight = Some(InFlight::Delete(deleted));
    }

    fn foreign(&mut self, foreign: Foreign) {
        let ms = self.ms;
        let (who, apply, field, create) = match foreign {
            Foreign::ApplyOurs(m) => (OTHERS[m % OTHERS.len()], true, OUR_FIELD, false),
            Foreign::UpdateOurs(m) => (OTHERS[m % OTHERS.len()], false, OUR_FIELD, false),
            Foreign::ApplyOther(m) => (OTHERS[m % OTHERS.len()], true, OTHER_FIELD, false),
            Foreign::Create(m) => (OTHERS[m % OTHERS.len()], false, OUR_FIELD, true),
            Foreign::Delete => {
                if self.server.delete(None).is_some() {
                    self.deletions += 1;
                }
                return;
            }
        };
        let value = format!("{who}-{ms}");
        let Some((_, _, created)) = self
            .server
            .write(who, apply, &[(field, &value)], create, ms)
        else {
            return;
        };
        self.wrote_any.push(who);
        if field == OUR_FIELD || created {
            self.took_fields.push(who);
        }
        if created {
            self.created.push(who);
        }
    }

    /// Every verdict answers a foreign write that took something back:
    /// no more of each kind than such writes, each naming a manager that
    /// made one (of our fields), or that wrote the object (a re-creation),
    /// or [`DELETER`] (a deletion).
    fn check_verdicts(&self) -> Result<(), TestCaseError> {
        let of = |over: Over| self.verdicts.iter().filter(move |v| v.0 == over);
        for (over, writers, n) in [
            (Over::Fields, &self.took_fields, self.took_fields.len()),
            (Over::Existence, &self.wrote_any, self.created.len()),
        ] {
            prop_assert!(
                of(over).count() <= n,
                "{over:?}: {:?} for {n} foreign writes",
                of(over).collect::<Vec<_>>()
            );
            for (_, _, who) in of(over) {
                prop_assert!(
                    writers.iter().any(|w| w == who),
                    "{over:?} names {who:?}, which wrote nothing of that"
                );
            }
        }
        prop_assert!(
            of(Over::Removal).count() <= self.deletions,
            "removals {:?} for {} foreign deletions",
            of(Over::Removal).collect::<Vec<_>>(),
            self.deletions
        );
        for (_, _, who) in of(Over::Removal) {
            prop_assert_eq!(who.as_str(), DELETER);
        }
        Ok(())
    }
}

fn foreign() -> impl Strategy<Value = Foreign> {
    prop_oneof![
        (0..2usize).prop_map(Foreign::ApplyOurs),
        (0..2usize).prop_map(Foreign::UpdateOurs),
        (0..2usize).prop_map(Foreign::ApplyOther),
        (0..2usize).prop_map(Foreign::Create),
        Just(Foreign::Delete),
    ]
}

/// Steps of our own and of the watch only.
fn ours() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => any::<bool>().prop_map(Step::Apply),
        3 => any::<bool>().prop_map(Step::Delete),
        4 => Just(Step::Answer),
        4 => Just(Step::Deliver),
        1 => Just(Step::Duplicate),
        1 => (0..64usize).prop_map(Step::Stale),
        2 => (0..400u64).prop_map(Step::Advance),
    ]
}

/// Any step, another manager's writes among them.
fn any_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => ours(),
        1 => foreign().prop_map(Step::Other),
    ]
}

/// Delivery noise: events late, twice, out of date, and a little time.
fn noise() -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec(
        prop_oneof![
            Just(Step::Deliver),
            Just(Step::Duplicate),
            (0..64usize).prop_map(Step::Stale),
            (0..60u64).prop_map(Step::Advance),
        ],
        0..4,
    )
}

/// A writer that keeps taking back what we write.
#[derive(Debug, Clone, Copy)]
enum Rival {
    /// Force-applies our field after each of our applies.
    Applier(usize),
    /// Updates our field after each of our applies.
    Patcher(usize),
    /// Re-creates what we delete.
    Recreator(usize),
    /// Deletes what we create.
    Deleter,
}

fn rival() -> impl Strategy<Value = Rival> {
    prop_oneof![
        (0..2usize).prop_map(Rival::Applier),
        (0..2usize).prop_map(Rival::Patcher),
        (0..2usize).prop_map(Rival::Recreator),
        Just(Rival::Deleter),
    ]
}

/// One round against a rival: our write, its answer and echo in any
/// order with noise around, the rival's take-back soon after, then a cache
/// that has caught up (the take-back's event is what wakes our next write).
#[derive(Debug, Clone)]
struct Round {
    answer_first: bool,
    before: Vec<Step>,
    after: Vec<Step>,
}

fn round() -> impl Strategy<Value = Round> {
    (any::<bool>(), noise(), noise()).prop_map(|(answer_first, before, after)| Round {
        answer_first,
        before,
        after,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Whatever the order of our writes, their answers, watch events (late,
    /// twice, out of date) and cache reads: with nobody else writing, the
    /// rule never sees a take-back.
    #[test]
    fn no_take_back_and_no_war_without_another_writer(
        steps in proptest::collection::vec(ours(), 1..80)
    ) {
        let host = Host::ran(steps);
        prop_assert!(host.verdicts.is_empty(), "verdicts {:?}", host.verdicts);
    }

    /// With other managers writing too, every take-back (and so every war)
    /// answers a foreign write that took something back, and names its
    /// writer.
    #[test]
    fn take_backs_and_wars_only_answer_another_writers_take_backs(
        steps in proptest::collection::vec(any_step(), 1..120)
    ) {
        Host::ran(steps).check_verdicts()?;
    }

    /// A writer taking back each of our writes within
    /// `ContestConfig::react`, whatever the watch delivers meanwhile: a war
    /// on the `flips`-th take-back, naming it.
    #[test]
    fn a_writer_that_keeps_taking_back_is_met_with_a_war_within_the_bound(
        rival in rival(),
        rounds in proptest::collection::vec(round(), 4),
    ) {
        let config = ContestConfig::default();
        let mut host = Host::new(config);
        let (who, step) = match rival {
            Rival::Applier(m) => (OTHERS[m], Step::Apply(false)),
            Rival::Patcher(m) => (OTHERS[m], Step::Apply(false)),
            Rival::Recreator(m) => (OTHERS[m], Step::Delete(false)),
            Rival::Deleter => (DELETER, Step::Apply(false)),
        };
        if let Rival::Recreator(m) = rival {
            host.step(Step::Other(Foreign::Create(m)));
            host.catch_up();
        }
        let take_back = match rival {
            Rival::Applier(m) => Foreign::ApplyOurs(m),
            Rival::Patcher(m) => Foreign::UpdateOurs(m),
            Rival::Recreator(m) => Foreign::Create(m),
            Rival::Deleter => Foreign::Delete,
        };
        let mut war_at = None;
        for (i, round) in rounds.iter().enumerate() {
            host.step(step);
            if host.wars() > 0 {
                war_at = Some(i);
                break;
            }
            prop_assert!(host.in_flight.is_some(), "round {i}: our write was sent");
            if round.answer_first {
                host.step(Step::Answer);
            }
            for s in &round.before {
                host.step(*s);
            }
            host.step(Step::Answer);
            host.step(Step::Other(take_back));
            for s in &round.after {
                host.step(*s);
            }
            host.catch_up();
            host.step(Step::Advance(50));
        }
        prop_assert_eq!(war_at, Some(config.flips as usize), "verdicts {:?}", host.verdicts);
        let (_, _, named) = host.verdicts.last().unwrap();
        prop_assert_eq!(named.as_str(), who);
        host.check_verdicts()?;
    }
}
