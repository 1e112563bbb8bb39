//! Property-based tests of the quantity parser: no panic on any string,
//! canonical forms round-trip, agreement with an exact rational reference
//! model, and rejection of whatever apimachinery's scanner rejects.

use proptest::prelude::*;

use super::*;

/// apimachinery's documented quantity regex (`splitREString` in
/// `k8s.io/apimachinery/pkg/api/resource/quantity.go`).
const K8S_REGEX: &str = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";

/// The language apimachinery's hand-written scanner (`parseQuantityString`)
/// really accepts: the regex above, except that the number may be empty.
const SCANNER_REGEX: &str = "^[+-]?[0-9]*(\\.[0-9]*)?[eEinumkKMGTP]*[-+]?[0-9]*$";

fn k8s_regex() -> regex::Regex {
    regex::Regex::new(K8S_REGEX).expect("valid regex")
}

fn scanner_regex() -> regex::Regex {
    regex::Regex::new(SCANNER_REGEX).expect("valid regex")
}

/// A suffix the reference model understands: decimal exponent or binary
/// power, and the text that spells it.
#[derive(Clone, Debug)]
enum Suffix {
    /// `×10^e`, spelled as an SI letter or as `e<n>`/`E<n>`.
    Decimal(i32, String),
    /// `×2^b`, spelled `Ki`…`Ti`.
    Binary(u32, &'static str),
}

fn suffix() -> impl Strategy<Value = Suffix> {
    prop_oneof![
        prop::sample::select(vec![
            (-9, "n"),
            (-6, "u"),
            (-3, "m"),
            (0, ""),
            (3, "k"),
            (6, "M"),
            (9, "G"),
            (12, "T"),
        ])
        .prop_map(|(e, s)| Suffix::Decimal(e, s.to_string())),
        (-12i32..=12, prop::bool::ANY, prop::bool::ANY).prop_map(|(e, upper, plus)| {
            let letter = if upper { 'E' } else { 'e' };
            let sign = if plus && e >= 0 { "+" } else { "" };
            Suffix::Decimal(e, format!("{letter}{sign}{e}"))
        }),
        prop::sample::select(vec![(10u32, "Ki"), (20, "Mi"), (30, "Gi"), (40, "Ti")])
            .prop_map(|(b, s)| Suffix::Binary(b, s)),
    ]
}

/// A generated valid quantity: sign, integer digits, fraction digits and
/// suffix, small enough that the exact value fits `i128` arithmetic and the
/// rounded value fits `i64`.
#[derive(Clone, Debug)]
struct Generated {
    negative: bool,
    int: u64,
    /// Fraction digits as written (at most 6).
    frac: String,
    suffix: Suffix,
}

impl Generated {
    fn text(&self) -> String {
        let sign = if self.negative { "-" } else { "" };
        let frac = if self.frac.is_empty() {
            String::new()
        } else {
            format!(".{}", self.frac)
        };
        let suffix = match &self.suffix {
            Suffix::Decimal(_, s) => s.as_str(),
            Suffix::Binary(_, s) => s,
        };
        format!("{sign}{}{frac}{suffix}", self.int)
    }

    /// The exact value as `num / den`, both positive except for the sign
    /// carried by `num`.
    fn exact(&self) -> (i128, i128) {
        let frac_len = u32::try_from(self.frac.len()).expect("short fraction");
        let frac: i128 = if self.frac.is_empty() {
            0
        } else {
            self.frac.parse().expect("digits")
        };
        let mantissa = i128::from(self.int) * 10i128.pow(frac_len) + frac;
        let mut den = 10i128.pow(frac_len);
        let mut num = mantissa;
        match self.suffix {
            Suffix::Decimal(e, _) if e >= 0 => num *= 10i128.pow(e.unsigned_abs()),
            Suffix::Decimal(e, _) => den *= 10i128.pow(e.unsigned_abs()),
            Suffix::Binary(b, _) => num <<= b,
        }
        if self.negative {
            num = -num;
        }
        (num, den)
    }

