//! `wasmctrl run`: the host against a cluster. Owns the flags, their
//! conversion into the library's configurations (in one place:
//! [`RunArgs::supervisor_config`], [`ElectionArgs::config`]), loading the
//! kubeconfig, and the wiring of the supervisor, the election and the
//! metrics and health endpoints; the host itself is
//! [`wasmctrl::supervisor`]'s.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use wasmctrl::client::ClientLimits;
use wasmctrl::controller::ControllerConfig;
use wasmctrl::leader::{HostElection, LeaderElectionConfig};
use wasmctrl::leader_per_guest::PerGuestElection;
use wasmctrl::metrics::{Health, Metrics, NameLabels};
use wasmctrl::quarantine::QuarantineConfig;
use wasmctrl::recording::RecordConfig;
use wasmctrl::supervisor::{Standby, Supervisor, SupervisorConfig};

use super::flags;
use super::sandbox::SandboxArgs;

#[derive(Args)]
pub struct RunArgs {
    /// A guest component (.wasm). Repeatable: several guests share one host.
    #[arg(long = "guest", required_unless_present = "guest_dir")]
    guests: Vec<PathBuf>,
    /// A directory of guests (`NAME.wasm`, or `NAME.oci` holding
    /// `oci://REGISTRY/REPO@sha256:…`; optional `NAME.config.json`),
    /// typically a ConfigMap volume; changes are swapped in at run time.
    #[arg(long)]
    guest_dir: Option<PathBuf>,
    /// The most MiB a compressed guest file of the guest directory
    /// (`NAME.wasm.gz`, `NAME.wasm.zst`) may decompress to; a larger one is
    /// refused, having cost no more than that.
    #[arg(long, default_value_t = wasmctrl::supervisor::compressed::DEFAULT_DECOMPRESSED_MAX >> 20, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    guest_decompressed_max_mib: u64,
    /// Rescan the guest directory this often even without notifications.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=flags::MAX_SECONDS))]
    guest_rescan_seconds: u64,
    /// Kubeconfig file (default: in-cluster config, then $KUBECONFIG or ~/.kube/config).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The host's namespace (default: the pod's namespace, the kubeconfig
    /// context's namespace, or "default").
    #[arg(long)]
    namespace: Option<String>,
    /// Guest configuration, GUEST.KEY=VALUE (GUEST is the guest's name or file stem). Repeatable.
    #[arg(long = "config")]
    config: Vec<String>,
    /// Workers per guest.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=flags::MAX_WORKERS))]
    workers: u64,
    /// Threads of the async runtime (watches, queues, requests). Guest
    /// calls run on a pool of their own either way; on two cores one
    /// thread used less CPU than two in the per-object and GPU-summary
    /// benchmarks (BENCHMARKS.md).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=flags::MAX_RUNTIME_THREADS))]
    runtime_threads: u64,
    /// Resync period in seconds (guests may choose their own).
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=flags::MAX_SECONDS))]
    resync_seconds: u64,
    /// Address of the Prometheus `/metrics` endpoint.
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// Address of the `/healthz`, `/readyz`, `/shadow/GUEST` and `/guests`
    /// endpoints.
    #[arg(long, default_value = "0.0.0.0:8081")]
    health_addr: SocketAddr,
    #[command(flatten)]
    election: ElectionArgs,
    /// Client-side limit on API requests per second (all guests together).
    #[arg(long, default_value_t = 20.0, value_parser = flags::qps)]
    kube_api_qps: f64,
    /// Client-side burst of API requests.
    #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    kube_api_burst: u32,
    #[command(flatten)]
    sandbox: SandboxArgs,
    #[command(flatten)]
    watch_health: flags::WatchHealthArgs,
    /// Exit non-zero when any guest is refused at start (policy, describe
    /// failing, write rules naming another guest's object, ...), instead
    /// of refusing it alone and running the others.
    #[arg(long)]
    strict_guests: bool,
    /// Run FILE as the shadow of the running guest GUEST: called on the
    /// same snapshots, its plans compared with GUEST's and never acted on
    /// (`wasmctrl_shadow_reconciles_total`, `/shadow/GUEST` on the health
    /// address). Repeatable.
    #[arg(long = "shadow", value_name = "GUEST=FILE", value_parser = flags::shadow)]
    shadows: Vec<(String, PathBuf)>,
    /// Send every write of a shadow's that its guest's plan lacks as a dry
    /// run (`dryRun=All`, under the same client rate limit), so the API
    /// server's refusals (schema, admission, RBAC) show in `/shadow/GUEST`.
    #[arg(long)]
    shadow_dry_run: bool,
    /// Record every guest's reconcile cases (request, environment, the
    /// snapshot's projected objects, plan) as JSON under DIR/GUEST, for
    /// `wasmctrl replay`. Guests watching Secrets are not recorded without
    /// `--record-secrets`.
    #[arg(long, value_name = "DIR")]
    record: Option<PathBuf>,
    /// The most cases kept per guest (the oldest are deleted first).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    record_max_cases: u64,
    /// The most MiB of cases kept per guest.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    record_max_mib: u64,
    /// Record guests that watch Secrets too (their data lands on disk).
    #[arg(long)]
    record_secrets: bool,
    /// Consecutive guest calls that run out of time or trap before the
    /// guest is quarantined (not called for 30 s, doubling up to 30 min);
    /// 0: never.
    #[arg(long, default_value_t = wasmctrl::quarantine::DEFAULT_FAILURES, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    guest_quarantine_failures: u32,
    #[command(flatten)]
    delivery: DeliveryArgs,
}

