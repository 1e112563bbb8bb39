//! Decoding an object straight into its [`ProjectedObject`]: a serde seed
//! driven by the projection's paths writes the identity and each
//! projected value as the parser reaches it and skips the rest of the
//! text (`IgnoredAny`). No JSON tree is built, except the value a path
//! yields whole (an object or a list, kept as JSON text) and a value two
//! kinds of reader share (a path ending where another goes on). It gives
//! exactly what [`Projection::project`] gives for the parsed object; it
//! never reads input itself and never decides which objects are kept.

use std::sync::Mutex;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value as Json;

use super::identity::{Identity, Part};
use super::{Interner, OwnerRef, Projected, ProjectedObject, Projection, Segment};
use crate::sync::lock;

/// A [`Projection`] compiled for decoding objects straight into their
/// [`ProjectedObject`]s (see [`Decoder::decode`]).
#[derive(Debug)]
pub struct Decoder {
    root: Node,
    /// The projection's paths.
    fields: usize,
    /// Top-level members an object lacking them is read with.
    defaults: Vec<(&'static str, Json)>,
    /// Buffers reused from one object to the next.
    scratch: Mutex<Scratch>,
}

#[derive(Debug, Default)]
struct Scratch {
    values: Vec<(u32, Projected)>,
    frames: Vec<Option<(usize, usize)>>,
}

impl Decoder {
    /// The decoder of `projection`'s paths (and the identity every
    /// projected object holds).
    pub fn new(projection: &Projection) -> Self {
        let mut root = Node::default();
        for part in Part::ALL {
            let path = [
                Segment::Key("metadata".into()),
                Segment::Key(part.key().into()),
            ];
            root.add(&path, End::Part(part));
        }
        for (i, path) in projection.paths().iter().enumerate() {
            root.add(
                path.segments(),
                End::Field(u32::try_from(i).unwrap_or(u32::MAX)),
            );
        }
        Decoder {
            root,
            fields: projection.paths().len(),
            defaults: Vec::new(),
            scratch: Mutex::default(),
        }
    }

    /// The same, reading an object without `apiVersion` or `kind` (a list
    /// item: the list names them once) as if it had these.
    #[must_use]
    pub fn with_type(mut self, api_version: &str, kind: &str) -> Self {
        self.defaults = vec![
            ("apiVersion", Json::from(api_version)),
            ("kind", Json::from(kind)),
        ];
        self
    }

    /// Decodes one object from `d`: what [`Projection::project`] gives for
    /// the parsed object (with the type of [`Decoder::with_type`] where it
    /// lacks one). Malformed input is the deserializer's error.
    pub fn decode<'de, D: Deserializer<'de>>(
        &self,
        d: D,
        interner: &mut Interner,
    ) -> Result<ProjectedObject, D::Error> {
        let mut scratch = lock(&self.scratch);
        let mut st = State {
            values: std::mem::take(&mut scratch.values),
            frames: std::mem::take(&mut scratch.frames),
            identity: Identity::default(),
            interner,
        };
        st.values.clear();
        st.frames.clear();
        let seed = NodeSeed {
            node: &self.root,
            defaults: &self.defaults,
            st: &mut st,
        };
        let decoded = seed.deserialize(d);
        let State {
            mut values,
            frames,
            identity,
            interner,
        } = st;
        // Values come in the order of the text; each field's in the order
        // of its path's walk. Ordered by field, stably.
        if !values.is_sorted_by_key(|(field, _)| *field) {
            values.sort_by_key(|(field, _)| *field);
        }
        let mut ends = Vec::with_capacity(self.fields);
        let mut at = 0;
        for field in 0..self.fields {
            while values.get(at).is_some_and(|(f, _)| *f as usize == field) {
                at += 1;
            }
            ends.push(u32::try_from(at).unwrap_or(u32::MAX));
        }
        let object: Vec<Projected> = values.drain(..).map(|(_, v)| v).collect();
        *scratch = Scratch { values, frames };
        decoded?;
        Ok(ProjectedObject::new(identity, object, ends, interner))
    }
}

/// What ends at a node of the paths' tree.
#[derive(Debug, Clone, Copy)]
enum End {
    Field(u32),
    Part(Part),
}

/// The paths' tree: one node per step shared by paths.
#[derive(Debug, Default)]
struct Node {
    /// The projection's fields ending here.
    fields: Vec<u32>,
    /// The identity parts ending here.
    parts: Vec<Part>,
    keys: Vec<(String, Node)>,
    each: Option<Box<Node>>,
    /// The identity parts here and under (a set of [`Part::bit`]s).
    under: u8,
}

/// How a node reads its value.
enum Shape<'a> {
    /// Only steps on: members and elements are read as they come.
    Branch,
    /// Fields end here and nothing goes on: the value is read whole.
    Leaf(&'a [u32]),
    /// An identity part ends here and nothing goes on.
    Part(Part),
    /// Anything else: the value is parsed, then walked.
    Whole,
}

impl Node {
    fn add(&mut self, segments: &[Segment], end: End) {
        if let End::Part(part) = end {
            self.under |= part.bit();
        }
        match segments.split_first() {
            None => match end {
                End::Field(i) => self.fields.push(i),
                End::Part(part) => self.parts.push(part),
            },
            Some((Segment::Key(k), rest)) => {
                let at = match self.keys.iter().position(|(key, _)| key == k) {
                    Some(at) => at,
                    None => {
                        self.keys.push((k.clone(), Node::default()));
                        self.keys.len() - 1
                    }
                };
                self.keys[at].1.add(rest, end);
            }
            Some((Segment::Each, rest)) => {
                self.each.get_or_insert_with(Box::default).add(rest, end)
            }
        }
    }

