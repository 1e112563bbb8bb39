//! How the API server reads and prints the numbers of a custom object: its
//! JSON decoding (`k8s.io/apimachinery/pkg/util/json`) keeps a number as an
//! int64 when its text is one, else as a float64, and Go prints a float64
//! without a fraction when it has none (`strconv.FormatFloat(f, 'f', -1,
//! 64)` below 1e21). So a whole float such as `2.0` is stored as `2`: a
//! client writing `2.0` never reads it back. Owns [`same_number`], the
//! equality a client compares what it wrote with what it reads by, and
//! [`whole_floats_as_integers`], what the server stores.

use serde_json::{Number, Value};

/// Whether `a` and `b` are the same number once the server has read and
/// printed them: equal as written, or equal in value when either is a
/// float (`2.0` and `2`).
pub fn same_number(a: &Number, b: &Number) -> bool {
    if a == b {
        return true;
    }
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => (a.is_f64() || b.is_f64()) && x == y,
        _ => false,
    }
}

/// Rewrites every whole float in `v` that an int64 holds (`2.0`, `-3e2`)
/// as that integer, as the server's decode and print leave it; a fraction
/// or a magnitude beyond int64 stays a float. Returns whether anything
/// changed.
pub fn whole_floats_as_integers(v: &mut Value) -> bool {
    match v {
        Value::Number(n) => {
            let Some(f) = n.as_f64().filter(|_| n.is_f64()) else {
                return false;
            };
            // Whole and within int64: 2^63 is the first float beyond it.
            const BEYOND: f64 = 9_223_372_036_854_775_808.0;
            if f.fract() != 0.0 || !(-BEYOND..BEYOND).contains(&f) {
                return false;
            }
            #[allow(clippy::cast_possible_truncation)]
            let whole = f as i64;
            *v = Value::Number(whole.into());
            true
        }
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |c, i| whole_floats_as_integers(i) | c),
        Value::Object(map) => map
            .values_mut()
            .fold(false, |c, i| whole_floats_as_integers(i) | c),
        _ => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn n(v: Value) -> Number {
        match v {
            Value::Number(n) => n,
            _ => unreachable!("a number"),
        }
    }

    #[test]
    fn a_whole_float_is_the_integer_it_prints_as() {
        assert!(same_number(&n(json!(2.0)), &n(json!(2))));
        assert!(same_number(&n(json!(2)), &n(json!(2.0))));
        assert!(same_number(&n(json!(0.5)), &n(json!(0.5))));
        assert!(same_number(&n(json!(-3)), &n(json!(-3.0))));
        assert!(!same_number(&n(json!(2.5)), &n(json!(2))));
        assert!(!same_number(&n(json!(2)), &n(json!(3))));
        // Integers beyond a float's precision compare exactly.
        assert!(!same_number(
            &n(json!(9007199254740993_u64)),
            &n(json!(9007199254740992_u64))
        ));
    }

    #[test]
    fn whole_floats_are_stored_as_integers_and_the_rest_as_written() {
        let mut v = json!({"score": 2.0, "ratio": 0.5, "big": 1e3, "neg": -3.0,
            "list": [1.0, 1.5, {"deep": 4.0}], "int": 7, "huge": 1e30, "text": "2.0"});
        assert!(whole_floats_as_integers(&mut v));
        assert_eq!(
            v.to_string(),
            json!({"score": 2, "ratio": 0.5, "big": 1000, "neg": -3,
                "list": [1, 1.5, {"deep": 4}], "int": 7, "huge": 1e30, "text": "2.0"})
            .to_string()
        );
        assert!(!whole_floats_as_integers(&mut v));
    }
}
