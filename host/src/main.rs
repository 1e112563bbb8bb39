//! The `wasmctrl` binary: a thin command-line edge over the library. It
//! caps malloc's arenas, parses the command line ([`cli`], one module per
//! subcommand), starts tracing and the async runtime, and runs the command.

use std::process::ExitCode;

use clap::Parser;

mod cli;

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// Caps glibc malloc at two arenas unless `MALLOC_ARENA_MAX` is set. By
/// default glibc gives each thread that allocates its own arena (up to 8
/// per core): the informer's decoding on the runtime's workers and the
/// reconciles on the blocking pool then leave their freed memory in
/// different arenas, and the peak RSS at 100,000 pods grows by ~10%
/// (BENCHMARKS.md). Called before any other thread exists.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn cap_malloc_arenas() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
        return;
    }
    // SAFETY: mallopt only sets an allocator tunable; it is called once,
    // before the runtime or any other thread starts.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn cap_malloc_arenas() {}

/// An error and its causes on one line, `outer: cause: cause`, leaving out
/// a cause whose text the line already ends with: most of our error types
/// name their cause in their own message and return it from `source()`
/// too, and `{:#}` would print it twice.
fn error_chain(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.ends_with(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

fn main() -> ExitCode {
    cap_malloc_arenas();
    let cli = cli::Cli::parse();
    init_tracing();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = cli.runtime_threads() {
        builder.worker_threads(threads);
    }
    let runtime = match builder.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("wasmctrl: error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match cli.execute(&runtime) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("wasmctrl: error: {}", error_chain(&e));
            ExitCode::FAILURE
        }
    }
}
