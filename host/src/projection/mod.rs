//! Field projection: the guest-declared paths, and the compact per-object
//! record the host caches instead of the full object.
//!
//! Owns the path syntax (`a.b[*].c['x.y/z']`), extracting a path's values
//! from a JSON object or straight from its text while it is decoded
//! ([`Decoder`]), and [`ProjectedObject`], the few hundred bytes the host
//! keeps per cached object. It never talks to the API server and never
//! decides which objects are kept (that is the informer's job).
//!
//! # Layout
//! - `mod.rs`: paths, [`Projection`], [`ProjectedObject`].
//! - `identity`: the metadata every projected object holds, read from
//!   parsed JSON or set part by part while decoding.
//! - `owner`: [`OwnerRef`], the controller owner reference it keeps.
//! - `interner`: [`Interner`], sharing the strings and owner references
//!   cached objects repeat.
//! - `direct`: [`Decoder`], decoding an object's text into its projection.
//! - `keep`: [`Keep`], decoding only the kept parts into JSON (the file
//!   reader's, and whole objects' heads).

mod direct;
mod identity;
mod interner;
mod keep;
mod owner;

use std::fmt;
use std::sync::Arc;

use serde_json::Value as Json;

pub use direct::Decoder;
use identity::Identity;
pub use interner::{Interner, MIN_SWEEP};
pub use keep::Keep;
pub use owner::OwnerRef;

/// Errors in a guest-declared field path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid field path {path:?} at byte {at}: {problem}")]
pub struct PathError {
    /// The path as written.
    pub path: String,
    /// Byte offset of the problem.
    pub at: usize,
    /// What is wrong.
    pub problem: &'static str,
}

/// One step of a [`FieldPath`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// An object member (`.name` or `['name']`).
    Key(String),
    /// Every element of a list (`[*]`).
    Each,
}

/// A parsed projection path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldPath {
    text: String,
    segments: Vec<Segment>,
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FieldPath {
    /// Parses `a.b[*].c['key.with/dots']` (a leading `.` is allowed).
    pub fn parse(text: &str) -> Result<Self, PathError> {
        let err = |at: usize, problem: &'static str| PathError {
            path: text.to_string(),
            at,
            problem,
        };
        let bytes = text.as_bytes();
        let mut segments = Vec::new();
        let mut i = 0;
        if bytes.first() == Some(&b'.') {
            i = 1;
        }
        if i >= bytes.len() {
            return Err(err(i, "empty path"));
        }
        let mut expect_name = true;
        while i < bytes.len() {
            match bytes[i] {
                b'[' => {
                    if text[i..].starts_with("[*]") {
                        segments.push(Segment::Each);
                        i += 3;
                    } else if let Some(quote @ (b'\'' | b'"')) = bytes.get(i + 1).copied() {
                        let start = i + 2;
                        let Some(len) = text[start..].find(quote as char) else {
                            return Err(err(i, "unterminated quoted key"));
                        };
                        let end = start + len;
                        if !text[end + 1..].starts_with(']') {
                            return Err(err(end + 1, "expected ']' after quoted key"));
                        }
                        if len == 0 {
                            return Err(err(start, "empty key"));
                        }
                        segments.push(Segment::Key(text[start..end].to_string()));
                        i = end + 2;
                    } else {
                        return Err(err(i, "expected [*] or ['key']"));
                    }
                    expect_name = false;
                }
                b'.' => {
                    if expect_name {
                        return Err(err(i, "empty segment"));
                    }
                    expect_name = true;
                    i += 1;
                    if i == bytes.len() {
                        return Err(err(i, "path ends with '.'"));
                    }
                }
                _ => {
                    if !expect_name {
                        return Err(err(i, "expected '.' or '['"));
                    }
                    let start = i;
                    while i < bytes.len() && bytes[i] != b'.' && bytes[i] != b'[' {
                        if bytes[i] == b']' || bytes[i] == b'\'' || bytes[i] == b'"' {
                            return Err(err(i, "unexpected character"));
                        }
                        i += 1;
                    }
                    segments.push(Segment::Key(text[start..i].to_string()));
                    expect_name = false;
                }
            }
        }
        Ok(FieldPath {
            text: text.to_string(),
            segments,
        })
    }

    /// The path that yields the whole object as JSON text (host-internal:
    /// the outputs cache keeps written objects whole).
    pub fn whole() -> Self {
        FieldPath {
            text: String::new(),
            segments: Vec::new(),
        }
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The parsed segments.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Whether the path walks a list (may yield any number of values).
    pub fn is_multi(&self) -> bool {
        self.segments.contains(&Segment::Each)
    }

    /// Appends the path's values in `obj` to `out`: exactly one for a path
    /// without `[*]` (absent when missing), one per list element reached for
    /// a path with `[*]`.
    pub fn extract(&self, obj: &Json, interner: &mut Interner, out: &mut Vec<Projected>) {
        walk(&self.segments, Some(obj), interner, out);
    }
}

