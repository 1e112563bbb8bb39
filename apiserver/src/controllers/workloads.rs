//! A minimal Deployment → ReplicaSet → Pod controller, a simplified
//! kube-controller-manager, so a guest that waits for its Deployment to
//! become available can be tested. On only with simulated nodes (nothing
//! else would run the pods it creates).
//!
//! Owns, for each Deployment, one ReplicaSet per pod-template hash
//! (`<deployment>-<hash>`, its pods labelled `pod-template-hash`), the
//! current one scaled to `spec.replicas` and older ones to 0; for each
//! ReplicaSet, its pods (created from its template, deleted beyond
//! `spec.replicas`); and both kinds' status (`replicas`, `readyReplicas`,
//! `availableReplicas`, `updatedReplicas`, `observedGeneration`, and a
//! Deployment's `Available` and `Progressing` conditions). Simplified: no
//! rolling-update pacing (`maxSurge`/`maxUnavailable` only decide
//! `Available`), no revision history or rollback, no `minReadySeconds`,
//! no `paused`, and pods leave at once rather than gracefully.
//!
//! One background task follows the store's change stream and writes with
//! the store's own optimistic concurrency: a conflict means a newer
//! version is on its way, and that change brings the controller back. It
//! never serves requests and never touches an object it does not control
//! (a controller `ownerReference` naming its owner's uid).

use std::collections::BTreeSet;
use std::sync::{Arc, Weak};

use serde_json::{json, Map, Value};
use tokio::sync::broadcast::error::RecvError;

use crate::rules::objects::{
    generated_name, meta_str, now_rfc3339, prepare_create, strategy_create,
};
use crate::storage::registry::{Registry, ResourceInfo};
use crate::storage::store::{EventType, ObjKey, Store};

/// The label a ReplicaSet's selector and pods carry its template's hash in.
const HASH_LABEL: &str = "pod-template-hash";

/// The three kinds the controller reads and writes.
#[derive(Clone)]
struct Kinds {
    deployments: ResourceInfo,
    replicasets: ResourceInfo,
    pods: ResourceInfo,
}

/// What one change asks the controller to look at again.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Work {
    Deployment(ObjKey),
    ReplicaSet(ObjKey),
}

/// Starts the controller on `store`; the task ends with the store.
pub(crate) fn spawn(store: &Arc<Store>, registry: &Registry) {
    let lookup = |g: &str, p: &str| registry.lookup(g, "v1", p);
    let (Some(deployments), Some(replicasets), Some(pods)) = (
        lookup("apps", "deployments"),
        lookup("apps", "replicasets"),
        lookup("", "pods"),
    ) else {
        return;
    };
    let kinds = Kinds {
        deployments,
        replicasets,
        pods,
    };
    let weak: Weak<Store> = Arc::downgrade(store);
    let mut rx = store.changes();
    tokio::spawn(async move {
        loop {
            let mut work = BTreeSet::new();
            match rx.recv().await {
                Ok(r) => {
                    let json: Value = serde_json::from_slice(&r.json).unwrap_or(Value::Null);
                    let key = (r.namespace.clone(), r.name.clone());
                    work.extend(kinds.work_of(&r.resource, key, r.event, &json));
                }
                Err(RecvError::Lagged(_)) => {
                    let Some(store) = weak.upgrade() else { return };
                    work.extend(kinds.everything(&store));
                }
                Err(RecvError::Closed) => return,
            }
            let Some(store) = weak.upgrade() else { return };
            for w in work {
                match w {
                    Work::Deployment(key) => kinds.sync_deployment(&store, &key),
                    Work::ReplicaSet(key) => {
                        if let Some(owner) = kinds.sync_replicaset(&store, &key) {
                            kinds.sync_deployment(&store, &owner);
                        }
                    }
                }
            }
        }
    });
}

/// The controller `ownerReference` of `obj`: (kind, name, uid).
fn controller_of(obj: &Value) -> Option<(&str, &str, &str)> {
    obj.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller") == Some(&json!(true)))
        .map(|r| {
            let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default();
            (s("kind"), s("name"), s("uid"))
        })
}

fn owner_reference(kind: &str, owner: &Value) -> Value {
    json!([{"apiVersion": "apps/v1", "kind": kind,
        "name": meta_str(owner, "name").unwrap_or_default(),
        "uid": meta_str(owner, "uid").unwrap_or_default(),
        "controller": true, "blockOwnerDeletion": true}])
}

