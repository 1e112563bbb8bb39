//! Simulated nodes, as kwok offers them on top of envtest: N Ready nodes, a
//! trivial scheduler that binds pending pods to them, and for each node a
//! kubelet that starts a bound pod's containers at once — so a client that
//! waits for its pods to be scheduled, run and become Ready can be tested
//! without a cluster.
//!
//! The pod's status moves as a kubelet moves it, one write per step, so a
//! watcher sees each transition: bound (`PodScheduled`), then Pending with
//! its containers `ContainerCreating` (`Initialized`, not Ready), then
//! Running with every container running and ready (`ContainersReady`,
//! `Ready`). Pods bound to other nodes, pods of another scheduler, and
//! pods being deleted are left alone; a pod whose `nodeSelector` no
//! simulated node matches stays Pending, `Unschedulable`. Nothing runs:
//! probes, exec, logs and port-forward need a real kubelet.
//!
//! One background task per server follows the store's change stream. It
//! writes pods' `spec.nodeName` and `status` only, never handles requests,
//! and is off unless [`crate::config::ApiServerConfig::simulated_nodes`]
//! asks for nodes.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use serde_json::{json, Map, Value};
use tokio::sync::broadcast::error::RecvError;

use crate::rules::objects::{meta_str, now_rfc3339, prepare_create, strategy_create};
use crate::storage::registry::Registry;
use crate::storage::store::{EventType, Store};

/// Name of simulated node `i` is this prefix and `i`.
const NODE_PREFIX: &str = "sim-node-";

/// The annotation that marks a node as simulated (kwok's is `kwok.x-k8s.io/node`).
const SIMULATED_ANNOTATION: &str = "wasmctrl.dev/simulated-node";

/// The scheduler name pods get by default, the only one simulated.
const SCHEDULER: &str = "default-scheduler";

/// What each simulated node offers (`status.capacity` and `allocatable`).
const CAPACITY: [(&str, &str); 4] = [
    ("cpu", "32"),
    ("memory", "256Gi"),
    ("pods", "110"),
    ("ephemeral-storage", "1Ti"),
];

/// The kubelet version the nodes report: the server's Kubernetes minor.
const KUBELET_VERSION: &str = "v1.32.0";

/// Creates `count` simulated nodes in `store` and starts their scheduler
/// and kubelets; the task ends with the store.
pub(crate) fn spawn(store: &Arc<Store>, registry: &Registry, count: usize) {
    if count == 0 {
        return;
    }
    if let Some(info) = registry.lookup("", "v1", "nodes") {
        let now = now_rfc3339();
        for i in 0..count {
            let mut node = node(i, &now);
            prepare_create(&info, &mut node, &now);
            strategy_create(&info, &mut node);
            // A fresh store cannot already hold them.
            let _ = store.create("nodes", (String::new(), node_name(i)), node);
        }
    }
    let weak: Weak<Store> = Arc::downgrade(store);
    let mut rx = store.changes();
    tokio::spawn(async move {
        let mut sim = Simulator::default();
        loop {
            match rx.recv().await {
                Ok(r) if &*r.resource == "pods" && r.event != EventType::Deleted => {
                    let Some(store) = weak.upgrade() else { return };
                    let pod: Value = serde_json::from_slice(&r.json).unwrap_or(Value::Null);
                    sim.advance(&store, (r.namespace.clone(), r.name.clone()), r.rv, &pod);
                }
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => {
                    let Some(store) = weak.upgrade() else { return };
                    sim.resync(&store);
                }
                Err(RecvError::Closed) => return,
            }
        }
    });
}

fn node_name(i: usize) -> String {
    format!("{NODE_PREFIX}{i}")
}

