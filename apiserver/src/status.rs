//! API errors and their wire form: every failure leaves the server as a
//! `meta/v1 Status` with the reason and code the real kube-apiserver uses.
//! This module only describes failures; it never decides whether a request
//! fails, and never writes a response (`http` turns an error into one).

use serde_json::{json, Value};

/// Group/kind/name a failure is about, rendered as `Status.details`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Details {
    /// Object name, if the failure concerns one object.
    pub name: String,
    /// API group of the resource ("" for core).
    pub group: String,
    /// Resource (plural) the failure concerns, as the real server reports it.
    pub kind: String,
}

/// One entry of `Status.details.causes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// Machine-readable cause type (e.g. `FieldValueInvalid`, `FieldManagerConflict`).
    pub reason: String,
    /// Human-readable description.
    pub message: String,
    /// Field path the cause refers to.
    pub field: String,
}

/// A failed API request, one variant per `StatusReason` the server emits.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// 404: the object (or its namespace) does not exist.
    #[error("{message}")]
    NotFound {
        /// Full message.
        message: String,
        /// What was not found.
        details: Details,
    },
    /// 409: create of an object that already exists.
    #[error("{message}")]
    AlreadyExists {
        /// Full message.
        message: String,
        /// What already exists.
        details: Details,
    },
    /// 409: optimistic-concurrency or apply conflict.
    #[error("{message}")]
    Conflict {
        /// Full message.
        message: String,
        /// Conflicting object.
        details: Details,
        /// Field-level causes (apply conflicts).
        causes: Vec<Cause>,
    },
    /// 422: the object failed validation.
    #[error("{message}")]
    Invalid {
        /// Full message.
        message: String,
        /// Invalid object.
        details: Details,
        /// One cause per invalid field.
        causes: Vec<Cause>,
    },
    /// 400: malformed request (bad JSON, bad selector, mismatched namespace).
    #[error("{0}")]
    BadRequest(String),
    /// 401: missing or unknown bearer token.
    #[error("Unauthorized")]
    Unauthorized,
    /// 403: the user may not perform the verb.
    #[error("{message}")]
    Forbidden {
        /// Full message.
        message: String,
        /// Forbidden target.
        details: Details,
    },
    /// 405: the verb is not supported on this path.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// 410: the requested resourceVersion or continue token was compacted.
    #[error("{0}")]
    Expired(String),
    /// 429: throttled; `retry_after` seconds go into `Retry-After`.
    #[error("{message}")]
    TooManyRequests {
        /// Full message.
        message: String,
        /// Seconds the client should wait.
        retry_after: u64,
    },
    /// 500: unexpected server failure.
    #[error("{0}")]
    Internal(String),
    /// 500 without a reason: a plain error the real server did not wrap in a
    /// `Status` (`StatusReasonUnknown`, e.g. server-side apply's typed
    /// conversion failures); `reason` is omitted from the `Status`.
    #[error("{0}")]
    Unclassified(String),
    /// 503: server temporarily unavailable.
    #[error("{0}")]
    ServiceUnavailable(String),
    /// 504: the requested resourceVersion is newer than the server's.
    #[error("{0}")]
    Timeout(String),
    /// 413: the request body is over the server's limit
    /// (`NewRequestEntityTooLargeError`; the field is what follows the colon).
    #[error("Request entity too large: {0}")]
    RequestEntityTooLarge(String),
    /// 504: a watch asked for a resourceVersion the server has not reached
    /// (`storage.NewTooLargeResourceVersionError`, built on
    /// `NewTimeoutError`, which prefixes "Timeout: "): reason `Timeout`,
    /// one `ResourceVersionTooLarge` cause, retry after 1 s.
    #[error("Timeout: Too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion {
        /// The resourceVersion asked for.
        requested: u64,
        /// The server's latest resourceVersion.
        current: u64,
    },
    /// 415: unsupported request content type.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 406: no acceptable response representation.
    #[error("{0}")]
    NotAcceptable(String),
    /// 404 for paths that name no resource (reason `NotFound`, message `the server could not find the requested resource`).
    #[error("the server could not find the requested resource")]
    NoRoute,
    /// 422 for an unprocessable request that is not an object validation failure (reason `UnprocessableEntity` in Status is `Invalid`).
    #[error("{0}")]
    Unprocessable(String),
}

/// Result alias for API handlers.
pub type Result<T, E = ApiError> = std::result::Result<T, E>;

