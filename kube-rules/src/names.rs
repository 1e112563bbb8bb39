//! Object-name syntax: RFC 1123 labels and subdomains, with the real API
//! server's wording for a name that is neither; qualified names (label and
//! annotation keys) and label values with apimachinery's messages
//! (`pkg/util/validation/validation.go`: `IsQualifiedName`,
//! `IsValidLabelValue`, `IsDNS1123Subdomain`, `RegexError`).

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

/// `IsDNS1123Label`: its problems with `s` (none when valid), the length
/// and the regex each reported, as apimachinery does.
pub fn dns1123_label_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    let shape = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if !shape {
        errs.push(DNS1123_LABEL_MSG.to_string());
    }
    errs
}

/// `IsValidPathSegmentName`: the problems of a name that must be one URL
/// path segment (the rule for RBAC objects, whose names may hold `:`):
/// not `.` or `..`, and no `/` or `%` (none when valid).
pub fn path_segment_name_errors(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|illegal| name.contains(**illegal))
        .map(|illegal| format!("may not contain '{illegal}'"))
        .collect()
}

/// `qualifiedNameFmt`.
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
/// `qualifiedNameErrMsg`.
const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
/// `qualifiedNameMaxLength` and `LabelValueMaxLength`.
const QUALIFIED_NAME_MAX: usize = 63;
/// `DNS1123SubdomainMaxLength`.
const DNS1123_SUBDOMAIN_MAX: usize = 253;

/// `RegexError(msg, fmt, examples...)`.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{e}', "));
    }
    out.push_str(&format!("regex used for validation is '{fmt}')"));
    out
}

/// Whether `s` matches `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    let ext = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.');
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric() && l.is_ascii_alphanumeric() && b.iter().all(ext)
        }
        _ => false,
    }
}

/// `IsDNS1123Subdomain`: its problems with `s` (none when valid). Unlike
/// [`is_dns1123_subdomain`] it applies only the regex and the overall
/// length, as apimachinery does.
pub fn dns1123_subdomain_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(format!(
            "must be no more than {DNS1123_SUBDOMAIN_MAX} characters"
        ));
    }
    let label = |l: &str| {
        !l.is_empty()
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if !s.split('.').all(label) {
        errs.push(DNS1123_SUBDOMAIN_MSG.to_string());
    }
    errs
}

/// `IsQualifiedName`: the problems of a label or annotation key (none
/// when valid): an optional DNS-subdomain prefix and `/`, then a name part
/// of at most 63 characters.
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    dns1123_subdomain_errors(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > QUALIFIED_NAME_MAX {
        errs.push(format!(
            "name part must be no more than {QUALIFIED_NAME_MAX} characters"
        ));
    }
    if !is_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// Whether `s` is a qualified name with a prefix, as a finalizer should be
/// (apimachinery's `IsQualifiedName` plus the prefix that finalizer
/// validation warns about when missing): `prefix/name`, the prefix a DNS
/// subdomain, the name at most 63 characters of alphanumerics, `-`, `_`
/// and `.`, starting and ending alphanumeric.
pub fn is_qualified_finalizer(s: &str) -> bool {
    let Some((prefix, name)) = s.split_once('/') else {
        return false;
    };
    is_dns1123_subdomain(prefix) && name.len() <= QUALIFIED_NAME_MAX && is_qualified_name_part(name)
}

/// `IsValidLabelValue`: the problems of a label value (none when valid):
/// empty, or a qualified name part of at most 63 characters.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > QUALIFIED_NAME_MAX {
        errs.push(format!(
            "must be no more than {QUALIFIED_NAME_MAX} characters"
        ));
    }
    if !(value.is_empty() || is_qualified_name_part(value)) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            &format!("({QUALIFIED_NAME_FMT})?"),
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names_and_label_values_read_as_apimachinery_words_them() {
        for ok in ["app", "example.com/app", "a_b.c-d", "A1"] {
            assert!(qualified_name_errors(ok).is_empty(), "{ok}");
        }
        assert_eq!(
            qualified_name_errors("bad key!"),
            vec!["name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"]
        );
        assert_eq!(
            qualified_name_errors("/x"),
            vec!["prefix part must be non-empty"]
        );
        assert_eq!(qualified_name_errors("Example.com/x").len(), 1);
        assert!(qualified_name_errors("a/b/c")[0].starts_with("a qualified name must consist"));
        assert_eq!(
            qualified_name_errors(&"a".repeat(64)),
            vec!["name part must be no more than 63 characters"]
        );
        assert!(label_value_errors("").is_empty());
        assert!(label_value_errors("v1.2_x").is_empty());
        assert_eq!(
            label_value_errors("-x"),
            vec!["a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"]
        );
        assert_eq!(label_value_errors(&"a".repeat(64)).len(), 1);
    }

    #[test]
    fn a_finalizer_is_a_qualified_name_with_a_subdomain_prefix() {
        for ok in ["example.com/cleanup", "a/b", "apps.example.com/A_b.c-1"] {
            assert!(is_qualified_finalizer(ok), "{ok}");
        }
        let long = format!("example.com/{}", "a".repeat(64));
        for bad in [
            "cleanup",
            "/cleanup",
            "example.com/",
            "Example.com/x",
            "example.com/-x",
            "example.com/x_",
            "example.com/a/b",
            "example.com/é",
            &long,
        ] {
            assert!(!is_qualified_finalizer(bad), "{bad}");
        }
        assert!(is_qualified_finalizer(&format!(
            "example.com/{}",
            "a".repeat(63)
        )));
    }

    #[test]
    fn a_path_segment_name_can_never_be_more_than_one_segment() {
        assert!(path_segment_name_errors("system:controller:x").is_empty());
        assert_eq!(path_segment_name_errors(".."), vec!["may not be '..'"]);
        assert_eq!(path_segment_name_errors("."), vec!["may not be '.'"]);
        assert_eq!(
            path_segment_name_errors("a/%2F"),
            vec!["may not contain '/'", "may not contain '%'"]
        );
    }

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