/// Node `i` as its kubelet registers it, Ready.
fn node(i: usize, now: &str) -> Value {
    let name = node_name(i);
    let capacity: Map<String, Value> = CAPACITY
        .iter()
        .map(|(k, v)| ((*k).to_string(), json!(v)))
        .collect();
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({"type": type_, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
            "annotations": {SIMULATED_ANNOTATION: "true"},
        },
        "spec": {"podCIDR": pod_cidr(i), "podCIDRs": [pod_cidr(i)]},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": node_ip(i)},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": "", "systemUUID": "", "bootID": "",
                "kernelVersion": "", "osImage": "simulated",
                "containerRuntimeVersion": "simulated://1.0",
                "kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": "",
                "operatingSystem": "linux", "architecture": "amd64",
            },
        },
    })
}

/// Node `i`'s address: 10.0.x.y, skipping .0 and .1 of each /24.
fn node_ip(i: usize) -> String {
    format!("10.0.{}.{}", (i / 250) % 256, i % 250 + 2)
}

/// Node `i`'s pod range: 10.(244 + i/256).(i%256).0/24.
fn pod_cidr(i: usize) -> String {
    format!("10.{}.{}.0/24", 244 + (i / 256) % 12, i % 256)
}

/// The scheduler's and kubelets' memory: the next node to bind to and the
/// next pod address of each node.
#[derive(Debug, Default)]
struct Simulator {
    next_node: usize,
    next_ip: BTreeMap<usize, usize>,
}

impl Simulator {
    /// Takes `pod`'s next step, if it has one, with a write conditional on
    /// `rv`: a conflict means a newer version is on its way, and that one
    /// takes the step.
    fn advance(&mut self, store: &Store, key: (String, String), rv: u64, pod: &Value) {
        let step = match self.step(store, pod) {
            Some(s) => s,
            None => return,
        };
        let _ = store.update("pods", &key, Some(rv), step);
    }

    /// After a lost change notification: every pod once more.
    fn resync(&mut self, store: &Store) {
        let page = store.list("pods", None, None, 0, |_| true);
        for json in page.items {
            let pod: Value = serde_json::from_slice(&json).unwrap_or(Value::Null);
            let key = (
                meta_str(&pod, "namespace").unwrap_or_default().to_string(),
                meta_str(&pod, "name").unwrap_or_default().to_string(),
            );
            let rv = meta_str(&pod, "resourceVersion")
                .and_then(|r| r.parse().ok())
                .unwrap_or(0);
            self.advance(store, key, rv, &pod);
        }
    }

    /// `pod` after its next step, or None when it has none.
    fn step(&mut self, store: &Store, pod: &Value) -> Option<Value> {
        if meta_str(pod, "deletionTimestamp").is_some() {
            return None;
        }
        let phase = pod.pointer("/status/phase").and_then(Value::as_str);
        if matches!(phase, Some("Succeeded" | "Failed")) {
            return None;
        }
        let node = pod.pointer("/spec/nodeName").and_then(Value::as_str);
        match node.filter(|n| !n.is_empty()) {
            None => self.schedule(store, pod),
            Some(n) => {
                let i = simulated_index(store, n)?;
                let now = now_rfc3339();
                if pod.pointer("/status/startTime").is_none() {
                    Some(created(pod, i, &now))
                } else if phase == Some("Pending") {
                    let ip = self.next_ip.entry(i).or_insert(0);
                    *ip += 1;
                    Some(running(pod, &pod_ip(i, *ip), &now))
                } else {
                    None
                }
            }
        }
    }