    fn shape(&self) -> Shape<'_> {
        let goes_on = !self.keys.is_empty() || self.each.is_some();
        match (self.fields.as_slice(), self.parts.as_slice(), goes_on) {
            ([], [], _) => Shape::Branch,
            (fields, [], false) => Shape::Leaf(fields),
            ([], [part], false) => Shape::Part(*part),
            _ => Shape::Whole,
        }
    }
}

/// One object's decoding.
struct State<'i> {
    /// Each value with its field, in the order of the text.
    values: Vec<(u32, Projected)>,
    /// For each member of the maps being read, where its values are in
    /// `values` once read (a repeated member replaces them).
    frames: Vec<Option<(usize, usize)>>,
    identity: Identity,
    interner: &'i mut Interner,
}

impl State<'_> {
    fn push(&mut self, fields: &[u32], value: Projected) {
        for f in fields {
            self.values.push((*f, value.clone()));
        }
    }

    /// A member read again: the values `read` of its first reading (and
    /// the identity `parts` under it) are forgotten, as a parser keeps
    /// the last of repeated members. `frames` are the map's.
    fn forget(&mut self, frames: std::ops::Range<usize>, read: (usize, usize), parts: u8) {
        let (start, end) = read;
        self.values.drain(start..end);
        for (a, b) in self.frames[frames].iter_mut().flatten() {
            if *a >= end {
                *a -= end - start;
                *b -= end - start;
            }
        }
        self.identity.reset(parts, self.interner);
    }

    /// `node` reached with the parsed `value` (None: missing), as
    /// [`super::FieldPath::extract`] walks it.
    fn walk(&mut self, node: &Node, value: Option<&Json>) {
        if !node.fields.is_empty() {
            let projected = Projected::from_json(value, self.interner);
            self.push(&node.fields, projected);
        }
        for part in &node.parts {
            self.identity.set_json(*part, value, self.interner);
        }
        for (key, child) in &node.keys {
            self.walk(child, value.and_then(|v| v.get(key.as_str())));
        }
        if let (Some(each), Some(Json::Array(items))) = (&node.each, value) {
            for item in items {
                self.walk(each, Some(item));
            }
        }
    }

    /// `node`'s members, reached with a value that has none.
    fn no_members(&mut self, node: &Node) {
        for (_, child) in &node.keys {
            self.walk(child, None);
        }
    }
}

/// Reads the value at `node`.
struct NodeSeed<'a, 's, 'i> {
    node: &'a Node,
    /// Top-level defaults (the root's only).
    defaults: &'a [(&'static str, Json)],
    st: &'s mut State<'i>,
}