fn walk(
    segments: &[Segment],
    node: Option<&Json>,
    interner: &mut Interner,
    out: &mut Vec<Projected>,
) {
    let Some((first, rest)) = segments.split_first() else {
        out.push(Projected::from_json(node, interner));
        return;
    };
    match first {
        Segment::Key(k) => walk(rest, node.and_then(|n| n.get(k.as_str())), interner, out),
        Segment::Each => {
            if let Some(Json::Array(items)) = node {
                for item in items {
                    walk(rest, Some(item), interner, out);
                }
            }
        }
    }
}

/// One projected value as the host caches it.
#[derive(Debug, Clone, PartialEq)]
pub enum Projected {
    /// Missing or null.
    Absent,
    /// A string.
    Str(Arc<str>),
    /// An integer.
    Int(i64),
    /// A non-integer number.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// An object or list, as compact JSON.
    Json(Arc<str>),
}

impl Projected {
    fn from_json(node: Option<&Json>, interner: &mut Interner) -> Self {
        match node {
            None | Some(Json::Null) => Projected::Absent,
            Some(Json::String(s)) => Projected::Str(interner.intern(s)),
            Some(Json::Bool(b)) => Projected::Bool(*b),
            Some(Json::Number(n)) => match n.as_i64() {
                Some(i) => Projected::Int(i),
                None => Projected::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Some(other) => Projected::Json(interner.intern(&other.to_string())),
        }
    }

    /// The value as text when it is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Projected::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// A compiled projection: the guest's declared fields plus hidden index
/// fields, extracted in one pass.
#[derive(Debug, Clone)]
pub struct Projection {
    paths: Vec<FieldPath>,
    visible: usize,
}

impl Projection {
    /// `fields` are sent to the guest; `index_fields` are only used to build
    /// indexes.
    pub fn new(fields: Vec<FieldPath>, index_fields: Vec<FieldPath>) -> Self {
        let visible = fields.len();
        let mut paths = fields;
        paths.extend(index_fields);
        Projection { paths, visible }
    }

    /// Number of fields the guest sees.
    pub fn visible(&self) -> usize {
        self.visible
    }

    /// All paths, visible first.
    pub fn paths(&self) -> &[FieldPath] {
        &self.paths
    }

    /// Projects one object.
    pub fn project(&self, obj: &Json, interner: &mut Interner) -> ProjectedObject {
        let mut values = Vec::with_capacity(self.paths.len() + 2);
        let mut ends = Vec::with_capacity(self.paths.len());
        for path in &self.paths {
            path.extract(obj, interner, &mut values);
            ends.push(u32::try_from(values.len()).unwrap_or(u32::MAX));
        }
        assemble(obj, values, ends, interner)
    }

    /// Projects a whole object given as its JSON `text`, with `head`
    /// holding (at least) its metadata identity fields and every other path
    /// of this projection, decoded from that text: what [`Self::project`]
    /// gives for the parsed text, without building the whole object. The
    /// text is kept as given (not interned: whole objects are seldom
    /// equal).
    pub fn project_text(
        &self,
        head: &Json,
        text: Arc<str>,
        interner: &mut Interner,
    ) -> ProjectedObject {
        let mut values = Vec::with_capacity(self.paths.len() + 2);
        let mut ends = Vec::with_capacity(self.paths.len());
        for path in &self.paths {
            if path.segments.is_empty() {
                values.push(Projected::Json(text.clone()));
            } else {
                path.extract(head, interner, &mut values);
            }
            ends.push(u32::try_from(values.len()).unwrap_or(u32::MAX));
        }
        assemble(head, values, ends, interner)
    }
}

/// A projected object from its fields' `values` and an object holding
/// (at least) its metadata identity fields.
fn assemble(
    obj: &Json,
    values: Vec<Projected>,
    ends: Vec<u32>,
    interner: &mut Interner,
) -> ProjectedObject {
    let identity = Identity::of(obj, interner);
    ProjectedObject::new(identity, values, ends, interner)
}

/// What the host keeps of one cached object.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectedObject {
    /// Namespace ("" when cluster-scoped); interned.
    pub namespace: Arc<str>,
    /// Name.
    pub name: Arc<str>,
    /// metadata.uid ("" when unknown, e.g. offline input).
    pub uid: Arc<str>,
    /// metadata.resourceVersion ("" when unknown).
    pub resource_version: Arc<str>,
    /// metadata.generation (0 when the type has none).
    pub generation: i64,
    /// metadata.deletionTimestamp, when the object is being deleted.
    pub deletion_timestamp: Option<Arc<str>>,
    /// The controller owner reference, if any; interned (the pods of one
    /// ReplicaSet share it), and behind a pointer: many objects have none,
    /// and the four strings would add 56 bytes to every one.
    pub owner: Option<Arc<OwnerRef>>,
    /// metadata.finalizers, in order; interned.
    pub finalizers: Box<[Arc<str>]>,
    values: Box<[Projected]>,
    ends: Box<[u32]>,
    /// For an identity (see [`ProjectedObject::identity`]): the
    /// fingerprint of the fields it no longer holds. None while it holds
    /// them.
    dropped: Option<Fingerprint>,
}

/// A 128-bit fingerprint of a projection's fields: two differently seeded
/// SipHash passes over every value. What an identity keeps of its fields,
/// so that an update changing none of them is still told apart.
pub type Fingerprint = (u64, u64);

fn hash_fields<H: std::hash::Hasher>(state: &mut H, values: &[Projected], ends: &[u32]) {
    use std::hash::Hash;
    ends.hash(state);
    for v in values {
        match v {
            Projected::Absent => state.write_u8(0),
            Projected::Str(s) => (1u8, &**s).hash(state),
            Projected::Int(i) => (2u8, i).hash(state),
            Projected::Float(f) => (3u8, f.to_bits()).hash(state),
            Projected::Bool(b) => (4u8, b).hash(state),
            Projected::Json(s) => (5u8, &**s).hash(state),
        }
    }
}

impl ProjectedObject {
    /// The projected object of `identity` and its fields' `values`
    /// (`ends[i]`: the values of fields up to `i`).
    fn new(
        identity: Identity,
        values: Vec<Projected>,
        ends: Vec<u32>,
        interner: &mut Interner,
    ) -> Self {
        let text = |t: Option<Arc<str>>| t.unwrap_or_else(|| Arc::from(""));
        ProjectedObject {
            namespace: identity.namespace.unwrap_or_else(|| interner.intern("")),
            name: text(identity.name),
            uid: text(identity.uid),
            resource_version: text(identity.resource_version),
            generation: identity.generation,
            deletion_timestamp: identity.deletion_timestamp,
            owner: identity.owner.map(|o| interner.intern_owner(o)),
            finalizers: identity.finalizers.into_boxed_slice(),
            values: values.into_boxed_slice(),
            ends: ends.into_boxed_slice(),
            dropped: None,
        }
    }