    /// Binds `pod` to the next simulated node its `nodeSelector` matches
    /// (round robin), or marks it unschedulable.
    fn schedule(&mut self, store: &Store, pod: &Value) -> Option<Value> {
        // An empty name is the default one, as the defaulting gives it.
        let scheduler = pod
            .pointer("/spec/schedulerName")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or(SCHEDULER);
        if scheduler != SCHEDULER {
            return None;
        }
        let nodes = simulated_nodes(store);
        let selector = pod.pointer("/spec/nodeSelector").and_then(Value::as_object);
        let fits = |labels: &Value| {
            selector.is_none_or(|s| s.iter().all(|(k, v)| labels.get(k) == Some(v)))
        };
        let fitting: Vec<&(usize, String, Value)> =
            nodes.iter().filter(|(_, _, l)| fits(l)).collect();
        let now = now_rfc3339();
        let mut pod = pod.clone();
        if fitting.is_empty() {
            let message = format!(
                "0/{} nodes are available: {} node(s) didn't match Pod's node affinity/selector.",
                nodes.len(),
                nodes.len()
            );
            let unschedulable = json!({"type": "PodScheduled", "status": "False",
                "reason": "Unschedulable", "message": message,
                "lastProbeTime": null, "lastTransitionTime": now});
            let same = pod
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|c| c.iter().find(|c| c["type"] == "PodScheduled"))
                .is_some_and(|c| c["reason"] == "Unschedulable" && c["message"] == message);
            if same {
                return None;
            }
            set_condition(&mut pod, unschedulable);
            return Some(pod);
        }
        let (_, name, _) = fitting[self.next_node % fitting.len()];
        self.next_node = self.next_node.wrapping_add(1);
        pod["spec"]["nodeName"] = json!(name);
        set_condition(
            &mut pod,
            json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null,
                   "lastTransitionTime": now}),
        );
        Some(pod)
    }
}

/// The simulated nodes in the store: index, name and labels.
fn simulated_nodes(store: &Store) -> Vec<(usize, String, Value)> {
    store
        .list("nodes", None, None, 0, |_| true)
        .items
        .iter()
        .filter_map(|json| serde_json::from_slice::<Value>(json).ok())
        .filter_map(|n| {
            let name = meta_str(&n, "name")?.to_string();
            let i = simulated_index_of(&n)?;
            let labels = n.pointer("/metadata/labels").cloned().unwrap_or(json!({}));
            Some((i, name, labels))
        })
        .collect()
}

/// The index of stored node `name`, if it is a simulated node.
fn simulated_index(store: &Store, name: &str) -> Option<usize> {
    let node = store.get("nodes", &(String::new(), name.to_string()))?;
    simulated_index_of(&node.value())
}

fn simulated_index_of(node: &Value) -> Option<usize> {
    node.pointer("/metadata/annotations")
        .and_then(|a| a.get(SIMULATED_ANNOTATION))?;
    meta_str(node, "name")?
        .strip_prefix(NODE_PREFIX)?
        .parse()
        .ok()
}

/// Pod address `n` (from 1) on node `i`: inside the node's pod range.
fn pod_ip(i: usize, n: usize) -> String {
    format!(
        "10.{}.{}.{}",
        244 + (i / 256) % 12,
        i % 256,
        (n - 1) % 253 + 2
    )
}

/// The kubelet's first status of a bound pod: Pending, containers being
/// created, init containers done.
fn created(pod: &Value, node: usize, now: &str) -> Value {
    let mut pod = pod.clone();
    let host_ip = node_ip(node);
    pod["status"]["phase"] = json!("Pending");
    pod["status"]["hostIP"] = json!(host_ip);
    pod["status"]["hostIPs"] = json!([{"ip": host_ip}]);
    pod["status"]["startTime"] = json!(now);
    let not_ready = |type_: &str| {
        json!({"type": type_, "status": "False", "reason": "ContainersNotReady",
               "message": format!("containers with unready status: [{}]", container_names(&pod, "containers").join(" ")),
               "lastProbeTime": null, "lastTransitionTime": now})
    };
    let conditions = [
        json!({"type": "PodReadyToStartContainers", "status": "False", "lastProbeTime": null, "lastTransitionTime": now}),
        json!({"type": "Initialized", "status": "True", "lastProbeTime": null, "lastTransitionTime": now}),
        not_ready("Ready"),
        not_ready("ContainersReady"),
    ];
    for c in conditions {
        set_condition(&mut pod, c);
    }
    pod["status"]["initContainerStatuses"] = statuses(
        &pod,
        "initContainers",
        |_| json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}}),
    );
    pod["status"]["containerStatuses"] = statuses(
        &pod,
        "containers",
        |_| json!({"waiting": {"reason": "ContainerCreating"}}),
    );
    drop_empty(&mut pod, "initContainerStatuses");
    pod
}

