//! Request handling: routes a URL to a resource and verb, authenticates,
//! applies injected faults, authorizes, and hands the verb to [`reads`],
//! [`writes`], [`patches`], [`deletes`] or [`scale`], which run it with the
//! real server's semantics. This file
//! owns routing and the request checks shared by every verb (body
//! decoding, kind/namespace/name matching); it never touches the store
//! itself. Every failure leaves as a `Status`; a handler never panics on
//! request input.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::access;
use super::body::{self, decode_body};
use super::convert;
use super::discovery;
use super::faults::{FaultCommand, Faults};
use super::response::{json_response, value_response};
use super::table;
use crate::auth::{bearer, field_selector_name, forbidden_message, Tokens, User};
use crate::cluster::Cluster;
use crate::patch;
use crate::rules::crd;
use crate::rules::objects::meta_mut;
use crate::rules::validation;
use crate::selector::{FieldSelector, LabelSelector, Selector};
use crate::status::{ApiError, Details, Result};
use crate::storage::builtin;
use crate::storage::registry::{Registry, ResourceInfo};
use crate::storage::store::{ObjKey, Store, StoreError};

mod deletes;
mod patches;
mod reads;
mod scale;
mod writes;

/// Attempts of a read-modify-write before giving up with a Conflict.
const MAX_RETRIES: usize = 16;

/// State shared by every request.
#[derive(Debug)]
pub(crate) struct AppState {
    /// The objects, served resources and Service allocations.
    pub cluster: Arc<Cluster>,
    pub tokens: Arc<RwLock<Tokens>>,
    pub faults: Faults,
    pub watch_timeout: Duration,
    pub bookmark_interval: Duration,
    /// Largest accepted request body (see `body`).
    pub max_request_body_bytes: usize,
    /// How long a watch with `sendInitialEvents` waits for a
    /// resourceVersion the store has not reached.
    pub too_large_rv_wait: Duration,
    /// How long one watch event may wait for its client before the watch is cut off.
    pub watch_send_deadline: Duration,
    /// How watches asking for `sendInitialEvents` are answered.
    pub watch_list: crate::config::WatchList,
    /// Who stored what (see `write_log`).
    pub write_log: crate::http::write_log::WriteLog,
}

