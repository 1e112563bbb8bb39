//! Range checks for the binary's numeric flags, as clap value parsers.
//!
//! Owns the bounds of every number a user can type (each one named here) so
//! that a bad value is a clap usage error (exit 2) naming the flag and the
//! range, never a panic later (`Duration::from_secs_f64` on a negative,
//! NaN or huge value) or a silent wrap (`MiB << 20`), and the watch-health
//! flag group, which converts into the informer's `WatchHealthConfig`.
//! Every other value the subcommand's own module converts. The demo's
//! bounds are the demo's (`dev/demo.rs`).

use std::time::Duration;

use wasmctrl::informer::health::{self, WatchHealthConfig};

/// Longest duration any seconds flag accepts: one year.
pub const MAX_SECONDS: u64 = 365 * 24 * 3600;
/// Largest guest memory cap: a wasm32 guest addresses at most 4 GiB.
pub const MAX_GUEST_MEMORY_MIB: u64 = 4096;
/// Longest per-call guest deadline: one hour.
pub const MAX_GUEST_DEADLINE_MS: u64 = 3_600_000;
/// Most workers per guest.
pub const MAX_WORKERS: u64 = 1024;
/// The most threads `--runtime-threads` may ask for.
pub const MAX_RUNTIME_THREADS: u64 = 256;
/// Client QPS bounds (a period of 1/qps seconds must be representable and
/// useful).
pub const QPS_RANGE: (f64, f64) = (0.01, 1_000_000.0);

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
pub fn positive(s: &str, max: f64, unit: &str) -> Result<f64, String> {
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

/// `--shadow GUEST=FILE`: a guest name and a file, both non-empty.
pub fn shadow(s: &str) -> Result<(String, std::path::PathBuf), String> {
    match s.split_once('=') {
        Some((guest, file)) if !guest.trim().is_empty() && !file.is_empty() => {
            Ok((guest.trim().to_string(), file.into()))
        }
        _ => Err(format!("{s:?} is not GUEST=FILE")),
    }
}

/// A watch-health flag's value: a finite number of seconds from 0 (a
/// meaningful value there) to a year.
fn flag_seconds(s: &str) -> Result<f64, String> {
    float_in(s, 0.0, MAX_SECONDS as f64, "seconds")
}

/// The `run` command's watch-health flags.
#[derive(Debug, Clone, clap::Args)]
pub struct WatchHealthArgs {
    /// Report not ready (`/readyz`) after a watch has failed for this many
    /// seconds (errors after the caches synced are retried with backoff).
    #[arg(long, default_value_t = health::DEFAULT_UNHEALTHY_AFTER.as_secs_f64(), value_parser = flag_seconds)]
    pub unhealthy_watch_seconds: f64,
    /// Exit non-zero after a watch has failed for this many seconds.
    #[arg(long, default_value_t = health::DEFAULT_DEADLINE.as_secs_f64(), value_parser = flag_seconds)]
    pub watch_failure_deadline_seconds: f64,
    /// List in pages when a streaming list sends nothing for this many
    /// seconds before marking the end of its initial events (a server that
    /// accepted it and ignored it).
    #[arg(long, default_value_t = health::DEFAULT_STREAMING_LIST_WAIT.as_secs_f64(), value_parser = flag_seconds)]
    pub streaming_list_wait_seconds: f64,
}

impl WatchHealthArgs {
    /// The configuration these flags ask for; negative or non-finite
    /// values are refused, naming the flag.
    pub fn config(&self) -> Result<WatchHealthConfig, String> {
        let secs = |flag: &str, v: f64| {
            Duration::try_from_secs_f64(v)
                .map_err(|_| format!("--{flag} must be a non-negative number of seconds, not {v}"))
        };
        Ok(WatchHealthConfig {
            unhealthy_after: secs("unhealthy-watch-seconds", self.unhealthy_watch_seconds)?,
            deadline: secs(
                "watch-failure-deadline-seconds",
                self.watch_failure_deadline_seconds,
            )?,
            streaming_list_wait: secs(
                "streaming-list-wait-seconds",
                self.streaming_list_wait_seconds,
            )?,
        })
    }
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

    #[test]
    fn flags_refuse_negative_seconds_naming_the_flag() {
        let args = WatchHealthArgs {
            unhealthy_watch_seconds: 5.0,
            watch_failure_deadline_seconds: -1.0,
            streaming_list_wait_seconds: 30.0,
        };
        let err = args.config().unwrap_err();
        assert!(err.contains("--watch-failure-deadline-seconds"), "{err}");
        let args = WatchHealthArgs {
            unhealthy_watch_seconds: 5.0,
            watch_failure_deadline_seconds: 60.0,
            streaming_list_wait_seconds: f64::NAN,
        };
        let err = args.config().unwrap_err();
        assert!(err.contains("--streaming-list-wait-seconds"), "{err}");
        let ok = WatchHealthArgs {
            unhealthy_watch_seconds: 5.0,
            watch_failure_deadline_seconds: 60.0,
            streaming_list_wait_seconds: 2.5,
        };
        assert_eq!(
            ok.config().unwrap(),
            WatchHealthConfig::default()
                .unhealthy_after(Duration::from_secs(5))
                .deadline(Duration::from_secs(60))
                .streaming_list_wait(Duration::from_millis(2500))
        );
    }
}
