//! Policy parsing, limits and admission of manifests.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::guest::bindings::wasmctrl::controller::types as wit;
use crate::guest::manifest;
use crate::guest::manifest::fixtures::{rule as write, watch};

fn gvk(group: &str, kind: &str) -> wit::GroupVersionKind {
    wit::GroupVersionKind {
        group: group.into(),
        version: "v1".into(),
        kind: kind.into(),
    }
}

fn manifest(name: &str, watches: Vec<wit::Watch>, writes: Vec<wit::WriteRule>) -> GuestManifest {
    manifest::validate(&wit::Manifest {
        name: name.into(),
        watches,
        writes,
        resync_seconds: None,
    })
    .unwrap()
}

/// The leak the issue describes: every Secret, copied into a ConfigMap.
fn secret_copier() -> GuestManifest {
    manifest(
        "leaky",
        vec![watch("secrets", gvk("", "Secret"), None)],
        vec![write(gvk("", "ConfigMap"), Some("ops"), &["leak"])],
    )
}

fn gpu_summary() -> GuestManifest {
    manifest(
        "gpu-summary",
        vec![watch("pods", gvk("", "Pod"), None)],
        vec![write(gvk("", "ConfigMap"), Some("ops"), &["gpu-summary"])],
    )
}

const POLICY: &str = r#"
default:
  watch:
    - {group: "", kinds: [Pod]}
  write:
    - {group: "", kinds: [ConfigMap], namespaces: [ops], names: [gpu-summary]}
  limits:
    minRequeueMs: 2000
    maxPlanWrites: 100
guests:
  vault-sync:
    watch:
      - {group: "", kinds: [Secret], namespaces: [vault]}
    write:
      - {group: "", kinds: ["*"], namespaces: [vault]}
    limits:
      maxPlanWrites: 5
"#;