impl ApiError {
    /// 404 for `resource` "name" in group.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        let qualified = qualified(group, resource);
        ApiError::NotFound {
            message: format!("{qualified} \"{name}\" not found"),
            details: Details {
                name: name.into(),
                group: group.into(),
                kind: resource.into(),
            },
        }
    }

    /// 409 AlreadyExists for `resource` "name".
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        let qualified = qualified(group, resource);
        ApiError::AlreadyExists {
            message: format!("{qualified} \"{name}\" already exists"),
            details: Details {
                name: name.into(),
                group: group.into(),
                kind: resource.into(),
            },
        }
    }

    /// 409 Conflict for a stale resourceVersion, with the real server's message.
    pub fn stale(group: &str, resource: &str, name: &str) -> Self {
        Self::conflict(
            group,
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 409 Conflict as Go's `errors.NewConflict(resource, name, err)` words
    /// it: `Operation cannot be fulfilled on <resource> "<name>": <why>`.
    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let qualified = qualified(group, resource);
        ApiError::Conflict {
            message: format!("Operation cannot be fulfilled on {qualified} \"{name}\": {why}"),
            details: Details {
                name: name.into(),
                group: group.into(),
                kind: resource.into(),
            },
            causes: Vec::new(),
        }
    }

    /// 422 Invalid with one cause per `(field, message)`; message mirrors `Kind "name" is invalid: [...]`.
    pub fn invalid(group: &str, kind: &str, name: &str, errs: Vec<(String, String)>) -> Self {
        let joined: Vec<String> = errs.iter().map(|(f, m)| format!("{f}: {m}")).collect();
        let list = if joined.len() == 1 {
            joined[0].clone()
        } else {
            format!("[{}]", joined.join(", "))
        };
        ApiError::Invalid {
            message: format!("{kind} \"{name}\" is invalid: {list}"),
            details: Details {
                name: name.into(),
                group: group.into(),
                kind: kind.into(),
            },
            causes: errs
                .into_iter()
                .map(|(field, message)| Cause {
                    reason: "FieldValueInvalid".into(),
                    message,
                    field,
                })
                .collect(),
        }
    }

    /// HTTP status code of this error.
    pub fn code(&self) -> u16 {
        match self {
            ApiError::NotFound { .. } | ApiError::NoRoute => 404,
            ApiError::AlreadyExists { .. } | ApiError::Conflict { .. } => 409,
            ApiError::Invalid { .. } | ApiError::Unprocessable(_) => 422,
            ApiError::BadRequest(_) => 400,
            ApiError::Unauthorized => 401,
            ApiError::Forbidden { .. } => 403,
            ApiError::MethodNotAllowed(_) => 405,
            ApiError::Expired(_) => 410,
            ApiError::TooManyRequests { .. } => 429,
            ApiError::Internal(_) | ApiError::Unclassified(_) => 500,
            ApiError::ServiceUnavailable(_) => 503,
            ApiError::Timeout(_) | ApiError::TooLargeResourceVersion { .. } => 504,
            ApiError::RequestEntityTooLarge(_) => 413,
            ApiError::UnsupportedMediaType(_) => 415,
            ApiError::NotAcceptable(_) => 406,
        }
    }

    /// `Status.reason` of this error ("" for [`ApiError::Unclassified`]).
    pub fn reason(&self) -> &'static str {
        match self {
            ApiError::NotFound { .. } | ApiError::NoRoute => "NotFound",
            ApiError::AlreadyExists { .. } => "AlreadyExists",
            ApiError::Conflict { .. } => "Conflict",
            ApiError::Invalid { .. } | ApiError::Unprocessable(_) => "Invalid",
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::Unauthorized => "Unauthorized",
            ApiError::Forbidden { .. } => "Forbidden",
            ApiError::MethodNotAllowed(_) => "MethodNotAllowed",
            ApiError::Expired(_) => "Expired",
            ApiError::TooManyRequests { .. } => "TooManyRequests",
            ApiError::Internal(_) => "InternalError",
            ApiError::Unclassified(_) => "",
            ApiError::ServiceUnavailable(_) => "ServiceUnavailable",
            ApiError::Timeout(_) | ApiError::TooLargeResourceVersion { .. } => "Timeout",
            ApiError::RequestEntityTooLarge(_) => "RequestEntityTooLarge",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            ApiError::NotAcceptable(_) => "NotAcceptable",
        }
    }

    /// Builds an error of the given code with a generic message (used by fault injection).
    pub fn from_code(code: u16, message: String, retry_after: u64) -> Self {
        match code {
            400 => ApiError::BadRequest(message),
            401 => ApiError::Unauthorized,
            403 => ApiError::Forbidden {
                message,
                details: Details::default(),
            },
            404 => ApiError::NotFound {
                message,
                details: Details::default(),
            },
            409 => ApiError::Conflict {
                message,
                details: Details::default(),
                causes: Vec::new(),
            },
            410 => ApiError::Expired(message),
            422 => ApiError::Unprocessable(message),
            429 => ApiError::TooManyRequests {
                message,
                retry_after,
            },
            503 => ApiError::ServiceUnavailable(message),
            504 => ApiError::Timeout(message),
            _ => ApiError::Internal(message),
        }
    }

    /// The `Status` object for this error.
    pub fn to_status(&self) -> Value {
        serde_json::to_value(self.wire()).unwrap_or_else(|_| json!({}))
    }

    /// The `Status` body as the real server writes it: fields in the Go
    /// struct's order (Go's encoder keeps declaration order, and clients
    /// such as the Python client's `FailToCreateError` show the body as
    /// received) and the newline `json.Encoder` ends it with.
    pub fn to_body(&self) -> String {
        let mut body = serde_json::to_string(&self.wire()).unwrap_or_default();
        body.push('\n');
        body
    }

    fn wire(&self) -> WireStatus<'_> {
        let reason = Some(self.reason()).filter(|r| !r.is_empty());
        let details = match self {
            ApiError::NotFound { details, .. }
            | ApiError::AlreadyExists { details, .. }
            | ApiError::Forbidden { details, .. } => WireDetails::of(details, &[]),
            ApiError::Conflict {
                details, causes, ..
            }
            | ApiError::Invalid {
                details, causes, ..
            } => WireDetails::of(details, causes),
            ApiError::TooManyRequests { retry_after, .. } => Some(WireDetails {
                retry_after_seconds: Some(*retry_after),
                ..WireDetails::default()
            }),
            ApiError::TooLargeResourceVersion { .. } => Some(WireDetails {
                causes: vec![WireCause {
                    reason: "ResourceVersionTooLarge",
                    message: "Too large resource version",
                    field: None,
                }],
                retry_after_seconds: Some(1),
                ..WireDetails::default()
            }),
            _ => None,
        };
        WireStatus {
            kind: "Status",
            api_version: "v1",
            metadata: serde_json::Map::new(),
            status: "Failure",
            message: self.to_string(),
            reason,
            details,
            code: self.code(),
        }
    }
}

