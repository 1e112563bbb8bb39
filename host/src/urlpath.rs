//! Object names and namespaces as URL path segments: every name and
//! namespace the host puts into a request path for a guest goes through
//! [`segment`], so no value — not even one that slipped past plan
//! validation — can add a segment (`p5/status`), climb one (`..`), or start
//! a query (`?`).
//!
//! Plan validation refuses such names first (see [`crate::guest::plan`]);
//! this is the second wall, where paths are built: kube's request builders
//! format a name into the path as it is, so the host hands them only
//! segments made here. It never builds whole URLs.

use std::borrow::Cow;

/// A value that cannot be one path segment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {value:?} cannot be a URL path segment: {problem}")]
pub struct UnsafeSegment {
    /// "name" or "namespace".
    pub what: &'static str,
    /// The value (its first 64 characters).
    pub value: String,
    /// Why.
    pub problem: &'static str,
}

/// `value` as exactly one path segment, percent-encoded outside RFC 3986's
/// unreserved characters (a valid object name is returned as it is).
/// Refused: empty, `.`, `..`, or holding `/` — an API server decodes `%2F`
/// before it splits the path, so encoding a `/` would not keep it in one
/// segment.
pub fn segment<'a>(what: &'static str, value: &'a str) -> Result<Cow<'a, str>, UnsafeSegment> {
    let refuse = |problem| UnsafeSegment {
        what,
        value: value.chars().take(64).collect(),
        problem,
    };
    match value {
        "" => return Err(refuse("empty")),
        "." | ".." => return Err(refuse("a dot segment")),
        v if v.contains('/') => return Err(refuse("holds '/'")),
        _ => {}
    }
    let unreserved = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
    if value.bytes().all(unreserved) {
        return Ok(Cow::Borrowed(value));
    }
    let mut out = String::with_capacity(value.len() * 3);
    for b in value.bytes() {
        if unreserved(b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    Ok(Cow::Owned(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_object_name_is_its_own_segment() {
        assert_eq!(
            segment("name", "gpu-summary.v1").ok(),
            Some("gpu-summary.v1".into())
        );
    }

    #[test]
    fn no_value_can_leave_its_segment_or_start_a_query() {
        for bad in ["", ".", "..", "p5/status", "../secrets/db-password", "/"] {
            assert!(segment("name", bad).is_err(), "{bad:?}");
        }
        assert_eq!(segment("name", "%2F").ok(), Some("%252F".into()));
        assert_eq!(segment("name", "a?b#c").ok(), Some("a%3Fb%23c".into()));
        assert_eq!(segment("name", "system:x").ok(), Some("system%3Ax".into()));
        assert_eq!(segment("name", "...").ok(), Some("...".into()));
    }
}
