//! ConfigMap (and Secret) data keys: apimachinery's `IsConfigMapKey`
//! (`pkg/util/validation/validation.go`) — `[-._a-zA-Z0-9]+`, at most 253
//! bytes, not `.` or `..`, not starting with `..` — and the reason for each
//! refusal. Pure and dependency-free (guests link it); it never decides
//! which fields hold such keys.

use thiserror::Error;

/// `validation.DNS1123SubdomainMaxLength`: the longest ConfigMap key.
pub const MAX_LEN: usize = 253;

/// Why a string is not a ConfigMap key: the first problem apimachinery
/// reports (length first, then characters, then the `..` rules).
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq, Hash)]
pub enum ConfigMapKeyError {
    /// Longer than [`MAX_LEN`] bytes.
    #[error("must be no more than 253 characters")]
    TooLong,
    /// Empty, or a byte outside `[-._a-zA-Z0-9]`.
    #[error("a valid config key must consist of alphanumeric characters, '-', '_' or '.'")]
    Characters,
    /// Exactly `.`.
    #[error("must not be '.'")]
    Dot,
    /// Exactly `..`.
    #[error("must not be '..'")]
    DotDot,
    /// Starts with `..` (a path out of a mounted volume).
    #[error("must not start with '..'")]
    DotDotPrefix,
}

impl ConfigMapKeyError {
    /// The reason, as a static string (the `Display` text).
    pub fn message(self) -> &'static str {
        match self {
            ConfigMapKeyError::TooLong => "must be no more than 253 characters",
            ConfigMapKeyError::Characters => {
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.'"
            }
            ConfigMapKeyError::Dot => "must not be '.'",
            ConfigMapKeyError::DotDot => "must not be '..'",
            ConfigMapKeyError::DotDotPrefix => "must not start with '..'",
        }
    }
}

/// `IsConfigMapKey`: `Ok` when the API server accepts `key` as a data key,
/// else the first problem it would report.
pub fn check_config_map_key(key: &str) -> Result<(), ConfigMapKeyError> {
    if key.len() > MAX_LEN {
        return Err(ConfigMapKeyError::TooLong);
    }
    if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err(ConfigMapKeyError::Characters);
    }
    match key {
        "." => Err(ConfigMapKeyError::Dot),
        ".." => Err(ConfigMapKeyError::DotDot),
        k if k.starts_with("..") => Err(ConfigMapKeyError::DotDotPrefix),
        _ => Ok(()),
    }
}

/// Whether the API server accepts `key` as a ConfigMap data key.
pub fn is_config_map_key(key: &str) -> bool {
    check_config_map_key(key).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_api_servers_rule() {
        for ok in [
            "a",
            "node-1",
            "x_y.z",
            "-",
            "._a",
            ".a",
            "N_1",
            "gpu-node-01.example.com",
        ] {
            assert_eq!(check_config_map_key(ok), Ok(()), "{ok}");
            assert!(is_config_map_key(ok), "{ok}");
        }
        let at_limit = "a".repeat(MAX_LEN);
        assert!(is_config_map_key(&at_limit));
        let long = "a".repeat(MAX_LEN + 1);
        let huge = "a".repeat(1 << 20);
        for (bad, why) in [
            ("", ConfigMapKeyError::Characters),
            (".", ConfigMapKeyError::Dot),
            ("..", ConfigMapKeyError::DotDot),
            ("..a", ConfigMapKeyError::DotDotPrefix),
            ("../../etc", ConfigMapKeyError::Characters),
            ("a/b", ConfigMapKeyError::Characters),
            ("a b", ConfigMapKeyError::Characters),
            ("nul\0", ConfigMapKeyError::Characters),
            ("é", ConfigMapKeyError::Characters),
            (long.as_str(), ConfigMapKeyError::TooLong),
            (huge.as_str(), ConfigMapKeyError::TooLong),
        ] {
            assert_eq!(check_config_map_key(bad), Err(why), "{:.20?}", bad);
            assert!(!is_config_map_key(bad), "{:.20?}", bad);
        }
    }

    #[test]
    fn message_is_the_display_text() {
        for e in [
            ConfigMapKeyError::TooLong,
            ConfigMapKeyError::Characters,
            ConfigMapKeyError::Dot,
            ConfigMapKeyError::DotDot,
            ConfigMapKeyError::DotDotPrefix,
        ] {
            assert_eq!(e.message(), e.to_string());
        }
    }
}
