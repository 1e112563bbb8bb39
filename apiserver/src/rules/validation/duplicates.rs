//! A JSON document as written (members in order, duplicate keys kept) and
//! the problems only such a reading shows: duplicate keys, unknown fields
//! in document order for create and update bodies, and the unknown and
//! duplicate members of JSON patch operations.
//!
//! This module owns *the order and duplicates of a request body*; it never
//! decides which fields are unknown (it is told) and never changes the
//! object that is stored.

use std::collections::{BTreeSet, HashSet};
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use super::messages::{json_path, Problems};
use crate::rules::go_words::{go_quote, Path, Seg};

/// Problems of a create/update body: in document order for JSON (unknown
/// and duplicate fields interleaved, as the decoder meets them), sorted for
/// anything else (YAML is converted to key-sorted JSON before decoding).
pub(super) fn body_problems(body: &[u8], unknown: &[Path]) -> Problems {
    let mut out = Problems::default();
    if let Some(doc) = Doc::parse(body) {
        let unknown_set: BTreeSet<&Path> = unknown.iter().collect();
        let mut reported = HashSet::new();
        doc.walk(&mut Vec::new(), &unknown_set, &mut reported, &mut out);
        let rest: Vec<Path> = unknown
            .iter()
            .filter(|p| !reported.contains(*p))
            .cloned()
            .collect();
        out.unknown(&rest);
    } else {
        out.unknown(unknown);
    }
    out
}

/// `json patch unknown field "[0].foo"` and `json patch duplicate field
/// "[1].path"` for the operations of a JSON patch.
pub(super) fn json_patch_problems(doc: &Doc, out: &mut Problems) {
    let Doc::Array(ops) = doc else {
        return;
    };
    for (i, op) in ops.iter().enumerate() {
        let Doc::Object(members) = op else {
            continue;
        };
        let mut seen = HashSet::new();
        for (k, v) in members {
            let path = vec![Seg::Index(i), Seg::Key(k.clone())];
            if !matches!(k.as_str(), "op" | "path" | "from" | "value") {
                out.push(format!(
                    "json patch unknown field {}",
                    go_quote(&json_path(&path))
                ));
                continue;
            }
            if !seen.insert(k.as_str()) {
                out.push(format!(
                    "json patch duplicate field {}",
                    go_quote(&json_path(&path))
                ));
            }
            if k == "value" {
                v.duplicates(&mut path.clone(), "json patch ", out);
            }
        }
    }
}

/// A JSON document as written: members in order, duplicates kept.
pub(super) enum Doc {
    Object(Vec<(String, Doc)>),
    Array(Vec<Doc>),
    Scalar,
}

impl Doc {
    pub(super) fn parse(raw: &[u8]) -> Option<Doc> {
        serde_json::from_slice(raw).ok()
    }

    /// Reports duplicate keys (prefixed with `prefix`) anywhere below.
    pub(super) fn duplicates(&self, path: &mut Path, prefix: &str, out: &mut Problems) {
        match self {
            Doc::Object(members) => {
                let mut seen = HashSet::new();
                for (k, v) in members {
                    path.push(Seg::Key(k.clone()));
                    if !seen.insert(k.as_str()) {
                        out.push(format!(
                            "{prefix}duplicate field {}",
                            go_quote(&json_path(path))
                        ));
                    }
                    v.duplicates(path, prefix, out);
                    path.pop();
                }
            }
            Doc::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    path.push(Seg::Index(i));
                    v.duplicates(path, prefix, out);
                    path.pop();
                }
            }
            Doc::Scalar => {}
        }
    }

    /// Reports unknown fields (without looking inside them) and duplicate
    /// known fields in document order.
    fn walk(
        &self,
        path: &mut Path,
        unknown: &BTreeSet<&Path>,
        reported: &mut HashSet<Path>,
        out: &mut Problems,
    ) {
        match self {
            Doc::Object(members) => {
                let mut seen = HashSet::new();
                for (k, v) in members {
                    path.push(Seg::Key(k.clone()));
                    if unknown.contains(&*path) {
                        if reported.insert(path.clone()) {
                            out.push(format!("unknown field {}", go_quote(&json_path(path))));
                        }
                    } else {
                        if !seen.insert(k.as_str()) {
                            out.push(format!("duplicate field {}", go_quote(&json_path(path))));
                        }
                        v.walk(path, unknown, reported, out);
                    }
                    path.pop();
                }
            }
            Doc::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    path.push(Seg::Index(i));
                    v.walk(path, unknown, reported, out);
                    path.pop();
                }
            }
            Doc::Scalar => {}
        }
    }
}

impl<'de> Deserialize<'de> for Doc {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DocVisitor)
    }
}

struct DocVisitor;

impl<'de> Visitor<'de> for DocVisitor {
    type Value = Doc;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Doc, E> {
        Ok(Doc::Scalar)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Doc, E> {
        Ok(Doc::Scalar)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Doc, E> {
        Ok(Doc::Scalar)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Doc, E> {
        Ok(Doc::Scalar)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Doc, E> {
        Ok(Doc::Scalar)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Doc, E> {
        Ok(Doc::Scalar)
    }
    fn visit_none<E: de::Error>(self) -> Result<Doc, E> {
        Ok(Doc::Scalar)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Doc, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Doc::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Doc, A::Error> {
        let mut members = Vec::new();
        while let Some(entry) = map.next_entry::<String, Doc>()? {
            members.push(entry);
        }
        Ok(Doc::Object(members))
    }
}