impl<'de> DeserializeSeed<'de> for NodeSeed<'_, '_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        let node = self.node;
        match node.shape() {
            Shape::Branch => d.deserialize_any(Branch(self)),
            Shape::Leaf(fields) => {
                let value = d.deserialize_any(LeafValue {
                    interner: self.st.interner,
                })?;
                self.st.push(fields, value);
                Ok(())
            }
            Shape::Part(part) => d.deserialize_any(PartValue { part, st: self.st }),
            Shape::Whole => {
                let mut value = Json::deserialize(d)?;
                if let Json::Object(map) = &mut value {
                    for (key, default) in self.defaults {
                        map.entry(*key).or_insert_with(|| default.clone());
                    }
                }
                self.st.walk(node, Some(&value));
                Ok(())
            }
        }
    }
}

/// Drains a map or a list nobody reads.
fn skip_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

fn skip_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

/// A node whose paths step on into its value.
struct Branch<'a, 's, 'i>(NodeSeed<'a, 's, 'i>);

impl Branch<'_, '_, '_> {
    /// A value with no members or elements.
    fn scalar<E>(self) -> Result<(), E> {
        self.0.st.no_members(self.0.node);
        Ok(())
    }
}

impl<'de> Visitor<'de> for Branch<'_, '_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let NodeSeed { node, defaults, st } = self.0;
        let base = st.frames.len();
        let frames = base..base + node.keys.len();
        st.frames.resize(frames.end, None);
        let member = |k: &str| node.keys.iter().position(|(key, _)| key == k);
        while let Some(at) = map.next_key_seed(KeySeed(member))? {
            let Some(at) = at else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            let child = &node.keys[at].1;
            if let Some(read) = st.frames[base + at] {
                st.forget(frames.clone(), read, child.under);
            }
            let start = st.values.len();
            map.next_value_seed(NodeSeed {
                node: child,
                defaults: &[],
                st: &mut *st,
            })?;
            st.frames[base + at] = Some((start, st.values.len()));
        }
        for (at, (key, child)) in node.keys.iter().enumerate() {
            if st.frames[base + at].is_none() {
                let default = defaults.iter().find(|(k, _)| k == key).map(|(_, v)| v);
                st.walk(child, default);
            }
        }
        st.frames.truncate(base);
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let NodeSeed { node, st, .. } = self.0;
        st.no_members(node);
        let Some(each) = &node.each else {
            return skip_seq(seq);
        };
        while seq
            .next_element_seed(NodeSeed {
                node: each,
                defaults: &[],
                st: &mut *st,
            })?
            .is_some()
        {}
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        self.scalar()
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        self.scalar()
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        self.scalar()
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        self.scalar()
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        self.scalar()
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        self.scalar()
    }
}

/// A map key, as the position `F` gives it among the keys read (None:
/// skipped).
struct KeySeed<F>(F);

impl<'de, F: FnOnce(&str) -> Option<usize>> DeserializeSeed<'de> for KeySeed<F> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de, F: FnOnce(&str) -> Option<usize>> Visitor<'de> for KeySeed<F> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E>(self, v: &str) -> Result<Option<usize>, E> {
        Ok((self.0)(v))
    }
}

/// The value a field path yields ([`Projected::from_json`] of it).
struct LeafValue<'i> {
    interner: &'i mut Interner,
}

