//! Type resolution: which API resource (plural, scope) serves a
//! group/version/kind, asked of the API server's discovery once and cached.
//!
//! Owns the cache of resolved kinds, shared by everything that reads or
//! writes a guest's types (informers need the plural of what they watch,
//! the actuator the resource it writes, the permission preflight both). It
//! never reads or writes objects.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::api::{ApiResource, GroupVersionKind};
use kube::Client;

use crate::guest::{Gvk, WatchSpec};
use crate::sync::lock;

/// A kind discovery could not resolve.
#[derive(Debug, thiserror::Error)]
#[error("cannot resolve {gvk} through API discovery: {source}")]
pub struct DiscoveryError {
    /// The kind.
    pub gvk: String,
    /// The client error.
    #[source]
    pub source: kube::Error,
}

/// What discovery says about one kind.
#[derive(Debug, Clone)]
struct Resolved {
    resource: ApiResource,
    /// Subresource names ("status", "scale", ...).
    subresources: Vec<String>,
}

impl DiscoveryError {
    /// Whether the API server simply does not serve the kind (yet): its
    /// group/version is unknown (404) or does not list it — a CRD not
    /// installed. A refusal (401/403), a server error or a transport
    /// failure is not that.
    pub fn is_not_served(&self) -> bool {
        use kube::error::DiscoveryError as Missing;
        match &self.source {
            // By code, not reason: a real kube-apiserver answers an unknown
            // group/version with a plain-text 404, no Status reason.
            kube::Error::Api(status) => status.code == 404,
            kube::Error::Discovery(
                Missing::MissingKind(_)
                | Missing::MissingApiGroup(_)
                | Missing::MissingResource(_)
                | Missing::EmptyApiGroup(_),
            ) => true,
            _ => false,
        }
    }
}

/// Resolves kinds to API resources, caching every answer. Cheap to clone;
/// clones share the cache.
#[derive(Clone)]
pub struct Discovery {
    client: Client,
    resolved: Arc<Mutex<HashMap<Gvk, Resolved>>>,
}

impl std::fmt::Debug for Discovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discovery").finish_non_exhaustive()
    }
}

impl Discovery {
    /// Discovery through `client`.
    pub fn new(client: Client) -> Self {
        Discovery {
            client,
            resolved: Arc::default(),
        }
    }

    async fn resolve(&self, gvk: &Gvk) -> Result<Resolved, DiscoveryError> {
        if let Some(r) = lock(&self.resolved).get(gvk) {
            return Ok(r.clone());
        }
        let (resource, caps) = kube::discovery::pinned_kind(
            &self.client,
            &GroupVersionKind::gvk(&gvk.group, &gvk.version, &gvk.kind),
        )
        .await
        .map_err(|source| DiscoveryError {
            gvk: gvk.to_string(),
            source,
        })?;
        let resolved = Resolved {
            resource,
            subresources: caps
                .subresources
                .into_iter()
                .map(|(ar, _)| ar.plural)
                .collect(),
        };
        lock(&self.resolved).insert(gvk.clone(), resolved.clone());
        Ok(resolved)
    }

    /// The API resource serving `gvk`.
    pub async fn resource(&self, gvk: &Gvk) -> Result<ApiResource, DiscoveryError> {
        Ok(self.resolve(gvk).await?.resource)
    }

    /// Whether `gvk` has a `status` subresource (writes to the main
    /// resource then drop `status`).
    pub async fn has_status(&self, gvk: &Gvk) -> Result<bool, DiscoveryError> {
        Ok(self
            .resolve(gvk)
            .await?
            .subresources
            .iter()
            .any(|s| s == "status"))
    }

    /// The resource plural a watch reads: the one the guest named, or
    /// discovery's.
    pub async fn watch_plural(&self, spec: &WatchSpec) -> Result<String, DiscoveryError> {
        match &spec.plural {
            Some(p) => Ok(p.clone()),
            None => Ok(self.resource(&spec.gvk).await?.plural),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;
    use kube::error::DiscoveryError as Missing;

    fn error(source: kube::Error) -> DiscoveryError {
        DiscoveryError {
            gvk: "example.com/v1/Widget".into(),
            source,
        }
    }

    #[test]
    fn only_an_unknown_group_version_or_kind_counts_as_not_served() {
        let api = |code| kube::Error::Api(Box::new(Status::failure("x", "").with_code(code)));
        assert!(error(api(404)).is_not_served());
        assert!(error(kube::Error::Discovery(Missing::MissingKind(
            "Widget".into()
        )))
        .is_not_served());
        assert!(!error(api(403)).is_not_served(), "forbidden is not missing");
        assert!(!error(api(401)).is_not_served());
        assert!(!error(api(500)).is_not_served());
        let bad_gv = Missing::InvalidGroupVersion("a/b/c".into());
        assert!(!error(kube::Error::Discovery(bad_gv)).is_not_served());
    }
}
