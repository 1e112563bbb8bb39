//! The read verbs: get, list (selectors, paging with continue tokens,
//! resourceVersion semantics, Table output) and watch. Reads never write.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use base64::Engine;
use serde_json::{json, Value};
use std::time::Duration;

use super::{json_response, parse_rv, store_err, value_response, Ctx};
use crate::config::WatchList;
use crate::http::convert;
use crate::http::table;
use crate::http::watch::{self, WatchLimits, WatchSpec};
use crate::status::{ApiError, Result};
use crate::storage::store::{ObjKey, StoreError};

/// The real server's message when a continue token's revision was compacted.
const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// Continue token: base64 of `{"v","rv","start"}` like the real server's.
fn encode_continue(rv: u64, after: &ObjKey) -> String {
    let doc = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{}/{}", after.0, after.1)});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(doc.to_string())
}

fn decode_continue(token: &str) -> Result<(u64, ObjKey)> {
    let bad = || ApiError::BadRequest(format!("continue key is not valid: {token}"));
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|_| bad())?;
    let doc: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let rv = doc.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let start = doc.get("start").and_then(Value::as_str).ok_or_else(bad)?;
    let (ns, name) = start.split_once('/').ok_or_else(bad)?;
    Ok((rv, (ns.to_string(), name.to_string())))
}

