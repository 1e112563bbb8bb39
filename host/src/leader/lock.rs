//! The lease lock: reading and writing the `coordination.k8s.io/v1` Lease
//! that carries the election record.
//!
//! Owns the API calls ([`LeaseLock`]: GET, create, resourceVersion-guarded
//! replace), the translation between a Lease's spec and the election
//! [`Record`], when a holder's record counts as expired ([`Observed`]), and
//! the timestamps written into it ([`WallClock`]). It never decides whether
//! to acquire, renew or release: that is the elector's state machine.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::Client;
use tokio::time::Instant;

/// The Lease operations the elector needs; a trait so the state machine can
/// be tested with paused time against an in-memory lease.
pub(super) trait LeaseLock: Send + Sync + 'static {
    /// GET; Ok(None) if it does not exist.
    fn get(&self) -> impl Future<Output = Result<Option<Lease>, kube::Error>> + Send;
    /// POST a new Lease.
    fn create(&self, lease: &Lease) -> impl Future<Output = Result<Lease, kube::Error>> + Send;
    /// PUT, guarded by `lease.metadata.resourceVersion`.
    fn replace(&self, lease: &Lease) -> impl Future<Output = Result<Lease, kube::Error>> + Send;
}

/// The Lease in the cluster, through the host's client.
pub(super) struct KubeLeases {
    api: Api<Lease>,
    name: String,
}

impl KubeLeases {
    /// The Lease `namespace/name`.
    pub(super) fn new(client: Client, namespace: &str, name: &str) -> Self {
        KubeLeases {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
        }
    }
}

impl LeaseLock for KubeLeases {
    async fn get(&self) -> Result<Option<Lease>, kube::Error> {
        self.api.get_opt(&self.name).await
    }

    async fn create(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.api.create(&PostParams::default(), lease).await
    }

    async fn replace(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.api
            .replace(&self.name, &PostParams::default(), lease)
            .await
    }
}

/// The election fields of a Lease (client-go's `LeaderElectionRecord`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Record {
    pub(super) holder: String,
    pub(super) lease_duration_seconds: i32,
    pub(super) acquire_time: Option<MicroTime>,
    pub(super) renew_time: Option<MicroTime>,
    pub(super) transitions: i32,
}

impl Record {
    pub(super) fn from_spec(spec: Option<&LeaseSpec>) -> Self {
        let Some(spec) = spec else {
            return Record::default();
        };
        Record {
            holder: spec.holder_identity.clone().unwrap_or_default(),
            lease_duration_seconds: spec.lease_duration_seconds.unwrap_or(0),
            acquire_time: spec.acquire_time.clone(),
            renew_time: spec.renew_time.clone(),
            transitions: spec.lease_transitions.unwrap_or(0),
        }
    }

    pub(super) fn to_spec(&self) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.holder.clone()),
            lease_duration_seconds: Some(self.lease_duration_seconds),
            acquire_time: self.acquire_time.clone(),
            renew_time: self.renew_time.clone(),
            lease_transitions: Some(self.transitions),
            ..LeaseSpec::default()
        }
    }
}

/// A record and the local instant this candidate last saw it change.
#[derive(Debug, Clone)]
pub(super) struct Observed {
    pub(super) record: Record,
    pub(super) at: Instant,
}

impl Observed {
    /// client-go's `isLeaseValid`: the holder's lease lasts
    /// `leaseDurationSeconds` from when *we* last saw the record change.
    pub(super) fn is_valid(&self, now: Instant) -> bool {
        let secs = u64::try_from(self.record.lease_duration_seconds).unwrap_or(0);
        self.at + Duration::from_secs(secs) > now
    }
}

/// Wall-clock timestamps for the record, advancing with tokio time (so they
/// are exact under paused time) and truncated to microseconds as MicroTime is.
#[derive(Debug, Clone, Copy)]
pub(super) struct WallClock {
    wall: Timestamp,
    mono: Instant,
}

impl WallClock {
    pub(super) fn new() -> Self {
        WallClock {
            wall: Timestamp::now(),
            mono: Instant::now(),
        }
    }

    pub(super) fn now(&self) -> MicroTime {
        let t = self
            .wall
            .checked_add(self.mono.elapsed())
            .unwrap_or(self.wall);
        MicroTime(Timestamp::from_microsecond(t.as_microsecond()).unwrap_or(t))
    }
}