fn int_at(obj: &Value, pointer: &str, default: i64) -> i64 {
    obj.pointer(pointer)
        .and_then(Value::as_i64)
        .unwrap_or(default)
}

fn is_deleting(obj: &Value) -> bool {
    meta_str(obj, "deletionTimestamp").is_some()
}

fn pod_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// The hash of a pod template, as `pod-template-hash` values look (the
/// FNV-1a of its JSON, spelled with kube's safe alphabet).
fn template_hash(template: &Value) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut h: u32 = 0x811c_9dc5;
    for b in template.to_string().bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    h.to_string()
        .bytes()
        .map(|b| ALPHABET[usize::from(b) % ALPHABET.len()] as char)
        .collect()
}

/// Drops the integer fields that are 0, as Go's `omitempty` does.
fn without_zeros(status: Value) -> Value {
    match status {
        Value::Object(m) => Value::Object(m.into_iter().filter(|(_, v)| v != &json!(0)).collect()),
        other => other,
    }
}

impl Kinds {
    /// What a change to `resource`'s object `key` (now `json`) asks for.
    fn work_of(&self, resource: &str, key: ObjKey, event: EventType, json: &Value) -> Vec<Work> {
        let owner = |kind: &str| {
            controller_of(json)
                .filter(|(k, _, _)| *k == kind)
                .map(|(_, name, _)| (key.0.clone(), name.to_string()))
        };
        if resource == self.deployments.storage_key() {
            (event != EventType::Deleted)
                .then_some(Work::Deployment(key))
                .into_iter()
                .collect()
        } else if resource == self.replicasets.storage_key() {
            let mut w: Vec<Work> = owner("Deployment")
                .map(Work::Deployment)
                .into_iter()
                .collect();
            if event != EventType::Deleted {
                w.push(Work::ReplicaSet(key));
            }
            w
        } else if resource == self.pods.storage_key() {
            owner("ReplicaSet")
                .map(Work::ReplicaSet)
                .into_iter()
                .collect()
        } else {
            Vec::new()
        }
    }

    /// Every Deployment and ReplicaSet, after lost notifications.
    fn everything(&self, store: &Store) -> Vec<Work> {
        let keys = |info: &ResourceInfo| {
            store
                .list(&info.storage_key(), None, None, 0, |_| true)
                .items
                .iter()
                .filter_map(|j| serde_json::from_slice::<Value>(j).ok())
                .map(|v| {
                    let s = |k: &str| meta_str(&v, k).unwrap_or_default().to_string();
                    (s("namespace"), s("name"))
                })
                .collect::<Vec<_>>()
        };
        let mut w: Vec<Work> = keys(&self.replicasets)
            .into_iter()
            .map(Work::ReplicaSet)
            .collect();
        w.extend(keys(&self.deployments).into_iter().map(Work::Deployment));
        w
    }

    /// The objects of `info` in `namespace` whose controller is `owner`.
    fn owned(
        &self,
        store: &Store,
        info: &ResourceInfo,
        namespace: &str,
        owner: &Value,
    ) -> Vec<Value> {
        let uid = meta_str(owner, "uid").unwrap_or_default();
        store
            .list(&info.storage_key(), Some(namespace), None, 0, |_| true)
            .items
            .iter()
            .filter_map(|j| serde_json::from_slice::<Value>(j).ok())
            .filter(|v| controller_of(v).is_some_and(|(_, _, u)| u == uid))
            .collect()
    }

    /// Creates `obj` of `info` in `namespace`, as a create through the API would store it.
    fn create(store: &Store, info: &ResourceInfo, namespace: &str, mut obj: Value) {
        let name = meta_str(&obj, "name").unwrap_or_default().to_string();
        obj["metadata"]["namespace"] = json!(namespace);
        let now = now_rfc3339();
        prepare_create(info, &mut obj, &now);
        strategy_create(info, &mut obj);
        // A namesake got there first: the next change settles it.
        let _ = store.create(&info.storage_key(), (namespace.to_string(), name), obj);
    }

