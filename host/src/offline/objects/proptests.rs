//! Property-based tests of object decoding: arbitrary text never panics,
//! and decoding a generated pod with a projection's [`Keep`] (as the
//! informer's list/watch decode and offline input reading both do) loses
//! nothing the projection reads: the projected fields equal what serde_json
//! reading the same paths of the whole object gives.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use serde::de::DeserializeSeed;
use serde_json::{json, Map, Value as Json};

use super::*;
use crate::projection::{FieldPath, Interner, Projected, Projection};

/// The GPU-summary guest's projection, and a few paths of other shapes.
const PATHS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.labels.app",
    "metadata.labels['team.example.com/owner']",
    "spec.nodeName",
    "status.phase",
    "spec.containers[*].resources.requests['nvidia.com/gpu']",
    "spec.containers[*].resources.limits['nvidia.com/gpu']",
    "spec.initContainers[*].resources.requests['nvidia.com/gpu']",
    "spec.initContainers[*].restartPolicy",
    "spec.overhead['nvidia.com/gpu']",
    "spec.containers[*].env",
    "spec.tolerations",
];

/// Any JSON value, a few levels deep (junk the decoder must skip).
fn junk() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<i64>().prop_map(Json::from),
        (-1e9f64..1e9).prop_map(Json::from),
        ".{0,8}".prop_map(Json::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Json::Array),
            prop::collection::btree_map("[a-zA-Z./]{1,8}", inner, 0..4)
                .prop_map(|m| Json::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A GPU quantity as a pod might carry it (sometimes not a string at all).
fn quantity() -> impl Strategy<Value = Json> {
    prop_oneof![
        4 => "[0-9]{1,2}|[0-9]{1,4}m|[0-9]Ki".prop_map(Json::String),
        1 => junk(),
    ]
}

fn container() -> impl Strategy<Value = Json> {
    (
        proptest::option::of(quantity()),
        proptest::option::of(quantity()),
        proptest::option::of(prop::sample::select(vec!["Always", "Never"])),
        junk(),
    )
        .prop_map(|(request, limit, restart, env)| {
            let mut resources = json!({});
            if let Some(q) = request {
                resources["requests"] = json!({"nvidia.com/gpu": q, "cpu": "1"});
            }
            if let Some(q) = limit {
                resources["limits"] = json!({"nvidia.com/gpu": q});
            }
            let mut c = json!({"name": "c", "image": "x", "resources": resources, "env": env});
            if let Some(r) = restart {
                c["restartPolicy"] = json!(r);
            }
            c
        })
}

/// A pod: identity, labels, containers and init containers with GPU
/// amounts, node, phase, plus junk in annotations, spec and status.
fn pod() -> impl Strategy<Value = Json> {
    (
        "[a-z]{1,8}",
        proptest::option::of("[a-z]{1,5}"),
        prop::collection::vec(container(), 0..3),
        prop::collection::vec(container(), 0..2),
        proptest::option::of("node-[0-9]"),
        proptest::option::of(prop::sample::select(vec![
            "Running",
            "Pending",
            "Succeeded",
        ])),
        junk(),
        junk(),
    )
        .prop_map(
            |(name, app, containers, inits, node, phase, junk1, junk2)| {
                let mut labels = json!({"team.example.com/owner": "ml"});
                if let Some(app) = app {
                    labels["app"] = json!(app);
                }
                json!({
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"),
                                 "labels": labels, "annotations": {"junk": junk1.to_string()},
                                 "managedFields": [junk1]},
                    "spec": {"nodeName": node, "containers": containers, "initContainers": inits,
                             "tolerations": junk2, "overhead": {"nvidia.com/gpu": "1"}},
                    "status": {"phase": phase, "conditions": [junk2]},
                })
            },
        )
}

fn projection() -> Projection {
    Projection::new(
        PATHS.iter().map(|p| FieldPath::parse(p).unwrap()).collect(),
        Vec::new(),
    )
}

/// Decodes `text` as the informer does: a [`Keep`] as the deserialize seed.
fn decode_kept(text: &str, keep: &Keep) -> Json {
    let mut de = serde_json::Deserializer::from_str(text);
    keep.deserialize(&mut de)
        .expect("generated pods are valid JSON")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Any text (JSON-ish, YAML-ish or neither): decoding never panics, and
    /// an error names the file.
    #[test]
    fn arbitrary_text_never_panics(text in ".{0,60}|[\\[\\]{}\":,a-z0-9 \\n-]{0,60}") {
        let keep = Keep::for_paths(projection().paths());
        for result in [parse_objects("gen.json", &text), parse_objects_keeping("gen.json", &text, &keep)] {
            if let Err(e) = result {
                prop_assert!(e.to_string().starts_with("gen.json:"), "{}", e);
            }
        }
    }

    /// Arbitrary JSON values: decoding never panics (a non-object is an
    /// error naming the file, not a crash).
    #[test]
    fn arbitrary_json_never_panics(value in junk()) {
        let text = value.to_string();
        let _ = parse_objects("gen.json", &text);
        let keep = Keep::for_paths(projection().paths());
        let _ = parse_objects_keeping("gen.json", &text, &keep);
    }

    /// A generated pod decoded with the projection's `Keep` (the informer's
    /// path, and the offline reader's) projects exactly as the whole object
    /// read by serde_json does.
    #[test]
    fn kept_decode_projects_like_the_whole_object(pod in pod()) {
        let text = pod.to_string();
        let projection = projection();
        let keep = Keep::for_paths(projection.paths());
        let whole: Json = serde_json::from_str(&text).unwrap();
        let mut interner = Interner::default();
        let want = projection.project(&whole, &mut interner);

        let kept = decode_kept(&text, &keep);
        let got = projection.project(&kept, &mut interner);
        prop_assert!(got.same_content(&want), "{:?}\nvs\n{:?}", got, want);
        prop_assert_eq!((&got.name, &got.namespace, &got.uid), (&want.name, &want.namespace, &want.uid));
        for (i, path) in PATHS.iter().enumerate() {
            prop_assert_eq!(got.field(i), want.field(i), "{}", path);
        }

        let offline = parse_objects_keeping("gen.json", &text, &keep).unwrap();
        prop_assert_eq!(offline.len(), 1);
        let got = projection.project(&offline[0], &mut interner);
        for (i, path) in PATHS.iter().enumerate() {
            prop_assert_eq!(got.field(i), want.field(i), "{}", path);
        }

        // And the GPU paths read what serde_json reads at the same place.
        let direct = |c: &Json, which: &str| c.pointer(&format!("/resources/{which}/nvidia.com~1gpu")).cloned();
        let containers = whole.pointer("/spec/containers").and_then(Json::as_array).cloned().unwrap_or_default();
        let requests = got.field(6);
        prop_assert_eq!(requests.len(), containers.len());
        for (p, c) in requests.iter().zip(&containers) {
            match direct(c, "requests") {
                Some(Json::String(s)) => prop_assert_eq!(p.as_str(), Some(s.as_str())),
                None | Some(Json::Null) => prop_assert_eq!(p, &Projected::Absent),
                Some(_) => prop_assert!(p.as_str().is_none()),
            }
        }
    }
}
