//! The scale subresource of custom resources whose CRD version declares
//! `subresources.scale`, as the apiextensions server's `ScaleREST` serves
//! it: an `autoscaling/v1` Scale read from `specReplicasPath`,
//! `statusReplicasPath` and `labelSelectorPath` (a missing value reads as
//! 0), and writes (update, merge or JSON patch of the Scale) that change
//! only the value at `specReplicasPath`, through the same commit as any
//! main-resource write (schema validation, generation, managedFields).
//! It never creates an object and never touches status.

use axum::body::Bytes;
use axum::http::{header, StatusCode};
use axum::response::Response;
use serde_json::{json, Map, Value};

use super::{parse_rv, value_response, Attempt, Ctx, MAX_RETRIES};
use crate::patch;
use crate::rules::objects::meta_str;
use crate::status::{ApiError, Result};
use crate::storage::registry::ScaleSubresource;

/// `.spec.replicas` as JSON pointer segments.
fn segments(path: &str) -> Vec<&str> {
    path.split('.').filter(|s| !s.is_empty()).collect()
}

fn read<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    segments(path).iter().try_fold(obj, |v, s| v.get(*s))
}

fn write(obj: &mut Value, path: &str, value: Value) {
    let segs = segments(path);
    let Some((last, parents)) = segs.split_last() else {
        return;
    };
    let mut cur = obj;
    for s in parents {
        if !cur.get(*s).is_some_and(Value::is_object) {
            cur[*s] = Value::Object(Map::new());
        }
        cur = &mut cur[*s];
    }
    cur[*last] = value;
}

/// `scaleFromCustomResource`.
fn scale_of(spec: &ScaleSubresource, obj: &Value) -> Value {
    let int = |p: &str| read(obj, p).and_then(Value::as_i64).unwrap_or(0);
    let meta = |k: &str| obj.pointer(&format!("/metadata/{k}")).cloned();
    let mut metadata = Map::new();
    for k in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = meta(k) {
            metadata.insert(k.into(), v);
        }
    }
    let mut status = json!({"replicas": int(&spec.status_replicas_path)});
    if let Some(sel) = spec
        .label_selector_path
        .as_deref()
        .and_then(|p| read(obj, p))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        status["selector"] = json!(sel);
    }
    json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": metadata,
        "spec": {"replicas": int(&spec.spec_replicas_path)}, "status": status})
}

impl Ctx<'_> {
    fn scale_spec(&self) -> Result<ScaleSubresource> {
        self.target.info.scale.clone().ok_or(ApiError::NoRoute)
    }

    /// GET `.../{name}/scale`.
    pub(super) fn get_scale(&self) -> Result<Response> {
        let spec = self.scale_spec()?;
        let stored = self
            .store()
            .get(&self.target.storage(), &self.target.key())
            .ok_or_else(|| self.target.not_found())?;
        Ok(value_response(
            StatusCode::OK,
            &scale_of(&spec, &self.out(stored.value())),
        ))
    }

    /// PUT or PATCH `.../{name}/scale` (`patch`: whether the body is a patch).
    pub(super) fn write_scale(&self, body: Bytes, is_patch: bool) -> Result<Response> {
        let spec = self.scale_spec()?;
        let ct = self
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default()
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
        let doc: Value = serde_json::from_slice(&body).map_err(|e| {
            ApiError::BadRequest(format!(
                "the object provided is unrecognized or malformed: {e}"
            ))
        })?;
        for _ in 0..MAX_RETRIES {
            let old = self
                .store()
                .get(&self.target.storage(), &self.target.key())
                .ok_or_else(|| self.target.not_found())?;
            let current = scale_of(&spec, &self.out(old.value()));
            let scale = match (is_patch, ct.as_str()) {
                (false, _) => doc.clone(),
                (true, "application/merge-patch+json") => patch::json_merge_patch(&current, &doc),
                (true, "application/json-patch+json") => patch::json_patch(&current, &doc)
                    .map_err(|e| ApiError::Unprocessable(e.to_string()))?,
                (true, other) => {
                    return Err(ApiError::UnsupportedMediaType(format!(
                        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json (got {other})"
                    )))
                }
            };
            let replicas = scale.pointer("/spec/replicas").cloned().unwrap_or(json!(0));
            let Some(n) = replicas.as_i64() else {
                return Err(ApiError::BadRequest(format!(
                    "the object provided is unrecognized or malformed: spec.replicas: {replicas} is not an integer"
                )));
            };
            // autoscaling validation's ValidateScale, as ScaleREST.Update runs it
            if n < 0 {
                return Err(ApiError::invalid(
                    "autoscaling",
                    "Scale.autoscaling",
                    self.target.name(),
                    vec![(
                        "spec.replicas".into(),
                        format!("Invalid value: {n}: must be greater than or equal to 0"),
                    )],
                ));
            }
            if let Some(rv) = meta_str(&scale, "resourceVersion").filter(|r| !r.is_empty()) {
                if parse_rv(rv)? != old.rv {
                    return Err(self.target.stale());
                }
            }
            let mut new = self.out(old.value());
            write(&mut new, &spec.spec_replicas_path, json!(n));
            let new = crate::http::convert::to_storage(&self.target.info, new);
            if let Attempt::Done((_, v, _)) = self.commit_update(&old, new, None)? {
                return Ok(value_response(
                    StatusCode::OK,
                    &scale_of(&spec, &self.out(v)),
                ));
            }
        }
        Err(self.target.stale())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn scale_reads_replicas_and_selector_and_writes_only_the_spec_path() {
        let spec = ScaleSubresource {
            spec_replicas_path: ".spec.replicas".into(),
            status_replicas_path: ".status.replicas".into(),
            label_selector_path: Some(".status.selector".into()),
        };
        let mut obj =
            json!({"metadata": {"name": "w", "uid": "u"}, "status": {"selector": "app=w"}});
        let s = scale_of(&spec, &obj);
        assert_eq!(s["spec"]["replicas"], 0);
        assert_eq!(s["status"], json!({"replicas": 0, "selector": "app=w"}));
        write(&mut obj, &spec.spec_replicas_path, json!(3));
        assert_eq!(obj["spec"]["replicas"], 3);
        assert_eq!(scale_of(&spec, &obj)["metadata"]["uid"], "u");
    }
}
