//! The cluster side of the soak: GPU pods spread over nodes, the churn that
//! creates, deletes, replaces and finishes them, and the summary the guest
//! should converge to, computed natively with the guest's own logic crate
//! from the server's pods. It never touches the host process.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use guest_gpu_summary::summary::{summarize, summary_data, ContainerGpu, PodGpu};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;

/// Namespace of the churned pods.
pub const PODS_NS: &str = "ml";
/// The host's namespace, where the summary ConfigMap lives.
pub const HOST_NS: &str = "ops";
/// The summary ConfigMap's name (the guest's default).
pub const SUMMARY: &str = "gpu-summary";
/// The longest one churn operation may take.
const OP_TIMEOUT: Duration = Duration::from_secs(3);
/// Requests in flight while creating the initial pods.
const CREATE_CONCURRENCY: usize = 16;

/// The pods the churn knows about (those it may delete, replace or finish).
pub struct World {
    client: Client,
    nodes: usize,
    target: usize,
    live: std::sync::Mutex<Vec<(String, usize)>>,
    next: AtomicU64,
    rng: std::sync::Mutex<fastrand::Rng>,
    /// Churn operations the server accepted.
    pub changes: AtomicU64,
    /// Churn operations that failed (faults hit the churn's client too).
    pub failed: AtomicU64,
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn pod_json(name: &str, node: usize, gpus: u32) -> serde_json::Value {
    let mut container = json!({"name": "trainer", "image": "trainer:1"});
    if gpus > 0 {
        // An extended resource's request defaults to its limit.
        container["resources"] = json!({"limits": {"nvidia.com/gpu": gpus.to_string()}});
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": PODS_NS, "labels": {"app": "soak"}},
        "spec": {"nodeName": format!("gpu-node-{node}"), "containers": [container]},
    })
}

impl World {
    /// A world of `target` pods over `nodes` nodes (not created yet).
    pub fn new(client: Client, nodes: usize, target: usize, seed: u64) -> World {
        World {
            client,
            nodes,
            target,
            live: std::sync::Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
            rng: std::sync::Mutex::new(fastrand::Rng::with_seed(seed)),
            changes: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        }
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), PODS_NS)
    }

    fn rand(&self, n: usize) -> usize {
        lock(&self.rng).usize(..n.max(1))
    }

    /// Creates the initial pods (round-robin over the nodes, 0–4 GPUs each).
    pub async fn populate(&self) {
        let pods = self.pods();
        let made: Vec<_> = futures::stream::iter(0..self.target)
            .map(|i| {
                let pods = pods.clone();
                let (name, node, gpus) = (self.fresh_name(), i % self.nodes, self.gpus());
                async move {
                    let pod: Pod = serde_json::from_value(pod_json(&name, node, gpus))
                        .expect("pod fixture is a Pod");
                    pods.create(&PostParams::default(), &pod)
                        .await
                        .expect("initial pods are created");
                    (name, node)
                }
            })
            .buffer_unordered(CREATE_CONCURRENCY)
            .collect()
            .await;
        lock(&self.live).extend(made);
    }

    fn fresh_name(&self) -> String {
        format!("soak-{}", self.next.fetch_add(1, Relaxed))
    }

    fn gpus(&self) -> u32 {
        u32::try_from(self.rand(5)).unwrap_or(0)
    }

    /// Churns at `rate` operations per second until `stop` is set.
    pub async fn churn(&self, rate: f64, stop: Arc<AtomicBool>) {
        let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
        while !stop.load(Relaxed) {
            tick.tick().await;
            // kube's client retries 429/503 itself with back-off: bound an
            // operation so the fault window stays near what was drawn (an
            // abandoned request may still land; the expected summary is
            // read from the server, so that is harmless).
            let ok = tokio::time::timeout(OP_TIMEOUT, self.one_change())
                .await
                .unwrap_or(false);
            let counter = if ok { &self.changes } else { &self.failed };
            counter.fetch_add(1, Relaxed);
        }
    }

    /// One random change; true when the server took it.
    async fn one_change(&self) -> bool {
        let below = lock(&self.live).len() < self.target;
        let roll = self.rand(100);
        // Keep the population near the target: create more when below.
        let (create, delete, replace) = if below { (45, 65, 90) } else { (25, 55, 90) };
        let pods = self.pods();
        if roll < create || lock(&self.live).is_empty() {
            let (name, node) = (self.fresh_name(), self.rand(self.nodes));
            let pod: Pod =
                serde_json::from_value(pod_json(&name, node, self.gpus())).expect("a Pod");
            let ok = pods.create(&PostParams::default(), &pod).await.is_ok();
            if ok {
                lock(&self.live).push((name, node));
            }
            return ok;
        }
        let picked = {
            let mut live = lock(&self.live);
            let i = lock(&self.rng).usize(..live.len());
            live.swap_remove(i)
        };
        let (name, node) = picked.clone();
        let gone = |r: &Result<_, kube::Error>| match r {
            Ok(_) => true,
            Err(kube::Error::Api(status)) => status.code == 404,
            Err(_) => false,
        };
        if roll < delete {
            let r = pods
                .delete(&name, &DeleteParams::default().grace_period(0))
                .await;
            let ok = gone(&r);
            if !ok {
                lock(&self.live).push(picked);
            }
            ok
        } else if roll < replace {
            // A pod's resources are immutable: changing a GPU request is a
            // replacement on the same node, as a ReplicaSet rollout does.
            let r = pods
                .delete(&name, &DeleteParams::default().grace_period(0))
                .await;
            if !gone(&r) {
                lock(&self.live).push(picked);
                return false;
            }
            let fresh = self.fresh_name();
            let pod: Pod =
                serde_json::from_value(pod_json(&fresh, node, self.gpus())).expect("a Pod");
            if pods.create(&PostParams::default(), &pod).await.is_ok() {
                lock(&self.live).push((fresh, node));
            }
            true
        } else {
            // Finished: it stays in the server but holds no GPUs (and leaves
            // the guest's field selector).
            let phase = if self.rand(2) == 0 {
                "Succeeded"
            } else {
                "Failed"
            };
            pods.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"phase": phase}})),
            )
            .await
            .is_ok()
        }
    }
}

