//! The `wasmctrl` binary: a thin command-line edge over the library.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use wasmctrl::guest::{self, GuestRuntime, RuntimeConfig};

/// WebAssembly-pluggable Kubernetes controller host.
#[derive(Parser)]
#[command(name = "wasmctrl", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a guest once over objects from files and print its plan as JSON.
    Reconcile(ReconcileArgs),
}

/// Sandbox limits shared by every command that runs guests.
#[derive(Args, Clone)]
struct SandboxArgs {
    /// Per-call deadline for a guest, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    guest_deadline_ms: u64,
    /// Memory cap per guest instance, in MiB.
    #[arg(long, default_value_t = 512)]
    guest_memory_mib: usize,
    /// Fuel per guest call (off when absent).
    #[arg(long)]
    guest_fuel: Option<u64>,
    /// Directory for precompiled guests (default: $XDG_CACHE_HOME/wasmctrl).
    #[arg(long)]
    guest_cache_dir: Option<PathBuf>,
    /// Disable the precompiled-guest cache.
    #[arg(long)]
    no_guest_cache: bool,
}

impl SandboxArgs {
    fn runtime_config(&self) -> RuntimeConfig {
        let base = RuntimeConfig::default();
        let cache = if self.no_guest_cache {
            None
        } else {
            self.guest_cache_dir.clone().or(base.cache_dir.clone())
        };
        base.deadline(Duration::from_millis(self.guest_deadline_ms))
            .memory_limit(self.guest_memory_mib << 20)
            .fuel(self.guest_fuel)
            .cache_dir(cache)
    }
}

#[derive(Args)]
struct ReconcileArgs {
    /// The guest component (.wasm).
    #[arg(long)]
    guest: PathBuf,
    /// Objects to reconcile over: kubectl JSON (a List or one object) or
    /// multi-document YAML; `-` reads stdin. Repeatable.
    #[arg(long = "objects", required = true)]
    objects: Vec<PathBuf>,
    /// Guest configuration, KEY=VALUE. Repeatable.
    #[arg(long = "config")]
    config: Vec<String>,
    /// The namespace the guest is told the host runs in.
    #[arg(long, default_value = "default")]
    namespace: String,
    #[command(flatten)]
    sandbox: SandboxArgs,
}

fn reconcile(args: ReconcileArgs) -> anyhow::Result<()> {
    let config = wasmctrl::offline::parse_config(&args.config).map_err(anyhow::Error::msg)?;
    let objects = wasmctrl::objects::read_all(&args.objects)?;
    let runtime = GuestRuntime::new(args.sandbox.runtime_config())?;
    let module = runtime.load_file(&args.guest)?;
    let env = guest::environment(&args.namespace, &config);
    let plan = wasmctrl::offline::reconcile(&module, &env, &objects)?;
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, &plan).context("writing the plan")?;
    writeln!(out).context("writing the plan")?;
    Ok(())
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let result = match cli.command {
        Command::Reconcile(args) => reconcile(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wasmctrl: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
