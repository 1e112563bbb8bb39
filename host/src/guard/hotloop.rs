//! Hot loops: a key whose reconciles are woken by the echo of its own
//! previous write, and write again each time. Owns, per key, the echoes of
//! its last writes, its streak of echo-woken writing reconciles and the
//! hold-back a hot loop leads to. It never sends a request, never enqueues
//! and never decides what to write: the handlers record what woke a key
//! ([`Wakes`]), which it reads when the key's reconcile begins, and the
//! actuator tells it what the reconcile wrote.
//!
//! # Why
//! A guest that writes something different on every reconcile (a
//! `lastSyncTime = now()` status, a counter, the object's own
//! resourceVersion echoed into status) never converges: each write's watch
//! echo wakes the key, whose next plan differs again. No framework can see
//! this, the host can: it knows which write each key sent (object and the
//! resourceVersion it produced) and which watch events woke the key's next
//! reconcile.
//!
//! # Rules
//! - `writes` consecutive reconciles within `window` that were woken only
//!   by echoes of the key's own writes and changed an object again are a
//!   hot loop: the key is not reconciled for a back-off, and the caller
//!   records a Warning event and a metric. The back-off doubles per hot
//!   loop resumed within `window` of the last hold-back's end (one such
//!   reconcile resumes it), up to `max_backoff`.
//! - A reconcile that writes nothing (its plan was a no-op: the guest
//!   converged) ends the streak, and so does one woken by anyone else's
//!   change (a person's edit, another controller, a foreign change of an
//!   output): reacting is not looping.
//! - A wake the watches did not report (a requeue, a retry, a resync)
//!   neither counts nor ends it, and neither does a reconcile whose writes
//!   were all held back (a write war, or a write waiting for the echo of
//!   the last one): it did not converge, it was not let write.
//! - A write whose answer is a version the key wrote before changed nothing
//!   and is not counted.
//! - Echoes and wakes are compared by object (group, kind, namespace, name)
//!   and resourceVersion only, against the key's last writes (up to
//!   `MAX_ECHOES` of the current streak), not only its latest: under load
//!   an echo arrives after the next reconcile began, and that reconcile's
//!   successor is woken by the echo of a write already superseded. It is
//!   still the key's own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::backoff::Backoff;
use crate::guest::ObjectKey;
use crate::outputs::{Wakes, Written};
use crate::request::RequestKey;
use crate::sync::lock;

/// Keys remembered at most (those that wrote lately, or are held back).
const MAX_KEYS: usize = 10_000;

/// Writes of one key whose echoes are recognised as its own, at most (the
/// latest ones).
const MAX_ECHOES: usize = 16;

/// When echo-woken writes of one key are a hot loop, and how long the host
/// then holds the key back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HotLoopConfig {
    /// Consecutive echo-woken writing reconciles within `window` that
    /// declare a hot loop. A controller stepping through states (add a
    /// finalizer, then a condition, then a child), each step woken by the
    /// last one's echo, makes a few; keep this above the longest such
    /// chain.
    pub writes: u32,
    /// The window they are counted in.
    pub window: Duration,
    /// How long the key is held back after its first hot loop.
    pub backoff: Duration,
    /// The longest hold-back (each hot loop resumed doubles the last).
    pub max_backoff: Duration,
}

impl Default for HotLoopConfig {
    /// Ten echo-woken writes in a row within 30 s; hold back 30 s,
    /// doubling to 30 min.
    fn default() -> Self {
        HotLoopConfig {
            writes: 10,
            window: Duration::from_secs(30),
            backoff: Duration::from_secs(30),
            max_backoff: Duration::from_secs(30 * 60),
        }
    }
}

/// What woke one reconcile of a key, as far as the host can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Woken {
    /// Only the echoes of the key's own previous writes: these.
    Echo(Vec<Written>),
    /// A change someone else made (maybe among echoes).
    Other,
    /// Nothing a watch reported: a requeue, a retry, a resync.
    Unknown,
}

/// A hot loop declared on a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HotLoop {
    /// How long the key is now held back.
    pub backoff: Duration,
    /// Echo-woken writing reconciles that led to it (1 for a loop resumed
    /// after its hold-back).
    pub writes: u32,
    /// An object the last of them wrote again.
    pub object: ObjectKey,
}

#[derive(Debug, Default)]
struct Entry {
    /// What the key's last writing reconciles wrote, oldest first (at
    /// most `MAX_ECHOES`): their echoes are this key's own.
    echoes: Vec<Written>,
    /// Echo-woken writing reconciles in a row, oldest first.
    streak: Vec<Instant>,
    /// The key is held back until its end; the next hot loop's, when one
    /// resumes, is doubled.
    backoff: Backoff,
}

