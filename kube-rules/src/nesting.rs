//! How deep a JSON or YAML document nests its arrays and objects, found in
//! one pass over the bytes, before any decoder runs: decoders refuse deep
//! documents only after parsing them (the YAML scanner in time quadratic
//! in the depth), so the limit is checked first. Never decodes anything.

/// Whether the arrays and objects of `body` (JSON, or YAML flow syntax)
/// nest deeper than `max`.
///
/// Brackets inside quoted strings and YAML comments do not count. A
/// string starts only where a token may start (after whitespace or one of
/// `[{,:` or at the beginning), as in both JSON and YAML flow syntax, so
/// an apostrophe inside a word (`don't`) opens nothing.
pub fn deeper_than(body: &[u8], max: usize) -> bool {
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
                            return true;
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
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        "[".repeat(depth) + &"]".repeat(depth)
    }

    #[test]
    fn nesting_up_to_the_limit_passes_and_one_more_fails() {
        assert!(!deeper_than(nested(10).as_bytes(), 10));
        assert!(deeper_than(nested(11).as_bytes(), 10));
        // Mixed objects and arrays, JSON and YAML flow style.
        let doc = r#"{"a": [{"b": [1]}]}"#;
        assert!(!deeper_than(doc.as_bytes(), 4));
        assert!(deeper_than(doc.as_bytes(), 3));
        assert!(deeper_than(b"x: {a: {b: [1]}}", 2));
    }

    #[test]
    fn brackets_in_strings_and_comments_neither_count_nor_hide_nesting() {
        let doc = r#"{"a": "[[[[[[", "b": 'x{{{{', "c": "\"[[["}"#;
        assert!(!deeper_than(doc.as_bytes(), 1));
        let yaml = "a: 1 # [[[[[[\nb: don't [x]\n";
        assert!(!deeper_than(yaml.as_bytes(), 1));
        // Closing brackets inside strings cannot cancel real nesting.
        let sneaky = r#"["]]]", ["]]]", ["]]]", [1]]]]"#;
        assert!(deeper_than(sneaky.as_bytes(), 3));
    }
}
