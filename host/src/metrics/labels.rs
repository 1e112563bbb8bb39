//! The label sets of the host's metric families.

use prometheus_client::encoding::EncodeLabelSet;

/// `{controller}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ControllerLabels {
    /// The guest name.
    pub controller: String,
}

/// `{controller, result}` (`success`, `error`, `requeue_after`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ResultLabels {
    /// The guest name.
    pub controller: String,
    /// The outcome.
    pub result: String,
}

/// `{controller, reason}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ReasonLabels {
    /// The guest name.
    pub controller: String,
    /// Error label (`trap`, `deadline`, `memory`, `conflict`, ...).
    pub reason: String,
}

/// `{resource, reason}` of a failed list or watch.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct WatchFailureLabels {
    /// The informer, e.g. `pods in namespace ml` (through [`super::label_value`]).
    pub resource: String,
    /// See [`crate::failure::watch_failure_reason`].
    pub reason: String,
}

/// `{guest}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct GuestLabels {
    /// The guest name.
    pub guest: String,
}

/// `{guest, reason}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct GuestReasonLabels {
    /// The guest name.
    pub guest: String,
    /// Failure reason.
    pub reason: String,
}

/// `{guest, digest, file}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct GuestInfoLabels {
    /// The guest name.
    pub guest: String,
    /// SHA-256 of the module.
    pub digest: String,
    /// The file it was loaded from.
    pub file: String,
}

/// `{guest, verb}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct WriteLabels {
    /// The guest name.
    pub guest: String,
    /// `apply`, `delete` or `event`.
    pub verb: String,
}

/// `{guest, result}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct GuestResultLabels {
    /// The guest name.
    pub guest: String,
    /// The outcome.
    pub result: String,
}

/// `{guest, manager}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ManagerLabels {
    /// The guest name.
    pub guest: String,
    /// The other field manager.
    pub manager: String,
}

/// `{name}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct NameLabels {
    /// The lease name.
    pub name: String,
}

/// `{code, method, host}` as client-go labels `rest_client_requests_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RequestLabels {
    /// HTTP status code, or `<error>` when there was no response.
    pub code: String,
    /// HTTP method.
    pub method: String,
    /// API server host.
    pub host: String,
}

/// `{verb, host}` as client-go labels `rest_client_request_duration_seconds`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct LatencyLabels {
    /// HTTP method.
    pub verb: String,
    /// API server host.
    pub host: String,
}

/// `{guest, owner}`: the guest refused and the guest owning the object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct OwnerLabels {
    /// The guest whose plan was refused.
    pub guest: String,
    /// The guest that owns the object.
    pub owner: String,
}

/// Labels `{guest, limit}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GuestLimitLabels {
    /// Guest name.
    pub guest: String,
    /// `min_requeue` or `log`.
    pub limit: String,
}

/// Labels `{guest, outcome}` of a shadow's comparisons.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShadowLabels {
    /// The active guest the shadow runs beside.
    pub guest: String,
    /// `same`, `differs`, `error` or `skipped`.
    pub outcome: String,
}
