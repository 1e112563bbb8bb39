//! What a guest needs from the cluster, checked before its caches start:
//! every watch and write rule resolved through discovery (a declared
//! plural that disagrees refuses the guest), status write rules only for
//! kinds with a status subresource, and the permission preflight. It never
//! starts an informer.

use kube::Client;

use super::error::ControllerError;
use crate::discovery::{Discovery, WatchResourceError};
use crate::guest::{GuestManifest, KeyMapping, ManifestError};
use crate::permissions::{self, Checked, Need};

/// Refuses, naming the guest and the rule, a status write rule for a kind
/// without a status subresource (a status written to the main resource
/// would be dropped by the API server, silently, forever).
pub(super) async fn check_status_rules(
    discovery: &Discovery,
    manifest: &GuestManifest,
    guest: &str,
) -> Result<(), ControllerError> {
    for (i, rule) in manifest.writes.iter().enumerate() {
        if !rule.status {
            continue;
        }
        let has =
            discovery
                .has_status(&rule.gvk)
                .await
                .map_err(|source| ControllerError::Resolve {
                    guest: guest.to_string(),
                    source,
                })?;
        if !has {
            return Err(ControllerError::Manifest {
                guest: guest.to_string(),
                source: ManifestError::Invalid {
                    field: format!("writes[{i}].status"),
                    problem: format!(
                        "{} has no status subresource (API discovery lists none): write its status with update, or drop status: true",
                        rule.gvk
                    ),
                },
            });
        }
    }
    Ok(())
}

/// The API resources a manifest's watches and write rules resolve to,
/// position for position.
pub(super) struct Resources {
    pub(super) watches: Vec<kube::api::ApiResource>,
    /// Whether each watch's kind is namespaced (else cluster-scoped).
    pub(super) namespaced: Vec<bool>,
    pub(super) writes: Vec<kube::api::ApiResource>,
}

/// Resolves every watch and write rule through discovery: the resources
/// the host will list and write. A watch whose declared plural is not
/// discovery's is refused, naming the watch and both plurals.
pub(super) async fn resolve(
    discovery: &Discovery,
    manifest: &GuestManifest,
    guest: &str,
) -> Result<Resources, ControllerError> {
    let resolve_err = |source| ControllerError::Resolve {
        guest: guest.to_string(),
        source,
    };
    let mut watches = Vec::with_capacity(manifest.watches.len());
    let mut namespaced = Vec::with_capacity(manifest.watches.len());
    for (i, spec) in manifest.watches.iter().enumerate() {
        match discovery.watch_resource(spec).await {
            Ok(resource) => {
                watches.push(resource);
                namespaced.push(
                    discovery
                        .is_namespaced(&spec.gvk)
                        .await
                        .map_err(resolve_err)?,
                );
            }
            Err(WatchResourceError::Discovery(e)) => return Err(resolve_err(e)),
            Err(e @ WatchResourceError::PluralMismatch { .. }) => {
                tracing::error!(guest, watch = %spec.name, "{e}");
                return Err(ControllerError::Manifest {
                    guest: guest.to_string(),
                    source: ManifestError::Invalid {
                        field: format!("watches[{i}] ({}).plural", spec.name),
                        problem: e.to_string(),
                    },
                });
            }
        }
    }
    let mut writes = Vec::with_capacity(manifest.writes.len());
    for rule in &manifest.writes {
        writes.push(discovery.resource(&rule.gvk).await.map_err(resolve_err)?);
    }
    check_scopes(manifest, &namespaced).map_err(|source| ControllerError::Manifest {
        guest: guest.to_string(),
        source,
    })?;
    Ok(Resources {
        watches,
        namespaced,
        writes,
    })
}

/// Refuses a `same-namespace` relation (a `same-namespace` mapping or a
/// `same-namespace:` by-index link) to a primary of a cluster-scoped kind
/// other than Namespace: its objects are in no namespace, so the relation
/// could never hold anything.
pub(super) fn check_scopes(
    manifest: &GuestManifest,
    namespaced: &[bool],
) -> Result<(), ManifestError> {
    for (i, spec) in manifest.watches.iter().enumerate() {
        let p = match spec.keys {
            KeyMapping::SameNamespace(p) => p,
            KeyMapping::ByIndex {
                primary,
                same_namespace: true,
                ..
            } => primary,
            _ => continue,
        };
        let primary = &manifest.watches[p];
        if !namespaced.get(p).copied().unwrap_or(true)
            && !crate::relations::is_namespace_kind(&primary.gvk)
        {
            return Err(ManifestError::Invalid {
                field: format!("watches[{i}] ({}).keys", spec.name),
                problem: format!(
                    "relates objects of one namespace to primary watch \"{}\", but its kind {} is cluster-scoped: its objects are in no namespace (of the cluster-scoped kinds only a Namespace stands for one, the namespace it names)",
                    primary.name, primary.gvk
                ),
            });
        }
    }
    Ok(())
}

