//! How the real server's Go code words values and places: `strconv.Quote`,
//! `%v` of a `float64`, and the path through a JSON document that every
//! field problem names. Pure wording; it never decides whether anything is
//! wrong (the rules do).

use std::fmt::Write;

/// One step of a path through a JSON document.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

/// A path through a JSON document, from its root.
pub(crate) type Path = Vec<Seg>;

/// Go's `strconv.Quote` (`%q`): `"` and `\` escaped, control characters
/// as `\n`, `\x01`, `\u0085`.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if c.is_control() && (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() || (c.is_whitespace() && c != ' ') => {
                if (c as u32) < 0x10000 {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                } else {
                    let _ = write!(out, "\\U{:08x}", c as u32);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `%v` of a `float64` (`strconv` `'g'`, shortest): exponent form
/// (`1e+06`, `1.5e-07`) when the exponent is below -4 or at least 6.
pub(crate) fn go_float(f: f64) -> String {
    let sci = format!("{f:e}");
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return sci;
    };
    let exp: i32 = exp.parse().unwrap_or_default();
    if f.is_finite() && (-4..6).contains(&exp) {
        return format!("{f}");
    }
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
}
