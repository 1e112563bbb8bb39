//! How answers leave the server: JSON bodies with their content type, and
//! every [`ApiError`] as its `meta/v1 Status` with the error's code (and
//! `Retry-After` when throttled). It only shapes responses; it never
//! decides what a request answers.

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::status::ApiError;

/// `body` as an `application/json` response with status `code`.
pub(crate) fn json_response(code: StatusCode, body: impl Into<Body>) -> Response {
    let mut r = (code, body.into()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// `v` encoded as an `application/json` response with status `code`.
pub(crate) fn value_response(code: StatusCode, v: &Value) -> Response {
    json_response(code, v.to_string())
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = json_response(code, self.to_body());
        if let ApiError::TooManyRequests { retry_after, .. } = &self {
            if let Ok(v) = HeaderValue::from_str(&retry_after.to_string()) {
                resp.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        resp
    }
}
