//! Object-name syntax: RFC 1123 labels and subdomains, with the real API
//! server's wording for a name that is neither.

/// The real server's message for a name that is not a DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
/// The real server's message for a name that is not a DNS-1123 label.
pub const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// Whether `s` is a DNS-1123 label: 1–63 lowercase alphanumerics or '-',
/// starting and ending with an alphanumeric (namespace names).
pub fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Whether `s` is a DNS-1123 subdomain: at most 253 characters of
/// dot-separated labels (most object names).
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns1123_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_subdomains_follow_rfc_1123() {
        assert!(is_dns1123_label("gpu-summary"));
        assert!(is_dns1123_label("a1"));
        for bad in ["", "-a", "a-", "A", "a.b", &"a".repeat(64)] {
            assert!(!is_dns1123_label(bad), "{bad:?}");
        }
        assert!(is_dns1123_subdomain("example.com"));
        assert!(!is_dns1123_subdomain("example..com"));
        assert!(!is_dns1123_subdomain(&"a.".repeat(127)));
    }
}
