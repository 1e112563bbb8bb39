//! Per-guest leadership (`--leader-elect=per-guest`): one Lease per guest,
//! the guests spread over the replicas, Leases the only coordination.
//!
//! Owns deciding which guests this replica leads: a presence Lease per
//! replica (so every replica can count the live ones), one election per
//! guest it stands for (each one [`crate::leader::LeaderElector`], with
//! client-go's rules), the fair share `ceil(guests / live replicas)` with
//! hysteresis, and the order of a handover (the guest's workers stop and
//! drain, then its Lease is released). It never runs, drains or stops
//! workers and never writes anything but these Leases: it tells the
//! supervisor, through a [`GuestLease`] per led guest, when a guest may run
//! and when it must stop, and the supervisor acts.
//!
//! # Leases
//! All in the host's namespace, all labelled
//! `wasmctrl.dev/lease-group: GROUP` (`GROUP` is the host's lease name):
//! - `GROUP-g-GUEST` (`wasmctrl.dev/lease-role: guest`): who runs `GUEST`;
//! - `GROUP-r-IDENTITY` (`wasmctrl.dev/lease-role: replica`): this replica
//!   is alive.
//! - `GROUP-s-GUEST-BUCKET` (role `guest`, and `wasmctrl.dev/bucket`): with
//!   key sharding, who reconciles the keys of that bucket of `GUEST`
//!   ([`Shards`]). The rule counts buckets like guests: both are *units*.
//!
//! Names are DNS-1123 labels; one that had to be changed or cut to 63
//! characters ends in a hash of what it would have been (see [`dns_label`]).
//!
//! # The rule
//! Every retry period a replica lists the group's Leases and judges each
//! holder's validity by its own clock (as client-go). With `L` live
//! replicas and `G` guests, its share is `ceil(G / L)`. Leading more than
//! its share for [`SETTLE_ROUNDS`] rounds in a row, it gives the surplus
//! up; leading and standing for fewer, it stands for free guests (absent,
//! released or expired Leases) in its own order (rendezvous hashing), so
//! replicas racing for free guests mostly want different ones. A guest's
//! Lease has one winner (resourceVersion-guarded writes).
//!
//! A replica writes its presence Lease from the moment leadership starts,
//! which the binary does before loading the guests. It stands for nothing
//! until a retry period after that, and only for the guests the supervisor
//! names ([`GuestLeases::set_guests`], each once its caches have synced
//! there; a change starts a round at once). Replicas started together thus
//! count each other before any stands for a guest.
//!
//! # Handover
//! - Lost (the renew deadline passed, or another holder appeared): the
//!   guest's workers stop at once, before any other replica can see the
//!   Lease expire; the process goes on, and this replica stays a candidate.
//! - Given up (surplus, SIGTERM, guest removed): the guest stops taking
//!   keys, its in-flight reconciles finish, and only then is its Lease
//!   released, so the next holder starts at once.
//!
//! # Layout
//! - `naming`: Lease names and labels.
//! - `share`: the spreading rule (pure).
//! - `observe`: what the listed Leases show, judged by the local clock.
//! - `lease`: [`GuestLease`], the handshake with the supervisor.
//! - `shards`: a sharded guest's keys in buckets, and the gate a key
//!   passes ([`Shards`]).
//! - `shared`: what the coordinator and the supervisor's side share.
//! - `coordinator`: the rounds, the electors, handovers.

mod coordinator;
mod lease;
mod naming;
mod observe;
mod shards;
mod share;
mod shared;

use std::collections::BTreeSet;
use std::sync::Arc;

use kube::Client;
use tokio::sync::{mpsc, oneshot};

use crate::leader::LeaderElectionConfig;
use crate::metrics::Metrics;
use crate::permissions::{check, Checked, Need, PermissionError};
use crate::sync::lock;

pub use lease::{GuestLease, Running, Stop};
pub use naming::{bucket_lease, dns_label, guest_lease, replica_lease, unit};
pub use shards::{bucket_of, Admitted, Shards, SHARD_LABEL_PREFIX};
pub use share::{fair_share, SETTLE_ROUNDS};
pub use shared::GuestHolder;
use shared::Shared;

/// Errors of this module.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The election settings are invalid.
    #[error(transparent)]
    Config(#[from] crate::leader::Error),
    /// The host's credentials may not use the Leases.
    #[error("per-guest leader election on Leases in {namespace}: {denied}")]
    Permissions {
        /// The host's namespace.
        namespace: String,
        /// Every missing permission.
        denied: PermissionError,
    },
}

impl Error {
    /// A short, stable label for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Config(e) => e.metric_label(),
            Error::Permissions { .. } => "permissions",
        }
    }
}

/// Result alias of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The supervisor's side of per-guest leadership. Cheap to clone.
#[derive(Debug, Clone)]
pub struct GuestLeases {
    shared: Arc<Shared>,
}

impl GuestLeases {
    /// Tells which guests the host runs (their declared names), each with
    /// its number of buckets: 0 or 1, one Lease for the guest; more, one
    /// Lease per bucket of its keys. A guest (or bucket) no longer named is
    /// given up.
    pub fn set_guests(&self, guests: impl IntoIterator<Item = (String, u32)>) {
        let units: BTreeSet<String> = guests
            .into_iter()
            .flat_map(|(guest, buckets)| {
                let units: Vec<String> = if buckets > 1 {
                    (0..buckets)
                        .map(|b| naming::unit(&guest, Some(b)))
                        .collect()
                } else {
                    vec![guest]
                };
                units
            })
            .collect();
        let mut guests = lock(&self.shared.guests);
        if *guests != units {
            *guests = units;
            self.shared.guests_changed.notify_one();
        }
    }