    /// Whether two projections of an object carry the same content
    /// (resourceVersion aside). Against an identity, the fields compare by
    /// fingerprint.
    pub fn same_content(&self, other: &ProjectedObject) -> bool {
        if !self.same_identity(other) {
            return false;
        }
        match (self.dropped, other.dropped) {
            (None, None) => self.ends == other.ends && self.values == other.values,
            _ => self.fingerprint() == other.fingerprint(),
        }
    }

    /// The fingerprint of its fields (kept by an identity).
    pub fn fingerprint(&self) -> Fingerprint {
        if let Some(f) = self.dropped {
            return f;
        }
        let mut a = std::collections::hash_map::DefaultHasher::new();
        let mut b = std::collections::hash_map::DefaultHasher::new();
        std::hash::Hasher::write_u64(&mut b, 0x9e37_79b9_7f4a_7c15);
        hash_fields(&mut a, &self.values, &self.ends);
        hash_fields(&mut b, &self.values, &self.ends);
        (std::hash::Hasher::finish(&a), std::hash::Hasher::finish(&b))
    }

    /// This object without its projected fields: its identity (namespace,
    /// name, uid, resourceVersion, generation, deletion timestamp, owner,
    /// finalizers) and the fingerprint of its fields. What a cache keeps
    /// of an object whose only reader keeps what it needs of the fields
    /// itself (see `store::Retention`).
    pub fn identity(&self) -> ProjectedObject {
        ProjectedObject {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            resource_version: self.resource_version.clone(),
            generation: self.generation,
            deletion_timestamp: self.deletion_timestamp.clone(),
            owner: self.owner.clone(),
            finalizers: self.finalizers.clone(),
            values: Box::default(),
            ends: Box::default(),
            dropped: Some(self.fingerprint()),
        }
    }

