//! Garbage collection of dependents, as kube-controller-manager's garbage
//! collector (`pkg/controller/garbagecollector`) does it: an object whose
//! `metadata.ownerReferences` name only owners that are gone (by uid — an
//! owner of that name with another uid is gone too) or that are being
//! deleted in the foreground is deleted; references to gone owners are
//! dropped from an object that still has a live owner. An owner deleted
//! with `propagationPolicy: Foreground` keeps its `foregroundDeletion`
//! finalizer until no dependent with `blockOwnerDeletion: true` remains;
//! one deleted with `Orphan` keeps its `orphan` finalizer until its
//! dependents' references to it are removed. Which finalizer a DELETE sets
//! is `policy`'s; the ownership index is `graph`'s.
//!
//! As in the real collector, a reference whose kind is not served, or a
//! cluster-scoped object naming a namespaced owner, cannot be resolved and
//! its object is left alone; a namespaced owner is looked for in its
//! dependent's namespace only (cross-namespace references are disallowed).
//!
//! One background task per server follows the store's change stream. It
//! never handles requests and never deletes anything that a delete through
//! the API would not (finalizers and graceful pod deletion are honoured).

mod graph;
pub(crate) mod policy;

use std::collections::BTreeSet;
use std::sync::{Arc, Weak};

use serde_json::{json, Value};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use crate::cluster::Cluster;
use crate::controllers::kubelet::{self, PodDeletion};
use crate::controllers::namespaces;
use crate::rules::crd;
use crate::rules::objects::{meta_str, now_rfc3339, ready_to_remove};
use crate::storage::registry::ResourceInfo;
use crate::storage::store::StoreError;
use graph::{Graph, Item, Meta, OwnerRef};
use policy::{Propagation, FOREGROUND, ORPHAN};

/// Attempts of one read-modify-write before the collector waits for the
/// next change of the object.
const ATTEMPTS: usize = 16;

/// Starts the collector for `app`'s store; it ends with the cluster (the server).
pub(crate) fn spawn(app: &Arc<Cluster>) {
    let weak: Weak<Cluster> = Arc::downgrade(app);
    let mut rx = app.store.changes();
    let mut graph = Graph::default();
    let mut dirty = BTreeSet::new();
    graph.rebuild(&app.store, &mut dirty);
    tokio::spawn(async move {
        loop {
            let mut lost = false;
            if !dirty.is_empty() {
                let Some(app) = weak.upgrade() else { return };
                for item in std::mem::take(&mut dirty) {
                    process(&app, &graph, &item);
                }
            }
            match rx.recv().await {
                Ok(r) => graph.observe(&r, &mut dirty),
                Err(RecvError::Lagged(_)) => lost = true,
                Err(RecvError::Closed) => return,
            }
            loop {
                match rx.try_recv() {
                    Ok(r) => graph.observe(&r, &mut dirty),
                    Err(TryRecvError::Lagged(_)) => lost = true,
                    Err(_) => break,
                }
            }
            if lost {
                let Some(app) = weak.upgrade() else { return };
                graph.rebuild(&app.store, &mut dirty);
            }
        }
    });
}

/// How one owner reference resolves (`classifyReferences`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    /// Exists and is not waiting for its dependents.
    Solid,
    /// Gone, or replaced by an object with another uid.
    Dangling,
    /// Being deleted in the foreground.
    Waiting,
    /// Its kind is not served, or it cannot be an owner of this object.
    Unresolvable,
}

fn storage_info(app: &Cluster, storage: &str) -> Option<ResourceInfo> {
    app.registry
        .all()
        .into_iter()
        .find(|i| i.storage_key() == storage)
}

fn classify(app: &Cluster, dependent_ns: &str, r: &OwnerRef) -> Owner {
    let (group, version) = match r.api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", r.api_version.as_str()),
    };
    let all = app.registry.all();
    let same_kind = |i: &&ResourceInfo| i.group == group && i.kind == r.kind;
    let Some(info) = all
        .iter()
        .filter(same_kind)
        .find(|i| i.version == version)
        .or_else(|| all.iter().find(same_kind))
    else {
        return Owner::Unresolvable;
    };
    if info.namespaced && dependent_ns.is_empty() {
        return Owner::Unresolvable;
    }
    let ns = if info.namespaced { dependent_ns } else { "" };
    let key = (ns.to_string(), r.name.clone());
    let Some(owner) = app.store.get(&info.storage_key(), &key) else {
        return Owner::Dangling;
    };
    let meta = Meta::parse(&owner.json);
    if meta.uid != r.uid {
        Owner::Dangling
    } else if meta.deleting() && meta.has_finalizer(FOREGROUND) {
        Owner::Waiting
    } else {
        Owner::Solid
    }
}

