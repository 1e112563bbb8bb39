//! What a candidate's state looks like from outside: [`LeaderState`], why a
//! leader lost ([`LostReason`]), how an elector ended ([`Termination`]), and
//! the cheap, cloneable [`LeaderStatus`] that workers, writers, readiness and
//! metrics read.
//!
//! Owns reading the state. It never changes it: only the elector publishes
//! a state, through the watch channel behind every [`LeaderStatus`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::watch;
use tokio::time::{sleep_until, Instant};

/// Why a leader stopped being leader without being asked to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LostReason {
    /// No renewal succeeded within the renew deadline (API unreachable,
    /// slow, or refusing).
    #[error("could not renew the lease within the renew deadline (last error: {})", last_error.as_deref().unwrap_or("none: requests did not complete"))]
    RenewDeadlineExceeded {
        /// The last renewal error seen, if any request completed.
        last_error: Option<String>,
    },
    /// The lease record names another holder (None: the holder was cleared
    /// by someone else).
    #[error("the lease was taken over by {}", holder.as_deref().unwrap_or("nobody (holder cleared)"))]
    Taken {
        /// The holder now in the record.
        holder: Option<String>,
    },
    /// The elector task is gone (aborted or panicked) while leading.
    #[error("the leader elector stopped running")]
    ElectorGone,
}

impl LostReason {
    /// A short, stable label for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            LostReason::RenewDeadlineExceeded { .. } => "renew_deadline",
            LostReason::Taken { .. } => "taken",
            LostReason::ElectorGone => "elector_gone",
        }
    }
}

/// Where a candidate stands. Transitions only go
/// `Follower → Leader → (Lost | Stopped)` or `Follower → Stopped`: an elector
/// that lost never leads again (the process is expected to exit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaderState {
    /// Waiting to acquire. `holder` is the holder as last observed (None: not
    /// read yet, or no holder).
    Follower {
        /// Current holder as last observed.
        holder: Option<String>,
    },
    /// Holding the lease.
    Leader {
        /// The instant the elector declares the lease lost unless it renews
        /// first. [`LeaderStatus::is_leader`] is false from this instant even
        /// if the elector task has not run yet.
        valid_until: Instant,
    },
    /// Leadership ended without being asked to. Terminal.
    Lost(LostReason),
    /// Stopped on request (after releasing the lease if it held it). Terminal.
    Stopped,
}

impl LeaderState {
    /// The value of `leader_election_master_status{name}`: 1 while leading, else 0.
    pub fn master_status(&self) -> i64 {
        i64::from(matches!(self, LeaderState::Leader { .. }))
    }
}

/// A cheap, cloneable view of one elector's state, for whoever needs to know
/// whether this replica leads: the host's workers and writers, readiness,
/// and metrics.
#[derive(Debug, Clone)]
pub struct LeaderStatus {
    pub(super) rx: watch::Receiver<LeaderState>,
    pub(super) lease_name: Arc<str>,
    pub(super) conflicts: Arc<AtomicU64>,
}

impl LeaderStatus {
    /// The current state. If the elector task is gone without reporting a
    /// terminal state, a leader reads as `Lost(ElectorGone)` and a follower
    /// as `Stopped`.
    pub fn state(&self) -> LeaderState {
        let closed = self.rx.has_changed().is_err();
        let state = self.rx.borrow().clone();
        match state {
            LeaderState::Leader { .. } if closed => LeaderState::Lost(LostReason::ElectorGone),
            LeaderState::Follower { .. } if closed => LeaderState::Stopped,
            s => s,
        }
    }

    /// True while this replica holds the lease and its renew deadline has not
    /// passed. Check it before every write.
    pub fn is_leader(&self) -> bool {
        match self.state() {
            LeaderState::Leader { valid_until } => Instant::now() < valid_until,
            _ => false,
        }
    }

    /// `leader_election_master_status{name}`: 1 while [`Self::is_leader`], else 0.
    pub fn master_status(&self) -> i64 {
        i64::from(self.is_leader())
    }

    /// The lease name: the `name` label of `leader_election_master_status`.
    pub fn lease_name(&self) -> &str {
        &self.lease_name
    }

    /// How many of this candidate's Lease writes were rejected with 409
    /// Conflict (another writer got there first).
    pub fn conflicts(&self) -> u64 {
        self.conflicts.load(Ordering::Relaxed)
    }

    /// Waits until this replica leads. `Err` carries the terminal state if the
    /// elector stopped (or is gone) before that.
    pub async fn until_leading(&mut self) -> Result<(), LeaderState> {
        let reached = self
            .rx
            .wait_for(|s| !matches!(s, LeaderState::Follower { .. }))
            .await
            .map(|s| s.clone());
        match reached {
            Ok(LeaderState::Leader { .. }) => Ok(()),
            Ok(other) => Err(other),
            Err(_) => Err(self.state()),
        }
    }

    /// Waits until this replica is not the leader and returns that state
    /// (`Lost`, or `Stopped` if stopped on request). Returns at once if it
    /// does not lead now. Resolves at the renew deadline even if the elector
    /// task has not run, so waiting on this is as prompt as [`Self::is_leader`];
    /// in that case the reason is `RenewDeadlineExceeded { last_error: None }`
    /// and the elector's [`Termination`] carries the last error.
    pub async fn until_not_leading(&mut self) -> LeaderState {
        loop {
            let current = self.rx.borrow_and_update().clone();
            let LeaderState::Leader { valid_until } = current else {
                return self.state();
            };
            tokio::select! {
                changed = self.rx.changed() => {
                    if changed.is_err() {
                        return self.state();
                    }
                }
                () = sleep_until(valid_until) => {
                    // The elector reports the same deadline with its last
                    // error, unless this side noticed first.
                    return match self.state() {
                        LeaderState::Leader { .. } | LeaderState::Follower { .. } => {
                            LeaderState::Lost(LostReason::RenewDeadlineExceeded { last_error: None })
                        }
                        terminal => terminal,
                    };
                }
            }
        }
    }
}

/// How [`LeaderElector::run`](super::LeaderElector::run) ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Termination {
    /// Stopped on request. `released` is true if it led and cleared the
    /// holder so a standby can take over at once.
    Stopped {
        /// Whether the lease was released.
        released: bool,
    },
    /// Leadership was lost; the host must stop writing and exit non-zero.
    Lost(LostReason),
}
