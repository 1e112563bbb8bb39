//! The write verbs: create, update, patch (JSON, merge, strategic, apply),
//! delete (finalizers, preconditions) and deletecollection, each a
//! read-modify-write retried on concurrent modification. Writes go through
//! the store's optimistic concurrency; they never bypass it.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{header, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

use super::{
    json_response, parse_rv, store_err, value_response, Attempt, Ctx, Target, MAX_RETRIES,
};
use crate::controllers::gc;
use crate::controllers::kubelet::{self, PodDeletion};
use crate::controllers::namespaces;
use crate::http::access;
use crate::http::convert;
use crate::patch;
use crate::rules::crd;
use crate::rules::object_rules;
use crate::rules::objects::{
    generated_name, meta_mut, meta_str, now_rfc3339, prepare_create, prepare_update,
    ready_to_remove, strategy_create, validate_name,
};
use crate::rules::pods;
use crate::rules::services;
use crate::rules::spec_rules;
use crate::rules::validation::Write;
use crate::status::{ApiError, Cause, Details, Result};
use crate::storage::store::{ObjKey, StoreError, Stored};

/// What a committed update answers: its status, the object and, when it
/// was stored, the stored JSON (exactly the object's encoding), which is
/// answered as it is rather than encoded again.
pub(super) type Committed = (StatusCode, Value, Option<Arc<[u8]>>);

