//! Write wars: an output that another field manager keeps taking back.
//! Owns the per-object record of those take-backs (of fields we set, and of
//! the object's existence) and the verdict on each: drift, counted, or a
//! war that holds the object's writes back. It never sends a request and
//! never decides what to write: the actuator asks it before and tells it
//! after each apply and delete.
//!
//! # Why
//! Every apply the host sends is forced (`force=true`): the guest's plan is
//! the desired state, so fields another manager set are taken over. When
//! another writer also forces (a second guest, a controller, a script
//! running `kubectl apply --server-side --force-conflicts` in a loop), the
//! two overwrite each other forever: each one's write is the other's
//! trigger.
//!
//! # Only the server's facts
//! A take-back is judged only from what the API server said: the uid and
//! resourceVersion its answer to our own last write returned, and the
//! uid, resourceVersion and `managedFields` of the object the cache (the
//! watch) shows. The cache may be older than our write's answer (its echo
//! is on its way), hold an event twice or late: none of that is a fact
//! about someone else. So a take-back is exactly one of:
//! - **changed** ([`Contests::retaken`]): the object's resourceVersion is
//!   newer than the one our last write's answer returned (and than any
//!   take-back already counted), it no longer holds what that write set,
//!   and its `managedFields` name another manager owning a field we set —
//!   that manager is the one named;
//! - **re-created** ([`Contests::recreated`]): after our delete, the object
//!   has a uid other than the one we deleted and a resourceVersion newer
//!   than our delete's, and its `managedFields` name a manager other than
//!   ours (named);
//! - **removed** ([`Contests::vanished`], judged by [`Contests::removed`]):
//!   a deletion of the uid our last write's answer returned, when our
//!   last write was not the delete of that uid (that is our own delete's
//!   echo). A deletion names no field manager: the other manager is
//!   [`DELETER`].
//!
//! A cache entry older than our write's answer (a resourceVersion not newer
//! than what our writes' answers returned, the uid we deleted) never counts, nor does the echo of our
//! own delete; a version or a deletion is counted once. ResourceVersions
//! are compared as the integers the API server hands out; one that is not
//! an integer is no fact of order, and counts as nothing.
//!
//! # How it decides
//! - A take-back later than [`ContestConfig::react`] after our write is
//!   drift: repaired every time, never counted.
//! - `flips` take-backs by one other party (the same manager, or
//!   deletions, which name [`DELETER`]) within `window` declare a war: a
//!   take-back by another party starts the count over (a war is us
//!   against one other writer; a person's edit, a cleanup's deletion and
//!   a third controller's change are three contests). A war stops the
//!   host writing the object for a back-off (doubling per war, up to
//!   `max_backoff`), the caller records a Warning event and a metric naming
//!   the other field manager, and foreign changes to the object stop waking
//!   the guest until the back-off ends.
//! - After it, the host forces once more; a take-back soon after declares
//!   the next war at once, with the doubled back-off, so a war costs a
//!   bounded number of writes however long it lasts.
//!
//! # Existence
//! A guest deleting what another writer keeps re-creating is a war like
//! any other; and so is the reverse, someone deleting what we created or
//! set (a guest and a cleanup script deleting its output would otherwise
//! fight at the client's rate). A child the garbage collector took with
//! its owner, created again for a new owner of the same name, is a new
//! object, not a take-back, and its contest starts over. An output that is deleted keeps its record
//! while it matters (we deleted it, someone deleted it soon after our
//! write, or take-backs or a hold-back are on record); otherwise a new
//! object starts a new contest. Records of deleted objects whose last
//! write, take-back and hold-back are all older than `window` are swept
//! every 1,024 deletions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value as Json;
use tokio::time::Instant;

use super::backoff::Backoff;
use crate::compare::{contains, resource_version};
use crate::guest::ObjectKey;
use crate::outputs::Keys;
use crate::sync::lock;

/// The other manager of a war over an output someone keeps deleting: a
/// deletion leaves no `managedFields` entry naming its author.
pub const DELETER: &str = "unknown (deleted)";