impl Entry {
    /// Nothing worth keeping: no echo to recognise, no hold-back to
    /// remember.
    fn idle(&self, now: Instant, window: Duration) -> bool {
        self.echoes.is_empty()
            && self
                .backoff
                .until()
                .is_none_or(|u| now.saturating_duration_since(u) > window)
    }
}

/// Every key's hot-loop state, for one guest.
#[derive(Debug, Default)]
pub struct HotLoops {
    config: HotLoopConfig,
    keys: Mutex<HashMap<RequestKey, Entry>>,
    /// What woke each key this follows (exactly the keys with an entry).
    wakes: Arc<Wakes>,
}

impl HotLoops {
    /// Hot loops judged by `config`, on the wakes recorded in `wakes`.
    pub fn new(config: HotLoopConfig, wakes: Arc<Wakes>) -> Self {
        HotLoops {
            config,
            keys: Mutex::default(),
            wakes,
        }
    }

    /// The rules hot loops are judged by.
    pub fn config(&self) -> &HotLoopConfig {
        &self.config
    }

    /// A reconcile of `key` begins: what woke it. Changes reported from now
    /// on wake the next one.
    pub fn begin(&self, key: &RequestKey) -> Woken {
        let keys = lock(&self.keys);
        let Some(e) = keys.get(key) else {
            return Woken::Unknown;
        };
        let Some(woke) = self.wakes.take(key) else {
            return Woken::Unknown;
        };
        let (wakes, other) = (woke.changes, woke.other);
        if other {
            return Woken::Other;
        }
        if wakes.is_empty() {
            return Woken::Unknown;
        }
        let ours = wakes.iter().all(|w| e.echoes.iter().any(|o| o.matches(w)));
        if ours {
            Woken::Echo(wakes)
        } else {
            Woken::Other
        }
    }

    /// How much longer `key` is held back, if it is.
    pub fn held_back(&self, key: &RequestKey, now: Instant) -> Option<Duration> {
        lock(&self.keys).get(key)?.backoff.left(now)
    }

