//! `/openapi/v2`: the Swagger 2.0 document kubectl reads for client-side
//! validation.
//!
//! kubectl 1.32 validates a `kind: List` file client-side before sending its
//! items: `queryParamVerifierV3.HasSupport` answers "unsupported" for
//! `v1/List` (kubectl `pkg/cmd/util/factory_client_access.go`, client-go
//! `resource/query_param_verifier_v3.go`), so `--validate=strict` falls back
//! to `schemaValidation.ValidateBytes` over the v2 document, fetched by
//! `DiscoveryClient.OpenAPISchema` (client-go `discovery/discovery_client.go`)
//! with `Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`
//! and decoded as the gnostic `openapi_v2.Document` protobuf whatever the
//! response's content type. Without this endpoint (404) kubectl refused
//! every List unless `--validate=false` was given.
//!
//! The document published here is correct but minimal: `swagger`, `info`,
//! no paths and no definitions. kubectl's schema validation skips an item
//! whose kind it finds no definition for (`validateResource`: "resource is
//! not present, let's just skip validation"), and sends each item with
//! `fieldValidation=Strict`, so unknown fields are still reported, by the
//! server's strict decoding (see [`crate::rules::validation`]).
//!
//! This module owns the v2 document and its two encodings (JSON for
//! `Accept: application/json`, protobuf otherwise when asked for); it
//! never describes object schemas and never touches the v3 documents
//! ([`crate::http::discovery`]).

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::http::discovery::GIT_VERSION;

/// The media type kubectl asks for (a `@`, which Go's `mime` package
/// cannot parse in a Content-Type, so it is never answered with).
pub const PROTOBUF_DEPRECATED: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The protobuf media type the real server answers with, whichever of the
/// two protobuf types was asked for (kube-openapi `pkg/handler/handler.go`,
/// `RegisterOpenAPIVersionedService`).
pub const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// The `/openapi/v2` response for a request with `headers`, negotiated as
/// kube-openapi does: the first `Accept` clause naming JSON (or a
/// wildcard) or one of the two protobuf types decides; none is 406. (Its
/// clauses are taken in the order sent, not sorted by `q`.)
#[must_use]
pub fn v2_response(headers: &HeaderMap) -> Response {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|h| h.to_str().ok())
        .filter(|a| !a.trim().is_empty())
        .unwrap_or("*/*");
    let chosen = accept.split(',').find_map(|clause| {
        match clause.split(';').next().unwrap_or_default().trim() {
            "application/json" | "application/*" | "*/*" => {
                Some(("application/json", v2_json().into_bytes()))
            }
            PROTOBUF | PROTOBUF_DEPRECATED => Some((PROTOBUF, v2_protobuf())),
            _ => None,
        }
    });
    let Some((media, body)) = chosen else {
        return StatusCode::NOT_ACCEPTABLE.into_response();
    };
    let mut resp = (StatusCode::OK, body).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    resp
}

/// The document as JSON.
#[must_use]
pub fn v2_json() -> String {
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": {},
        "definitions": {},
    })
    .to_string()
}

/// The same document as a gnostic `openapi.v2.Document` protobuf
/// (gnostic `openapiv2/OpenAPIv2.proto`: `swagger` = 1, `info` = 2 with
/// `title` = 1 and `version` = 2, `paths` = 8, `definitions` = 9).
#[must_use]
pub fn v2_protobuf() -> Vec<u8> {
    let mut info = Vec::new();
    length_delimited(&mut info, 1, b"Kubernetes");
    length_delimited(&mut info, 2, GIT_VERSION.as_bytes());
    let mut doc = Vec::new();
    length_delimited(&mut doc, 1, b"2.0");
    length_delimited(&mut doc, 2, &info);
    length_delimited(&mut doc, 8, &[]);
    length_delimited(&mut doc, 9, &[]);
    doc
}

/// Appends field `num` (wire type 2) holding `bytes`.
fn length_delimited(out: &mut Vec<u8>, num: u64, bytes: &[u8]) {
    varint(out, (num << 3) | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn protobuf_document_carries_swagger_and_info_fields() {
        let pb = v2_protobuf();
        // field 1 "2.0", then field 2 (info) holding "Kubernetes" and the version
        assert_eq!(&pb[..5], b"\x0a\x032.0");
        assert_eq!(pb[5], 0x12);
        let info_len = pb[6] as usize;
        let info = &pb[7..7 + info_len];
        assert_eq!(&info[..12], b"\x0a\x0aKubernetes");
        assert!(info.ends_with(GIT_VERSION.as_bytes()));
        assert_eq!(&pb[7 + info_len..], b"\x42\x00\x4a\x00");
    }

    #[test]
    fn json_document_is_swagger_two() {
        let v: serde_json::Value = serde_json::from_str(&v2_json()).unwrap();
        assert_eq!(v["swagger"], "2.0");
        assert!(v["definitions"].as_object().unwrap().is_empty());
    }
}
