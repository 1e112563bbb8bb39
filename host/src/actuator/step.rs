//! What one write, and a whole plan, amounted to: done, skipped, dropped
//! or held back ([`Step`], [`Executed`]), and what a write goes to and a
//! write war is over. Plain values; it never writes.

use std::sync::Arc;

/// How one write ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Sent and accepted; whether someone else changed the object while
    /// it was in flight.
    Done {
        /// Changed by someone else meanwhile.
        changed_meanwhile: bool,
        /// The resourceVersion the write produced, as the object's watch
        /// will report it ("" for a delete that removed it), when known.
        rv: Option<Arc<str>>,
    },
    /// Not needed: the live object already agrees.
    Skipped,
    /// The object the write was pinned to is gone or replaced.
    Dropped,
    /// Not sent: the object is in a write war; writes resume after this.
    HeldBack(std::time::Duration),
}

/// What a write war is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Contested {
    /// Fields we write, which the other manager sets back.
    Fields,
    /// The object's existence: we delete it, the other re-creates it.
    Existence,
    /// The object's existence: we create it, the other deletes it.
    Removal,
}

/// What carrying out a plan amounted to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Executed {
    /// An object we wrote was changed by someone else while the write was
    /// in flight: reconcile the key again.
    pub changed_meanwhile: bool,
    /// Pinned writes dropped because their object was gone or replaced:
    /// reconcile the key again once the caches have caught up.
    pub dropped: usize,
    /// Writes held back by a write war: reconcile the key again after the
    /// shortest of these hold-backs.
    pub held_back: Option<std::time::Duration>,
}

impl Executed {
    pub(crate) fn add(&mut self, step: Step) {
        match step {
            Step::Done {
                changed_meanwhile, ..
            } => self.changed_meanwhile |= changed_meanwhile,
            Step::Skipped => {}
            Step::Dropped => self.dropped += 1,
            Step::HeldBack(d) => {
                self.held_back = Some(self.held_back.map_or(d, |h| h.min(d)));
            }
        }
    }
}

/// What an apply writes to: the object, or its status subresource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    Object,
    Status,
}
