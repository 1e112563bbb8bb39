//! The bench's world: realistic pods (the fixture shared with
//! `informer_memory`, `shared/pods.rs`: ~10 KB as served, with a GPU trainer
//! container, an admission sidecar, volumes, tolerations and a kubelet-style
//! status) spread over `pods / 20` nodes, and a [`World`] model of which pod
//! holds how many GPUs on which node, from which the expected summary is
//! computed. It never talks to a controller; it only creates, deletes and
//! patches pods.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::Client;
use serde_json::json;

use crate::fixture::{self, gpus_of, realistic_pod, CREATE_CONCURRENCY};

pub use crate::fixture::NAMESPACE;
/// Pods per node.
pub const PODS_PER_NODE: usize = 20;

/// The name of node `n`.
pub fn node_name(n: usize) -> String {
    format!("gpu-node-{n:05}")
}

/// One pod the model knows: where it runs and what it holds.
#[derive(Clone, Debug)]
pub struct PodRecord {
    /// Pod name.
    pub name: String,
    /// Node index.
    pub node: usize,
    /// GPUs it holds while live.
    pub gpus: i64,
    /// Still counted (exists, not terminal).
    pub live: bool,
}

/// The bench's model of the cluster: every pod it created and what the
/// summary should read.
#[derive(Debug, Default)]
pub struct World {
    /// Nodes the pods are spread over.
    pub nodes: usize,
    /// Every pod ever created, by index.
    pub pods: Vec<PodRecord>,
}

impl World {
    /// The expected ConfigMap `data`: node → GPUs held by live pods on it,
    /// nodes with 0 omitted.
    pub fn expected(&self) -> BTreeMap<String, String> {
        let mut per_node: BTreeMap<usize, i64> = BTreeMap::new();
        for p in self.pods.iter().filter(|p| p.live) {
            *per_node.entry(p.node).or_default() += p.gpus;
        }
        per_node
            .into_iter()
            .filter(|(_, g)| *g > 0)
            .map(|(n, g)| (node_name(n), g.to_string()))
            .collect()
    }

    /// GPUs held on node `n` now.
    pub fn node_total(&self, n: usize) -> i64 {
        self.pods
            .iter()
            .filter(|p| p.live && p.node == n)
            .map(|p| p.gpus)
            .sum()
    }

    /// A live pod on node `n` holding GPUs, if any.
    pub fn live_pod_on(&self, n: usize) -> Option<usize> {
        self.pods
            .iter()
            .position(|p| p.live && p.node == n && p.gpus > 0)
    }
}

/// Creates pod `i` on node `node` (with its kubelet status) and records it.
pub async fn create_pod(client: &Client, i: usize, node: usize) -> kube::Result<PodRecord> {
    let api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let (name, pod, status) = realistic_pod(i, &node_name(node));
    fixture::create(&api, &name, pod, status).await?;
    Ok(PodRecord {
        name,
        node,
        gpus: gpus_of(i),
        live: true,
    })
}

/// Creates `pods` pods over `pods / PODS_PER_NODE` nodes (at least one).
pub async fn populate(client: &Client, pods: usize) -> World {
    let nodes = (pods / PODS_PER_NODE).max(1);
    let records = futures::stream::iter(0..pods)
        .map(|i| create_pod(client, i, i % nodes))
        .buffered(CREATE_CONCURRENCY)
        .try_collect::<Vec<PodRecord>>()
        .await
        .expect("pods are created");
    World {
        nodes,
        pods: records,
    }
}

/// Deletes pod `name` at once (grace period 0, like `kubectl delete
/// --grace-period=0 --force`), so it stops counting immediately.
pub async fn delete_pod(client: &Client, name: &str) -> kube::Result<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    api.delete(name, &DeleteParams::default().grace_period(0))
        .await
        .map(|_| ())
}

/// Marks pod `name` `Failed`, as its kubelet would when its containers
/// exit: it leaves the field selector and stops holding its GPUs.
pub async fn fail_pod(client: &Client, name: &str) -> kube::Result<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    api.patch_status(
        name,
        &PatchParams {
            field_manager: Some("kubelet".into()),
            ..PatchParams::default()
        },
        &Patch::Merge(json!({"status": {"phase": "Failed"}})),
    )
    .await
    .map(|_| ())
}
