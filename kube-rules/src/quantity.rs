//! Kubernetes resource quantities (`"2"`, `"500m"`, `"1e3"`, `"1Ki"`): the one
//! parser of wasmctrl (guests through the SDK, the host, the embedded API
//! server), accepting and refusing exactly as apimachinery's
//! `resource.ParseQuantity` does, with its three error messages, and
//! rounding as `Quantity.Value()` does; [`go`] adds how Go holds and prints
//! a parsed quantity. Pure std, no dependency; never panics on any input,
//! and never decides where quantities live in an object.
//!
//! Grammar (from `k8s.io/apimachinery/pkg/api/resource/quantity.go`):
//!
//! ```text
//! <quantity>        ::= <signedNumber><suffix>
//! <signedNumber>    ::= <number> | <sign><number>
//! <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
//! <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
//! <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
//! <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
//! <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>
//! ```
//!
//! The accepted language is that of apimachinery's scanner, not of the
//! grammar above, and the two differ at the edges; these are mirrored on
//! purpose, each pinned by a test below:
//! - no whitespace anywhere (`" 1"`, `"1 "` are errors; JSON decoding trims,
//!   `ParseQuantity` does not);
//! - a number may have no digits: `"."`, `"-"`, `"+"`, `"k"`, `"Ki"`, `"e3"`
//!   all parse as zero, except where apimachinery's slow path then fails to
//!   read a digit (`".e-10"`, `"Pi"`, `"Ei"`: errors);
//! - the exponent after `e`/`E` must fit an `int64` and is then truncated to
//!   `int32` (`"1e4294967296"` is `1`).
//!
//! Values are kept exactly, in nano units (apimachinery rounds a non-zero
//! value finer than `1n` away from zero to `1n` at parse time), saturating far
//! beyond the `i64` range; binary-SI values are capped at `2^63-1` as
//! apimachinery caps them.

use std::fmt;
use std::str::FromStr;

pub mod go;

pub use go::{Format, GoQuantity};

/// `Result` with a [`QuantityError`].
pub type Result<T, E = QuantityError> = std::result::Result<T, E>;

/// Nanos per unit.
const NANO: i128 = 1_000_000_000;

/// Magnitude (in nanos) at which a quantity saturates: 10^21 units, well
/// beyond `i64::MAX` units, so [`Quantity::value`] still saturates correctly
/// and sums of saturated quantities cannot overflow `i128`.
const SATURATED_NANOS: i128 = 1_000_000_000_000_000_000_000_000_000_000;

/// apimachinery's cap for binary-SI quantities, `2^63-1` units, in nanos.
const BINARY_CAP_NANOS: i128 = i64::MAX as i128 * NANO;

/// Characters apimachinery's scanner takes as suffix letters.
const SUFFIX_LETTERS: &[u8] = b"eEinumkKMGTP";

/// A parsed quantity: an exact multiple of `1n` (10^-9).
///
/// Ordering is numeric. Arithmetic saturates instead of overflowing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Quantity {
    /// Value in nano units, clamped to `±SATURATED_NANOS`.
    nanos: i128,
}

impl Quantity {
    /// Zero.
    pub const ZERO: Quantity = Quantity { nanos: 0 };

    /// The value rounded to an integer away from zero, as `Quantity.Value()`
    /// does (`500m` → 1, `1.5` → 2, `-1.5` → -2), saturating at
    /// `i64::MIN`/`i64::MAX` where apimachinery's result would be undefined.
    pub fn value(&self) -> i64 {
        let rounded = go::round_away(self.nanos, NANO);
        i64::try_from(rounded).unwrap_or(if rounded > 0 { i64::MAX } else { i64::MIN })
    }

    /// True when the quantity is below zero (`"-0"` is not).
    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// True when the quantity is zero.
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// Exact sum, saturating far beyond the `i64` range of [`Quantity::value`].
    #[must_use]
    pub fn saturating_add(self, rhs: Quantity) -> Quantity {
        Quantity::from_nanos(self.nanos.saturating_add(rhs.nanos))
    }

