//! The write verbs that store a whole object: create, update, the
//! `pods/binding` subresource and create-only resources, each a
//! read-modify-write retried on concurrent modification, and the
//! admission steps every write shares (pod checks, Service allocation,
//! storing a created object). Patches are `patches`', deletes `deletes`'.
//! Writes go through the store's optimistic concurrency; they never bypass it.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};

use super::{
    json_response, parse_rv, store_err, value_response, Attempt, Ctx, Target, MAX_RETRIES,
};
use crate::http::access;
use crate::http::convert;
use crate::http::write_log::WriteRecord;
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
use crate::status::{ApiError, Result};
use crate::storage::store::{ObjKey, StoreError, Stored};

/// What a committed update answers: its status, the object and, when it
/// was stored, the stored JSON (exactly the object's encoding), which is
/// answered as it is rather than encoded again.
pub(super) type Committed = (StatusCode, Value, Option<Arc<[u8]>>);

impl Ctx<'_> {
    /// The answer to a committed update (see [`Committed`]).
    /// The stored object is kept decoded for the next write of it.
    pub(super) fn committed_response(&self, (code, v, json): Committed) -> Response {
        match json {
            Some(json) => {
                let response = json_response(code, self.out_bytes(&json));
                self.store().keep_decoded(&json, v);
                response
            }
            None => value_response(code, &self.out(v)),
        }
    }

    /// Records the stored version `obj` of the target in the write log
    /// (when it is on), with who sent it.
    pub(super) fn log_write(&self, obj: &Value) {
        self.app.write_log.record(|| WriteRecord {
            rv: meta_str(obj, "resourceVersion")
                .and_then(|rv| rv.parse().ok())
                .unwrap_or_default(),
            resource: match &self.target.sub {
                Some(sub) => format!("{}/{sub}", self.target.info.plural),
                None => self.target.info.plural.clone(),
            },
            namespace: meta_str(obj, "namespace").unwrap_or_default().to_string(),
            name: meta_str(obj, "name").unwrap_or_default().to_string(),
            user_agent: self
                .headers
                .get(axum::http::header::USER_AGENT)
                .and_then(|h| h.to_str().ok())
                .unwrap_or_default()
                .to_string(),
            user: self.user.name.clone(),
            at: std::time::Instant::now(),
        });
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
    pub(super) fn check_pod(&self, old: Option<&Value>, new: &mut Value) -> Result<()> {
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

    pub(super) fn after_write(&self, obj: &Value) {
        crd::sync_registry(&self.app.cluster.registry, &self.target.info, obj);
    }

    pub(super) fn check_url_name(&self, obj: &mut Value) -> Result<()> {
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
                // An update that changes nothing keeps the old version.
                if stored.rv != old.rv {
                    self.log_write(&v);
                }
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

    /// For a Service (`own`: its key, on update): refuses requested cluster
    /// IPs and node ports that are out of range or that another Service
    /// holds, and allocates the ones it lacks — what the real server's
    /// allocators do in storage, after the managed fields. Keep the
    /// reservation until the write is stored (or has failed).
    pub(super) fn allocate_service(
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
    pub(super) fn store_created(
        &self,
        key: ObjKey,
        name: &str,
        mut obj: Value,
    ) -> Result<Response> {
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
        let value = stored.value();
        self.log_write(&value);
        self.after_write(&value);
        Ok(json_response(
            StatusCode::CREATED,
            self.out_bytes(&stored.json),
        ))
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

    pub(super) fn bind_to(&self, target: &Target, binding: &Value) -> Result<Response> {
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
}