#[test]
fn without_a_policy_file_secrets_are_denied_and_everything_else_allowed() {
    let policy = Policy::default();
    assert_eq!(policy.admit(&gpu_summary()), Ok(()));
    let e = policy.admit(&secret_copier()).unwrap_err();
    assert_eq!(e.section, "default");
    assert_eq!(e.denied.len(), 1, "{e}");
    assert!(
        e.to_string()
            .contains(r#"watch "secrets" of v1/Secret in all namespaces"#)
            && e.to_string().contains("Secrets need a grant"),
        "{e}"
    );
}

#[test]
fn a_denial_lists_everything_that_was_denied() {
    let policy = Policy::parse(POLICY).unwrap();
    let e = policy.admit(&secret_copier()).unwrap_err();
    assert_eq!(e.denied.len(), 2, "{e}");
    assert!(e.to_string().contains("watch \"secrets\""), "{e}");
    assert!(
        e.to_string()
            .contains("write v1/ConfigMap in namespace ops, names leak"),
        "{e}"
    );
    assert_eq!(policy.admit(&gpu_summary()), Ok(()));
}

#[test]
fn a_guest_section_grants_only_what_it_names() {
    let policy = Policy::parse(POLICY).unwrap();
    let ok = manifest(
        "vault-sync",
        vec![watch("secrets", gvk("", "Secret"), Some("vault"))],
        vec![write(gvk("", "ConfigMap"), Some("vault"), &[])],
    );
    assert_eq!(policy.admit(&ok), Ok(()));
    // Cluster-wide is more than "namespace vault"; a wildcard kind never
    // includes Secret.
    let greedy = manifest(
        "vault-sync",
        vec![watch("secrets", gvk("", "Secret"), None)],
        vec![write(gvk("", "Secret"), Some("vault"), &[])],
    );
    let e = policy.admit(&greedy).unwrap_err();
    assert_eq!(e.section, "vault-sync");
    assert_eq!(e.denied.len(), 2, "{e}");
}

#[test]
fn limits_layer_guest_over_default_over_built_in() {
    let policy = Policy::parse(POLICY).unwrap();
    let default = policy.limits("gpu-summary");
    assert_eq!(default.min_requeue, Duration::from_secs(2));
    assert_eq!(default.max_plan_writes, 100);
    assert_eq!(default.max_plan_events, defaults::MAX_PLAN_EVENTS);
    let vault = policy.limits("vault-sync");
    assert_eq!(vault.max_plan_writes, 5);
    assert_eq!(vault.min_requeue, Duration::from_secs(2));
    assert_eq!(Policy::default().limits("x"), Limits::default());
}

#[test]
fn too_many_watches_are_refused_naming_the_count() {
    let watches = (0..2000)
        .map(|i| watch(&format!("w{i}"), gvk("", "Pod"), None))
        .collect();
    let m = manifest("greedy", watches, vec![]);
    let e = Policy::default().admit(&m).unwrap_err();
    assert!(
        e.to_string()
            .contains("2000 watches, over the limit of 32 (maxWatches)"),
        "{e}"
    );
}

#[test]
fn a_bad_policy_file_is_an_error_naming_the_problem() {
    let e = Policy::parse("default:\n  limits:\n    minRequeue: 5\n").unwrap_err();
    assert!(e.contains("minRequeue"), "{e}");
    let e = Policy::parse("default:\n  watch:\n    - {group: \"\", kinds: []}\n").unwrap_err();
    assert!(e.contains("default.watch[0]: kinds is empty"), "{e}");
    let e = Policy::parse(
        "guests:\n  g:\n    watch:\n      - {group: \"\", kinds: [Pod], names: [a]}\n",
    )
    .unwrap_err();
    assert!(e.contains("names apply to writes only"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let e = Policy::load(&dir.path().join("missing.yaml")).unwrap_err();
    assert!(e.to_string().contains("missing.yaml"), "{e}");
}

#[test]
fn a_limits_only_file_restricts_nothing_but_an_empty_list_grants_nothing() {
    let limits_only = Policy::parse("default:\n  limits: {maxWatches: 4}\n").unwrap();
    assert_eq!(limits_only.admit(&gpu_summary()), Ok(()));
    assert!(
        limits_only.admit(&secret_copier()).is_err(),
        "Secrets still need a grant"
    );
    let nothing = Policy::parse("default:\n  watch: []\n  write: []\n").unwrap();
    assert_eq!(nothing.admit(&gpu_summary()).unwrap_err().denied.len(), 2);
}

fn resource(group: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: "v1".into(),
        api_version: if group.is_empty() {
            "v1".into()
        } else {
            format!("{group}/v1")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Issue 22's leak: a watch declared as ConfigMaps that lists `secrets`.
fn configmap_watcher() -> GuestManifest {
    manifest(
        "liar",
        vec![watch("cms", gvk("", "ConfigMap"), None)],
        vec![write(gvk("", "ConfigMap"), Some("ops"), &["leak"])],
    )
}

#[test]
fn the_resource_actually_listed_decides_not_the_kind_the_manifest_declares() {
    let liar = configmap_watcher();
    let secrets = resource("", "ConfigMap", "secrets");
    let configmaps = resource("", "ConfigMap", "configmaps");
    let grant_all = Policy::parse("default:\n  watch: [{group: \"*\", kinds: [\"*\"]}]\n").unwrap();
    let grant_pods_and_cms = Policy::parse(
        "default:\n  watch: [{group: \"\", kinds: [Pod, ConfigMap]}]\n  write: [{group: \"\", kinds: [ConfigMap]}]\n",
    )
    .unwrap();
    for policy in [Policy::default(), grant_all, grant_pods_and_cms.clone()] {
        // Declared, it passes...
        assert_eq!(policy.admit(&liar), Ok(()));
        // ...resolved to the Secrets resource, it does not.
        let e = policy
            .admit_resolved(
                &liar,
                std::slice::from_ref(&secrets),
                std::slice::from_ref(&configmaps),
            )
            .unwrap_err();
        assert_eq!(e.denied.len(), 1, "{e}");
        assert!(
            e.denied[0].contains("watch \"cms\" of v1/ConfigMap (resource secrets)")
                && e.denied[0].contains("Secrets need a grant that names the kind Secret"),
            "{e}"
        );
        assert_eq!(
            policy.admit_resolved(
                &liar,
                std::slice::from_ref(&configmaps),
                std::slice::from_ref(&configmaps)
            ),
            Ok(())
        );
    }
    // A write rule resolved to Secrets is held to the same grant.
    let e = grant_pods_and_cms
        .admit_resolved(
            &liar,
            std::slice::from_ref(&configmaps),
            std::slice::from_ref(&secrets),
        )
        .unwrap_err();
    assert!(
        e.denied[0].starts_with("write v1/ConfigMap (resource secrets)"),
        "{e}"
    );
    // Only a grant naming Secret covers them, by either spelling.
    let named = Policy::parse(
        "default:\n  watch: [{group: \"\", kinds: [Secret]}]\n  write: [{group: \"\", kinds: [ConfigMap]}]\n",
    )
    .unwrap();
    assert_eq!(
        named.admit_resolved(
            &liar,
            &[resource("", "Secret", "secrets")],
            std::slice::from_ref(&configmaps)
        ),
        Ok(())
    );
    // A custom kind called Secret in another group is not core Secrets.
    assert_eq!(
        Policy::default().admit_resolved(
            &liar,
            &[resource("example.com", "Secret", "secrets")],
            &[configmaps]
        ),
        Ok(())
    );
}
