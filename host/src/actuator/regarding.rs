//! Which objects a guest's Events may regard, and so in which namespaces
//! they are recorded. Owns that rule ([`check`]). It decides only: it never
//! records, logs or counts anything; the actuator logs, counts and skips
//! what is refused.
//!
//! # Why
//! An Event lives in the namespace of the object it regards (the host's
//! event namespace, `default`, for a cluster-scoped one), so a guest that
//! could name any object could write Events anywhere — `kube-system`
//! included.
//!
//! # The rule
//! An Event regards an object the guest watches or may write
//! ([`GuestManifest::event_kind`]), and its namespace agrees with the
//! kind's scope as discovery reports it (no namespace on a Node, none
//! missing on a Pod). A discovery failure is an error, not a refusal.

use crate::discovery::{Discovery, DiscoveryError};
use crate::guest::{GuestManifest, ObjectKey};

/// Why an Event a guest planned is not recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventRefusal {
    /// It regards an object the guest neither watches nor may write.
    #[error("it regards {0}, which the guest neither watches nor may write (an Event may regard only objects of its watches or of its write rules)")]
    NotWatchedOrWritten(String),
    /// The reference's namespace disagrees with the kind's scope (a
    /// namespace on a cluster-scoped object would place the Event there).
    #[error("it regards {target}: {problem}")]
    Scope {
        /// The object.
        target: String,
        /// What disagrees.
        problem: &'static str,
    },
}

impl EventRefusal {
    /// The metric label: `not_watched_or_written` or `scope`.
    pub fn label(&self) -> &'static str {
        match self {
            EventRefusal::NotWatchedOrWritten(_) => "not_watched_or_written",
            EventRefusal::Scope { .. } => "scope",
        }
    }
}

/// Whether `manifest`'s guest may record an Event regarding `regarding`
/// (`Ok(Err(..))`: refused, and why). A discovery failure is an error, not
/// a refusal: the kind is one of the manifest's, resolved at start.
pub async fn check(
    manifest: &GuestManifest,
    discovery: &Discovery,
    regarding: &ObjectKey,
) -> Result<Result<(), EventRefusal>, DiscoveryError> {
    let namespace = regarding.namespace.as_deref();
    let Some(gvk) = manifest.event_kind(&regarding.gvk, namespace, &regarding.name) else {
        return Ok(Err(EventRefusal::NotWatchedOrWritten(
            regarding.to_string(),
        )));
    };
    let problem = match (discovery.is_namespaced(gvk).await?, namespace) {
        (true, None) => "the kind is namespaced, but the reference names no namespace",
        (false, Some(_)) => "the kind is cluster-scoped, but the reference names a namespace",
        _ => return Ok(Ok(())),
    };
    Ok(Err(EventRefusal::Scope {
        target: regarding.to_string(),
        problem,
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::guest::bindings::wasmctrl::controller::types as wit;
    use crate::guest::{manifest, Gvk};
    use wasmctrl_apiserver::{ApiServer, ApiServerConfig};

    fn watch(name: &str, kind: &str, namespace: Option<&str>) -> wit::Watch {
        let gvk = wit::GroupVersionKind {
            group: String::new(),
            version: "v1".into(),
            kind: kind.into(),
        };
        manifest::fixtures::watch(name, gvk, namespace)
    }

    fn key(kind: &str, namespace: Option<&str>, name: &str) -> ObjectKey {
        ObjectKey {
            gvk: Gvk::from_api_version("v1", kind),
            namespace: namespace.map(str::to_string),
            name: name.into(),
        }
    }

    #[tokio::test]
    async fn an_event_in_kube_system_about_an_object_the_guest_does_not_watch_is_refused() {
        let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
        let discovery = Discovery::new(server.client().await.unwrap());
        let m = manifest::validate(&wit::Manifest {
            name: "g".into(),
            watches: vec![
                watch("pods", "Pod", Some("ml")),
                watch("nodes", "Node", None),
            ],
            writes: vec![],
            resync_seconds: None,
        })
        .unwrap();
        let check = |k: ObjectKey| {
            let (m, d) = (&m, &discovery);
            async move { check(m, d, &k).await.unwrap().map_err(|r| r.label()) }
        };
        assert_eq!(check(key("Pod", Some("ml"), "p1")).await, Ok(()));
        assert_eq!(check(key("Node", None, "n1")).await, Ok(()));
        assert_eq!(
            check(key("Pod", Some("kube-system"), "coredns")).await,
            Err("not_watched_or_written")
        );
        assert_eq!(
            check(key("ConfigMap", Some("kube-system"), "x")).await,
            Err("not_watched_or_written")
        );
        // A namespace on a cluster-scoped object would place the Event in
        // it; a namespaced one without a namespace in `default`.
        assert_eq!(
            check(key("Node", Some("kube-system"), "n1")).await,
            Err("scope")
        );
        let m2 = manifest::validate(&wit::Manifest {
            name: "g".into(),
            watches: vec![watch("pods", "Pod", None)],
            writes: vec![],
            resync_seconds: None,
        })
        .unwrap();
        let refused = super::check(&m2, &discovery, &key("Pod", None, "p1"))
            .await
            .unwrap();
        assert_eq!(refused.map_err(|r| r.label()), Err("scope"));
    }
}
