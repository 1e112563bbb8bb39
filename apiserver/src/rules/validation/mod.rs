//! Unknown- and duplicate-field checks of write bodies (`fieldValidation`).
//!
//! The real server decodes built-in kinds into Go structs, so a field the
//! type does not declare is never stored; the `fieldValidation` query
//! parameter only decides what the client hears: `Ignore` drops it
//! silently, `Warn` (the default) drops it with one `Warning: 299` header per
//! problem, `Strict` fails the request. This module imitates that for the
//! built-in kinds of the [`Registry`](crate::storage::registry::Registry): it
//! round-trips an object through its k8s-openapi type and calls every key
//! present in the input but gone after the round trip unknown (a key whose
//! value is `null` too, when the type does not declare it: Go's strict
//! decoder judges the key, not its value). Duplicate keys of JSON documents are reported too.
//! Messages, paths and status codes follow the real handlers: create and
//! update answer 400 (`... cannot be handled as a ...: strict decoding
//! error: ...`), JSON/merge/strategic patches 422 about the patched object
//! and server-side apply always 500 (`failed to create typed patch object
//! ...: field not declared in schema`), whatever the directive.
//!
//! Before any of that, a body of a built-in kind must decode into its Go
//! type at all: a value of the wrong JSON type (`data: [1]`), a quantity
//! that does not parse, data that is not base64 fail the write whatever
//! the directive, with the decoder's error (`typed`), 400 for create and
//! update and 422 for patches; "non-strict errors trump" strict ones
//! (apiserver `handlers/patch.go`). Server-side apply is not decoded here.
//!
//! This module owns *whether a write decodes, which of its fields are
//! unknown or duplicated, and how that is reported*. It never checks
//! anything else about an object (names, values, immutability) and never
//! touches custom resources (their schemas are the CRD's business).
//!
//! The pieces: `typed` decodes a body as the Go decoder would and words
//! its error, `quantity` reads a JSON value as `resource.Quantity` does, `unknown` finds
//! the unknown fields (the typed round trip)
//! and removes them, `duplicates` reads a JSON document as written for
//! duplicate keys and document order, `messages` words the problems as
//! the real decoder and structured-merge-diff do (Go quoting and
//! formatting included); this module picks per directive and write what
//! to report, and how.

mod duplicates;
mod messages;
mod quantity;
#[cfg(test)]
mod tests;
mod typed;
mod unknown;

use std::collections::HashSet;

use axum::http::{HeaderMap, HeaderValue};
use serde_json::Value;

use self::duplicates::{body_problems, json_patch_problems, Doc};
use self::messages::{apply_message, go_format, Problems};
use self::unknown::prune;
use crate::storage::registry::ResourceInfo;

pub(crate) use crate::rules::go_words::go_quote;
use crate::status::ApiError;

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
/// `kind`/`apiVersion`) for unknown and duplicated fields; for a custom
/// resource, unknown means not specified by `schema`, its version's
/// structural schema (no schema: nothing is unknown). Unknown fields
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
    schema: Option<&Value>,
) -> Result<Vec<String>, ApiError> {
    let custom = schema.is_some() && crate::storage::builtin::is_custom(info);
    let kind = typed::kind(info).filter(|_| !custom);
    // One typed round trip serves both checks below: an object that
    // decodes as it is also decodes with its nulls removed, so only the
    // quantity rules could still fail it.
    // Large values the round trip passes unchanged are left out of it
    // (see `typed::Kind::hold_verbatim`); an object that does not decode
    // is looked at whole, as its errors print it.
    let mut held_unknown = None;
    if let Some(k) = kind.filter(|_| !custom) {
        let held = k.hold_verbatim(obj);
        if !held.is_empty() {
            if let Some(t) = k.round_trip(obj) {
                held_unknown = Some((k, unknown::unknown_in_round_trip(k, obj, &t)));
            }
            typed::restore(obj, held);
        }
    }
    let round_trip = match &held_unknown {
        Some(_) => None,
        None => kind.and_then(|k| k.round_trip(obj).map(|t| (k, t))),
    };
    let decoded = held_unknown.is_some() || round_trip.is_some();
    if !custom && !matches!(write, Write::Apply { .. }) {
        // a value the Go type cannot hold fails before unknown fields are
        // looked at ("Non-strict errors trump", apiserver handlers/patch.go)
        let decodes = decoded && kind.is_some_and(|k| !k.checks_quantities());
        if !decodes {
            if let Some(text) = kind.and_then(|k| typed::decode_error(k, obj)) {
                return Err(failure(info, obj, write, &text));
            }
        }
    }
    let unknown = match schema {
        // a custom resource: what its structural schema does not specify
        Some(s) if crate::storage::builtin::is_custom(info) => {
            Some(super::crd::unknown_paths(obj, s))
        }
        _ => match held_unknown {
            Some((_, unknown)) => Some(unknown),
            None => round_trip
                .as_ref()
                .map(|(k, t)| unknown::unknown_in_round_trip(*k, obj, t)),
        },
    };
    let Some(unknown) = unknown else {
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
    Err(failure(info, obj, write, &strict))
}

/// The error of a write whose body the real server's decoder refused with
/// `text`: create and update answer 400 (`handlers/create.go`
/// `transformDecodeError`), JSON, merge and strategic patches 422 about
/// the field `patch` (`handlers/patch.go` `applyPatchToCurrentObject`,
/// `applyPatchToObject`).
fn failure(info: &ResourceInfo, obj: &Value, write: &Write<'_>, text: &str) -> ApiError {
    match write {
        Write::Create { .. } | Write::Update { .. } => ApiError::BadRequest(format!(
            "{kind} in version {version} cannot be handled as a {kind}: {text}",
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
                    format!("Invalid value: {}: {text}", go_quote(&value)),
                )],
            )
        }
    }
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
