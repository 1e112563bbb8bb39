//! A system under test as a subprocess, shared by the end-to-end benches
//! (`e2e_latency`, `perobj`; each includes this file with `#[path]`): its
//! start with its output in files, and what a bench reads about it from
//! outside: peak and current memory and CPU time from `/proc`, its
//! Prometheus `/metrics` text, a free local port for it to serve them on,
//! polling until something shows, and latency percentiles. It never talks to the subprocess otherwise.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Starts `cmd`, the system `name`, with `RUST_LOG=log` and `NO_COLOR`, no
/// standard input, its standard output and error written to the files
/// `stdout` and `stderr`; says its pid (for `perf record -p`).
pub fn start(mut cmd: Command, name: &str, log: &str, stdout: &Path, stderr: &Path) -> Child {
    let child = cmd
        .env("RUST_LOG", log)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(stdout).expect("subprocess output file"))
        .stderr(std::fs::File::create(stderr).expect("subprocess log file"))
        .spawn()
        .unwrap_or_else(|e| panic!("starting {name}: {e}"));
    eprintln!("bench: {name} started, pid {}", child.id());
    child
}

/// Clock ticks per second in `/proc/PID/stat` (`USER_HZ`, 100 on every
/// Linux architecture's user ABI).
const USER_HZ: f64 = 100.0;

/// A `/proc/PID/status` field in bytes (`VmHWM`, `VmRSS`).
pub fn status_bytes(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kib| kib.parse::<u64>().ok())
        .map(|kib| kib * 1024)
}

/// User + system CPU time the process `pid` used so far.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces: fields count from after its ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13
    // after the pid and (comm) — 11 and 12 zero-based.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_secs_f64((utime + stime) / USER_HZ))
}

/// The Prometheus text at `http://127.0.0.1:{port}/metrics`, if it answers.
pub async fn scrape(port: u16) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    conn.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await
        .ok()?;
    let mut body = String::new();
    conn.read_to_string(&mut body).await.ok()?;
    Some(body)
}

/// Sum of the samples of metric `name` whose labels contain every one of
/// `labels` (`key="value"` strings).
pub fn metric_sum(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
            (metric == name && labels.iter().all(|want| rest.contains(want)))
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

/// Calls `look` every `every` until it finds something or `timeout` has
/// passed (then None).
pub async fn poll<T>(
    every: Duration,
    timeout: Duration,
    mut look: impl AsyncFnMut() -> Option<T>,
) -> Option<T> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(found) = look().await {
            return Some(found);
        }
        if std::time::Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(every).await;
    }
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free local port")
}

/// Latency percentiles over a sample.
#[derive(Clone, Copy, Debug, Default)]
pub struct Percentiles {
    /// Median.
    pub p50: Duration,
    /// 90th percentile.
    pub p90: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Largest.
    pub max: Duration,
}

/// Nearest-rank percentiles of `sample` (all zero when empty).
pub fn percentiles(sample: &[Duration]) -> Percentiles {
    let mut s = sample.to_vec();
    s.sort();
    let rank = |p: f64| -> Duration {
        if s.is_empty() {
            return Duration::ZERO;
        }
        let i = ((p / 100.0) * s.len() as f64).ceil() as usize;
        s[i.clamp(1, s.len()) - 1]
    };
    Percentiles {
        p50: rank(50.0),
        p90: rank(90.0),
        p99: rank(99.0),
        max: s.last().copied().unwrap_or_default(),
    }
}
