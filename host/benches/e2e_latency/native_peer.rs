//! The native peer: the GPU summary written the usual way with
//! kube-runtime, as its docs recommend — a `reflector` store of typed
//! `k8s_openapi` Pods fed by a `watcher` with the guest's field selector, a
//! reconcile that recomputes the per-node totals from the store with the
//! very same code the guest runs (`guest_gpu_summary::summary`, over the
//! SDK's `pod_request`: kube-scheduler's effective request), and a
//! server-side apply of the ConfigMap `data` with its own field manager,
//! skipped when the data equals what it last wrote.
//!
//! Debounce: each watch event signals a `Notify`, which holds at most one
//! permit, so events arriving while a reconcile runs coalesce into one
//! follow-up reconcile. A resync timer signals it too. The bench runs this
//! as a subprocess of its own binary (`e2e_latency --native-peer ...`), so
//! its memory and CPU are measured like the wasmctrl host's. It never
//! writes anything but its ConfigMap, and never emits events (the guest's
//! Warning events for invalid quantities have no counterpart here: the
//! bench's pods are all valid).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use guest_gpu_summary::summary::{summarize_resource, summary_data, ContainerGpu, PodGpu};
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::Client;
use serde_json::json;
use tokio::sync::Notify;

/// The pods that can hold devices: scheduled and not finished (the guest's
/// selector).
pub const POD_SELECTOR: &str = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed";
/// The field manager of the peer's applies.
pub const FIELD_MANAGER: &str = "native-gpu-summary";
/// What the peer prints on stdout for each reconcile.
pub const RECONCILE_LINE: &str = "reconcile";
/// What the peer prints on stdout for each apply request it sends.
pub const APPLY_LINE: &str = "apply";
/// The resource counted.
const RESOURCE: &str = "nvidia.com/gpu";

/// What the peer is told on its command line.
#[derive(Debug, Clone)]
pub struct PeerArgs {
    /// Kubeconfig to connect with.
    pub kubeconfig: PathBuf,
    /// The ConfigMap's namespace.
    pub namespace: String,
    /// The ConfigMap's name.
    pub name: String,
    /// Resync period.
    pub resync: Duration,
}

impl PeerArgs {
    /// The flags that [`PeerArgs::parse`] reads back.
    pub fn to_args(&self) -> Vec<String> {
        vec![
            "--native-peer".into(),
            "--kubeconfig".into(),
            self.kubeconfig.display().to_string(),
            "--namespace".into(),
            self.namespace.clone(),
            "--name".into(),
            self.name.clone(),
            "--resync-seconds".into(),
            self.resync.as_secs().to_string(),
        ]
    }

    /// Reads `--kubeconfig P --namespace N --name C --resync-seconds S`.
    pub fn parse(args: &[String]) -> anyhow::Result<Self> {
        let get = |flag: &str| crate::args::required(args, flag, "native peer");
        Ok(PeerArgs {
            kubeconfig: PathBuf::from(get("--kubeconfig")?),
            namespace: get("--namespace")?,
            name: get("--name")?,
            resync: Duration::from_secs(get("--resync-seconds")?.parse()?),
        })
    }
}

/// The counted resource's quantity in a resource list.
fn quantity(list: Option<&BTreeMap<String, Quantity>>) -> Option<&str> {
    list.and_then(|m| m.get(RESOURCE)).map(|q| q.0.as_str())
}

fn container(c: &Container) -> ContainerGpu<'_> {
    let get = quantity;
    let resources = c.resources.as_ref();
    ContainerGpu {
        request: get(resources.and_then(|r| r.requests.as_ref())),
        limit: get(resources.and_then(|r| r.limits.as_ref())),
        restart_policy: c.restart_policy.as_deref(),
    }
}

/// One typed pod as the summary's borrowed input.
fn pod_resources(pod: &Pod) -> PodGpu<'_> {
    let spec = pod.spec.as_ref();
    PodGpu {
        namespace: pod.metadata.namespace.as_deref().unwrap_or_default(),
        name: pod.metadata.name.as_deref().unwrap_or_default(),
        node_name: spec.and_then(|s| s.node_name.as_deref()),
        phase: pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        containers: spec.map_or_else(Vec::new, |s| s.containers.iter().map(container).collect()),
        init_containers: spec
            .and_then(|s| s.init_containers.as_ref())
            .map_or_else(Vec::new, |cs| cs.iter().map(container).collect()),
        overhead: quantity(spec.and_then(|s| s.overhead.as_ref())),
    }
}

/// The ConfigMap `data` for the pods in `store`.
pub fn desired(store: &[Arc<Pod>]) -> BTreeMap<String, String> {
    summary_data(&summarize_resource(
        RESOURCE,
        store.iter().map(|p| pod_resources(p)),
    ))
}

/// Runs the peer until killed.
pub async fn run(args: PeerArgs) -> anyhow::Result<()> {
    let kubeconfig = kube::config::Kubeconfig::read_from(&args.kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    let client = Client::try_from(config)?;
    let pods: Api<Pod> = Api::all(client.clone());
    let configmaps: Api<ConfigMap> = Api::namespaced(client, &args.namespace);

    let (reader, writer) = reflector::store::<Pod>();
    let changed = Arc::new(Notify::new());
    let on_event = changed.clone();
    tokio::spawn(
        reflector(
            writer,
            watcher(pods, watcher::Config::default().fields(POD_SELECTOR)),
        )
        .default_backoff()
        .for_each(move |event| {
            match event {
                Ok(_) => on_event.notify_one(),
                Err(e) => eprintln!("native peer: watch error: {e}"),
            }
            futures::future::ready(())
        }),
    );
    let on_resync = changed.clone();
    let resync = args.resync;
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(resync);
        loop {
            tick.tick().await;
            on_resync.notify_one();
        }
    });

    reader.wait_until_ready().await?;
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut written: Option<BTreeMap<String, String>> = None;
    loop {
        changed.notified().await;
        // One line per reconcile and per write request, for the bench to
        // count (stdout is line-buffered: one small write each).
        println!("{RECONCILE_LINE}");
        let data = desired(&reader.state());
        if written.as_ref() == Some(&data) {
            continue;
        }
        println!("{APPLY_LINE}");
        let body = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": args.name, "namespace": args.namespace},
            "data": data,
        });
        match configmaps
            .patch(&args.name, &params, &Patch::Apply(&body))
            .await
        {
            Ok(_) => written = Some(data),
            Err(e) => {
                eprintln!("native peer: apply failed: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
                changed.notify_one();
            }
        }
    }
}
