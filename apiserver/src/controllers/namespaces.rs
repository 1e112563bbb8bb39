//! Namespace deletion as the real control plane does it: the namespace
//! turns `Terminating` at once, new content is refused, and a stand-in for
//! the namespace controller removes what it holds — pods gracefully, like
//! any other deleter, so their kubelets (see `kubelet`) finish them — and
//! removes the namespace itself once nothing is left. While content
//! remains, the namespace's `status.conditions` say what is left, as the
//! namespace controller writes them.
//!
//! Owns the `Terminating` mark, the refusal message of the
//! NamespaceLifecycle admission plugin, and the background sweep. It never
//! handles requests and never touches cluster-scoped objects.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::kubelet::{self, PodDeletion};
use crate::rules::objects::{meta_str, now_rfc3339};
use crate::storage::registry::ResourceInfo;
use crate::storage::store::{ObjKey, Store, StoreError};

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
            // The namespace goes after a pass that found nothing, so
            // content removed at once still gives writers one interval.
            let mut found = 0usize;
            let mut remaining = Remaining::default();
            for info in &resources {
                let storage = info.storage_key();
                let is_pods = info.group.is_empty() && info.plural == "pods";
                for key in store.keys_in(&storage, &ns) {
                    found += 1;
                    remove_one(&store, &storage, &key, is_pods, kubelet);
                    if let Some(left) = store.get(&storage, &key) {
                        remaining.count(info, &left.value());
                    }
                }
            }
            if found == 0 {
                let _ = store.delete("namespaces", &ns_key, None, None);
                return;
            }
            update_conditions(&store, &ns_key, &remaining);
            tokio::time::sleep(SWEEP_INTERVAL).await;
        }
    });
}

/// What a sweep pass left: objects per `resource.group`, and per finalizer.
#[derive(Debug, Default)]
struct Remaining {
    resources: BTreeMap<String, usize>,
    finalizers: BTreeMap<String, usize>,
}

impl Remaining {
    fn count(&mut self, info: &ResourceInfo, obj: &Value) {
        *self
            .resources
            .entry(format!("{}.{}", info.plural, info.group))
            .or_default() += 1;
        let finalizers = obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array);
        for f in finalizers.into_iter().flatten().filter_map(Value::as_str) {
            *self.finalizers.entry(f.to_string()).or_default() += 1;
        }
    }
}

/// The namespace controller's condition types, in its order
/// (`conditionTypes`, pkg/controller/namespace/deletion/status_condition_utils.go),
/// each with the reason and message of its "ok" (False) variant.
const CONDITIONS: [(&str, &str, &str); 5] = [
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    (
        "NamespaceContentRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
    (
        "NamespaceFinalizersRemaining",
        "ContentHasNoFinalizers",
        "All content-preserving finalizers finished",
    ),
];

/// The `(status, reason, message)` of each condition after a pass that
/// left `remaining` (`ProcessContentTotals`; lists sorted as it sorts them).
fn conditions(remaining: &Remaining) -> Vec<(&'static str, &'static str, String, String)> {
    CONDITIONS
        .iter()
        .map(|(ty, ok_reason, ok_message)| {
            let failing = match *ty {
                "NamespaceContentRemaining" if !remaining.resources.is_empty() => {
                    let mut parts: Vec<String> = remaining
                        .resources
                        .iter()
                        .map(|(r, n)| format!("{r} has {n} resource instances"))
                        .collect();
                    parts.sort();
                    Some((
                        "SomeResourcesRemain",
                        format!("Some resources are remaining: {}", parts.join(", ")),
                    ))
                }
                "NamespaceFinalizersRemaining" if !remaining.finalizers.is_empty() => {
                    let mut parts: Vec<String> = remaining
                        .finalizers
                        .iter()
                        .map(|(f, n)| format!("{f} in {n} resource instances"))
                        .collect();
                    parts.sort();
                    Some((
                        "SomeFinalizersRemain",
                        format!(
                            "Some content in the namespace has finalizers remaining: {}",
                            parts.join(", ")
                        ),
                    ))
                }
                _ => None,
            };
            match failing {
                Some((reason, message)) => (*ty, "True", reason.to_string(), message),
                None => (*ty, "False", ok_reason.to_string(), ok_message.to_string()),
            }
        })
        .collect()
}

/// Writes the conditions into the namespace's status as `updateConditions`
/// does: `lastTransitionTime` moves only when a condition's status does.
fn update_conditions(store: &Store, ns_key: &ObjKey, remaining: &Remaining) {
    let Some(current) = store.get("namespaces", ns_key) else {
        return;
    };
    let mut ns = current.value();
    let old: Vec<Value> = ns
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let now = now_rfc3339();
    let mut new: Vec<Value> = old
        .iter()
        .filter(|c| !CONDITIONS.iter().any(|(t, _, _)| c["type"] == *t))
        .cloned()
        .collect();
    for (ty, status, reason, message) in conditions(remaining) {
        let previous = old.iter().find(|c| c["type"] == ty);
        let since = match previous {
            Some(p) if p["status"] == status => p["lastTransitionTime"].clone(),
            _ => json!(now),
        };
        new.push(
            json!({"type": ty, "status": status, "lastTransitionTime": since,
            "reason": reason, "message": message}),
        );
    }
    ns["status"]["conditions"] = Value::Array(new);
    // a conflict means someone else wrote; the next pass tries again
    let _ = store.update("namespaces", ns_key, Some(current.rv), ns);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_list_what_remains_in_the_controllers_order_and_wording() {
        let mut r = Remaining::default();
        r.resources.insert("pods.".into(), 2);
        r.resources.insert("widgets.example.com".into(), 1);
        r.finalizers.insert("example.com/hold".into(), 1);
        let c = conditions(&r);
        let types: Vec<&str> = c.iter().map(|c| c.0).collect();
        assert_eq!(types, CONDITIONS.map(|c| c.0));
        assert_eq!(c[0].1, "False");
        assert_eq!(c[2].2, "ContentDeleted");
        assert_eq!(
            c[3].3,
            "Some resources are remaining: pods. has 2 resource instances, widgets.example.com has 1 resource instances"
        );
        assert_eq!(c[4].2, "SomeFinalizersRemain");
        assert_eq!(
            c[4].3,
            "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
        );
        let ok = conditions(&Remaining::default());
        assert!(ok.iter().all(|c| c.1 == "False"));
    }
}
