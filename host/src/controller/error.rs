//! Why a guest's controller could not start or stopped
//! ([`ControllerError`]), with a metric label for each reason. It never
//! retries: the supervisor decides what a failure means.

use crate::discovery::DiscoveryError;
use crate::guest::{GuestError, ManifestError};
use crate::informer::SyncError;
use crate::permissions::PermissionError;

/// Why a guest's controller could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// A type in the manifest could not be resolved.
    #[error("guest {guest}: {source}")]
    Resolve {
        /// The guest.
        guest: String,
        /// The discovery error.
        #[source]
        source: DiscoveryError,
    },
    /// The resources discovery resolved the manifest to are more than the
    /// operator's policy grants.
    #[error("guest {guest}: {source}")]
    Policy {
        /// The guest.
        guest: String,
        /// Every denial.
        #[source]
        source: crate::guest::policy::PolicyDenied,
    },
    /// The host's credentials lack permissions the guest needs.
    #[error("guest {guest}: {source}")]
    Permissions {
        /// The guest.
        guest: String,
        /// Every missing permission.
        #[source]
        source: PermissionError,
    },
    /// The manifest asks for something the cluster does not offer (a
    /// status write rule for a kind without a status subresource).
    #[error("guest {guest}: invalid manifest: {source}")]
    Manifest {
        /// The guest.
        guest: String,
        /// Which field, and why.
        #[source]
        source: ManifestError,
    },
    /// The guest's `aggregator` export failed or named a key the manifest
    /// does not map to.
    #[error("{0}")]
    Aggregate(#[source] GuestError),
    /// A cache the guest needs cannot sync (or stopped syncing).
    #[error("guest {guest}: {source}")]
    Sync {
        /// The guest.
        guest: String,
        /// Which resource and verb failed.
        #[source]
        source: SyncError,
    },
}

impl ControllerError {
    /// A metric label for why the controller could not start.
    pub fn reason(&self) -> &'static str {
        match self {
            ControllerError::Resolve { .. } => "resolve",
            ControllerError::Policy { .. } => "policy",
            ControllerError::Permissions { .. } => "permissions",
            ControllerError::Manifest { .. } => "manifest",
            ControllerError::Aggregate(e) => e.reason(),
            ControllerError::Sync { .. } => "sync",
        }
    }

    /// The kind the guest needs that the API server does not serve (yet),
    /// when that is why the controller could not start: the guest can
    /// wait for it (a CRD being installed) instead of failing.
    pub fn kind_not_served(&self) -> Option<&str> {
        match self {
            ControllerError::Resolve { source, .. } if source.is_not_served() => Some(&source.gvk),
            _ => None,
        }
    }
}
