//! Minimal JSON string writing, so the guest needs no JSON library (size).

/// Appends `s` to `out` as a quoted JSON string with RFC 8259 escaping.
pub fn push_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::push_str;

    #[test]
    fn escapes_quotes_backslashes_and_control_characters() {
        for (input, want) in [
            ("plain", r#""plain""#),
            ("a\"b", r#""a\"b""#),
            ("a\\b", r#""a\\b""#),
            ("line\nbreak\ttab", r#""line\nbreak\ttab""#),
            ("\u{1}", r#""\u0001""#),
            ("ünïcode", "\"ünïcode\""),
        ] {
            let mut out = String::new();
            push_str(&mut out, input);
            assert_eq!(out, want, "input {input:?}");
        }
    }
}