/// Checks, before any cache starts, that the host may do everything the
/// guest's manifest needs (see [`crate::permissions`]): list and watch what
/// it watches and the objects it writes (the outputs cache), and patch and
/// create (an apply that creates is authorized as both) the write targets
/// in the namespaces it names.
/// With caches selected by bucket (`by_bucket`), the host also labels the
/// objects of the watches selected so (a patch).
pub(super) async fn preflight(
    client: &Client,
    manifest: &GuestManifest,
    resources: &Resources,
    guest: &str,
    by_bucket: bool,
) -> Result<(), ControllerError> {
    let mut needs = Vec::new();
    for (spec, resource) in manifest.watches.iter().zip(&resources.watches) {
        let plural = &resource.plural;
        if by_bucket && super::labels::by_bucket(spec) {
            needs.push(Need::new(
                "patch",
                &spec.gvk.group,
                plural,
                spec.namespace.as_deref(),
                None,
            ));
        }
        for verb in ["list", "watch"] {
            needs.push(Need::new(
                verb,
                &spec.gvk.group,
                plural,
                spec.namespace.as_deref(),
                None,
            ));
        }
        // The host adds (and the guest's plan removes) the declared
        // finalizer with a patch.
        if spec.finalizer.is_some() {
            needs.push(Need::new(
                "patch",
                &spec.gvk.group,
                plural,
                spec.namespace.as_deref(),
                None,
            ));
        }
    }
    for (rule, resource) in manifest.writes.iter().zip(&resources.writes) {
        let plural = &resource.plural;
        let group = rule.gvk.group.as_str();
        let ns = rule.namespace.as_deref();
        let single = match rule.names.as_slice() {
            [one] => Some(one.as_str()),
            _ => None,
        };
        for verb in ["list", "watch"] {
            needs.push(Need::new(verb, group, plural, ns, single));
        }
        // Without a namespace the rule says where the guest *may* write,
        // not where it will: nothing precise to ask.
        if ns.is_some() {
            // An apply that creates the object is authorized as create too.
            needs.push(Need::new("create", group, plural, ns, None));
            if rule.names.is_empty() {
                needs.push(Need::new("patch", group, plural, ns, None));
            }
            for n in &rule.names {
                needs.push(Need::new("patch", group, plural, ns, Some(n)));
            }
        }
    }
    match permissions::check(client, &needs).await {
        Ok(Checked::Allowed) => Ok(()),
        Ok(unavailable) => {
            tracing::warn!(
                guest,
                "{unavailable}; a missing permission will show as a 403 later"
            );
            Ok(())
        }
        Err(source) => Err(ControllerError::Permissions {
            guest: guest.to_string(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guest::bindings::wasmctrl::controller::types as wit;

    fn manifest(primary_kind: &str, keys: wit::KeyMapping) -> GuestManifest {
        let watch = |name: &str, kind: &str, keys: wit::KeyMapping| wit::Watch {
            name: name.into(),
            gvk: wit::GroupVersionKind {
                group: if kind == "Tenant" { "example.com" } else { "" }.into(),
                version: "v1".into(),
                kind: kind.into(),
            },
            plural: None,
            namespace: None,
            label_selector: None,
            field_selector: None,
            fields: vec!["metadata.name".into()],
            indexes: vec![wit::IndexSpec {
                name: "by-name".into(),
                field: "metadata.name".into(),
            }],
            keys,
            finalizer: None,
        };
        crate::guest::manifest::validate(&wit::Manifest {
            name: "scoped".into(),
            watches: vec![
                watch("primaries", primary_kind, wit::KeyMapping::PerObject),
                watch("pods", "Pod", keys),
            ],
            writes: vec![],
            resync_seconds: None,
        })
        .unwrap()
    }

    #[test]
    fn a_same_namespace_relation_to_a_cluster_scoped_kind_other_than_namespace_is_refused() {
        let same = || wit::KeyMapping::SameNamespace("primaries".into());
        let by_index = || {
            wit::KeyMapping::ByIndex(wit::IndexLink {
                primary: "same-namespace:primaries".into(),
                index: "by-name".into(),
                field: "metadata.name".into(),
            })
        };
        for keys in [same(), by_index()] {
            let err = check_scopes(&manifest("Tenant", keys), &[false, true])
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("watches[1] (pods).keys")
                    && err.contains("\"primaries\"")
                    && err.contains("cluster-scoped"),
                "{err}"
            );
        }
        // A Namespace stands for the namespace it names; a namespaced kind
        // for its own.
        assert!(check_scopes(&manifest("Namespace", same()), &[false, true]).is_ok());
        assert!(check_scopes(&manifest("Tenant", same()), &[true, true]).is_ok());
        // Other mappings do not relate by namespace.
        let owner = wit::KeyMapping::Owner("primaries".into());
        assert!(check_scopes(&manifest("Tenant", owner), &[false, true]).is_ok());
    }
}
