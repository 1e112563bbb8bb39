//! The bridge from the elector to the host: leadership as the rest of the
//! process sees it. Owns [`Leadership`] (the one signal the supervisor
//! gates its workers on), the election's preflight (configuration and RBAC
//! on the Lease, checked before any cache starts), starting the elector
//! once the caches are warm, translating its [`LeaderState`] into
//! [`Leadership`], and the `leader_election_master_status{name}` gauge. It
//! never runs, drains or stops workers: it publishes, and the supervisor
//! acts.
//!
//! # Use
//! ```no_run
//! # async fn host(client: kube::Client, gauge: prometheus_client::metrics::gauge::Gauge)
//! # -> Result<(), wasmctrl::leader::Error> {
//! use wasmctrl::leader::{HostElection, LeaderElectionConfig};
//!
//! let config = LeaderElectionConfig::default().identity("replica-1");
//! let (election, leadership) = HostElection::preflight(&client, config).await?;
//! // ... start informers gated on `leadership`, wait for them to sync ...
//! let election = election.start(gauge);
//! // ... run until shutdown; then, once every worker has drained:
//! election.stop().await;
//! # drop(leadership);
//! # Ok(())
//! # }
//! ```

use kube::Client;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::watch;

use crate::permissions::{check, Checked, Need};

use super::{
    Error, LeaderElectionConfig, LeaderElector, LeaderHandle, LeaderState, LeaderStatus, Result,
};

/// Leadership as the host sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leadership {
    /// Not leading (yet): caches stay warm, no worker runs.
    Waiting,
    /// Leading: workers run.
    Leading,
    /// Lost: stop every write and exit. Carries the elector's final state.
    Lost(String),
}

impl From<LeaderState> for Leadership {
    /// A follower waits, a leader leads; a lost or stopped elector is lost
    /// to the host either way (an elector never leads again), with its final
    /// state, debug-printed, as the reason.
    fn from(state: LeaderState) -> Self {
        match state {
            LeaderState::Follower { .. } => Leadership::Waiting,
            LeaderState::Leader { .. } => Leadership::Leading,
            ended @ (LeaderState::Lost(_) | LeaderState::Stopped) => {
                Leadership::Lost(format!("{ended:?}"))
            }
        }
    }
}

/// The host's election, checked but not started: created before the caches
/// start (so it can fail the process early and hand out the
/// [`Leadership`] receiver), started once they are warm (a follower is a
/// warm standby, ready to take over).
#[derive(Debug)]
pub struct HostElection {
    /// `None`: no election, this replica always leads.
    elector: Option<LeaderElector>,
    leadership: watch::Sender<Leadership>,
}

impl HostElection {
    /// No election: the host leads from the start.
    pub fn always_leading() -> (Self, watch::Receiver<Leadership>) {
        let (leadership, rx) = watch::channel(Leadership::Leading);
        let election = HostElection {
            elector: None,
            leadership,
        };
        (election, rx)
    }

    /// An election on `config`'s Lease; the host waits until it leads.
    ///
    /// Fails now, naming what is missing, rather than as a follower that can
    /// never become leader: the configuration must be valid and the host's
    /// credentials must allow `get` and `update` on the Lease and `create`
    /// on Leases in its namespace. If the API server cannot answer access
    /// reviews, that is logged and the election goes ahead.
    pub async fn preflight(
        client: &Client,
        config: LeaderElectionConfig,
    ) -> Result<(Self, watch::Receiver<Leadership>)> {
        let elector = LeaderElector::new(client.clone(), config)?;
        let config = elector.config();
        let lease = config.lease_name.as_str();
        let ns = Some(config.namespace.as_str());
        let needs = [
            Need::new("get", "coordination.k8s.io", "leases", ns, Some(lease)),
            Need::new("update", "coordination.k8s.io", "leases", ns, Some(lease)),
            Need::new("create", "coordination.k8s.io", "leases", ns, None),
        ];
        match check(client, &needs).await {
            Ok(Checked::Allowed) => {}
            Ok(unavailable) => tracing::warn!("leader election: {unavailable}"),
            Err(denied) => {
                return Err(Error::Permissions {
                    lease: lease.to_owned(),
                    denied,
                })
            }
        }
        let (leadership, rx) = watch::channel(Leadership::Waiting);
        let election = HostElection {
            elector: Some(elector),
            leadership,
        };
        Ok((election, rx))
    }

    /// Starts electing (nothing to start without an election) and keeps
    /// `master_status` — the `leader_election_master_status{name}` gauge —
    /// at 1 while this replica leads, else 0 (always 1 without an election).
    pub fn start(self, master_status: Gauge) -> ElectionHandle {
        let Some(elector) = self.elector else {
            master_status.set(1);
            return ElectionHandle {
                leader: None,
                _always_leading: Some(self.leadership),
            };
        };
        master_status.set(0);
        let leader = elector.spawn();
        tokio::spawn(publish(leader.status(), self.leadership, master_status));
        ElectionHandle {
            leader: Some(leader),
            _always_leading: None,
        }
    }
}

/// A started [`HostElection`]. End it with [`stop`](Self::stop) after a
/// clean shutdown, or [`abort`](Self::abort) after a failed one.
#[derive(Debug)]
pub struct ElectionHandle {
    leader: Option<LeaderHandle>,
    /// Keeps an always-leading host's signal open until the host is done.
    _always_leading: Option<watch::Sender<Leadership>>,
}

impl ElectionHandle {
    /// Stops electing and releases the lease, so a standby takes over at
    /// once. Call it only once every worker has stopped and drained. A
    /// failed release is logged; the lease then expires on its own.
    pub async fn stop(self) {
        let Some(leader) = self.leader else {
            return;
        };
        match leader.stop().await {
            Ok(t) => tracing::info!(?t, "leader election stopped"),
            Err(e) => tracing::warn!("cannot release the lease; it will expire: {e}"),
        }
    }

    /// Stops electing without releasing the lease (it expires on its own):
    /// for a host that stopped on an error, whose workers may not have
    /// drained.
    pub fn abort(self) {
        if let Some(leader) = self.leader {
            leader.abort();
        }
    }
}

/// Translates the elector's state into the host's [`Leadership`] and the
/// master-status gauge, until leadership ends.
pub(super) async fn publish(
    mut status: LeaderStatus,
    leadership: watch::Sender<Leadership>,
    master_status: Gauge,
) {
    if let Err(state) = status.until_leading().await {
        let _ = leadership.send(Leadership::from(state));
        return;
    }
    tracing::info!(lease = %status.lease_name(), "became the leader; starting workers");
    master_status.set(1);
    let _ = leadership.send(Leadership::Leading);
    let state = status.until_not_leading().await;
    master_status.set(0);
    let _ = leadership.send(Leadership::from(state));
}
