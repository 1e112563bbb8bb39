//! The realistic pod fixture of the benches that create pods
//! (`informer_memory`, `e2e_latency`; each includes this file with
//! `#[path]`): pods of ~10 KB as served (labels, a
//! `last-applied-configuration` annotation, an ownerReference, a GPU trainer
//! container and an admission sidecar with env, ports, mounts, resources
//! and probes, volumes, tolerations) with a kubelet-style status, their ids
//! and hashes from a deterministic mix, and their creation as
//! kube-controller-manager and the kubelet would write them. It never
//! measures anything and never decides how many pods or nodes a bench has.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{json, Value};

/// Namespace the pods live in.
pub const NAMESPACE: &str = "ml";
/// Requests in flight while creating pods.
pub const CREATE_CONCURRENCY: usize = 64;
/// Deployments (ReplicaSets) the pods belong to.
pub const WORKLOADS: usize = 400;

/// A deterministic 64-bit mix (splitmix64), for ids and hashes that differ
/// per pod like real ones.
pub fn mix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `len` hex digits derived from `seed`.
pub fn hex(seed: u64, len: usize) -> String {
    let mut s = String::with_capacity(len + 16);
    let mut i = 0;
    while s.len() < len {
        s.push_str(&format!(
            "{:016x}",
            mix(seed.wrapping_mul(31).wrapping_add(i))
        ));
        i += 1;
    }
    s.truncate(len);
    s
}

/// A UUID-shaped id (version 4 layout) derived from `seed`.
pub fn uid(seed: u64) -> String {
    let h = hex(seed, 32);
    format!(
        "{}-{}-4{}-a{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}

/// Kubernetes-style random-looking suffix, distinct for every `seed` below
/// 27^5 (a bijective scramble of the seed, in base 27).
pub fn suffix(seed: u64, len: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    const SPACE: u64 = 27u64.pow(5);
    // Coprime with 27^5, so multiplication permutes 0..27^5.
    let mut x = (seed % SPACE) * 7_368_787 % SPACE;
    (0..len)
        .map(|_| {
            let c = ALPHABET[(x % ALPHABET.len() as u64) as usize] as char;
            x /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

/// GPUs pod `i` requests.
pub fn gpus_of(i: usize) -> i64 {
    [1, 2, 4, 8][i % 4]
}

/// Pod `i` of one of [`WORKLOADS`] training deployments, on node `node`,
/// requesting `gpus_of(i)` GPUs: what `kubectl apply` wrote plus what
/// admission added. Returns its name, the pod and the status the kubelet
/// reports.
pub fn realistic_pod(i: usize, node: &str) -> (String, Value, Value) {
    let w = i % WORKLOADS;
    let team = format!("team-{:02}", w % 25);
    let app = format!("{team}-trainer-{w:03}");
    let rs_hash = suffix(w as u64 + 1_000_000, 5) + &suffix(w as u64 + 2_000_000, 5);
    let name = format!("{app}-{rs_hash}-{}", suffix(i as u64, 5));
    let gpus = gpus_of(i);
    let version = format!("v1.{}.{}", w % 7, w % 13);
    let image = format!("registry.example.com/{team}/trainer:{version}");
    let sidecar_image = "registry.example.com/platform/fluent-bit:3.1.4";
    let token_volume = format!("kube-api-access-{}", suffix(i as u64 + 7, 5));
    let labels = json!({
        "app": app, "app.kubernetes.io/name": "trainer", "app.kubernetes.io/version": version,
        "pod-template-hash": rs_hash, "team": team,
    });
    let token_mount = json!({"name": token_volume, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true});
    let gpu = gpus.to_string();
    let trainer = json!({
        "name": "trainer",
        "image": image,
        "args": [format!("--gpus={gpus}")],
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "env": [
            {"name": "DATASET_URI", "value": format!("s3://{team}-datasets/{app}/")},
            {"name": "CHECKPOINT_DIR", "value": "/data/checkpoints"},
            {"name": "WORLD_SIZE", "value": gpu},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}
        ],
        "resources": {
            "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": gpu},
            "limits": {"memory": "64Gi", "nvidia.com/gpu": gpu}
        },
        "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "dshm", "mountPath": "/dev/shm"}],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10, "failureThreshold": 6}
    });
    let mut spec = json!({
        "containers": [trainer],
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": format!("{app}-data")}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}
        ],
        "serviceAccountName": format!("{team}-trainer"),
    });
    if i.is_multiple_of(5) {
        spec["initContainers"] = json!([{
            "name": "fetch-index",
            "image": "registry.example.com/platform/s3-sync:2.4.0",
            "volumeMounts": [{"name": "data", "mountPath": "/data"}]
        }]);
    }
    let mut annotations = json!({"prometheus.io/scrape": "true"});
    let applied = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"annotations": annotations, "labels": labels, "name": name, "namespace": NAMESPACE},
        "spec": spec,
    });
    annotations["kubectl.kubernetes.io/last-applied-configuration"] = json!(applied.to_string());
    spec["containers"][0]["volumeMounts"] = json!([
        {"name": "data", "mountPath": "/data"}, {"name": "dshm", "mountPath": "/dev/shm"}, token_mount
    ]);
    spec["containers"] = json!([spec["containers"][0].clone(), {
        "name": "log-shipper",
        "image": sidecar_image,
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
        "volumeMounts": [token_mount]
    }]);
    spec["volumes"] = json!([spec["volumes"][0].clone(), spec["volumes"][1].clone(),
    {"name": token_volume, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
    ]}}]);
    spec["tolerations"] =
        json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]);
    spec["nodeName"] = json!(node);
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": NAMESPACE, "labels": labels, "annotations": annotations,
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{app}-{rs_hash}"),
                "uid": uid(w as u64 + 2_000_000), "controller": true, "blockOwnerDeletion": true
            }]
        },
        "spec": spec,
    });
    let status = pod_status(i, &image, sidecar_image);
    (name, pod, status)
}