/// Acts on one object: an owner being deleted with a GC finalizer, or a
/// dependent whose owners may be gone.
fn process(app: &Cluster, graph: &Graph, item: &Item) {
    let Some(stored) = app.store.get(&item.0, &item.1) else {
        return;
    };
    let meta = Meta::parse(&stored.json);
    if meta.deleting() {
        if meta.has_finalizer(ORPHAN) {
            orphan_dependents(app, graph, item, &meta.uid);
        } else if meta.has_finalizer(FOREGROUND) {
            delete_dependents(app, graph, item, &meta.uid);
        }
        return;
    }
    if meta.owners().is_empty() {
        return;
    }
    let classes: Vec<(Owner, &str)> = meta
        .owners()
        .iter()
        .map(|r| (classify(app, &item.1 .0, r), r.uid.as_str()))
        .collect();
    if classes.iter().any(|(c, _)| *c == Owner::Unresolvable) {
        return;
    }
    let has = |want: Owner| classes.iter().any(|(c, _)| *c == want);
    if has(Owner::Solid) {
        let gone: Vec<&str> = classes
            .iter()
            .filter(|(c, _)| matches!(c, Owner::Dangling | Owner::Waiting))
            .map(|(_, u)| *u)
            .collect();
        if !gone.is_empty() {
            remove_owner_refs(app, item, &gone);
        }
        return;
    }
    // No solid owner left: collect it. A dependent of a foreground owner
    // that has dependents itself goes in the foreground too.
    let policy = if has(Owner::Waiting) && graph.has_dependents(&meta.uid) {
        Propagation::Foreground
    } else if meta.has_finalizer(ORPHAN) {
        Propagation::Orphan
    } else if meta.has_finalizer(FOREGROUND) {
        Propagation::Foreground
    } else {
        Propagation::Background
    };
    collect(app, item, &meta.uid, policy);
}

/// Foreground: every dependent goes; the owner's finalizer goes once no
/// dependent that blocks it (`blockOwnerDeletion: true`) exists.
fn delete_dependents(app: &Cluster, graph: &Graph, owner: &Item, uid: &str) {
    let mut blocked = false;
    for dep in graph.dependents_of(uid) {
        let Some(stored) = app.store.get(&dep.0, &dep.1) else {
            continue;
        };
        let meta = Meta::parse(&stored.json);
        let refs: Vec<&OwnerRef> = meta.owners().iter().filter(|r| r.uid == uid).collect();
        if refs.is_empty() {
            continue;
        }
        blocked |= refs.iter().any(|r| r.block_owner_deletion == Some(true));
        if !meta.deleting() {
            process(app, graph, &dep);
        }
    }
    if !blocked {
        remove_finalizer(app, owner, uid, FOREGROUND);
    }
}

/// Orphan: the dependents lose their references to the owner, then the
/// owner its finalizer.
fn orphan_dependents(app: &Cluster, graph: &Graph, owner: &Item, uid: &str) {
    let mut done = true;
    for dep in graph.dependents_of(uid) {
        done &= remove_owner_refs(app, &dep, &[uid]);
    }
    if done {
        remove_finalizer(app, owner, uid, ORPHAN);
    }
}

/// Drops the references to `uids` from `item`; false if it could not.
fn remove_owner_refs(app: &Cluster, item: &Item, uids: &[&str]) -> bool {
    for _ in 0..ATTEMPTS {
        let Some(stored) = app.store.get(&item.0, &item.1) else {
            return true;
        };
        let mut v = stored.value();
        let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) else {
            return true;
        };
        let Some(refs) = meta.get("ownerReferences").and_then(Value::as_array) else {
            return true;
        };
        let kept: Vec<Value> = refs
            .iter()
            .filter(|r| !uids.contains(&r.get("uid").and_then(Value::as_str).unwrap_or_default()))
            .cloned()
            .collect();
        if kept.len() == refs.len() {
            return true;
        }
        if kept.is_empty() {
            meta.remove("ownerReferences");
        } else {
            meta.insert("ownerReferences".into(), Value::Array(kept));
        }
        match app.store.update(&item.0, &item.1, Some(stored.rv), v) {
            Err(StoreError::Conflict) => continue,
            Err(StoreError::NotFound) | Ok(_) => return true,
            Err(e) => {
                tracing::warn!("garbage collector cannot update {item:?}: {e}");
                return false;
            }
        }
    }
    false
}

