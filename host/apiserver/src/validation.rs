//! Unknown- and duplicate-field checks of write bodies (`fieldValidation`).
//!
//! The real server decodes built-in kinds into Go structs, so a field the
//! type does not declare is never stored; the `fieldValidation` query
//! parameter only decides what the client hears: `Ignore` drops it
//! silently, `Warn` (the default) drops it with one `Warning: 299` header per
//! problem, `Strict` fails the request. This module imitates that for the
//! built-in kinds of the [`Registry`](super::registry::Registry): it
//! round-trips an object through its k8s-openapi type and calls every key
//! present in the input but gone after the round trip unknown (keys whose
//! value is `null` are never reported: a round trip drops those whether or
//! not they are known). Duplicate keys of JSON documents are reported too.
//! Messages, paths and status codes follow the real handlers: create and
//! update answer 400 (`... cannot be handled as a ...: strict decoding
//! error: ...`), JSON/merge/strategic patches 422 about the patched object
//! and server-side apply always 500 (`failed to create typed patch object
//! ...: field not declared in schema`), whatever the directive.
//!
//! This module owns *which fields of a write are unknown or duplicated and
//! how that is reported*. It never checks anything else about an object
//! (names, values, immutability), never touches custom resources (their
//! schemas are the CRD's business), and when the typed decode itself fails
//! (a value of the wrong type) it reports nothing and leaves the object as
//! it was sent.

use std::collections::{BTreeSet, HashSet};
use std::fmt::{self, Write as _};

use axum::http::{HeaderMap, HeaderValue};
use serde::de::{self, Deserialize, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Serialize;
use serde_json::Value;

use super::patch::{self, ListType, ObjectKind, PathElement};
use super::registry::ResourceInfo;
use super::status::ApiError;

/// Most strict-decoding problems one decode reports (the real decoder's cap).
const MAX_PROBLEMS: usize = 100;

/// The `fieldValidation` directive of a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Directive {
    /// Drop unknown fields silently.
    Ignore,
    /// Drop unknown fields and warn about each problem (the default).
    Warn,
    /// Fail the request on any problem.
    Strict,
}

impl Directive {
    /// The directive of a `fieldValidation` query value (`None` or empty is
    /// `Warn`). An unsupported value is the real server's 422 about the
    /// request's options kind (`CreateOptions`, `UpdateOptions`,
    /// `PatchOptions`).
    ///
    /// # Errors
    ///
    /// [`ApiError::Invalid`] for anything but `Ignore`, `Warn` or `Strict`.
    pub fn from_query(value: Option<&str>, options_kind: &str) -> Result<Self, ApiError> {
        match value.unwrap_or_default() {
            "" | "Warn" => Ok(Directive::Warn),
            "Ignore" => Ok(Directive::Ignore),
            "Strict" => Ok(Directive::Strict),
            other => Err(ApiError::invalid(
                "meta.k8s.io",
                options_kind,
                "",
                vec![(
                    "fieldValidation".into(),
                    format!(
                        "Unsupported value: {}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"",
                        go_quote(other)
                    ),
                )],
            )),
        }
    }
}

/// Which write produced the object being checked; it decides the order of
/// the problems and the form of the failure.
#[derive(Debug, Clone, Copy)]
pub enum Write<'a> {
    /// POST: the raw request body (JSON bodies give document order and
    /// duplicate keys; YAML and protobuf bodies give neither).
    Create {
        /// Request body as received.
        body: &'a [u8],
    },
    /// PUT: as [`Write::Create`].
    Update {
        /// Request body as received.
        body: &'a [u8],
    },
    /// `application/json-patch+json`; the object is the patched result.
    JsonPatch {
        /// The patch document as received.
        patch: &'a [u8],
    },
    /// `application/merge-patch+json`; the object is the patched result.
    MergePatch {
        /// The patch document as received.
        patch: &'a [u8],
    },
    /// `application/strategic-merge-patch+json`; the object is the patched result.
    StrategicMergePatch {
        /// The patch document as received.
        patch: &'a [u8],
        /// The parsed patch document (the real server prints it in errors).
        doc: &'a Value,
    },
    /// `application/apply-patch+yaml`; the object is the apply configuration.
    Apply {
        /// `metadata.namespace` of the configuration as sent ("" if absent).
        namespace: &'a str,
        /// `metadata.name` of the configuration as sent ("" if absent).
        name: &'a str,
    },
}

