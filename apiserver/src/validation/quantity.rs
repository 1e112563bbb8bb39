//! Whether a JSON value decodes into apimachinery's `resource.Quantity`,
//! and the error the real decoder gives when it does not.
//!
//! `Quantity.UnmarshalJSON` (apimachinery `pkg/api/resource/quantity.go`)
//! strips the quotes of a string, trims spaces and calls `ParseQuantity`
//! on whatever text is left, so a number (`1`, `1.5`, `1e3`) is a quantity
//! and an array or `true` fails like a bad string. This module owns that
//! syntax and its two syntax errors (`ErrNumeric`, an amount too large for
//! either of Go's representations, is not modelled); it never does quantity arithmetic
//! (see `pods::quantity`) and never decides where quantities live.

use serde_json::Value;

/// `resource.ErrFormatWrong`.
pub(crate) const ERR_FORMAT_WRONG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
/// `resource.ErrSuffix`.
const ERR_SUFFIX: &str = "unable to parse quantity's suffix";

/// The decoder's error for `v` as a `Quantity`; `None` when it decodes
/// (`null` always does: it leaves the quantity zero).
pub(crate) fn unmarshal_error(v: &Value) -> Option<&'static str> {
    let raw = match v {
        Value::Null => return None,
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    parse_quantity(raw.trim()).err()
}

/// `ParseQuantity` (quantity.go): the syntax of `parseQuantityString`, then
/// the suffix.
fn parse_quantity(s: &str) -> Result<(), &'static str> {
    if s.is_empty() {
        return Err(ERR_FORMAT_WRONG);
    }
    if s == "0" {
        return Ok(());
    }
    let suffix = split_suffix(s)?;
    if valid_suffix(suffix) {
        Ok(())
    } else {
        Err(ERR_SUFFIX)
    }
}

/// `parseQuantityString`: the suffix after the numeric part.
fn split_suffix(s: &str) -> Result<&str, &'static str> {
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = usize::from(matches!(b.first(), Some(b'-' | b'+')));
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok("");
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos >= end {
        return Ok("");
    }
    if b[pos] == b'.' {
        pos += 1;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        if pos >= end {
            return Ok("");
        }
    }
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && matches!(b[pos], b'-' | b'+') {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(ERR_FORMAT_WRONG);
    }
    Ok(&s[suffix_start..])
}

/// `quantitySuffixer.interpret` (suffix.go): binary, decimal SI, or an
/// `e`/`E` exponent that parses as an int64.
fn valid_suffix(suffix: &str) -> bool {
    const KNOWN: [&str; 16] = [
        "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E",
    ];
    if KNOWN.contains(&suffix) {
        return true;
    }
    match suffix.strip_prefix(['e', 'E']) {
        Some(exp) if !exp.is_empty() => exp.parse::<i64>().is_ok(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities_decode_as_parse_quantity_reads_them() {
        for ok in [
            json!("1"),
            json!("0"),
            json!("500m"),
            json!("1.5Gi"),
            json!(" 2 "),
            json!("1e3"),
            json!("1E+3"),
            json!("+.5"),
            json!("1."),
            json!("."),
            json!(2),
            json!(1.5),
            json!(null),
        ] {
            assert_eq!(unmarshal_error(&ok), None, "{ok}");
        }
        for (bad, err) in [
            (json!("lots"), ERR_FORMAT_WRONG),
            (json!(""), ERR_FORMAT_WRONG),
            (json!("1.1.1"), ERR_FORMAT_WRONG),
            (json!([1]), ERR_FORMAT_WRONG),
            (json!(true), ERR_FORMAT_WRONG),
            (json!("1K"), ERR_SUFFIX),
            (json!("1ee"), ERR_SUFFIX),
        ] {
            assert_eq!(unmarshal_error(&bad), Some(err), "{bad}");
        }
    }
}
