//! One guest's Lease as the supervisor holds it while this replica leads
//! the guest: [`GuestLease`], the signal to stop ([`Stop`]) and the
//! [`Running`] guard that says workers may be running.
//!
//! Owns the handshake of a handover: the coordinator asks the guest to stop
//! ([`GuestLease::begin_handover`]), waits until no [`Running`] guard is
//! left, and only then releases the Lease. It never stops workers itself
//! and never writes the Lease: the supervisor stops, the elector writes.

use std::sync::Arc;

use tokio::sync::watch;

use crate::leader::LeaderStatus;

/// Why a guest's workers must stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The Lease is lost (renew deadline passed, or taken): stop every write
    /// at once, no draining. Carries the elector's final state.
    Lost(String),
    /// This replica gives the guest up (surplus, SIGTERM, guest gone): stop
    /// taking keys, let in-flight reconciles finish, then drop the
    /// [`Running`] guard so the Lease can be released.
    HandOver,
}

#[derive(Debug)]
struct Inner {
    /// The unit (see `naming::unit`).
    guest: String,
    lease_name: String,
    status: LeaderStatus,
    handover: watch::Sender<bool>,
    /// How many [`Running`] guards are alive.
    running: watch::Sender<u32>,
}

/// This replica's lead of one guest. Cheap to clone.
#[derive(Debug, Clone)]
pub struct GuestLease {
    inner: Arc<Inner>,
}

impl GuestLease {
    pub(super) fn new(guest: &str, lease_name: &str, status: LeaderStatus) -> Self {
        GuestLease {
            inner: Arc::new(Inner {
                guest: guest.to_string(),
                lease_name: lease_name.to_string(),
                status,
                handover: watch::channel(false).0,
                running: watch::channel(0).0,
            }),
        }
    }

    /// The guest.
    pub fn guest(&self) -> &str {
        super::naming::guest_of(&self.inner.guest).0
    }

    /// The unit: the guest, or one bucket of it.
    pub(super) fn unit(&self) -> &str {
        &self.inner.guest
    }

    /// The Lease's name.
    pub fn lease_name(&self) -> &str {
        &self.inner.lease_name
    }

    /// True while this replica holds the Lease within its renew deadline
    /// and is not handing the guest over. Check it before starting work.
    pub fn is_leader(&self) -> bool {
        !*self.inner.handover.borrow() && self.inner.status.is_leader()
    }

    /// Marks workers of this guest as possibly running until the guard is
    /// dropped: the Lease is not released while one is alive. Take it
    /// *before* checking [`Self::is_leader`], so a handover begun meanwhile
    /// is seen by one side or the other.
    pub fn run(&self) -> Running {
        self.inner.running.send_modify(|n| *n += 1);
        Running(self.inner.clone())
    }

    /// Resolves when the workers must stop: at once if the Lease is lost or
    /// a handover has begun.
    pub async fn until_stop(&self) -> Stop {
        let mut handover = self.inner.handover.subscribe();
        tokio::select! {
            biased;
            lost = self.until_lost() => lost,
            _ = handover.wait_for(|h| *h) => Stop::HandOver,
        }
    }

    /// Resolves when the Lease is lost (at the renew deadline at the
    /// latest, even if the elector task is stuck), or stopped.
    pub async fn until_lost(&self) -> Stop {
        let mut status = self.inner.status.clone();
        let state = status.until_not_leading().await;
        Stop::Lost(format!("{state:?}"))
    }

    /// Whether both are the same lead (the same acquisition of the Lease).
    pub fn same_lead(&self, other: &GuestLease) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Asks the guest's workers to stop ([`Stop::HandOver`]).
    pub(super) fn begin_handover(&self) {
        self.inner.handover.send_replace(true);
    }

    /// Waits until no [`Running`] guard is alive.
    pub(super) async fn until_idle(&self) {
        let mut running = self.inner.running.subscribe();
        let _ = running.wait_for(|n| *n == 0).await;
    }
}

/// Workers of a guest may be running while this lives (see
/// [`GuestLease::run`]).
#[derive(Debug)]
pub struct Running(Arc<Inner>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.send_modify(|n| *n = n.saturating_sub(1));
    }
}
