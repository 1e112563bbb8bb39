//! Reading an object's metadata and stamping times as the real server
//! writes them. Pure helpers every rule and controller shares; they never
//! change an object.

use serde_json::Value;

/// RFC 3339 timestamp (seconds precision) for `now`.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Reads a string from `metadata`.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}