/// `meta/v1 Status` with its fields in `metav1.Status`'s declaration order.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct WireStatus<'a> {
    kind: &'static str,
    api_version: &'static str,
    metadata: serde_json::Map<String, Value>,
    status: &'static str,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<WireDetails<'a>>,
    code: u16,
}

/// `metav1.StatusDetails`, in declaration order, empty fields omitted.
#[derive(serde::Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireDetails<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    group: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    kind: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    causes: Vec<WireCause<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after_seconds: Option<u64>,
}

impl<'a> WireDetails<'a> {
    /// As Go's `NewInvalid`: details are set even when only causes say
    /// anything, and left out when nothing does.
    fn of(d: &'a Details, causes: &'a [Cause]) -> Option<Self> {
        if d == &Details::default() && causes.is_empty() {
            return None;
        }
        Some(WireDetails {
            name: &d.name,
            group: &d.group,
            kind: &d.kind,
            causes: causes
                .iter()
                .map(|c| WireCause {
                    reason: &c.reason,
                    message: &c.message,
                    field: Some(c.field.as_str()),
                })
                .collect(),
            retry_after_seconds: None,
        })
    }
}

/// `metav1.StatusCause`, in declaration order.
#[derive(serde::Serialize)]
struct WireCause<'a> {
    reason: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
}

pub use wasmctrl_kube_rules::forbidden::qualified;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn stale_update_message_matches_real_server() {
        let e = ApiError::stale("", "pods", "x");
        assert_eq!(e.code(), 409);
        assert_eq!(
            e.to_string(),
            "Operation cannot be fulfilled on pods \"x\": the object has been modified; please apply your changes to the latest version and try again"
        );
        let s = e.to_status();
        assert_eq!(s["reason"], "Conflict");
        assert_eq!(s["details"]["kind"], "pods");
    }

    #[test]
    fn not_found_names_qualified_resource() {
        let e = ApiError::not_found("coordination.k8s.io", "leases", "l");
        assert_eq!(e.to_string(), "leases.coordination.k8s.io \"l\" not found");
        assert_eq!(e.to_status()["code"], 404);
    }
}
