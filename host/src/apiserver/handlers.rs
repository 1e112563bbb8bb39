//! Request handling: routes a URL to a resource and verb, authenticates,
//! applies injected faults, authorizes, then runs the verb against the
//! store with the real server's semantics (defaulting, validation,
//! optimistic concurrency, finalizers, status separation, patching, paging,
//! watch). Every failure leaves as a `Status`; a handler never panics on
//! request input.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{json, Value};

use super::auth::{bearer, forbidden_message, Tokens, User};
use super::crd;
use super::discovery;
use super::faults::{FaultCommand, Faults};
use super::objects::{
    generated_name, meta_mut, meta_str, now_rfc3339, prepare_create, prepare_update,
    ready_to_remove, validate_name,
};
use super::patch;
use super::proto;
use super::registry::{Registry, ResourceInfo};
use super::selector::{FieldSelector, LabelSelector, Selector};
use super::status::{ApiError, Cause, Details, Result};
use super::store::{ObjKey, Store, StoreError, Stored};
use super::table;
use super::watch::{self, WatchSpec};

/// Largest accepted request body.
const MAX_BODY: usize = 64 * 1024 * 1024;
/// Attempts of a read-modify-write before giving up with a Conflict.
const MAX_RETRIES: usize = 16;

/// State shared by every request.
#[derive(Debug)]
pub(crate) struct AppState {
    pub store: Arc<Store>,
    pub registry: Registry,
    pub tokens: Arc<RwLock<Tokens>>,
    pub faults: Faults,
    pub watch_timeout: Duration,
    pub bookmark_interval: Duration,
}