    /// An identity (see [`ProjectedObject::identity`]) of the object with
    /// this key, uid and resourceVersion whose fields had `fingerprint`,
    /// its other metadata empty: the caller sets what it kept of them.
    pub fn without_fields(
        namespace: Arc<str>,
        name: Arc<str>,
        uid: Arc<str>,
        resource_version: Arc<str>,
        fingerprint: Fingerprint,
    ) -> Self {
        ProjectedObject {
            namespace,
            name,
            uid,
            resource_version,
            generation: 0,
            deletion_timestamp: None,
            owner: None,
            finalizers: Box::default(),
            values: Box::default(),
            ends: Box::default(),
            dropped: Some(fingerprint),
        }
    }

    /// Whether it holds its projected fields (false for an identity: every
    /// field then reads as empty).
    pub fn holds_fields(&self) -> bool {
        self.dropped.is_none()
    }

    /// Whether two projections of an object agree on everything but their
    /// fields and resourceVersion: namespace, name, uid, generation,
    /// deletion timestamp, controller owner and finalizers.
    pub fn same_identity(&self, other: &ProjectedObject) -> bool {
        self.namespace == other.namespace
            && self.name == other.name
            && self.uid == other.uid
            && self.generation == other.generation
            && self.deletion_timestamp == other.deletion_timestamp
            && self.owner == other.owner
            && self.finalizers == other.finalizers
    }

    /// The values of field `i` (empty when out of range).
    pub fn field(&self, i: usize) -> &[Projected] {
        let Some(&end) = self.ends.get(i) else {
            return &[];
        };
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        self.values.get(start..end as usize).unwrap_or(&[])
    }

    /// Whether `finalizer` is in metadata.finalizers.
    pub fn has_finalizer(&self, finalizer: &str) -> bool {
        self.finalizers.iter().any(|f| &**f == finalizer)
    }

    /// The request key of this object: `namespace/name`, or `name` when
    /// cluster-scoped.
    pub fn key(&self) -> String {
        object_key(&self.namespace, &self.name)
    }

    /// Number of fields held (visible and index fields).
    pub fn field_count(&self) -> usize {
        self.ends.len()
    }

    /// Approximate heap bytes this object holds exclusively (interned
    /// strings and owner references not counted), for memory accounting.
    pub fn heap_bytes(&self) -> usize {
        self.name.len()
            + self.uid.len()
            + self.resource_version.len()
            + 3 * 16
            + self.finalizers.len() * 16
            + std::mem::size_of_val(&*self.values)
            + std::mem::size_of_val(&*self.ends)
    }
}

/// `namespace/name`, or `name` for a cluster-scoped object: the key a
/// per-object controller reconciles.
pub fn object_key(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    }
}

/// Reads field `path` (by position in the informer's projection) — used by
/// callers that map a guest's declared fields onto a shared projection.
pub fn field_positions(projection: &Projection, wanted: &[FieldPath]) -> Vec<usize> {
    wanted
        .iter()
        .map(|w| {
            projection
                .paths()
                .iter()
                .position(|p| p == w)
                .unwrap_or(usize::MAX)
        })
        .collect()
}

/// Parses the whole object kept at informer position `at` (the position of
/// [`FieldPath::whole`] in the informer's projection, which a watch of the
/// same resource may have widened: never assume it is first).
pub fn whole_object(obj: &ProjectedObject, at: usize) -> Option<Json> {
    serde_json::from_str(whole_text(obj, at)?).ok()
}

