//! The development commands, compiled only with the `dev-server` feature
//! (`make demo`, the tests): the embedded API server on its own
//! ([`apiserver`]) and the GPU demo against it ([`demo`]). The product
//! binary never holds them; `make product` checks it.

use clap::Subcommand;

mod apiserver;
mod demo;

#[derive(Subcommand)]
pub enum DevCommand {
    /// Serve the embedded Kubernetes API server until SIGINT/SIGTERM.
    Apiserver(apiserver::ApiserverArgs),
    /// Simulate a GPU cluster on the embedded API server and run the host
    /// with the GPU-summary guest against it.
    Demo(demo::DemoArgs),
}

impl DevCommand {
    /// Runs the command.
    pub async fn execute(self) -> anyhow::Result<()> {
        match self {
            DevCommand::Apiserver(args) => apiserver::serve(args).await,
            DevCommand::Demo(args) => demo::demo(args).await,
        }
    }
}
