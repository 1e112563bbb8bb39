//! The tuned native peer: the GPU summary as a strong Rust engineer writes
//! it when cost matters, beside the plain peer (`native_peer`) that follows
//! kube-runtime's docs. The differences, each a cost the plain peer pays:
//!
//! - **No Pod is ever built.** The watch's objects decode straight into
//!   [`SlimPod`]: the few fields kube-scheduler's request arithmetic reads
//!   (node, phase, each container's `nvidia.com/gpu` request and limit and
//!   restart policy, the overhead) plus the uid and resourceVersion the
//!   watcher needs. Every other field is skipped by the decoder without
//!   being allocated; resource maps keep only the counted resource.
//! - **A streaming list** (`sendInitialEvents`) with the guest's field
//!   selector, so no page of the initial list is held at once.
//! - **Incremental sums.** Per pod only its contribution (uid → node,
//!   devices) is kept; each event moves one node's total.
//! - **One writer that coalesces bursts** and merge-patches only the entries
//!   that differ from what the ConfigMap holds (`null` removes a node), so
//!   nothing is written when nothing changed, after a restart included: it
//!   starts from the ConfigMap's current data.
//!
//! It reads the ConfigMap once at start and then trusts its own writes: a
//! hand edit of the summary is not undone (the plain peer's resync does
//! that; nothing in the bench edits it).
//!
//! The numbers are the same as the guest's: the per-pod request is the SDK's
//! `pod_outcome` (shared with the guest and the plain peer) and the keys are
//! filtered by the same ConfigMap-key rule.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use guest_gpu_summary::node_key::is_config_map_key;
use guest_gpu_summary::summary::{pod_outcome, ContainerGpu, PodGpu, PodOutcome, GPU_RESOURCE};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokio::sync::Notify;

use crate::native_peer::{PeerArgs, APPLY_LINE, POD_SELECTOR, RECONCILE_LINE};

/// The field manager of the tuned peer's patches.
pub const FIELD_MANAGER: &str = "tuned-gpu-summary";
/// The flag that starts this binary as the tuned peer.
pub const FLAG: &str = "--tuned-peer";

/// Whether a resource-map key is the counted resource; compares without
/// allocating.
struct IsCounted(bool);

impl<'de> Deserialize<'de> for IsCounted {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = IsCounted;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a resource name")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<IsCounted, E> {
                Ok(IsCounted(s == GPU_RESOURCE))
            }
        }
        d.deserialize_str(V)
    }
}

/// A resource list (`requests`, `limits`, `overhead`) reduced to the
/// counted resource's quantity; other entries are skipped unallocated.
#[derive(Clone, Debug, Default)]
struct Counted(Option<String>);