impl Write<'_> {
    /// The options kind the real server validates `fieldValidation` in.
    #[must_use]
    pub fn options_kind(&self) -> &'static str {
        match self {
            Write::Create { .. } => "CreateOptions",
            Write::Update { .. } => "UpdateOptions",
            _ => "PatchOptions",
        }
    }
}

/// Checks `obj` (a write of `info`'s kind, already defaulted to its
/// `kind`/`apiVersion`) for unknown and duplicated fields. Unknown fields
/// are removed from `obj` unless the write fails; the returned strings are
/// the warnings to send (one `Warning` header each).
///
/// # Errors
///
/// Under [`Directive::Strict`], 400 `BadRequest` for create/update and 422
/// `Invalid` (field `patch`) for JSON, merge and strategic patches; for an
/// apply configuration with unknown fields, 500 without a reason whatever
/// the directive.
pub fn check(
    info: &ResourceInfo,
    obj: &mut Value,
    directive: Directive,
    write: &Write<'_>,
) -> Result<Vec<String>, ApiError> {
    let Some(unknown) = unknown_fields(info, obj) else {
        return Ok(Vec::new());
    };
    if let Write::Apply { namespace, name } = write {
        if unknown.is_empty() {
            return Ok(Vec::new());
        }
        return Err(ApiError::Unclassified(apply_message(
            info, obj, &unknown, namespace, name,
        )));
    }
    if directive == Directive::Ignore {
        prune(obj, &unknown);
        return Ok(Vec::new());
    }
    let problems = match write {
        Write::Create { body } | Write::Update { body } => body_problems(body, &unknown),
        Write::MergePatch { patch } | Write::StrategicMergePatch { patch, .. } => {
            let mut out = Problems::default();
            if let Some(doc) = Doc::parse(patch) {
                doc.duplicates(&mut Vec::new(), "", &mut out);
            }
            out.unknown(&unknown);
            out
        }
        Write::JsonPatch { patch } => {
            let mut out = Problems::default();
            if let Some(doc) = Doc::parse(patch) {
                json_patch_problems(&doc, &mut out);
            }
            out.unknown(&unknown);
            out
        }
        Write::Apply { .. } => Problems::default(),
    };
    if problems.list.is_empty() {
        return Ok(Vec::new());
    }
    if directive == Directive::Warn {
        prune(obj, &unknown);
        return Ok(problems.list);
    }
    let strict = format!("strict decoding error: {}", problems.list.join(", "));
    Err(match write {
        Write::Create { .. } | Write::Update { .. } => ApiError::BadRequest(format!(
            "{kind} in version {version} cannot be handled as a {kind}: {strict}",
            kind = info.kind,
            version = go_quote(&info.version),
        )),
        _ => {
            let value = match write {
                Write::StrategicMergePatch { doc, .. } => go_format(doc),
                _ => obj.to_string(),
            };
            ApiError::invalid(
                "",
                "",
                "",
                vec![(
                    "patch".into(),
                    format!("Invalid value: {}: {strict}", go_quote(&value)),
                )],
            )
        }
    })
}

/// Adds one `Warning: 299 - "text"` header per distinct warning, as the
/// real server's warning recorder does; a text it could not put in a header
/// (control characters) is dropped, as there.
pub fn add_warning_headers(headers: &mut HeaderMap, warnings: &[String]) {
    let mut seen = HashSet::new();
    for text in warnings {
        if !seen.insert(text.as_str()) || text.chars().any(char::is_control) {
            continue;
        }
        let mut value = String::from("299 - \"");
        for c in text.chars() {
            if matches!(c, '"' | '\\') {
                value.push('\\');
            }
            value.push(c);
        }
        value.push('"');
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.append(axum::http::header::WARNING, v);
        }
    }
}

