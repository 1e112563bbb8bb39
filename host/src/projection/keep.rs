//! Which parts of each object to keep while decoding: a serde seed that
//! builds only identity and the projected fields and skips the rest of the
//! text. The file reader's, and the informer's for the head of a whole
//! object it keeps as text (other objects it decodes straight into their
//! projection: `direct`). It never projects (see the parent module) and
//! never reads input itself.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use super::identity::Part;
use super::{FieldPath, Segment};

/// Which parts of each object to keep while decoding. Decoding straight
/// into the few fields a guest needs, skipping the rest of the text, is
/// several times faster than building whole objects (kubectl dumps are
/// mostly managedFields, annotations and status the guest never reads).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keep {
    all: bool,
    /// A document level: arrays hold documents, and `items` (of a `List`)
    /// holds documents, to any depth.
    pub(crate) doc: bool,
    pub(crate) fields: BTreeMap<String, Keep>,
    pub(crate) each: Option<Box<Keep>>,
}

impl Keep {
    /// Keep whole documents.
    pub fn everything() -> Self {
        Keep {
            all: true,
            ..Keep::default()
        }
    }

    /// Keep one object's identity (apiVersion, kind, name, namespace, uid,
    /// resourceVersion, generation, deletionTimestamp, finalizers, owner
    /// references) and `paths` — what an informer with that
    /// projection needs from each object it decodes.
    pub fn for_paths<'a>(paths: impl IntoIterator<Item = &'a FieldPath>) -> Self {
        let mut keep = Keep::default();
        keep.add_leaf("apiVersion");
        keep.add_leaf("kind");
        for part in Part::ALL {
            keep.add(&[
                Segment::Key("metadata".into()),
                Segment::Key(part.key().into()),
            ]);
        }
        for p in paths {
            keep.add(p.segments());
        }
        keep
    }

    /// The same, at every document level: arrays, and the `items` of a
    /// `List`, hold documents kept alike, to any depth.
    #[must_use]
    pub fn documents(mut self) -> Self {
        self.doc = true;
        self
    }

    /// Whether whole documents are kept (nothing is skipped).
    pub fn is_everything(&self) -> bool {
        self.all
    }

    /// Also keeps the field at `leaf` (a field path, e.g. `metadata.labels`;
    /// one that does not parse adds nothing).
    pub fn add_leaf(&mut self, leaf: &str) {
        if let Ok(p) = FieldPath::parse(leaf) {
            self.add(p.segments());
        }
    }

    pub(crate) fn add(&mut self, segments: &[Segment]) {
        let Some((first, rest)) = segments.split_first() else {
            self.all = true;
            return;
        };
        let child = match first {
            Segment::Key(k) => self.fields.entry(k.clone()).or_default(),
            Segment::Each => self.each.get_or_insert_with(Box::default),
        };
        child.add(rest);
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for &Keep {
    type Value = Json;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
        if self.all {
            return <Json as serde::Deserialize>::deserialize(d);
        }
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for &Keep {
    type Value = Json;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if self.doc && key == "items" {
                let v = map.next_value_seed(self)?;
                out.insert(key.into_owned(), v);
                continue;
            }
            match self.fields.get(key.as_ref()) {
                Some(child) => {
                    let v = map.next_value_seed(child)?;
                    out.insert(key.into_owned(), v);
                }
                None => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(Json::Object(out))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut out = Vec::new();
        if self.doc {
            while let Some(v) = seq.next_element_seed(self)? {
                out.push(v);
            }
            return Ok(Json::Array(out));
        }
        match &self.each {
            Some(each) => {
                while let Some(v) = seq.next_element_seed(each.as_ref())? {
                    out.push(v);
                }
            }
            None => while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {},
        }
        Ok(Json::Array(out))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_string()))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Json, E> {
        Ok(Json::from(v))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Json, E> {
        Ok(Json::from(v))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Json, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Json::Null, Json::Number))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
}
