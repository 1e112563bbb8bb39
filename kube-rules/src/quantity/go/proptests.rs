//! Property-based tests of the Go representation: no panic on any string,
//! and for generated decimal amounts `is_integer`, `same_amount` and
//! `canonical` agree with an exact rational reference.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;

use super::*;

/// A generated decimal amount: sign, integer digits, fraction digits and an
/// SI suffix, small enough for `i128` reference arithmetic.
fn decimal() -> impl Strategy<Value = (String, i128, i128)> {
    (
        any::<bool>(),
        0u32..100_000,
        "[0-9]{0,4}",
        prop::sample::select(vec![
            (-9i32, "n"),
            (-6, "u"),
            (-3, "m"),
            (0, ""),
            (3, "k"),
            (6, "M"),
            (9, "G"),
        ]),
    )
        .prop_map(|(negative, int, frac, (exp, suffix))| {
            let sign = if negative { "-" } else { "" };
            let dot = if frac.is_empty() {
                String::new()
            } else {
                format!(".{frac}")
            };
            let text = format!("{sign}{int}{dot}{suffix}");
            // value = num / den exactly
            let frac_len = u32::try_from(frac.len()).unwrap();
            let mantissa =
                i128::from(int) * 10i128.pow(frac_len) + frac.parse::<i128>().unwrap_or(0);
            let mut num = if negative { -mantissa } else { mantissa };
            let mut den = 10i128.pow(frac_len);
            if exp >= 0 {
                num *= 10i128.pow(exp.unsigned_abs());
            } else {
                den *= 10i128.pow(exp.unsigned_abs());
            }
            (text, num, den)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any string: parse, and every method of what it parses to, never panic.
    #[test]
    fn never_panics(s in ".{0,24}|[-+0-9.numkMGTPEi]{0,24}") {
        if let Ok(q) = GoQuantity::parse(&s) {
            let _ = (q.is_integer(), q.canonical(), q.go_struct(), q.same_amount(&q));
        }
    }

    /// Generated decimal amounts (of at least nano precision): whole exactly when the exact value is;
    /// equal exactly when the exact values are; the canonical form denotes
    /// the same amount.
    #[test]
    fn decimal_amounts_agree_with_reference(a in decimal(), b in decimal()) {
        // Finer than 1n: apimachinery rounds these up to 1n at parse time
        // (`Quantity.RoundUp(Nano)` in ParseQuantity), so does the parser;
        // the exact reference below does not.
        prop_assume!(a.2 <= 1_000_000_000 && b.2 <= 1_000_000_000);
        let (qa, qb) = (GoQuantity::parse(&a.0), GoQuantity::parse(&b.0));
        prop_assert!(qa.is_ok() && qb.is_ok(), "{:?} {:?}", a.0, b.0);
        let (qa, qb) = (qa.unwrap(), qb.unwrap());
        // `MilliValue() % 1000 == 0`, millis rounded away from zero.
        let millis = round_away(a.1 * 1000, a.2);
        prop_assert_eq!(qa.is_integer(), millis % 1000 == 0, "{}", a.0);
        prop_assert_eq!(qa.same_amount(&qb), a.1 * b.2 == b.1 * a.2, "{} vs {}", a.0, b.0);
        let canonical = qa.canonical();
        let again = GoQuantity::parse(&canonical);
        prop_assert!(
            again.as_ref().is_ok_and(|c| c.same_amount(&qa)),
            "{} -> {} -> {:?}", a.0, canonical, again
        );
    }
}
