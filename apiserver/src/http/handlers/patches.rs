//! The patch verb: JSON, merge and strategic merge patches and server-side
//! apply (creating the object when apply finds none), each a
//! read-modify-write retried on concurrent modification, and how patch
//! and apply failures are answered. Patch semantics are `crate::patch`'s;
//! this file never merges anything itself.

use axum::body::Bytes;
use axum::http::header;
use axum::response::Response;
use serde_json::{json, Value};

use super::{Attempt, Ctx, MAX_RETRIES};
use crate::http::convert;
use crate::patch;
use crate::rules::crd;
use crate::rules::object_rules;
use crate::rules::objects::{
    meta_mut, meta_str, now_rfc3339, prepare_create, strategy_create, validate_name,
};
use crate::rules::validation::Write;
use crate::status::{ApiError, Cause, Details, Result};

impl Ctx<'_> {
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
}

/// A malformed patch document is 400; one that does not apply is 422.
fn patch_error(e: patch::PatchError) -> ApiError {
    match e {
        patch::PatchError::InvalidPatch(_) => ApiError::BadRequest(e.to_string()),
        other => ApiError::Unprocessable(other.to_string()),
    }
}