    fn from_nanos(nanos: i128) -> Quantity {
        Quantity {
            nanos: nanos.clamp(-SATURATED_NANOS, SATURATED_NANOS),
        }
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(s: &str) -> Result<Quantity> {
        parse_quantity(s)
    }
}

/// Which of apimachinery's three parse errors a string hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantityErrorKind {
    /// `ErrFormatWrong`: empty, or not shaped like number-then-suffix
    /// (whitespace, stray characters, a second decimal point).
    Format,
    /// `ErrSuffix`: shaped right, but the suffix is none of the known ones
    /// (`"1K"`, `"1mi"`, `"1e"`, `"1e+"`).
    Suffix,
    /// `ErrNumeric`: the numeric part has no digit where apimachinery needs
    /// one (`".e-10"`, `"Ei"`).
    Numeric,
}

impl QuantityErrorKind {
    /// apimachinery's message for this error.
    pub fn message(self) -> &'static str {
        match self {
            QuantityErrorKind::Format => {
                "quantities must match the regular expression \
                 '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
            }
            QuantityErrorKind::Suffix => "unable to parse quantity's suffix",
            QuantityErrorKind::Numeric => "unable to parse numeric part of quantity",
        }
    }
}

/// A string that is not a Kubernetes quantity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuantityError {
    value: String,
    kind: QuantityErrorKind,
}

impl QuantityError {
    fn new(value: &str, kind: QuantityErrorKind) -> QuantityError {
        QuantityError {
            value: value.to_string(),
            kind,
        }
    }

    /// The offending string, verbatim.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// Which parse error it is.
    pub fn kind(&self) -> QuantityErrorKind {
        self.kind
    }
}

/// Longest prefix of an offending value that [`QuantityError`]'s `Display`
/// quotes; junk from a file can be arbitrarily long.
const DISPLAY_VALUE_CHARS: usize = 64;

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid quantity {:?}: {}",
            truncate_chars(&self.value, DISPLAY_VALUE_CHARS),
            self.kind.message()
        )
    }
}

impl std::error::Error for QuantityError {}

/// `s` cut to at most `max` characters, with `…` appended when cut.
pub fn truncate_chars(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match s.char_indices().nth(max) {
        None => std::borrow::Cow::Borrowed(s),
        Some((end, _)) => std::borrow::Cow::Owned(format!("{}…", &s[..end])),
    }
}

/// Parses `s` as apimachinery's `resource.ParseQuantity` does.
pub fn parse_quantity(s: &str) -> Result<Quantity> {
    let bytes = s.as_bytes();
    if bytes.is_empty() {
        return Err(QuantityError::new(s, QuantityErrorKind::Format));
    }
    let scan = scan(bytes).map_err(|kind| QuantityError::new(s, kind))?;
    let Some(number) = scan else {
        // Only a sign and zeros: apimachinery returns zero before looking
        // at any suffix.
        return Ok(Quantity::ZERO);
    };
    let (base, exponent) = interpret_suffix(number.suffix)
        .ok_or_else(|| QuantityError::new(s, QuantityErrorKind::Suffix))?;

    if !number.has_digit && slow_path(base, exponent) {
        // apimachinery's slow path hands the digit-less number to
        // `inf.Dec.SetString`, which needs a digit.
        return Err(QuantityError::new(s, QuantityErrorKind::Numeric));
    }

    let nanos = match base {
        Base::Decimal => {
            let shift = i64::from(exponent)
                .saturating_sub(len_i64(number.denom))
                .saturating_add(9);
            ceil_scaled(&[number.num, number.denom], shift)
        }
        Base::Binary => {
            let digits = times_power_of_two(number.num, number.denom, exponent);
            ceil_scaled(&[&digits], 9_i64.saturating_sub(len_i64(number.denom)))
                .min(BINARY_CAP_NANOS)
        }
    };
    let nanos = if number.negative { -nanos } else { nanos };
    Ok(Quantity::from_nanos(nanos))
}

/// Parses `s` and rounds it as `resource.MustParse(s).Value()` would.
pub fn quantity_value(s: &str) -> Result<i64> {
    parse_quantity(s).map(|q| q.value())
}

/// The pieces of a scanned quantity string.
struct Number<'a> {
    negative: bool,
    /// Integer digits without leading zeros (may be empty).
    num: &'a [u8],
    /// Fraction digits as written (may be empty).
    denom: &'a [u8],
    /// Whether the number part has any digit at all (`"0."` does, `"."` not).
    has_digit: bool,
    suffix: &'a [u8],
}