    /// The lead of the whole guest `guest`, if this replica leads it now.
    pub fn lease(&self, guest: &str) -> Option<GuestLease> {
        self.lease_of_unit(guest)
    }

    pub(crate) fn lease_of_unit(&self, unit: &str) -> Option<GuestLease> {
        lock(&self.shared.led)
            .get(unit)
            .filter(|l| l.is_leader())
            .cloned()
    }

    /// How many buckets of `guest` this replica leads now.
    pub fn buckets_led(&self, guest: &str) -> Vec<u32> {
        lock(&self.shared.led)
            .iter()
            .filter(|(_, l)| l.is_leader())
            .filter_map(|(u, _)| match naming::guest_of(u) {
                (g, Some(b)) if g == guest => Some(b),
                _ => None,
            })
            .collect()
    }

    /// Waits for the next guest this replica starts leading, or the guest
    /// of the next bucket led or no longer led here; `None` once the
    /// coordinator is gone. One caller at a time.
    pub async fn next_led(&self) -> Option<String> {
        let unit = self.shared.led_rx.lock().await.recv().await?;
        Some(naming::guest_of(&unit).0.to_string())
    }

    /// Who holds `guest`'s Lease (a whole guest's), as last listed.
    pub fn holder(&self, guest: &str) -> Option<GuestHolder> {
        lock(&self.shared.holders).get(guest).cloned()
    }

    /// Who holds each bucket's Lease of the sharded `guest`, as last listed.
    pub fn bucket_holders(&self, guest: &str) -> Vec<(u32, GuestHolder)> {
        lock(&self.shared.holders)
            .iter()
            .filter_map(|(u, h)| match naming::guest_of(u) {
                (g, Some(b)) if g == guest => Some((b, h.clone())),
                _ => None,
            })
            .collect()
    }

    /// Leases with no coordinator: nothing is ever led (tests).
    #[cfg(test)]
    pub(crate) fn detached() -> Self {
        let (led_tx, led_rx) = mpsc::unbounded_channel();
        GuestLeases {
            shared: Arc::new(Shared::new(led_tx, led_rx)),
        }
    }

    /// Gives `guest` up although this replica leads it: the supervisor could
    /// not start it (a fresh controller's preflight failed, say). Its Lease
    /// is released at the next round and this replica does not stand for
    /// it again for a lease duration, so another replica may take it.
    pub fn give_up(&self, guest: &str) {
        lock(&self.shared.give_up).insert(guest.to_string());
    }

    /// Stops standing for new guests (the host is shutting down).
    pub fn closing(&self) {
        self.shared
            .closing
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Per-guest leadership, checked but not started.
pub struct PerGuestElection {
    client: Client,
    config: LeaderElectionConfig,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for PerGuestElection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerGuestElection")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl PerGuestElection {
    /// Checks `config` (its `lease_name` is the group every Lease name
    /// starts with) and that the host may `get`, `list`, `create` and
    /// `update` Leases in `config.namespace`; fails now, naming what is
    /// missing. If the API server cannot answer access reviews, that is
    /// logged and the election goes ahead.
    pub async fn preflight(
        client: &Client,
        config: LeaderElectionConfig,
    ) -> Result<(Self, GuestLeases)> {
        config.validate()?;
        let ns = Some(config.namespace.as_str());
        let needs = ["get", "list", "create", "update"]
            .map(|verb| Need::new(verb, "coordination.k8s.io", "leases", ns, None));
        match check(client, &needs).await {
            Ok(Checked::Allowed) => {}
            Ok(unavailable) => tracing::warn!("per-guest leader election: {unavailable}"),
            Err(denied) => {
                return Err(Error::Permissions {
                    namespace: config.namespace.clone(),
                    denied,
                })
            }
        }
        let (led_tx, led_rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared::new(led_tx, led_rx));
        let leases = GuestLeases {
            shared: shared.clone(),
        };
        let election = PerGuestElection {
            client: client.clone(),
            config,
            shared,
        };
        Ok((election, leases))
    }

    /// Starts the rounds: this replica's presence Lease at once; guests
    /// are stood for once [`GuestLeases::set_guests`] names them. Start it
    /// before loading the guests, so replicas started together see each
    /// other first.
    pub fn start(self, metrics: Arc<Metrics>) -> PerGuestHandle {
        let (stop, stop_rx) = oneshot::channel();
        let coordinator =
            coordinator::Coordinator::new(self.client, self.config, self.shared, metrics);
        let task = tokio::spawn(coordinator.run(stop_rx));
        PerGuestHandle { stop, task }
    }
}

/// Started per-guest leadership.
#[derive(Debug)]
pub struct PerGuestHandle {
    /// `true`: release every Lease; `false`: let them expire.
    stop: oneshot::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl PerGuestHandle {
    /// Gives every guest up (each once its workers are gone: call this after
    /// the supervisor drained) and releases every Lease, so other replicas
    /// take over at once.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        if let Err(e) = self.task.await {
            tracing::warn!("per-guest leadership ended abnormally: {e}");
        }
    }

    /// Stops without releasing anything (the Leases expire): for a host
    /// that stopped on an error, whose workers may not have drained.
    pub async fn abort(self) {
        let _ = self.stop.send(false);
        if let Err(e) = self.task.await {
            tracing::warn!("per-guest leadership ended abnormally: {e}");
        }
    }
}
