//! Just enough of apimachinery's `resource.Quantity` to judge and to print
//! an extended resource's amount as the real server does: whether it is a
//! whole number, whether two amounts are equal, and the Go `%#v` form
//! `field.Invalid` prints it in (a `Quantity` value has no `String()` in
//! its method set, so the struct itself is printed). Only decimal amounts
//! (`2`, `1.5`, `500m`, `3k`) are modelled; binary suffixes and exponents
//! are read for equality but printed plainly. It never validates names.

/// A parsed decimal quantity: `value × 10^scale`, as Go's `int64Amount`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Quantity {
    value: i64,
    scale: i32,
    /// The string Go caches when the input was already canonical.
    cached: String,
    /// The text as written, for amounts this module does not model.
    text: String,
    decimal: bool,
}

impl Quantity {
    /// Parses `s` as Go's `ParseQuantity` would (decimal SI forms); None
    /// when it is not a quantity this module can reason about.
    pub(crate) fn parse(s: &str) -> Option<Self> {
        let text = s.trim();
        let digits_end = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
            .unwrap_or(text.len());
        let (number, suffix) = text.split_at(digits_end);
        let (negative, number) = match number.strip_prefix('-') {
            Some(n) => (true, n),
            None => (false, number.strip_prefix('+').unwrap_or(number)),
        };
        let (num, denom) = number.split_once('.').unwrap_or((number, ""));
        if num.is_empty() && denom.is_empty() {
            return None;
        }
        if !(num.chars().chain(denom.chars())).all(|c| c.is_ascii_digit()) {
            return None;
        }
        let exponent = match suffix {
            "n" => -9,
            "u" => -6,
            "m" => -3,
            "" => 0,
            "k" => 3,
            "M" => 6,
            "G" => 9,
            "T" => 12,
            "P" => 15,
            "E" => 18,
            _ => return Self::opaque(text),
        };
        let denom_len = i32::try_from(denom.len()).ok()?;
        let scale = exponent - denom_len;
        let shifted = format!("{num}{denom}");
        let mut value: i64 = shifted.parse().ok()?;
        if negative {
            value = -value;
        }
        // quantity.go ParseQuantity: "if the number is in canonical form, reuse the string"
        let canonical = scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0');
        Some(Quantity {
            value,
            scale,
            cached: if canonical {
                text.to_string()
            } else {
                String::new()
            },
            text: text.to_string(),
            decimal: true,
        })
    }

    fn opaque(text: &str) -> Option<Self> {
        Some(Quantity {
            value: 0,
            scale: 0,
            cached: String::new(),
            text: text.to_string(),
            decimal: false,
        })
    }

    /// `MilliValue() % 1000 == 0`: a whole number.
    pub(crate) fn is_integer(&self) -> bool {
        if !self.decimal || self.scale >= 0 {
            return true;
        }
        let div = 10_i64.checked_pow(self.scale.unsigned_abs());
        div.is_none_or(|d| self.value % d == 0)
    }

    /// `Cmp(other) == 0`, for decimal amounts; other forms compare as written.
    pub(crate) fn same_amount(&self, other: &Quantity) -> bool {
        if !(self.decimal && other.decimal) {
            return self.text == other.text;
        }
        let (a, b) = (i128::from(self.value), i128::from(other.value));
        let lo = self.scale.min(other.scale);
        let up = |v: i128, s: i32| {
            10_i128
                .checked_pow((s - lo).unsigned_abs())
                .and_then(|f| v.checked_mul(f))
        };
        up(a, self.scale) == up(b, other.scale)
    }

    /// The canonical `String()` of the amount (`2`, `500m`).
    pub(crate) fn canonical(&self) -> String {
        if !self.decimal {
            return self.text.clone();
        }
        // CanonicalizeBytes: the largest SI suffix (a multiple of 3) that keeps the value whole
        let (mut value, mut scale) = (self.value, self.scale);
        while value != 0 && value % 10 == 0 && scale < 18 {
            value /= 10;
            scale += 1;
        }
        let target = scale.div_euclid(3) * 3;
        let target = target.clamp(-9, 18);
        let mut v = value;
        for _ in 0..(scale - target) {
            v = v.saturating_mul(10);
        }
        let suffix = match target {
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
        format!("{v}{suffix}")
    }

    /// How `field.Invalid(path, quantity, ...)` prints it: Go's `%#v` of the struct.
    pub(crate) fn go_struct(&self) -> String {
        if !self.decimal {
            return format!("{:?}", self.text);
        }
        format!(
            "resource.Quantity{{i:resource.int64Amount{{value:{}, scale:{}}}, d:resource.infDecAmount{{Dec:(*inf.Dec)(nil)}}, s:{:?}, Format:\"DecimalSI\"}}",
            self.value, self.scale, self.cached
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn amounts_parse_compare_and_print_like_go() {
        let half = Quantity::parse("500m").unwrap();
        assert!(!half.is_integer());
        assert_eq!(
            half.go_struct(),
            r#"resource.Quantity{i:resource.int64Amount{value:500, scale:-3}, d:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, s:"500m", Format:"DecimalSI"}"#
        );
        assert!(Quantity::parse("2000m").unwrap().is_integer());
        assert!(Quantity::parse("2")
            .unwrap()
            .same_amount(&Quantity::parse("2000m").unwrap()));
        assert!(!Quantity::parse("1")
            .unwrap()
            .same_amount(&Quantity::parse("2").unwrap()));
        assert!(Quantity::parse("1.5")
            .unwrap()
            .go_struct()
            .contains("s:\"\""));
        assert_eq!(Quantity::parse("2000m").unwrap().canonical(), "2");
        assert_eq!(Quantity::parse("500m").unwrap().canonical(), "500m");
        assert!(Quantity::parse("lots").is_none());
    }
}

#[cfg(test)]
mod proptests;