/// How `run` fetches guests named by OCI reference.
#[derive(Args)]
struct DeliveryArgs {
    #[command(flatten)]
    registry: super::guest::RegistryArgs,
    /// Accept `NAME.oci` references by tag (no digest): each is resolved
    /// to a digest, logged, and resolved again every
    /// --guest-tag-interval-seconds (a moved tag swaps the guest).
    #[arg(long)]
    allow_guest_tags: bool,
    /// How often a guest's tag is resolved again.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=flags::MAX_SECONDS))]
    guest_tag_interval_seconds: u64,
    /// The largest guest pulled from a registry, in bytes.
    #[arg(long, default_value_t = wasmctrl::delivery::DEFAULT_MAX_GUEST_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
    max_guest_bytes: u64,
}

/// Leader-election flags of `run`.
#[derive(Args)]
struct ElectionArgs {
    /// Elect leaders through coordination.k8s.io Leases in the host's
    /// namespace. `--leader-elect` (or `=host`): one Lease for the whole
    /// host; only its leader runs workers and writes, the others keep
    /// their caches warm. `=per-guest`: one Lease per guest, the guests
    /// spread over the replicas; each replica runs the guests it leads.
    #[arg(long, value_enum, num_args = 0..=1, require_equals = true, default_missing_value = "host", value_name = "MODE")]
    leader_elect: Option<ElectMode>,
    /// The Lease's name; with `--leader-elect=per-guest`, the prefix of
    /// every Lease's name (`NAME-g-GUEST`, `NAME-r-IDENTITY`).
    #[arg(long, default_value = "wasmctrl")]
    lease_name: String,
    /// With `--leader-elect=per-guest`: shard the keys of each per-object
    /// guest into this many buckets, each with its own Lease
    /// (`NAME-s-GUEST-BUCKET`) and spread over the replicas like guests (0:
    /// every guest is led whole). A guest with an aggregate key is led
    /// whole. Refused without `--leader-elect=per-guest`.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1024))]
    shard_buckets: u32,
    /// With `--leader-elect=per-guest`: what a replica keeps of the guests
    /// it does not lead. `cold`: nothing; a guest's caches are listed when
    /// the replica comes to lead it and dropped when it hands it over.
    /// `warm`: every guest's caches synced all along, for faster takeovers.
    /// A guest whose keys are sharded caches, standing by cold, only the
    /// objects of the buckets the replica leads (selected by the label
    /// `shard.wasmctrl.dev/GUEST`, which the host sets), warm all of them.
    /// Default: cold.
    #[arg(long, value_enum, value_name = "MODE")]
    standby: Option<StandbyMode>,
    /// This candidate's identity (default: $POD_NAME, else the host name).
    #[arg(long)]
    identity: Option<String>,
    /// Lease duration, seconds.
    #[arg(long, default_value_t = 15.0, value_parser = flags::positive_seconds)]
    lease_duration_seconds: f64,
    /// Renew deadline, seconds.
    #[arg(long, default_value_t = 10.0, value_parser = flags::positive_seconds)]
    renew_deadline_seconds: f64,
    /// Retry period, seconds.
    #[arg(long, default_value_t = 2.0, value_parser = flags::positive_seconds)]
    retry_period_seconds: f64,
}

