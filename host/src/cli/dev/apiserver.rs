//! `wasmctrl apiserver`: the embedded Kubernetes API server served until
//! SIGINT/SIGTERM. Owns the flags; the server is `wasmctrl_apiserver`'s.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use super::demo::MAX_DEMO_NODES;

#[derive(Args)]
pub struct ApiserverArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Write an admin kubeconfig here.
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
    /// Watch history retained (events); older resourceVersions get 410 Gone.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    history: Option<u64>,
    /// Simulated Ready nodes, with a scheduler binding pending pods to
    /// them and kubelets moving them to Running and Ready (as kwok does);
    /// 0: none, pods stay Pending as on a bare kube-apiserver.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=MAX_DEMO_NODES))]
    simulated_nodes: u64,
}

/// Serves until SIGINT or SIGTERM.
pub async fn serve(args: ApiserverArgs) -> anyhow::Result<()> {
    let mut config = wasmctrl_apiserver::ApiServerConfig::default()
        .listen(args.listen)
        .simulated_nodes(usize::try_from(args.simulated_nodes).unwrap_or(usize::MAX));
    if let Some(h) = args.history {
        config = config.history(usize::try_from(h).unwrap_or(usize::MAX));
    }
    wasmctrl_apiserver::serve_until_signal(config, args.kubeconfig_out.as_deref()).await?;
    Ok(())
}
