//! Request bodies: reads one up to the real server's size limit (413
//! `RequestEntityTooLarge` beyond it), refuses nesting deeper than the real
//! decoders accept (400) before any decoder runs, so a hostile body costs
//! at most a linear scan of a bounded number of bytes before it is
//! rejected, and decodes an object body by its Content-Type. It never
//! interprets an object's fields, and it is called off the async runtime
//! for decoding (see `handlers::dispatch`).

use axum::body::Bytes;
use axum::extract::Request;
use axum::http::{header, HeaderMap};
use futures::StreamExt;
use serde_json::Value;

use super::proto;
use super::status::{ApiError, Result};

/// The real server's default request body limit
/// (`genericapiserver.Config.MaxRequestBodyBytes`, 3 MiB).
pub const DEFAULT_MAX_REQUEST_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Deepest nesting of arrays and objects a body may have: the limit of
/// the real server's decoders (Go's `encoding/json` and `sigs.k8s.io/json`
/// `maxNestingDepth`; go-yaml's `max_flow_level`), both 10000.
pub const MAX_NESTING_DEPTH: usize = 10_000;

/// Reads a request body of at most `limit` bytes.
///
/// # Errors
///
/// [`ApiError::RequestEntityTooLarge`] with the real server's message
/// (`limitedReadBody` in `apiserver/pkg/endpoints/handlers/rest.go`) as
/// soon as the body (or its declared `Content-Length`) exceeds `limit`,
/// without buffering the rest; [`ApiError::BadRequest`] if reading fails.
pub(crate) async fn read(req: Request, limit: usize) -> Result<Bytes> {
    let too_large = || ApiError::RequestEntityTooLarge(format!("limit is {limit}"));
    let declared = req
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut stream = req.into_body().into_data_stream();
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|e| ApiError::BadRequest(format!("unable to read request body: {e}")))?;
        if out.len() + chunk.len() > limit {
            return Err(too_large());
        }
        out.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(out))
}

/// Refuses a JSON or YAML body whose arrays and objects nest deeper than
/// `max`, in one pass and without decoding it.
///
/// Brackets inside quoted strings and YAML comments do not count. A
/// string starts only where a token may start (after whitespace or one of
/// `[{,:` or at the beginning), as in both JSON and YAML flow syntax, so
/// an apostrophe inside a word (`don't`) opens nothing.
///
/// # Errors
///
/// [`ApiError::BadRequest`] naming the limit, worded like the real
/// decoders' "exceeded max depth" errors.
pub(crate) fn check_depth(body: &[u8], max: usize) -> Result<()> {
    #[derive(PartialEq)]
    enum In {
        Code,
        Double,
        Single,
        Comment,
    }
    let mut state = In::Code;
    let mut depth = 0usize;
    let mut prev = b'\n';
    let mut escaped = false;
    for &b in body {
        match state {
            In::Code => {
                let token_start = prev.is_ascii_whitespace() || b"[{,:".contains(&prev);
                match b {
                    b'[' | b'{' => {
                        depth += 1;
                        if depth > max {
                            return Err(ApiError::BadRequest(format!(
                                "the object provided is unrecognized or malformed: exceeded max depth of {max}"
                            )));
                        }
                    }
                    b']' | b'}' => depth = depth.saturating_sub(1),
                    b'"' if token_start => state = In::Double,
                    b'\'' if token_start => state = In::Single,
                    b'#' if prev.is_ascii_whitespace() => state = In::Comment,
                    _ => {}
                }
            }
            In::Double => {
                if escaped {
                    escaped = false;
                } else if b == b'\\' {
                    escaped = true;
                } else if b == b'"' {
                    state = In::Code;
                }
            }
            // YAML's '' escape leaves and re-enters: same effect.
            In::Single => {
                if b == b'\'' {
                    state = In::Code;
                }
            }
            In::Comment => {
                if b == b'\n' {
                    state = In::Code;
                }
            }
        }
        prev = b;
    }
    Ok(())
}

fn parse_json(body: &[u8]) -> Result<Value> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::BadRequest(format!(
            "the object provided is unrecognized or malformed: json parse error: {e}"
        ))
    })?;
    if !v.is_object() {
        return Err(ApiError::BadRequest(
            "the object provided is unrecognized or malformed: expected a JSON object".into(),
        ));
    }
    Ok(v)
}

/// Decodes an object body by its Content-Type: JSON, YAML, or protobuf for
/// the few kinds [`proto`] knows; anything else is 415.
pub(crate) fn decode_body(headers: &HeaderMap, body: &[u8]) -> Result<Value> {
    {
        let ct = headers
            .get(header::CONTENT_TYPE)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("application/json");
        let media = ct.split(';').next().unwrap_or_default().trim();
        match media {
            "" | "application/json" | "*/*" => parse_json(body),
            "application/yaml" => {
                let v: Value = serde_yaml::from_slice(body).map_err(|e| {
                    ApiError::BadRequest(format!(
                        "the object provided is unrecognized or malformed: yaml parse error: {e}"
                    ))
                })?;
                if v.is_object() {
                    Ok(v)
                } else {
                    Err(ApiError::BadRequest(
                        "the object provided is unrecognized or malformed: expected an object".into(),
                    ))
                }
            }
            proto::MEDIA_TYPE => proto::decode(body).map_err(|e| match e {
                proto::ProtoError::Unsupported(_) => ApiError::UnsupportedMediaType(e.to_string()),
                proto::ProtoError::Malformed(_) => ApiError::BadRequest(e.to_string()),
            }),
            other => Err(ApiError::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got {other})"
            ))),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        "[".repeat(depth) + &"]".repeat(depth)
    }

    #[test]
    fn nesting_up_to_the_limit_passes_and_one_more_fails() {
        assert!(check_depth(nested(10).as_bytes(), 10).is_ok());
        let err = check_depth(nested(11).as_bytes(), 10).unwrap_err();
        assert_eq!(err.code(), 400);
        assert!(
            err.to_string().contains("exceeded max depth of 10"),
            "{err}"
        );
        // Mixed objects and arrays, JSON and YAML flow style.
        let doc = r#"{"a": [{"b": [1]}]}"#;
        assert!(check_depth(doc.as_bytes(), 4).is_ok());
        assert!(check_depth(doc.as_bytes(), 3).is_err());
    }

    #[test]
    fn brackets_in_strings_and_comments_neither_count_nor_hide_nesting() {
        let doc = r#"{"a": "[[[[[[", "b": 'x{{{{', "c": "\"[[["}"#;
        assert!(check_depth(doc.as_bytes(), 1).is_ok());
        let yaml = "a: 1 # [[[[[[\nb: don't [x]\n";
        assert!(check_depth(yaml.as_bytes(), 1).is_ok());
        // Closing brackets inside strings cannot cancel real nesting.
        let sneaky = r#"["]]]", ["]]]", ["]]]", [1]]]]"#;
        assert!(check_depth(sneaky.as_bytes(), 3).is_err());
    }

    #[tokio::test]
    async fn bodies_over_the_limit_are_refused_with_413() {
        let req = |body: Vec<u8>| {
            axum::http::Request::builder()
                .body(axum::body::Body::from(body))
                .unwrap()
        };
        assert_eq!(read(req(vec![b'x'; 16]), 16).await.unwrap().len(), 16);
        let err = read(req(vec![b'x'; 17]), 16).await.unwrap_err();
        assert_eq!((err.code(), err.reason()), (413, "RequestEntityTooLarge"));
        assert_eq!(err.to_string(), "Request entity too large: limit is 16");
    }
}