/// The text of the whole object kept at informer position `at` (see
/// [`whole_object`]), unparsed.
pub fn whole_text(obj: &ProjectedObject, at: usize) -> Option<&str> {
    match obj.field(at).first()? {
        Projected::Json(text) => Some(text),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(s: &str) -> FieldPath {
        FieldPath::parse(s).unwrap()
    }

    #[test]
    fn parses_fields_wildcards_and_quoted_keys() {
        let p = path("spec.containers[*].resources.requests['nvidia.com/gpu']");
        assert_eq!(
            p.segments(),
            &[
                Segment::Key("spec".into()),
                Segment::Key("containers".into()),
                Segment::Each,
                Segment::Key("resources".into()),
                Segment::Key("requests".into()),
                Segment::Key("nvidia.com/gpu".into()),
            ]
        );
        assert!(p.is_multi());
        assert_eq!(path(".metadata.name").segments().len(), 2);
        assert_eq!(
            path(r#"a["b.c"]"#).segments()[1],
            Segment::Key("b.c".into())
        );
    }

    #[test]
    fn rejects_malformed_paths_naming_the_position() {
        for (bad, at) in [
            ("", 0),
            (".", 1),
            ("a..b", 2),
            ("a.", 2),
            ("a[0]", 1),
            ("a['x", 1),
            ("a['x']b", 6),
            ("a['']", 3),
            ("a]", 1),
        ] {
            let e = FieldPath::parse(bad).unwrap_err();
            assert_eq!(e.at, at, "{bad:?}: {e}");
            assert!(e.to_string().contains(bad), "{e}");
        }
    }

    #[test]
    fn wildcard_paths_stay_aligned_per_element() {
        let pod = json!({"spec": {"initContainers": [
            {"name": "a", "restartPolicy": "Always", "resources": {"requests": {"g": "1"}}},
            {"name": "b", "resources": {"limits": {"g": 2}}},
        ]}});
        let mut i = Interner::default();
        let projection = Projection::new(
            vec![
                path("spec.initContainers[*].restartPolicy"),
                path("spec.initContainers[*].resources.requests['g']"),
                path("spec.initContainers[*].resources.limits['g']"),
                path("spec.containers[*].name"),
                path("spec.nodeName"),
            ],
            vec![],
        );
        let o = projection.project(&pod, &mut i);
        assert_eq!(
            o.field(0),
            &[Projected::Str("Always".into()), Projected::Absent]
        );
        assert_eq!(o.field(1), &[Projected::Str("1".into()), Projected::Absent]);
        assert_eq!(o.field(2), &[Projected::Absent, Projected::Int(2)]);
        assert_eq!(o.field(3), &[] as &[Projected]);
        assert_eq!(o.field(4), &[Projected::Absent]);
        assert_eq!(o.field(9), &[] as &[Projected]);
    }

    #[test]
    fn objects_and_lists_at_the_leaf_become_json_text() {
        let mut i = Interner::default();
        let mut out = Vec::new();
        path("metadata.labels").extract(
            &json!({"metadata": {"labels": {"a": "b"}}}),
            &mut i,
            &mut out,
        );
        assert_eq!(out, vec![Projected::Json(r#"{"a":"b"}"#.into())]);
    }

    #[test]
    fn interner_shares_equal_strings_and_sweeps_unused_ones() {
        let mut i = Interner::default();
        let a = i.intern("node-1");
        let b = i.intern("node-1");
        assert!(Arc::ptr_eq(&a, &b));
        drop((a, b));
        i.intern("kept");
        let _kept = i.intern("kept");
        i.sweep();
        assert_eq!(i.len(), 1);
    }

    #[test]
    fn an_interner_fed_new_versions_stays_bounded_without_a_relist() {
        // A watch replacing 1,000 cached objects a million times over: each
        // version brings strings of its own (a resourceVersion, a time) and
        // drops its predecessor's. Only a relist sweeps today; the set must
        // not hold every string ever seen.
        let mut i = Interner::default();
        let mut cached: Vec<Arc<str>> = (0..1000).map(|n| i.intern(&format!("v{n}"))).collect();
        for version in 0..1_000_000u32 {
            let slot = (version % 1000) as usize;
            cached[slot] = i.intern(&format!("rv-{version}"));
        }
        assert!(i.len() <= 8 * 1000 + MIN_SWEEP, "{} strings held", i.len());
        // Every string still referenced is still shared.
        for s in &cached {
            assert!(Arc::ptr_eq(s, &i.intern(s)));
        }
    }
}

#[cfg(test)]
mod proptests;
