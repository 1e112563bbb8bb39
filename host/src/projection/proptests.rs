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

/// A generated object as text: members may repeat (a parser keeps the
/// last), which a `Json` cannot hold.
#[derive(Debug, Clone)]
enum Doc {
    Value(Json),
    List(Vec<Doc>),
    Object(Vec<(String, Doc)>),
}

impl Doc {
    fn render(&self, out: &mut String) {
        match self {
            Doc::Value(v) => out.push_str(&v.to_string()),
            Doc::List(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.render(out);
                }
                out.push(']');
            }
            Doc::Object(members) => {
                out.push('{');
                for (i, (k, v)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Json::from(k.as_str()).to_string());
                    out.push(':');
                    v.render(out);
                }
                out.push('}');
            }
        }
    }

    fn text(&self) -> String {
        let mut out = String::new();
        self.render(&mut out);
        out
    }
}

/// Member names of objects and their metadata (identity, owner
/// references), and a few of the keys paths use.
fn member() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "a",
        "spec",
        "nvidia.com/gpu",
        "apiVersion",
        "kind",
        "metadata",
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "deletionTimestamp",
        "finalizers",
        "ownerReferences",
        "controller",
    ])
    .prop_map(str::to_string)
}

/// Values of any shape over [`member`]s, identity-like ones often:
/// strings, numbers (big and fractional ones too), owner references.
fn doc() -> impl Strategy<Value = Doc> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<i64>().prop_map(Json::from),
        any::<u64>().prop_map(Json::from),
        (-1e6f64..1e6).prop_map(Json::from),
        "[a-z0-9]{0,4}".prop_map(Json::String),
    ]
    .prop_map(Doc::Value);
    leaf.prop_recursive(4, 64, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Doc::List),
            prop::collection::vec((member(), inner), 0..6).prop_map(Doc::Object),
        ]
    })
}

/// Objects with metadata most of the time, its members identity ones.
fn object() -> impl Strategy<Value = Doc> {
    let owner = prop::collection::vec(
        (
            prop::sample::select(vec!["apiVersion", "kind", "name", "uid", "controller"]),
            prop_oneof![
                "[a-z]{0,3}".prop_map(|s| Doc::Value(Json::String(s))),
                any::<bool>().prop_map(|b| Doc::Value(Json::Bool(b))),
                doc(),
            ],
        ),
        0..6,
    )
    .prop_map(|m| Doc::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()));
    let identity_value = prop_oneof![
        "[a-z0-9]{0,4}".prop_map(|s| Doc::Value(Json::String(s))),
        prop::collection::vec(owner, 0..3).prop_map(Doc::List),
        doc(),
    ];
    let metadata = prop::collection::vec((member(), identity_value), 0..8).prop_map(Doc::Object);
    let top = prop_oneof![
        3 => metadata.prop_map(|m| ("metadata".to_string(), m)),
        2 => (member(), doc()),
    ];
    prop_oneof![
        8 => prop::collection::vec(top, 0..6).prop_map(Doc::Object),
        1 => doc(),
    ]
}

/// A path over [`member`]s.
fn member_path() -> impl Strategy<Value = Vec<Segment>> {
    let step = prop_oneof![3 => member().prop_map(Segment::Key), 1 => Just(Segment::Each)];
    prop::collection::vec(step, 0..4)
}

/// The informer's decode before [`Decoder`]: the kept fields as a JSON
/// tree ([`Keep`]), the type filled in, then projected.
fn decode_by_tree(text: &str, projection: &Projection) -> Result<ProjectedObject, String> {
    use serde::de::DeserializeSeed;
    let keep = Keep::for_paths(projection.paths());
    let mut de = serde_json::Deserializer::from_str(text);
    let mut tree = (&keep).deserialize(&mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    if let Json::Object(map) = &mut tree {
        map.entry("apiVersion").or_insert_with(|| Json::from("v1"));
        map.entry("kind").or_insert_with(|| Json::from("Pod"));
    }
    Ok(projection.project(&tree, &mut Interner::default()))
}

fn decode_direct(text: &str, decoder: &Decoder) -> Result<ProjectedObject, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let object = decoder
        .decode(&mut de, &mut Interner::default())
        .map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(object)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Decoding straight into the projection gives exactly what building
    /// the tree of the kept fields and projecting it gives: identity,
    /// every value (numbers, whole objects and lists as text, missing
    /// fields), the fingerprint an identity keeps; repeated members read
    /// as the parser reads them (the last); and malformed text fails
    /// both ways.
    #[test]
    fn decoding_directly_equals_projecting_the_tree(
        doc in object(),
        paths in prop::collection::vec(member_path(), 0..5),
        cut in any::<prop::sample::Index>(),
    ) {
        let fields: Vec<FieldPath> = paths
            .iter()
            .map(|s| match s.is_empty() {
                true => FieldPath::whole(),
                false => FieldPath::parse(&render(s)).unwrap(),
            })
            .collect();
        let projection = Projection::new(fields, Vec::new());
        let decoder = Decoder::new(&projection).with_type("v1", "Pod");
        let text = doc.text();
        let want = decode_by_tree(&text, &projection).unwrap();
        let got = decode_direct(&text, &decoder).unwrap();
        prop_assert_eq!(&got, &want, "{}", text);
        prop_assert_eq!(got.fingerprint(), want.fingerprint());
        prop_assert_eq!(got.identity(), want.identity());
        // The same decoder again (its buffers reused), and cut short.
        prop_assert_eq!(decode_direct(&text, &decoder).unwrap(), want);
        let at = cut.index(text.len().max(1));
        let short = &text[..at.min(text.len())];
        prop_assert_eq!(
            decode_direct(short, &decoder).is_ok(),
            decode_by_tree(short, &projection).is_ok(),
            "{}", short
        );
    }
}
