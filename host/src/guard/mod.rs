//! The guard: whether a key may write now, and what must be held back.
//! Owns the two rules that stop the host from fighting — write wars over
//! an output another field manager keeps taking back (`contest`), and hot
//! loops of a key rewriting its object on every echo of its own last write
//! (`hotloop`) — and the one hold-back type both end in (`backoff`). It
//! never sends a request, never enqueues and never decides what to write.
//!
//! # One question per reconcile
//! The controller asks [`Guard::admit`] once, when a key's reconcile
//! begins: [`Admission::HeldBack`] (a hot loop: the key is not reconciled
//! until its hold-back ends) or [`Admission::Write`] with a [`Permit`],
//! which the controller hands to the actuator. Through the permit the
//! actuator learns, write by write, which objects a write war holds back
//! ([`Contests`]: judged on the live object each write is decided on), and
//! tells what the reconcile wrote ([`Permit::reconciled`]), which may
//! declare a hot loop. The outputs cache asks it, through
//! [`ForeignChange`], whether someone else's change of an output wakes its
//! producer (not while a write war holds the object back); what woke each
//! key it reads from the wakes the handlers record ([`Wakes`]).
//!
//! # Layout
//! - `mod.rs`: [`Guard`], [`Admission`], [`Permit`].
//! - `contest`: write wars ([`ContestConfig`], [`Contests`], [`Verdict`]).
//! - `hotloop`: hot loops ([`HotLoopConfig`], [`HotLoop`], [`Woken`]).
//! - `backoff`: the doubling hold-back both use.

mod backoff;
mod contest;
mod hotloop;

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::guest::ObjectKey;
use crate::outputs::{Foreign, ForeignChange, Keys, Wakes, Written};
use crate::request::RequestKey;
use hotloop::HotLoops;

pub use contest::{ContestConfig, Contests, Verdict, DELETER};
pub use hotloop::{HotLoop, HotLoopConfig, Woken};

/// The write-war and hot-loop rules of one guest, and their state.
#[derive(Debug)]
pub struct Guard {
    contests: Contests,
    loops: HotLoops,
}

/// The guard's answer when a key's reconcile begins.
#[derive(Debug)]
pub enum Admission<'a> {
    /// A hot loop: the key is not reconciled (nothing is planned, so
    /// nothing is written) for this long.
    HeldBack(Duration),
    /// The key may write; the permit says, write by write, what a write
    /// war holds back, and takes what the reconcile wrote.
    Write(Permit<'a>),
}

/// One reconcile's leave to write, handed to the actuator.
#[derive(Debug)]
pub struct Permit<'a> {
    guard: &'a Guard,
    key: RequestKey,
    /// What woke this reconcile.
    woken: Woken,
}

impl Guard {
    /// Write wars judged by `contests` (records keyed by `keys`' shared
    /// copies), hot loops by `hot_loops` on the wakes recorded in `wakes`.
    pub fn new(
        contests: ContestConfig,
        hot_loops: HotLoopConfig,
        keys: Arc<Keys>,
        wakes: Arc<Wakes>,
    ) -> Self {
        Guard {
            contests: Contests::new(contests).sharing(keys),
            loops: HotLoops::new(hot_loops, wakes),
        }
    }

    /// A reconcile of `key` begins: whether it may write (changes reported
    /// from now on wake the next one). Asked once per reconcile.
    pub fn admit(&self, key: &RequestKey) -> Admission<'_> {
        let woken = self.loops.begin(key);
        if let Some(left) = self.loops.held_back(key, Instant::now()) {
            return Admission::HeldBack(left);
        }
        Admission::Write(Permit {
            guard: self,
            key: key.clone(),
            woken,
        })
    }
}

impl Permit<'_> {
    /// The write-war rules this reconcile's writes are judged by.
    pub fn contests(&self) -> &Contests {
        &self.guard.contests
    }

    /// The rules hot loops are judged by.
    pub fn hot_loops(&self) -> &HotLoopConfig {
        self.guard.loops.config()
    }

    /// The reconcile wrote `wrote` (the writes the API server accepted, in
    /// order; `held_back`: some writes were held back, not sent): a hot
    /// loop when it was the last of [`HotLoopConfig::writes`] reconciles
    /// woken only by the key's own echoes, or the first after a hold-back
    /// ended.
    pub fn reconciled(
        &self,
        wrote: Vec<Written>,
        held_back: bool,
        now: Instant,
    ) -> Option<HotLoop> {
        self.guard
            .loops
            .reconciled(&self.key, &self.woken, wrote, held_back, now)
    }
}

impl ForeignChange for Guard {
    /// A deletion by someone else is noted for the write-war rules; the
    /// change wakes the producer unless a write war holds the object back.
    fn wakes(&self, target: &ObjectKey, change: Foreign<'_>, now: Instant) -> bool {
        if let Foreign::Deleted { uid, owner } = change {
            self.contests.vanished(target, uid, owner, now);
        }
        self.contests.held_back(target, now).is_none()
    }
}
