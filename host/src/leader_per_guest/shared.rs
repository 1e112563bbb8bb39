//! What the coordinator and the supervisor's side ([`super::GuestLeases`])
//! share: the guests the host runs, the guests this replica leads, who
//! holds each guest's Lease, and the channel of newly led guests.
//!
//! Owns nothing but the shared state: it never decides and never talks to
//! the API server.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

use tokio::sync::{mpsc, Notify};

use super::lease::GuestLease;

/// Who holds one guest's Lease, as last listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestHolder {
    /// The Lease's name.
    pub lease: String,
    /// Its holder, when held and not expired by this replica's clock.
    pub holder: Option<String>,
}

/// What the coordinator and the supervisor share.
#[derive(Debug)]
pub(super) struct Shared {
    /// Every unit (whole guest, or bucket of a sharded guest) the host
    /// runs, as the supervisor last said.
    pub(super) guests: Mutex<BTreeSet<String>>,
    /// Notified when `guests` changes: the coordinator's next round comes
    /// at once instead of a retry period later.
    pub(super) guests_changed: Notify,
    /// The units this replica leads.
    pub(super) led: Mutex<BTreeMap<String, GuestLease>>,
    /// Each unit's Lease and holder, as last listed.
    pub(super) holders: Mutex<BTreeMap<String, GuestHolder>>,
    /// Each newly led unit, for the supervisor.
    pub(super) led_tx: mpsc::UnboundedSender<String>,
    pub(super) led_rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<String>>,
    /// Stopping: no new candidacy.
    pub(super) closing: AtomicBool,
    /// Guests the supervisor could not start although this replica leads
    /// them: to be given up.
    pub(super) give_up: Mutex<BTreeSet<String>>,
}

impl Shared {
    pub(super) fn new(
        led_tx: mpsc::UnboundedSender<String>,
        led_rx: mpsc::UnboundedReceiver<String>,
    ) -> Self {
        Shared {
            guests: Mutex::default(),
            guests_changed: Notify::new(),
            led: Mutex::default(),
            holders: Mutex::default(),
            led_tx,
            led_rx: tokio::sync::Mutex::new(led_rx),
            closing: AtomicBool::new(false),
            give_up: Mutex::default(),
        }
    }
}
