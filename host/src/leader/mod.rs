//! Leader election over a `coordination.k8s.io/v1` Lease, following
//! client-go's `tools/leaderelection` rules. Owns one Lease (creating,
//! acquiring, renewing, observing and releasing it) and publishes the
//! candidate's [`LeaderState`], translated into the host's [`Leadership`].
//! It never runs workers, never waits for caches, and never writes any
//! object but its Lease: stopping writes when leadership is lost is the
//! host's job; this module's job is to say so at once.
//!
//! # One winner
//! Every update of the Lease is guarded by its resourceVersion (a create,
//! by the Lease not existing yet), so two candidates racing for an expired
//! lease produce exactly one winner (the other gets 409 Conflict).
//!
//! # Rules (as client-go)
//! - A holder's lease is judged expired by **this candidate's local clock**:
//!   `leaseDurationSeconds` after the moment it last *observed a change* of
//!   the lease record. `renewTime` in the record is never compared with the
//!   local clock (clocks of candidates may be skewed); only its change counts.
//!   A candidate may start from what its own process saw of the Lease
//!   before it existed ([`LeaderElector::seen`]): the clock then runs from
//!   that observation, still a local one.
//! - A lease with an empty `holderIdentity` (released) is free at once.
//! - Acquiring sets `holderIdentity`, `leaseDurationSeconds`, `acquireTime` and
//!   `renewTime`, and increments `leaseTransitions` when the holder changes;
//!   renewing only moves `renewTime`. Releasing clears `holderIdentity`, sets
//!   `leaseDurationSeconds` to 1 and both times to now, and keeps
//!   `leaseTransitions`.
//!
//! # Where this is stricter than client-go
//! - The renew deadline is measured from the moment the last *successful*
//!   renewal was sent, and a request still in flight at the deadline is
//!   abandoned. client-go measures it from the start of each renewal round, so
//!   it may hold on for `retry_period + renew_deadline`. Here a leader always
//!   declares itself lost before any other candidate can see its lease expire,
//!   because `renew_deadline < lease_duration` and the others start their
//!   clocks no earlier than that request was sent.
//! - Seeing another holder (or a cleared holder) in the record while leading
//!   is reported as [`LostReason::Taken`] at once rather than after the
//!   deadline, and the elector never tries to lead again: a lost leader exits.
//! - `leaseDurationSeconds` is `lease_duration` rounded *up* to whole seconds,
//!   so others never wait less than configured.
//!
//! # Use
//! ```no_run
//! # async fn host(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use wasmctrl::leader::{LeaderElectionConfig, LeaderElector, Termination};
//!
//! let config = LeaderElectionConfig::default()
//!     .namespace("ops")
//!     .lease_name("gpu-summary")
//!     .identity(wasmctrl::leader::default_identity().unwrap_or_default());
//! let elector = LeaderElector::new(client, config)?.spawn();
//! let mut status = elector.status();
//! if status.until_leading().await.is_ok() {
//!     // start workers; give writers `elector.status()` to check `is_leader()`
//!     let _state = status.until_not_leading().await; // lost: stop writing, exit non-zero
//! }
//! match elector.stop().await? {
//!     Termination::Stopped { .. } => {}
//!     Termination::Lost(reason) => return Err(reason.into()),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Layout
//! - `config`: [`LeaderElectionConfig`], its validation, [`default_identity`].
//! - `lock`: the Lease itself — reading, writing, the election record.
//! - `elector`: the state machine ([`LeaderElector`], [`LeaderHandle`]).
//! - `status`: what others read ([`LeaderStatus`], [`LeaderState`]).
//! - `bridge`: the host's side — [`Leadership`], the preflight, starting
//!   the elector once caches are warm ([`HostElection`]), the
//!   `leader_election_master_status` gauge.

mod bridge;
mod config;
mod elector;
mod lock;
mod status;
#[cfg(test)]
mod tests;

use std::time::Duration;

use crate::permissions::PermissionError;

pub use bridge::{ElectionHandle, HostElection, Leadership};
pub use config::{default_identity, LeaderElectionConfig, JITTER_FACTOR};
pub use elector::{LeaderElector, LeaderHandle};
pub use status::{LeaderState, LeaderStatus, LostReason, Termination};

/// Errors of this module.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configured lease name is empty.
    #[error("leader election: the lease name is empty")]
    EmptyLeaseName,
    /// The configured namespace is empty.
    #[error("leader election: the lease namespace is empty")]
    EmptyNamespace,
    /// The configured identity is empty (every candidate needs a unique one).
    #[error("leader election: the candidate identity is empty")]
    EmptyIdentity,
    /// A duration that must be positive is zero.
    #[error("leader election: {field} must be greater than zero")]
    ZeroDuration {
        /// Which setting (`lease_duration`, `renew_deadline`, `retry_period`).
        field: &'static str,
    },
    /// `lease_duration <= renew_deadline`: a leader could still think it leads
    /// after others consider its lease expired.
    #[error("leader election: lease duration ({lease_duration:?}) must be greater than renew deadline ({renew_deadline:?})")]
    LeaseNotLongerThanRenewDeadline {
        /// Configured lease duration.
        lease_duration: Duration,
        /// Configured renew deadline.
        renew_deadline: Duration,
    },
    /// `renew_deadline <= JITTER_FACTOR * retry_period`: a leader would not
    /// get a single retry before giving up.
    #[error("leader election: renew deadline ({renew_deadline:?}) must be greater than {JITTER_FACTOR} x retry period ({retry_period:?})")]
    RenewDeadlineTooShort {
        /// Configured renew deadline.
        renew_deadline: Duration,
        /// Configured retry period.
        retry_period: Duration,
    },
    /// The lease duration does not fit the Lease's `leaseDurationSeconds` (i32).
    #[error("leader election: lease duration {0:?} is too long for leaseDurationSeconds")]
    LeaseDurationTooLong(Duration),
    /// Releasing the lease on stop failed; others take over when it expires.
    #[error("leader election: releasing lease {lease} failed: {source}")]
    Release {
        /// `namespace/name` of the lease.
        lease: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Releasing the lease on stop did not finish within the renew deadline.
    #[error("leader election: releasing lease {lease} timed out after {after:?}")]
    ReleaseTimedOut {
        /// `namespace/name` of the lease.
        lease: String,
        /// How long it waited.
        after: Duration,
    },
    /// The elector task panicked or was aborted.
    #[error("leader election: the elector task ended abnormally: {0}")]
    Task(String),
    /// The host's credentials may not use the Lease (preflight of
    /// [`HostElection::preflight`]).
    // `denied` is in the message and deliberately not a `#[source]`, so
    // `{:#}` chains print it once.
    #[error("leader election on Lease {lease}: {denied}")]
    Permissions {
        /// The lease name.
        lease: String,
        /// Every missing permission.
        denied: PermissionError,
    },
}

impl Error {
    /// A short, stable label for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::EmptyLeaseName
            | Error::EmptyNamespace
            | Error::EmptyIdentity
            | Error::ZeroDuration { .. }
            | Error::LeaseNotLongerThanRenewDeadline { .. }
            | Error::RenewDeadlineTooShort { .. }
            | Error::LeaseDurationTooLong(_) => "config",
            Error::Release { .. } => "release",
            Error::ReleaseTimedOut { .. } => "release_timeout",
            Error::Task(_) => "task",
            Error::Permissions { .. } => "permissions",
        }
    }
}

/// Result alias of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;
