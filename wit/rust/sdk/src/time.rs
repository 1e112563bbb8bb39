//! The host's clock as Kubernetes writes it: `env.now-ms` (milliseconds since
//! the Unix epoch, UTC) formatted as an RFC 3339 timestamp with whole seconds
//! (`2026-12-01T03:44:00Z`), the form `metav1.Time` serialises to. Pure
//! arithmetic: no clock is read here (a guest has none), nothing panics.

/// `ms` milliseconds after the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ`, the
/// sub-second part dropped (as `metav1.Time` does).
pub fn rfc3339(ms: u64) -> String {
    let secs = ms / 1000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The proleptic Gregorian date `days` days after 1970-01-01 (Howard
/// Hinnant's `civil_from_days`, unsigned: the epoch is its lower bound).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // Shift the epoch to 0000-03-01 so leap days end each 400-year era.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::rfc3339;

    #[test]
    fn formats_utc_seconds_like_metav1_time() {
        for (ms, want) in [
            (0, "1970-01-01T00:00:00Z"),
            (999, "1970-01-01T00:00:00Z"),
            (951_782_400_000, "2000-02-29T00:00:00Z"),
            (951_868_799_000, "2000-02-29T23:59:59Z"),
            (1_709_164_800_000, "2024-02-29T00:00:00Z"),
            (1_796_096_640_123, "2026-12-01T03:44:00Z"),
            (4_102_444_800_000, "2100-01-01T00:00:00Z"),
            (253_402_300_799_000, "9999-12-31T23:59:59Z"),
        ] {
            assert_eq!(rfc3339(ms), want, "{ms}");
        }
    }

    #[test]
    fn never_panics_at_the_extremes() {
        assert!(rfc3339(u64::MAX).ends_with('Z'));
    }
}