/// apimachinery's `parseQuantityString`. `Ok(None)` is its early return for
/// a string of only a sign and zeros.
fn scan(s: &[u8]) -> std::result::Result<Option<Number<'_>>, QuantityErrorKind> {
    let end = s.len();
    let mut pos = 0;
    let mut negative = false;
    match s.first() {
        Some(b'-') => {
            negative = true;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    let digits_start = pos;
    while pos < end && s[pos] == b'0' {
        pos += 1;
    }
    if pos == end {
        return Ok(None);
    }
    let num_start = pos;
    while pos < end && s[pos].is_ascii_digit() {
        pos += 1;
    }
    let num = &s[num_start..pos];
    let mut denom: &[u8] = &[];
    if pos < end && s[pos] == b'.' {
        pos += 1;
        let denom_start = pos;
        while pos < end && s[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &s[denom_start..pos];
    }
    let has_digit = s[digits_start..pos].iter().any(u8::is_ascii_digit);

    let suffix_start = pos;
    while pos < end && SUFFIX_LETTERS.contains(&s[pos]) {
        pos += 1;
    }
    if pos < end && (s[pos] == b'-' || s[pos] == b'+') {
        pos += 1;
    }
    while pos < end && s[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityErrorKind::Format);
    }
    Ok(Some(Number {
        negative,
        num,
        denom,
        has_digit,
        suffix: &s[suffix_start..],
    }))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Base {
    /// Value is `number * 10^exponent`.
    Decimal,
    /// Value is `number * 2^exponent`.
    Binary,
}

/// apimachinery's `quantitySuffixer.interpret`.
fn interpret_suffix(suffix: &[u8]) -> Option<(Base, i32)> {
    let known = match suffix {
        b"" => (Base::Decimal, 0),
        b"n" => (Base::Decimal, -9),
        b"u" => (Base::Decimal, -6),
        b"m" => (Base::Decimal, -3),
        b"k" => (Base::Decimal, 3),
        b"M" => (Base::Decimal, 6),
        b"G" => (Base::Decimal, 9),
        b"T" => (Base::Decimal, 12),
        b"P" => (Base::Decimal, 15),
        b"E" => (Base::Decimal, 18),
        b"Ki" => (Base::Binary, 10),
        b"Mi" => (Base::Binary, 20),
        b"Gi" => (Base::Binary, 30),
        b"Ti" => (Base::Binary, 40),
        b"Pi" => (Base::Binary, 50),
        b"Ei" => (Base::Binary, 60),
        [b'e' | b'E', rest @ ..] if !rest.is_empty() => {
            // `strconv.ParseInt(s[1:], 10, 64)` then `int32(parsed)`: the
            // truncation is apimachinery's, mirrored on purpose.
            let parsed: i64 = std::str::from_utf8(rest).ok()?.parse().ok()?;
            (Base::Decimal, parsed as i32)
        }
        _ => return None,
    };
    Some(known)
}

/// Whether apimachinery's parse would leave its int64 fast path for a number
/// without digits (the only case where that changes the outcome).
fn slow_path(base: Base, exponent: i32) -> bool {
    match base {
        Base::Decimal => exponent < -9,
        // precision = 15 - len("0") - exponent*3/10 - 1 < 0
        Base::Binary => 13 - exponent * 3 / 10 < 0,
    }
}

fn len_i64(s: &[u8]) -> i64 {
    i64::try_from(s.len()).unwrap_or(i64::MAX)
}

/// `ceil(digits * 10^shift)` for the non-negative decimal integer spelled by
/// the concatenated `parts`, saturating at [`SATURATED_NANOS`].
fn ceil_scaled(parts: &[&[u8]], shift: i64) -> i128 {
    let digits = || parts.iter().flat_map(|p| p.iter().copied());
    let len: i64 = parts
        .iter()
        .map(|p| len_i64(p))
        .fold(0, i64::saturating_add);
    // Digits kept in the integer part; the rest are dropped with round-up.
    let keep = len.saturating_add(shift.min(0)).max(0);
    let mut acc: i128 = 0;
    let mut remainder = false;
    for (i, d) in (0_i64..).zip(digits()) {
        let d = i128::from(d - b'0');
        if i < keep {
            acc = acc * 10 + d;
            if acc >= SATURATED_NANOS {
                return SATURATED_NANOS;
            }
        } else if d != 0 {
            remainder = true;
            break;
        }
    }
    if remainder {
        acc += 1;
    }
    if acc != 0 {
        for _ in 0..shift.max(0) {
            acc *= 10;
            if acc >= SATURATED_NANOS {
                return SATURATED_NANOS;
            }
        }
    }
    acc.min(SATURATED_NANOS)
}

/// Decimal digits of `(num ++ denom) * 2^exponent`, most significant first,
/// with leading zeros dropped; the fraction point stays `denom.len()` digits
/// from the right. Allocates: only binary-SI quantities come here.
fn times_power_of_two(num: &[u8], denom: &[u8], exponent: i32) -> Vec<u8> {
    let mut digits: Vec<u8> = num
        .iter()
        .chain(denom)
        .copied()
        .skip_while(|&d| d == b'0')
        .collect();
    let factor: u128 = 1 << exponent.clamp(0, 64);
    let mut carry: u128 = 0;
    for d in digits.iter_mut().rev() {
        let t = u128::from(*d - b'0') * factor + carry;
        *d = b'0' + (t % 10) as u8;
        carry = t / 10;
    }
    let mut head = Vec::new();
    while carry > 0 {
        head.push(b'0' + (carry % 10) as u8);
        carry /= 10;
    }
    head.reverse();
    head.extend_from_slice(&digits);
    head
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(input, Value())` pairs, mostly lifted from apimachinery's
    /// `TestQuantityParse` table with the value its `Value()` returns.
    const VALID: &[(&str, i64)] = &[
        ("0", 0),
        ("0n", 0),
        ("0u", 0),
        ("0m", 0),
        ("0Ki", 0),
        ("0k", 0),
        ("0Mi", 0),
        ("0M", 0),
        ("0Gi", 0),
        ("0G", 0),
        ("0Ti", 0),
        ("0T", 0),
        ("1", 1),
        ("2", 2),
        ("007", 7),
        // binary SI
        ("1Ki", 1024),
        ("8Ki", 8 * 1024),
        ("7Mi", 7 << 20),
        ("6Gi", 6 << 30),
        ("5Ti", 5 << 40),
        ("4Pi", 4 << 50),
        ("3Ei", 3 << 60),
        ("10Ti", 10 << 40),
        ("100Ti", 100 << 40),
        // decimal SI
        ("5n", 1),
        ("4u", 1),
        ("3m", 1),
        ("9", 9),
        ("8k", 8_000),
        ("50k", 50_000),
        ("7M", 7_000_000),
        ("6G", 6_000_000_000),
        ("5T", 5_000_000_000_000),
        ("40T", 40_000_000_000_000),
        ("300T", 300_000_000_000_000),
        ("2P", 2_000_000_000_000_000),
        ("1E", 1_000_000_000_000_000_000),
        // decimal exponents
        ("1E-3", 1),
        ("1e3", 1_000),
        ("1E6", 1_000_000),
        ("1e9", 1_000_000_000),
        ("1E12", 1_000_000_000_000),
        ("1e15", 1_000_000_000_000_000),
        ("1E18", 1_000_000_000_000_000_000),
        ("1e14", 100_000_000_000_000),
        ("1e13", 10_000_000_000_000),
        ("1e1", 10),
        ("1e+3", 1_000),
        ("1e-0", 1),
        ("1e0003", 1_000),
        ("100.035k", 100_035),
        // things that look like floating point
        ("0.001", 1),
        ("0.0005k", 1),
        ("0.005", 1),
        ("0.05", 1),
        ("0.5", 1),
        ("0.00050k", 1),
        ("0.00500", 1),
        ("0.05000", 1),
        ("0.50000", 1),
        ("0.5e0", 1),
        ("0.5e-1", 1),
        ("0.5e-2", 1),
        ("10.035M", 10_035_000),
        ("1.2e3", 1_200),
        ("1.3E+6", 1_300_000),
        ("1.40e9", 1_400_000_000),
        ("1.53E12", 1_530_000_000_000),
        ("1.6e15", 1_600_000_000_000_000),
        ("1.7E18", 1_700_000_000_000_000_000),
        ("9.01", 10),
        ("8.1k", 8_100),
        ("7.123456M", 7_123_456),
        ("6.987654321G", 6_987_654_321),
        ("5.444T", 5_444_000_000_000),
        ("40.1T", 40_100_000_000_000),
        ("300.2T", 300_200_000_000_000),
        ("2.5P", 2_500_000_000_000_000),
        ("1.01E", 1_010_000_000_000_000_000),
        ("1.5", 2),
        ("500m", 1),
        ("1500m", 2),
        ("2000m", 2),
        ("0.0001", 1),
        ("1n", 1),
        // things that saturate/round
        ("3.001n", 1),
        ("1.1E-9", 1),
        ("0.0000000001", 1),
        ("0.0000000005", 1),
        ("0.00000000050", 1),
        ("0.5e-9", 1),
        ("0.9n", 1),
        ("0.00000012345", 1),
        ("1e-1000", 1),
        ("0e-1000", 0),
        // binary SI is capped at 2^63-1
        ("9Ei", i64::MAX),
        ("8Ei", i64::MAX),
        ("9223372036854775807Ki", i64::MAX),
        // decimal is not capped by apimachinery; Value() overflows there,
        // we saturate
        ("12E", i64::MAX),
        ("9223372036854775807", i64::MAX),
        ("9223372036854775808", i64::MAX),
        ("18446744073709551616", i64::MAX),
        ("1e100", i64::MAX),
        ("1e2147483647", i64::MAX),
        (
            "99999999999999999999999999999999999999999999999999",
            i64::MAX,
        ),
        // fractional binary
        ("100.035Ki", 102_436), // 102435.84
        ("0.5Mi", 524_288),
        ("0.05Gi", 53_687_092),      // 53687091.2
        ("0.025Ti", 27_487_790_695), // 27487790694.4
        ("1.0000000000000000000000000001Ki", 1_025),
        // things written by trolls
        ("0.000000000001Ki", 1),
        (".001", 1),
        (".0001k", 1),
        ("1.", 1),
        ("1.G", 1_000_000_000),
        ("5.", 5),
        (".5", 1),
        // apimachinery's scanner accepts digit-less numbers as zero
        (".", 0),
        ("-.", 0),
        ("+", 0),
        ("-", 0),
        ("-0", 0),
        ("+000", 0),
        ("k", 0),
        ("Ki", 0),
        ("Ti", 0),
        ("e3", 0),
        (".e-9", 0),
        // the exponent is truncated to int32 as apimachinery does
        ("1e4294967296", 1),
        ("1e4294967299", 1_000),
        // explicit signs; Value() rounds away from zero
        ("+1", 1),
        ("+1.5", 2),
        ("-1", -1),
        ("-1.5", -2),
        ("-500m", -1),
        ("-9.01", -10),
        ("-1Ki", -1024),
        ("-9Ei", -i64::MAX),
        ("-12E", i64::MIN),
    ];

    /// Strings apimachinery rejects, with the error it returns.
    const INVALID: &[(&str, QuantityErrorKind)] = &[
        ("", QuantityErrorKind::Format),
        // from apimachinery's TestQuantityParse
        ("1.1.M", QuantityErrorKind::Format),
        ("1+1.0M", QuantityErrorKind::Format),
        ("0.1mi", QuantityErrorKind::Suffix),
        ("0.1am", QuantityErrorKind::Format),
        ("aoeu", QuantityErrorKind::Format),
        (".5i", QuantityErrorKind::Suffix),
        ("1i", QuantityErrorKind::Suffix),
        ("-3.01i", QuantityErrorKind::Suffix),
        ("-3.01e-", QuantityErrorKind::Suffix),
        (" 1", QuantityErrorKind::Format),
        ("1 ", QuantityErrorKind::Format),
        // more of the same
        ("1K", QuantityErrorKind::Suffix),
        ("1e", QuantityErrorKind::Suffix),
        ("1e+", QuantityErrorKind::Suffix),
        ("1ee3", QuantityErrorKind::Suffix),
        ("1Mi3", QuantityErrorKind::Suffix),
        ("1e3.5", QuantityErrorKind::Format),
        ("1e3e3", QuantityErrorKind::Format),
        ("1e9223372036854775808", QuantityErrorKind::Suffix),
        ("++1", QuantityErrorKind::Suffix),
        ("--1", QuantityErrorKind::Suffix),
        ("1-", QuantityErrorKind::Suffix),
        ("..", QuantityErrorKind::Format),
        ("1..", QuantityErrorKind::Format),
        ("0x10", QuantityErrorKind::Format),
        ("1,5", QuantityErrorKind::Format),
        ("1_000", QuantityErrorKind::Format),
        ("NaN", QuantityErrorKind::Format),
        ("Inf", QuantityErrorKind::Format),
        ("１", QuantityErrorKind::Format),
        ("1\n", QuantityErrorKind::Format),
        ("\u{0}", QuantityErrorKind::Format),
        // digit-less numbers on apimachinery's slow path
        (".e-10", QuantityErrorKind::Numeric),
        ("e-10", QuantityErrorKind::Numeric),
        ("Pi", QuantityErrorKind::Numeric),
        ("Ei", QuantityErrorKind::Numeric),
        ("-.Ei", QuantityErrorKind::Numeric),
    ];

    #[test]
    fn values_match_apimachinery_value() {
        for &(input, want) in VALID {
            match quantity_value(input) {
                Ok(got) => assert_eq!(got, want, "Value({input:?})"),
                Err(e) => panic!("{input:?} should parse: {e}"),
            }
        }
    }

    #[test]
    fn rejects_what_apimachinery_rejects() {
        for &(input, kind) in INVALID {
            match parse_quantity(input) {
                Ok(q) => panic!("{input:?} parsed as {q:?}"),
                Err(e) => {
                    assert_eq!(e.kind(), kind, "{input:?}: {e}");
                    assert_eq!(e.value(), input);
                }
            }
        }
    }

    #[test]
    fn explicit_plus_sign_changes_nothing() {
        for &(input, want) in VALID {
            if input.starts_with(['+', '-']) {
                continue;
            }
            let plus = format!("+{input}");
            assert_eq!(quantity_value(&plus).ok(), Some(want), "{plus:?}");
        }
    }

    #[test]
    fn minus_sign_negates_and_rounds_away_from_zero() {
        for &(input, want) in VALID {
            // Saturated values are not symmetric (i64::MIN has no positive
            // twin), nor is the binary cap; skip both.
            if input.starts_with(['+', '-']) || want == i64::MAX {
                continue;
            }
            let minus = format!("-{input}");
            assert_eq!(quantity_value(&minus).ok(), Some(-want), "{minus:?}");
        }
    }

    #[test]
    fn error_display_names_the_value_and_the_reason() {
        let err = parse_quantity("two").err();
        assert_eq!(
            err.map(|e| e.to_string()),
            Some(
                "invalid quantity \"two\": quantities must match the regular expression \
                 '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
                    .to_string()
            )
        );
        let long = "x".repeat(1000);
        let shown = parse_quantity(&long).err().map(|e| e.to_string());
        assert!(shown
            .as_deref()
            .is_some_and(|s| s.len() < 200 && s.contains('…')));
    }

    #[test]
    fn sums_are_exact_before_rounding() {
        let half = parse_quantity("500m").expect("valid");
        assert_eq!(half.value(), 1);
        assert_eq!(half.saturating_add(half).value(), 1);
        assert_eq!(half.saturating_add(half).saturating_add(half).value(), 2);
    }

    #[test]
    fn sums_saturate_instead_of_overflowing() {
        let huge = parse_quantity("1e100").expect("valid");
        let mut total = Quantity::ZERO;
        for _ in 0..1000 {
            total = total.saturating_add(huge);
        }
        assert_eq!(total.value(), i64::MAX);
        assert_eq!(total, huge);
    }

    #[test]
    fn never_panics_on_junk() {
        let alphabet = [
            "",
            "0",
            "1",
            "9",
            ".",
            "+",
            "-",
            "e",
            "E",
            "i",
            "n",
            "u",
            "m",
            "k",
            "K",
            "M",
            "G",
            "T",
            "P",
            "Ki",
            "Ei",
            " ",
            "é",
            "\u{0}",
            "99999999999999999999",
            "e-2147483648",
            "e2147483648",
            "e-9223372036854775808",
        ];
        let mut count = 0;
        for a in alphabet {
            for b in alphabet {
                for c in alphabet {
                    let s = format!("{a}{b}{c}");
                    if let Ok(q) = parse_quantity(&s) {
                        let _ = q.value();
                    }
                    count += 1;
                }
            }
        }
        assert_eq!(count, alphabet.len().pow(3));
        let long_digits = "7".repeat(100_000);
        assert_eq!(quantity_value(&long_digits).ok(), Some(i64::MAX));
        let long_fraction = format!("0.{}1", "0".repeat(100_000));
        assert_eq!(quantity_value(&long_fraction).ok(), Some(1));
        let long_binary = format!("0.{}1Ei", "0".repeat(10_000));
        assert_eq!(quantity_value(&long_binary).ok(), Some(1));
    }
}

#[cfg(test)]
mod proptests;
