//! Plan validation of names and namespaces: every value that could reach
//! a URL path is a valid object name, or the plan is refused naming the
//! write (or event), the field and the value.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;

use super::*;
use crate::guest::manifest;
use crate::guest::snapshot::{self as host_snapshot, WatchView};

fn gvk(api_version: &str, kind: &str) -> wit::GroupVersionKind {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    wit::GroupVersionKind {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
    }
}

fn rule(api_version: &str, kind: &str, namespace: Option<&str>) -> wit::WriteRule {
    wit::WriteRule {
        gvk: gvk(api_version, kind),
        namespace: namespace.map(str::to_string),
        names: vec![],
        status: false,
    }
}

/// Watches pods everywhere; may write any ConfigMap in any namespace, any
/// Pod in `ml` (not its status) and any ClusterRole.
fn permissive() -> GuestManifest {
    manifest::validate(&wit::Manifest {
        name: "names".into(),
        watches: vec![crate::guest::manifest::fixtures::watch(
            "pods",
            gvk("v1", "Pod"),
            None,
        )],
        writes: vec![
            rule("v1", "ConfigMap", None),
            rule("v1", "Pod", Some("ml")),
            rule("rbac.authorization.k8s.io/v1", "ClusterRole", None),
        ],
        resync_seconds: None,
    })
    .unwrap()
}

fn check(writes: Vec<wit::Write>, events: Vec<wit::Event>) -> Result<ValidatedPlan, PlanError> {
    let manifest = permissive();
    let data = host_snapshot::build(&manifest, &[WatchView::identity(vec![], 0)]);
    let view = SnapshotView::new(&data).unwrap();
    validate(
        &wit::Plan {
            writes,
            events,
            requeue_after_ms: None,
        },
        &manifest,
        &view,
    )
}

fn apply(api_version: &str, kind: &str, namespace: &str, name: &str) -> wit::Write {
    wit::Write::Apply(
        json!({"apiVersion": api_version, "kind": kind,
               "metadata": {"name": name, "namespace": namespace}})
        .to_string(),
    )
}

fn reference(kind: &str, namespace: Option<&str>, name: &str) -> wit::ObjectRef {
    wit::ObjectRef {
        api_version: "v1".into(),
        kind: kind.into(),
        namespace: namespace.map(str::to_string),
        name: name.into(),
    }
}

fn event(regarding: wit::ObjectRef, related: Option<wit::ObjectRef>) -> wit::Event {
    wit::Event {
        regarding,
        related,
        event_type: wit::EventType::Normal,
        reason: "Checked".into(),
        action: String::new(),
        message: String::new(),
    }
}

/// Where, which field and which value a `BadName` refusal names.
fn bad_name(result: Result<ValidatedPlan, PlanError>) -> (String, &'static str, String) {
    match result {
        Err(PlanError::BadName {
            at, field, value, ..
        }) => (at, field, value),
        other => panic!("not refused as a bad name: {other:?}"),
    }
}

#[test]
fn a_name_that_could_leave_its_path_segment_is_refused_naming_the_write_field_and_value() {
    let long = "a".repeat(254);
    for name in [
        "../secrets/db-password",
        "p5/status",
        "%2F",
        "a%2Fb",
        "Upper",
        long.as_str(),
        ".",
        "..",
        "",
        "a b",
        "a?watch=1",
    ] {
        // An empty name is a missing one.
        if name.is_empty() {
            let e = check(vec![apply("v1", "ConfigMap", "ops", name)], vec![]).unwrap_err();
            assert!(matches!(e, PlanError::MissingField { .. }), "{e:?}");
            continue;
        }
        let e = check(
            vec![
                apply("v1", "ConfigMap", "ops", "ok"),
                apply("v1", "ConfigMap", "ops", name),
            ],
            vec![],
        );
        let (at, field, value) = bad_name(e.clone());
        assert_eq!(at, "writes[1] (apply)");
        assert_eq!(field, "metadata.name");
        assert!(
            value.starts_with(&format!("{:?}", name.chars().take(64).collect::<String>())),
            "{value}"
        );
        let message = e.unwrap_err().to_string();
        assert!(
            message.contains("is not a valid ConfigMap name"),
            "{message}"
        );
    }
    let e = check(vec![apply("v1", "ConfigMap", "ops", &long)], vec![]).unwrap_err();
    assert!(
        e.to_string()
            .contains("must be no more than 253 characters"),
        "{e}"
    );
    assert!(e.to_string().contains("(254 bytes)"), "{e}");
}

