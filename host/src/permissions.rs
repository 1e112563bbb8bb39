//! Preflight permission check for a guest, before its caches start. Owns
//! the review calls ([`check`]) and the report of what is missing, worded
//! as the API server's own Forbidden message. It never decides what is
//! needed (the controller's preflight lists a guest's [`Need`]s, leader
//! election its Lease's), and never grants, caches or retries.
//!
//! # Why
//! A controller whose credentials allow `list` but not `watch` syncs once
//! and then sits idle; one that may not `patch` its output fails every
//! reconcile into a backoff. Both look alive.
//!
//! # What is asked
//! Before a guest's informers start, the host asks the API server — with
//! `SelfSubjectAccessReview`, the request `kubectl auth can-i` makes —
//! whether its own credentials allow everything the guest's manifest
//! needs: `list` and `watch` on every watched resource in its scope and on
//! every written one (the outputs cache), `patch` where a watch declares a
//! finalizer, and `patch` and `create` (a server-side apply that creates
//! the object is authorized as both) on every write-allowlist entry that
//! names a namespace. Every missing permission is reported at once.
//!
//! # When reviews are unavailable
//! When the reviews themselves fail (an API server or a policy that refuses
//! them) it says so ([`Checked::Unavailable`]) and lets the caller go on —
//! the informers still fail loudly on their first 403.

use std::fmt;

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};

use wasmctrl_kube_rules::forbidden::forbidden_message;

/// One permission a guest needs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Need {
    /// The verb (`list`, `watch`, `patch`).
    pub verb: String,
    /// API group ("" for core).
    pub group: String,
    /// Resource plural.
    pub resource: String,
    /// Namespace (None = cluster scope / all namespaces).
    pub namespace: Option<String>,
    /// Object name, when only one object is needed.
    pub name: Option<String>,
}

impl Need {
    /// `verb` on `group`/`resource` in `namespace` (None = all), optionally one object.
    pub fn new(
        verb: &str,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Self {
        Need {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            namespace: namespace.map(str::to_owned),
            name: name.map(str::to_owned),
        }
    }
}

/// What the preflight check found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PermissionError {
    /// The credentials lack these permissions.
    #[error("missing permissions ({count}): {messages}", count = missing.len(), messages = self.messages().join("; "))]
    Missing {
        /// Who the API server says we are, if it would tell.
        user: Option<String>,
        /// What is missing, sorted.
        missing: Vec<Need>,
    },
}

impl PermissionError {
    /// One Forbidden-style message per missing permission.
    pub fn messages(&self) -> Vec<String> {
        let PermissionError::Missing { user, missing } = self;
        let user = user.as_deref().unwrap_or("(unknown)");
        missing
            .iter()
            .map(|n| {
                forbidden_message(
                    user,
                    &n.verb,
                    &n.group,
                    &n.resource,
                    None,
                    n.name.as_deref(),
                    n.namespace.as_deref(),
                )
            })
            .collect()
    }
}

/// The result of asking.
#[derive(Debug)]
pub enum Checked {
    /// Everything is allowed.
    Allowed,
    /// The reviews could not be made; why.
    Unavailable(String),
}

impl fmt::Display for Checked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Checked::Allowed => f.write_str("all permissions present"),
            Checked::Unavailable(why) => write!(f, "permissions not checked: {why}"),
        }
    }
}

/// Asks the API server about every need (deduplicated) and fails with all
/// the missing ones.
pub async fn check(client: &Client, needs: &[Need]) -> Result<Checked, PermissionError> {
    let mut needs = needs.to_vec();
    needs.sort();
    needs.dedup();
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let answers = futures::future::join_all(needs.iter().map(|n| {
        let reviews = reviews.clone();
        async move { reviews.create(&PostParams::default(), &review(n)).await }
    }))
    .await;
    let mut missing = Vec::new();
    for (need, answer) in needs.into_iter().zip(answers) {
        match answer {
            Ok(r) if r.status.as_ref().is_some_and(|s| s.allowed) => {}
            Ok(_) => missing.push(need),
            Err(e) => {
                return Ok(Checked::Unavailable(format!(
                    "SelfSubjectAccessReview failed: {e}"
                )))
            }
        }
    }
    if missing.is_empty() {
        return Ok(Checked::Allowed);
    }
    Err(PermissionError::Missing {
        user: whoami(client).await,
        missing,
    })
}

fn review(n: &Need) -> SelfSubjectAccessReview {
    SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(n.verb.clone()),
                group: Some(n.group.clone()),
                resource: Some(n.resource.clone()),
                namespace: n.namespace.clone(),
                name: n.name.clone(),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    }
}

async fn whoami(client: &Client) -> Option<String> {
    let api: Api<SelfSubjectReview> = Api::all(client.clone());
    let r = api
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .ok()?;
    r.status?.user_info?.username
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn missing_permissions_read_like_the_api_servers_forbidden_messages() {
        let e = PermissionError::Missing {
            user: Some("system:serviceaccount:ns:sa".into()),
            missing: vec![
                Need::new("watch", "", "pods", None, None),
                Need::new("patch", "", "configmaps", Some("ns"), Some("gpu-summary")),
            ],
        };
        assert_eq!(
            e.to_string(),
            "missing permissions (2): pods is forbidden: User \"system:serviceaccount:ns:sa\" \
             cannot watch resource \"pods\" in API group \"\" at the cluster scope; \
             configmaps \"gpu-summary\" is forbidden: User \"system:serviceaccount:ns:sa\" \
             cannot patch resource \"configmaps\" in API group \"\" in the namespace \"ns\""
        );
    }
}
