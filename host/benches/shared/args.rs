//! How the end-to-end benches (`e2e_latency`, `perobj`; each includes this
//! file with `#[path]`) read their command line and find what they run: the
//! target directory and a built guest in it, a flag's value (or an
//! environment variable's), numbers and comma-separated lists, a native
//! peer's required flags, and the start of the bench binary as its own
//! native peer. It never measures anything.

use std::path::PathBuf;

/// Cargo's target directory (`CARGO_TARGET_DIR`, else the workspace's).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// The guest `file` as `make guest` builds it; panics if it is missing.
pub fn guest(file: &str) -> PathBuf {
    let guest = target_dir().join("wasm32-wasip2/guest").join(file);
    assert!(
        guest.exists(),
        "{} is missing: run `make guest` first",
        guest.display()
    );
    guest
}

/// The value after `flag`.
pub fn option(args: &[String], flag: &str) -> Option<String> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// The value after `flag`, else the environment variable `env`.
#[allow(dead_code)] // perobj takes flags only
pub fn option_or_env(args: &[String], flag: &str, env: &str) -> Option<String> {
    option(args, flag).or_else(|| std::env::var(env).ok())
}

/// `value` (of `flag`) as a number; `_` may group digits (`20_000`).
pub fn number<T: std::str::FromStr>(flag: &str, value: &str) -> T
where
    T::Err: std::fmt::Display,
{
    value
        .trim()
        .replace('_', "")
        .parse()
        .unwrap_or_else(|e| panic!("{flag} {value:?}: {e}"))
}

/// The number after `flag`, else `default`.
#[allow(dead_code)] // e2e_latency's numbers may come from the environment
pub fn parse<T: std::str::FromStr>(args: &[String], flag: &str, default: T) -> T
where
    T::Err: std::fmt::Display,
{
    option(args, flag).map_or(default, |v| number(flag, &v))
}

/// `list` (of `flag`), comma-separated, each item read by `item`.
pub fn list<T>(flag: &str, list: &str, item: impl Fn(&str, &str) -> T) -> Vec<T> {
    list.split(',').map(|s| item(flag, s.trim())).collect()
}

/// The value after `flag`, which the native peer `who` must be given.
pub fn required(args: &[String], flag: &str, who: &str) -> anyhow::Result<String> {
    use anyhow::Context;
    option(args, flag).with_context(|| format!("{who}: missing {flag}"))
}

/// When the bench binary was started as its native peer (`args` hold
/// `flag`): runs `peer` on a runtime of its own until it ends, exiting the
/// process with 1 if it fails, and returns true. Otherwise false.
pub fn run_as_peer<F>(
    args: &[String],
    flag: &str,
    who: &str,
    peer: impl FnOnce(&[String]) -> anyhow::Result<F>,
) -> bool
where
    F: std::future::Future<Output = anyhow::Result<()>>,
{
    if !args.iter().any(|a| a == flag) {
        return false;
    }
    let run = peer(args).unwrap_or_else(|e| panic!("{who} arguments: {e:#}"));
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    if let Err(e) = rt.block_on(run) {
        eprintln!("{who}: {e:#}");
        std::process::exit(1);
    }
    true
}

/// The bench's own runtime: the embedded API server and the bench's watches
/// on two workers, as on the machine the numbers were taken on.
pub fn bench_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}