impl Ctx<'_> {
    /// The answer to a committed update (see [`Committed`]).
    /// The stored object is kept decoded for the next write of it.
    fn committed_response(&self, (code, v, json): Committed) -> Response {
        match json {
            Some(json) => {
                let response = json_response(code, self.out_bytes(&json));
                self.store().keep_decoded(&json, v);
                response
            }
            None => value_response(code, &self.out(v)),
        }
    }

    pub(super) fn create(&self, body: Bytes) -> Result<Response> {
        let mut obj = self.decode_object(&body)?;
        self.check_body(&mut obj, Write::Create { body: &body })?;
        self.require_namespace(meta_str(&obj, "name").unwrap_or_default())?;
        if meta_str(&obj, "resourceVersion").is_some_and(|rv| !rv.is_empty()) {
            return Err(ApiError::BadRequest(
                "resourceVersion should not be set on objects to be created".into(),
            ));
        }
        let mut name = meta_str(&obj, "name").unwrap_or_default().to_string();
        let generate = meta_str(&obj, "generateName")
            .unwrap_or_default()
            .to_string();
        if name.is_empty() && !generate.is_empty() {
            name = generated_name(&generate);
            meta_mut(&mut obj).insert("name".into(), json!(name));
        }
        if name.is_empty() {
            return Err(self.invalid(
                "",
                vec![(
                    "metadata.name".into(),
                    "Required value: name or generateName is required".into(),
                )],
            ));
        }
        let mut errs = validate_name(&self.target.info, &name);
        errs.extend(object_rules::validate(&self.target.info, &obj));
        if !errs.is_empty() {
            return Err(self.invalid(&name, errs));
        }
        let crd_errs = crd::validate(&self.target.info, &obj);
        if !crd_errs.is_empty() {
            return Err(self.invalid(&name, crd_errs));
        }
        let now = now_rfc3339();
        let mut obj = convert::to_storage(&self.target.info, obj);
        prepare_create(&self.target.info, &mut obj, &now);
        self.admit_custom(&mut obj)?;
        self.check_pod(None, &mut obj)?;
        crd::on_create(&self.target.info, &mut obj);
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("managedFields");
        }
        patch::record_update_with(
            None,
            &mut obj,
            &self.manager,
            "Update",
            &now,
            &self.apply_options(),
            &self.target.object_kind(),
        );
        strategy_create(&self.target.info, &mut obj);
        let key = (
            self.target.namespace.clone().unwrap_or_default(),
            name.clone(),
        );
        self.store_created(key, &name, obj)
    }

    /// A pod about to be stored (`old`: the stored one, for an update
    /// through the main resource) obeys the real server's pod validation;
    /// other kinds pass. An update is defaulted first, as its body would be.
    fn check_pod(&self, old: Option<&Value>, new: &mut Value) -> Result<()> {
        let info = &self.target.info;
        if !(info.group.is_empty() && info.plural == "pods") {
            return Ok(());
        }
        let errs = match old {
            Some(old) => {
                crate::rules::objects::default_pod_spec(new);
                pods::validation::validate_update(old, new)
            }
            None => pods::validation::validate_spec(new),
        };
        if errs.is_empty() {
            return Ok(());
        }
        Err(self.invalid(meta_str(new, "name").unwrap_or_default(), errs))
    }

    fn after_write(&self, obj: &Value) {
        crd::sync_registry(&self.app.cluster.registry, &self.target.info, obj);
    }

    fn check_url_name(&self, obj: &mut Value) -> Result<()> {
        let url = self.target.name();
        match meta_str(obj, "name") {
            Some(n) if !n.is_empty() && n != url => Err(ApiError::BadRequest(format!(
                "the name of the object ({n}) does not match the name on the URL ({url})"
            ))),
            _ => {
                meta_mut(obj).insert("name".into(), json!(url));
                Ok(())
            }
        }
    }

    /// Commits `new` over `old`: carries immutable fields, separates
    /// status, records managedFields, and removes the object when a
    /// pending deletion lost its last finalizer.
    pub(super) fn commit_update(
        &self,
        old: &Stored,
        new: Value,
        apply_fields: Option<Value>,
    ) -> Result<Attempt<Committed>> {
        self.commit_update_with(old, self.store().decoded(old), new, apply_fields)
    }

    /// [`Ctx::commit_update`] with `old` already decoded (`oldv`, storage
    /// form): a large object is not decoded twice per write.
    pub(super) fn commit_update_with(
        &self,
        old: &Stored,
        oldv: Value,
        mut new: Value,
        apply_fields: Option<Value>,
    ) -> Result<Attempt<Committed>> {
        let requested = meta_str(&new, "resourceVersion")
            .filter(|s| !s.is_empty())
            .map(parse_rv)
            .transpose()?;
        if requested.is_some_and(|r| r != old.rv) {
            return Err(self.target.stale());
        }
        // `rest.BeforeUpdate` keeps the stored uid only when the write names
        // none; naming another is ValidateObjectMetaUpdate's immutable field.
        if let Some(uid) = meta_str(&new, "uid").filter(|u| !u.is_empty()) {
            if Some(uid) != meta_str(&oldv, "uid") {
                return Err(self.invalid(
                    self.target.name(),
                    vec![(
                        "metadata.uid".into(),
                        format!("Invalid value: {}: field is immutable", json!(uid)),
                    )],
                ));
            }
        }
        let status_write = self.target.sub.as_deref() == Some("status");
        prepare_update(&self.target.info, &oldv, &mut new, status_write);
        let mut errs = object_rules::validate(&self.target.info, &new);
        if !status_write {
            errs.extend(spec_rules::validate_prepared(
                &self.target.info,
                &new,
                Some(&oldv),
            ));
        }
        if !errs.is_empty() {
            return Err(self.invalid(self.target.name(), errs));
        }
        self.admit_custom(&mut new)?;
        // Held until the update is stored or has failed.
        let mut _held = None;
        if !status_write {
            self.check_pod(Some(&oldv), &mut new)?;
            // Only a change of what the allocators hand out needs them.
            let allocated = |v: &Value| {
                ["type", "clusterIP", "ports"]
                    .map(|k| v.get("spec").and_then(|s| s.get(k)).cloned())
            };
            if allocated(&new) != allocated(&oldv) {
                _held =
                    self.allocate_service(&mut new, self.target.name(), Some(&self.target.key()))?;
            }
        }
        if crd::is_crd(&self.target.info) {
            let errs = crd::validate(&self.target.info, &new);
            if !errs.is_empty() {
                return Err(self.invalid(self.target.name(), errs));
            }
        }
        let now = now_rfc3339();
        match apply_fields {
            Some(mf) => {
                meta_mut(&mut new).insert("managedFields".into(), mf);
            }
            None => patch::record_update_with(
                Some(&oldv),
                &mut new,
                &self.manager,
                "Update",
                &now,
                &self.apply_options(),
                &self.target.object_kind(),
            ),
        }
        if meta_str(&oldv, "deletionTimestamp").is_some() {
            let had: Vec<Value> = oldv
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let added = new
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| f.iter().any(|x| !had.contains(x)));
            if added {
                return Err(self.invalid(
                    self.target.name(),
                    vec![(
                        "metadata.finalizers".into(),
                        "Forbidden: no new finalizers can be added if the object is being deleted"
                            .into(),
                    )],
                ));
            }
        }
        if self.dry_run() {
            return Ok(Attempt::Done((StatusCode::OK, new, None)));
        }
        let storage = self.target.storage();
        let key = self.target.key();
        if ready_to_remove(&new) {
            return match self.store().delete(&storage, &key, Some(old.rv), Some(new)) {
                Ok(s) => {
                    crd::on_delete(
                        &self.app.cluster.registry,
                        &self.app.cluster.store,
                        &self.target.info,
                        &s.value(),
                    );
                    Ok(Attempt::Done((StatusCode::OK, s.value(), None)))
                }
                Err(StoreError::Conflict) if requested.is_none() => Ok(Attempt::Retry),
                Err(e) => Err(store_err(&self.target, e)),
            };
        }
        match self.store().update_value(&storage, &key, Some(old.rv), new) {
            Ok((stored, v)) => {
                self.after_write(&v);
                Ok(Attempt::Done((StatusCode::OK, v, Some(stored.json))))
            }
            Err(StoreError::Conflict) if requested.is_none() => Ok(Attempt::Retry),
            Err(e) => Err(store_err(&self.target, e)),
        }
    }

    pub(super) fn update(&self, body: Bytes) -> Result<Response> {
        let mut obj = self.decode_object(&body)?;
        self.check_body(&mut obj, Write::Update { body: &body })?;
        self.check_url_name(&mut obj)?;
        for _ in 0..MAX_RETRIES {
            let old = self
                .store()
                .get(&self.target.storage(), &self.target.key())
                .ok_or_else(|| self.target.not_found())?;
            let new = convert::to_storage(&self.target.info, obj.clone());
            if let Attempt::Done(done) = self.commit_update(&old, new, None)? {
                return Ok(self.committed_response(done));
            }
        }
        Err(self.target.stale())
    }

    pub(super) fn patch(&self, body: Bytes) -> Result<Response> {
        let ct = self
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        let ct = ct.split(';').next().unwrap_or_default().trim().to_string();
        let is_custom = crd::is_custom(&self.target.info);
        let supported = [
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml",
        ];
        let smp = "application/strategic-merge-patch+json";
        if !(supported.contains(&ct.as_str()) || (ct == smp && !is_custom)) {
            let mut accepted: Vec<&str> = supported.to_vec();
            if !is_custom {
                accepted.insert(2, smp);
            }
            return Err(ApiError::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            )));
        }
        if ct == "application/apply-patch+yaml" {
            return self.apply(&body);
        }
        let patch_doc: Value = serde_json::from_slice(&body)
            .map_err(|e| ApiError::BadRequest(format!("error decoding patch: {e}")))?;
        // Only a resourceVersion the patch itself names is a precondition;
        // one the patched object inherited from the stored one is not (the
        // real server's patcher re-applies the patch after a conflict).
        let names_version = match ct.as_str() {
            "application/json-patch+json" => patch_doc.as_array().is_some_and(|ops| {
                ops.iter().any(|op| {
                    op.get("path").and_then(Value::as_str).is_some_and(|p| {
                        p == "/metadata" || p.starts_with("/metadata/resourceVersion")
                    })
                })
            }),
            _ => patch_doc.pointer("/metadata/resourceVersion").is_some(),
        };
        for _ in 0..MAX_RETRIES {
            let old = self
                .store()
                .get(&self.target.storage(), &self.target.key())
                .ok_or_else(|| self.target.not_found())?;
            let oldv = self.out(self.store().decoded(&old));
            let patched = match ct.as_str() {
                "application/json-patch+json" => {
                    patch::json_patch(&oldv, &patch_doc).map_err(patch_error)?
                }
                "application/merge-patch+json" => {
                    if !patch_doc.is_object() {
                        return Err(ApiError::BadRequest(
                            "error decoding patch: a merge patch must be a JSON object".into(),
                        ));
                    }
                    patch::json_merge_patch(&oldv, &patch_doc)
                }
                _ => patch::strategic_merge_patch(&oldv, &patch_doc, &self.target.object_kind())
                    .map_err(patch_error)?,
            };
            let mut patched = patched;
            if !patched.is_object() {
                return Err(ApiError::Unprocessable(
                    "the patched object is not a JSON object".into(),
                ));
            }
            if !names_version {
                if let Some(meta) = patched.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.remove("resourceVersion");
                }
            }
            let write = match ct.as_str() {
                "application/json-patch+json" => Write::JsonPatch { patch: &body },
                "application/merge-patch+json" => Write::MergePatch { patch: &body },
                _ => Write::StrategicMergePatch {
                    patch: &body,
                    doc: &patch_doc,
                },
            };
            self.check_body(&mut patched, write)?;
            self.check_url_name(&mut patched)?;
            let patched = convert::to_storage(&self.target.info, patched);
            let oldv = convert::to_storage(&self.target.info, oldv);
            if let Attempt::Done(done) = self.commit_update_with(&old, oldv, patched, None)? {
                return Ok(self.committed_response(done));
            }
        }
        Err(self.target.stale())
    }

    fn apply(&self, body: &[u8]) -> Result<Response> {
        if self.q("fieldManager").is_none() {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "PatchOptions",
                "",
                vec![(
                    "fieldManager".into(),
                    "Required value: is required for apply patch".into(),
                )],
            ));
        }
        let force = self.q("force").is_some_and(|f| f == "true");
        let mut applied: Value = crate::http::body::parse_apply(body)
            .map_err(|e| ApiError::BadRequest(format!("error decoding YAML: {e}")))?;
        if !applied.is_object() {
            return Err(ApiError::BadRequest(
                "error decoding YAML: the apply configuration must be an object".into(),
            ));
        }
        // named as sent: the real server's typed-conversion error prints them so
        let (namespace, name) = (
            meta_str(&applied, "namespace")
                .unwrap_or_default()
                .to_string(),
            meta_str(&applied, "name").unwrap_or_default().to_string(),
        );
        let write = Write::Apply {
            namespace: &namespace,
            name: &name,
        };
        self.check_body(&mut applied, write)?;
        self.check_url_name(&mut applied)?;
        let kind = self.target.object_kind();
        for _ in 0..MAX_RETRIES {
            let old = self.store().get(&self.target.storage(), &self.target.key());
            let oldv = old.as_ref().map(|o| self.out(self.store().decoded(o)));
            let now = now_rfc3339();
            let result = patch::server_side_apply_with(
                oldv.as_ref(),
                &applied,
                &self.manager,
                force,
                &kind,
                &now,
                &self.apply_options(),
            )
            .map_err(|e| self.apply_error(e))?;
            match old {
                Some(old) => {
                    let mf = result
                        .pointer("/metadata/managedFields")
                        .cloned()
                        .unwrap_or_else(|| json!([]));
                    let result = convert::to_storage(&self.target.info, result);
                    let oldv =
                        convert::to_storage(&self.target.info, oldv.unwrap_or_else(|| old.value()));
                    if let Attempt::Done(done) =
                        self.commit_update_with(&old, oldv, result, Some(mf))?
                    {
                        return Ok(self.committed_response(done));
                    }
                }
                // A missing object is never created through /status, and an
                // apply naming a uid means "this object", which is gone
                // (patch.go, `patcher.patchResource`: "uid mismatch").
                None if self.target.sub.is_some() => return Err(self.target.not_found()),
                None if meta_str(&applied, "uid").is_some_and(|u| !u.is_empty()) => {
                    let uid = meta_str(&applied, "uid").unwrap_or_default();
                    return Err(ApiError::conflict(
                        &self.target.info.group,
                        &self.target.info.plural,
                        self.target.name(),
                        &format!("uid mismatch: the provided object specified uid {uid}, and no existing object was found"),
                    ));
                }
                None => match self.create_from_apply(result) {
                    Err(ApiError::AlreadyExists { .. }) => continue,
                    other => return other,
                },
            }
        }
        Err(self.target.stale())
    }

    fn create_from_apply(&self, obj: Value) -> Result<Response> {
        let name = self.target.name().to_string();
        self.require_namespace(&name)?;
        // Like the real server: an apply that creates the object is
        // authorized as `create` as well as `patch`.
        let ns = self.target.namespace.as_deref();
        if self.app.faults.is_denied("create")
            || !self.user.allows(
                "create",
                &self.target.info.group,
                &self.target.info.plural,
                ns,
                Some(&name),
            )
        {
            return Err(super::forbidden(
                self.user,
                "create",
                &self.target,
                ns,
                Some(&name),
            ));
        }
        let mut errs = validate_name(&self.target.info, &name);
        errs.extend(object_rules::validate(&self.target.info, &obj));
        if !errs.is_empty() {
            return Err(self.invalid(&name, errs));
        }
        let mf = obj.pointer("/metadata/managedFields").cloned();
        let now = now_rfc3339();
        let mut obj = convert::to_storage(&self.target.info, obj);
        prepare_create(&self.target.info, &mut obj, &now);
        strategy_create(&self.target.info, &mut obj);
        self.admit_custom(&mut obj)?;
        self.check_pod(None, &mut obj)?;
        crd::on_create(&self.target.info, &mut obj);
        if let Some(mf) = mf {
            meta_mut(&mut obj).insert("managedFields".into(), mf);
        }
        self.store_created(self.target.key(), &name, obj)
    }

    /// For a Service (`own`: its key, on update): refuses requested cluster
    /// IPs and node ports that are out of range or that another Service
    /// holds, and allocates the ones it lacks — what the real server's
    /// allocators do in storage, after the managed fields. Keep the
    /// reservation until the write is stored (or has failed).
    fn allocate_service(
        &self,
        obj: &mut Value,
        name: &str,
        own: Option<&ObjKey>,
    ) -> Result<Option<services::Reservation>> {
        if !(self.target.info.group.is_empty() && self.target.info.plural == "services") {
            return Ok(None);
        }
        let key = own.cloned().unwrap_or_else(|| self.target.key());
        match self.app.cluster.services.allocate(&key, obj) {
            Ok(held) => Ok(Some(held)),
            Err(services::AllocError::Refused(field, message)) => {
                Err(self.invalid(name, vec![(field, message)]))
            }
            Err(e) => Err(ApiError::Internal(e.to_string())),
        }
    }

    /// Stores a new, admitted object and answers 201 with it (or only
    /// answers, under dryRun); a namesake that got there first is 409.
    fn store_created(&self, key: ObjKey, name: &str, mut obj: Value) -> Result<Response> {
        let errs = spec_rules::validate_prepared(&self.target.info, &obj, None);
        if !errs.is_empty() {
            return Err(self.invalid(name, errs));
        }
        let _held = self.allocate_service(&mut obj, name, None)?;
        if self.dry_run() {
            return Ok(value_response(StatusCode::CREATED, &self.out(obj)));
        }
        let stored = self
            .store()
            .create(&self.target.storage(), key, obj)
            .map_err(|e| match e {
                StoreError::AlreadyExists => ApiError::already_exists(
                    &self.target.info.group,
                    &self.target.info.plural,
                    name,
                ),
                other => store_err(&self.target, other),
            })?;
        self.after_write(&stored.value());
        Ok(json_response(
            StatusCode::CREATED,
            self.out_bytes(&stored.json),
        ))
    }

    fn apply_error(&self, e: patch::ApplyError) -> ApiError {
        match e {
            patch::ApplyError::Conflict { conflicts, message } => ApiError::Conflict {
                message,
                details: Details {
                    name: self.target.name().to_string(),
                    group: self.target.info.group.clone(),
                    kind: self.target.info.plural.clone(),
                },
                causes: conflicts
                    .into_iter()
                    .map(|c| Cause {
                        reason: "FieldManagerConflict".into(),
                        message: c.message,
                        field: c.field,
                    })
                    .collect(),
            },
            patch::ApplyError::Invalid(m) => ApiError::BadRequest(m),
        }
    }

    /// POST `pods/{name}/binding`: binds the pod to the Binding's node
    /// (see [`pods::binding`]); 201 with a success `Status`, as
    /// `BindingREST.Create` answers.
    pub(super) fn bind(&self, body: Bytes) -> Result<Response> {
        let binding = self.decode_object(&body)?;
        self.bind_to(&self.target, &binding)
    }

    /// POST of a create-only resource that stores nothing: `bindings`
    /// (binds the pod the Binding names, as `pods/{name}/binding`) and the
    /// reviews (answered, see [`access::other_review`]).
    pub(super) fn create_virtual(&self, body: Bytes) -> Result<Response> {
        let obj = self.decode_object(&body)?;
        let info = &self.target.info;
        if info.group.is_empty() && info.plural == "bindings" {
            let pods = self
                .app
                .cluster
                .registry
                .lookup("", "v1", "pods")
                .ok_or(ApiError::NoRoute)?;
            let target = Target {
                info: pods,
                namespace: self.target.namespace.clone(),
                name: meta_str(&obj, "name").map(str::to_string),
                sub: Some("binding".into()),
            };
            return self.bind_to(&target, &obj);
        }
        let tokens = self.app.tokens.read().unwrap_or_else(|p| p.into_inner());
        let review = access::other_review(&info.kind, self.user, &self.app.faults, &tokens, &obj)?;
        Ok(value_response(StatusCode::CREATED, &review))
    }

    fn bind_to(&self, target: &Target, binding: &Value) -> Result<Response> {
        let name = target.name().to_string();
        if meta_str(binding, "name").is_some_and(|n| n != name) {
            return Err(ApiError::BadRequest(
                "name in URL does not match name in Binding object".into(),
            ));
        }
        let node = pods::binding::target(binding)
            .map_err(|errs| ApiError::invalid("", "Binding", &name, errs))?;
        let storage = target.storage();
        let key = target.key();
        for _ in 0..MAX_RETRIES {
            let old = self
                .store()
                .get(&storage, &key)
                .ok_or_else(|| target.not_found())?;
            let mut pod = old.value();
            if let Some(uid) = binding.pointer("/metadata/uid").and_then(Value::as_str) {
                if meta_str(&pod, "uid") != Some(uid) {
                    return Err(target.not_found());
                }
            }
            pods::binding::bind(&mut pod, &node, &now_rfc3339())
                .map_err(|why| ApiError::conflict("", "pods/binding", &name, &why))?;
            if self.dry_run() {
                break;
            }
            match self.store().update(&storage, &key, Some(old.rv), pod) {
                Ok(_) => break,
                Err(StoreError::Conflict) => continue,
                Err(e) => return Err(store_err(target, e)),
            }
        }
        Ok(value_response(
            StatusCode::CREATED,
            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        ))
    }

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

/// A malformed patch document is 400; one that does not apply is 422.
fn patch_error(e: patch::PatchError) -> ApiError {
    match e {
        patch::PatchError::InvalidPatch(_) => ApiError::BadRequest(e.to_string()),
        other => ApiError::Unprocessable(other.to_string()),
    }
}
