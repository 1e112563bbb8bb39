//! Type resolution: which API resource (plural, scope) serves a
//! group/version/kind, asked of the API server's discovery once and cached.
//!
//! Owns the cache of resolved kinds, shared by everything that reads or
//! writes a guest's types (informers need the plural of what they watch,
//! the actuator the resource it writes, the permission preflight both),
//! and the rule that a resource name comes from discovery, never from a
//! guest: a watch's declared plural is only checked against what discovery
//! says (a `ConfigMap` watch declaring `secrets` is refused, not listed).
//! It never reads or writes objects.

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

/// A watch whose resource the host will not list: discovery cannot
/// resolve its kind, or the plural the guest declared is not the one
/// discovery serves the kind as.
#[derive(Debug, thiserror::Error)]
pub enum WatchResourceError {
    /// Discovery could not resolve the watch's kind.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// The declared plural disagrees with discovery: listing it would read
    /// another resource than the kind the policy admitted (`ConfigMap`
    /// declared, `secrets` listed).
    #[error("watch {watch:?} declares plural {declared:?} for {gvk}, but API discovery serves {gvk} as {served:?}; the host lists only the resource discovery names")]
    PluralMismatch {
        /// The watch's name.
        watch: String,
        /// The kind it declares.
        gvk: String,
        /// The plural it declares.
        declared: String,
        /// The plural discovery serves the kind as.
        served: String,
    },
}

/// What discovery says about one kind.
#[derive(Debug, Clone)]
struct Resolved {
    resource: ApiResource,
    /// Namespaced (else cluster-scoped).
    namespaced: bool,
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
            namespaced: caps.scope == kube::discovery::Scope::Namespaced,
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

    /// Whether objects of `gvk` live in namespaces.
    pub async fn is_namespaced(&self, gvk: &Gvk) -> Result<bool, DiscoveryError> {
        Ok(self.resolve(gvk).await?.namespaced)
    }

    /// The API resource a watch lists: always discovery's for the watch's
    /// kind. A plural the guest declared must be that resource's plural
    /// (it is a claim to check, never a name to use).
    pub async fn watch_resource(
        &self,
        spec: &WatchSpec,
    ) -> Result<ApiResource, WatchResourceError> {
        let resource = self.resource(&spec.gvk).await?;
        check_declared_plural(spec, &resource)?;
        Ok(resource)
    }
}

/// Refuses a declared plural that is not `served`'s.
fn check_declared_plural(spec: &WatchSpec, served: &ApiResource) -> Result<(), WatchResourceError> {
    match &spec.plural {
        Some(declared) if *declared != served.plural => Err(WatchResourceError::PluralMismatch {
            watch: spec.name.clone(),
            gvk: spec.gvk.to_string(),
            declared: declared.clone(),
            served: served.plural.clone(),
        }),
        _ => Ok(()),
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

    fn watch(group: &str, version: &str, kind: &str, plural: Option<&str>) -> WatchSpec {
        WatchSpec {
            name: "w".into(),
            gvk: Gvk {
                group: group.into(),
                version: version.into(),
                kind: kind.into(),
            },
            plural: plural.map(str::to_string),
            namespace: None,
            label_selector: None,
            field_selector: None,
            projection: crate::projection::Projection::new(vec![], vec![]),
            indexes: vec![],
            keys: crate::guest::KeyMapping::None,
            finalizer: None,
        }
    }

    #[tokio::test]
    async fn a_watch_lists_what_discovery_names_and_a_plural_that_disagrees_is_refused() {
        #![allow(clippy::unwrap_used)]
        use wasmctrl_apiserver::{ApiServer, ApiServerConfig};
        let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
        let discovery = Discovery::new(server.client().await.unwrap());
        // Issue 22: ConfigMap declared, `secrets` asked to be listed.
        let e = discovery
            .watch_resource(&watch("", "v1", "ConfigMap", Some("secrets")))
            .await
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"watch "w" declares plural "secrets" for v1/ConfigMap, but API discovery serves v1/ConfigMap as "configmaps"; the host lists only the resource discovery names"#
        );
        for plural in [None, Some("configmaps")] {
            let ar = discovery
                .watch_resource(&watch("", "v1", "ConfigMap", plural))
                .await
                .unwrap();
            assert_eq!((ar.group.as_str(), ar.plural.as_str()), ("", "configmaps"));
        }
        // Other spellings of Secret resolve to nothing, or to Secrets as
        // they are (where the policy sees them by name).
        for (group, version, kind) in [
            ("core", "v1", "Secret"),
            ("", "v2", "Secret"),
            ("", "v1", "secret"),
        ] {
            match discovery
                .watch_resource(&watch(group, version, kind, Some("secrets")))
                .await
            {
                Err(WatchResourceError::Discovery(e)) => assert!(e.is_not_served(), "{e}"),
                other => panic!("{group}/{version}/{kind} resolved: {other:?}"),
            }
        }
        let ar = discovery
            .watch_resource(&watch("", "v1", "Secret", None))
            .await
            .unwrap();
        assert_eq!(
            (ar.kind.as_str(), ar.plural.as_str()),
            ("Secret", "secrets")
        );
        assert!(discovery
            .is_namespaced(&watch("", "v1", "Secret", None).gvk)
            .await
            .unwrap());
        assert!(!discovery
            .is_namespaced(&watch("", "v1", "Node", None).gvk)
            .await
            .unwrap());
    }
}
