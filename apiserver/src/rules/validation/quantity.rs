//! Whether a JSON value decodes into apimachinery's `resource.Quantity`,
//! and the error the real decoder gives when it does not.
//!
//! `Quantity.UnmarshalJSON` (apimachinery `pkg/api/resource/quantity.go`)
//! strips the quotes of a string, trims spaces and calls `ParseQuantity`
//! on whatever text is left, so a number (`1`, `1.5`, `1e3`) is a quantity
//! and an array or `true` fails like a bad string. This module owns that
//! JSON-to-text step; the syntax and its three errors (`ErrFormatWrong`,
//! `ErrSuffix`, `ErrNumeric`) are `wasmctrl_kube_rules::quantity`'s. It
//! never does quantity arithmetic and never decides where quantities live.

use serde_json::Value;
use wasmctrl_kube_rules::quantity::parse_quantity;

/// The decoder's error for `v` as a `Quantity`; `None` when it decodes
/// (`null` always does: it leaves the quantity zero).
pub(crate) fn unmarshal_error(v: &Value) -> Option<&'static str> {
    let raw = match v {
        Value::Null => return None,
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    parse_quantity(raw.trim()).err().map(|e| e.kind().message())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ERR_FORMAT_WRONG: &str =
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
    const ERR_SUFFIX: &str = "unable to parse quantity's suffix";
    const ERR_NUMERIC: &str = "unable to parse numeric part of quantity";

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
            (json!("Pi"), ERR_NUMERIC),
            (json!(" .e-10 "), ERR_NUMERIC),
        ] {
            assert_eq!(unmarshal_error(&bad), Some(err), "{bad}");
        }
    }
}
