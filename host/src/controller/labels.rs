//! A sharded guest's bucket label on the objects of its keys, when its
//! caches hold only the buckets this replica leads (cold standby): which
//! watches are selected by it, the label its writes carry, and the
//! labeller, which sets it where it is missing or wrong.
//!
//! An API server cannot select a watch by a hash of the key, so each
//! object says its key's bucket in a label
//! ([`crate::leader_per_guest::Shards::label`]), as
//! timebertt/kubernetes-controller-sharding's sharder labels objects with
//! their shard. A primary's bucket is its own key's; an owned object's is
//! its controller owner's. The labeller watches the objects of those
//! watches whose label is missing or names no bucket, and labels the ones
//! of the buckets this replica leads; a primary its cache holds under
//! another bucket's label, or that the server still selects while the
//! cache lost it, is labelled again too. It never reconciles and never
//! decides which buckets are led.

use std::sync::Arc;

use serde_json::Value as Json;

use crate::actuator::Actuator;
use crate::guest::{GuestManifest, KeyMapping, ObjectKey, PlannedWrite, ValidatedPlan, WatchSpec};
use crate::informer::{Informer, InformerKey, InformerRegistry};
use crate::leader_per_guest::Shards;
use crate::relations::{keys_for, WatchCache};
use crate::store::{Change, ChangeKind};
use crate::workqueue::{self, Outcome, Workqueue};

/// Whether the objects of `spec` are selected by bucket when the caches
/// are: those mapped to their own key or to their controller owner's.
/// Every other watch (a shared input, objects related by a field or a
/// namespace) is cached whole on every replica.
pub(super) fn by_bucket(spec: &WatchSpec) -> bool {
    matches!(spec.keys, KeyMapping::PerObject | KeyMapping::Owner(_))
}

/// `selector` and `term` together (either may be missing).
pub(super) fn and(selector: Option<&str>, term: Option<&str>) -> Option<String> {
    match (selector.filter(|s| !s.is_empty()), term) {
        (Some(s), Some(t)) => Some(format!("{s},{t}")),
        (Some(s), None) => Some(s.to_string()),
        (None, Some(t)) => Some(t.to_string()),
        (None, None) => None,
    }
}

/// Stamps the bucket label of `key` on every object `plan` applies, but
/// for objects a write rule names (shared by every key: never sharded):
/// the output then stays in the cache of the replica leading the key.
pub(super) fn stamp(
    plan: &mut ValidatedPlan,
    manifest: &GuestManifest,
    shards: &Shards,
    key: &str,
) {
    let value = Json::String(shards.value_of(key));
    for w in &mut plan.writes {
        let (target, doc) = match w {
            PlannedWrite::Apply { target, doc } | PlannedWrite::Update { target, doc, .. } => {
                (&*target, doc)
            }
            _ => continue,
        };
        let named = manifest
            .writes
            .iter()
            .any(|r| r.gvk == target.gvk && r.names.contains(&target.name));
        if named {
            continue;
        }
        let Some(metadata) = doc.get_mut("metadata").and_then(Json::as_object_mut) else {
            continue;
        };
        let labels = metadata
            .entry("labels")
            .or_insert_with(|| Json::Object(Default::default()));
        if !labels.is_object() {
            *labels = Json::Object(Default::default());
        }
        if let Some(labels) = labels.as_object_mut() {
            labels.insert(shards.label().to_string(), value.clone());
        }
    }
}

/// One object to label, with the value it gets.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Labelling {
    target: ObjectKey,
    /// The key whose bucket the object is in.
    key: String,
    /// Labelled only while this replica leads (and caches) the key's
    /// bucket, like the key's own writes; else by whichever replica found
    /// the label wrong.
    gated: bool,
}

/// The labeller of one sharded controller (see the module).
pub(super) struct Labeller {
    shards: Shards,
    queue: Workqueue<Labelling>,
    watched: Vec<(Informer, u64)>,
}

impl Drop for Labeller {
    fn drop(&mut self) {
        for (informer, handler) in &self.watched {
            informer.remove_handler(*handler);
        }
        self.queue.shutdown();
    }
}

impl Labeller {
    /// Watches, for each watch selected by bucket, its objects whose label
    /// is missing or names no bucket (`keys` are the selected watches'
    /// informer keys before the bucket term), and queues those of the
    /// buckets led here.
    pub(super) fn start(
        registry: &InformerRegistry,
        manifest: &Arc<GuestManifest>,
        caches: &Arc<[WatchCache]>,
        keys: &[(usize, InformerKey)],
        shards: &Shards,
        queue: &workqueue::Config,
    ) -> Self {
        let queue: Workqueue<Labelling> = Workqueue::new(queue);
        let unlabelled = shards.unlabelled();
        let watched = keys
            .iter()
            .map(|(w, key)| {
                let mut key = key.clone();
                key.label_selector = and(key.label_selector.as_deref(), Some(&unlabelled));
                let informer = registry.acquire(&key, &[], &[]);
                let (manifest, caches, shards, q, w) = (
                    manifest.clone(),
                    caches.clone(),
                    shards.clone(),
                    queue.clone(),
                    *w,
                );
                let gvk = manifest.watches[w].gvk.clone();
                let handler = informer.add_handler(Arc::new(move |change: &Change| {
                    if change.kind == ChangeKind::Deleted {
                        return;
                    }
                    let target = ObjectKey {
                        gvk: gvk.clone(),
                        namespace: (!change.namespace.is_empty())
                            .then(|| change.namespace.to_string()),
                        name: change.name.to_string(),
                    };
                    // Its key's: its own, or its controller owner's.
                    let keys = keys_for(&manifest, &caches, w, change);
                    let Some(key) = keys.first() else { return };
                    if shards.leads(&key.key) {
                        q.add(Labelling {
                            target,
                            key: key.key.to_string(),
                            gated: true,
                        });
                    }
                }));
                (informer, handler)
            })
            .collect();
        Labeller {
            shards: shards.clone(),
            queue,
            watched,
        }
    }

