//! The echo bookkeeping: our writes whose watch echo has not been seen
//! yet, so the echo of our own write never wakes a reconcile, and the
//! objects we merge-patched, whose next write waits (briefly) for that
//! echo. It never writes and never enqueues: the actuator tells it of each
//! write, the outputs handler asks it of each change.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::keys::Keys;
use crate::guest::ObjectKey;
use crate::sync::lock;

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

/// What a change of an output is, as far as our writes tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// The echo of one of our writes (or held for the response of a write
    /// in flight): it wakes nobody.
    Ours,
    /// The echo of our last write, which a write of the object was waiting
    /// for: it wakes that write's producer, as an echo of its own write.
    Awaited,
    /// Someone else's change: it must be reconciled.
    Foreign,
}

/// Our writes whose watch echo has not been seen yet. Only equality of
/// resourceVersions is used: they are opaque, never ordered.
#[derive(Debug, Default)]
pub struct Echoes {
    /// The shared copies of the keys (see [`Keys`]).
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
    pub(super) fn merged_count(&self) -> usize {
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

    /// The resourceVersion our last answered write of `target` returned,
    /// while its echo is still to come (the cache is older than it).
    pub fn last_written(&self, target: &ObjectKey) -> Option<String> {
        match lock(&self.pending).get(target) {
            Some(Echo::Due(rvs)) => rvs.last().cloned(),
            _ => None,
        }
    }

    /// Whether a write of `target` is in flight or its echo is still to
    /// come: the cache is then older than the object, and no skip may be
    /// decided on it.
    pub fn awaiting(&self, target: &ObjectKey) -> bool {
        lock(&self.pending).contains_key(target)
    }

    /// Called for every change of an output, with the resourceVersion the
    /// outputs cache now holds (None: gone). The watch echo of one of our
    /// writes (the cache now shows exactly what a write returned), or a
    /// change that arrived while a write of that object was in flight (the
    /// write's response then decides, see [`Echoes::applied`]), is ours;
    /// the echo a write of the object waits for (see
    /// [`Echoes::wait_for_echo`]) is ours too, and wakes that write's
    /// producer. Any other change (someone else's write, an older event, a
    /// delete we did not send) forgets our writes and must be reconciled.
    pub fn settle(&self, target: &ObjectKey, cached_rv: Option<&str>) -> Settled {
        let mut pending = lock(&self.pending);
        match pending.get_mut(target) {
            Some(Echo::InFlight { seen, .. }) => {
                seen.push(cached_rv.unwrap_or_default().to_string());
                Settled::Ours
            }
            Some(Echo::Due(rvs)) => {
                // A deletion's echo is held as "" (see `applied`).
                let cached = cached_rv.unwrap_or_default();
                let Some(at) = rvs.iter().position(|rv| rv == cached) else {
                    pending.remove(target);
                    return Settled::Foreign;
                };
                rvs.drain(..=at);
                if rvs.is_empty() {
                    pending.remove(target);
                    if lock(&self.waiting).remove(target).is_some() {
                        return Settled::Awaited;
                    }
                }
                Settled::Ours
            }
            None => Settled::Foreign,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guest::Gvk;

    fn target() -> ObjectKey {
        let gvk = Gvk::from_api_version("v1", "ConfigMap");
        let namespace = Some("ops".into());
        let name = "s".into();
        ObjectKey {
            gvk,
            namespace,
            name,
        }
    }

    #[test]
    fn an_echo_that_beats_the_apply_response_is_swallowed() {
        let e = Echoes::default();
        e.begin(&target());
        assert_eq!(
            e.settle(&target(), Some("5")),
            Settled::Ours,
            "held for the response"
        );
        assert!(!e.applied(&target(), Some("5"), Some("5")), "it was ours");
        assert!(!e.awaiting(&target()), "nothing left to wait for");
        // The next change is someone else's.
        assert_eq!(e.settle(&target(), Some("6")), Settled::Foreign);
    }

    #[test]
    fn an_echo_after_the_response_is_swallowed_and_anything_else_is_not() {
        let e = Echoes::default();
        e.begin(&target());
        assert!(!e.applied(&target(), Some("5"), Some("4")));
        assert_eq!(e.settle(&target(), Some("5")), Settled::Ours, "our echo");
        e.begin(&target());
        assert!(!e.applied(&target(), Some("7"), Some("4")));
        assert_eq!(
            e.settle(&target(), Some("8")),
            Settled::Foreign,
            "someone else's write"
        );
        assert_eq!(
            e.settle(&target(), Some("7")),
            Settled::Foreign,
            "forgotten after a foreign change"
        );
        e.begin(&target());
        assert!(!e.applied(&target(), Some("9"), Some("4")));
        assert_eq!(
            e.settle(&target(), None),
            Settled::Foreign,
            "a delete is never an echo"
        );
    }

    #[test]
    fn a_foreign_write_during_the_apply_asks_for_another_look() {
        let e = Echoes::default();
        e.begin(&target());
        assert_eq!(e.settle(&target(), Some("5")), Settled::Ours);
        assert!(e.applied(&target(), Some("6"), Some("5")), "5 was not ours");
        assert_eq!(e.settle(&target(), Some("6")), Settled::Ours, "6 still is");
        // A failed apply: whatever came meanwhile is someone else's.
        e.begin(&target());
        assert_eq!(e.settle(&target(), Some("7")), Settled::Ours);
        assert!(e.applied(&target(), None, Some("7")));
        assert!(!e.awaiting(&target()));
    }

    #[test]
    fn our_deletes_watch_event_is_its_echo_before_or_after_the_response() {
        let e = Echoes::default();
        // The deletion event beats the response.
        e.begin(&target());
        assert_eq!(
            e.settle(&target(), None),
            Settled::Ours,
            "held for the response"
        );
        assert!(!e.applied(&target(), Some(""), None), "it was ours");
        assert!(!e.awaiting(&target()));
        // The response comes first, while the cache still holds the object.
        e.begin(&target());
        assert!(!e.applied(&target(), Some(""), Some("4")));
        assert!(e.awaiting(&target()), "its echo is due");
        assert_eq!(
            e.settle(&target(), None),
            Settled::Ours,
            "our deletion's echo"
        );
        assert!(!e.awaiting(&target()));
        // A delete that left the object being deleted, at a new version.
        e.begin(&target());
        assert!(!e.applied(&target(), Some("6"), Some("5")));
        assert_eq!(e.settle(&target(), Some("6")), Settled::Ours);
        assert_eq!(
            e.settle(&target(), None),
            Settled::Foreign,
            "its later removal is not ours"
        );
    }

    #[test]
    fn the_echo_a_merge_patch_waits_for_is_ours_and_wakes_the_waiting_write() {
        let e = Echoes::default();
        e.merged(&target());
        e.begin(&target());
        assert!(!e.applied(&target(), Some("5"), Some("4")));
        // The next write of it waits for this echo.
        assert!(e.wait_for_echo(&target(), std::time::Duration::from_secs(2)));
        assert_eq!(e.settle(&target(), Some("5")), Settled::Awaited);
        assert!(!e.awaiting(&target()));
        assert!(!e.wait_for_echo(&target(), std::time::Duration::from_secs(2)));
        // With no write waiting, the next echo wakes nobody.
        e.begin(&target());
        assert!(!e.applied(&target(), Some("6"), Some("5")));
        assert_eq!(e.settle(&target(), Some("6")), Settled::Ours);
    }

    #[test]
    fn an_apply_that_changed_nothing_waits_for_no_echo() {
        let e = Echoes::default();
        e.begin(&target());
        assert!(!e.applied(&target(), Some("4"), Some("4")));
        assert!(!e.awaiting(&target()));
        assert_eq!(
            e.settle(&target(), Some("5")),
            Settled::Foreign,
            "a later change is reconciled"
        );
    }
}
