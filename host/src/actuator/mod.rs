//! The actuator: makes a validated plan true in the cluster. Owns every
//! write a guest causes, in the plan's order, and its Events: applies,
//! patches, deletes, finalizers (and their dry runs). It never judges a
//! write war or a hot loop, never turns a write pinned to an object the
//! guest saw into a create, never calls back into the controller, and
//! never retries in line: any failure goes back to the caller, which
//! requeues with backoff. It reads the watched caches only for uids and finalizer lists.
//!
//! # Writes
//! - Server-side applies with the guest's field manager
//!   (`wasmctrl/<guest>`) and force — create-or-update, update-only and
//!   status-subresource —, deletes, and finalizer patches (`writes`,
//!   `finalizers`).
//! - An apply that would change only some entries of string maps goes as a
//!   merge patch of those entries ([`crate::compare::merge_patch_for`]; `null` for an entry this
//!   manager alone owns that the plan dropped), and as the full apply
//!   whenever the patch could not leave the same object: metadata,
//!   identity or a non-map field changing, an atomic map, a map dropped
//!   whole, a dropped entry another manager also owns, or a cached object
//!   without `managedFields`.
//! - An entry-wise aggregate's document goes as a merge patch of its
//!   changed entries decided without reading the live object, at a
//!   resourceVersion it knows ([`crate::outputs::Chains`]).
//! - Each is skipped when the cached live object already agrees, as the
//!   server stores it ([`crate::compare`]; so a
//!   reconcile never triggers itself), and every write aimed at an object
//!   the guest saw is pinned to its uid: when that object is gone or
//!   replaced the write is dropped and counted.
//! - Names and namespaces reach request paths only as single path segments
//!   ([`crate::urlpath`]).
//! - The write allowlist and pinning were already enforced when the plan
//!   was validated.
//! - A write to an object the host merge-patched waits (up to 2 s) for the
//!   watch echo of its previous write, so it is decided on the current
//!   object; entries written by patch are owned through the manager's
//!   `Update` entry of `managedFields`, which a later full apply does not
//!   remove, so after such an apply the echo wakes the key once more to
//!   remove by patch what the apply left.
//!
//! # Outputs and events
//! It reads the live state of what the guest writes from
//! [`crate::outputs::Outputs`] and tells its echo bookkeeping of each
//! write, which keeps the watch echo of our own writes from waking a
//! reconcile. Events go through the host's recorder
//! ([`crate::events`]), each emitted once per appearance rather than once
//! per reconcile, and only about an object the guest watches or may write
//! (`regarding`; any other is refused, logged and counted).
//!
//! # Other writers and its own echoes
//! It never judges a write war or a hot loop itself: the controller hands
//! [`Actuator::execute`] the guard's [`crate::guard::Permit`], which says,
//! write by write, what a write war over fields or existence holds back,
//! and takes what the plan wrote (which may declare a hot loop). The
//! actuator reports what the guard declares: a warning log, a metric and a
//! Warning event.
//!
//! # Layout
//! - `execute`: [`Actuator`] and a plan's execution, its events and the
//!   reports of write wars and hot loops.
//! - `writes`: applies (or the merge patch standing in for one), entry-wise
//!   patches and deletes. `finalizers`: finalizer patches.
//! - `regarding`: which objects Events may regard. `dry_run`: dry runs.
//! - `error`: [`ActuatorError`]. `step`: what a write amounted to.

pub mod dry_run;
mod error;
mod execute;
mod finalizers;
pub mod regarding;
mod step;
mod writes;

pub use error::ActuatorError;
pub use execute::{Actuator, Watched};
pub use finalizers::{add_patch, remove_patch, Current, OnServer};
pub use step::Executed;
pub use writes::gone;
