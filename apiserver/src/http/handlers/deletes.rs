//! The delete verbs: delete (DeleteOptions, preconditions, graceful pod
//! deletion, finalizers, propagation policies, namespace termination) and
//! deletecollection, each a read-modify-write retried on concurrent
//! modification. It never removes an object a finalizer still holds.

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};

use super::{store_err, value_response, Ctx, Target, MAX_RETRIES};
use crate::controllers::gc;
use crate::controllers::kubelet::{self, PodDeletion};
use crate::controllers::namespaces;
use crate::rules::crd;
use crate::rules::objects::{meta_mut, meta_str, now_rfc3339};
use crate::status::{ApiError, Details, Result};
use crate::storage::store::{ObjKey, StoreError};

impl Ctx<'_> {
    /// The request's DeleteOptions, as `rest.DeleteResource` reads them:
    /// from the body when it has one (decoded as a `DeleteOptions`, so a
    /// field of the wrong type or out of range is a 400), else from the
    /// query (`gracePeriodSeconds`, `propagationPolicy`,
    /// `orphanDependents`; a value that does not parse is a 400).
    fn delete_options(&self, body: &[u8]) -> Result<Value> {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
        if body.iter().all(u8::is_ascii_whitespace) {
            let mut opts = serde_json::Map::new();
            if let Some(g) = self.q("gracePeriodSeconds") {
                let g: i64 = g.parse().map_err(|e| {
                    ApiError::BadRequest(format!(
                        "gracePeriodSeconds: strconv.ParseInt: parsing {}: {e}",
                        json!(g)
                    ))
                })?;
                opts.insert("gracePeriodSeconds".into(), json!(g));
            }
            if let Some(p) = self.q("propagationPolicy") {
                opts.insert("propagationPolicy".into(), json!(p));
            }
            if let Some(o) = self.q("orphanDependents") {
                let o: bool = o.parse().map_err(|_| {
                    ApiError::BadRequest(format!(
                        "orphanDependents: strconv.ParseBool: parsing {}: invalid syntax",
                        json!(o)
                    ))
                })?;
                opts.insert("orphanDependents".into(), json!(o));
            }
            return Ok(Value::Object(opts));
        }
        let opts: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::BadRequest(format!("invalid DeleteOptions: {e}")))?;
        serde_json::from_value::<DeleteOptions>(opts.clone())
            .map_err(|e| ApiError::BadRequest(format!("invalid DeleteOptions: {e}")))?;
        Ok(opts)
    }

    pub(super) fn delete(&self, body: Bytes) -> Result<Response> {
        let opts = self.delete_options(&body)?;
        let (mut code, v) = self.delete_one(&self.target.key(), &opts)?;
        // rest.DeleteResource: 202 when the object stays and the client
        // asked for cascading with `orphanDependents: false`.
        let stays = self
            .store()
            .get(&self.target.storage(), &self.target.key())
            .is_some_and(|s| meta_str(&s.value(), "uid") == meta_str(&v, "uid"));
        if stays && opts.get("orphanDependents") == Some(&Value::Bool(false)) {
            code = StatusCode::ACCEPTED;
        }
        Ok(value_response(code, &self.out(v)))
    }

    fn delete_one(&self, key: &ObjKey, opts: &Value) -> Result<(StatusCode, Value)> {
        let storage = self.target.storage();
        let target = Target {
            name: Some(key.1.clone()),
            ..self.target.clone()
        };
        let propagation = gc::policy::requested(opts, self.q("propagationPolicy"))?;
        let is_namespace = target.info.plural == "namespaces" && target.info.group.is_empty();
        for _ in 0..MAX_RETRIES {
            let old = self
                .store()
                .get(&storage, key)
                .ok_or_else(|| target.not_found())?;
            let mut v = old.value();
            if let Some(uid) = opts.pointer("/preconditions/uid").and_then(Value::as_str) {
                let actual = meta_str(&v, "uid").unwrap_or_default();
                if uid != actual {
                    return Err(ApiError::Conflict {
                        message: format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"),
                        details: Details { name: key.1.clone(), group: target.info.group.clone(), kind: target.info.plural.clone() },
                        causes: Vec::new(),
                    });
                }
            }
            if let Some(rv) = opts
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
            {
                if rv != old.rv.to_string() {
                    return Err(ApiError::Conflict {
                        message: format!("Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}", old.rv),
                        details: Details { name: key.1.clone(), group: target.info.group.clone(), kind: target.info.plural.clone() },
                        causes: Vec::new(),
                    });
                }
            }
            // The `orphan` / `foregroundDeletion` finalizers the policy
            // asks for (the garbage collector finishes them, see `gc`).
            let gc_finalizers = !is_namespace && gc::policy::apply(&mut v, propagation);
            let has_finalizers = v
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty());
            let is_pod = target.info.group.is_empty() && target.info.plural == "pods";
            let graceful = if is_pod {
                kubelet::pod_deletion(&v, opts)
            } else {
                PodDeletion::Immediate
            };
            if graceful == PodDeletion::Pending && !gc_finalizers {
                return Ok((StatusCode::OK, v));
            }
            if let PodDeletion::Graceful {
                grace,
                deletion_timestamp,
            } = &graceful
            {
                kubelet::mark_terminating(&mut v, *grace, deletion_timestamp);
                if self.dry_run() {
                    return Ok((StatusCode::OK, v));
                }
                match self.store().update(&storage, key, Some(old.rv), v) {
                    Ok(s) => {
                        let v = s.value();
                        if self.app.cluster.kubelet {
                            kubelet::finish_after(
                                self.app.cluster.store.clone(),
                                storage.clone(),
                                key.clone(),
                                meta_str(&v, "uid").unwrap_or_default().to_string(),
                                std::time::Duration::from_secs(u64::try_from(*grace).unwrap_or(0)),
                            );
                        }
                        return Ok((StatusCode::OK, v));
                    }
                    Err(StoreError::Conflict) => continue,
                    Err(e) => return Err(store_err(&target, e)),
                }
            }
            if self.dry_run() {
                return Ok((StatusCode::OK, v));
            }
            let pending = graceful == PodDeletion::Pending;
            if has_finalizers || pending {
                if meta_str(&v, "deletionTimestamp").is_some() {
                    if !gc_finalizers {
                        return Ok((StatusCode::OK, v));
                    }
                    return match self.store().update(&storage, key, Some(old.rv), v) {
                        Ok(s) => Ok((StatusCode::OK, s.value())),
                        Err(StoreError::Conflict) => continue,
                        Err(e) => Err(store_err(&target, e)),
                    };
                }
                let grace = opts
                    .get("gracePeriodSeconds")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                let meta = meta_mut(&mut v);
                meta.insert("deletionTimestamp".into(), json!(now_rfc3339()));
                meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
                match self.store().update(&storage, key, Some(old.rv), v) {
                    Ok(s) => return Ok((StatusCode::OK, s.value())),
                    Err(StoreError::Conflict) => continue,
                    Err(e) => return Err(store_err(&target, e)),
                }
            }
            if is_namespace {
                // Terminating at once; the content, then the namespace,
                // go in the background (the namespace controller's work).
                if meta_str(&v, "deletionTimestamp").is_some() {
                    return Ok((StatusCode::OK, v));
                }
                namespaces::mark_terminating(&mut v);
                match self.store().update(&storage, key, Some(old.rv), v) {
                    Ok(s) => {
                        let served = self
                            .app
                            .cluster
                            .registry
                            .all()
                            .into_iter()
                            .filter(|i| i.namespaced);
                        namespaces::sweep(
                            self.app.cluster.store.clone(),
                            served.collect(),
                            key.1.clone(),
                            self.app.cluster.kubelet,
                        );
                        return Ok((StatusCode::OK, s.value()));
                    }
                    Err(StoreError::Conflict) => continue,
                    Err(e) => return Err(store_err(&target, e)),
                }
            }
            match self.store().delete(&storage, key, Some(old.rv), None) {
                Ok(s) => {
                    let v = s.value();
                    crd::on_delete(
                        &self.app.cluster.registry,
                        &self.app.cluster.store,
                        &target.info,
                        &v,
                    );
                    return Ok((StatusCode::OK, v));
                }
                Err(StoreError::Conflict) => continue,
                Err(e) => return Err(store_err(&target, e)),
            }
        }
        Err(target.stale())
    }

    pub(super) async fn delete_collection(&self, body: Bytes) -> Result<Response> {
        let opts = self.delete_options(&body)?;
        let selector = self.selector()?;
        let storage = self.target.storage();
        let namespace = self.target.namespace.clone();
        let page = self
            .store()
            .list(&storage, namespace.as_deref(), None, 0, |a| {
                selector.matches(a)
            });
        let mut items = Vec::new();
        for raw in page.items {
            let v: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
            let key = (
                meta_str(&v, "namespace").unwrap_or_default().to_string(),
                meta_str(&v, "name").unwrap_or_default().to_string(),
            );
            match self.delete_one(&key, &opts) {
                Ok((_, v)) => items.push(self.out(v)),
                Err(ApiError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(value_response(
            StatusCode::OK,
            &json!({
                "kind": self.target.info.list_kind(),
                "apiVersion": self.target.info.api_version(),
                "metadata": {"resourceVersion": self.store().current_rv().to_string()},
                "items": items,
            }),
        ))
    }
}
