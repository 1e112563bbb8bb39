//! Property-based tests of field paths: parsing never panics, generated
//! paths round-trip through their text, and projecting a generated object
//! yields exactly what a naive walk of the same JSON yields.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use serde_json::{Map, Value as Json};

use super::*;

/// Keys generated objects and paths share, so paths often hit: plain
/// names, and names that need quoting (dots, slashes).
fn key() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "a",
        "b",
        "spec",
        "nodeName",
        "nvidia.com/gpu",
        "x-y_z",
    ])
    .prop_map(str::to_string)
}

fn segment() -> impl Strategy<Value = Segment> {
    prop_oneof![3 => key().prop_map(Segment::Key), 1 => Just(Segment::Each)]
}

/// The text of a path: bare names where they can be, `['…']` otherwise.
fn render(segments: &[Segment]) -> String {
    let mut text = String::new();
    for s in segments {
        match s {
            Segment::Key(k)
                if k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c)) =>
            {
                if !text.is_empty() {
                    text.push('.');
                }
                text.push_str(k);
            }
            Segment::Key(k) => text.push_str(&format!("['{k}']")),
            Segment::Each => text.push_str("[*]"),
        }
    }
    text
}

/// JSON values over the shared keys, a few levels deep.
fn json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<i64>().prop_map(Json::from),
        (-1e6f64..1e6).prop_map(Json::from),
        "[a-z0-9]{0,6}".prop_map(Json::String),
    ];
    leaf.prop_recursive(4, 48, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Json::Array),
            prop::collection::btree_map(key(), inner, 0..4)
                .prop_map(|m| Json::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// The naive reference: every value the path reaches, `None` where a key
/// is missing (one per path without `[*]`).
fn reference(segments: &[Segment], node: Option<&Json>, out: &mut Vec<Option<Json>>) {
    match segments.split_first() {
        None => out.push(node.cloned()),
        Some((Segment::Key(k), rest)) => {
            let child = match node {
                Some(Json::Object(m)) => m.get(k),
                _ => None,
            };
            reference(rest, child, out);
        }
        Some((Segment::Each, rest)) => {
            if let Some(Json::Array(items)) = node {
                for item in items {
                    reference(rest, Some(item), out);
                }
            }
        }
    }
}

/// What the cache should hold for a reference value.
fn matches(projected: &Projected, want: &Option<Json>) -> bool {
    match (projected, want) {
        (Projected::Absent, None | Some(Json::Null)) => true,
        (Projected::Str(s), Some(Json::String(w))) => **s == **w,
        (Projected::Bool(b), Some(Json::Bool(w))) => b == w,
        (Projected::Int(i), Some(Json::Number(n))) => n.as_i64() == Some(*i),
        (Projected::Float(f), Some(Json::Number(n))) => {
            n.as_i64().is_none() && n.as_f64() == Some(*f)
        }
        (Projected::Json(text), Some(w @ (Json::Array(_) | Json::Object(_)))) => {
            serde_json::from_str::<Json>(text).ok().as_ref() == Some(w)
        }
        _ => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any text: no panic; an accepted path keeps its text and has no
    /// empty key; an error points inside (or just past) the text.
    #[test]
    fn parsing_any_string_never_panics(text in "[a-z.\\[\\]*'\"/ ]{0,16}|.{0,16}") {
        match FieldPath::parse(&text) {
            Ok(path) => {
                prop_assert_eq!(path.as_str(), text.as_str());
                prop_assert!(!path.segments().is_empty());
                for s in path.segments() {
                    prop_assert_ne!(s, &Segment::Key(String::new()));
                }
            }
            Err(e) => {
                prop_assert!(e.at <= text.len(), "{:?}", e);
                prop_assert_eq!(e.path, text);
            }
        }
    }

    /// Generated segments, rendered to text, parse back to themselves.
    #[test]
    fn generated_paths_round_trip(segments in prop::collection::vec(segment(), 1..6)) {
        let text = render(&segments);
        let parsed = FieldPath::parse(&text);
        prop_assert!(parsed.is_ok(), "{:?}: {:?}", text, parsed);
        let parsed = parsed.unwrap();
        prop_assert_eq!(parsed.segments(), segments.as_slice());
        prop_assert_eq!(parsed.is_multi(), segments.contains(&Segment::Each));
        // A leading '.' is allowed and changes nothing.
        if !text.starts_with('[') {
            let dotted = FieldPath::parse(&format!(".{text}")).unwrap();
            prop_assert_eq!(dotted.segments(), segments.as_slice());
        }
    }

    /// Projecting a generated object by generated paths returns exactly the
    /// values a naive walk of the JSON returns, in order, field by field.
    #[test]
    fn projection_equals_naive_walk(
        obj in json(),
        paths in prop::collection::vec(prop::collection::vec(segment(), 1..5), 1..4),
    ) {
        let parsed: Vec<FieldPath> = paths
            .iter()
            .map(|s| FieldPath::parse(&render(s)).unwrap())
            .collect();
        let projection = Projection::new(parsed, Vec::new());
        let mut interner = Interner::default();
        let projected = projection.project(&obj, &mut interner);
        for (i, segments) in paths.iter().enumerate() {
            let mut want = Vec::new();
            reference(segments, Some(&obj), &mut want);
            let got = projected.field(i);
            prop_assert_eq!(got.len(), want.len(), "path {} of {}", render(segments), obj);
            for (g, w) in got.iter().zip(&want) {
                prop_assert!(matches(g, w), "path {}: {:?} vs {:?}", render(segments), g, w);
            }
        }
    }
}