type Resources = BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>;

/// The GPU amount in a requests/limits/overhead map.
fn gpu(r: Option<&Resources>) -> Option<&str> {
    r.and_then(|m| m.get("nvidia.com/gpu"))
        .map(|q| q.0.as_str())
}

/// A container as the guest reads it.
fn container(c: &k8s_openapi::api::core::v1::Container) -> ContainerGpu<'_> {
    let r = c.resources.as_ref();
    let mut view = ContainerGpu::new(
        gpu(r.and_then(|r| r.requests.as_ref())),
        gpu(r.and_then(|r| r.limits.as_ref())),
    );
    view.restart_policy = c.restart_policy.as_deref();
    view
}

/// A pod as the guest reads it.
fn pod_view(pod: &Pod) -> PodGpu<'_> {
    let mut view = PodGpu::new(
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default(),
    );
    view.phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if let Some(spec) = &pod.spec {
        view.node_name = spec.node_name.as_deref();
        view.containers = spec.containers.iter().map(container).collect();
        view.init_containers = spec
            .init_containers
            .iter()
            .flatten()
            .map(container)
            .collect();
        view.overhead = gpu(spec.overhead.as_ref());
    }
    view
}

/// The summary the guest must converge to, computed with its own logic
/// crate over every pod the server holds.
pub async fn expected_summary(client: &Client) -> Option<BTreeMap<String, String>> {
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await
        .ok()?;
    Some(summary_data(&summarize(pods.items.iter().map(pod_view))))
}

/// The summary ConfigMap's `data` as the server holds it (None: not
/// readable or not there yet).
pub async fn actual_summary(client: &Client) -> Option<BTreeMap<String, String>> {
    Api::<ConfigMap>::namespaced(client.clone(), HOST_NS)
        .get_opt(SUMMARY)
        .await
        .ok()
        .flatten()
        .map(|cm| cm.data.unwrap_or_default())
}