/// When a contest over an output becomes a war, and how long the host then
/// holds back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContestConfig {
    /// Take-backs within `window` that declare a war.
    pub flips: u32,
    /// The window take-backs are counted in.
    pub window: Duration,
    /// How long the host stops writing the object after its first war.
    pub backoff: Duration,
    /// The longest hold-back (each war doubles the previous one).
    pub max_backoff: Duration,
    /// How soon after our write a take-back must come to count toward a
    /// war: a rival controller reacts to our write at once; a person's
    /// edit of our fields, later than this, is drift, repaired every time.
    pub react: Duration,
}

impl Default for ContestConfig {
    /// Three take-backs in a minute, each within 1 s of our write; hold
    /// back 30 s, doubling to 30 min.
    fn default() -> Self {
        ContestConfig {
            flips: 3,
            window: Duration::from_secs(60),
            backoff: Duration::from_secs(30),
            max_backoff: Duration::from_secs(30 * 60),
            react: Duration::from_secs(1),
        }
    }
}

/// What a take-back amounted to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Our fields were changed long after our write (see
    /// [`ContestConfig::react`]): drift, repaired, never counted.
    Drift,
    /// Counted; not (yet) a war: write as usual.
    Contested,
    /// A war: hold back for `backoff`.
    War {
        /// How long the host now stops writing the object.
        backoff: Duration,
        /// Take-backs that led to it (within the window).
        flips: u32,
    },
}

#[derive(Debug, Default)]
struct Entry {
    /// The resourceVersion our last write's answer returned (none after our
    /// delete).
    ours: Option<String>,
    /// The uid our last write's answer returned: the object we wrote, or,
    /// when `deleted`, the one we deleted.
    uid: Option<Box<str>>,
    /// The newest resourceVersion our writes' answers returned (or our
    /// last delete was decided on): a version not newer is older than our
    /// own write, whatever it shows.
    after: Option<u64>,
    /// When our last write returned.
    wrote_at: Option<Instant>,
    /// What our last write of the object and of its status set, as JSON
    /// text: kept for every object written, read only when someone else
    /// wrote after us (a parsed copy was a third of the host's memory growth
    /// when 10,000 children changed).
    set: [Option<Box<str>>; 2],
    /// Our last write of the object (the one that produced `ours`) was a
    /// successful apply of this part (true: status) with `set`'s text.
    applied: Option<bool>,
    /// Our last write of the object deleted it: its re-creation by someone
    /// else is a take-back.
    deleted: bool,
    /// Take-backs and wars: only for an object someone else wrote after
    /// us, so kept apart (most entries never have one; inline, these
    /// fields more than doubled every entry).
    contest: Option<Box<Contest>>,
}

impl Entry {
    /// The take-back and war record, made on first use.
    fn contest(&mut self) -> &mut Contest {
        self.contest.get_or_insert_with(Box::default)
    }
}

/// One object's take-backs and wars.
#[derive(Debug, Default)]
struct Contest {
    /// Take-backs within the window, oldest first.
    flips: Vec<Instant>,
    /// Writes are held back until its end; the next war's is doubled.
    backoff: Backoff,
    /// The field manager that took the object back last.
    other: String,
    /// The newest resourceVersion counted as a take-back of our fields:
    /// each version is counted once.
    counted: Option<u64>,
    /// Someone else deleted the object within `react` of our write that
    /// created or set it, then: a take-back, judged when we next create
    /// it ([`Contests::removed`]).
    taken_away: Option<Instant>,
    /// The uid that deletion removed.
    taken_uid: Option<Box<str>>,
    /// The uid of the controller owner the object we wrote last had when it
    /// was deleted (by anyone, in time to count or not): the garbage
    /// collector deletes a child whose owner is gone, and the child the
    /// guest creates next, for a new owner of the same name, is a new
    /// object — no take-back, and a new contest.
    taken_from: Option<String>,
}

