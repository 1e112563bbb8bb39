//! How apimachinery's `resource.Quantity` holds and prints a parsed amount:
//! its `Format`, the `int64Amount` of `ParseQuantity`'s fast path (or an
//! `inf.Dec` off it), the string it caches when the input was canonical,
//! its canonical `String()`, `MilliValue() % 1000 == 0`, and the Go `%#v`
//! form `field.Invalid` prints (a `Quantity` value has no `String()` in its
//! method set, so the struct itself is printed). What the embedded API
//! server needs to judge and word a pod's resources. It never parses on
//! its own: the amount and every error come from [`parse_quantity`].

use super::{interpret_suffix, parse_quantity, scan, Base, Quantity, Result, NANO};

/// apimachinery's `Format` of a quantity, from the suffix it was written with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// An SI suffix or none (`500m`, `2`, `3k`).
    DecimalSI,
    /// A binary suffix (`1Ki`, `2Gi`).
    BinarySI,
    /// An `e`/`E` exponent (`1e3`).
    DecimalExponent,
}

impl Format {
    /// The name Go prints.
    pub fn name(self) -> &'static str {
        match self {
            Format::DecimalSI => "DecimalSI",
            Format::BinarySI => "BinarySI",
            Format::DecimalExponent => "DecimalExponent",
        }
    }
}

/// A quantity as apimachinery's `ParseQuantity` leaves it in memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoQuantity {
    amount: Quantity,
    format: Format,
    /// `int64Amount{value, scale}` when the fast path held it; `None` for
    /// an `inf.Dec`.
    int64: Option<(i64, i32)>,
    /// The string Go caches (`s`): the input when it was already canonical.
    cached: Option<String>,
    /// The input, printed in place of an `inf.Dec` (whose `%#v` is a
    /// pointer no one can predict).
    text: String,
}

impl GoQuantity {
    /// Parses `s` as `ParseQuantity` does (no trimming; errors as
    /// [`parse_quantity`] gives them).
    pub fn parse(s: &str) -> Result<GoQuantity> {
        let amount = parse_quantity(s)?;
        let mut q = GoQuantity {
            amount,
            format: Format::DecimalSI,
            int64: Some((0, 0)),
            cached: (s == "0").then(|| s.to_string()),
            text: s.to_string(),
        };
        // Only a sign and zeros: `int64Amount{0, 0}`, nothing cached.
        let Ok(Some(number)) = scan(s.as_bytes()) else {
            return Ok(q);
        };
        let Some((base, exponent)) = interpret_suffix(number.suffix) else {
            return Ok(q);
        };
        q.format = match (base, number.suffix.first()) {
            (Base::Binary, _) => Format::BinarySI,
            (Base::Decimal, Some(b'e' | b'E')) if number.suffix.len() > 1 => {
                Format::DecimalExponent
            }
            (Base::Decimal, _) => Format::DecimalSI,
        };
        // `parseQuantityString` turns an empty numerator into "0".
        let num: &[u8] = if number.num.is_empty() {
            b"0"
        } else {
            number.num
        };
        let digits = i64::try_from(num.len() + number.denom.len()).unwrap_or(i64::MAX);
        let denom_len = i64::try_from(number.denom.len()).unwrap_or(i64::MAX);
        let (precision, scale, mantissa) = match base {
            Base::Decimal => (18 - digits, i64::from(exponent) - denom_len, 1_i64),
            Base::Binary if number.denom.is_empty() => (
                15 - digits - i64::from(exponent) * 3 / 10 - 1,
                0,
                1_i64 << exponent.clamp(0, 62),
            ),
            Base::Binary => (-1, 0, 1),
        };
        let fast = (precision >= 0 && scale >= -9)
            .then(|| {
                let shifted: Vec<u8> = num.iter().chain(number.denom).copied().collect();
                let value: i64 = std::str::from_utf8(&shifted).ok()?.parse().ok()?;
                let result = value.checked_mul(mantissa)?;
                let scale = i32::try_from(scale).ok()?;
                let canonical = match base {
                    Base::Binary => exponent % 10 == 0 && value & 0x07 != 0,
                    Base::Decimal => {
                        scale % 3 == 0 && !shifted.ends_with(b"000") && shifted[0] != b'0'
                    }
                };
                let result = if number.negative { -result } else { result };
                Some((result, scale, canonical))
            })
            .flatten();
        match fast {
            Some((value, scale, canonical)) => {
                q.int64 = Some((value, scale));
                q.cached = canonical.then(|| s.to_string());
            }
            None => {
                q.int64 = None;
                let units = amount.nanos.abs();
                if q.format == Format::BinarySI && units > 0 && units < NANO {
                    q.format = Format::DecimalSI;
                }
            }
        }
        Ok(q)
    }