/// The single axum handler: every path goes through here.
pub(crate) async fn handle(State(app): State<Arc<AppState>>, req: Request) -> Response {
    match dispatch(&app, req).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

fn json_response(code: StatusCode, body: impl Into<Body>) -> Response {
    let mut r = (code, body.into()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn value_response(code: StatusCode, v: &Value) -> Response {
    json_response(code, v.to_string())
}

/// A parsed resource URL.
#[derive(Debug, Clone)]
struct Target {
    info: ResourceInfo,
    namespace: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

impl Target {
    fn key(&self) -> ObjKey {
        (
            self.namespace.clone().unwrap_or_default(),
            self.name.clone().unwrap_or_default(),
        )
    }
    fn storage(&self) -> String {
        self.info.storage_key()
    }
    fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }
    fn not_found(&self) -> ApiError {
        ApiError::not_found(&self.info.group, &self.info.plural, self.name())
    }
    fn stale(&self) -> ApiError {
        ApiError::stale(&self.info.group, &self.info.plural, self.name())
    }
    /// Which fields the registry strategy resets for this write, for managedFields.
    fn apply_options(&self) -> patch::ApplyOptions {
        if self.sub.as_deref() == Some("status") {
            patch::ApplyOptions::status_subresource()
        } else if self.info.has_status {
            patch::ApplyOptions::main_resource_with_status()
        } else {
            patch::ApplyOptions::default()
        }
    }

    fn object_kind(&self) -> patch::ObjectKind {
        patch::ObjectKind {
            group: self.info.group.clone(),
            version: self.info.version.clone(),
            kind: self.info.kind.clone(),
        }
    }
}

fn parse_target(reg: &Registry, group: &str, version: &str, rest: &[&str]) -> Result<Target> {
    let split_ns = rest.len() >= 3
        && rest[0] == "namespaces"
        && !(rest.len() == 3 && matches!(rest[2], "status" | "finalize"));
    let (namespace, rest) = if split_ns {
        (Some(rest[1].to_string()), &rest[2..])
    } else {
        (None, rest)
    };
    if rest.is_empty() || rest.len() > 3 || rest.iter().any(|s| s.is_empty()) {
        return Err(ApiError::NoRoute);
    }
    let info = reg
        .lookup(group, version, rest[0])
        .ok_or(ApiError::NoRoute)?;
    let name = rest.get(1).map(|s| s.to_string());
    let sub = rest.get(2).map(|s| s.to_string());
    if namespace.is_some() && !info.namespaced {
        return Err(ApiError::NoRoute);
    }
    if info.namespaced && namespace.is_none() && name.is_some() {
        return Err(ApiError::NoRoute);
    }
    if let Some(s) = &sub {
        if s != "status" || !info.has_status {
            return Err(ApiError::NoRoute);
        }
    }
    Ok(Target {
        info,
        namespace,
        name,
        sub,
    })
}

fn authenticate(app: &AppState, headers: &HeaderMap) -> Result<User> {
    let token = bearer(
        headers
            .get(header::AUTHORIZATION)
            .and_then(|h| h.to_str().ok()),
    )
    .ok_or(ApiError::Unauthorized)?;
    let tokens = app.tokens.read().unwrap_or_else(|p| p.into_inner());
    tokens
        .authenticate(token)
        .cloned()
        .ok_or(ApiError::Unauthorized)
}

fn forbidden(user: &User, verb: &str, t: &Target) -> ApiError {
    ApiError::Forbidden {
        message: forbidden_message(
            &user.name,
            verb,
            &t.info.group,
            &t.info.plural,
            t.sub.as_deref(),
            t.name.as_deref(),
            t.namespace.as_deref(),
        ),
        details: Details {
            name: t.name.clone().unwrap_or_default(),
            group: t.info.group.clone(),
            kind: t.info.plural.clone(),
        },
    }
}

fn check_accept(headers: &HeaderMap) -> Result<()> {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|h| h.to_str().ok()) else {
        return Ok(());
    };
    if accept.trim().is_empty()
        || accept.contains("json")
        || accept.contains("*/*")
        || accept.contains("application/*")
    {
        return Ok(());
    }
    Err(ApiError::NotAcceptable(
        "only the following media types are accepted: application/json, application/json;as=Table;v=v1;g=meta.k8s.io".into(),
    ))
}

async fn dispatch(app: &AppState, req: Request) -> Result<Response> {
    let path = req.uri().path().to_string();
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segs.as_slice() {
        ["healthz" | "readyz" | "livez", ..] => {
            return Ok((StatusCode::OK, "ok").into_response());
        }
        ["version"] => return Ok(value_response(StatusCode::OK, &discovery::version())),
        _ => {}
    }
    let user = authenticate(app, req.headers())?;
    if let Some(d) = app.faults.latency() {
        tokio::time::sleep(d).await;
    }
    let discovery_doc = match segs.as_slice() {
        ["api"] => Some(discovery::core_versions()),
        ["api", "v1"] => discovery::resources(&app.registry, "", "v1"),
        ["apis"] => Some(discovery::groups(&app.registry)),
        ["apis", g] => discovery::group(&app.registry, g),
        ["apis", g, v] => discovery::resources(&app.registry, g, v),
        ["openapi", "v3"] => Some(discovery::openapi_v3_root(&app.registry)),
        ["openapi", "v3", "api", v] => discovery::openapi_v3_group_version(&app.registry, "", v),
        ["openapi", "v3", "apis", g, v] => discovery::openapi_v3_group_version(&app.registry, g, v),
        // OpenAPI v2 (and unknown v3 paths) are not published
        ["openapi", ..] => return Err(ApiError::NoRoute),
        ["wasmctrl", "faults"] => return fault_endpoint(app, &user, req).await,
        ["api", "v1", ..] | ["apis", _, _, ..] => None,
        _ => return Err(ApiError::NoRoute),
    };
    if let Some(doc) = discovery_doc {
        return Ok(value_response(StatusCode::OK, &doc));
    }
    if segs.first() == Some(&"openapi") || matches!(segs.as_slice(), ["apis", _] | ["apis", _, _]) {
        return Err(ApiError::NoRoute);
    }
    let (group, version, rest) = match segs.as_slice() {
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(ApiError::NoRoute),
    };
    // an unknown group/version is a plain 404 too
    let target = parse_target(&app.registry, group, version, rest)?;
    let query: HashMap<String, String> = Query::try_from_uri(req.uri())
        .map(|Query(q)| q)
        .map_err(|e| ApiError::BadRequest(format!("invalid query: {e}")))?;
    let is_watch = query.get("watch").is_some_and(|w| w == "true" || w == "1");
    let verb = match (req.method(), target.name.is_some()) {
        (&Method::GET, true) => "get",
        (&Method::GET, false) if is_watch => "watch",
        (&Method::GET, false) => "list",
        (&Method::POST, false) if target.sub.is_none() => "create",
        (&Method::PUT, true) => "update",
        (&Method::PATCH, true) => "patch",
        (&Method::DELETE, true) if target.sub.is_none() => "delete",
        (&Method::DELETE, false) => "deletecollection",
        (m, _) => {
            return Err(ApiError::MethodNotAllowed(format!(
                "the server does not allow this method on the requested resource ({m})"
            )))
        }
    };
    if let Some(err) = app.faults.take_failure(verb, &target.info.plural) {
        return Err(err);
    }
    let authz_resource = match &target.sub {
        Some(s) => format!("{}/{s}", target.info.plural),
        None => target.info.plural.clone(),
    };
    if app.faults.is_denied(verb) || !user.allows(verb, &target.info.group, &authz_resource) {
        return Err(forbidden(&user, verb, &target));
    }
    check_accept(req.headers())?;
    let headers = req.headers().clone();
    let manager = query
        .get("fieldManager")
        .cloned()
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| manager_from_user_agent(&headers));
    let ctx = Ctx {
        app,
        target,
        query,
        headers,
        manager,
    };
    match verb {
        "get" => ctx.get(),
        "list" => ctx.list(),
        "watch" => ctx.watch(),
        "deletecollection" => ctx.delete_collection(read_body(req).await?).await,
        "create" => ctx.create(read_body(req).await?),
        "update" => ctx.update(read_body(req).await?),
        "patch" => ctx.patch(read_body(req).await?),
        _ => ctx.delete(read_body(req).await?),
    }
}

async fn read_body(req: Request) -> Result<Bytes> {
    axum::body::to_bytes(req.into_body(), MAX_BODY)
        .await
        .map_err(|e| ApiError::BadRequest(format!("unable to read request body: {e}")))
}

fn manager_from_user_agent(headers: &HeaderMap) -> String {
    let ua = headers
        .get(header::USER_AGENT)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let prefix = ua.split('/').next().unwrap_or_default().trim();
    if prefix.is_empty() {
        "unknown".into()
    } else {
        prefix.chars().take(128).collect()
    }
}

async fn fault_endpoint(app: &AppState, user: &User, req: Request) -> Result<Response> {
    if !user.admin {
        return Err(ApiError::Forbidden {
            message: format!(
                "User \"{}\" cannot use the fault-injection endpoint",
                user.name
            ),
            details: Details::default(),
        });
    }
    if req.method() != Method::POST {
        return Err(ApiError::MethodNotAllowed(
            "POST a fault command to /wasmctrl/faults".into(),
        ));
    }
    let body = read_body(req).await?;
    let cmd: FaultCommand = serde_json::from_slice(&body)
        .map_err(|e| ApiError::BadRequest(format!("invalid fault command: {e}")))?;
    app.faults.apply(cmd);
    Ok(value_response(
        StatusCode::OK,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}),
    ))
}

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

