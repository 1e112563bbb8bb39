//! Why a plan could not be carried out ([`ActuatorError`], with its metric
//! label), and the one check every request path passes
//! ([`path_segments`]). It never sends a request.

use crate::discovery::DiscoveryError;
use crate::guest::ObjectKey;

/// Why a plan could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum ActuatorError {
    /// The type could not be resolved through discovery.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// An API request failed.
    #[error("{verb} {target} failed: {source}")]
    Api {
        /// "apply", "update", "apply-status", "delete", "add-finalizer",
        /// "remove-finalizer" or "event".
        verb: &'static str,
        /// The object.
        target: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A name or namespace that cannot be one URL path segment: refused
    /// before any request is built (plan validation refuses it first).
    #[error("refused to build a request path for {target}: {source}")]
    UnsafePath {
        /// The object.
        target: String,
        /// Which value, and why.
        #[source]
        source: crate::urlpath::UnsafeSegment,
    },
    /// A request the host built is unusable (a bug, reported, not a panic).
    #[error("internal: {0}")]
    Internal(String),
}

impl ActuatorError {
    /// Short label for metrics: "conflict", "throttled", "server", "client",
    /// "discovery", "transport", "unsafe_path" or "internal".
    pub fn metric_label(&self) -> &'static str {
        match self {
            ActuatorError::Discovery(_) => "discovery",
            ActuatorError::UnsafePath { .. } => "unsafe_path",
            ActuatorError::Internal(_) => "internal",
            ActuatorError::Api {
                source: kube::Error::Api(s),
                ..
            } => match s.code {
                409 => "conflict",
                429 => "throttled",
                500..=599 => "server",
                _ => "client",
            },
            ActuatorError::Api { .. } => "transport",
        }
    }
}

/// `target`'s namespace and name as URL path segments.
pub(crate) fn path_segments(target: &ObjectKey) -> Result<(Option<String>, String), ActuatorError> {
    let unsafe_path = |source| ActuatorError::UnsafePath {
        target: target.to_string(),
        source,
    };
    let namespace = match &target.namespace {
        Some(ns) => Some(
            crate::urlpath::segment("namespace", ns)
                .map_err(unsafe_path)?
                .into_owned(),
        ),
        None => None,
    };
    let name = crate::urlpath::segment("name", &target.name)
        .map_err(unsafe_path)?
        .into_owned();
    Ok((namespace, name))
}
