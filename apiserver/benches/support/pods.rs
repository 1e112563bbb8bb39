//! The pods the scale bench (`apiserver_scale`) and the scale tests
//! (`tests/scale.rs`) write: the pod fixture, and the label patch whose
//! fan-out both watch. It never starts a server and never measures.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

/// Patches in flight while touching pods.
const IN_FLIGHT: usize = 64;

/// Pod `pod-{i:06}`: one container with limits and two env vars, spread
/// over 16 shards and 500 nodes.
pub fn pod(i: usize) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("pod-{i:06}"), "labels": {"app": "bench", "shard": format!("{}", i % 16)}},
        "spec": {"nodeName": format!("node-{}", i % 500), "containers": [{
            "name": "main", "image": "registry.example.com/team/app:1.2.3",
            "resources": {"limits": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"}},
            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
        }]}
    }))
    .unwrap()
}

/// Labels the first `changes` pods `touched=yes` with merge patches,
/// [`IN_FLIGHT`] at a time.
pub async fn touch(api: &Api<Pod>, changes: usize) {
    futures::stream::iter(0..changes)
        .map(|i| {
            let api = api.clone();
            async move {
                let p = Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}}));
                api.patch(&format!("pod-{i:06}"), &PatchParams::default(), &p)
                    .await
                    .map(drop)
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await
        .unwrap();
}