/// Drops the records of deleted objects that no longer matter: nothing of
/// ours is on record for them (what [`Contests::vanished`] keeps), and our
/// last write, take-backs, a deletion by someone else and any hold-back
/// are all older than `window`. A re-creation of such an object after that
/// is only drift (re-deleted, not counted) and a new object starts a new
/// contest, as without the record; what it saves is a record per deleted
/// object for the life of the process.
fn sweep(objects: &mut HashMap<Arc<ObjectKey>, Entry>, now: Instant, window: Duration) {
    let old = |t: &Option<Instant>| t.is_none_or(|t| now.saturating_duration_since(t) > window);
    objects.retain(|_, e| {
        let gone = e.ours.is_none() && e.set == [None, None];
        let stale = old(&e.wrote_at)
            && e.contest.as_ref().is_none_or(|c| {
                old(&c.backoff.until())
                    && old(&c.taken_away)
                    && c.flips.iter().all(|t| old(&Some(*t)))
            });
        !(gone && stale)
    });
}

/// Deletions of outputs between two sweeps of the records of deleted
/// objects that no longer matter ([`Contests::vanished`]).
const SWEEP_EVERY: usize = 1024;

/// Every output's contest state, for one guest.
#[derive(Debug, Default)]
pub struct Contests {
    config: ContestConfig,
    objects: Mutex<HashMap<Arc<ObjectKey>, Entry>>,
    /// The shared copies of the keys (see [`Keys`]).
    keys: Arc<Keys>,
    /// Deletions seen (a sweep at every [`SWEEP_EVERY`]th).
    deletions: std::sync::atomic::AtomicUsize,
}

impl Contests {
    /// Contests judged by `config`.
    pub fn new(config: ContestConfig) -> Self {
        Contests {
            config,
            ..Contests::default()
        }
    }

    /// Keys its records by `keys`' shared copies.
    pub(crate) fn sharing(mut self, keys: Arc<Keys>) -> Self {
        self.keys = keys;
        self
    }

    /// Counts one deletion (ours or anyone's): every [`SWEEP_EVERY`]
    /// deletions, the records of deleted objects that no longer matter go.
    fn deletion(&self, objects: &mut HashMap<Arc<ObjectKey>, Entry>, now: Instant) {
        let n = self
            .deletions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n % SWEEP_EVERY == SWEEP_EVERY - 1 {
            sweep(objects, now, self.config.window);
        }
    }