    /// The amount, exact to `1n`.
    pub fn amount(&self) -> Quantity {
        self.amount
    }

    /// The format it keeps.
    pub fn format(&self) -> Format {
        self.format
    }

    /// `MilliValue() % 1000 == 0`: a whole number once rounded away from
    /// zero to millis (so `999999999n` counts as whole, as in Go).
    pub fn is_integer(&self) -> bool {
        round_away(self.amount.nanos, 1_000_000) % 1000 == 0
    }

    /// `Cmp(other) == 0`.
    pub fn same_amount(&self, other: &GoQuantity) -> bool {
        self.amount == other.amount
    }

    /// `String()`: the cached input, else `CanonicalizeBytes` (`2000m` →
    /// `2`, `1024` in BinarySI → `1Ki`, `1e3` → `1e3`). Amounts saturated
    /// beyond 10^21 units print as the saturated value.
    pub fn canonical(&self) -> String {
        if let Some(s) = &self.cached {
            return s.clone();
        }
        let nanos = self.amount.nanos;
        if nanos == 0 {
            return "0".to_string();
        }
        let mut format = self.format;
        if format == Format::BinarySI {
            if nanos.abs() < 1024 * NANO || nanos % NANO != 0 {
                format = Format::DecimalSI;
            } else {
                let (mut units, mut exponent) = (nanos / NANO, 0);
                while exponent < 6 && units % 1024 == 0 {
                    units /= 1024;
                    exponent += 1;
                }
                let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][exponent];
                return format!("{units}{suffix}");
            }
        }
        // `AsCanonicalBytes`: factors of ten into the exponent, which is
        // then brought down to a multiple of three.
        let (mut mantissa, mut exponent) = (nanos, -9_i32);
        while mantissa % 10 == 0 {
            mantissa /= 10;
            exponent += 1;
        }
        let down = exponent.rem_euclid(3);
        mantissa *= 10_i128.pow(down.unsigned_abs());
        exponent -= down;
        match format {
            Format::DecimalExponent if exponent == 0 => format!("{mantissa}"),
            Format::DecimalExponent => format!("{mantissa}e{exponent}"),
            _ => {
                // No SI letter beyond `E`: the mantissa carries the rest.
                while exponent > 18 {
                    mantissa = mantissa.saturating_mul(10);
                    exponent -= 1;
                }
                let suffix = match exponent {
                    -9 => "n",
                    -6 => "u",
                    -3 => "m",
                    3 => "k",
                    6 => "M",
                    9 => "G",
                    12 => "T",
                    15 => "P",
                    18 => "E",
                    _ => "",
                };
                format!("{mantissa}{suffix}")
            }
        }
    }

    /// How `field.Invalid(path, quantity, ...)` prints it: Go's `%#v` of
    /// the struct; the input, quoted, for an `inf.Dec` amount.
    pub fn go_struct(&self) -> String {
        let Some((value, scale)) = self.int64 else {
            return format!("{:?}", self.text);
        };
        format!(
            "resource.Quantity{{i:resource.int64Amount{{value:{value}, scale:{scale}}}, d:resource.infDecAmount{{Dec:(*inf.Dec)(nil)}}, s:{:?}, Format:{:?}}}",
            self.cached.as_deref().unwrap_or(""),
            self.format.name()
        )
    }
}