/// The kubelet's status once every container started: Running and Ready.
fn running(pod: &Value, ip: &str, now: &str) -> Value {
    let mut pod = pod.clone();
    pod["status"]["phase"] = json!("Running");
    pod["status"]["podIP"] = json!(ip);
    pod["status"]["podIPs"] = json!([{"ip": ip}]);
    for type_ in ["PodReadyToStartContainers", "Ready", "ContainersReady"] {
        set_condition(
            &mut pod,
            json!({"type": type_, "status": "True", "lastProbeTime": null, "lastTransitionTime": now}),
        );
    }
    pod["status"]["containerStatuses"] = statuses(
        &pod,
        "containers",
        |_| json!({"running": {"startedAt": now}}),
    );
    if let Some(list) = pod["status"]["containerStatuses"].as_array_mut() {
        for s in list {
            s["ready"] = json!(true);
            s["started"] = json!(true);
        }
    }
    pod
}

fn container_names(pod: &Value, field: &str) -> Vec<String> {
    pod.pointer(&format!("/spec/{field}"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect()
}

/// One status per container of `spec.<field>`, in state `state(name)`,
/// not ready, as the kubelet writes them.
fn statuses(pod: &Value, field: &str, state: impl Fn(&str) -> Value) -> Value {
    let images: Vec<(String, String)> = pod
        .pointer(&format!("/spec/{field}"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            Some((
                c["name"].as_str()?.to_string(),
                c["image"].as_str().unwrap_or_default().to_string(),
            ))
        })
        .collect();
    let uid = meta_str(pod, "uid").unwrap_or_default().replace('-', "");
    Value::Array(
        images
            .into_iter()
            .enumerate()
            .map(|(i, (name, image))| {
                json!({
                    "name": name,
                    "image": image,
                    "imageID": "",
                    "containerID": format!("simulated://{uid}-{i}"),
                    "ready": false,
                    "started": false,
                    "restartCount": 0,
                    "state": state(&name),
                    "lastState": {},
                })
            })
            .collect(),
    )
}

fn drop_empty(pod: &mut Value, status_field: &str) {
    if pod["status"][status_field]
        .as_array()
        .is_some_and(Vec::is_empty)
    {
        if let Some(s) = pod["status"].as_object_mut() {
            s.remove(status_field);
        }
    }
}

/// Sets `condition` in `status.conditions` by type; like the kubelet,
/// `lastTransitionTime` moves only when `status` changes.
fn set_condition(pod: &mut Value, mut condition: Value) {
    if !pod["status"]["conditions"].is_array() {
        pod["status"]["conditions"] = json!([]);
    }
    let Some(list) = pod["status"]["conditions"].as_array_mut() else {
        return;
    };
    match list.iter_mut().find(|c| c["type"] == condition["type"]) {
        Some(old) => {
            if old["status"] == condition["status"] {
                condition["lastTransitionTime"] = old["lastTransitionTime"].clone();
            }
            *old = condition;
        }
        None => list.push(condition),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn pod() -> Value {
        json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u-1"},
            "spec": {"schedulerName": SCHEDULER, "containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": "Pending", "qosClass": "BestEffort"}
        })
    }

    fn condition<'a>(pod: &'a Value, type_: &str) -> &'a Value {
        pod["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == type_)
            .unwrap()
    }

    #[test]
    fn a_bound_pod_is_created_then_runs_ready_with_its_conditions_in_order() {
        let mut p = pod();
        p["spec"]["nodeName"] = json!("sim-node-0");
        let p = created(&p, 0, "2026-01-01T00:00:00Z");
        assert_eq!(p["status"]["phase"], "Pending");
        assert_eq!(p["status"]["hostIP"], "10.0.0.2");
        assert_eq!(condition(&p, "Initialized")["status"], "True");
        assert_eq!(condition(&p, "Ready")["status"], "False");
        assert_eq!(
            condition(&p, "ContainersReady")["message"],
            "containers with unready status: [c]"
        );
        assert_eq!(
            p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"],
            "ContainerCreating"
        );
        assert!(p["status"].get("initContainerStatuses").is_none());

        let r = running(&p, "10.244.0.2", "2026-01-01T00:00:05Z");
        assert_eq!(r["status"]["phase"], "Running");
        assert_eq!(r["status"]["podIP"], "10.244.0.2");
        for t in ["PodReadyToStartContainers", "Ready", "ContainersReady"] {
            assert_eq!(condition(&r, t)["status"], "True", "{t}");
            assert_eq!(
                condition(&r, t)["lastTransitionTime"],
                "2026-01-01T00:00:05Z"
            );
        }
        // Initialized did not change, so its transition time stays.
        assert_eq!(
            condition(&r, "Initialized")["lastTransitionTime"],
            "2026-01-01T00:00:00Z"
        );
        let c = &r["status"]["containerStatuses"][0];
        assert_eq!(
            (c["ready"].clone(), c["started"].clone()),
            (json!(true), json!(true))
        );
        assert_eq!(c["image"], "busybox");
    }

    #[test]
    fn init_containers_have_completed_when_the_pod_is_created() {
        let mut p = pod();
        p["spec"]["initContainers"] = json!([{"name": "init", "image": "busybox"}]);
        let p = created(&p, 3, "2026-01-01T00:00:00Z");
        assert_eq!(
            p["status"]["initContainerStatuses"][0]["state"]["terminated"]["reason"],
            "Completed"
        );
        assert_eq!(p["status"]["hostIP"], "10.0.0.5");
    }

    #[test]
    fn node_and_pod_addresses_stay_distinct_and_inside_the_nodes_range() {
        assert_eq!(pod_cidr(1), "10.244.1.0/24");
        assert_eq!(pod_ip(1, 1), "10.244.1.2");
        assert_eq!(pod_ip(1, 253), "10.244.1.254");
        assert_eq!(pod_ip(1, 254), "10.244.1.2");
        assert_ne!(node_ip(0), node_ip(250));
    }

    #[test]
    fn simulated_nodes_are_recognised_by_annotation_and_name() {
        let n = node(7, "2026-01-01T00:00:00Z");
        assert_eq!(simulated_index_of(&n), Some(7));
        let mut other = n.clone();
        other["metadata"]["annotations"] = json!({});
        assert_eq!(simulated_index_of(&other), None);
        assert_eq!(n["status"]["conditions"][3]["type"], "Ready");
        assert_eq!(n["status"]["conditions"][3]["status"], "True");
    }

    #[test]
    fn only_pods_of_the_default_scheduler_or_none_are_bound() {
        let store = Store::new(10);
        store
            .create(
                "nodes",
                (String::new(), node_name(0)),
                node(0, "2026-01-01T00:00:00Z"),
            )
            .unwrap();
        let mut sim = Simulator::default();
        for name in [json!(SCHEDULER), json!(""), Value::Null] {
            let mut p = pod();
            p["spec"]["schedulerName"] = name.clone();
            let bound = sim.schedule(&store, &p).unwrap();
            assert_eq!(bound["spec"]["nodeName"], "sim-node-0", "{name}");
        }
        let mut p = pod();
        p["spec"]["schedulerName"] = json!("wasmctrl-demo-unscheduled");
        assert_eq!(sim.schedule(&store, &p), None);
        assert_eq!(sim.step(&store, &p), None);
    }
}