    /// Brings the ReplicaSet `key`'s pods to its `spec.replicas` and its
    /// status to what they are; returns the Deployment controlling it.
    fn sync_replicaset(&self, store: &Store, key: &ObjKey) -> Option<ObjKey> {
        let stored = store.get(&self.replicasets.storage_key(), key)?;
        let rs = stored.value();
        let owner = controller_of(&rs)
            .filter(|(k, _, _)| *k == "Deployment")
            .map(|(_, n, _)| (key.0.clone(), n.to_string()));
        if is_deleting(&rs) {
            return owner;
        }
        let desired = usize::try_from(int_at(&rs, "/spec/replicas", 1)).unwrap_or(0);
        let mut pods: Vec<Value> = self
            .owned(store, &self.pods, &key.0, &rs)
            .into_iter()
            .filter(|p| !is_deleting(p))
            .collect();
        if pods.len() < desired {
            let template = rs.pointer("/spec/template").cloned().unwrap_or(Value::Null);
            for _ in pods.len()..desired {
                let pod = json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": generated_name(&format!("{}-", key.1)),
                        "labels": template.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({})),
                        "ownerReferences": owner_reference("ReplicaSet", &rs)},
                    "spec": template.get("spec").cloned().unwrap_or_else(|| json!({}))});
                Self::create(store, &self.pods, &key.0, pod.clone());
                pods.push(pod);
            }
        } else if pods.len() > desired {
            // The least advanced go first: unready, then by name.
            pods.sort_by_key(|p| (pod_ready(p), meta_str(p, "name").map(str::to_string)));
            for p in pods.drain(..pods.len() - desired) {
                let name = meta_str(&p, "name").unwrap_or_default().to_string();
                let _ = store.delete(&self.pods.storage_key(), &(key.0.clone(), name), None, None);
            }
        }
        let ready = pods.iter().filter(|p| pod_ready(p)).count();
        let mut new = rs.clone();
        new["status"] = without_zeros(json!({
            "fullyLabeledReplicas": pods.len(),
            "readyReplicas": ready, "availableReplicas": ready,
            "observedGeneration": int_at(&rs, "/metadata/generation", 1)}));
        // `replicas` is the one field a ReplicaSet's status always shows.
        new["status"]["replicas"] = json!(pods.len());
        if new != rs {
            let _ = store.update(&self.replicasets.storage_key(), key, Some(stored.rv), new);
        }
        owner
    }

    /// Gives the Deployment `key` its ReplicaSet for the current template
    /// (scaled to `spec.replicas`, older ones to 0) and its status.
    fn sync_deployment(&self, store: &Store, key: &ObjKey) {
        let Some(stored) = store.get(&self.deployments.storage_key(), key) else {
            return;
        };
        let d = stored.value();
        if is_deleting(&d) {
            return;
        }
        let desired = int_at(&d, "/spec/replicas", 1);
        let mut template = d
            .pointer("/spec/template")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let hash = template_hash(&template);
        template["metadata"]["labels"][HASH_LABEL] = json!(hash);
        let current = format!("{}-{hash}", key.1);
        let owned = self.owned(store, &self.replicasets, &key.0, &d);
        let rs_key = |name: &str| (key.0.clone(), name.to_string());
        if !owned
            .iter()
            .any(|rs| meta_str(rs, "name") == Some(current.as_str()))
        {
            let mut selector = d
                .pointer("/spec/selector")
                .cloned()
                .unwrap_or_else(|| json!({}));
            selector["matchLabels"][HASH_LABEL] = json!(hash);
            let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": current,
                    "labels": template.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({})),
                    "ownerReferences": owner_reference("Deployment", &d)},
                "spec": {"replicas": desired, "selector": selector, "template": template}});
            Self::create(store, &self.replicasets, &key.0, rs);
        }
        for rs in &owned {
            let name = meta_str(rs, "name").unwrap_or_default();
            let want = if name == current { desired } else { 0 };
            if int_at(rs, "/spec/replicas", 1) != want {
                let Some(s) = store.get(&self.replicasets.storage_key(), &rs_key(name)) else {
                    continue;
                };
                let mut scaled = s.value();
                scaled["spec"]["replicas"] = json!(want);
                let generation = int_at(&scaled, "/metadata/generation", 1);
                scaled["metadata"]["generation"] = json!(generation + 1);
                let _ = store.update(
                    &self.replicasets.storage_key(),
                    &rs_key(name),
                    Some(s.rv),
                    scaled,
                );
            }
        }
        self.deployment_status(store, key, &d, stored.rv, &current, desired);
    }

    fn deployment_status(
        &self,
        store: &Store,
        key: &ObjKey,
        d: &Value,
        rv: u64,
        current: &str,
        desired: i64,
    ) {
        let sets = self.owned(store, &self.replicasets, &key.0, d);
        let sum = |field: &str| {
            sets.iter()
                .map(|rs| int_at(rs, &format!("/status/{field}"), 0))
                .sum::<i64>()
        };
        let (replicas, ready, available) = (
            sum("replicas"),
            sum("readyReplicas"),
            sum("availableReplicas"),
        );
        let new_rs = sets.iter().find(|rs| meta_str(rs, "name") == Some(current));
        let updated = new_rs.map_or(0, |rs| int_at(rs, "/status/replicas", 0));
        let new_available = new_rs.map_or(0, |rs| int_at(rs, "/status/availableReplicas", 0));
        let max_unavailable = max_unavailable(d, desired);
        let now = now_rfc3339();
        let (a_status, a_reason, a_message) = if available >= desired - max_unavailable {
            (
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
            )
        } else {
            (
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
            )
        };
        let (p_reason, p_message) =
            if updated == desired && replicas == desired && new_available == desired {
                (
                    "NewReplicaSetAvailable",
                    format!("ReplicaSet \"{current}\" has successfully progressed."),
                )
            } else {
                (
                    "ReplicaSetUpdated",
                    format!("ReplicaSet \"{current}\" is progressing."),
                )
            };
        let old = d
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let condition = |type_: &str, status: &str, reason: &str, message: &str| {
            let before = old.iter().find(|c| c["type"] == type_);
            let same = before.is_some_and(|c| {
                c["status"] == status && c["reason"] == reason && c["message"] == message
            });
            if same {
                return before.cloned().unwrap_or(Value::Null);
            }
            let transition = before
                .filter(|c| c["status"] == status)
                .and_then(|c| c.get("lastTransitionTime").cloned())
                .unwrap_or_else(|| json!(now));
            json!({"type": type_, "status": status, "reason": reason, "message": message,
                "lastUpdateTime": now, "lastTransitionTime": transition})
        };
        let mut status: Map<String, Value> = match without_zeros(json!({
            "replicas": replicas, "updatedReplicas": updated, "readyReplicas": ready,
            "availableReplicas": available, "unavailableReplicas": (desired - available).max(0),
        })) {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        status.insert(
            "observedGeneration".into(),
            json!(int_at(d, "/metadata/generation", 1)),
        );
        status.insert(
            "conditions".into(),
            json!([
                condition("Available", a_status, a_reason, a_message),
                condition("Progressing", "True", p_reason, &p_message),
            ]),
        );
        let mut new = d.clone();
        new["status"] = Value::Object(status);
        if &new != d {
            let _ = store.update(&self.deployments.storage_key(), key, Some(rv), new);
        }
    }
}