impl<'de> Visitor<'de> for LeafValue<'_> {
    type Value = Projected;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_str<E>(self, v: &str) -> Result<Projected, E> {
        Ok(Projected::Str(self.interner.intern(v)))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Projected, E> {
        Ok(Projected::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Projected, E> {
        Ok(Projected::Int(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Projected, E> {
        Ok(Projected::from_json(Some(&Json::from(v)), self.interner))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Projected, E> {
        Ok(Projected::from_json(Some(&Json::from(v)), self.interner))
    }

    fn visit_unit<E>(self) -> Result<Projected, E> {
        Ok(Projected::Absent)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Projected, A::Error> {
        let value = Json::deserialize(MapAccessDeserializer::new(map))?;
        Ok(Projected::from_json(Some(&value), self.interner))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Projected, A::Error> {
        let value = Json::deserialize(SeqAccessDeserializer::new(seq))?;
        Ok(Projected::from_json(Some(&value), self.interner))
    }
}

/// The value of an identity part.
struct PartValue<'s, 'i> {
    part: Part,
    st: &'s mut State<'i>,
}

impl PartValue<'_, '_> {
    /// A value that is neither text nor a list (numbers are no
    /// allocation as JSON).
    fn set<E>(self, value: &Json) -> Result<(), E> {
        self.st
            .identity
            .set_json(self.part, Some(value), self.st.interner);
        Ok(())
    }
}

impl<'de> Visitor<'de> for PartValue<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.st
            .identity
            .set_text(self.part, Some(v), self.st.interner);
        Ok(())
    }

    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.set(&Json::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        self.set(&Json::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        self.set(&Json::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        self.set(&Json::from(v))
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        self.set(&Json::Null)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        skip_map(map)?;
        self.set(&Json::Object(serde_json::Map::new()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let interner = &mut *self.st.interner;
        let identity = &mut self.st.identity;
        match self.part {
            Part::Finalizers => {
                let mut finalizers = Vec::new();
                while let Some(f) = seq.next_element_seed(Text(|t: &str| interner.intern(t)))? {
                    finalizers.extend(f);
                }
                identity.finalizers = finalizers;
            }
            Part::OwnerReferences => {
                let mut owner = None;
                while owner.is_none() {
                    match seq.next_element_seed(Owner {
                        interner: &mut *interner,
                    })? {
                        Some(found) => owner = found,
                        None => break,
                    }
                }
                skip_seq(seq)?;
                identity.owner = owner;
            }
            part => {
                skip_seq(seq)?;
                identity.set_json(part, Some(&Json::Array(Vec::new())), interner);
            }
        }
        Ok(())
    }
}

/// The visitor methods of the values (numbers, booleans, null) that give
/// `None`.
macro_rules! no_value_in_scalars {
    ($value:ty) => {
        fn visit_bool<E>(self, _: bool) -> Result<$value, E> {
            Ok(None)
        }

        fn visit_i64<E>(self, _: i64) -> Result<$value, E> {
            Ok(None)
        }

        fn visit_u64<E>(self, _: u64) -> Result<$value, E> {
            Ok(None)
        }

        fn visit_f64<E>(self, _: f64) -> Result<$value, E> {
            Ok(None)
        }

        fn visit_unit<E>(self) -> Result<$value, E> {
            Ok(None)
        }
    };
}

/// A string, as `F` keeps it (None: another value, skipped).
struct Text<F>(F);

impl<'de, T, F: FnOnce(&str) -> T> DeserializeSeed<'de> for Text<F> {
    type Value = Option<T>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T, F: FnOnce(&str) -> T> Visitor<'de> for Text<F> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_str<E>(self, v: &str) -> Result<Option<T>, E> {
        Ok(Some((self.0)(v)))
    }

    no_value_in_scalars!(Option<T>);

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<T>, A::Error> {
        skip_map(map).map(|()| None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<T>, A::Error> {
        skip_seq(seq).map(|()| None)
    }
}

/// An `ownerReferences` entry: the owner when it is the controller
/// (`controller: true`).
struct Owner<'i> {
    interner: &'i mut Interner,
}

impl<'de> DeserializeSeed<'de> for Owner<'_> {
    type Value = Option<OwnerRef>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<OwnerRef>, D::Error> {
        d.deserialize_any(self)
    }
}

/// The members of an owner reference read, in [`Owner`]'s order.
const OWNER_KEYS: [&str; 5] = ["apiVersion", "kind", "name", "uid", "controller"];

impl<'de> Visitor<'de> for Owner<'_> {
    type Value = Option<OwnerRef>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<OwnerRef>, A::Error> {
        let interner = self.interner;
        let mut text: [Option<std::sync::Arc<str>>; 4] = Default::default();
        let mut controller = None;
        let member = |k: &str| OWNER_KEYS.iter().position(|key| *key == k);
        while let Some(at) = map.next_key_seed(KeySeed(member))? {
            match at {
                // Owners are shared (the pods of one ReplicaSet):
                // interned.
                Some(at @ 0..=3) => {
                    text[at] = map.next_value_seed(Text(|t: &str| interner.intern(t)))?;
                }
                Some(_) => controller = map.next_value::<Json>()?.as_bool(),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if controller != Some(true) {
            return Ok(None);
        }
        let [api_version, kind, name, uid] = text.map(|t| t.unwrap_or_else(|| interner.intern("")));
        Ok(Some(OwnerRef {
            api_version,
            kind,
            name,
            uid,
        }))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<OwnerRef>, A::Error> {
        skip_seq(seq).map(|()| None)
    }

    fn visit_str<E>(self, _: &str) -> Result<Option<OwnerRef>, E> {
        Ok(None)
    }

    no_value_in_scalars!(Option<OwnerRef>);
}
