//! CPU caps for the replicas: one cgroup per replica, its CPU quota a
//! fraction of one core (cgroup v1 `cpu.cfs_quota_us` over the default
//! `cpu.cfs_period_us` of 100,000 µs; cgroup v2 `cpu.max`), and the
//! command that starts a process inside it (a shell writes its own pid into
//! the cgroup, then execs the program, so the process is capped from its
//! first instruction). A cap that cannot be set is an error that names the
//! path: the bench never runs a replica uncapped by accident.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The CPU period both versions use (the kernel's default), µs.
const PERIOD_US: u64 = 100_000;
/// cgroup v1's cpu controller, as this machine mounts it.
const V1_ROOT: &str = "/sys/fs/cgroup/cpu";
/// cgroup v2's unified hierarchy.
const V2_ROOT: &str = "/sys/fs/cgroup";

/// Why a cap could not be set.
#[derive(Debug, thiserror::Error)]
pub enum CapError {
    /// Neither a v1 cpu controller nor a v2 hierarchy with `cpu` is mounted.
    #[error("no CPU cgroup: neither {V1_ROOT}/cpu.cfs_quota_us nor {V2_ROOT}/cgroup.controllers with `cpu` (the bench caps each replica; it will not run uncapped)")]
    NoController,
    /// A cgroup file could not be written (not root, read-only mount).
    #[error("writing {path}: {source} (the bench caps each replica and must run as root with a writable CPU cgroup)")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The cap asked for is not a positive fraction of the machine.
    #[error("CPU cap {0} cores: must be above 0")]
    BadCap(f64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// One capped cgroup; removed when dropped (once its processes are gone).
#[derive(Debug)]
pub struct CpuCap {
    dir: PathBuf,
    version: Version,
}

fn write(path: &Path, text: &str) -> Result<(), CapError> {
    std::fs::write(path, text).map_err(|source| CapError::Write {
        path: path.to_path_buf(),
        source,
    })
}

impl CpuCap {
    /// Creates (or reuses) cgroup `name` capped at `cores`.
    pub fn create(name: &str, cores: f64) -> Result<CpuCap, CapError> {
        if cores.is_nan() || cores <= 0.0 {
            return Err(CapError::BadCap(cores));
        }
        let quota = (cores * PERIOD_US as f64).round() as u64;
        let v1 = Path::new(V1_ROOT);
        if v1.join("cpu.cfs_quota_us").exists() {
            let dir = v1.join(name);
            std::fs::create_dir_all(&dir).map_err(|source| CapError::Write {
                path: dir.clone(),
                source,
            })?;
            write(&dir.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
            write(&dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
            return Ok(CpuCap {
                dir,
                version: Version::V1,
            });
        }
        let v2 = Path::new(V2_ROOT);
        let controllers =
            std::fs::read_to_string(v2.join("cgroup.controllers")).unwrap_or_default();
        if controllers.split_whitespace().any(|c| c == "cpu") {
            // The children of the root may use `cpu` only once the root
            // hands it down.
            write(&v2.join("cgroup.subtree_control"), "+cpu")?;
            let dir = v2.join(name);
            std::fs::create_dir_all(&dir).map_err(|source| CapError::Write {
                path: dir.clone(),
                source,
            })?;
            write(&dir.join("cpu.max"), &format!("{quota} {PERIOD_US}"))?;
            return Ok(CpuCap {
                dir,
                version: Version::V2,
            });
        }
        Err(CapError::NoController)
    }

    /// `program args…` started inside this cgroup: `sh` moves itself in,
    /// then execs the program (same pid, environment and files).
    pub fn command(&self, program: &Path) -> Command {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(r#"echo $$ > "$0" && exec "$@""#)
            .arg(self.dir.join("cgroup.procs"))
            .arg(program);
        cmd
    }

    /// Whether process `pid` is in this cgroup (from `/proc/PID/cgroup`).
    pub fn holds(&self, pid: u32) -> bool {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
            return false;
        };
        let name = self
            .dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        text.lines().any(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
            let controller_ok = match self.version {
                Version::V1 => controllers.is_some_and(|c| c.split(',').any(|c| c == "cpu")),
                Version::V2 => controllers == Some(""),
            };
            controller_ok && path.is_some_and(|p| p.trim_end() == format!("/{name}"))
        })
    }

    /// How often the cgroup was throttled, and for how long in all, so far.
    pub fn throttled(&self) -> (u64, Duration) {
        let text = std::fs::read_to_string(self.dir.join("cpu.stat")).unwrap_or_default();
        let field = |k: &str| {
            text.lines()
                .find_map(|l| {
                    l.strip_prefix(k)?
                        .strip_prefix(' ')?
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
                .unwrap_or(0)
        };
        match self.version {
            Version::V1 => (
                field("nr_throttled"),
                Duration::from_nanos(field("throttled_time")),
            ),
            Version::V2 => (
                field("nr_throttled"),
                Duration::from_micros(field("throttled_usec")),
            ),
        }
    }
}

impl Drop for CpuCap {
    fn drop(&mut self) {
        // Fails while a process is still inside: left for the next run,
        // which reuses it.
        let _ = std::fs::remove_dir(&self.dir);
    }
}