    /// `Quantity.Value()` of the exact value: rounded away from zero.
    fn reference_value(&self) -> i64 {
        let (num, den) = self.exact();
        let magnitude = (num.abs() + den - 1) / den;
        let signed = if num < 0 { -magnitude } else { magnitude };
        i64::try_from(signed).expect("generated values fit i64")
    }
}

fn generated() -> impl Strategy<Value = Generated> {
    (prop::bool::ANY, 0u64..1_000_000, "[0-9]{0,6}", suffix()).prop_map(
        |(negative, int, frac, suffix)| Generated {
            negative,
            int,
            frac,
            suffix,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any string: no panic, an error names the string verbatim, and an
    /// accepted quantity's `value()` does not panic either.
    #[test]
    fn never_panics_and_errors_keep_the_input(s in ".{0,40}") {
        match parse_quantity(&s) {
            Ok(q) => { let _ = q.value(); }
            Err(e) => {
                prop_assert_eq!(e.value(), s.as_str());
                prop_assert!(!e.to_string().is_empty());
            }
        }
    }

    /// Strings over the quantity alphabet (where the interesting edges are):
    /// whatever the scanner's language does not contain is a format error,
    /// and whatever is accepted but lies outside Kubernetes' documented
    /// regex is one of the documented digit-less forms (no digit before the
    /// suffix), which parse as zero.
    #[test]
    fn rejects_outside_the_quantity_regex(s in "[-+0-9.eEinumkKMGTPx ]{0,12}") {
        let result = parse_quantity(&s);
        if !scanner_regex().is_match(&s) {
            prop_assert_eq!(
                result.as_ref().map_err(|e| e.kind()),
                Err(QuantityErrorKind::Format),
                "{:?} is outside the scanner's language", s
            );
        }
        if let Ok(q) = result {
            if !k8s_regex().is_match(&s) {
                let number: String = s
                    .trim_start_matches(['+', '-'])
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.')
                    .collect();
                prop_assert!(number.is_empty(), "{:?} accepted outside the regex", s);
                prop_assert!(q.is_zero(), "{:?} has no number but parsed as {:?}", s, q);
            }
        }
    }

    /// An integer and its suffixed spellings parse to the expected value.
    #[test]
    fn canonical_forms_round_trip(n in 0i64..2_000_000) {
        let forms: [(String, i64); 11] = [
            (n.to_string(), n),
            (format!("+{n}"), n),
            (format!("-{n}"), -n),
            (format!("{n}k"), n * 1_000),
            (format!("{n}M"), n * 1_000_000),
            (format!("{n}G"), n * 1_000_000_000),
            (format!("{n}Ki"), n << 10),
            (format!("{n}Mi"), n << 20),
            (format!("{n}Gi"), n << 30),
            (format!("{n}000m"), n),
            (format!("{n}e3"), n * 1_000),
        ];
        for (text, want) in forms {
            prop_assert_eq!(quantity_value(&text), Ok(want), "{}", text);
        }
        // `n` millis, nanos and micros round up to the next whole unit.
        prop_assert_eq!(quantity_value(&format!("{n}m")), Ok((n + 999) / 1_000));
        prop_assert_eq!(quantity_value(&format!("{n}u")), Ok((n + 999_999) / 1_000_000));
        prop_assert_eq!(quantity_value(&format!("{n}n")), Ok(i64::from(n > 0)));
        // The spellings of one amount are equal quantities.
        prop_assert_eq!(
            parse_quantity(&format!("{n}k")),
            parse_quantity(&format!("{n}000"))
        );
        prop_assert_eq!(
            parse_quantity(&format!("{n}")),
            parse_quantity(&format!("{n}000000000n"))
        );
    }

    /// Generated valid quantities (sign, digits, fraction, SI, exponent or
    /// binary suffix) agree with an exact rational model rounded away from
    /// zero, as `Quantity.Value()` rounds.
    #[test]
    fn agrees_with_reference_model(g in generated()) {
        let text = g.text();
        prop_assert_eq!(quantity_value(&text), Ok(g.reference_value()), "{}", text);
        prop_assert!(k8s_regex().is_match(&text));
    }

    /// Ordering is numeric: two generated quantities compare as their exact
    /// values do, wherever both are whole numbers of nanos (finer values are
    /// rounded to `1n` at parse time, as apimachinery does).
    #[test]
    fn ordering_is_numeric(a in generated(), b in generated()) {
        let ((an, ad), (bn, bd)) = (a.exact(), b.exact());
        let nano = 1_000_000_000i128;
        prop_assume!((an * nano) % ad == 0 && (bn * nano) % bd == 0);
        let (qa, qb) = (parse_quantity(&a.text()), parse_quantity(&b.text()));
        let (Ok(qa), Ok(qb)) = (qa, qb) else {
            return Err(TestCaseError::fail("generated quantities parse"));
        };
        prop_assert_eq!(qa.cmp(&qb), (an * bd).cmp(&(bn * ad)), "{} vs {}", a.text(), b.text());
        // And sums are exact before rounding.
        let sum = qa.saturating_add(qb);
        let (sn, sd) = (an * bd + bn * ad, ad * bd);
        let magnitude = (sn.abs() + sd - 1) / sd;
        let want = if sn < 0 { -magnitude } else { magnitude };
        prop_assert_eq!(i128::from(sum.value()), want);
    }
}