    /// Labels `target`, the primary of `key`, with `key`'s bucket; `gated`:
    /// only while this replica leads and caches that bucket.
    pub(super) fn relabel(&self, target: ObjectKey, key: &str, gated: bool) {
        self.queue.add(Labelling {
            target,
            key: key.to_string(),
            gated,
        });
    }

    /// Labels what is queued with `actuator` (`workers` at once: a cold
    /// start labels every primary), until the queue shuts down.
    /// A gated label is written under its bucket's gate, as the key's own
    /// writes are: not once the bucket is lost or given up.
    pub(super) async fn run(
        &self,
        actuator: impl std::ops::Deref<Target = Actuator> + Clone + Send + Sync + 'static,
        guest: String,
        workers: usize,
    ) {
        let shards = self.shards.clone();
        workqueue::run_workers(self.queue.clone(), workers, move |l: Labelling| {
            let (actuator, shards, guest) = (actuator.clone(), shards.clone(), guest.clone());
            async move {
                let value = shards.value_of(&l.key);
                let admitted = match l.gated {
                    true => match shards.admit(&l.key) {
                        Some(a) => Some(a),
                        None => return Outcome::Success,
                    },
                    false => None,
                };
                let written = async {
                    match &admitted {
                        Some(a) => {
                            tokio::select! {
                                biased;
                                _ = a.until_lost() => None,
                                r = actuator.label(&l.target, shards.label(), &value) => Some(r),
                            }
                        }
                        None => Some(actuator.label(&l.target, shards.label(), &value).await),
                    }
                };
                match written.await {
                    None => Outcome::Success,
                    Some(Ok(_)) => {
                        tracing::debug!(%guest, target = %l.target, %value, "bucket label set");
                        Outcome::Success
                    }
                    Some(Err(e)) => {
                        tracing::warn!(%guest, target = %l.target, "cannot set the bucket label; retrying: {e}");
                        Outcome::retry(e)
                    }
                }
            }
        })
        .await;
    }

    /// Stops labelling.
    pub(super) fn shutdown(&self) {
        self.queue.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leader_per_guest::GuestLeases;

    #[test]
    fn selectors_join_with_a_comma_and_either_may_be_missing() {
        assert_eq!(
            and(Some("a=b"), Some("c in (d)")).as_deref(),
            Some("a=b,c in (d)")
        );
        assert_eq!(and(None, Some("c")).as_deref(), Some("c"));
        assert_eq!(and(Some("a"), None).as_deref(), Some("a"));
        assert_eq!(and(Some(""), None), None);
        assert_eq!(and(None, None), None);
    }

    #[test]
    fn a_plans_applies_carry_the_keys_bucket_label_but_named_objects_do_not() {
        let shards = Shards::new(GuestLeases::detached(), "app", 4);
        let cm = crate::guest::Gvk {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        let target = |name: &str| ObjectKey {
            gvk: cm.clone(),
            namespace: Some("default".into()),
            name: name.into(),
        };
        let rule = |names: Vec<String>| crate::guest::WriteRule {
            gvk: cm.clone(),
            namespace: None,
            names,
            status: false,
        };
        let manifest = GuestManifest {
            name: "app".into(),
            watches: vec![],
            writes: vec![rule(vec![]), rule(vec!["shared".into()])],
            resync: None,
        };
        let mut plan = ValidatedPlan {
            writes: vec![
                PlannedWrite::Apply {
                    target: target("child"),
                    doc: serde_json::json!({"metadata": {"name": "child", "labels": {"a": "b"}}}),
                },
                PlannedWrite::Update {
                    target: target("other"),
                    uid: "u".into(),
                    doc: serde_json::json!({"metadata": {"name": "other"}}),
                },
                PlannedWrite::Apply {
                    target: target("shared"),
                    doc: serde_json::json!({"metadata": {"name": "shared"}}),
                },
            ],
            events: vec![],
            requeue_after: None,
        };
        stamp(&mut plan, &manifest, &shards, "default/a");
        let labels = |i: usize| match &plan.writes[i] {
            PlannedWrite::Apply { doc, .. } | PlannedWrite::Update { doc, .. } => {
                doc["metadata"]["labels"].clone()
            }
            _ => unreachable!(),
        };
        assert_eq!(
            labels(0),
            serde_json::json!({"a": "b", "shard.wasmctrl.dev/app": "2-of-4"})
        );
        assert_eq!(
            labels(1),
            serde_json::json!({"shard.wasmctrl.dev/app": "2-of-4"})
        );
        assert_eq!(
            labels(2),
            Json::Null,
            "a named object is shared by every key"
        );
    }
}
