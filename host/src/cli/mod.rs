//! The command line: one module per subcommand, each owning its clap
//! `Args` and their conversion into the library's configuration, plus the
//! tools only the binary uses (`new`'s scaffold, `guest configmap`'s
//! packaging, the book pages generated from the flags).
//!
//! Owns parsing and dispatch; it never holds the host's logic, which is the
//! library's. The development commands (`apiserver`, `demo`) are [`dev`],
//! compiled only with the `dev-server` feature.

use clap::{Parser, Subcommand};

#[cfg(test)]
mod book;
#[cfg(feature = "dev-server")]
mod dev;
mod flags;
mod guest;
mod guests;
mod health_get;
mod new;
mod reconcile;
mod replay;
mod run;
mod sandbox;
mod scaffold;
mod shadow;

/// WebAssembly-pluggable Kubernetes controller host.
#[derive(Parser)]
#[command(name = "wasmctrl", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run guests against a cluster (in-cluster config first, then kubeconfig).
    Run(Box<run::RunArgs>),
    /// Run a guest once over objects from files and print its plan as JSON.
    Reconcile(reconcile::ReconcileArgs),
    /// Run every case recorded with `run --record` through a guest and
    /// print the plans that differ from the recorded ones (exit 1 if any).
    Replay(replay::ReplayArgs),
    #[cfg(feature = "dev-server")]
    #[command(flatten)]
    Dev(dev::DevCommand),
    /// Package guests for a cluster.
    #[command(subcommand)]
    Guest(guest::GuestCommand),
    /// Print each guest's state (source, digest, contract, loaded,
    /// waiting or refused and why, shadow, last swap, reconciles) from a
    /// running host's health address (`/guests`).
    Guests(guests::GuestsArgs),
    /// Ask a running host about a shadow (`run --shadow`).
    #[command(subcommand)]
    Shadow(shadow::ShadowCommand),
    /// Scaffold a guest crate (a per-object controller for a custom
    /// resource) that builds outside this repository.
    New(new::NewArgs),
}

impl Cli {
    /// The worker threads of the async runtime the command asks for
    /// (`run --runtime-threads`); `None`: tokio's default.
    pub fn runtime_threads(&self) -> Option<usize> {
        match &self.command {
            Command::Run(args) => Some(args.runtime_threads()),
            _ => None,
        }
    }

    /// Runs the command, async ones on `runtime`. `Ok(false)`: it ran and
    /// its answer is no (`replay` found plans that differ, `shadow report`
    /// a shadow that has not agreed), so the process exits 1.
    pub fn execute(self, runtime: &tokio::runtime::Runtime) -> anyhow::Result<bool> {
        match self.command {
            Command::Run(args) => runtime.block_on(run::run(*args)).map(|()| true),
            Command::Reconcile(args) => reconcile::reconcile(args).map(|()| true),
            Command::Replay(args) => replay::replay(args),
            #[cfg(feature = "dev-server")]
            Command::Dev(command) => runtime.block_on(command.execute()).map(|()| true),
            Command::Guest(command) => command.execute(runtime).map(|()| true),
            Command::Guests(args) => runtime.block_on(guests::guests(args)).map(|()| true),
            Command::Shadow(command) => runtime.block_on(command.execute()),
            Command::New(args) => new::new_guest(args).map(|()| true),
        }
    }
}