#[test]
fn a_status_subresource_cannot_be_reached_through_a_pod_name() {
    // The attack of issue 22: apply to `p5/status` with a rule that has
    // status: false.
    let (at, field, value) = bad_name(check(vec![apply("v1", "Pod", "ml", "p5/status")], vec![]));
    assert_eq!(
        (at.as_str(), field, value.as_str()),
        ("writes[0] (apply)", "metadata.name", "\"p5/status\"")
    );
}

#[test]
fn namespaces_must_be_dns_labels() {
    for ns in ["kube-system/../x", "Ops", "a.b", &"n".repeat(64)] {
        let (at, field, _) = bad_name(check(vec![apply("v1", "ConfigMap", ns, "ok")], vec![]));
        assert_eq!(
            (at.as_str(), field),
            ("writes[0] (apply)", "metadata.namespace"),
            "{ns}"
        );
    }
}

#[test]
fn delete_and_finalizer_targets_are_held_to_the_same_rules() {
    let del = wit::Write::Delete(reference("ConfigMap", Some("ops"), "../x"));
    let (at, field, _) = bad_name(check(vec![del], vec![]));
    assert_eq!((at.as_str(), field), ("writes[0] (delete)", "name"));
    let fin = wit::Write::RemoveFinalizer(wit::FinalizerRef {
        target: reference("Pod", Some("ml/../kube-system"), "p"),
        finalizer: "example.com/x".into(),
    });
    let (at, field, _) = bad_name(check(vec![fin], vec![]));
    assert_eq!(
        (at.as_str(), field),
        ("writes[0] (remove-finalizer)", "namespace")
    );
}

#[test]
fn event_references_are_held_to_the_same_rules() {
    let ok = reference("Pod", Some("ml"), "p1");
    let e = event(reference("Pod", Some("ml"), "p1/status"), None);
    let (at, field, _) = bad_name(check(vec![], vec![e]));
    assert_eq!((at.as_str(), field), ("events[0].regarding", "name"));
    let e = event(
        ok.clone(),
        Some(reference("Pod", Some("KUBE-SYSTEM"), "p1")),
    );
    let (at, field, _) = bad_name(check(vec![], vec![event(ok.clone(), None), e]));
    assert_eq!((at.as_str(), field), ("events[1].related", "namespace"));
}

#[test]
fn valid_names_pass_and_rbac_names_may_hold_colons() {
    let longest = [
        "a".repeat(63),
        "b".repeat(63),
        "c".repeat(63),
        "d".repeat(61),
    ]
    .join(".");
    assert_eq!(longest.len(), 253);
    let plan = check(
        vec![
            apply("v1", "ConfigMap", "ops", "gpu-summary.v1"),
            apply("v1", "ConfigMap", "ops", &longest),
            apply(
                "rbac.authorization.k8s.io/v1",
                "ClusterRole",
                "",
                "system:controller:x",
            ),
        ],
        vec![event(reference("Pod", Some("ml"), "p1"), None)],
    )
    .unwrap();
    assert_eq!(plan.writes.len(), 3);
    let (_, field, _) = bad_name(check(
        vec![apply(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            "",
            "a/b",
        )],
        vec![],
    ));
    assert_eq!(field, "metadata.name");
}