/// The single axum handler: every path goes through here.
pub(crate) async fn handle(State(app): State<Arc<AppState>>, req: Request) -> Response {
    match dispatch(&app, req).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
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

    /// The namespace and name the authorizer sees, as the real server's
    /// RequestInfo: a Namespace object (and its subresources) is in its own
    /// namespace, and a list or watch with a `metadata.name=` field
    /// selector names that object. None for cluster-scoped resources and
    /// all-namespaces requests.
    fn authz_scope<'a>(
        &'a self,
        verb: &str,
        query: &'a HashMap<String, String>,
    ) -> (Option<&'a str>, Option<&'a str>) {
        let is_namespace = self.info.group.is_empty() && self.info.plural == "namespaces";
        let namespace = match &self.namespace {
            Some(ns) => Some(ns.as_str()),
            None if is_namespace => self.name.as_deref(),
            None => None,
        };
        let name = match &self.name {
            Some(n) => Some(n.as_str()),
            None if matches!(verb, "list" | "watch") => query
                .get("fieldSelector")
                .and_then(|s| field_selector_name(s)),
            None => None,
        };
        (namespace, name)
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
        let is_pods = info.group.is_empty() && info.plural == "pods";
        let served = match s.as_str() {
            "status" => info.has_status,
            "scale" => info.scale.is_some(),
            "binding" => is_pods,
            _ => false,
        };
        if !served {
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

/// `namespace` and `name` are what the authorizer saw ([`Target::authz_scope`]).
fn forbidden(
    user: &User,
    verb: &str,
    t: &Target,
    namespace: Option<&str>,
    name: Option<&str>,
) -> ApiError {
    ApiError::Forbidden {
        message: forbidden_message(
            &user.name,
            verb,
            &t.info.group,
            &t.info.plural,
            t.sub.as_deref(),
            name,
            namespace,
        ),
        details: Details {
            name: name.unwrap_or_default().to_string(),
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

async fn dispatch(app: &Arc<AppState>, req: Request) -> Result<Response> {
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
    match (req.method(), segs.as_slice()) {
        (&Method::POST, ["apis", "authorization.k8s.io", "v1", "selfsubjectaccessreviews"]) => {
            if let Some(err) = app
                .faults
                .take_failure("create", "selfsubjectaccessreviews")
            {
                return Err(err);
            }
            let headers = req.headers().clone();
            let body = read_body(app, req).await?;
            let faults = app.faults.clone();
            return off_runtime(move || {
                let body = decode_body(&headers, &body)?;
                let review = access::access_review(&user, &faults, &body)?;
                Ok(value_response(StatusCode::CREATED, &review))
            })
            .await;
        }
        (&Method::POST, ["apis", "authentication.k8s.io", "v1", "selfsubjectreviews"]) => {
            return Ok(value_response(
                StatusCode::CREATED,
                &access::self_review(&user),
            ));
        }
        _ => {}
    }
    if let (["api"] | ["apis"], Some(accept)) = (
        segs.as_slice(),
        req.headers()
            .get(header::ACCEPT)
            .and_then(|h| h.to_str().ok()),
    ) {
        if discovery::wants_aggregated(accept) {
            let doc = discovery::aggregated(&app.cluster.registry, segs.as_slice() == ["api"]);
            let mut r = json_response(StatusCode::OK, doc.to_string());
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(discovery::AGGREGATED),
            );
            return Ok(r);
        }
    }
    let discovery_doc = match segs.as_slice() {
        ["api"] => Some(discovery::core_versions()),
        ["api", "v1"] => discovery::resources(&app.cluster.registry, "", "v1"),
        ["apis"] => Some(discovery::groups(&app.cluster.registry)),
        ["apis", g] => discovery::group(&app.cluster.registry, g),
        ["apis", g, v] => discovery::resources(&app.cluster.registry, g, v),
        ["openapi", "v3"] => Some(discovery::openapi_v3_root(&app.cluster.registry)),
        ["openapi", "v3", "api", v] => {
            discovery::openapi_v3_group_version(&app.cluster.registry, "", v)
        }
        ["openapi", "v3", "apis", g, v] => {
            discovery::openapi_v3_group_version(&app.cluster.registry, g, v)
        }
        ["openapi", "v2"] => return Ok(crate::http::openapi::v2_response(req.headers())),
        // unknown OpenAPI paths
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
    let target = parse_target(&app.cluster.registry, group, version, rest)?;
    let query: HashMap<String, String> = Query::try_from_uri(req.uri())
        .map(|Query(q)| q)
        .map_err(|e| ApiError::BadRequest(format!("invalid query: {e}")))?;
    let is_watch = query.get("watch").is_some_and(|w| w == "true" || w == "1");
    let verb = match (req.method(), target.name.is_some()) {
        // deprecated single-object watch: GET .../pods/p?watch=true
        (&Method::GET, true) if is_watch && target.sub.is_none() => "watch",
        (&Method::GET, true) => "get",
        (&Method::GET, false) if is_watch => "watch",
        (&Method::GET, false) => "list",
        (&Method::POST, false) if target.sub.is_none() => "create",
        (&Method::POST, true) if target.sub.as_deref() == Some("binding") => "create",
        (_, true) if target.sub.as_deref() == Some("binding") => {
            return Err(ApiError::MethodNotAllowed(format!(
                "the server does not allow this method on the requested resource ({})",
                req.method()
            )))
        }
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
    // A verb the resource does not have (discovery's verbs): a namespace
    // has no deletecollection, a review is create-only.
    if target.sub.is_none() && !target.info.verbs.iter().any(|v| v == verb) {
        return Err(ApiError::MethodNotAllowed(format!(
            "the server does not allow this method on the requested resource ({})",
            req.method()
        )));
    }
    if let Some(err) = app.faults.take_failure(verb, &target.info.plural) {
        return Err(err);
    }
    app.faults.wait_if_held(verb, &target.info.plural).await;
    let authz_resource = match &target.sub {
        Some(s) => format!("{}/{s}", target.info.plural),
        None => target.info.plural.clone(),
    };
    let (authz_namespace, authz_name) = target.authz_scope(verb, &query);
    if app.faults.is_denied(verb)
        || !user.allows(
            verb,
            &target.info.group,
            &authz_resource,
            authz_namespace,
            authz_name,
        )
    {
        return Err(forbidden(&user, verb, &target, authz_namespace, authz_name));
    }
    check_accept(req.headers())?;
    let headers = req.headers().clone();
    let manager = query
        .get("fieldManager")
        .cloned()
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| manager_from_user_agent(&headers));
    let is_scale = target.sub.as_deref() == Some("scale");
    let body = match verb {
        "get" | "list" | "watch" => Bytes::new(),
        _ => read_body(app, req).await?,
    };
    if verb == "deletecollection" {
        let ctx = Ctx::new(app, &user, target, query, headers, manager);
        let result = ctx.delete_collection(body).await;
        let warnings = ctx.take_warnings();
        return Ok(with_warnings(result, &warnings));
    }
    let owned_app = app.clone();
    let run = move || {
        let ctx = Ctx::new(&owned_app, &user, target, query, headers, manager);
        let result = match verb {
            "get" if is_scale => ctx.get_scale(),
            "update" | "patch" if is_scale => ctx.write_scale(body, verb == "patch"),
            "get" => ctx.get(),
            "list" => ctx.list(),
            "watch" => ctx.watch(),
            "create" if ctx.target.sub.is_some() => ctx.bind(body),
            "create" if builtin::is_virtual(&ctx.target.info) => ctx.create_virtual(body),
            "create" => ctx.create(body),
            "update" => ctx.update(body),
            "patch" => ctx.patch(body),
            _ => ctx.delete(body),
        };
        let warnings = ctx.take_warnings();
        with_warnings(result, &warnings)
    };
    match verb {
        // Reads are cheap and a watch starts its stream on the runtime.
        "get" | "list" | "watch" => Ok(run()),
        // Decoding and patching a body can take a while: never on the
        // runtime's threads, so one request cannot stall the others.
        _ => off_runtime(move || Ok(run())).await,
    }
}

/// `result` as a response carrying `warnings`: they reach the client
/// whatever the outcome, as the real server's warning recorder writes them
/// before the body.
fn with_warnings(result: Result<Response>, warnings: &[String]) -> Response {
    let mut response = result.unwrap_or_else(IntoResponse::into_response);
    validation::add_warning_headers(response.headers_mut(), warnings);
    response
}
/// Runs blocking request work (decoding a body) on the blocking pool.
async fn off_runtime<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::Internal(format!("request handler failed: {e}")))?
}

/// Reads a body within the configured size limit and refuses one nested
/// deeper than the real decoders accept (see [`body`]).
async fn read_body(app: &AppState, req: Request) -> Result<Bytes> {
    let bytes = body::read(req, app.max_request_body_bytes).await?;
    body::check_depth(&bytes, body::MAX_NESTING_DEPTH)?;
    Ok(bytes)
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
    let body = read_body(app, req).await?;
    let cmd: FaultCommand = serde_json::from_slice(&body)
        .map_err(|e| ApiError::BadRequest(format!("invalid fault command: {e}")))?;
    app.faults.apply(cmd);
    Ok(value_response(
        StatusCode::OK,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}),
    ))
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
    /// Who asks (an apply that creates is authorized as `create` too).
    user: &'a User,
    target: Target,
    query: HashMap<String, String>,
    headers: HeaderMap,
    manager: String,
    /// `Warning` headers for the response (see `validation`).
    warnings: Mutex<Vec<String>>,
}

impl<'a> Ctx<'a> {
    /// The context of one request, with no warnings yet.
    fn new(
        app: &'a AppState,
        user: &'a User,
        target: Target,
        query: HashMap<String, String>,
        headers: HeaderMap,
        manager: String,
    ) -> Self {
        Ctx {
            app,
            user,
            target,
            query,
            headers,
            manager,
            warnings: Mutex::default(),
        }
    }
}

enum Attempt<T> {
    Done(T),
    Retry,
}

impl Ctx<'_> {
    fn store(&self) -> &Store {
        &self.app.cluster.store
    }

    /// The `Warning` headers collected so far.
    fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// managedFields options: reset fields of the strategy, plus the list
    /// and map types a custom resource's CRD schema declares.
    fn apply_options(&self) -> patch::ApplyOptions {
        let options = self.target.apply_options();
        if !crd::is_custom(&self.target.info) {
            return options;
        }
        match self.custom_schema() {
            Some(s) => options.schema(patch::SchemaOverrides::from_openapi_v3(&s)),
            None => options,
        }
    }

    /// The `openAPIV3Schema` of the custom resource being written (None for
    /// built-in kinds and CRDs without one).
    fn custom_schema(&self) -> Option<Value> {
        if !crd::is_custom(&self.target.info) {
            return None;
        }
        crd::version_schema(self.store(), &self.target.info)
    }

    /// Defaults and validates a custom object about to be stored against
    /// its CRD's schema; any failure is the real server's 422 and stores
    /// nothing. Built-in kinds pass unchanged.
    fn admit_custom(&self, obj: &mut Value) -> Result<()> {
        let Some(schema) = self.custom_schema() else {
            return Ok(());
        };
        let errs = crd::admit(obj, &schema);
        if errs.is_empty() {
            return Ok(());
        }
        let name = crate::rules::objects::meta_str(obj, "name")
            .unwrap_or_default()
            .to_string();
        Err(self.invalid(&name, errs))
    }

    /// A stored object in the requested version's form.
    fn out(&self, v: Value) -> Value {
        convert::from_storage(&self.target.info, v)
    }

    /// A stored object's JSON in the requested version's form.
    fn out_bytes(&self, json: &[u8]) -> Bytes {
        Bytes::from(convert::bytes_from_storage(&self.target.info, json))
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
        let mut field_selector = self.q("fieldSelector").unwrap_or_default().to_string();
        if let Some(name) = &self.target.name {
            if !field_selector.is_empty() {
                field_selector.push(',');
            }
            field_selector.push_str(&format!("metadata.name={name}"));
        }
        let fields = FieldSelector::parse(&field_selector, &self.target.storage())
            .map_err(|e| ApiError::BadRequest(e.to_string()))?;
        Ok(Selector { labels, fields })
    }

    /// Checks kind/apiVersion and namespace of a request body against the
    /// URL. A missing kind or apiVersion defaults to the URL's, as the real
    /// server decodes bodies with the endpoint's kind as the default (the
    /// Python client sends typed objects without them). Every write's
    /// object comes through here, so this is also where unknown and
    /// duplicate fields are dropped, warned about or refused
    /// (`fieldValidation`, see [`validation::check`]).
    fn check_body(&self, obj: &mut Value, write: validation::Write<'_>) -> Result<()> {
        let info = &self.target.info;
        if !obj.is_object() {
            return Err(ApiError::BadRequest(format!(
                "Object 'Kind' is missing in '{}'",
                truncate(&obj.to_string())
            )));
        }
        let field = |k: &str| {
            obj.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let (kind, api_version) = (field("kind"), field("apiVersion"));
        if kind.is_empty() {
            obj["kind"] = json!(info.kind);
        }
        if (!kind.is_empty() && kind != info.kind)
            || (!api_version.is_empty() && api_version != info.api_version())
        {
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
        let directive =
            validation::Directive::from_query(self.q("fieldValidation"), write.options_kind())?;
        let schema = self.custom_schema();
        let warnings = validation::check(info, obj, directive, &write, schema.as_ref())?;
        if !warnings.is_empty() {
            self.warnings
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(warnings);
        }
        Ok(())
    }

    /// The request's namespace exists and accepts new content (`name`: the
    /// object being created, for the refusal message).
    fn require_namespace(&self, name: &str) -> Result<()> {
        if let Some(ns) = &self.target.namespace {
            let key = (String::new(), ns.clone());
            if self.store().get("namespaces", &key).is_none() {
                return Err(ApiError::not_found("", "namespaces", ns));
            }
            if crate::controllers::namespaces::is_terminating(self.store(), ns) {
                let info = &self.target.info;
                let subject = match name {
                    "" => crate::status::qualified(&info.group, &info.plural),
                    n => format!(
                        "{} \"{n}\"",
                        crate::status::qualified(&info.group, &info.plural)
                    ),
                };
                return Err(ApiError::Forbidden {
                    message: format!(
                        "{subject} is forbidden: {}",
                        crate::controllers::namespaces::refusal(ns)
                    ),
                    details: Details {
                        name: name.to_string(),
                        group: info.group.clone(),
                        kind: info.plural.clone(),
                    },
                });
            }
        }
        Ok(())
    }

    /// 422 about the object `name`, its kind named as Go's
    /// `GroupKind.String()` does (`Widget.example.com`, `Pod`).
    fn invalid(&self, name: &str, errs: Vec<(String, String)>) -> ApiError {
        let info = &self.target.info;
        let kind = if info.group.is_empty() {
            info.kind.clone()
        } else {
            format!("{}.{}", info.kind, info.group)
        };
        ApiError::invalid(&info.group, &kind, name, errs)
    }

    /// Decodes an object body by its Content-Type (see [`decode_body`]).
    fn decode_object(&self, body: &[u8]) -> Result<Value> {
        decode_body(&self.headers, body)
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
