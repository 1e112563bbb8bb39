//! Every version of the summary ConfigMap as a watch opened before the
//! system under test starts sees it (the time it arrived, its `data`, its
//! resourceVersion). The subprocess's memory, CPU and metrics are read by
//! the `process` module shared with the other end-to-end bench. It never
//! talks to the subprocess.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::core::NamespaceResourceScope;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, Resource};

/// A ConfigMap as the recorder decodes it: its name, namespace,
/// resourceVersion and `data`. The rest (managedFields, with one entry per
/// summary key, is most of the object) is skipped by the parser rather
/// than built, so the measuring watch takes little of the CPU both systems
/// share with it.
#[derive(Clone, Debug, serde::Deserialize)]
struct Summary {
    #[serde(deserialize_with = "identity")]
    metadata: ObjectMeta,
    #[serde(default)]
    data: Option<BTreeMap<String, String>>,
}

fn identity<'de, D: serde::Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Identity {
        name: Option<String>,
        namespace: Option<String>,
        resource_version: Option<String>,
    }
    let id = <Identity as serde::Deserialize>::deserialize(d)?;
    Ok(ObjectMeta {
        name: id.name,
        namespace: id.namespace,
        resource_version: id.resource_version,
        ..ObjectMeta::default()
    })
}

impl Resource for Summary {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind((): &()) -> std::borrow::Cow<'_, str> {
        "ConfigMap".into()
    }
    fn group((): &()) -> std::borrow::Cow<'_, str> {
        "".into()
    }
    fn version((): &()) -> std::borrow::Cow<'_, str> {
        "v1".into()
    }
    fn plural((): &()) -> std::borrow::Cow<'_, str> {
        "configmaps".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// One version of the ConfigMap as the watch delivered it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// When the bench received it.
    pub at: Instant,
    /// Its `data` (absent data is empty).
    pub data: BTreeMap<String, String>,
    /// Its resourceVersion.
    pub rv: String,
}

/// Every distinct version of one ConfigMap, in arrival order.
#[derive(Clone, Default)]
pub struct Recorder {
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Recorder {
    /// Watches ConfigMap `namespace/name` until the returned task is
    /// aborted; resolves once the watch's initial list is in, so later
    /// writes are never missed.
    pub async fn start(
        client: &Client,
        namespace: &str,
        name: &str,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let api: Api<Summary> = Api::namespaced(client.clone(), namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let recorder = Recorder::default();
        let seen = recorder.seen.clone();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let mut ready_tx = Some(ready_tx);
        let task = tokio::spawn(async move {
            let mut events = std::pin::pin!(watcher(api, config).default_backoff());
            while let Some(event) = events.next().await {
                let cm = match event {
                    Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) => cm,
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = ready_tx.take() {
                            let _ = tx.send(());
                        }
                        continue;
                    }
                    Ok(_) => continue,
                    Err(e) => {
                        eprintln!("e2e_latency: ConfigMap watch: {e}");
                        continue;
                    }
                };
                let rv = cm.metadata.resource_version.clone().unwrap_or_default();
                let mut seen = seen.lock().expect("recorder lock");
                if seen.iter().any(|s| s.rv == rv) {
                    continue; // a relist repeats versions already seen
                }
                seen.push(Seen {
                    at: Instant::now(),
                    data: cm.data.unwrap_or_default(),
                    rv,
                });
            }
        });
        let _ = ready_rx.await;
        (recorder, task)
    }

    /// All versions seen so far.
    pub fn snapshot(&self) -> Vec<Seen> {
        self.seen.lock().expect("recorder lock").clone()
    }

    /// The first version that arrived at or after `since` and satisfies
    /// `want`.
    pub fn first_after(
        &self,
        since: Instant,
        want: impl Fn(&BTreeMap<String, String>) -> bool,
    ) -> Option<Instant> {
        self.seen
            .lock()
            .expect("recorder lock")
            .iter()
            .find(|s| s.at >= since && want(&s.data))
            .map(|s| s.at)
    }

    /// Versions that arrived in `[from, to)`: the writes that changed the
    /// object in that window (the API server gives a no-op apply no new
    /// resourceVersion, so those are not counted).
    pub fn writes_between(&self, from: Instant, to: Instant) -> usize {
        self.seen
            .lock()
            .expect("recorder lock")
            .iter()
            .filter(|s| s.at >= from && s.at < to)
            .count()
    }

    /// The latest `data`.
    pub fn latest(&self) -> Option<BTreeMap<String, String>> {
        self.seen
            .lock()
            .expect("recorder lock")
            .last()
            .map(|s| s.data.clone())
    }
}