// ---------------------------------------------------------------------------
// Unknown fields: the typed round trip.

/// One step of a path through a JSON document.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Seg {
    Key(String),
    Index(usize),
}

type Path = Vec<Seg>;

/// The paths of `obj` that `info`'s typed form drops, in depth-first order
/// of sorted keys; `None` when `info` is not a built-in kind this module
/// knows or `obj` does not decode into it.
fn unknown_fields(info: &ResourceInfo, obj: &Value) -> Option<Vec<Path>> {
    let typed = round_trip(info, obj)?;
    let mut out = Vec::new();
    dropped(obj, &typed, &mut Vec::new(), &mut out);
    Some(out)
}

fn typed<T: DeserializeOwned + Serialize>(obj: &Value) -> Option<Value> {
    let t = T::deserialize(obj).ok()?;
    serde_json::to_value(&t).ok()
}

/// `obj` decoded into its k8s-openapi type and encoded again.
fn round_trip(info: &ResourceInfo, obj: &Value) -> Option<Value> {
    use k8s_openapi::api::{apps, coordination, core, events, rbac};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;
    match (
        info.group.as_str(),
        info.version.as_str(),
        info.kind.as_str(),
    ) {
        ("", "v1", "Namespace") => typed::<core::v1::Namespace>(obj),
        ("", "v1", "Node") => typed::<core::v1::Node>(obj),
        ("", "v1", "Pod") => typed::<core::v1::Pod>(obj),
        ("", "v1", "ConfigMap") => typed::<core::v1::ConfigMap>(obj),
        ("", "v1", "Secret") => typed::<core::v1::Secret>(obj),
        ("", "v1", "Event") => typed::<core::v1::Event>(obj),
        ("", "v1", "ServiceAccount") => typed::<core::v1::ServiceAccount>(obj),
        ("events.k8s.io", "v1", "Event") => typed::<events::v1::Event>(obj),
        ("coordination.k8s.io", "v1", "Lease") => typed::<coordination::v1::Lease>(obj),
        ("apps", "v1", "Deployment") => typed::<apps::v1::Deployment>(obj),
        ("rbac.authorization.k8s.io", "v1", "ClusterRole") => typed::<rbac::v1::ClusterRole>(obj),
        ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding") => {
            typed::<rbac::v1::ClusterRoleBinding>(obj)
        }
        ("rbac.authorization.k8s.io", "v1", "Role") => typed::<rbac::v1::Role>(obj),
        ("rbac.authorization.k8s.io", "v1", "RoleBinding") => typed::<rbac::v1::RoleBinding>(obj),
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition") => {
            typed::<apiextensions::v1::CustomResourceDefinition>(obj)
        }
        _ => None,
    }
}