/// Removes `finalizer` from the object `item` (if it still has `uid`),
/// removing the object when it was the last.
fn remove_finalizer(app: &Cluster, item: &Item, uid: &str, finalizer: &str) {
    for _ in 0..ATTEMPTS {
        let Some(stored) = app.store.get(&item.0, &item.1) else {
            return;
        };
        let mut v = stored.value();
        if meta_str(&v, "uid") != Some(uid) {
            return;
        }
        let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) else {
            return;
        };
        let Some(list) = meta.get("finalizers").and_then(Value::as_array) else {
            return;
        };
        let kept: Vec<Value> = list.iter().filter(|f| *f != finalizer).cloned().collect();
        if kept.len() == list.len() {
            return;
        }
        if kept.is_empty() {
            meta.remove("finalizers");
        } else {
            meta.insert("finalizers".into(), Value::Array(kept));
        }
        let result = if ready_to_remove(&v) {
            app.store
                .delete(&item.0, &item.1, Some(stored.rv), Some(v))
                .inspect(|s| {
                    if let Some(info) = storage_info(app, &item.0) {
                        crd::on_delete(&app.registry, &app.store, &info, &s.value());
                    }
                })
        } else {
            app.store.update(&item.0, &item.1, Some(stored.rv), v)
        };
        match result {
            Err(StoreError::Conflict) => continue,
            Ok(_) | Err(StoreError::NotFound) => return,
            Err(e) => {
                tracing::warn!("garbage collector cannot update {item:?}: {e}");
                return;
            }
        }
    }
}

/// Deletes the dependent `item` (if it still has `uid`) with `policy`, as
/// a DELETE through the API would: pods gracefully, objects with
/// finalizers marked and left to them, namespaces terminated.
fn collect(app: &Cluster, item: &Item, uid: &str, policy: Propagation) {
    let Some(info) = storage_info(app, &item.0) else {
        return;
    };
    let is_pod = info.group.is_empty() && info.plural == "pods";
    let is_namespace = info.group.is_empty() && info.plural == "namespaces";
    for _ in 0..ATTEMPTS {
        let Some(stored) = app.store.get(&item.0, &item.1) else {
            return;
        };
        let mut v = stored.value();
        if meta_str(&v, "uid") != Some(uid) || meta_str(&v, "deletionTimestamp").is_some() {
            return;
        }
        if is_namespace {
            namespaces::mark_terminating(&mut v);
            if app
                .store
                .update(&item.0, &item.1, Some(stored.rv), v)
                .is_ok()
            {
                let served = app.registry.all().into_iter().filter(|i| i.namespaced);
                namespaces::sweep(
                    app.store.clone(),
                    served.collect(),
                    item.1 .1.clone(),
                    app.kubelet,
                );
                return;
            }
            continue;
        }
        policy::apply(&mut v, Some(policy));
        let graceful = if is_pod {
            kubelet::pod_deletion(&v, &json!({}))
        } else {
            PodDeletion::Immediate
        };
        let has_finalizers = v
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        let result = match &graceful {
            PodDeletion::Graceful {
                grace,
                deletion_timestamp,
            } => {
                kubelet::mark_terminating(&mut v, *grace, deletion_timestamp);
                let r = app.store.update(&item.0, &item.1, Some(stored.rv), v);
                if r.is_ok() && app.kubelet {
                    kubelet::finish_after(
                        app.store.clone(),
                        item.0.to_string(),
                        item.1.clone(),
                        uid.to_string(),
                        std::time::Duration::from_secs(u64::try_from(*grace).unwrap_or(0)),
                    );
                }
                r
            }
            _ if has_finalizers => {
                if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.insert("deletionTimestamp".into(), json!(now_rfc3339()));
                    meta.insert("deletionGracePeriodSeconds".into(), json!(0));
                }
                app.store.update(&item.0, &item.1, Some(stored.rv), v)
            }
            _ => app
                .store
                .delete(&item.0, &item.1, Some(stored.rv), None)
                .inspect(|s| crd::on_delete(&app.registry, &app.store, &info, &s.value())),
        };
        match result {
            Err(StoreError::Conflict) => continue,
            Ok(_) | Err(StoreError::NotFound) => return,
            Err(e) => {
                tracing::warn!("garbage collector cannot delete {item:?}: {e}");
                return;
            }
        }
    }
}
