//! What an election is configured with: [`LeaderElectionConfig`], its
//! validation (client-go's `NewLeaderElector` rules), and the default
//! candidate identity.
//!
//! Owns the settings and the arithmetic on them (`leaseDurationSeconds`). It
//! never talks to the API server and never keeps state: a config is a value.

use std::time::Duration;

use super::{Error, Result};

/// client-go's `JitterFactor`: a candidate waits between `retry_period` and
/// `retry_period * (1 + JITTER_FACTOR)` between acquisition attempts, and the
/// renew deadline must exceed `retry_period * JITTER_FACTOR`.
pub const JITTER_FACTOR: f64 = 1.2;

/// How to elect a leader. `Default` carries client-go's core defaults
/// (15 s / 10 s / 2 s) but no identity: set one that is unique per replica
/// (see [`default_identity`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// Name of the Lease (also the `name` label of `leader_election_master_status`).
    pub lease_name: String,
    /// Namespace of the Lease.
    pub namespace: String,
    /// This candidate's identity, written to `holderIdentity`.
    pub identity: String,
    /// How long others wait, after last seeing the lease record change, before
    /// taking it over.
    pub lease_duration: Duration,
    /// How long a leader keeps trying to renew before declaring itself lost.
    pub renew_deadline: Duration,
    /// Pause between acquisition attempts (jittered) and between renewals.
    pub retry_period: Duration,
    /// Release the lease (clear the holder) when stopped while leading.
    pub release_on_cancel: bool,
    /// Labels the Lease is created with (never changed afterwards), so
    /// one LIST can find a group of Leases.
    pub labels: std::collections::BTreeMap<String, String>,
}

impl Default for LeaderElectionConfig {
    fn default() -> Self {
        LeaderElectionConfig {
            lease_name: "wasmctrl".into(),
            namespace: "default".into(),
            identity: String::new(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: true,
            labels: std::collections::BTreeMap::new(),
        }
    }
}

impl LeaderElectionConfig {
    /// Name of the Lease.
    #[must_use]
    pub fn lease_name(mut self, name: impl Into<String>) -> Self {
        self.lease_name = name.into();
        self
    }

    /// Namespace of the Lease (the host's namespace).
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// This candidate's identity. It must be unique among candidates: a
    /// candidate that finds its own identity in the record treats the lease
    /// as its own and takes it back at once (as client-go does).
    #[must_use]
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = identity.into();
        self
    }

    /// How long a lease lasts without an observed renewal. Shorter means
    /// faster failover but less tolerance to clock *rate* skew between
    /// candidates and to API latency. Written rounded up to whole seconds.
    #[must_use]
    pub fn lease_duration(mut self, d: Duration) -> Self {
        self.lease_duration = d;
        self
    }

    /// How long the leader retries renewing before it declares itself lost.
    /// Must be shorter than the lease duration: the gap is the margin by which
    /// a partitioned leader stops before anyone else may start.
    #[must_use]
    pub fn renew_deadline(mut self, d: Duration) -> Self {
        self.renew_deadline = d;
        self
    }

    /// Pause between attempts. Each attempt is one or two API requests.
    #[must_use]
    pub fn retry_period(mut self, d: Duration) -> Self {
        self.retry_period = d;
        self
    }

    /// Whether stopping a leader releases the lease. Only set this when all
    /// work guarded by the lease has finished before the stop is requested,
    /// or two processes may act at once.
    #[must_use]
    pub fn release_on_cancel(mut self, release: bool) -> Self {
        self.release_on_cancel = release;
        self
    }

    /// Labels the Lease is created with. A Lease that exists already keeps
    /// its labels: they are set only by whoever creates it.
    #[must_use]
    pub fn labels(mut self, labels: std::collections::BTreeMap<String, String>) -> Self {
        self.labels = labels;
        self
    }

    /// Checks the settings the way client-go's `NewLeaderElector` does.
    pub fn validate(&self) -> Result<()> {
        if self.lease_name.is_empty() {
            return Err(Error::EmptyLeaseName);
        }
        if self.namespace.is_empty() {
            return Err(Error::EmptyNamespace);
        }
        if self.identity.is_empty() {
            return Err(Error::EmptyIdentity);
        }
        for (field, d) in [
            ("lease_duration", self.lease_duration),
            ("renew_deadline", self.renew_deadline),
            ("retry_period", self.retry_period),
        ] {
            if d.is_zero() {
                return Err(Error::ZeroDuration { field });
            }
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(Error::LeaseNotLongerThanRenewDeadline {
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
            });
        }
        if self.renew_deadline <= self.retry_period.mul_f64(JITTER_FACTOR) {
            return Err(Error::RenewDeadlineTooShort {
                renew_deadline: self.renew_deadline,
                retry_period: self.retry_period,
            });
        }
        lease_duration_seconds(self.lease_duration)?;
        Ok(())
    }

    pub(super) fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.lease_name)
    }
}

/// `leaseDurationSeconds` for a lease duration: rounded up, never below 1.
pub(super) fn lease_duration_seconds(d: Duration) -> Result<i32> {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    i32::try_from(secs.max(1)).map_err(|_| Error::LeaseDurationTooLong(d))
}

/// The identity a replica should use by default: `$POD_NAME`, else
/// `$HOSTNAME`, else the kernel's host name. None if none is known.
pub fn default_identity() -> Option<String> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    env("POD_NAME").or_else(|| env("HOSTNAME")).or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
    })
}
