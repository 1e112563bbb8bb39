//! Property-based tests of plan validation: generated plans never panic,
//! every write outside the allowlist is refused and every allowed one
//! accepted, as a small reference model of the write rules decides.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::guest::manifest;
use crate::guest::snapshot::{self as host_snapshot, WatchView};

/// (apiVersion, kind) of the types plans write.
const TYPES: &[(&str, &str)] = &[
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("apps/v1", "Deployment"),
    ("v1", "Pod"),
];
const NAMESPACES: &[Option<&str>] = &[None, Some("ops"), Some("team"), Some("other")];
const NAMES: &[&str] = &["summary", "report", "foo"];

/// The allowlist under test, as the reference model reads it:
/// (apiVersion, kind, namespace or any, names or any).
const RULES: &[(&str, &str, Option<&str>, &[&str])] = &[
    ("v1", "ConfigMap", Some("ops"), &["summary", "report"]),
    ("v1", "Secret", None, &[]),
    ("apps/v1", "Deployment", Some("team"), &[]),
];

fn gvk(api_version: &str, kind: &str) -> wit::GroupVersionKind {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    wit::GroupVersionKind {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
    }
}

fn test_manifest() -> GuestManifest {
    manifest::validate(&wit::Manifest {
        name: "plans".into(),
        watches: vec![wit::Watch {
            name: "pods".into(),
            gvk: gvk("v1", "Pod"),
            plural: None,
            namespace: None,
            label_selector: None,
            field_selector: None,
            fields: vec!["spec.nodeName".into()],
            indexes: vec![],
            keys: wit::KeyMapping::Aggregate("k".into()),
            finalizer: None,
        }],
        writes: RULES
            .iter()
            .map(|(api_version, kind, namespace, names)| wit::WriteRule {
                gvk: gvk(api_version, kind),
                namespace: namespace.map(str::to_string),
                names: names.iter().map(|n| n.to_string()).collect(),
                status: false,
            })
            .collect(),
        resync_seconds: None,
    })
    .expect("the test manifest is valid")
}

