//! Simulated nodes (`ApiServerConfig::simulated_nodes`): Ready nodes, a
//! scheduler binding pending pods and kubelets running them, observed
//! through the kube client as a guest waiting for its children would.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;
use wasmctrl_apiserver::ApiServerConfig;

use crate::common::{start, start_with, WAIT};

fn busybox(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": [{
            "name": "busybox",
            "image": "busybox:1.34.1",
            "command": ["sh", "-c", "for i in $(seq 1 5); do echo kube $i; sleep 0.1; done"],
        }]}
    }))
    .unwrap()
}

fn condition(pod: &Pod, type_: &str) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.clone())
}

/// kube-rs's own cluster test `pod_can_await_conditions`, which fails on a
/// bare API server: an unbound busybox pod is awaited until it runs.
#[tokio::test]
async fn an_unbound_pod_is_scheduled_and_runs_ready_on_a_simulated_node() {
    let (_server, client) = start_with(ApiServerConfig::default().simulated_nodes(3)).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let listed = nodes.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 3);
    for n in &listed.items {
        let ready = n.status.as_ref().unwrap().conditions.as_ref().unwrap();
        assert!(ready
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True"));
    }

    let pods: Api<Pod> = Api::namespaced(client, "default");
    let created = pods
        .create(&PostParams::default(), &busybox("busybox-kube4"))
        .await
        .unwrap();
    let running = tokio::time::timeout(
        WAIT,
        await_condition(pods.clone(), "busybox-kube4", conditions::is_pod_running()),
    )
    .await
    .expect("the pod runs within the wait")
    .unwrap()
    .unwrap();
    let node = running.spec.as_ref().unwrap().node_name.clone().unwrap();
    assert!(node.starts_with("sim-node-"), "{node}");
    for t in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
        assert_eq!(condition(&running, t).as_deref(), Some("True"), "{t}");
    }
    let status = running.status.as_ref().unwrap();
    let containers = status.container_statuses.as_ref().unwrap();
    assert_eq!(containers.len(), 1);
    assert!(containers[0].ready && containers[0].started == Some(true));
    assert!(containers[0].state.as_ref().unwrap().running.is_some());
    assert!(status.pod_ip.is_some() && status.host_ip.is_some());

    // A watcher from the creation on saw each step a kubelet takes:
    // bound, then containers being created and not ready, then ready.
    let rv = created.metadata.resource_version.unwrap();
    let mut events = pods
        .watch(&WatchParams::default().timeout(2), &rv)
        .await
        .unwrap()
        .boxed();
    let mut seen = Vec::new();
    while let Ok(Some(e)) = events.try_next().await {
        if let WatchEvent::Modified(p) = e {
            let phase = p.status.as_ref().and_then(|s| s.phase.clone());
            seen.push((phase, condition(&p, "PodScheduled"), condition(&p, "Ready")));
            if condition(&p, "Ready").as_deref() == Some("True") {
                break;
            }
        }
    }
    let s = |v: &str| Some(v.to_string());
    assert_eq!(
        seen,
        vec![
            (s("Pending"), s("True"), None),
            (s("Pending"), s("True"), s("False")),
            (s("Running"), s("True"), s("True")),
        ]
    );
}

#[tokio::test]
async fn a_pod_whose_node_selector_no_simulated_node_matches_stays_unschedulable() {
    let (_server, client) = start_with(ApiServerConfig::default().simulated_nodes(2)).await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let mut pod = busybox("gpu");
    pod.spec.as_mut().unwrap().node_selector =
        Some([("accelerator".to_string(), "h100".to_string())].into());
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let pending = tokio::time::timeout(
        WAIT,
        await_condition(pods.clone(), "gpu", |p: Option<&Pod>| {
            p.is_some_and(|p| condition(p, "PodScheduled").as_deref() == Some("False"))
        }),
    )
    .await
    .expect("the scheduler reports the pod unschedulable")
    .unwrap()
    .unwrap();
    let cond = pending
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .unwrap();
    assert_eq!(cond.reason.as_deref(), Some("Unschedulable"));
    assert_eq!(
        cond.message.as_deref(),
        Some("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.")
    );
    assert!(pending.spec.unwrap().node_name.is_none());
}

#[tokio::test]
async fn pods_bound_to_a_node_that_is_not_simulated_are_left_alone() {
    let (_server, client) = start_with(ApiServerConfig::default().simulated_nodes(1)).await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let mut elsewhere = busybox("elsewhere");
    elsewhere.spec.as_mut().unwrap().node_name = Some("real-node".into());
    pods.create(&PostParams::default(), &elsewhere)
        .await
        .unwrap();
    // A pod created after it runs: the simulator has seen both.
    pods.create(&PostParams::default(), &busybox("after"))
        .await
        .unwrap();
    tokio::time::timeout(
        WAIT,
        await_condition(pods.clone(), "after", conditions::is_pod_running()),
    )
    .await
    .unwrap()
    .unwrap();
    let left = pods.get("elsewhere").await.unwrap();
    let status = left.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert!(status.conditions.is_none() && status.start_time.is_none());
}

#[tokio::test]
async fn by_default_the_server_has_no_nodes() {
    let (_server, client) = start().await;
    let nodes: Api<Node> = Api::all(client);
    assert!(nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .is_empty());
}

fn deployment(replicas: i32, image: &str) -> k8s_openapi::api::apps::v1::Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": image}]}}}
    }))
    .unwrap()
}

/// With simulated nodes, a Deployment gets a ReplicaSet, the ReplicaSet its
/// pods, and both a status a guest can wait on (kube-runtime's
/// `is_deployment_completed`); a new template gets a new ReplicaSet and the
/// old one is scaled to 0; a scale-down removes pods.
#[tokio::test]
async fn a_deployment_becomes_available_rolls_to_a_new_template_and_scales_down() {
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    use kube::api::{Patch, PatchParams};
    let (_server, client) = start_with(ApiServerConfig::default().simulated_nodes(2)).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    deployments
        .create(&PostParams::default(), &deployment(3, "nginx:1"))
        .await
        .unwrap();
    let completed = |generation: i64| {
        let deployments = deployments.clone();
        async move {
            let done = await_condition(deployments, "web", conditions::is_deployment_completed());
            let d = tokio::time::timeout(WAIT, done)
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            let status = d.status.unwrap();
            assert_eq!(status.observed_generation, Some(generation));
            status
        }
    };
    let status = completed(1).await;
    assert_eq!(
        (
            status.replicas,
            status.updated_replicas,
            status.ready_replicas,
            status.available_replicas
        ),
        (Some(3), Some(3), Some(3), Some(3))
    );
    let available = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_.as_deref() == Some("Available"))
        .unwrap();
    assert_eq!(
        (available.status.as_deref(), available.reason.as_deref()),
        (Some("True"), Some("MinimumReplicasAvailable"))
    );
    let running = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(running.items.len(), 3);
    assert!(running
        .items
        .iter()
        .all(|p| condition(p, "Ready").as_deref() == Some("True")));

    let image = json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:2"}]}}}});
    deployments
        .patch("web", &PatchParams::default(), &Patch::Strategic(image))
        .await
        .unwrap();
    completed(2).await;
    let rs = sets.list(&ListParams::default()).await.unwrap().items;
    let mut replicas: Vec<i32> = rs.iter().map(|r| r.spec.replicas.unwrap()).collect();
    replicas.sort_unstable();
    assert_eq!(replicas, [0, 3]);

    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    let status = completed(3).await;
    assert_eq!(status.replicas, Some(1));
    let left = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(left.items.len(), 1);
}