    /// How many objects have a record.
    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.objects).len()
    }

    /// The rules contests are judged by.
    pub fn config(&self) -> &ContestConfig {
        &self.config
    }

    /// How much longer writes to `target` are held back, if they are, and
    /// the manager the war is with.
    pub fn held_back(&self, target: &ObjectKey, now: Instant) -> Option<(Duration, String)> {
        let objects = lock(&self.objects);
        let c = objects.get(target)?.contest.as_ref()?;
        let left = c.backoff.left(now)?;
        Some((left, c.other.clone()))
    }

    /// Records the server's answer to our write of `target` (an apply, a
    /// merge patch) at `now`: the object's `uid` and the resourceVersion
    /// `rv` it produced.
    pub fn wrote(&self, target: &ObjectKey, uid: Option<&str>, rv: Option<&str>, now: Instant) {
        let mut objects = lock(&self.objects);
        let e = objects.entry(self.keys.get(target)).or_default();
        e.ours = rv.map(str::to_string);
        e.uid = uid.map(Box::from);
        e.after = e.after.max(rv.and_then(ordered));
        e.wrote_at = Some(now);
        e.deleted = false;
        e.applied = None;
    }

    /// Records that our write of `target` that produced `rv` was a
    /// successful apply of the part (its status when `status`) last given
    /// to [`Contests::sets`] (call after [`Contests::wrote`]).
    pub fn applied(&self, target: &ObjectKey, status: bool, rv: &str) {
        let mut objects = lock(&self.objects);
        if let Some(e) = objects.get_mut(target) {
            if e.ours.as_deref() == Some(rv) {
                e.applied = Some(status);
            }
        }
    }

    /// Whether the object at `live_rv` is exactly what our last write, an
    /// apply of `desired` to this part, produced: nobody wrote it since, so
    /// applying `desired` again changes nothing, and the live object need
    /// not be parsed to tell.
    pub fn unchanged(
        &self,
        target: &ObjectKey,
        status: bool,
        live_rv: &str,
        desired: &Json,
    ) -> bool {
        let objects = lock(&self.objects);
        objects.get(target).is_some_and(|e| {
            e.ours.as_deref() == Some(live_rv) && Self::last_applied(e, status, desired)
        })
    }

    /// Whether our last write of `target` was an apply of exactly `desired`
    /// to this part, answered by the server, with no deletion of its object
    /// seen since. While that write's echo is on its way (the cache is
    /// behind it), applying `desired` again changes nothing: a change by
    /// anyone else after it reaches the cache after the echo, and wakes the
    /// guest.
    pub fn answered(&self, target: &ObjectKey, status: bool, desired: &Json) -> bool {
        let objects = lock(&self.objects);
        objects
            .get(target)
            .is_some_and(|e| e.ours.is_some() && Self::last_applied(e, status, desired))
    }

    /// Whether `e`'s last write was a successful apply of `desired` to this
    /// part.
    fn last_applied(e: &Entry, status: bool, desired: &Json) -> bool {
        e.applied == Some(status)
            && e.set[usize::from(status)]
                .as_deref()
                .is_some_and(|text| serializes_to(desired, text))
    }

    /// Records the server's answer to our delete of `target` at `now`: it
    /// deleted the object `uid`, at resourceVersion `rv` (the answer's, or
    /// the one of the object the delete was decided on). Someone else's
    /// object of that name, newer and with another uid, is a re-creation
    /// ([`Contests::recreated`]); a deletion of `uid` noted meanwhile was
    /// this delete's echo, not a take-back.
    pub fn deleted(&self, target: &ObjectKey, uid: Option<&str>, rv: Option<&str>, now: Instant) {
        let mut objects = lock(&self.objects);
        self.deletion(&mut objects, now);
        let e = objects.entry(self.keys.get(target)).or_default();
        e.ours = None;
        e.set = [None, None];
        e.applied = None;
        e.wrote_at = Some(now);
        e.deleted = true;
        e.uid = uid.map(Box::from);
        e.after = e.after.max(rv.and_then(ordered));
        if let Some(c) = e.contest.as_mut() {
            if uid.is_some() && c.taken_uid.as_deref() == uid {
                c.taken_away = None;
                c.taken_from = None;
                c.taken_uid = None;
            }
        }
    }

    /// Whether `uid` is the object our last delete of `target` removed: a
    /// cache still holding it is behind our delete (its echo is on its
    /// way), and there is nothing to delete again.
    pub fn ours_deleted(&self, target: &ObjectKey, uid: Option<&str>) -> bool {
        let objects = lock(&self.objects);
        objects
            .get(target)
            .is_some_and(|e| e.deleted && uid.is_some() && e.uid.as_deref() == uid)
    }

    /// Records what an apply of `target` (its status when `status`) is
    /// about to set: a later change is a take-back only when the live
    /// object no longer holds it.
    pub fn sets(&self, target: &ObjectKey, status: bool, desired: &Json) {
        let mut objects = lock(&self.objects);
        let text = desired.to_string().into_boxed_str();
        let e = objects.entry(self.keys.get(target)).or_default();
        e.set[usize::from(status)] = Some(text);
        e.applied = None;
    }

    /// The object `uid` of `target` was deleted (seen at `now`), `owner`
    /// the uid of the controller owner it had. The deletion of the object
    /// our last write's answer named, when that write was not its delete
    /// (that is our own echo), within [`ContestConfig::react`] of our
    /// write, is noted as a take-back, judged when we create it again
    /// ([`Contests::removed`]). The deletion of an older object (an event
    /// delivered late) changes nothing of ours. Otherwise what our writes
    /// produced is gone (a new object starts a new contest over its
    /// fields); the record is kept only while it matters: we deleted it
    /// (its re-creation would be a take-back), such a deletion is to be
    /// judged, or take-backs or a hold-back are on record.
    pub fn vanished(
        &self,
        target: &ObjectKey,
        uid: Option<&str>,
        owner: Option<&str>,
        now: Instant,
    ) {
        let mut objects = lock(&self.objects);
        self.deletion(&mut objects, now);
        let Some(e) = objects.get_mut(target) else {
            return;
        };
        let ours = uid.is_some() && e.uid.as_deref() == uid;
        if !ours && !e.deleted && e.ours.is_some() && e.uid.is_some() {
            // What we wrote still exists: this is an older object's end.
            return;
        }
        let reacted = ours
            && !e.deleted
            && e.wrote_at
                .is_some_and(|w| now.saturating_duration_since(w) <= self.config.react);
        if ours {
            // Whoever deleted it, in time to count or not: a re-creation for
            // another owner is a new object, and starts a new contest.
            if let Some(c) = e.contest.as_mut() {
                c.taken_from = owner.map(str::to_string);
            }
        }
        if reacted {
            let c = e.contest();
            c.taken_away = Some(now);
            c.taken_from = owner.map(str::to_string);
            c.taken_uid = uid.map(Box::from);
        }
        let window = self.config.window;
        let recent = |t: Instant| now.saturating_duration_since(t) <= window;
        let contested = e.contest.as_ref().is_some_and(|c| {
            c.flips.iter().any(|t| recent(*t)) || c.backoff.until().is_some_and(recent)
        });
        if e.deleted || reacted || contested {
            e.ours = None;
            e.set = [None, None];
            e.applied = None;
        } else {
            objects.remove(target);
        }
    }

    /// Called when an apply to `target` (its status when `status`) is
    /// needed, with the `live` object the cache holds. A take-back is a
    /// version newer than our last write's answer (and than any take-back
    /// counted) that no longer holds what that write of this part set, and
    /// whose `managedFields` name another manager than `ours` owning a
    /// field we set (that manager is named). An older version (the cache
    /// behind our answer), our own write, a change of fields we did not set
    /// (a person's spec edit under our status), a change that left no
    /// other manager owning our fields, and the guest simply wanting
    /// something new are none. A take-back within
    /// [`ContestConfig::react`] of our write is counted and may make a
    /// war; a later one is [`Verdict::Drift`].
    pub fn retaken(
        &self,
        target: &ObjectKey,
        live: &Json,
        ours: &str,
        status: bool,
        now: Instant,
    ) -> Option<(Verdict, String)> {
        let version = ordered(resource_version(live)?)?;
        let mut objects = lock(&self.objects);
        let e = objects.get_mut(target)?;
        // Never written by us in this process, or deleted since.
        e.ours.as_ref()?;
        let after = e.after?;
        let counted = e.contest.as_ref().and_then(|c| c.counted);
        if version <= after || counted.is_some_and(|c| version <= c) {
            return None;
        }
        // Kept as text, written by us: it parses.
        let set: Json = serde_json::from_str(e.set[usize::from(status)].as_deref()?).ok()?;
        let null = Json::Null;
        let (live_part, set_part) = if status {
            (
                live.get("status").unwrap_or(&null),
                set.get("status").unwrap_or(&null),
            )
        } else {
            (live, &set)
        };
        if contains(live_part, set_part) {
            return None;
        }
        let set = match status {
            true => serde_json::json!({"status": set.get("status")}),
            false => set,
        };
        let other = taker(live, ours, Some(&set))?;
        e.contest().counted = Some(version);
        Some(self.count(e, other, now))
    }

    /// Called when a delete of `target` is needed and the cache holds
    /// `live`: after our delete, an object with a uid other than the one
    /// we deleted and a resourceVersion newer than our delete's, whose
    /// `managedFields` name a manager other than `ours` (named: the latest
    /// since its creation), was re-created by someone else. Within [`ContestConfig::react`] of our delete that is a
    /// counted take-back, as a changed field is for an apply, and may make
    /// a war; a later one is [`Verdict::Drift`]. Counted once per deletion
    /// of ours. The object we deleted, still in the cache, is none.
    pub fn recreated(
        &self,
        target: &ObjectKey,
        live: &Json,
        ours: &str,
        now: Instant,
    ) -> Option<(Verdict, String)> {
        let mut objects = lock(&self.objects);
        let e = objects.get_mut(target)?;
        let uid = live.pointer("/metadata/uid").and_then(Json::as_str)?;
        let version = ordered(resource_version(live)?)?;
        if !e.deleted || e.uid.as_deref().is_none_or(|deleted| deleted == uid) {
            return None;
        }
        // An older object of that name (an event delivered late).
        if e.after.is_none_or(|after| version <= after) {
            return None;
        }
        let other = taker(live, ours, None)?;
        e.deleted = false;
        Some(self.count(e, other, now))
    }

    /// Called when an apply would create `target` again (the cache has no
    /// such object): someone else deleted the object our last write's
    /// answer named, within [`ContestConfig::react`] of that write
    /// ([`Contests::vanished`] noted when). That is a counted take-back,
    /// judged at the deletion's time, and may make a war; a later deletion
    /// was never noted (drift: re-created every time). Counted once per
    /// deletion. The deleter cannot be read from the object: named
    /// [`DELETER`]. `owner` is the uid of the controller owner the object
    /// is created for: when the deleted object had another one (its owner
    /// was deleted, the garbage collector took the child, and a new owner
    /// of the same name wants it), it is a new object: no take-back, and
    /// its contest starts over.
    pub fn removed(
        &self,
        target: &ObjectKey,
        owner: Option<&str>,
        now: Instant,
    ) -> Option<(Verdict, String)> {
        let mut objects = lock(&self.objects);
        let e = objects.get_mut(target)?;
        let c = e.contest.as_mut()?;
        let from = c.taken_from.take();
        if from.is_some() && from.as_deref() != owner {
            // The object deleted last had another owner: what is created now
            // is a new object, and its contest starts over (take-backs of
            // the earlier owner's object never count against it).
            e.contest = None;
            return None;
        }
        let at = c.taken_away.take()?;
        let gone = c.taken_uid.take();
        if gone.is_none() || gone != e.uid {
            return None;
        }
        // Counted once: a late copy of this deletion is no longer ours.
        e.uid = None;
        // A deletion judged after a hold-back began (it cannot: nothing is
        // written meanwhile) would still count at its own time.
        Some(self.count(e, DELETER, at.min(now)))
    }

    /// Judges one take-back of `e` by `other` at `now`: drift, counted, or
    /// a war; with the manager that took it back. A war is us against one
    /// other party: a take-back by another manager than the last counted
    /// one starts the count over (a person's edit, another's deletion and a
    /// third controller's change are three contests, not one war).
    fn count(&self, e: &mut Entry, other: &str, now: Instant) -> (Verdict, String) {
        let config = &self.config;
        let late = e
            .wrote_at
            .is_some_and(|w| now.saturating_duration_since(w) > config.react);
        let e = e.contest();
        if e.other != other {
            e.flips.clear();
            e.other = other.to_string();
        }
        let verdict = if late {
            Verdict::Drift
        } else {
            Self::judge(config, e, now)
        };
        (verdict, e.other.clone())
    }

    /// A take-back in time to count: counted, or a war.
    fn judge(config: &ContestConfig, e: &mut Contest, now: Instant) -> Verdict {
        // A take-back soon after a war's hold-back ended: the war goes on.
        let resumed = e
            .backoff
            .until()
            .is_some_and(|u| now.saturating_duration_since(u) <= config.window);
        e.flips
            .retain(|t| now.saturating_duration_since(*t) <= config.window);
        e.flips.push(now);
        let flips = u32::try_from(e.flips.len()).unwrap_or(u32::MAX);
        if !resumed && flips < config.flips.max(1) {
            return Verdict::Contested;
        }
        let backoff = e
            .backoff
            .hold(now, resumed, config.backoff, config.max_backoff);
        e.flips.clear();
        Verdict::War { backoff, flips }
    }
}

