//! Namespace deletion as the real control plane does it: the namespace
//! turns `Terminating` at once, new content is refused, and a stand-in for
//! the namespace controller removes what it holds — pods gracefully, like
//! any other deleter, so their kubelets (see `kubelet`) finish them — and
//! removes the namespace itself once nothing is left.
//!
//! Owns the `Terminating` mark, the refusal message of the
//! NamespaceLifecycle admission plugin, and the background sweep. It never
//! handles requests and never touches cluster-scoped objects.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::kubelet::{self, PodDeletion};
use super::objects::{meta_str, now_rfc3339};
use super::registry::ResourceInfo;
use super::store::{ObjKey, Store, StoreError};

/// How often the sweep looks again while content remains.
const SWEEP_INTERVAL: Duration = Duration::from_millis(200);

/// Whether the stored namespace `ns` is being deleted.
pub(crate) fn is_terminating(store: &Store, ns: &str) -> bool {
    store
        .get("namespaces", &(String::new(), ns.to_string()))
        .is_some_and(|s| meta_str(&s.value(), "deletionTimestamp").is_some())
}

/// The NamespaceLifecycle admission plugin's refusal.
pub(crate) fn refusal(ns: &str) -> String {
    format!("unable to create new content in namespace {ns} because it is being terminated")
}

/// Marks a namespace object as being deleted.
pub(crate) fn mark_terminating(namespace: &mut Value) {
    if let Some(meta) = namespace.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("deletionTimestamp".into(), json!(now_rfc3339()));
    }
    namespace["status"]["phase"] = json!("Terminating");
}

/// Removes everything in `ns` in the background, then `ns` itself.
/// `resources` are the namespaced kinds served; `kubelet` says whether
/// terminating pods get finished (without it they, and so the namespace,
/// stay — as on a cluster whose nodes are gone).
pub(crate) fn sweep(store: Arc<Store>, resources: Vec<ResourceInfo>, ns: String, kubelet: bool) {
    tokio::spawn(async move {
        loop {
            let ns_key = (String::new(), ns.clone());
            if store.get("namespaces", &ns_key).is_none() {
                return;
            }
            let mut remaining = 0usize;
            for info in &resources {
                let storage = info.storage_key();
                let is_pods = info.group.is_empty() && info.plural == "pods";
                for key in store.keys_in(&storage, &ns) {
                    remaining += 1;
                    remove_one(&store, &storage, &key, is_pods, kubelet);
                }
            }
            if remaining == 0 {
                let _ = store.delete("namespaces", &ns_key, None, None);
                return;
            }
            tokio::time::sleep(SWEEP_INTERVAL).await;
        }
    });
}

/// One object: pods are deleted gracefully (once), objects with
/// finalizers are marked and left to them, the rest go at once.
fn remove_one(store: &Arc<Store>, storage: &str, key: &ObjKey, is_pods: bool, kubelet: bool) {
    let Some(current) = store.get(storage, key) else {
        return;
    };
    let mut v = current.value();
    let terminating = meta_str(&v, "deletionTimestamp").is_some();
    let finalizers = v
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty());
    if terminating {
        return;
    }
    if is_pods {
        if let PodDeletion::Graceful {
            grace,
            deletion_timestamp,
        } = kubelet::pod_deletion(&v, &json!({}))
        {
            kubelet::mark_terminating(&mut v, grace, &deletion_timestamp);
            if let Ok(s) = store.update(storage, key, Some(current.rv), v) {
                if kubelet {
                    let uid = meta_str(&s.value(), "uid").unwrap_or_default().to_string();
                    kubelet::finish_after(
                        store.clone(),
                        storage.to_string(),
                        key.clone(),
                        uid,
                        Duration::from_secs(u64::try_from(grace).unwrap_or(0)),
                    );
                }
            }
            return;
        }
    }
    if finalizers {
        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("deletionTimestamp".into(), json!(now_rfc3339()));
            meta.insert("deletionGracePeriodSeconds".into(), json!(0));
        }
        let _ = store.update(storage, key, Some(current.rv), v);
        return;
    }
    match store.delete(storage, key, Some(current.rv), None) {
        Ok(_) | Err(StoreError::NotFound) | Err(StoreError::Conflict) => {}
        Err(e) => tracing::warn!("namespace sweep cannot delete {storage} {key:?}: {e}"),
    }
}
