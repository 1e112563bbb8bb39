//! The `wasmctrl` binary: a thin command-line edge over the library.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

#[cfg(test)]
mod book;
mod flags;

use wasmctrl::guest::{self, GuestRuntime, RuntimeConfig};
use wasmctrl::leader::{HostElection, LeaderElectionConfig};

/// WebAssembly-pluggable Kubernetes controller host.
#[derive(Parser)]
#[command(name = "wasmctrl", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run guests against a cluster (in-cluster config first, then kubeconfig).
    Run(Box<RunArgs>),
    /// Run a guest once over objects from files and print its plan as JSON.
    Reconcile(ReconcileArgs),
    /// Run every case recorded with `run --record` through a guest and
    /// print the plans that differ from the recorded ones (exit 1 if any).
    Replay(ReplayArgs),
    /// Serve the embedded Kubernetes API server until SIGINT/SIGTERM.
    #[cfg(feature = "dev-server")]
    Apiserver(ApiserverArgs),
    /// Simulate a GPU cluster on the embedded API server and run the host
    /// with the GPU-summary guest against it.
    #[cfg(feature = "dev-server")]
    Demo(DemoArgs),
    /// Package guests for a cluster.
    #[command(subcommand)]
    Guest(GuestCommand),
    /// Ask a running host about a shadow (`run --shadow`).
    #[command(subcommand)]
    Shadow(ShadowCommand),
    /// Scaffold a guest crate (a per-object controller for a custom
    /// resource) that builds outside this repository.
    New(NewArgs),
}

#[derive(Args)]
struct NewArgs {
    /// The crate's and the guest's name: a DNS label starting with a letter.
    name: String,
    /// The custom resource's API group.
    #[arg(long, default_value = "example.com")]
    group: String,
    /// The custom resource's version.
    #[arg(long = "version", default_value = "v1")]
    api_version: String,
    /// The custom resource's kind; default: NAME in UpperCamelCase.
    #[arg(long)]
    kind: Option<String>,
    /// Where to write the crate (a new or empty directory); default: ./NAME.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The guest SDK crate (`wit/rust/sdk` of a wasmctrl checkout); default:
    /// the SDK of the source tree this binary was built from.
    #[arg(long)]
    sdk_path: Option<PathBuf>,
}

#[derive(Subcommand)]
enum ShadowCommand {
    /// Print a shadow's report from a running host's health address and
    /// exit 0 when the shadow agreed with its guest on every key compared
    /// since it loaded (at least one), 1 otherwise: a promotion gate.
    Report(ShadowReportArgs),
}