/// Whether `value` serializes to exactly `text` (compared as it is
/// written, without building the string).
fn serializes_to(value: &Json, text: &str) -> bool {
    struct Compare<'a>(&'a [u8]);
    impl std::io::Write for Compare<'_> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            match self.0.strip_prefix(buf) {
                Some(rest) => {
                    self.0 = rest;
                    Ok(buf.len())
                }
                None => Err(std::io::ErrorKind::InvalidData.into()),
            }
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut rest = Compare(text.as_bytes());
    serde_json::to_writer(&mut rest, value).is_ok() && rest.0.is_empty()
}

/// The field manager, other than `ours`, that last changed what our last
/// write set (`set`: the object, or its status part): among the
/// `managedFields` entries of the object as it is now — an entry dated
/// before its `creationTimestamp` came with a copied body (a new object
/// that reused the name), not from a write to it — the latest one owning
/// one of those fields (an `Apply` wins a tie, being the forcing kind).
/// With none owning them (or `set` unknown), the latest writer since
/// creation; with no entry at all, `"unknown"`. (The rule itself names
/// only a manager the server recorded: [`taker`].)
#[cfg(test)]
pub fn other_manager(live: &Json, ours: &str, set: Option<&Json>) -> String {
    ranked(live, ours, set).map_or_else(|| "unknown".to_string(), |(_, m)| m.to_string())
}

