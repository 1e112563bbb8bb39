//! Range checks for the binary's numeric flags, as clap value parsers.
//!
//! Owns the bounds of every number a user can type (each one named here) so
//! that a bad value is a clap usage error (exit 2) naming the flag and the
//! range, never a panic later (`Duration::from_secs_f64` on a negative,
//! NaN or huge value) or a silent wrap (`MiB << 20`). It never builds
//! configuration: `main.rs` converts the parsed values.

/// Longest duration any seconds flag accepts: one year.
pub const MAX_SECONDS: u64 = 365 * 24 * 3600;
/// Largest guest memory cap: a wasm32 guest addresses at most 4 GiB.
pub const MAX_GUEST_MEMORY_MIB: u64 = 4096;
/// Longest per-call guest deadline: one hour.
pub const MAX_GUEST_DEADLINE_MS: u64 = 3_600_000;
/// Most workers per guest.
pub const MAX_WORKERS: u64 = 1024;
/// Client QPS bounds (a period of 1/qps seconds must be representable and
/// useful).
pub const QPS_RANGE: (f64, f64) = (0.01, 1_000_000.0);
/// Demo bounds: nodes, pods, simulator actions per second.
#[cfg(feature = "dev-server")]
pub const MAX_DEMO_NODES: u64 = 10_000;
/// Most pods the demo keeps alive.
#[cfg(feature = "dev-server")]
pub const MAX_DEMO_PODS: u64 = 1_000_000;
/// Fastest demo simulator rate, actions per second.
#[cfg(feature = "dev-server")]
pub const MAX_DEMO_RATE: f64 = 100_000.0;

/// A finite number in `[min, max]`.
fn float_in(s: &str, min: f64, max: f64, what: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number"))?;
    if !v.is_finite() || v < min || v > max {
        return Err(format!("{s} is not in {min}..={max} ({what})"));
    }
    Ok(v)
}

/// A finite number more than 0 and at most `max`.
fn positive(s: &str, max: f64, unit: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number"))?;
    if v.is_finite() && v > 0.0 && v <= max {
        Ok(v)
    } else {
        Err(format!("{s} is not more than 0 and at most {max} {unit}"))
    }
}

/// Seconds for leader-election timings: more than 0, at most a year.
pub fn positive_seconds(s: &str) -> Result<f64, String> {
    positive(s, MAX_SECONDS as f64, "seconds")
}

/// `--kube-api-qps`.
pub fn qps(s: &str) -> Result<f64, String> {
    float_in(s, QPS_RANGE.0, QPS_RANGE.1, "requests per second")
}

/// `demo --rate`.
#[cfg(feature = "dev-server")]
pub fn demo_rate(s: &str) -> Result<f64, String> {
    positive(s, MAX_DEMO_RATE, "actions per second")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_negative_zero_and_huge_seconds_are_refused() {
        for bad in ["-1", "nan", "NaN", "inf", "1e300", "0", "x", ""] {
            assert!(positive_seconds(bad).is_err(), "{bad}");
        }
        assert_eq!(positive_seconds("2.5"), Ok(2.5));
        assert_eq!(
            positive_seconds("-1").unwrap_err(),
            "-1 is not more than 0 and at most 31536000 seconds"
        );
        assert_eq!(positive_seconds("x").unwrap_err(), "\"x\" is not a number");
    }

    #[test]
    fn qps_must_give_a_usable_period() {
        for bad in ["1e-300", "0", "-5", "nan", "1e9"] {
            assert!(qps(bad).is_err(), "{bad}");
        }
        assert_eq!(qps("20"), Ok(20.0));
    }
}