/// What `--standby` keeps of a guest not led here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum StandbyMode {
    // Nothing. (Plain comments, as for `ElectMode`.)
    Cold,
    // Its caches, synced.
    Warm,
}

/// What `--leader-elect` elects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ElectMode {
    // One leader for the whole host. (Plain comments: doc comments would
    // give the flag a long help of its own.)
    Host,
    // One leader per guest, the guests spread over the replicas.
    PerGuest,
}

impl ElectionArgs {
    /// `--standby`, refused unless the Leases are per guest (only then is
    /// a guest not led here while the host runs).
    fn standby(&self) -> anyhow::Result<Standby> {
        match (self.standby, self.leader_elect) {
            (Some(_), mode) if mode != Some(ElectMode::PerGuest) => anyhow::bail!(
                "--standby: only a replica with --leader-elect=per-guest stands by for some guests while leading others (with --leader-elect=host a follower keeps every cache warm)"
            ),
            (None | Some(StandbyMode::Cold), _) => Ok(Standby::Cold),
            (Some(StandbyMode::Warm), _) => Ok(Standby::Warm),
        }
    }

    /// `--shard-buckets`, refused unless the Leases are per guest (buckets
    /// are leased like guests).
    fn shard_buckets(&self) -> anyhow::Result<u32> {
        match (self.shard_buckets, self.leader_elect) {
            (0, _) | (_, Some(ElectMode::PerGuest)) => Ok(self.shard_buckets),
            (n, mode) => anyhow::bail!(
                "--shard-buckets {n}: buckets are leased like guests, so sharding needs --leader-elect=per-guest (this run has {})",
                match mode {
                    Some(ElectMode::Host) => "--leader-elect=host",
                    _ => "no --leader-elect",
                }
            ),
        }
    }

    /// The election these flags ask for, on a Lease in `namespace`; `None`
    /// without `--leader-elect`.
    fn config(&self, namespace: &str) -> anyhow::Result<Option<LeaderElectionConfig>> {
        if self.leader_elect.is_none() {
            return Ok(None);
        }
        let identity = self
            .identity
            .clone()
            .or_else(wasmctrl::leader::default_identity)
            .context("no --identity, $POD_NAME or host name for leader election")?;
        Ok(Some(
            LeaderElectionConfig::default()
                .namespace(namespace)
                .lease_name(self.lease_name.clone())
                .identity(identity)
                .lease_duration(Duration::from_secs_f64(self.lease_duration_seconds))
                .renew_deadline(Duration::from_secs_f64(self.renew_deadline_seconds))
                .retry_period(Duration::from_secs_f64(self.retry_period_seconds)),
        ))
    }
}

impl RunArgs {
    /// `--runtime-threads`.
    pub fn runtime_threads(&self) -> usize {
        usize::try_from(self.runtime_threads).unwrap_or(1)
    }

    /// The client's rate limits.
    fn client_limits(&self) -> ClientLimits {
        ClientLimits::default()
            .qps(self.kube_api_qps)
            .burst(self.kube_api_burst)
    }

    /// The host's configuration: every flag but the client's, the
    /// endpoints' and the election's, with the host's `namespace` and the
    /// pod it runs in (`$POD_NAMESPACE`, `$POD_NAME`). Checks values
    /// before anything connects: a bad one is named even where no cluster
    /// is reachable.
    fn supervisor_config(&self) -> anyhow::Result<SupervisorConfig> {
        let guest_config = wasmctrl::config::parse_guest_pairs(&self.config)?;
        let runtime = self.sandbox.runtime_config()?;
        let watch_health = self.watch_health.config().map_err(anyhow::Error::msg)?;
        let controller = ControllerConfig::default()
            .workers(usize::try_from(self.workers).unwrap_or(1))
            .resync(Duration::from_secs(self.resync_seconds))
            .instance(std::env::var("POD_NAME").ok())
            .quarantine(QuarantineConfig::default().failures(self.guest_quarantine_failures));
        let pod = match (std::env::var("POD_NAMESPACE"), std::env::var("POD_NAME")) {
            (Ok(ns), Ok(name)) if !ns.is_empty() && !name.is_empty() => Some((ns, name)),
            _ => None,
        };
        let record = self.record.as_ref().map(|dir| {
            RecordConfig::new(dir)
                .max_cases(usize::try_from(self.record_max_cases).unwrap_or(usize::MAX))
                .max_bytes(self.record_max_mib << 20)
                .secrets(self.record_secrets)
        });
        let delivery = wasmctrl::delivery::DeliveryConfig {
            allow_tags: self.delivery.allow_guest_tags,
            tag_interval: Duration::from_secs(self.delivery.guest_tag_interval_seconds),
            max_bytes: self.delivery.max_guest_bytes,
            // Pulled guests share the compiled guests' cache directory.
            cache_dir: runtime.cache_dir.clone(),
            ..self.delivery.registry.delivery_config()
        };
        Ok(SupervisorConfig::default()
            .delivery(delivery)
            .guests(self.guests.clone())
            .guest_config(guest_config)
            .controller(controller)
            .runtime(runtime)
            .guest_dir(self.guest_dir.clone())
            .decompressed_max(self.guest_decompressed_max_mib << 20)
            .rescan(Some(Duration::from_secs(self.guest_rescan_seconds)))
            .pod(pod)
            .watch_health(watch_health)
            .strict_guests(self.strict_guests)
            .shadows(self.shadows.clone())
            .shadow_dry_run(self.shadow_dry_run)
            .shard_buckets(self.election.shard_buckets()?)
            .standby(self.election.standby()?)
            .record(record))
    }
}