/// The manager that took back what our write set (`set`), as the server
/// recorded it: [`other_manager`]'s choice when it owns one of those fields
/// (or, `set` unknown, any writer since creation other than `ours`); none
/// when the server recorded no such manager.
fn taker<'a>(live: &'a Json, ours: &str, set: Option<&Json>) -> Option<&'a str> {
    let ((touches, _, _), manager) = ranked(live, ours, set)?;
    (touches || set.is_none()).then_some(manager)
}

/// [`other_manager`]'s ranking: the best entry, with whether it owns a
/// field of `set`, its time and whether it is an apply.
fn ranked<'a>(
    live: &'a Json,
    ours: &str,
    set: Option<&Json>,
) -> Option<((bool, &'a str, bool), &'a str)> {
    let created = live
        .pointer("/metadata/creationTimestamp")
        .and_then(Json::as_str)
        .unwrap_or("");
    let entries = live
        .pointer("/metadata/managedFields")
        .and_then(Json::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    entries
        .iter()
        .filter_map(|e| {
            let manager = e.get("manager").and_then(Json::as_str)?;
            (manager != ours).then_some(())?;
            let time = e.get("time").and_then(Json::as_str).unwrap_or("");
            // RFC 3339 in UTC to the second, as the API server writes both:
            // ordered as strings.
            (time.is_empty() || time >= created).then_some(())?;
            let apply = e.get("operation").and_then(Json::as_str) == Some("Apply");
            let touches = set.is_some_and(|s| owns_any(e.get("fieldsV1"), s));
            Some(((touches, time, apply), manager))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
}

/// A resourceVersion as the integer the API server hands out (etcd's
/// revision; the embedded server's counter); None when it is not one.
fn ordered(rv: &str) -> Option<u64> {
    rv.parse().ok()
}

/// Whether a `fieldsV1` set owns any field `set` sets (a map owned whole,
/// `.`, counts).
fn owns_any(fields: Option<&Json>, set: &Json) -> bool {
    let (Some(Json::Object(fields)), Json::Object(set)) = (fields, set) else {
        return false;
    };
    set.iter()
        .any(|(k, v)| match fields.get(&format!("f:{k}")) {
            None => false,
            Some(sub) => match v {
                Json::Object(m) if !m.is_empty() => {
                    sub.get(".").is_some() || owns_any(Some(sub), v)
                }
                _ => true,
            },
        })
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
