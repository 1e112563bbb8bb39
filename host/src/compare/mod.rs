//! The pure compare of the write path: what a document looks like as the
//! API server stores it, whether the live object already holds it, whether
//! an apply is still needed to remove a field this manager set before, and
//! the merge patch that leaves what a forced apply would. Functions of JSON
//! only: it never reads a cache, never sends a request and never keeps
//! state (the actuator decides with it; the guard reads it).
//!
//! # Layout
//! - `stored`: the stored-form compare ([`contains`], [`drops_owned_field`])
//!   and the rewrites to the stored form ([`sent_form`], [`compare_form`]).
//! - `merge`: the merge patch standing in for an apply ([`merge_patch_for`]).
//! - `managed`: who owns what, read from `managedFields`.
//! - `meta`: the live object's resourceVersion and controller owner.

mod managed;
mod merge;
mod meta;
mod stored;

pub use merge::merge_patch_for;
pub use meta::{controller_uid, resource_version};
pub use stored::{compare_form, contains, drops_owned_field, sent_form};