    /// A reconcile of `key` that `woken` woke wrote `wrote` (the writes the
    /// API server accepted, in order; `held_back`: some of its writes were
    /// held back, not sent): a hot loop when it was the last of
    /// [`HotLoopConfig::writes`] such reconciles woken only by the key's
    /// own echoes, or the first after a hold-back ended.
    pub fn reconciled(
        &self,
        key: &RequestKey,
        woken: &Woken,
        mut wrote: Vec<Written>,
        held_back: bool,
        now: Instant,
    ) -> Option<HotLoop> {
        if held_back && wrote.is_empty() {
            // Not let write: neither converged nor looping.
            return None;
        }
        let config = self.config;
        let mut keys = lock(&self.keys);
        if let Some(e) = keys.get_mut(key) {
            // A write answered with a version we wrote before changed
            // nothing (the server found it a no-op).
            wrote.retain(|w| !e.echoes.iter().any(|o| o.matches(w)));
        }
        if wrote.is_empty() {
            // Converged (or nothing sent): the streak ends.
            if let Some(e) = keys.get_mut(key) {
                e.streak.clear();
                e.echoes.clear();
                if e.idle(now, config.window) {
                    keys.remove(key);
                    self.wakes.forget(key);
                }
            }
            return None;
        }
        if !keys.contains_key(key) && keys.len() >= MAX_KEYS {
            // Bounded: forget the echoes of other keys (at worst a loop is
            // seen a reconcile later), never a running hold-back.
            keys.retain(|_, e| e.backoff.until().is_some_and(|u| u > now));
            self.wakes.retain(|k| keys.contains_key(k));
        }
        self.wakes.follow(key);
        let e = keys.entry(key.clone()).or_default();
        let object = ObjectKey::clone(&wrote[0].object);
        e.echoes.extend(wrote);
        let over = e.echoes.len().saturating_sub(MAX_ECHOES);
        e.echoes.drain(..over);
        match woken {
            Woken::Other => {
                e.streak.clear();
                return None;
            }
            Woken::Unknown => return None,
            Woken::Echo(_) => {}
        }
        let resumed = e
            .backoff
            .until()
            .is_some_and(|u| now >= u && now.saturating_duration_since(u) <= config.window);
        e.streak
            .retain(|t| now.saturating_duration_since(*t) <= config.window);
        e.streak.push(now);
        let writes = u32::try_from(e.streak.len()).unwrap_or(u32::MAX);
        if !resumed && writes < config.writes.max(1) {
            return None;
        }
        let backoff = e
            .backoff
            .hold(now, resumed, config.backoff, config.max_backoff);
        e.streak.clear();
        Some(HotLoop {
            backoff,
            writes,
            object,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guest::Gvk;

    fn config() -> HotLoopConfig {
        HotLoopConfig {
            writes: 3,
            window: Duration::from_secs(30),
            backoff: Duration::from_secs(10),
            max_backoff: Duration::from_secs(25),
        }
    }

    fn gvk() -> Gvk {
        Gvk::from_api_version("v1", "ConfigMap")
    }

    fn key() -> RequestKey {
        RequestKey::object(0, "ops/looper")
    }

    fn object() -> ObjectKey {
        ObjectKey {
            gvk: gvk(),
            namespace: Some("ops".into()),
            name: "looper".into(),
        }
    }

    fn wrote(rv: u64) -> Vec<Written> {
        vec![Written {
            object: Arc::new(object()),
            rv: rv.to_string().into(),
        }]
    }

    /// The watch reports the echo of the write that produced `rv`.
    fn echo(l: &HotLoops, rv: u64) {
        l.wakes
            .woken_by(&key(), &gvk(), "ops", "looper", &rv.to_string());
    }

    /// One reconcile at `now` that writes version `rv` (None: a no-op plan).
    fn reconcile(l: &HotLoops, rv: Option<u64>, now: Instant) -> Option<HotLoop> {
        let woken = l.begin(&key());
        l.reconciled(
            &key(),
            &woken,
            rv.map(wrote).unwrap_or_default(),
            false,
            now,
        )
    }

    #[test]
    fn writes_woken_only_by_their_own_echo_are_a_hot_loop_naming_the_object() {
        let l = HotLoops::new(config(), Arc::default());
        let t0 = Instant::now();
        // The first write is woken by something else (the key's start).
        assert_eq!(reconcile(&l, Some(1), t0), None);
        let mut verdicts = Vec::new();
        for rv in 2..=4 {
            echo(&l, rv - 1);
            verdicts.push(reconcile(&l, Some(rv), t0 + Duration::from_millis(50 * rv)));
        }
        assert_eq!(verdicts[..2], [None, None]);
        let at = t0 + Duration::from_millis(200);
        assert_eq!(
            verdicts[2],
            Some(HotLoop {
                backoff: Duration::from_secs(10),
                writes: 3,
                object: object(),
            })
        );
        assert_eq!(
            l.held_back(&key(), at + Duration::from_secs(4)),
            Some(Duration::from_secs(6))
        );
        assert_eq!(l.held_back(&key(), at + Duration::from_secs(10)), None);
        assert_eq!(l.held_back(&RequestKey::object(0, "ops/other"), at), None);
    }

    #[test]
    fn a_guest_that_converges_on_its_echo_is_never_a_hot_loop() {
        let l = HotLoops::new(config(), Arc::default());
        let mut now = Instant::now();
        for rv in (1..40).step_by(2) {
            // Something else wakes it; it writes; its echo wakes it; the
            // plan is a no-op.
            assert_eq!(reconcile(&l, Some(rv), now), None);
            echo(&l, rv);
            now += Duration::from_millis(10);
            assert_eq!(reconcile(&l, None, now), None);
        }
        assert_eq!(l.held_back(&key(), now), None);
        assert!(lock(&l.keys).is_empty(), "a converged key is forgotten");
        assert!(l.wakes.is_empty(), "and no longer followed");
    }

    #[test]
    fn a_write_woken_by_someone_elses_change_ends_the_streak() {
        let l = HotLoops::new(config(), Arc::default());
        let now = Instant::now();
        reconcile(&l, Some(1), now);
        for rv in 2..=10 {
            echo(&l, rv - 1);
            if rv % 2 == 0 {
                // A person's edit (not a version we wrote) arrives too.
                l.wakes.woken_by(&key(), &gvk(), "ops", "looper", "999");
            }
            assert_eq!(reconcile(&l, Some(rv), now), None, "write {rv}");
        }
        // A foreign change of an output counts the same way.
        echo(&l, 10);
        l.wakes.woken_by_other(&key());
        assert_eq!(l.begin(&key()), Woken::Other);
    }

    #[test]
    fn a_wake_no_watch_reported_neither_counts_nor_ends_the_streak() {
        let l = HotLoops::new(config(), Arc::default());
        let now = Instant::now();
        reconcile(&l, Some(1), now);
        echo(&l, 1);
        assert_eq!(reconcile(&l, Some(2), now), None);
        // A requeue: nothing reported, before the echo of write 2 came.
        assert_eq!(reconcile(&l, Some(3), now), None);
        echo(&l, 2);
        echo(&l, 3);
        assert_eq!(reconcile(&l, Some(4), now), None);
        echo(&l, 4);
        assert!(
            reconcile(&l, Some(5), now).is_some(),
            "three echo-woken writes"
        );
    }

    #[test]
    fn echoes_arriving_one_reconcile_late_are_still_the_keys_own() {
        // Under load the echo of each write arrives after the next
        // reconcile began: every reconcile is woken by the echo of the
        // write before its predecessor's. Nobody else changed anything.
        let l = HotLoops::new(config(), Arc::default());
        let now = Instant::now();
        reconcile(&l, Some(1), now);
        // A requeue (or the key's first wake) put it one write ahead.
        assert_eq!(reconcile(&l, Some(2), now), None);
        let declared = (3..=8).find_map(|rv| {
            echo(&l, rv - 2);
            reconcile(&l, Some(rv), now)
        });
        assert_eq!(
            declared.map(|h| h.writes),
            Some(3),
            "three writes woken by the key's own (late) echoes"
        );
    }

    #[test]
    fn a_reconcile_whose_writes_were_held_back_neither_counts_nor_ends_the_streak() {
        let l = HotLoops::new(config(), Arc::default());
        let now = Instant::now();
        reconcile(&l, Some(1), now);
        echo(&l, 1);
        assert_eq!(reconcile(&l, Some(2), now), None);
        echo(&l, 2);
        // Its write waits for an echo (or a write war holds it back).
        let woken = l.begin(&key());
        assert_eq!(l.reconciled(&key(), &woken, Vec::new(), true, now), None);
        // The echo it waited for wakes it again; it writes.
        echo(&l, 2);
        assert_eq!(reconcile(&l, Some(3), now), None);
        echo(&l, 3);
        assert!(
            reconcile(&l, Some(4), now).is_some(),
            "three echo-woken writes"
        );
    }

    #[test]
    fn a_write_answered_with_the_version_written_last_changed_nothing() {
        let l = HotLoops::new(config(), Arc::default());
        let now = Instant::now();
        reconcile(&l, Some(7), now);
        for _ in 0..10 {
            // Woken by the echo, the plan re-sends the same document (the
            // cache was behind): the server answers with the same version.
            echo(&l, 7);
            assert_eq!(reconcile(&l, Some(7), now), None);
        }
    }

    #[test]
    fn an_echo_reported_before_its_write_was_answered_is_recognised() {
        let l = HotLoops::new(config(), Arc::default());
        let now = Instant::now();
        reconcile(&l, Some(1), now);
        let mut rv = 1;
        let mut declared = None;
        for _ in 0..3 {
            echo(&l, rv);
            let woken = l.begin(&key());
            rv += 1;
            // The watch reports this write before the reconcile ends.
            echo(&l, rv);
            declared = l.reconciled(&key(), &woken, wrote(rv), false, now);
        }
        assert!(declared.is_some());
    }

    #[test]
    fn a_hot_loop_resumed_after_its_hold_back_doubles_it_up_to_the_cap() {
        let l = HotLoops::new(config(), Arc::default());
        let mut now = Instant::now();
        let mut rv = 1;
        reconcile(&l, Some(rv), now);
        let mut backoffs = Vec::new();
        while backoffs.len() < 4 {
            echo(&l, rv);
            rv += 1;
            if let Some(hot) = reconcile(&l, Some(rv), now) {
                backoffs.push(hot.backoff.as_secs());
                if backoffs.len() > 1 {
                    assert_eq!(hot.writes, 1, "declared at once when resumed");
                }
                // The hold-back ends; the timer's reconcile writes once.
                now += hot.backoff;
                assert_eq!(l.held_back(&key(), now), None);
                rv += 1;
                assert_eq!(reconcile(&l, Some(rv), now), None);
            }
        }
        assert_eq!(backoffs, vec![10, 20, 25, 25]);
    }

    #[test]
    fn a_loop_that_comes_back_long_after_its_hold_back_starts_afresh() {
        let l = HotLoops::new(config(), Arc::default());
        let mut now = Instant::now();
        let mut rv = 1;
        reconcile(&l, Some(rv), now);
        let mut run = |l: &HotLoops, now: Instant| {
            (0..3).find_map(|_| {
                echo(l, rv);
                rv += 1;
                reconcile(l, Some(rv), now)
            })
        };
        assert!(run(&l, now).is_some());
        now += Duration::from_secs(10 + 31);
        let again = run(&l, now).expect("declared again");
        assert_eq!((again.backoff.as_secs(), again.writes), (10, 3));
    }
}