impl Ctx<'_> {
    pub(super) fn get(&self) -> Result<Response> {
        let stored = self
            .store()
            .get(&self.target.storage(), &self.target.key())
            .ok_or_else(|| self.target.not_found())?;
        if self.wants_table() {
            let t = table::table(&self.target.info, &[self.out(stored.value())], true, None);
            return Ok(value_response(StatusCode::OK, &t));
        }
        Ok(json_response(StatusCode::OK, self.out_bytes(&stored.json)))
    }

    /// Checks `resourceVersion`/`resourceVersionMatch` for a list and
    /// returns the resourceVersion to serve it at (None: the latest).
    ///
    /// As in the real server, `Exact` (explicit, or implied by a non-zero
    /// resourceVersion with `limit` and no match) reads that exact version,
    /// reconstructed from the history ring; 410 once it has been compacted.
    fn list_rv(&self, limit: usize) -> Result<Option<u64>> {
        let current = self.store().current_rv();
        let rv = self.q("resourceVersion");
        let m = match self.q("resourceVersionMatch") {
            None if limit > 0 && rv.is_some_and(|v| v != "0") => Some("Exact"),
            m => m,
        };
        match (rv, m) {
            (None, None) => Ok(None),
            (None, Some(_)) => Err(ApiError::Unprocessable(
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided".into(),
            )),
            (Some(rv), Some("Exact")) => {
                let rv = parse_rv(rv)?;
                if rv > current {
                    Err(ApiError::Timeout(format!(
                        "Too large resource version: {rv}, current: {current}"
                    )))
                } else if self.store().is_compacted(rv) {
                    Err(ApiError::Expired(format!(
                        "too old resource version: {rv} ({})",
                        self.store().oldest_rv()
                    )))
                } else {
                    Ok(Some(rv))
                }
            }
            (Some(rv), Some("NotOlderThan") | None) => {
                let rv = parse_rv(rv)?;
                if rv > current {
                    Err(ApiError::Timeout(format!(
                        "Too large resource version: {rv}, current: {current}"
                    )))
                } else {
                    Ok(None)
                }
            }
            (_, Some(other)) => Err(ApiError::BadRequest(format!(
                "resourceVersionMatch: Unsupported value: \"{other}\": supported values: \"Exact\", \"NotOlderThan\""
            ))),
        }
    }

    pub(super) fn list(&self) -> Result<Response> {
        let selector = self.selector()?;
        let limit = match self.q("limit") {
            Some(l) => l
                .parse::<i64>()
                .map_err(|_| ApiError::BadRequest(format!("invalid limit: {l}")))?
                .max(0),
            None => 0,
        };
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let (at, after) = match self.q("continue") {
            Some(token) => {
                let (rv, after) = decode_continue(token)?;
                (Some(rv), Some(after))
            }
            None => (self.list_rv(limit)?, None),
        };
        let storage = self.target.storage();
        let namespace = self.target.namespace.as_deref();
        let matches = |a: &_| selector.matches(a);
        // Every page of a paged list is served as of the first page's
        // resourceVersion, as etcd serves them from one revision.
        let page = match at {
            None => self
                .store()
                .list(&storage, namespace, after.as_ref(), limit, matches),
            Some(rv) => self
                .store()
                .list_at(&storage, namespace, after.as_ref(), limit, rv, matches)
                .map_err(|_| match after {
                    Some(_) => ApiError::Expired(CONTINUE_EXPIRED.into()),
                    None => ApiError::Expired(format!(
                        "too old resource version: {rv} ({})",
                        self.store().oldest_rv()
                    )),
                })?,
        };
        let rv = page.rv;
        let cont = page.continue_after.as_ref().map(|k| encode_continue(rv, k));
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if let Some(c) = &cont {
            meta["continue"] = json!(c);
        }
        if self.wants_table() {
            let objs: Vec<Value> = page
                .items
                .iter()
                .filter_map(|j| serde_json::from_slice(j).ok())
                .map(|v| self.out(v))
                .collect();
            let t = table::table(&self.target.info, &objs, true, Some(meta));
            return Ok(value_response(StatusCode::OK, &t));
        }
        let head = json!({
            "kind": self.target.info.list_kind(),
            "apiVersion": self.target.info.api_version(),
            "metadata": meta,
        })
        .to_string();
        let total: usize = page.items.iter().map(|i| i.len() + 1).sum();
        let mut out = Vec::with_capacity(head.len() + total + 16);
        out.extend_from_slice(&head.as_bytes()[..head.len() - 1]);
        out.extend_from_slice(b",\"items\":[");
        for (i, item) in page.items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            if convert::needs_conversion(&self.target.info) {
                out.extend_from_slice(&self.out_bytes(item));
            } else {
                out.extend_from_slice(item);
            }
        }
        out.extend_from_slice(b"]}");
        Ok(json_response(StatusCode::OK, out))
    }

    pub(super) fn watch(&self) -> Result<Response> {
        let selector = self.selector()?;
        let bookmarks = self
            .q("allowWatchBookmarks")
            .is_some_and(|b| b == "true" || b == "1");
        let send_initial = match self.app.watch_list {
            WatchList::Refused if self.q("sendInitialEvents").is_some() => {
                return Err(ApiError::Unprocessable(
                    "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled".into(),
                ));
            }
            WatchList::Served | WatchList::StorageRefused => {
                self.q("sendInitialEvents").is_some_and(|b| b == "true")
            }
            WatchList::Refused | WatchList::Ignored => false,
        };
        if send_initial && self.q("resourceVersionMatch") != Some("NotOlderThan") {
            return Err(ApiError::Unprocessable(
                "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan".into(),
            ));
        }
        if send_initial && self.app.watch_list == WatchList::StorageRefused {
            // The watch cache accepts the watch, sends one ERROR event and
            // ends it (`newErrWatcher` in cacher.go).
            let refusal = ApiError::Internal(crate::config::STORAGE_REFUSAL.into());
            return Ok(watch_response(watch::error_event_stream(&refusal)));
        }
        let from = match self.q("resourceVersion") {
            None | Some("0") => None,
            Some(_) if send_initial => None,
            Some(rv) => Some(parse_rv(rv)?),
        };
        let timeout = match self.q("timeoutSeconds") {
            Some(t) => Duration::from_secs(
                t.parse::<u64>()
                    .map_err(|_| ApiError::BadRequest(format!("invalid timeoutSeconds: {t}")))?,
            ),
            None => self.app.watch_timeout,
        };
        let spec = WatchSpec {
            info: self.target.info.clone(),
            namespace: self.target.namespace.clone(),
            selector,
            from,
            bookmarks,
            initial_events_end: send_initial && bookmarks,
            timeout,
            bookmark_interval: self.app.bookmark_interval,
            table: self.wants_table(),
        };
        let limits = WatchLimits {
            send_deadline: self.app.watch_send_deadline,
            buffer_bytes: watch::WATCH_BUFFER_BYTES,
        };
        let drops = self.app.faults.watch_drops();
        // The watch cache waits (a few seconds) for a resourceVersion it has
        // not seen only when initial events were asked for; a plain watch
        // from a future resourceVersion just waits for later changes
        // (`waitUntilWatchCacheFreshAndForceAllEvents` in cacher.go).
        let wait_for = match self.q("resourceVersion") {
            Some(rv) if send_initial && rv != "0" => Some(parse_rv(rv)?),
            _ => None,
        }
        .filter(|rv| *rv > self.store().current_rv());
        if let Some(min_rv) = wait_for {
            let body = watch::stream_when_fresh(
                spec,
                self.app.cluster.store.clone(),
                min_rv,
                self.app.too_large_rv_wait,
                drops,
                limits,
            );
            return Ok(watch_response(body));
        }
        let body = match self.store().subscribe(&self.target.storage(), from) {
            Ok(sub) => watch::stream(spec, sub, drops, limits),
            Err(StoreError::TooOld(oldest)) => {
                // Like the watch cache: 200, then an ERROR event carrying 410 Expired.
                let rv = from.unwrap_or_default();
                let status =
                    ApiError::Expired(format!("too old resource version: {rv} ({oldest})"))
                        .to_status();
                watch::error_stream(&status)
            }
            Err(e) => return Err(store_err(&self.target, e)),
        };
        Ok(watch_response(body))
    }
}

fn watch_response(body: axum::body::Body) -> Response {
    let mut r = json_response(StatusCode::OK, body);
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip() {
        let t = encode_continue(42, &("ns".into(), "name".into()));
        assert_eq!(
            decode_continue(&t).unwrap(),
            (42, ("ns".into(), "name".into()))
        );
        assert!(matches!(
            decode_continue("!!"),
            Err(ApiError::BadRequest(_))
        ));
    }
}