fn parse_json(body: &[u8]) -> Result<Value> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::BadRequest(format!(
            "the object provided is unrecognized or malformed: json parse error: {e}"
        ))
    })?;
    if !v.is_object() {
        return Err(ApiError::BadRequest(
            "the object provided is unrecognized or malformed: expected a JSON object".into(),
        ));
    }
    Ok(v)
}

fn store_err(t: &Target, e: StoreError) -> ApiError {
    match e {
        StoreError::NotFound => t.not_found(),
        StoreError::AlreadyExists => {
            ApiError::already_exists(&t.info.group, &t.info.plural, t.name())
        }
        StoreError::Conflict => t.stale(),
        StoreError::TooOld(_) => ApiError::Expired("too old resource version".into()),
        StoreError::Serialize(m) => ApiError::Internal(m),
    }
}

fn parse_rv(s: &str) -> Result<u64> {
    s.parse::<u64>()
        .map_err(|_| ApiError::BadRequest(format!("invalid resource version: \"{s}\"")))
}

struct Ctx<'a> {
    app: &'a AppState,
    target: Target,
    query: HashMap<String, String>,
    headers: HeaderMap,
    manager: String,
}

enum Attempt<T> {
    Done(T),
    Retry,
}

impl Ctx<'_> {
    fn store(&self) -> &Store {
        &self.app.store
    }

    fn q(&self, k: &str) -> Option<&str> {
        self.query
            .get(k)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    fn dry_run(&self) -> bool {
        self.q("dryRun").is_some()
    }

    fn wants_table(&self) -> bool {
        table::wants_table(
            self.headers
                .get(header::ACCEPT)
                .and_then(|h| h.to_str().ok()),
        )
    }

    fn selector(&self) -> Result<Selector> {
        let labels = LabelSelector::parse(self.q("labelSelector").unwrap_or_default())
            .map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let fields = FieldSelector::parse(
            self.q("fieldSelector").unwrap_or_default(),
            &self.target.storage(),
        )
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
        Ok(Selector { labels, fields })
    }

    fn get(&self) -> Result<Response> {
        let stored = self
            .store()
            .get(&self.target.storage(), &self.target.key())
            .ok_or_else(|| self.target.not_found())?;
        if self.wants_table() {
            let t = table::table(&self.target.info, &[stored.value()], true, None);
            return Ok(value_response(StatusCode::OK, &t));
        }
        Ok(json_response(
            StatusCode::OK,
            Bytes::from(stored.json.to_vec()),
        ))
    }

    /// Checks `resourceVersion`/`resourceVersionMatch` for a list.
    fn check_list_rv(&self) -> Result<()> {
        let current = self.store().current_rv();
        let rv = self.q("resourceVersion");
        let m = self.q("resourceVersionMatch");
        match (rv, m) {
            (None, None) => Ok(()),
            (None, Some(_)) => Err(ApiError::Unprocessable(
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided".into(),
            )),
            (Some(rv), Some("Exact")) => {
                let rv = parse_rv(rv)?;
                if rv > current {
                    Err(ApiError::Timeout(format!(
                        "Too large resource version: {rv}, current: {current}"
                    )))
                } else if rv < current {
                    // only the latest state is kept; older exact reads behave as compacted
                    Err(ApiError::Expired(format!(
                        "too old resource version: {rv} ({current})"
                    )))
                } else {
                    Ok(())
                }
            }
            (Some(rv), Some("NotOlderThan") | None) => {
                let rv = parse_rv(rv)?;
                if rv > current {
                    Err(ApiError::Timeout(format!(
                        "Too large resource version: {rv}, current: {current}"
                    )))
                } else {
                    Ok(())
                }
            }
            (_, Some(other)) => Err(ApiError::BadRequest(format!(
                "resourceVersionMatch: Unsupported value: \"{other}\": supported values: \"Exact\", \"NotOlderThan\""
            ))),
        }
    }

    fn list(&self) -> Result<Response> {
        let selector = self.selector()?;
        let limit = match self.q("limit") {
            Some(l) => l
                .parse::<i64>()
                .map_err(|_| ApiError::BadRequest(format!("invalid limit: {l}")))?
                .max(0),
            None => 0,
        };
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let (snapshot_rv, after) = match self.q("continue") {
            Some(token) => {
                let (rv, after) = decode_continue(token)?;
                if self.store().is_compacted(rv) {
                    return Err(ApiError::Expired(
                        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.".into(),
                    ));
                }
                (Some(rv), Some(after))
            }
            None => {
                self.check_list_rv()?;
                (None, None)
            }
        };
        let page = self.store().list(
            &self.target.storage(),
            self.target.namespace.as_deref(),
            after.as_ref(),
            limit,
            |a| selector.matches(a),
        );
        // continued pages report the first page's resourceVersion, as a
        // consistent snapshot would; watching from it replays anything newer
        let rv = snapshot_rv.unwrap_or(page.rv);
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
            out.extend_from_slice(item);
        }
        out.extend_from_slice(b"]}");
        Ok(json_response(StatusCode::OK, out))
    }

    fn watch(&self) -> Result<Response> {
        let selector = self.selector()?;
        let bookmarks = self
            .q("allowWatchBookmarks")
            .is_some_and(|b| b == "true" || b == "1");
        let send_initial = self.q("sendInitialEvents").is_some_and(|b| b == "true");
        if send_initial && self.q("resourceVersionMatch") != Some("NotOlderThan") {
            return Err(ApiError::Unprocessable(
                "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan".into(),
            ));
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
        let body = match self.store().subscribe(&self.target.storage(), from) {
            Ok(sub) => watch::stream(spec, sub, self.app.faults.watch_drops()),
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
        let mut r = json_response(StatusCode::OK, body);
        r.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        Ok(r)
    }

    /// Checks kind/apiVersion and namespace of a request body against the URL.
    fn check_body(&self, obj: &mut Value) -> Result<()> {
        let info = &self.target.info;
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
        let api_version = obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if kind.is_empty() {
            return Err(ApiError::BadRequest(format!(
                "Object 'Kind' is missing in '{}'",
                truncate(&obj.to_string())
            )));
        }
        if kind != info.kind || (!api_version.is_empty() && api_version != info.api_version()) {
            return Err(ApiError::BadRequest(format!(
                "the API version in the data ({api_version}) and kind ({kind}) do not match the expected {} {}",
                info.api_version(),
                info.kind
            )));
        }
        if api_version.is_empty() {
            obj["apiVersion"] = json!(info.api_version());
        }
        if info.namespaced {
            let url_ns = self.target.namespace.clone().unwrap_or_default();
            let meta = meta_mut(obj);
            match meta.get("namespace").and_then(Value::as_str) {
                Some(ns) if !ns.is_empty() && ns != url_ns => {
                    return Err(ApiError::BadRequest(
                        "the namespace of the provided object does not match the namespace sent on the request".into(),
                    ))
                }
                _ => {
                    meta.insert("namespace".into(), json!(url_ns));
                }
            }
        } else if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("namespace");
        }
        Ok(())
    }

    fn require_namespace(&self) -> Result<()> {
        if let Some(ns) = &self.target.namespace {
            let key = (String::new(), ns.clone());
            if self.store().get("namespaces", &key).is_none() {
                return Err(ApiError::not_found("", "namespaces", ns));
            }
        }
        Ok(())
    }

    fn invalid(&self, name: &str, errs: Vec<(String, String)>) -> ApiError {
        ApiError::invalid(&self.target.info.group, &self.target.info.kind, name, errs)
    }

    /// Decodes an object body by its Content-Type (JSON or YAML; protobuf and CBOR are 415).
    fn decode_object(&self, body: &[u8]) -> Result<Value> {
        let ct = self
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("application/json");
        let media = ct.split(';').next().unwrap_or_default().trim();
        match media {
            "" | "application/json" | "*/*" => parse_json(body),
            "application/yaml" => {
                let v: Value = serde_yaml::from_slice(body).map_err(|e| {
                    ApiError::BadRequest(format!(
                        "the object provided is unrecognized or malformed: yaml parse error: {e}"
                    ))
                })?;
                if v.is_object() {
                    Ok(v)
                } else {
                    Err(ApiError::BadRequest(
                        "the object provided is unrecognized or malformed: expected an object".into(),
                    ))
                }
            }
            proto::MEDIA_TYPE => proto::decode(body).map_err(|e| match e {
                proto::ProtoError::Unsupported(_) => ApiError::UnsupportedMediaType(e.to_string()),
                proto::ProtoError::Malformed(_) => ApiError::BadRequest(e.to_string()),
            }),
            other => Err(ApiError::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got {other})"
            ))),
        }
    }

    fn create(&self, body: Bytes) -> Result<Response> {
        let mut obj = self.decode_object(&body)?;
        self.check_body(&mut obj)?;
        self.require_namespace()?;
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
        let errs = validate_name(&self.target.info, &name);
        if !errs.is_empty() {
            return Err(self.invalid(&name, errs));
        }
        let crd_errs = crd::validate(&self.target.info, &obj);
        if !crd_errs.is_empty() {
            return Err(self.invalid(&name, crd_errs));
        }
        let now = now_rfc3339();
        prepare_create(&self.target.info, &mut obj, &now);
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
            &self.target.apply_options(),
            &self.target.object_kind(),
        );
        let key = (
            self.target.namespace.clone().unwrap_or_default(),
            name.clone(),
        );
        if self.dry_run() {
            return Ok(value_response(StatusCode::CREATED, &obj));
        }
        let stored = self
            .store()
            .create(&self.target.storage(), key, obj)
            .map_err(|e| match e {
                StoreError::AlreadyExists => ApiError::already_exists(
                    &self.target.info.group,
                    &self.target.info.plural,
                    &name,
                ),
                other => store_err(&self.target, other),
            })?;
        self.after_write(&stored.value());
        Ok(json_response(
            StatusCode::CREATED,
            Bytes::from(stored.json.to_vec()),
        ))
    }

    fn after_write(&self, obj: &Value) {
        crd::sync_registry(&self.app.registry, &self.target.info, obj);
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
    fn commit_update(
        &self,
        old: &Stored,
        mut new: Value,
        apply_fields: Option<Value>,
    ) -> Result<Attempt<(StatusCode, Value)>> {
        let oldv = old.value();
        let requested = meta_str(&new, "resourceVersion")
            .filter(|s| !s.is_empty())
            .map(parse_rv)
            .transpose()?;
        if requested.is_some_and(|r| r != old.rv) {
            return Err(self.target.stale());
        }
        let status_write = self.target.sub.as_deref() == Some("status");
        prepare_update(&self.target.info, &oldv, &mut new, status_write);
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
                &self.target.apply_options(),
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
            return Ok(Attempt::Done((StatusCode::OK, new)));
        }
        let storage = self.target.storage();
        let key = self.target.key();
        if ready_to_remove(&new) {
            return match self.store().delete(&storage, &key, Some(old.rv), Some(new)) {
                Ok(s) => {
                    crd::on_delete(self.app, &self.target.info, &s.value());
                    Ok(Attempt::Done((StatusCode::OK, s.value())))
                }
                Err(StoreError::Conflict) if requested.is_none() => Ok(Attempt::Retry),
                Err(e) => Err(store_err(&self.target, e)),
            };
        }
        match self.store().update(&storage, &key, Some(old.rv), new) {
            Ok(s) => {
                let v = s.value();
                self.after_write(&v);
                Ok(Attempt::Done((StatusCode::OK, v)))
            }
            Err(StoreError::Conflict) if requested.is_none() => Ok(Attempt::Retry),
            Err(e) => Err(store_err(&self.target, e)),
        }
    }

    fn update(&self, body: Bytes) -> Result<Response> {
        let mut obj = self.decode_object(&body)?;
        self.check_body(&mut obj)?;
        self.check_url_name(&mut obj)?;
        for _ in 0..MAX_RETRIES {
            let old = self
                .store()
                .get(&self.target.storage(), &self.target.key())
                .ok_or_else(|| self.target.not_found())?;
            if let Attempt::Done((code, v)) = self.commit_update(&old, obj.clone(), None)? {
                return Ok(value_response(code, &v));
            }
        }
        Err(self.target.stale())
    }

    fn patch(&self, body: Bytes) -> Result<Response> {
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
        for _ in 0..MAX_RETRIES {
            let old = self
                .store()
                .get(&self.target.storage(), &self.target.key())
                .ok_or_else(|| self.target.not_found())?;
            let oldv = old.value();
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
            self.check_body(&mut patched)?;
            self.check_url_name(&mut patched)?;
            if let Attempt::Done((code, v)) = self.commit_update(&old, patched, None)? {
                return Ok(value_response(code, &v));
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
        let mut applied: Value = serde_yaml::from_slice(body)
            .map_err(|e| ApiError::BadRequest(format!("error decoding YAML: {e}")))?;
        if !applied.is_object() {
            return Err(ApiError::BadRequest(
                "error decoding YAML: the apply configuration must be an object".into(),
            ));
        }
        self.check_body(&mut applied)?;
        self.check_url_name(&mut applied)?;
        let kind = self.target.object_kind();
        for _ in 0..MAX_RETRIES {
            let old = self.store().get(&self.target.storage(), &self.target.key());
            let oldv = old.as_ref().map(Stored::value);
            let now = now_rfc3339();
            let result = patch::server_side_apply_with(
                oldv.as_ref(),
                &applied,
                &self.manager,
                force,
                &kind,
                &now,
                &self.target.apply_options(),
            )
            .map_err(|e| self.apply_error(e))?;
            match old {
                Some(old) => {
                    let mf = result
                        .pointer("/metadata/managedFields")
                        .cloned()
                        .unwrap_or_else(|| json!([]));
                    if let Attempt::Done((code, v)) = self.commit_update(&old, result, Some(mf))? {
                        return Ok(value_response(code, &v));
                    }
                }
                None => match self.create_from_apply(result) {
                    Err(ApiError::AlreadyExists { .. }) => continue,
                    other => return other,
                },
            }
        }
        Err(self.target.stale())
    }

    fn create_from_apply(&self, mut obj: Value) -> Result<Response> {
        self.require_namespace()?;
        let name = self.target.name().to_string();
        let errs = validate_name(&self.target.info, &name);
        if !errs.is_empty() {
            return Err(self.invalid(&name, errs));
        }
        let mf = obj.pointer("/metadata/managedFields").cloned();
        let now = now_rfc3339();
        prepare_create(&self.target.info, &mut obj, &now);
        crd::on_create(&self.target.info, &mut obj);
        if let Some(mf) = mf {
            meta_mut(&mut obj).insert("managedFields".into(), mf);
        }
        if self.dry_run() {
            return Ok(value_response(StatusCode::CREATED, &obj));
        }
        let stored = self
            .store()
            .create(&self.target.storage(), self.target.key(), obj)
            .map_err(|e| match e {
                StoreError::AlreadyExists => ApiError::already_exists(
                    &self.target.info.group,
                    &self.target.info.plural,
                    &name,
                ),
                other => store_err(&self.target, other),
            })?;
        self.after_write(&stored.value());
        Ok(json_response(
            StatusCode::CREATED,
            Bytes::from(stored.json.to_vec()),
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

    fn delete_options(&self, body: &[u8]) -> Result<Value> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(json!({}));
        }
        serde_json::from_slice(body)
            .map_err(|e| ApiError::BadRequest(format!("invalid DeleteOptions: {e}")))
    }

    fn delete(&self, body: Bytes) -> Result<Response> {
        let opts = self.delete_options(&body)?;
        if let Some(p) = opts
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .or(self.q("propagationPolicy"))
        {
            if !matches!(p, "Orphan" | "Background" | "Foreground") {
                return Err(ApiError::Unprocessable(format!(
                    "propagationPolicy: Unsupported value: \"{p}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
                )));
            }
        }
        let (code, v) = self.delete_one(&self.target.key(), &opts)?;
        Ok(value_response(code, &v))
    }

    fn delete_one(&self, key: &ObjKey, opts: &Value) -> Result<(StatusCode, Value)> {
        let storage = self.target.storage();
        let target = Target {
            name: Some(key.1.clone()),
            ..self.target.clone()
        };
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
            let has_finalizers = v
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty());
            if self.dry_run() {
                return Ok((StatusCode::OK, v));
            }
            if has_finalizers {
                if meta_str(&v, "deletionTimestamp").is_some() {
                    return Ok((StatusCode::OK, v));
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
            if target.info.plural == "namespaces" && target.info.group.is_empty() {
                self.empty_namespace(&key.1);
            }
            match self.store().delete(&storage, key, Some(old.rv), None) {
                Ok(s) => {
                    let v = s.value();
                    crd::on_delete(self.app, &target.info, &v);
                    return Ok((StatusCode::OK, v));
                }
                Err(StoreError::Conflict) => continue,
                Err(e) => return Err(store_err(&target, e)),
            }
        }
        Err(target.stale())
    }

    /// Removes everything in a namespace being deleted (the real server
    /// does this asynchronously through the namespace controller).
    fn empty_namespace(&self, ns: &str) {
        for info in self.app.registry.all().iter().filter(|i| i.namespaced) {
            let storage = info.storage_key();
            for key in self.store().keys_in(&storage, ns) {
                let _ = self.store().delete(&storage, &key, None, None);
            }
        }
    }

    async fn delete_collection(&self, body: Bytes) -> Result<Response> {
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
                Ok((_, v)) => items.push(v),
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

fn truncate(s: &str) -> String {
    s.chars().take(200).collect()
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

    #[test]
    fn namespaced_paths_split_like_request_info() {
        let reg = Registry::new();
        let t = parse_target(&reg, "", "v1", &["namespaces", "d", "pods", "p", "status"]).unwrap();
        assert_eq!(t.namespace.as_deref(), Some("d"));
        assert_eq!(t.name.as_deref(), Some("p"));
        assert_eq!(t.sub.as_deref(), Some("status"));
        let t = parse_target(&reg, "", "v1", &["namespaces", "d"]).unwrap();
        assert_eq!(t.info.plural, "namespaces");
        assert_eq!(t.name.as_deref(), Some("d"));
        let t = parse_target(&reg, "", "v1", &["namespaces", "d", "status"]).unwrap();
        assert_eq!(t.sub.as_deref(), Some("status"));
        assert!(parse_target(&reg, "", "v1", &["pods", "p"]).is_err());
        assert!(parse_target(&reg, "", "v1", &["namespaces", "d", "nodes"]).is_err());
        assert!(parse_target(&reg, "", "v1", &["configmaps", "x", "status"]).is_err());
    }
}