#[derive(Args)]
struct ShadowReportArgs {
    /// The guest the shadow runs beside (its declared name).
    guest: String,
    /// The host's health address (`run --health-addr`).
    #[arg(long, default_value = "127.0.0.1:8081")]
    address: std::net::SocketAddr,
    /// Print the whole report as JSON too.
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum GuestCommand {
    /// Print a ConfigMap (YAML) carrying a guest as binaryData, for
    /// `kubectl apply -f -`.
    Configmap(ConfigmapArgs),
}

#[derive(Args)]
struct ConfigmapArgs {
    /// The guest component.
    path: PathBuf,
    /// The ConfigMap's name.
    #[arg(long)]
    name: String,
    /// The ConfigMap's namespace.
    #[arg(long)]
    namespace: Option<String>,
    /// The key (file name in the mounted volume); default: the file's name.
    #[arg(long)]
    key: Option<String>,
}

#[derive(Args)]
struct RunArgs {
    /// A guest component (.wasm). Repeatable: several guests share one host.
    #[arg(long = "guest", required_unless_present = "guest_dir")]
    guests: Vec<PathBuf>,
    /// A directory of guests (`NAME.wasm`, optional `NAME.config.json`),
    /// typically a ConfigMap volume; changes are swapped in at run time.
    #[arg(long)]
    guest_dir: Option<PathBuf>,
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
    metrics_addr: std::net::SocketAddr,
    /// Address of the `/healthz` and `/readyz` endpoints.
    #[arg(long, default_value = "0.0.0.0:8081")]
    health_addr: std::net::SocketAddr,
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
}

/// Leader-election flags of `run`.
#[derive(Args)]
struct ElectionArgs {
    /// Elect a leader through a coordination.k8s.io Lease in the host's
    /// namespace: only the leader runs workers and writes; the others keep
    /// their caches warm.
    #[arg(long)]
    leader_elect: bool,
    /// The Lease's name.
    #[arg(long, default_value = "wasmctrl")]
    lease_name: String,
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

impl ElectionArgs {
    /// The election these flags ask for, on a Lease in `namespace`; `None`
    /// without `--leader-elect`.
    fn config(&self, namespace: &str) -> anyhow::Result<Option<LeaderElectionConfig>> {
        if !self.leader_elect {
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

#[cfg(feature = "dev-server")]
#[derive(Args)]
struct ApiserverArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: std::net::SocketAddr,
    /// Write an admin kubeconfig here.
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
    /// Watch history retained (events); older resourceVersions get 410 Gone.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    history: Option<u64>,
    /// Simulated Ready nodes, with a scheduler binding pending pods to
    /// them and kubelets moving them to Running and Ready (as kwok does);
    /// 0: none, pods stay Pending as on a bare kube-apiserver.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=flags::MAX_DEMO_NODES))]
    simulated_nodes: u64,
}

#[cfg(feature = "dev-server")]
#[derive(Args)]
struct DemoArgs {
    /// Number of GPU nodes.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=flags::MAX_DEMO_NODES))]
    nodes: u64,
    /// Pods kept alive by the simulator.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=flags::MAX_DEMO_PODS))]
    pods: u64,
    /// Stop after this many seconds and print a verdict (default: until Ctrl-C).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=flags::MAX_SECONDS))]
    duration: Option<u64>,
    /// Simulator actions per second.
    #[arg(long, default_value_t = 20.0, value_parser = flags::demo_rate)]
    rate: f64,
    /// Simulator seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// The GPU-summary guest.
    #[arg(
        long,
        default_value = "target/wasm32-wasip2/guest/guest_gpu_summary.wasm"
    )]
    guest: PathBuf,
}

/// Sandbox limits shared by every command that runs guests.
#[derive(Args, Clone)]
struct SandboxArgs {
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
    fn runtime_config(&self) -> anyhow::Result<RuntimeConfig> {
        let base = RuntimeConfig::default();
        let policy = match &self.policy {
            Some(path) => wasmctrl::guest::policy::Policy::load(path)?,
            None => wasmctrl::guest::policy::Policy::default(),
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
    /// Reconcile only this request key (`namespace/name`, `name`, or an
    /// aggregate key); default: every key the objects produce, one plan
    /// (JSON document) each.
    #[arg(long)]
    key: Option<String>,
    /// The clock the guest sees (`env.now-ms`): RFC 3339
    /// (`2026-01-02T03:04:05Z`) or milliseconds since the Unix epoch;
    /// default: now.
    #[arg(long, value_parser = parse_now)]
    now: Option<u64>,
    /// Refuse an `--objects` input larger than this many bytes.
    #[arg(long, default_value_t = wasmctrl::objects::DEFAULT_MAX_INPUT_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
    max_input_bytes: u64,
    #[command(flatten)]
    sandbox: SandboxArgs,
}

#[derive(Args)]
struct ReplayArgs {
    /// The guest component (.wasm) to replay the cases through.
    #[arg(long)]
    guest: PathBuf,
    /// A directory of recorded cases (`run --record DIR`, or one guest's
    /// subdirectory of it); read recursively.
    dir: PathBuf,
    #[command(flatten)]
    sandbox: SandboxArgs,
}

/// `--now`: RFC 3339 or milliseconds since the epoch, no later than the
/// last instant an API server stores (`metav1.Time` is RFC 3339 with a
/// four-digit year).
fn parse_now(s: &str) -> Result<u64, String> {
    const LAST_MS: u64 = 253_402_300_799_999; // 9999-12-31T23:59:59.999Z
    let ms = match s.parse::<u64>() {
        Ok(ms) => ms,
        Err(_) => {
            let t = chrono::DateTime::parse_from_rfc3339(s).map_err(|e| {
                format!("{s:?} is neither RFC 3339 nor milliseconds since the epoch: {e}")
            })?;
            u64::try_from(t.timestamp_millis()).map_err(|_| format!("{s:?} is before 1970"))?
        }
    };
    if ms > LAST_MS {
        return Err(format!(
            "{s:?} is after 9999-12-31T23:59:59.999Z, the last time an API server stores"
        ));
    }
    Ok(ms)
}

/// Fetches `/shadow/GUEST` from a running host, prints it and the verdict;
/// Ok(false) when the shadow has not agreed on every key.
async fn shadow_report(args: ShadowReportArgs) -> anyhow::Result<bool> {
    use http_body_util::BodyExt;
    use wasmctrl::shadow::verdict::Verdict;
    let url = format!("http://{}/shadow/{}", args.address, args.guest);
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Empty<bytes::Bytes>>();
    let uri: hyper::Uri = url.parse().with_context(|| format!("{url} is not a URL"))?;
    let response = tokio::time::timeout(std::time::Duration::from_secs(10), client.get(uri))
        .await
        .with_context(|| format!("GET {url}: no answer in 10 s"))?
        .with_context(|| format!("GET {url}"))?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .with_context(|| format!("GET {url}: reading the answer"))?
        .to_bytes();
    let text = String::from_utf8_lossy(&body);
    if status == hyper::StatusCode::NOT_FOUND {
        anyhow::bail!("{}", text.trim());
    }
    if !status.is_success() {
        anyhow::bail!("GET {url}: {status}: {}", text.trim());
    }
    let report: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("GET {url}: the answer is not a shadow report"))?;
    let verdict = Verdict::of(&report);
    let n = |f: &str| report[f].as_u64().unwrap_or(0);
    println!(
        "shadow {} of guest {}: {} same, {} differ ({} keys), {} errors, {} skipped, {} dry runs ({} refused)",
        report["shadow"].as_str().unwrap_or("?"),
        args.guest,
        n("same"),
        n("differs"),
        n("differing_keys"),
        n("errors"),
        n("skipped"),
        n("dry_runs"),
        n("dry_run_refusals"),
    );
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    if verdict.agreed() {
        println!("agreed on every key compared since it loaded");
    } else {
        println!("not agreed:");
        for reason in &verdict.reasons {
            println!("  - {reason}");
        }
    }
    Ok(verdict.agreed())
}

/// Replays every case; prints one line per case that differs or fails and
/// a summary. Ok(false) when any did.
fn replay(args: ReplayArgs) -> anyhow::Result<bool> {
    use wasmctrl::recording::{case_files, replay, RecordedCase, Replayed};
    let runtime = GuestRuntime::new(args.sandbox.runtime_config()?)?;
    let module = runtime.load_file(&args.guest)?;
    let files = case_files(&args.dir)?;
    if files.is_empty() {
        anyhow::bail!("{}: no recorded cases (*.json) in it", args.dir.display());
    }
    let (mut same, mut differ, mut failed) = (0u64, 0u64, 0u64);
    let mut out = std::io::stdout().lock();
    for path in &files {
        let case = RecordedCase::read(path)?;
        let key = &case.request.key;
        match replay(&module, &case) {
            Replayed::Same => same += 1,
            Replayed::Differs {
                recorded_only,
                replayed_only,
            } => {
                differ += 1;
                writeln!(out, "{}: key {key}: the plan differs", path.display())?;
                for item in &recorded_only {
                    writeln!(out, "  - recorded: {item}")?;
                }
                for item in &replayed_only {
                    writeln!(out, "  + replayed: {item}")?;
                }
            }
            Replayed::Error(why) => {
                failed += 1;
                writeln!(out, "{}: key {key}: not replayed: {why}", path.display())?;
            }
        }
    }
    writeln!(
        out,
        "{} cases: {same} same, {differ} differ, {failed} not replayed",
        files.len()
    )?;
    Ok(differ == 0 && failed == 0)
}

fn reconcile(args: ReconcileArgs) -> anyhow::Result<()> {
    let config = wasmctrl::config::parse_pairs(&args.config)?;
    let runtime = GuestRuntime::new(args.sandbox.runtime_config()?)?;
    let module = runtime.load_file(&args.guest)?;
    let env = guest::environment(&args.namespace, &config);
    // Decode only what the guest's watches need (the same projection the
    // host caches), which is what makes large dumps fast.
    let manifest = module.manifest(&env)?;
    let keep = wasmctrl::offline::keep_for(&manifest);
    let mut objects = Vec::new();
    for path in &args.objects {
        objects.extend(wasmctrl::objects::read_objects_limited(
            path,
            &keep,
            args.max_input_bytes,
        )?);
    }
    let duplicates = wasmctrl::objects::duplicates(&objects);
    if !duplicates.is_empty() {
        return Err(wasmctrl::objects::ObjectsError::Duplicates(duplicates).into());
    }
    let env = env.at(args.now.unwrap_or_else(guest::now_ms));
    let plans =
        wasmctrl::offline::reconcile(&module, &env, &manifest, &objects, args.key.as_deref())?;
    let mut out = std::io::stdout().lock();
    for plan in &plans {
        serde_json::to_writer_pretty(&mut out, plan).context("writing the plan")?;
        writeln!(out).context("writing the plan")?;
    }
    Ok(())
}

async fn kube_client(
    kubeconfig: Option<&std::path::Path>,
    limits: wasmctrl::client::ClientLimits,
    metrics: Option<std::sync::Arc<wasmctrl::metrics::Metrics>>,
) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
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
    wasmctrl::client::build(config, limits, metrics).context("creating the Kubernetes client")
}

fn host_namespace(flag: Option<String>, client: &kube::Client) -> String {
    flag.or_else(|| {
        std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    })
    .unwrap_or_else(|| client.default_namespace().to_string())
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    // Flags are checked before anything connects: a bad value is named
    // even where no cluster is reachable.
    let guest_config = wasmctrl::config::parse_guest_pairs(&args.config)?;
    let runtime = args.sandbox.runtime_config()?;
    let watch_health = args.watch_health.config().map_err(anyhow::Error::msg)?;
    let limits = wasmctrl::client::ClientLimits::default()
        .qps(args.kube_api_qps)
        .burst(args.kube_api_burst);
    let metrics = std::sync::Arc::new(wasmctrl::metrics::Metrics::new());
    let client = kube_client(args.kubeconfig.as_deref(), limits, Some(metrics.clone())).await?;
    let namespace = host_namespace(args.namespace, &client);
    let config = wasmctrl::supervisor::SupervisorConfig {
        guests: args.guests,
        namespace,
        guest_config,
        controller: wasmctrl::controller::ControllerConfig::default()
            .workers(usize::try_from(args.workers).unwrap_or(1))
            .resync(Duration::from_secs(args.resync_seconds))
            .instance(std::env::var("POD_NAME").ok())
            .quarantine(
                wasmctrl::quarantine::QuarantineConfig::default()
                    .failures(args.guest_quarantine_failures),
            ),
        runtime,
        guest_dir: args.guest_dir,
        rescan: Some(Duration::from_secs(args.guest_rescan_seconds)),
        pod: match (std::env::var("POD_NAMESPACE"), std::env::var("POD_NAME")) {
            (Ok(ns), Ok(name)) if !ns.is_empty() && !name.is_empty() => Some((ns, name)),
            _ => None,
        },
        watch_health,
        strict_guests: args.strict_guests,
        shadows: args.shadows,
        shadow_dry_run: args.shadow_dry_run,
        record: args.record.map(|dir| wasmctrl::recording::RecordConfig {
            dir,
            max_cases: usize::try_from(args.record_max_cases).unwrap_or(usize::MAX),
            max_bytes: args.record_max_mib << 20,
            secrets: args.record_secrets,
        }),
    };
    let _metrics_endpoint = wasmctrl::metrics::serve_metrics(args.metrics_addr, metrics.clone())
        .await
        .with_context(|| format!("binding the metrics endpoint on {}", args.metrics_addr))?;
    let (election, leadership) = match args.election.config(&config.namespace)? {
        Some(le_config) => HostElection::preflight(&client, le_config).await?,
        None => HostElection::always_leading(),
    };
    // Informers start (and sync) before the election: a follower is a warm
    // standby, ready to take over.
    let host = std::sync::Arc::new(
        wasmctrl::supervisor::Supervisor::start_with_leadership(
            client,
            config,
            Some(metrics.clone()),
            leadership,
        )
        .await?,
    );
    let master_status = metrics
        .leader
        .get_or_create(&wasmctrl::metrics::NameLabels {
            name: args.election.lease_name,
        })
        .clone();
    let election = election.start(master_status);
    let ready_host = host.clone();
    let refused_host = host.clone();
    let shadow_host = host.clone();
    let _health_endpoint = wasmctrl::metrics::serve_health_with_reports(
        args.health_addr,
        std::sync::Arc::new(move || ready_host.readiness()),
        std::sync::Arc::new(move || refused_host.refused()),
        std::sync::Arc::new(move |guest: &str| shadow_host.shadow_report(guest)),
    )
    .await
    .with_context(|| format!("binding the health endpoint on {}", args.health_addr))?;
    let result = host.run(shutdown_signal(), Duration::from_secs(10)).await;
    match &result {
        // Workers are stopped and drained: release the lease so a standby
        // takes over at once.
        Ok(()) => election.stop().await,
        Err(_) => election.abort(),
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

#[cfg(feature = "dev-server")]
async fn apiserver(args: ApiserverArgs) -> anyhow::Result<()> {
    let mut config = wasmctrl_apiserver::ApiServerConfig::default()
        .listen(args.listen)
        .simulated_nodes(usize::try_from(args.simulated_nodes).unwrap_or(usize::MAX));
    if let Some(h) = args.history {
        config = config.history(usize::try_from(h).unwrap_or(usize::MAX));
    }
    wasmctrl_apiserver::serve_until_signal(config, args.kubeconfig_out.as_deref()).await?;
    Ok(())
}

#[cfg(feature = "dev-server")]
async fn demo(args: DemoArgs) -> anyhow::Result<()> {
    let verdict = wasmctrl::demo::run(wasmctrl::demo::DemoConfig {
        nodes: usize::try_from(args.nodes).unwrap_or(1),
        pods: usize::try_from(args.pods).unwrap_or(1),
        duration: args.duration.map(Duration::from_secs),
        guest: args.guest,
        rate: args.rate,
        seed: args.seed,
    })
    .await?;
    if args.duration.is_some() && !verdict.converged {
        anyhow::bail!("the summary did not converge to the ground truth");
    }
    Ok(())
}

fn guest_configmap(args: ConfigmapArgs) -> anyhow::Result<()> {
    let bytes =
        std::fs::read(&args.path).with_context(|| format!("reading {}", args.path.display()))?;
    let key = match args.key {
        Some(k) => k,
        None => args
            .path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .context("the guest path has no file name")?,
    };
    let cm =
        wasmctrl::packaging::guest_configmap(&args.name, args.namespace.as_deref(), &key, &bytes)?;
    let yaml = serde_yaml::to_string(&cm).context("encoding YAML")?;
    // A closed pipe (`| head`) is the reader's choice, not an error.
    match std::io::stdout().lock().write_all(yaml.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("writing the ConfigMap")
        }
        _ => Ok(()),
    }
}

fn new_guest(args: NewArgs) -> anyhow::Result<()> {
    use wasmctrl::scaffold::{self, Options, Project};
    let project = Project::new(&Options {
        name: args.name.clone(),
        group: Some(args.group),
        version: Some(args.api_version),
        kind: args.kind,
        sdk_path: args.sdk_path.unwrap_or_else(scaffold::source_tree_sdk),
    })?;
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(&args.name));
    let written = project.write(&dir)?;
    let mut out = String::new();
    for path in &written {
        out += &format!("created {}\n", path.display());
    }
    out += &format!(
        "\nnext, in {dir}:\n  \
         cargo test\n  \
         cargo build --target wasm32-wasip2 --profile guest\n  \
         wasmctrl reconcile --guest target/wasm32-wasip2/guest/{crate_name}.wasm --objects sample.yaml --key default/sample\n\
         (README.md there says more)\n",
        dir = dir.display(),
        crate_name = project.crate_name,
    );
    std::io::stdout()
        .lock()
        .write_all(out.as_bytes())
        .context("writing to stdout")
}

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
    let cli = Cli::parse();
    init_tracing();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Command::Run(args) = &cli.command {
        builder.worker_threads(usize::try_from(args.runtime_threads).unwrap_or(1));
    }
    let runtime = match builder.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("wasmctrl: error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match cli.command {
        Command::Reconcile(args) => reconcile(args),
        Command::Replay(args) => match replay(args) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::FAILURE,
            Err(e) => Err(e),
        },
        Command::Run(args) => runtime.block_on(run(*args)),
        #[cfg(feature = "dev-server")]
        Command::Apiserver(args) => runtime.block_on(apiserver(args)),
        #[cfg(feature = "dev-server")]
        Command::Demo(args) => runtime.block_on(demo(args)),
        Command::Guest(GuestCommand::Configmap(args)) => guest_configmap(args),
        Command::Shadow(ShadowCommand::Report(args)) => {
            match runtime.block_on(shadow_report(args)) {
                Ok(true) => Ok(()),
                Ok(false) => return ExitCode::FAILURE,
                Err(e) => Err(e),
            }
        }
        Command::New(args) => new_guest(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wasmctrl: error: {}", error_chain(&e));
            ExitCode::FAILURE
        }
    }
}
