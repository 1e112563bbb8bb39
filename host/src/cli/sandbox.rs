//! The sandbox flags every command that runs guests shares (`run`,
//! `reconcile`, `replay`), and their conversion into the guest runtime's
//! [`RuntimeConfig`]. Owns no limit of its own: the bounds are in
//! [`super::flags`], the defaults in the runtime.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use wasmctrl::guest::policy::Policy;
use wasmctrl::guest::RuntimeConfig;

use super::flags;

/// Sandbox limits shared by every command that runs guests.
#[derive(Args, Clone)]
pub struct SandboxArgs {
    /// Per-call deadline for a guest, in milliseconds.
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..=flags::MAX_GUEST_DEADLINE_MS))]
    guest_deadline_ms: u64,
    /// Memory cap per guest instance, in MiB.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..=flags::MAX_GUEST_MEMORY_MIB))]
    guest_memory_mib: u64,
    /// Fuel per guest call (off when absent).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    guest_fuel: Option<u64>,
    /// Operator policy (YAML): what each guest may watch and write, and
    /// its caps (see the book: docs/src/operating/policy.md). Default: anything but
    /// Secrets, default caps.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Directory for precompiled guests (default: $XDG_CACHE_HOME/wasmctrl).
    #[arg(long)]
    guest_cache_dir: Option<PathBuf>,
    /// Disable the precompiled-guest cache.
    #[arg(long)]
    no_guest_cache: bool,
    /// Write /tmp/perf-PID.map naming the guests' compiled functions, so
    /// that `perf report` shows time in a guest by function.
    #[arg(long)]
    guest_perf_map: bool,
}

impl SandboxArgs {
    /// The guest runtime's configuration these flags ask for (the policy
    /// file read).
    pub fn runtime_config(&self) -> anyhow::Result<RuntimeConfig> {
        let base = RuntimeConfig::default();
        let policy = match &self.policy {
            Some(path) => Policy::load(path)?,
            None => Policy::default(),
        };
        let cache = if self.no_guest_cache {
            None
        } else {
            self.guest_cache_dir.clone().or(base.cache_dir.clone())
        };
        let memory = usize::try_from(self.guest_memory_mib << 20)
            .context("--guest-memory-mib does not fit this platform's address space")?;
        Ok(base
            .deadline(Duration::from_millis(self.guest_deadline_ms))
            .memory_limit(memory)
            .fuel(self.guest_fuel)
            .cache_dir(cache)
            .policy(policy)
            .perf_map(self.guest_perf_map))
    }
}