/// `spec.strategy.rollingUpdate.maxUnavailable` of `desired` replicas
/// (default 25%, rounded down as the real controller rounds it); 0 for
/// `Recreate`.
fn max_unavailable(d: &Value, desired: i64) -> i64 {
    if d.pointer("/spec/strategy/type").and_then(Value::as_str) == Some("Recreate") {
        return 0;
    }
    match d.pointer("/spec/strategy/rollingUpdate/maxUnavailable") {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        Some(Value::String(s)) => {
            let pct: i64 = s.trim_end_matches('%').parse().unwrap_or(25);
            desired * pct / 100
        }
        _ => desired * 25 / 100,
    }
    .min(desired)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_template_hash_is_stable_and_changes_with_the_template() {
        let a = json!({"spec": {"containers": [{"name": "c", "image": "nginx:1"}]}});
        let b = json!({"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}});
        assert_eq!(template_hash(&a), template_hash(&a.clone()));
        assert_ne!(template_hash(&a), template_hash(&b));
        assert!(template_hash(&a).bytes().all(|c| c.is_ascii_alphanumeric()));
    }

    #[test]
    fn max_unavailable_defaults_to_a_quarter_rounded_down() {
        let d = |strategy: Value| json!({"spec": {"strategy": strategy}});
        assert_eq!(max_unavailable(&d(json!({})), 3), 0);
        assert_eq!(max_unavailable(&d(json!({})), 8), 2);
        assert_eq!(max_unavailable(&d(json!({"type": "Recreate"})), 8), 0);
        let pct = json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "50%"}});
        assert_eq!(max_unavailable(&d(pct), 3), 1);
    }
}