/// What the kubelet reports: 95 % running, 5 % still creating containers
/// (both hold their GPUs and pass the field selector).
fn pod_status(i: usize, image: &str, sidecar: &str) -> Value {
    let running = !i.is_multiple_of(20);
    let started = format!(
        "2026-11-{:02}T{:02}:{:02}:{:02}Z",
        1 + i % 28,
        i % 24,
        i % 60,
        (i / 60) % 60
    );
    let ready = if running { "True" } else { "False" };
    let cond = |t: &str, s: &str| json!({"type": t, "status": s, "lastProbeTime": null, "lastTransitionTime": started});
    let statuses: Vec<Value> = [("trainer", image), ("log-shipper", sidecar)]
        .iter()
        .enumerate()
        .map(|(c, (name, image))| {
            let seed = (i * 3 + c) as u64;
            let state = if running {
                json!({"running": {"startedAt": started}})
            } else {
                json!({"waiting": {"reason": "ContainerCreating"}})
            };
            let mut s = json!({
                "name": name, "image": image, "ready": running, "restartCount": i % 3,
                "started": running, "state": state, "lastState": {},
                "imageID": format!("{}@sha256:{}", image.split(':').next().unwrap_or(image), hex(seed + 9_000_000, 64)),
            });
            if running {
                s["containerID"] = json!(format!("containerd://{}", hex(seed, 64)));
            }
            s
        })
        .collect();
    let ip = format!(
        "10.{}.{}.{}",
        128 + (i / 65_536) % 64,
        (i / 256) % 256,
        i % 256
    );
    json!({
        "phase": if running { "Running" } else { "Pending" },
        "conditions": [
            cond("PodReadyToStartContainers", ready), cond("Initialized", "True"),
            cond("Ready", ready), cond("ContainersReady", ready), cond("PodScheduled", "True"),
        ],
        "hostIP": "10.20.0.1",
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": started,
        "containerStatuses": statuses,
    })
}

/// Creates `pod` as kube-controller-manager would, then writes `status`
/// through the status subresource as the kubelet would.
pub async fn create(api: &Api<Pod>, name: &str, pod: Value, status: Value) -> kube::Result<()> {
    let pod: Pod = serde_json::from_value(pod).map_err(kube::Error::SerdeError)?;
    let created = PostParams {
        field_manager: Some("kube-controller-manager".into()),
        ..PostParams::default()
    };
    api.create(&created, &pod).await?;
    api.patch_status(
        name,
        &PatchParams {
            field_manager: Some("kubelet".into()),
            ..PatchParams::default()
        },
        &Patch::Merge(json!({"status": status})),
    )
    .await
    .map(|_| ())
}