/// The reference model of the allowlist.
fn allowed(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> bool {
    RULES.iter().any(|(v, k, ns, names)| {
        *v == api_version
            && *k == kind
            && ns.is_none_or(|ns| Some(ns) == namespace)
            && (names.is_empty() || names.contains(&name))
    })
}

/// One generated write: apply or delete of a generated target.
#[derive(Debug, Clone)]
struct Target {
    delete: bool,
    api_version: &'static str,
    kind: &'static str,
    namespace: Option<&'static str>,
    name: &'static str,
}

impl Target {
    fn write(&self) -> wit::Write {
        if self.delete {
            wit::Write::Delete(wit::ObjectRef {
                api_version: self.api_version.into(),
                kind: self.kind.into(),
                namespace: self.namespace.map(str::to_string),
                name: self.name.into(),
            })
        } else {
            let mut metadata = json!({"name": self.name});
            if let Some(ns) = self.namespace {
                metadata["namespace"] = json!(ns);
            }
            let doc = json!({"apiVersion": self.api_version, "kind": self.kind,
                             "metadata": metadata, "data": {"k": "v"}});
            wit::Write::Apply(doc.to_string())
        }
    }

    fn allowed(&self) -> bool {
        allowed(self.api_version, self.kind, self.namespace, self.name)
    }
}

fn target() -> impl Strategy<Value = Target> {
    (
        any::<bool>(),
        prop::sample::select(TYPES),
        prop::sample::select(NAMESPACES),
        prop::sample::select(NAMES),
    )
        .prop_map(|(delete, (api_version, kind), namespace, name)| Target {
            delete,
            api_version,
            kind,
            namespace,
            name,
        })
}

fn plan(writes: Vec<wit::Write>) -> wit::Plan {
    wit::Plan {
        writes,
        events: vec![],
        requeue_after_ms: None,
    }
}

fn check(p: &wit::Plan) -> Result<ValidatedPlan, PlanError> {
    let manifest = test_manifest();
    let data = host_snapshot::build(&manifest, &[WatchView::identity(vec![], 1)]);
    let view = SnapshotView::new(&data).expect("the host's snapshot is valid");
    validate(p, &manifest, &view)
}

/// Any write at all, documents and references included.
fn any_write() -> impl Strategy<Value = wit::Write> {
    let text = prop_oneof![
        ".{0,40}",
        "\\{\"apiVersion\":\"v1\",\"kind\":\"[A-Za-z]{0,8}\",\"metadata\":\\{\"name\":\"[a-z]{0,5}\"\\}\\}",
        Just("[]".to_string()),
        Just("null".to_string()),
    ];
    let reference = (
        ".{0,6}",
        ".{0,10}",
        proptest::option::of(".{0,6}"),
        ".{0,6}",
    )
        .prop_map(|(api_version, kind, namespace, name)| wit::ObjectRef {
            api_version,
            kind,
            namespace,
            name,
        });
    prop_oneof![
        text.clone().prop_map(wit::Write::Apply),
        text.clone().prop_map(wit::Write::Update),
        text.prop_map(wit::Write::ApplyStatus),
        reference.clone().prop_map(wit::Write::Delete),
        (reference, ".{0,20}").prop_map(|(target, finalizer)| {
            wit::Write::AddFinalizer(wit::FinalizerRef { target, finalizer })
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Arbitrary writes (junk documents, empty references, odd finalizers)
    /// never panic, and an accepted plan keeps every write in order.
    #[test]
    fn generated_plans_never_panic(writes in prop::collection::vec(any_write(), 0..5)) {
        let p = plan(writes);
        if let Ok(validated) = check(&p) {
            prop_assert_eq!(validated.writes.len(), p.writes.len());
        }
    }

    /// A single write is accepted exactly when the reference model of the
    /// allowlist allows it; a refusal is `NotAllowed` naming the target.
    #[test]
    fn allowlist_decides_each_write(t in target()) {
        let result = check(&plan(vec![t.write()]));
        if t.allowed() {
            prop_assert!(result.is_ok(), "{:?} refused: {:?}", t, result.err());
        } else {
            match result {
                Err(PlanError::NotAllowed { verb, target, .. }) => {
                    prop_assert_eq!(verb, if t.delete { "delete" } else { "apply" });
                    prop_assert!(target.ends_with(t.name));
                }
                other => prop_assert!(false, "{:?} not refused: {:?}", t, other),
            }
        }
    }

    /// A plan of several writes is accepted exactly when every write is
    /// allowed and none repeats; otherwise the first offending write (in
    /// order) decides the error.
    #[test]
    fn plans_are_refused_at_the_first_bad_write(ts in prop::collection::vec(target(), 0..6)) {
        let result = check(&plan(ts.iter().map(Target::write).collect()));
        let mut seen = std::collections::BTreeSet::new();
        let mut want = None;
        for t in &ts {
            if !t.allowed() {
                want = Some("not allowed");
                break;
            }
            let key = (t.delete, t.api_version, t.kind, t.namespace, t.name);
            if !seen.insert(key) {
                want = Some("duplicate");
                break;
            }
        }
        match (want, result) {
            (None, Ok(v)) => prop_assert_eq!(v.writes.len(), ts.len()),
            (Some("not allowed"), Err(PlanError::NotAllowed { .. })) => {}
            (Some("duplicate"), Err(PlanError::Duplicate { .. })) => {}
            (want, got) => prop_assert!(false, "{:?}: want {:?}, got {:?}", ts, want, got),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Whatever name and namespace a plan gives, a validated write's target
    /// is one URL path segment each: no '/', no '%', never '.' or '..'.
    #[test]
    fn an_accepted_target_never_spans_more_than_one_path_segment(
        name in prop_oneof![".{0,12}", "[a-z./%]{1,8}", Just("..".to_string())],
        namespace in proptest::option::of(prop_oneof![".{0,8}", "[a-z./%]{1,6}"]),
        delete in any::<bool>(),
    ) {
        let write = if delete {
            wit::Write::Delete(wit::ObjectRef {
                api_version: "v1".into(),
                kind: "Secret".into(),
                namespace: namespace.clone(),
                name: name.clone(),
            })
        } else {
            let mut metadata = json!({"name": name});
            if let Some(ns) = &namespace {
                metadata["namespace"] = json!(ns);
            }
            wit::Write::Apply(json!({"apiVersion": "v1", "kind": "Secret", "metadata": metadata}).to_string())
        };
        if let Ok(plan) = check(&plan(vec![write])) {
            let target = plan.writes[0].target();
            let one_segment = |s: &str| !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '%']);
            prop_assert!(one_segment(&target.name), "{:?}", target);
            prop_assert!(target.namespace.as_deref().is_none_or(one_segment), "{:?}", target);
        }
    }
}