impl<'de> Deserialize<'de> for Counted {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Counted;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a resource list")
            }
            fn visit_unit<E>(self) -> Result<Counted, E> {
                Ok(Counted(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Counted, A::Error> {
                let mut found = None;
                while let Some(IsCounted(counted)) = map.next_key()? {
                    if counted {
                        found = Some(map.next_value::<String>()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Counted(found))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
struct SlimResources {
    requests: Counted,
    limits: Counted,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct SlimContainer {
    resources: SlimResources,
    restart_policy: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct SlimSpec {
    node_name: Option<String>,
    containers: Vec<SlimContainer>,
    init_containers: Vec<SlimContainer>,
    overhead: Counted,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
struct SlimStatus {
    phase: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct SlimMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
struct RawPod {
    metadata: SlimMeta,
    spec: SlimSpec,
    status: SlimStatus,
}

/// A Pod decoded straight from the wire into what the sum needs.
#[derive(Clone, Debug, Deserialize)]
#[serde(from = "RawPod")]
pub struct SlimPod {
    meta: ObjectMeta,
    spec: SlimSpec,
    phase: Option<String>,
}

impl From<RawPod> for SlimPod {
    fn from(raw: RawPod) -> Self {
        let m = raw.metadata;
        SlimPod {
            meta: ObjectMeta {
                name: m.name,
                namespace: m.namespace,
                uid: m.uid,
                resource_version: m.resource_version,
                ..ObjectMeta::default()
            },
            spec: raw.spec,
            phase: raw.status.phase,
        }
    }
}

impl kube::Resource for SlimPod {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;
    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        "Pod".into()
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "pods".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

fn container(c: &SlimContainer) -> ContainerGpu<'_> {
    ContainerGpu {
        request: c.resources.requests.0.as_deref(),
        limit: c.resources.limits.0.as_deref(),
        restart_policy: c.restart_policy.as_deref(),
    }
}

impl SlimPod {
    /// The node this pod's devices count on, and how many; `None` when it
    /// holds none (unscheduled, finished, invalid or zero, or a node name
    /// that cannot be a ConfigMap key).
    fn contribution(&self) -> Option<(Box<str>, i64)> {
        let pod = PodGpu {
            namespace: self.meta.namespace.as_deref().unwrap_or_default(),
            name: self.meta.name.as_deref().unwrap_or_default(),
            node_name: self.spec.node_name.as_deref(),
            phase: self.phase.as_deref(),
            containers: self.spec.containers.iter().map(container).collect(),
            init_containers: self.spec.init_containers.iter().map(container).collect(),
            overhead: self.spec.overhead.0.as_deref(),
        };
        match pod_outcome(&pod, GPU_RESOURCE) {
            PodOutcome::Counted { node, gpus } if gpus > 0 && is_config_map_key(node) => {
                Some((node.into(), gpus))
            }
            _ => None,
        }
    }

    fn uid(&self) -> Box<str> {
        self.meta.uid.as_deref().unwrap_or_default().into()
    }
}

/// uid → (node, devices) of each counted pod.
type Contributions = HashMap<Box<str>, (Box<str>, i64)>;

/// The per-node sums, built incrementally from the watch.
#[derive(Default)]
struct Sums {
    /// uid → (node, devices) of each counted pod.
    pods: Contributions,
    /// Node → devices.
    per_node: HashMap<Box<str>, i64>,
    /// Nodes whose total moved since the writer last looked.
    dirty: HashSet<Box<str>>,
    /// A re-list in progress: the pods seen so far.
    relist: Option<Contributions>,
    /// The first list finished: the writer may write.
    synced: bool,
}

impl Sums {
    fn add(&mut self, node: &str, gpus: i64) {
        if let Some(sum) = self.per_node.get_mut(node) {
            *sum = sum.saturating_add(gpus);
        } else {
            self.per_node.insert(node.into(), gpus);
        }
        self.dirty.insert(node.into());
    }

    fn remove(&mut self, uid: &str) {
        if let Some((node, gpus)) = self.pods.remove(uid) {
            if let Some(sum) = self.per_node.get_mut(&node) {
                *sum = sum.saturating_sub(gpus);
                if *sum == 0 {
                    self.per_node.remove(&node);
                }
            }
            self.dirty.insert(node);
        }
    }

    fn apply(&mut self, pod: &SlimPod) {
        let uid = pod.uid();
        let now = pod.contribution();
        if self.pods.get(&uid) == now.as_ref() {
            return;
        }
        self.remove(&uid);
        if let Some((node, gpus)) = now {
            self.add(&node, gpus);
            self.pods.insert(uid, (node, gpus));
        }
    }

    fn event(&mut self, event: Event<SlimPod>) {
        match event {
            Event::Apply(pod) => self.apply(&pod),
            Event::Delete(pod) => self.remove(&pod.uid()),
            Event::Init => self.relist = Some(HashMap::new()),
            Event::InitApply(pod) => {
                if let (Some(list), Some(c)) = (self.relist.as_mut(), pod.contribution()) {
                    list.insert(pod.uid(), c);
                }
            }
            Event::InitDone => {
                let list = self.relist.take().unwrap_or_default();
                let mut per_node: HashMap<Box<str>, i64> = HashMap::new();
                for (node, gpus) in list.values() {
                    let sum = per_node.entry(node.clone()).or_default();
                    *sum = sum.saturating_add(*gpus);
                }
                // Every node that was or is summed may have moved.
                self.dirty.extend(self.per_node.keys().cloned());
                self.dirty.extend(per_node.keys().cloned());
                self.per_node = per_node;
                self.pods = list;
                self.synced = true;
            }
        }
    }

    /// The entries the ConfigMap must change, judged against `written`
    /// (what it holds): a value, or `None` to remove the key.
    fn changes(&mut self, written: &BTreeMap<String, String>) -> Vec<(String, Option<String>)> {
        let mut out = Vec::new();
        for node in self.dirty.drain() {
            let want = self
                .per_node
                .get(&node)
                .filter(|&&g| g > 0)
                .map(i64::to_string);
            if written.get(&*node) != want.as_ref() {
                out.push((node.into(), want));
            }
        }
        out.sort();
        out
    }
}

/// Runs the tuned peer until killed.
pub async fn run(args: PeerArgs) -> anyhow::Result<()> {
    let kubeconfig = kube::config::Kubeconfig::read_from(&args.kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    let client = Client::try_from(config)?;
    let pods: Api<SlimPod> = Api::all(client.clone());
    let configmaps: Api<ConfigMap> = Api::namespaced(client, &args.namespace);

    let sums = Arc::new(Mutex::new(Sums::default()));
    let changed = Arc::new(Notify::new());
    let (to_sums, on_event) = (sums.clone(), changed.clone());
    tokio::spawn(
        watcher::watcher(
            pods,
            watcher::Config::default()
                .fields(POD_SELECTOR)
                .streaming_lists(),
        )
        .default_backoff()
        .for_each(move |event| {
            match event {
                Ok(event) => {
                    let mut sums = to_sums.lock().expect("sums lock");
                    sums.event(event);
                    // After the first list, every event may move a total;
                    // the writer coalesces whatever piles up meanwhile.
                    if sums.synced {
                        on_event.notify_one();
                    }
                }
                Err(e) => eprintln!("tuned peer: watch error: {e}"),
            }
            futures::future::ready(())
        }),
    );

    // What the ConfigMap holds: read once, then kept by the writer.
    let mut written: Option<BTreeMap<String, String>> = configmaps
        .get_opt(&args.name)
        .await?
        .map(|cm| cm.data.unwrap_or_default());
    let patch_params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    loop {
        changed.notified().await;
        println!("{RECONCILE_LINE}");
        let changes = {
            let empty = BTreeMap::new();
            let held = written.as_ref().unwrap_or(&empty);
            sums.lock().expect("sums lock").changes(held)
        };
        if changes.is_empty() && written.is_some() {
            continue;
        }
        println!("{APPLY_LINE}");
        let sent = match written {
            None => {
                let data: BTreeMap<String, String> = changes
                    .iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
                    .collect();
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(args.name.clone()),
                        namespace: Some(args.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    data: Some(data),
                    ..ConfigMap::default()
                };
                let pp = PostParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..PostParams::default()
                };
                configmaps.create(&pp, &cm).await.map(|_| ())
            }
            Some(_) => {
                let entries: Map<String, Value> = changes
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone().map_or(Value::Null, Value::String)))
                    .collect();
                configmaps
                    .patch(
                        &args.name,
                        &patch_params,
                        &Patch::Merge(&json!({ "data": entries })),
                    )
                    .await
                    .map(|_| ())
            }
        };
        match sent {
            Ok(()) => {
                // What the ConfigMap holds now, changed in place.
                let held = written.get_or_insert_with(BTreeMap::new);
                for (k, v) in changes {
                    match v {
                        Some(v) => held.insert(k, v),
                        None => held.remove(&k),
                    };
                }
            }
            Err(e) => {
                eprintln!("tuned peer: write failed: {e}");
                // Read back what the ConfigMap holds and try every node
                // either side knows again.
                let before: Vec<Box<str>> = written
                    .iter()
                    .flat_map(|w| w.keys().map(|k| Box::<str>::from(k.as_str())))
                    .collect();
                written = configmaps
                    .get_opt(&args.name)
                    .await
                    .ok()
                    .flatten()
                    .map(|cm| cm.data.unwrap_or_default());
                {
                    let mut s = sums.lock().expect("sums lock");
                    let nodes: Vec<Box<str>> = s.per_node.keys().cloned().collect();
                    s.dirty.extend(nodes);
                    s.dirty.extend(before);
                    s.dirty.extend(changes.into_iter().map(|(k, _)| k.into()));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
                changed.notify_one();
            }
        }
    }
}

/// Where the tuned peer is started from: the same arguments as the plain
/// peer's, under [`FLAG`].
pub fn to_args(args: &PeerArgs) -> Vec<String> {
    let mut v = args.to_args();
    v[0] = FLAG.into();
    v
}