/// Collects the non-null keys of `input` that `typed` lacks.
fn dropped(input: &Value, typed: &Value, path: &mut Path, out: &mut Vec<Path>) {
    match (input, typed) {
        (Value::Object(i), Value::Object(t)) => {
            for (k, v) in i {
                if v.is_null() {
                    continue;
                }
                path.push(Seg::Key(k.clone()));
                match t.get(k) {
                    None => out.push(path.clone()),
                    Some(tv) => dropped(v, tv, path, out),
                }
                path.pop();
            }
        }
        (Value::Array(i), Value::Array(t)) => {
            for (n, (iv, tv)) in i.iter().zip(t).enumerate() {
                path.push(Seg::Index(n));
                dropped(iv, tv, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// Removes every path of `paths` from `obj`.
fn prune(obj: &mut Value, paths: &[Path]) {
    for path in paths {
        let Some((Seg::Key(last), parent)) = path.split_last() else {
            continue;
        };
        let parent = parent.iter().try_fold(&mut *obj, |cur, seg| match seg {
            Seg::Key(k) => cur.get_mut(k.as_str()),
            Seg::Index(i) => cur.get_mut(*i),
        });
        if let Some(Value::Object(m)) = parent {
            m.remove(last);
        }
    }
}

// ---------------------------------------------------------------------------
// Problems in the order and words of the real decoder.

/// Strict-decoding problems, deduplicated and capped like the real decoder's.
#[derive(Default)]
struct Problems {
    list: Vec<String>,
    seen: HashSet<String>,
}

impl Problems {
    fn push(&mut self, text: String) {
        if self.list.len() < MAX_PROBLEMS && self.seen.insert(text.clone()) {
            self.list.push(text);
        }
    }

    fn unknown(&mut self, unknown: &[Path]) {
        for p in unknown {
            self.push(format!("unknown field {}", go_quote(&json_path(p))));
        }
    }
}

/// sigs.k8s.io/json's strict-error path: `spec.containers[0].name`, map
/// keys as they are (dots included).
fn json_path(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Index(i) => {
                let _ = write!(s, "[{i}]");
            }
        }
    }
    s
}

/// Problems of a create/update body: in document order for JSON (unknown
/// and duplicate fields interleaved, as the decoder meets them), sorted for
/// anything else (YAML is converted to key-sorted JSON before decoding).
fn body_problems(body: &[u8], unknown: &[Path]) -> Problems {
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
fn json_patch_problems(doc: &Doc, out: &mut Problems) {
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
enum Doc {
    Object(Vec<(String, Doc)>),
    Array(Vec<Doc>),
    Scalar,
}

impl Doc {
    fn parse(raw: &[u8]) -> Option<Doc> {
        serde_json::from_slice(raw).ok()
    }

    /// Reports duplicate keys (prefixed with `prefix`) anywhere below.
    fn duplicates(&self, path: &mut Path, prefix: &str, out: &mut Problems) {
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

// ---------------------------------------------------------------------------
// Server-side apply: structured-merge-diff's typed conversion error.

/// `failed to create typed patch object (ns/name; /v1, Kind=Pod):
/// .spec.foo: field not declared in schema`. structured-merge-diff stops
/// at the first undeclared field of each object (in Go's random map order;
/// here the first in key order), and lists several errors as `errors:`
/// lines.
fn apply_message(
    info: &ResourceInfo,
    obj: &Value,
    unknown: &[Path],
    namespace: &str,
    name: &str,
) -> String {
    let kind = ObjectKind::new(&info.group, &info.version, &info.kind);
    let unknown_set: BTreeSet<&Path> = unknown.iter().collect();
    let mut errs = Vec::new();
    let mut walk = SmdWalk {
        kind: &kind,
        unknown: &unknown_set,
        path: Vec::new(),
        names: Vec::new(),
        errs: &mut errs,
    };
    walk.value(obj, "");
    let detail = if errs.len() == 1 {
        errs.concat()
    } else {
        let lines: Vec<String> = errs.iter().map(|e| format!("  {e}")).collect();
        format!("errors:\n{}", lines.join("\n"))
    };
    format!(
        "failed to create typed patch object ({namespace}/{name}; {}/{}, Kind={}): {detail}",
        info.group, info.version, info.kind
    )
}

/// A walk of an apply configuration that renders structured-merge-diff
/// paths: `.spec.containers[name="c"].foo` for associative lists, `[="v"]`
/// for sets, `[0]` for atomic lists.
struct SmdWalk<'a> {
    kind: &'a ObjectKind,
    unknown: &'a BTreeSet<&'a Path>,
    /// JSON path of the current value.
    path: Path,
    /// Field names of the current value (list items skipped), for list types.
    names: Vec<String>,
    errs: &'a mut Vec<String>,
}

impl SmdWalk<'_> {
    fn value(&mut self, v: &Value, rendered: &str) {
        match v {
            Value::Object(m) => {
                for (k, child) in m {
                    let here = format!("{rendered}.{k}");
                    self.path.push(Seg::Key(k.clone()));
                    if self.unknown.contains(&self.path) {
                        self.errs
                            .push(format!("{here}: field not declared in schema"));
                        self.path.pop();
                        break;
                    }
                    self.names.push(k.clone());
                    self.value(child, &here);
                    self.names.pop();
                    self.path.pop();
                }
            }
            Value::Array(items) => {
                let names: Vec<&str> = self.names.iter().map(String::as_str).collect();
                let list = patch::list_type(self.kind, &names);
                for (i, item) in items.iter().enumerate() {
                    let here = format!("{rendered}{}", list_element(list, i, item));
                    self.path.push(Seg::Index(i));
                    self.value(item, &here);
                    self.path.pop();
                }
            }
            _ => {}
        }
    }
}

/// The path element of item `i` of a list of type `list` (its index when
/// an associative item lacks a key).
fn list_element(list: ListType, i: usize, item: &Value) -> PathElement {
    match list {
        ListType::Atomic => PathElement::Index(i),
        ListType::Set => PathElement::Value(item.to_string()),
        ListType::Map(keys) => {
            let mut fields = Vec::with_capacity(keys.len());
            for (key, default) in keys {
                let value = match (item.get(*key), default) {
                    (Some(v), _) if !v.is_null() => v.to_string(),
                    (_, Some(d)) => Value::String((*d).to_owned()).to_string(),
                    _ => return PathElement::Index(i),
                };
                fields.push(((*key).to_owned(), value));
            }
            fields.sort();
            PathElement::Key(fields)
        }
    }
}

// ---------------------------------------------------------------------------
// Go formatting.

/// Go's `strconv.Quote` (`%q`): `"` and `\` escaped, control characters
/// as `\n`, `\x01`, `\u0085`.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if c.is_control() && (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() || (c.is_whitespace() && c != ' ') => {
                if (c as u32) < 0x10000 {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                } else {
                    let _ = write!(out, "\\U{:08x}", c as u32);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `fmt.Sprintf("%+v", m)` of a patch decoded into
/// `map[string]interface{}` (integers as `int64`, other numbers `float64`):
/// `map[spec:map[replicas:2 paused:<nil>]]`, keys sorted.
fn go_format(v: &Value) -> String {
    let mut out = String::new();
    go_format_into(v, &mut out);
    out
}

fn go_format_into(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => {
            let _ = write!(out, "{b}");
        }
        Value::Number(n) => match n.as_i64() {
            Some(i) => {
                let _ = write!(out, "{i}");
            }
            None => out.push_str(&go_float(n.as_f64().unwrap_or_default())),
        },
        Value::String(s) => out.push_str(s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                go_format_into(item, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push_str("map[");
            for (i, (k, item)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(k);
                out.push(':');
                go_format_into(item, out);
            }
            out.push(']');
        }
    }
}

/// Go's `%v` of a `float64` (`strconv` `'g'`, shortest): exponent form
/// (`1e+06`, `1.5e-07`) when the exponent is below -4 or at least 6.
fn go_float(f: f64) -> String {
    let sci = format!("{f:e}");
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return sci;
    };
    let exp: i32 = exp.parse().unwrap_or_default();
    if f.is_finite() && (-4..6).contains(&exp) {
        return format!("{f}");
    }
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use serde_json::json;

    fn info(group: &str, plural: &str) -> ResourceInfo {
        let version = "v1";
        Registry::new().lookup(group, version, plural).unwrap()
    }

    fn pod() -> ResourceInfo {
        info("", "pods")
    }

    /// A Pod with an unknown field at the top, in `spec` and in a container,
    /// as a JSON body in that (unsorted) document order.
    const POD_BODY: &str = r#"{"apiVersion":"v1","kind":"Pod","foo":1,"metadata":{"name":"p"},
        "spec":{"foo":true,"containers":[{"name":"c","image":"i","bar":"x"}]}}"#;

    fn strict_create(info: &ResourceInfo, body: &[u8], obj: &mut Value) -> ApiError {
        check(info, obj, Directive::Strict, &Write::Create { body }).unwrap_err()
    }

    #[test]
    fn unknown_top_level_nested_and_list_element_fields_fail_strict_create_in_document_order() {
        let mut obj: Value = serde_json::from_str(POD_BODY).unwrap();
        let before = obj.clone();
        let e = strict_create(&pod(), POD_BODY.as_bytes(), &mut obj);
        assert_eq!(e.code(), 400);
        assert_eq!(e.reason(), "BadRequest");
        assert_eq!(
            e.to_string(),
            r#"Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "foo", unknown field "spec.foo", unknown field "spec.containers[0].bar""#
        );
        assert_eq!(obj, before, "a refused write is left alone");
    }

    #[test]
    fn non_json_bodies_report_in_sorted_order_like_converted_yaml() {
        let mut obj: Value = serde_json::from_str(POD_BODY).unwrap();
        let e = strict_create(&pod(), b"kind: Pod\n", &mut obj);
        assert!(
            e.to_string().ends_with(
                r#"unknown field "foo", unknown field "spec.containers[0].bar", unknown field "spec.foo""#
            ),
            "{e}"
        );
    }

    #[test]
    fn warn_drops_unknown_fields_and_returns_one_warning_each() {
        let mut obj: Value = serde_json::from_str(POD_BODY).unwrap();
        let body = POD_BODY.as_bytes();
        let warnings = check(&pod(), &mut obj, Directive::Warn, &Write::Update { body }).unwrap();
        assert_eq!(
            warnings,
            [
                r#"unknown field "foo""#,
                r#"unknown field "spec.foo""#,
                r#"unknown field "spec.containers[0].bar""#
            ]
        );
        assert!(obj.get("foo").is_none());
        assert!(obj["spec"].get("foo").is_none());
        assert_eq!(
            obj["spec"]["containers"][0],
            json!({"name": "c", "image": "i"})
        );
        assert_eq!(obj["metadata"]["name"], "p");
    }

    #[test]
    fn ignore_drops_unknown_fields_silently() {
        let mut obj: Value = serde_json::from_str(POD_BODY).unwrap();
        let body = POD_BODY.as_bytes();
        let warnings = check(&pod(), &mut obj, Directive::Ignore, &Write::Create { body }).unwrap();
        assert!(warnings.is_empty());
        assert!(obj.get("foo").is_none() && obj["spec"].get("foo").is_none());
    }

    #[test]
    fn null_values_are_never_reported_or_touched() {
        let body = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","creationTimestamp":null},
            "spec":{"bogus":null,"containers":[{"name":"c","image":"i"}]}}"#;
        let mut obj: Value = serde_json::from_str(body).unwrap();
        let before = obj.clone();
        let warnings = check(
            &pod(),
            &mut obj,
            Directive::Strict,
            &Write::Create {
                body: body.as_bytes(),
            },
        )
        .unwrap();
        assert!(warnings.is_empty());
        assert_eq!(obj, before);
    }

    #[test]
    fn a_failing_typed_decode_falls_back_to_storing_what_was_sent() {
        // a label value must be a string: k8s-openapi cannot decode this Pod
        let body = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":1}},
            "spec":{"foo":1,"containers":[{"name":"c","image":"i"}]}}"#;
        let mut obj: Value = serde_json::from_str(body).unwrap();
        let before = obj.clone();
        for directive in [Directive::Strict, Directive::Warn, Directive::Ignore] {
            let write = Write::Create {
                body: body.as_bytes(),
            };
            assert!(check(&pod(), &mut obj, directive, &write)
                .unwrap()
                .is_empty());
            assert_eq!(obj, before);
        }
    }

    #[test]
    fn numeric_quantities_and_partial_objects_still_decode() {
        let body = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},
            "spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"c",
            "resources":{"limits":{"cpu":1}},"imagee":"x"}]}}}}"#;
        let mut obj: Value = serde_json::from_str(body).unwrap();
        let e = strict_create(&info("apps", "deployments"), body.as_bytes(), &mut obj);
        assert!(
            e.to_string().starts_with(r#"Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec.template.spec.containers[0].imagee""#),
            "{e}"
        );
    }

    #[test]
    fn duplicate_json_keys_are_reported_in_document_order_with_unknown_ones() {
        let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","name":"b"},
            "zzz":1,"data":{"k":"1","k":"2"},"zzz":2}"#;
        let mut obj: Value = serde_json::from_str(body).unwrap();
        let e = strict_create(&info("", "configmaps"), body.as_bytes(), &mut obj);
        assert!(
            e.to_string().ends_with(
                r#"strict decoding error: duplicate field "metadata.name", unknown field "zzz", duplicate field "data.k""#
            ),
            "{e}"
        );
        let warnings = check(
            &info("", "configmaps"),
            &mut obj,
            Directive::Warn,
            &Write::Create {
                body: body.as_bytes(),
            },
        )
        .unwrap();
        assert_eq!(warnings.len(), 3);
        assert_eq!(obj["metadata"]["name"], "b", "the last duplicate wins");
    }

    #[test]
    fn map_keys_with_dots_are_printed_as_they_are() {
        let crd = info("apiextensions.k8s.io", "customresourcedefinitions");
        let mut obj = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "ws.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "ws", "kind": "W"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "properties": {"a.b": {"type": "string", "bogus": 1}}}}}]}});
        let e = strict_create(&crd, b"", &mut obj);
        assert!(
            e.to_string().ends_with(
                r#"unknown field "spec.versions[0].schema.openAPIV3Schema.properties.a.b.bogus""#
            ),
            "{e}"
        );
    }

    #[test]
    fn custom_resources_are_left_alone() {
        let mut custom = pod();
        custom.group = "example.com".into();
        custom.kind = "Widget".into();
        let mut obj = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"anything": 1}});
        let before = obj.clone();
        assert!(check(
            &custom,
            &mut obj,
            Directive::Strict,
            &Write::Create { body: b"" }
        )
        .unwrap()
        .is_empty());
        assert_eq!(obj, before);
    }

    #[test]
    fn strict_merge_patch_is_422_about_the_patched_object() {
        let cm = info("", "configmaps");
        let patch = br#"{"data":{"a":"1","a":"2"},"foo":"x"}"#;
        let mut obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "2"}, "foo": "x"});
        let e = check(
            &cm,
            &mut obj,
            Directive::Strict,
            &Write::MergePatch { patch },
        )
        .unwrap_err();
        assert_eq!((e.code(), e.reason()), (422, "Invalid"));
        let quoted = go_quote(&obj.to_string());
        assert_eq!(
            e.to_string(),
            format!(
                r#" "" is invalid: patch: Invalid value: {quoted}: strict decoding error: duplicate field "data.a", unknown field "foo""#
            )
        );
        let status = e.to_status();
        assert_eq!(status["details"]["causes"][0]["field"], "patch");
        assert_eq!(
            status["details"]["causes"][0]["reason"],
            "FieldValueInvalid"
        );
        let warnings = check(&cm, &mut obj, Directive::Warn, &Write::MergePatch { patch }).unwrap();
        assert_eq!(
            warnings,
            [r#"duplicate field "data.a""#, r#"unknown field "foo""#]
        );
        assert!(obj.get("foo").is_none());
    }

    #[test]
    fn strict_strategic_merge_patch_prints_the_patch_as_a_go_map() {
        let doc =
            json!({"spec": {"activeDeadlineSeconds": 5, "foo": 1.5, "x": [null, "a b", true]}});
        let patch = doc.to_string();
        let mut obj = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"activeDeadlineSeconds": 5, "foo": 1.5, "x": [], "containers": [{"name": "c"}]}});
        let write = Write::StrategicMergePatch {
            patch: patch.as_bytes(),
            doc: &doc,
        };
        let e = check(&pod(), &mut obj, Directive::Strict, &write).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#" "" is invalid: patch: Invalid value: "map[spec:map[activeDeadlineSeconds:5 foo:1.5 x:[<nil> a b true]]]": strict decoding error: unknown field "spec.foo", unknown field "spec.x""#
        );
    }

    #[test]
    fn json_patch_operations_are_checked_too() {
        let patch = br#"[{"op":"add","path":"/data/a","value":"1","foo":"bar"},
            {"op":"add","path":"/x","path":"/metadata/labels","value":{"k":"1","k":"2"}}]"#;
        let mut obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {"k": "2"}}, "data": {"a": "1"}});
        let warnings = check(
            &info("", "configmaps"),
            &mut obj,
            Directive::Warn,
            &Write::JsonPatch { patch },
        )
        .unwrap();
        assert_eq!(
            warnings,
            [
                r#"json patch unknown field "[0].foo""#,
                r#"json patch duplicate field "[1].path""#,
                r#"json patch duplicate field "[1].value.k""#,
            ]
        );
    }

    #[test]
    fn apply_with_unknown_fields_is_500_whatever_the_directive() {
        // structured-merge-diff stops at the first undeclared field of each
        // object: `yyy` (after `bar` in the same object) is not reported
        let mut obj = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"zzz": 1, "containers": [{"name": "a", "yyy": 1, "bar": 2},
                {"name": "c", "image": "i", "ports": [{"containerPort": 80, "bogus": 1}]}]}});
        let before = obj.clone();
        for directive in [Directive::Ignore, Directive::Warn, Directive::Strict] {
            let write = Write::Apply {
                namespace: "",
                name: "p",
            };
            let e = check(&pod(), &mut obj, directive, &write).unwrap_err();
            assert_eq!(e.code(), 500);
            assert_eq!(e.reason(), "");
            assert!(e.to_status().get("reason").is_none());
            assert_eq!(
                e.to_string(),
                "failed to create typed patch object (/p; /v1, Kind=Pod): errors:\n  .spec.containers[name=\"a\"].bar: field not declared in schema\n  .spec.containers[name=\"c\"].ports[containerPort=80,protocol=\"TCP\"].bogus: field not declared in schema\n  .spec.zzz: field not declared in schema"
            );
            assert_eq!(obj, before);
        }
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d", "labels": {"a.b/c": "x"}}, "dataa": {}});
        let write = Write::Apply {
            namespace: "d",
            name: "c",
        };
        let e = check(&info("", "configmaps"), &mut cm, Directive::Strict, &write).unwrap_err();
        assert_eq!(
            e.to_string(),
            "failed to create typed patch object (d/c; /v1, Kind=ConfigMap): .dataa: field not declared in schema"
        );
        let mut ok = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}});
        assert!(
            check(&info("", "configmaps"), &mut ok, Directive::Strict, &write)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn unsupported_directives_are_422_about_the_options() {
        assert_eq!(
            Directive::from_query(None, "CreateOptions").unwrap(),
            Directive::Warn
        );
        assert_eq!(
            Directive::from_query(Some("Strict"), "CreateOptions").unwrap(),
            Directive::Strict
        );
        let e = Directive::from_query(Some("strict"), "PatchOptions").unwrap_err();
        assert_eq!(e.code(), 422);
        assert_eq!(
            e.to_string(),
            r#"PatchOptions "" is invalid: fieldValidation: Unsupported value: "strict": supported values: "", "Ignore", "Strict", "Warn""#
        );
    }

    #[test]
    fn warning_headers_are_quoted_and_deduplicated() {
        let mut headers = HeaderMap::new();
        add_warning_headers(
            &mut headers,
            &[
                r#"unknown field "spec.foo""#.to_string(),
                r#"unknown field "spec.foo""#.to_string(),
                "bad\ntext".to_string(),
                r#"back\slash"#.to_string(),
            ],
        );
        let got: Vec<&str> = headers
            .get_all("warning")
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        assert_eq!(
            got,
            [
                r#"299 - "unknown field \"spec.foo\"""#,
                r#"299 - "back\\slash""#
            ]
        );
    }

    #[test]
    fn go_formatting_matches_fmt_and_strconv() {
        assert_eq!(go_quote("a\"b\\c\n\u{1}é"), r#""a\"b\\c\n\x01é""#);
        assert_eq!(go_float(1.5), "1.5");
        assert_eq!(go_float(100_000.0), "100000");
        assert_eq!(go_float(1_000_000.0), "1e+06");
        assert_eq!(go_float(1_234_567.0), "1.234567e+06");
        assert_eq!(go_float(0.0001), "0.0001");
        assert_eq!(go_float(0.000_015), "1.5e-05");
        assert_eq!(go_float(1e100), "1e+100");
        assert_eq!(
            go_format(&json!({"b": {"x": 1}, "a": [1, "s", null, false, 2.5e-7]})),
            "map[a:[1 s <nil> false 2.5e-07] b:map[x:1]]"
        );
    }
}