/// `n / unit`, rounded away from zero.
pub(super) fn round_away(n: i128, unit: i128) -> i128 {
    let whole = n / unit;
    match n % unit {
        0 => whole,
        _ if n > 0 => whole + 1,
        _ => whole - 1,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn q(s: &str) -> GoQuantity {
        GoQuantity::parse(s).unwrap()
    }

    #[test]
    fn amounts_parse_compare_and_print_like_go() {
        let half = q("500m");
        assert!(!half.is_integer());
        assert_eq!(
            half.go_struct(),
            r#"resource.Quantity{i:resource.int64Amount{value:500, scale:-3}, d:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, s:"500m", Format:"DecimalSI"}"#
        );
        assert!(q("2000m").is_integer());
        assert!(q("2").same_amount(&q("2000m")));
        assert!(!q("1").same_amount(&q("2")));
        assert!(q("1.5").go_struct().contains("s:\"\""));
        assert_eq!(q("2000m").canonical(), "2");
        assert_eq!(q("500m").canonical(), "500m");
        assert!(GoQuantity::parse("lots").is_err());
    }

    #[test]
    fn is_integer_rounds_to_millis_as_milli_value_does() {
        assert!(q("999999999n").is_integer());
        assert!(!q("1000001u").is_integer());
        assert!(q("-2").is_integer());
        assert!(!q("-1.5").is_integer());
        assert!(q("1Ki").is_integer());
    }

    #[test]
    fn canonical_is_go_string() {
        for (input, want) in [
            ("0", "0"),
            ("-0", "0"),
            ("000", "0"),
            ("+5", "+5"),
            ("1000", "1k"),
            ("1500", "1500"),
            ("0.5", "500m"),
            ("1.5k", "1500"),
            ("1e3", "1e3"),
            ("1000e0", "1e3"),
            ("1.5e3", "1500"),
            ("1024", "1024"),
            ("1Ki", "1Ki"),
            ("1024Ki", "1Mi"),
            ("1536Ki", "1536Ki"),
            ("0.5Ki", "512"),
            ("1.5Ki", "1536"),
            ("0.1Ki", "102400m"),
            ("1000E", "1000E"),
            ("100n", "100n"),
            ("0.0000000001", "1n"),
        ] {
            assert_eq!(q(input).canonical(), want, "{input}");
        }
    }

    #[test]
    fn go_struct_shows_the_fast_path_and_its_cache() {
        let binary = q("3Ki");
        assert_eq!(binary.format(), Format::BinarySI);
        assert_eq!(
            binary.go_struct(),
            r#"resource.Quantity{i:resource.int64Amount{value:3072, scale:0}, d:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, s:"3Ki", Format:"BinarySI"}"#
        );
        // 8 & 7 == 0: not cached.
        assert!(q("8Ki").go_struct().contains("s:\"\""));
        assert!(q("5e-1")
            .go_struct()
            .contains("value:5, scale:-1}, d:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, s:\"\", Format:\"DecimalExponent\""));
        assert!(q("0")
            .go_struct()
            .contains("value:0, scale:0}, d:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, s:\"0\""));
        assert!(q("0.5").go_struct().contains("value:5, scale:-1}"));
        // Off the fast path (more than 18 digits, finer than 1n, a binary
        // fraction): an `inf.Dec`, shown as the input.
        assert_eq!(
            q("1234567890123456789").go_struct(),
            "\"1234567890123456789\""
        );
        assert_eq!(q("1e-10").go_struct(), "\"1e-10\"");
        assert_eq!(q("0.5Ki").go_struct(), "\"0.5Ki\"");
        // A binary amount below one unit becomes DecimalSI, as Go does.
        assert_eq!(q("0.0001Ki").format(), Format::DecimalSI);
    }
}

#[cfg(test)]
mod proptests;