/// A client from `kubeconfig`, else the in-cluster configuration, else the
/// default kubeconfig (`$KUBECONFIG`, `~/.kube/config`).
async fn kube_client(
    kubeconfig: Option<&Path>,
    identity: Option<&str>,
    limits: ClientLimits,
    metrics: Option<Arc<Metrics>>,
) -> anyhow::Result<kube::Client> {
    let mut config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("using kubeconfig {}", path.display()))?
        }
        None => match kube::Config::incluster() {
            Ok(c) => c,
            Err(_) => kube::Config::from_kubeconfig(&kube::config::KubeConfigOptions::default())
                .await
                .context("no in-cluster configuration and no usable kubeconfig")?,
        },
    };
    config.headers.push((
        http::header::USER_AGENT,
        wasmctrl::client::user_agent(identity),
    ));
    wasmctrl::client::build(config, limits, metrics).context("creating the Kubernetes client")
}

/// `--namespace`, else the pod's namespace, else the client's default.
fn host_namespace(flag: Option<String>, client: &kube::Client) -> String {
    flag.or_else(|| {
        std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    })
    .unwrap_or_else(|| client.default_namespace().to_string())
}

/// Runs the host until SIGINT or SIGTERM, then drains it and releases the
/// lease.
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    // Flags are checked before anything connects: a bad value is named
    // even where no cluster is reachable.
    let config = args.supervisor_config()?;
    let metrics = Arc::new(Metrics::new());
    // The replica's identity in every request's User-Agent, elected or
    // not: an API server's audit log tells the replicas apart.
    let identity = args
        .election
        .identity
        .clone()
        .or_else(wasmctrl::leader::default_identity);
    let client = kube_client(
        args.kubeconfig.as_deref(),
        identity.as_deref(),
        args.client_limits(),
        Some(metrics.clone()),
    )
    .await?;
    let config = config.namespace(host_namespace(args.namespace, &client));
    let _metrics_endpoint = wasmctrl::metrics::serve_metrics(args.metrics_addr, metrics.clone())
        .await
        .with_context(|| format!("binding the metrics endpoint on {}", args.metrics_addr))?;
    let le_config = args.election.config(&config.namespace)?;
    let per_guest = match le_config.clone() {
        Some(le_config) if args.election.leader_elect == Some(ElectMode::PerGuest) => {
            Some(PerGuestElection::preflight(&client, le_config).await?)
        }
        _ => None,
    };
    let (election, leadership) = match le_config {
        Some(le_config) if per_guest.is_none() => {
            HostElection::preflight(&client, le_config).await?
        }
        _ => HostElection::always_leading(),
    };
    // Per-guest leadership announces this replica (its presence Lease) at
    // once, before the guests load: replicas started together (a rollout,
    // a restart of all) then see each other before any stands for a guest,
    // and each takes its share instead of one taking every guest. It
    // stands for none until the supervisor runs and names them.
    let (per_guest, config) = match per_guest {
        Some((election, leases)) => (
            Some(election.start(metrics.clone())),
            config.guest_leases(Some(leases)),
        ),
        None => (None, config),
    };
    // Informers start (and sync) before the election: a follower is a warm
    // standby, ready to take over.
    let host = Arc::new(
        Supervisor::start_with_leadership(client, config, Some(metrics.clone()), leadership)
            .await?,
    );
    // With per-guest leadership the host-wide gauge would always read 1:
    // `wasmctrl_guest_leader{guest}` says what this replica leads instead.
    let master_status = match per_guest {
        Some(_) => prometheus_client::metrics::gauge::Gauge::default(),
        None => metrics
            .leader
            .get_or_create(&NameLabels {
                name: args.election.lease_name,
            })
            .clone(),
    };
    let election = election.start(master_status);
    let (ready_host, refused_host) = (host.clone(), host.clone());
    let (shadow_host, guests_host) = (host.clone(), host.clone());
    let _health_endpoint = Health::new(Arc::new(move || ready_host.readiness()))
        .detail(Arc::new(move || refused_host.refused()))
        .reports(Arc::new(move |guest: &str| {
            shadow_host.shadow_report(guest)
        }))
        .guests(Arc::new(move || guests_host.guests_json()))
        .serve(args.health_addr)
        .await
        .with_context(|| format!("binding the health endpoint on {}", args.health_addr))?;
    let result = host.run(shutdown_signal(), Duration::from_secs(10)).await;
    match &result {
        // Workers are stopped and drained: release the lease so a standby
        // takes over at once.
        Ok(()) => {
            election.stop().await;
            if let Some(per_guest) = per_guest {
                per_guest.stop().await;
            }
        }
        Err(_) => {
            election.abort();
            if let Some(per_guest) = per_guest {
                per_guest.abort().await;
            }
        }
    }
    result?;
    Ok(())
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        if let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Run {
        #[command(flatten)]
        run: RunArgs,
    }

    fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
        let argv = ["run", "--guest", "g.wasm"].iter().chain(args);
        Run::try_parse_from(argv).map(|r| r.run)
    }

    #[test]
    fn leader_elect_alone_is_the_host_mode_and_per_guest_is_asked_for_by_name() {
        assert_eq!(parse(&[]).unwrap().election.leader_elect, None);
        let host = parse(&["--leader-elect"]).unwrap().election;
        assert_eq!(host.leader_elect, Some(ElectMode::Host));
        assert!(host.config("ops").unwrap().is_some());
        let explicit = parse(&["--leader-elect=host"]).unwrap().election;
        assert_eq!(explicit.leader_elect, Some(ElectMode::Host));
        let per_guest = parse(&["--leader-elect=per-guest", "--identity=r-0"]).unwrap();
        assert_eq!(per_guest.election.leader_elect, Some(ElectMode::PerGuest));
        let config = per_guest.election.config("ops").unwrap().unwrap();
        assert_eq!(
            (config.identity.as_str(), config.namespace.as_str()),
            ("r-0", "ops")
        );
        // Buckets shard keys only with per-guest leadership.
        let sharded = parse(&["--leader-elect=per-guest", "--shard-buckets=4"]).unwrap();
        assert_eq!(sharded.supervisor_config().unwrap().shard_buckets, 4);
        // Elsewhere they are refused, naming the flag they need.
        for args in [
            &["--leader-elect", "--shard-buckets=4"][..],
            &["--shard-buckets=4"],
        ] {
            let e = parse(args).unwrap().supervisor_config().unwrap_err();
            assert!(
                e.to_string().contains("needs --leader-elect=per-guest"),
                "{e}"
            );
        }
        // Standby: cold unless asked warm, and only with per-guest leases.
        let cold = parse(&["--leader-elect=per-guest"]).unwrap();
        assert_eq!(cold.supervisor_config().unwrap().standby, Standby::Cold);
        let warm = parse(&["--leader-elect=per-guest", "--standby=warm"]).unwrap();
        assert_eq!(warm.supervisor_config().unwrap().standby, Standby::Warm);
        for args in [
            &["--leader-elect", "--standby=warm"][..],
            &["--standby=cold"],
        ] {
            let e = parse(args).unwrap().supervisor_config().unwrap_err();
            assert!(
                e.to_string()
                    .contains("--standby: only a replica with --leader-elect=per-guest"),
                "{e}"
            );
        }
        let unsharded = parse(&["--leader-elect", "--shard-buckets=0"]).unwrap();
        assert_eq!(unsharded.supervisor_config().unwrap().shard_buckets, 0);
        assert!(parse(&["--shard-buckets=1025"]).is_err());
        // The mode is never taken from the next argument.
        assert!(parse(&["--leader-elect", "per-guest"]).is_err());
        assert!(parse(&["--leader-elect=leader"]).is_err());
    }
}
