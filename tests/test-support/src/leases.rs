//! Bucket Leases as a watch sees them: every version of each bucket's
//! Lease (resourceVersion, holder), so a test or bench can ask who held a
//! bucket when a write was stored. Shared by the replicas tests and the
//! replicas bench; it never writes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::coordination::v1::Lease;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};

/// The label a bucket Lease carries its bucket number in.
const BUCKET_LABEL: &str = "wasmctrl.dev/bucket";

/// Each bucket Lease's versions: bucket → (resourceVersion, holder; ""
/// when released), in the order the watch delivered them (the store's).
#[derive(Clone, Default)]
pub struct BucketHistory(Arc<Mutex<BTreeMap<u32, Versions>>>);

/// One Lease's versions: (resourceVersion, holder; "" when released).
type Versions = Vec<(u64, String)>;

impl BucketHistory {
    /// Records every version of the bucket Leases in `namespace` matching
    /// `labels` until the task is aborted.
    pub fn watch(
        client: &Client,
        namespace: &str,
        labels: &str,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        use futures::StreamExt;
        let history = Self::default();
        let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
        let config = watcher::Config::default().labels(labels);
        let h = history.clone();
        let task = tokio::spawn(async move {
            let mut events = std::pin::pin!(watcher(api, config));
            while let Some(event) = events.next().await {
                let lease = match event {
                    Ok(watcher::Event::Apply(l) | watcher::Event::InitApply(l)) => l,
                    Ok(_) => continue,
                    Err(e) => {
                        eprintln!("bucket lease watch: {e}");
                        continue;
                    }
                };
                let Some(bucket) = lease
                    .labels()
                    .get(BUCKET_LABEL)
                    .and_then(|b| b.parse().ok())
                else {
                    continue;
                };
                let rv = lease
                    .resource_version()
                    .and_then(|rv| rv.parse().ok())
                    .unwrap_or_default();
                let holder = lease
                    .spec
                    .and_then(|s| s.holder_identity)
                    .unwrap_or_default();
                h.0.lock()
                    .unwrap()
                    .entry(bucket)
                    .or_default()
                    .push((rv, holder));
            }
        });
        (history, task)
    }

    /// Who held `bucket` just before resourceVersion `rv` ("": nobody).
    pub fn holder_before(&self, bucket: u32, rv: u64) -> String {
        let history = self.0.lock().unwrap();
        history
            .get(&bucket)
            .and_then(|versions| versions.iter().rev().find(|(v, _)| *v < rv))
            .map(|(_, h)| h.clone())
            .unwrap_or_default()
    }

    /// Whether `bucket`'s Lease was released (a version with no holder)
    /// between resourceVersions `from` and `to`.
    pub fn released_between(&self, bucket: u32, from: u64, to: u64) -> bool {
        let history = self.0.lock().unwrap();
        history.get(&bucket).is_some_and(|versions| {
            versions
                .iter()
                .any(|(v, h)| *v > from && *v < to && h.is_empty())
        })
    }

    /// Each bucket's last version seen: (bucket, (resourceVersion, holder)).
    pub fn last_versions(&self) -> Vec<(u32, Option<(u64, String)>)> {
        let history = self.0.lock().unwrap();
        history
            .iter()
            .map(|(b, v)| (*b, v.last().cloned()))
            .collect()
    }

    /// Whether the watch has reached every version in `current` (bucket,
    /// resourceVersion: what a LIST shows now), and so every version
    /// before it.
    pub fn reached(&self, current: &[(u32, u64)]) -> bool {
        let history = self.0.lock().unwrap();
        current.iter().all(|(bucket, rv)| {
            history
                .get(bucket)
                .is_some_and(|v| v.iter().any(|(seen, _)| seen >= rv))
        })
    }

    /// Each bucket Lease in `namespace` matching `labels` as a LIST shows it
    /// now: (bucket, resourceVersion).
    pub async fn current(client: &Client, namespace: &str, labels: &str) -> Vec<(u32, u64)> {
        let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
        let list = api
            .list(&kube::api::ListParams::default().labels(labels))
            .await
            .expect("the bucket Leases are listed");
        list.items
            .iter()
            .filter_map(|l| {
                let bucket = l.labels().get(BUCKET_LABEL)?.parse().ok()?;
                let rv = l.resource_version()?.parse().ok()?;
                Some((bucket, rv))
            })
            .collect()
    }
}
