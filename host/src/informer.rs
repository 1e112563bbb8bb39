//! Shared informers: one list+watch per (type, namespace, selectors), a
//! projected cache, and change notifications to handlers.
//!
//! Owns the reflector loop (kube-runtime's `watcher`, which relists after a
//! `410 Gone`) and how it lists: a streaming list (one watch with
//! `sendInitialEvents`, decoded object by object as the server sends it)
//! where the server serves one, else pages then a watch, chosen per
//! informer by asking (see [`ListStrategy`]) and by watching the answer
//! (a server that accepts a streaming list and never marks the end of its
//! initial events gets pages too, see [`InitialEvents`]); projection at ingest (like client-go's transform) into the
//! informer's [`Store`] (see [`crate::store`], which decides what each event
//! amounts to, tombstones included), notifying handlers, the sync state, and
//! the registry that shares one informer between every guest that needs it,
//! and the failure policy: a 401/403/404 before the first watch is
//! established (RBAC missing `list` or `watch`, an unknown resource) fails
//! the informer at once; any failure after that is retried with the
//! watcher's backoff, tracked in the informer's [`WatchHealth`], and fails
//! the informer only once no watch has worked for the configured deadline
//! (see [`crate::health`]). It never computes request keys or does work for a guest: handlers are
//! plain callbacks that must return at once.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ApiResource;
use kube::core::{DynamicResourceScope, Resource};
use kube::runtime::watcher;
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};
use serde_json::Value as Json;
use tokio::sync::watch as tokio_watch;
use tokio::task::JoinHandle;

pub use crate::store::{Change, ChangeKind};

use crate::health::{WatchHealth, WatchHealthConfig};
use crate::objects::Keep;
use crate::projection::{FieldPath, Interner, ProjectedObject, Projection};
use crate::store::{Store, Writer};
use crate::sync::{lock, read, write};

/// Identity of a shared informer.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InformerKey {
    /// API group ("" for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Resource plural.
    pub plural: String,
    /// Namespace scope (None = all namespaces / cluster-scoped).
    pub namespace: Option<String>,
    /// Label selector.
    pub label_selector: Option<String>,
    /// Field selector.
    pub field_selector: Option<String>,
}

impl std::fmt::Display for InformerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gr = if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        };
        write!(f, "{gr}")?;
        if let Some(ns) = &self.namespace {
            write!(f, " in namespace {ns}")?;
        }
        if let Some(l) = &self.label_selector {
            write!(f, " labels {l:?}")?;
        }
        if let Some(l) = &self.field_selector {
            write!(f, " fields {l:?}")?;
        }
        Ok(())
    }
}

impl InformerKey {
    /// The kube dynamic resource for this key.
    pub fn api_resource(&self) -> ApiResource {
        ApiResource {
            group: self.group.clone(),
            version: self.version.clone(),
            api_version: if self.group.is_empty() {
                self.version.clone()
            } else {
                format!("{}/{}", self.group, self.version)
            },
            kind: self.kind.clone(),
            plural: self.plural.clone(),
        }
    }
}

/// Why an informer could not (or can no longer) serve its cache.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot {verb} {resource}: {message}")]
pub struct SyncError {
    /// "list" or "watch".
    pub verb: &'static str,
    /// The informer, e.g. `pods labels "app=x"`.
    pub resource: String,
    /// HTTP status code from the API server, when there was one.
    pub code: Option<u16>,
    /// The API server's message.
    pub message: String,
}

/// Sync state of an informer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncState {
    /// The initial list has not completed.
    Pending,
    /// The cache holds a complete list and is following the watch.
    Synced,
    /// The informer hit an error it cannot recover from (forbidden,
    /// unauthorized, unknown resource before any watch worked), or no
    /// watch has worked for the watch-failure deadline.
    Failed(SyncError),
}

/// A change callback.
pub type Handler = Arc<dyn Fn(&Change) + Send + Sync>;

struct Inner {
    key: InformerKey,
    projection: Projection,
    store: Store,
    interner: Mutex<Interner>,
    handlers: RwLock<Vec<(u64, Handler)>>,
    next_handler: Mutex<u64>,
    state: tokio_watch::Sender<SyncState>,
    lists: std::sync::atomic::AtomicU64,
    health: WatchHealth,
    health_config: WatchHealthConfig,
    metrics: Option<Arc<crate::metrics::Metrics>>,
}

/// A running informer. Cheap to clone; the watch stops when the last clone
/// (and the registry's reference) is dropped.
#[derive(Clone)]
pub struct Informer {
    inner: Arc<Inner>,
    task: Arc<TaskGuard>,
    indexed: Arc<[FieldPath]>,
}

struct TaskGuard(JoinHandle<()>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Informer {
    /// Starts listing and watching `key`, keeping `projection` of each object
    /// and indexing the values of the projected fields `indexed` (namespace
    /// and controller owner are always indexed).
    pub fn start(
        client: Client,
        key: InformerKey,
        projection: Projection,
        indexed: &[FieldPath],
    ) -> Self {
        Self::start_with(
            client,
            key,
            projection,
            indexed,
            WatchHealthConfig::default(),
            None,
        )
    }

    /// Like [`Informer::start`], tolerating failing watches as `health`
    /// says and counting them in `metrics` when given.
    pub fn start_with(
        client: Client,
        key: InformerKey,
        projection: Projection,
        indexed: &[FieldPath],
        health: WatchHealthConfig,
        metrics: Option<Arc<crate::metrics::Metrics>>,
    ) -> Self {
        let (state, _) = tokio_watch::channel(SyncState::Pending);
        let writer = Writer::with_field_indexes(&field_positions(&projection, indexed));
        let inner = Arc::new(Inner {
            key,
            projection,
            store: writer.store(),
            interner: Mutex::new(Interner::default()),
            handlers: RwLock::new(Vec::new()),
            next_handler: Mutex::new(0),
            state,
            lists: std::sync::atomic::AtomicU64::new(0),
            health: WatchHealth::default(),
            health_config: health,
            metrics,
        });
        let task = tokio::spawn(run(client, inner.clone(), writer));
        Informer {
            inner,
            task: Arc::new(TaskGuard(task)),
            indexed: indexed.into(),
        }
    }

    /// The informer's identity.
    pub fn key(&self) -> &InformerKey {
        &self.inner.key
    }

    /// The projection it keeps.
    pub fn projection(&self) -> &Projection {
        &self.inner.projection
    }

    /// Current sync state.
    pub fn state(&self) -> SyncState {
        self.inner.state.borrow().clone()
    }

    /// Waits until synced (Ok) or failed (Err).
    pub async fn wait_synced(&self) -> Result<(), SyncError> {
        let mut rx = self.inner.state.subscribe();
        loop {
            match &*rx.borrow_and_update() {
                SyncState::Synced => return Ok(()),
                SyncState::Failed(e) => return Err(e.clone()),
                SyncState::Pending => {}
            }
            if rx.changed().await.is_err() {
                return Err(SyncError {
                    verb: "watch",
                    resource: self.inner.key.to_string(),
                    code: None,
                    message: "informer stopped".into(),
                });
            }
        }
    }

    /// The informer's watch health.
    pub fn health(&self) -> &WatchHealth {
        &self.inner.health
    }

    /// Why this informer makes the host not ready: its watch has been
    /// failing for longer than the configured grace time.
    pub fn unready(&self) -> Option<String> {
        self.inner
            .health
            .unready(&self.inner.key.to_string(), &self.inner.health_config)
    }

    /// A receiver of state changes (for readiness and failure detection).
    pub fn subscribe_state(&self) -> tokio_watch::Receiver<SyncState> {
        self.inner.state.subscribe()
    }

    /// Registers a handler; returns an id for [`Informer::remove_handler`].
    ///
    /// Like client-go's `AddEventHandler` on a running informer, the handler
    /// first gets an `Added` for every object already cached, so it misses
    /// nothing whenever it is added. (Registered before that replay, it may
    /// see a concurrent change twice; never zero times.)
    pub fn add_handler(&self, handler: Handler) -> u64 {
        let id = {
            let mut next = lock(&self.inner.next_handler);
            *next += 1;
            *next
        };
        write(&self.inner.handlers).push((id, handler.clone()));
        for object in self.inner.store.list() {
            handler(&Change::added(object));
        }
        id
    }

    /// Unregisters a handler.
    pub fn remove_handler(&self, id: u64) {
        write(&self.inner.handlers).retain(|(h, _)| *h != id);
    }

    /// A reader of the informer's cache.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// All cached objects, sorted by namespace then name.
    pub fn list(&self) -> Vec<Arc<ProjectedObject>> {
        self.inner.store.list()
    }

    /// One cached object.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<ProjectedObject>> {
        self.inner.store.get(namespace, name)
    }

    /// How many complete lists (the initial one plus relists after a
    /// `410 Gone` or a failed watch) the informer has done.
    pub fn lists(&self) -> u64 {
        self.inner.lists.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        self.inner.store.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of live references (registry included).
    fn users(&self) -> usize {
        Arc::strong_count(&self.task)
    }
}

/// Errors a controller cannot outlive: the credentials or the resource are
/// wrong, and retrying will not fix them.
fn fatal(e: &watcher::Error, resource: &str) -> Option<SyncError> {
    let (verb, err) = match e {
        watcher::Error::InitialListFailed(err) => ("list", err),
        watcher::Error::WatchStartFailed(err) | watcher::Error::WatchFailed(err) => ("watch", err),
        watcher::Error::WatchError(status) => {
            let code = status.code;
            return matches!(code, 401 | 403).then(|| SyncError {
                verb: "watch",
                resource: resource.to_string(),
                code: Some(code),
                message: status.message.clone(),
            });
        }
        watcher::Error::NoResourceVersion => return None,
    };
    match err {
        kube::Error::Api(status) if matches!(status.code, 401 | 403 | 404) => Some(SyncError {
            verb,
            resource: resource.to_string(),
            code: Some(status.code),
            message: status.message.clone(),
        }),
        _ => None,
    }
}

fn notify(inner: &Inner, change: &Change) {
    for (_, h) in read(&inner.handlers).iter() {
        h(change);
    }
}

thread_local! {
    /// What the informer polling on this thread keeps of each object it
    /// decodes (see [`Pruned`]).
    static KEEP: RefCell<Option<Arc<Keep>>> = const { RefCell::new(None) };
}

/// Runs `f` (one poll of the watch stream) with `keep` as this thread's
/// decode filter, restoring the previous one afterwards.
fn with_keep<T>(keep: &Arc<Keep>, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Arc<Keep>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            KEEP.with(|k| *k.borrow_mut() = previous);
        }
    }
    let _restore = Restore(KEEP.with(|k| k.borrow_mut().replace(keep.clone())));
    f()
}

/// An object as the informer decodes it: only identity and the projected
/// fields survive decoding; everything else in the response text
/// (managedFields, annotations, most of spec and status) is skipped by the
/// parser instead of being built and then thrown away.
///
/// kube's client decodes list pages and watch lines synchronously inside
/// the stream's poll, so the filter travels in a thread-local set around
/// each poll ([`with_keep`]); decoded anywhere else, the whole object is kept.
#[derive(Debug, Clone)]
struct Pruned {
    metadata: ObjectMeta,
    body: Body,
}

/// What decoding kept of an object.
#[derive(Debug, Clone)]
enum Body {
    /// The kept fields, decoded.
    Json(Json),
    /// A whole object (the filter keeps everything), as the server's text:
    /// an informer of whole objects (the outputs cache) never builds the
    /// object only to encode it again. `identity` holds the fields
    /// [`Keep::for_paths`] keeps of any object, decoded from the text.
    Raw {
        text: Box<serde_json::value::RawValue>,
        identity: Json,
    },
}

impl Body {
    /// The decoded part: the object, or its identity fields.
    fn head(&self) -> &Json {
        match self {
            Body::Json(json) => json,
            Body::Raw { identity, .. } => identity,
        }
    }
}

thread_local! {
    /// What [`Body::Raw`] decodes of the text: identity only.
    static IDENTITY: Keep = Keep::for_paths(std::iter::empty());
}

impl<'de> serde::Deserialize<'de> for Pruned {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{DeserializeSeed, Error};
        let body = match KEEP.with(|k| k.borrow().clone()) {
            // Only serde_json's own deserializer hands out raw text; kube
            // decodes list pages and watch lines with it, and both the
            // list's `items` and the watch event's `object` (after its
            // `type`, as Kubernetes encodes events) reach us unbuffered.
            Some(keep) if keep.is_everything() => {
                let text = Box::<serde_json::value::RawValue>::deserialize(d)?;
                let identity = IDENTITY
                    .with(|id| id.deserialize(&mut serde_json::Deserializer::from_str(text.get())))
                    .map_err(D::Error::custom)?;
                Body::Raw { text, identity }
            }
            Some(keep) => Body::Json(keep.as_ref().deserialize(d)?),
            None => Body::Json(Json::deserialize(d)?),
        };
        let meta = body.head().get("metadata");
        let text = |f: &str| {
            meta.and_then(|m| m.get(f))
                .and_then(Json::as_str)
                .map(str::to_owned)
        };
        let metadata = ObjectMeta {
            name: text("name"),
            namespace: text("namespace"),
            uid: text("uid"),
            resource_version: text("resourceVersion"),
            ..ObjectMeta::default()
        };
        Ok(Pruned { metadata, body })
    }
}

impl Resource for Pruned {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

fn project(inner: &Inner, obj: Pruned) -> ProjectedObject {
    let key = &inner.key;
    let api_version = || {
        if key.group.is_empty() {
            key.version.clone()
        } else {
            format!("{}/{}", key.group, key.version)
        }
    };
    // List items come without apiVersion and kind (the list names them
    // once); watch events carry them. Fill them in so a guest projecting
    // them sees the same either way.
    let mut body = match obj.body {
        Body::Raw { text, identity } => {
            let text = with_type(text.get(), &identity, &key.kind, api_version);
            if inner.projection.whole_only() {
                let mut interner = lock(&inner.interner);
                return inner
                    .projection
                    .project_text(&identity, text.into(), &mut interner);
            }
            // Whole objects and some of their fields: decode after all.
            match serde_json::from_str(&text) {
                Ok(json) => json,
                Err(_) => identity,
            }
        }
        Body::Json(json) => json,
    };
    if let Json::Object(map) = &mut body {
        map.entry("apiVersion")
            .or_insert_with(|| Json::String(api_version()));
        map.entry("kind")
            .or_insert_with(|| Json::String(key.kind.clone()));
    }
    let mut interner = lock(&inner.interner);
    inner.projection.project(&body, &mut interner)
}

/// `text` (a JSON object) with `kind` and `apiVersion` added in front when
/// `identity` (decoded from it) lacks them, as the API server encodes them.
fn with_type(
    text: &str,
    identity: &Json,
    kind: &str,
    api_version: impl FnOnce() -> String,
) -> String {
    let has = |f: &str| identity.get(f).is_some();
    let Some(rest) = text.trim_start().strip_prefix('{') else {
        return text.to_string();
    };
    let mut out = String::with_capacity(text.len() + 64);
    out.push('{');
    let mut added = false;
    if !has("kind") {
        out.push_str(&format!("\"kind\":{}", Json::from(kind)));
        added = true;
    }
    if !has("apiVersion") {
        if added {
            out.push(',');
        }
        out.push_str(&format!("\"apiVersion\":{}", Json::from(api_version())));
        added = true;
    }
    if added && !rest.trim_start().starts_with('}') {
        out.push(',');
    }
    out.push_str(rest);
    out
}

/// How an informer fills its cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListStrategy {
    /// A streaming list: one watch with `sendInitialEvents=true`, on which
    /// the server sends every object as an `ADDED` event and then a
    /// bookmark marking the end of the initial state, and which goes on
    /// as the watch. Objects are decoded one by one as they arrive while
    /// the server still encodes the next (no page is held whole). Served
    /// where the `WatchList` feature is on: Kubernetes 1.32 and 1.34 on.
    Streaming,
    /// Pages of 500 objects (`limit` and `continue`), then a watch from the
    /// list's resourceVersion: every server.
    Paged,
}

/// The watcher configuration for `key` listing the `strategy` way.
fn watcher_config(key: &InformerKey, strategy: ListStrategy) -> watcher::Config {
    let mut config = watcher::Config::default().page_size(500);
    if strategy == ListStrategy::Streaming {
        config = config.streaming_lists();
    }
    if let Some(l) = &key.label_selector {
        config = config.labels(l);
    }
    if let Some(f) = &key.field_selector {
        config = config.fields(f);
    }
    config
}

/// Whether `e` is a server refusing a streaming list: a server without
/// the `WatchList` feature (before 1.32, or 1.33, where it is off by
/// default) refuses `sendInitialEvents`, and one before 1.27
/// `resourceVersionMatch` on a watch, as invalid (422; 400 from some
/// proxies); a 1.32 server with `WatchList` on but its storage unable to
/// stream (the `RequestWatchProgress` gate off) answers 500 "a watch stream
/// was requested by the client but the required storage feature … is
/// disabled". Any other 500 is an outage, retried as usual.
fn streaming_refused(e: &watcher::Error) -> bool {
    let watcher::Error::WatchStartFailed(kube::Error::Api(status)) = e else {
        return false;
    };
    match status.code {
        400 | 422 => true,
        500 => {
            status.message.contains("watch stream was requested")
                || (status.message.contains("feature") && status.message.contains("disabled"))
        }
        _ => false,
    }
}

/// The informer's event stream: kube-runtime's watcher (with its backoff)
/// listing the `strategy` way, each poll decoding with `keep`.
fn events(
    api: &Api<Pruned>,
    key: &InformerKey,
    strategy: ListStrategy,
    keep: &Arc<Keep>,
) -> futures::stream::BoxStream<'static, Result<watcher::Event<Pruned>, watcher::Error>> {
    let mut events = watcher(api.clone(), watcher_config(key, strategy))
        .default_backoff()
        .boxed();
    let keep = keep.clone();
    futures::stream::poll_fn(move |cx| with_keep(&keep, || events.poll_next_unpin(cx))).boxed()
}

/// Streaming lists in a row that may end without marking the end of their
/// initial events before the informer lists in pages (a dropped connection
/// ends one; a server that ignores the request ends every one).
const UNFINISHED_STREAMING_LISTS: u32 = 2;

/// Whether a streaming list is on its way to marking the end of its initial
/// events. A server that serves streaming lists sends the initial events
/// back to back and the mark right after them; one that accepted the
/// request and ignored it (some aggregated API servers do) goes on as a
/// plain watch and never sends the mark, so the cache would never sync.
/// Such a list is given up when it sends nothing for `wait` before the mark
/// (the clock paused while the watcher retries an error, which is the
/// deadline's business), or when [`UNFINISHED_STREAMING_LISTS`] in a row
/// end without it.
#[derive(Debug)]
struct InitialEvents {
    wait: std::time::Duration,
    /// Between a streaming list's start and its mark.
    open: bool,
    /// When it last sent something (None: not open, or paused).
    last: Option<tokio::time::Instant>,
    /// Streaming lists in a row that ended without the mark.
    unfinished: u32,
}

impl InitialEvents {
    fn new(wait: std::time::Duration) -> Self {
        InitialEvents {
            wait,
            open: false,
            last: None,
            unfinished: 0,
        }
    }

    /// A streaming list starts at `now`; false when too many in a row
    /// ended without the mark.
    fn started(&mut self, now: tokio::time::Instant) -> bool {
        if self.open {
            self.unfinished += 1;
        }
        self.open = true;
        self.last = Some(now);
        self.unfinished < UNFINISHED_STREAMING_LISTS
    }

    /// An object of the initial events came at `now`.
    fn object(&mut self, now: tokio::time::Instant) {
        if self.open {
            self.last = Some(now);
        }
    }

    /// The watcher met an error: its retries are timed by the deadline.
    fn failed(&mut self) {
        self.last = None;
    }

    /// The end of the initial events was marked.
    fn done(&mut self) {
        *self = InitialEvents::new(self.wait);
    }

    /// When an open list that sends nothing more is given up.
    fn give_up_at(&self) -> Option<tokio::time::Instant> {
        self.last.map(|at| at + self.wait)
    }
}

/// Sleeps until `at`, or forever when there is none.
async fn until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn run(client: Client, inner: Arc<Inner>, mut writer: Writer) {
    let client = crate::health::observed(client, inner.health.clone());
    let ar = inner.key.api_resource();
    let api: Api<Pruned> = match &inner.key.namespace {
        Some(ns) => Api::namespaced_with(client, ns, &ar),
        None => Api::all_with(client, &ar),
    };
    let resource = inner.key.to_string();
    let keep = Arc::new(Keep::for_paths(inner.projection.paths()));
    let mut strategy = ListStrategy::Streaming;
    let mut stream = events(&api, &inner.key, strategy, &keep);
    let mut initial = InitialEvents::new(inner.health_config.streaming_list_wait);
    loop {
        let deadline = inner.health.failing_past(inner.health_config.deadline);
        let give_up = match strategy {
            ListStrategy::Streaming => initial.give_up_at(),
            ListStrategy::Paged => None,
        };
        // None: the streaming list has been silent for too long.
        let event = tokio::select! {
            // An event already waiting goes first: a task that was not
            // polled for a while must not mistake that for the server's
            // silence.
            biased;
            event = stream.next() => {
                let Some(event) = event else { return };
                Some(event)
            }
            () = until(deadline) => {
                let err = inner.health.deadline_passed(&inner.health_config, &resource);
                tracing::error!(resource = %resource, "informer gives up: {err}");
                inner.state.send_replace(SyncState::Failed(err));
                return;
            }
            () = until(give_up) => None,
        };
        // Whether this informer lists in pages from now on (logged where
        // decided), starting over.
        let to_pages = match event {
            None => {
                tracing::warn!(
                    resource = %resource,
                    "a streaming list sent nothing for {:?} without marking the end of its initial events (the API server accepted the request and ignored it?); listing in pages",
                    initial.wait
                );
                true
            }
            Some(Ok(watcher::Event::Init)) => {
                let given_up = strategy == ListStrategy::Streaming
                    && !initial.started(tokio::time::Instant::now());
                if given_up {
                    tracing::warn!(
                        resource = %resource,
                        "{UNFINISHED_STREAMING_LISTS} streaming lists in a row ended without marking the end of their initial events; listing in pages"
                    );
                } else {
                    writer.start_relist();
                }
                given_up
            }
            Some(Ok(watcher::Event::InitApply(obj))) => {
                initial.object(tokio::time::Instant::now());
                if let Some(change) = writer.apply(project(&inner, obj)) {
                    notify(&inner, &change);
                }
                false
            }
            Some(Ok(watcher::Event::Apply(obj))) => {
                if let Some(change) = writer.apply(project(&inner, obj)) {
                    notify(&inner, &change);
                }
                false
            }
            Some(Ok(watcher::Event::InitDone)) => {
                initial.done();
                for tombstone in writer.finish_relist() {
                    notify(&inner, &tombstone);
                }
                lock(&inner.interner).sweep();
                inner
                    .lists
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                inner.state.send_replace(SyncState::Synced);
                false
            }
            Some(Ok(watcher::Event::Delete(obj))) => {
                let meta = &obj.metadata;
                let (ns, name) = (meta.namespace.as_deref(), meta.name.as_deref());
                if let Some(tombstone) = writer.delete(ns.unwrap_or(""), name.unwrap_or("")) {
                    notify(&inner, &tombstone);
                }
                false
            }
            Some(Err(e)) if strategy == ListStrategy::Streaming && streaming_refused(&e) => {
                // The server does not serve streaming lists (or refuses
                // this watch's parameters, which the paged path then meets
                // at its list, retried as any failure).
                tracing::info!(
                    resource = %resource,
                    "the API server does not serve streaming lists ({}); listing in pages",
                    crate::failure::describe(&e)
                );
                true
            }
            Some(Err(e)) => {
                initial.failed();
                if watch_failed(&inner, &resource, &e) {
                    return;
                }
                false
            }
        };
        if to_pages {
            strategy = ListStrategy::Paged;
            stream = events(&api, &inner.key, strategy, &keep);
        }
    }
}

/// Handles a failed list or watch of the informer: counted, then fatal
/// (true: the informer has failed) when it is a refusal before any watch
/// worked, else logged and left to the watcher's backoff.
fn watch_failed(inner: &Inner, resource: &str, e: &watcher::Error) -> bool {
    if let Some(metrics) = &inner.metrics {
        metrics
            .watch_failures
            .get_or_create(&crate::metrics::WatchFailureLabels {
                resource: crate::metrics::label_value(resource),
                reason: crate::failure::watch_failure_reason(e).to_string(),
            })
            .inc();
    }
    // Before any watch worked, a refusal is the configuration's (RBAC, the
    // resource): loud at once. After, it may be an outage or a rollout:
    // retried until the deadline.
    let fatal = match inner.health.ever_established() {
        false => fatal(e, resource),
        true => None,
    };
    if let Some(err) = fatal {
        tracing::error!(
            resource = %resource,
            verb = err.verb,
            code = ?err.code,
            "informer cannot {} {}: {}",
            err.verb,
            resource,
            err.message
        );
        inner.state.send_replace(SyncState::Failed(err));
        return true;
    }
    let described = crate::failure::describe(e);
    if inner.health.failed(described.clone()) {
        tracing::warn!(resource = %resource, "watch error, retrying with backoff: {described}");
    } else {
        tracing::debug!(resource = %resource, "watch error, retrying with backoff: {described}");
    }
    false
}

/// Shares informers between guests: one per [`InformerKey`], holding the
/// union of every user's projection.
#[derive(Clone)]
pub struct InformerRegistry {
    client: Client,
    informers: Arc<Mutex<HashMap<InformerKey, Informer>>>,
    health: WatchHealthConfig,
    metrics: Option<Arc<crate::metrics::Metrics>>,
}

impl InformerRegistry {
    /// A registry creating informers with `client`.
    pub fn new(client: Client) -> Self {
        InformerRegistry {
            client,
            informers: Arc::new(Mutex::new(HashMap::new())),
            health: WatchHealthConfig::default(),
            metrics: None,
        }
    }

    /// Informers started from now on count failed lists and watches in
    /// `wasmctrl_watch_failures_total`.
    #[must_use]
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Informers started from now on tolerate failing watches as `health` says.
    #[must_use]
    pub fn with_health(mut self, health: WatchHealthConfig) -> Self {
        self.health = health;
        self
    }

    /// The informer for `key` whose projection includes `fields` and whose
    /// store indexes the values of `indexed` (a subset of `fields`). An
    /// existing informer is shared when it already keeps and indexes those
    /// fields; otherwise a new one with the union of fields and indexes
    /// replaces it for new users (existing users keep theirs until they
    /// release it).
    pub fn acquire(
        &self,
        key: &InformerKey,
        fields: &[FieldPath],
        indexed: &[FieldPath],
    ) -> Informer {
        let mut map = lock(&self.informers);
        if let Some(existing) = map.get(key) {
            let have = existing.projection().paths();
            if fields.iter().chain(indexed).all(|f| have.contains(f))
                && indexed.iter().all(|f| existing.indexed.contains(f))
            {
                return existing.clone();
            }
        }
        let (mut union, mut union_indexed): (Vec<FieldPath>, Vec<FieldPath>) = map
            .get(key)
            .map(|i| (i.projection().paths().to_vec(), i.indexed.to_vec()))
            .unwrap_or_default();
        for f in fields.iter().chain(indexed) {
            if !union.contains(f) {
                union.push(f.clone());
            }
        }
        for f in indexed {
            if !union_indexed.contains(f) {
                union_indexed.push(f.clone());
            }
        }
        let informer = Informer::start_with(
            self.client.clone(),
            key.clone(),
            Projection::new(union, vec![]),
            &union_indexed,
            self.health,
            self.metrics.clone(),
        );
        map.insert(key.clone(), informer.clone());
        informer
    }

    /// Drops registry entries no guest uses any more (stopping their watches).
    pub fn release_unused(&self) {
        lock(&self.informers).retain(|_, i| i.users() > 1);
    }

    /// Number of informers running.
    pub fn len(&self) -> usize {
        lock(&self.informers).len()
    }

    /// Whether no informers run.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All informers, for readiness reporting.
    pub fn all(&self) -> Vec<Informer> {
        lock(&self.informers).values().cloned().collect()
    }
}

/// Reads field `path` (by position in the informer's projection) — used by
/// callers that map a guest's declared fields onto a shared projection.
pub fn field_positions(projection: &Projection, wanted: &[FieldPath]) -> Vec<usize> {
    wanted
        .iter()
        .map(|w| {
            projection
                .paths()
                .iter()
                .position(|p| p == w)
                .unwrap_or(usize::MAX)
        })
        .collect()
}

/// Parses the whole object kept at informer position `at` (the position of
/// [`FieldPath::whole`] in the informer's projection, which a watch of the
/// same resource may have widened: never assume it is first).
pub fn whole_object(obj: &ProjectedObject, at: usize) -> Option<Json> {
    match obj.field(at).first()? {
        crate::projection::Projected::Json(text) => serde_json::from_str(text).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn start_failed(code: u16, message: &str) -> watcher::Error {
        watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(
            kube::core::Status::failure(message, "").with_code(code),
        )))
    }

    #[test]
    fn a_storage_layer_refusing_watch_streams_is_a_refused_streaming_list_and_an_outage_is_not() {
        assert!(streaming_refused(&start_failed(
            422,
            "sendInitialEvents: Forbidden"
        )));
        assert!(streaming_refused(&start_failed(
            500,
            "a watch stream was requested by the client but the required storage feature RequestWatchProgress is disabled"
        )));
        assert!(!streaming_refused(&start_failed(
            500,
            "etcdserver: request timed out"
        )));
        assert!(!streaming_refused(&start_failed(503, "feature disabled")));
    }

    fn pod() -> Json {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "a", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                "annotations": {"big": "x".repeat(1000)},
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
            },
            "spec": {
                "nodeName": "n1",
                "containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]
            },
            "status": {"phase": "Running", "conditions": [{"type": "Ready"}]}
        })
    }

    fn paths(p: &[&str]) -> Vec<FieldPath> {
        p.iter().map(|p| FieldPath::parse(p).unwrap()).collect()
    }

    #[test]
    fn decoding_under_a_keep_skips_everything_not_projected() {
        let text = pod().to_string();
        let keep = Arc::new(Keep::for_paths(&paths(&[
            "spec.nodeName",
            "spec.containers[*].resources.limits['nvidia.com/gpu']",
        ])));
        let pruned: Pruned = with_keep(&keep, || serde_json::from_str(&text)).unwrap();
        assert_eq!(
            *pruned.body.head(),
            json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "a", "namespace": "ns", "uid": "u1", "resourceVersion": "7"},
                "spec": {
                    "nodeName": "n1",
                    "containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}]
                }
            })
        );
        assert_eq!(pruned.metadata.name.as_deref(), Some("a"));
        assert_eq!(pruned.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(pruned.metadata.resource_version.as_deref(), Some("7"));
        // The filter is scoped to the poll: outside it, objects decode whole.
        let whole: Pruned = serde_json::from_str(&text).unwrap();
        assert_eq!(*whole.body.head(), pod());
    }

    /// The raw text of a whole object kept by `pruned`, and its identity.
    fn raw(pruned: &Pruned) -> (Json, &Json) {
        match &pruned.body {
            Body::Raw { text, identity } => (serde_json::from_str(text.get()).unwrap(), identity),
            Body::Json(_) => panic!("a whole object was decoded, not kept as text"),
        }
    }

    #[test]
    fn the_whole_object_path_keeps_the_text_and_decodes_only_identity() {
        let text = pod().to_string();
        let keep = Arc::new(Keep::for_paths(&[FieldPath::whole()]));
        let pruned: Pruned = with_keep(&keep, || serde_json::from_str(&text)).unwrap();
        let (whole, identity) = raw(&pruned);
        assert_eq!(whole, pod());
        assert_eq!(
            *identity,
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "a", "namespace": "ns", "uid": "u1", "resourceVersion": "7"}})
        );
        assert_eq!(pruned.metadata.resource_version.as_deref(), Some("7"));
    }

    #[test]
    fn whole_objects_stay_text_in_list_pages_and_watch_events_as_kube_decodes_them() {
        let keep = Arc::new(Keep::for_paths(&[FieldPath::whole()]));
        let mut item = pod();
        item.as_object_mut().unwrap().remove("kind");
        item.as_object_mut().unwrap().remove("apiVersion");
        let page = json!({"kind": "PodList", "apiVersion": "v1",
                          "metadata": {"resourceVersion": "9"}, "items": [item]})
        .to_string();
        let list: kube::core::ObjectList<Pruned> =
            with_keep(&keep, || serde_json::from_str(&page)).unwrap();
        assert_eq!(raw(&list.items[0]).0, item);
        let line = format!(r#"{{"type":"MODIFIED","object":{}}}"#, pod());
        let event: kube::core::WatchEvent<Pruned> =
            with_keep(&keep, || serde_json::from_str(&line)).unwrap();
        let kube::core::WatchEvent::Modified(obj) = event else {
            panic!("not a MODIFIED event")
        };
        assert_eq!(raw(&obj).0, pod());
    }

    #[test]
    fn a_whole_object_projects_from_its_text_as_from_the_parsed_object() {
        let projection = Projection::new(vec![FieldPath::whole()], vec![]);
        assert!(projection.whole_only());
        let mut interner = Interner::default();
        let mut obj = pod();
        obj["metadata"]["ownerReferences"] = json!([
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "r1", "controller": true}
        ]);
        obj["metadata"]["finalizers"] = json!(["a/b"]);
        obj["metadata"]["generation"] = json!(3);
        obj["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let keep = Arc::new(Keep::for_paths(&[FieldPath::whole()]));
        let text = obj.to_string();
        let pruned: Pruned = with_keep(&keep, || serde_json::from_str(&text)).unwrap();
        let Body::Raw {
            text: raw_text,
            identity,
        } = &pruned.body
        else {
            panic!("not kept as text")
        };
        let from_text = projection.project_text(identity, raw_text.get().into(), &mut interner);
        let parsed = projection.project(&obj, &mut interner);
        assert!(from_text.same_content(&parsed));
        assert_eq!(from_text.resource_version, parsed.resource_version);
        assert_eq!(whole_object(&from_text, 0), Some(obj));
        // Not for a projection of whole objects and some of their fields.
        let mixed = Projection::new(
            vec![FieldPath::whole(), paths(&["spec.nodeName"])[0].clone()],
            vec![],
        );
        assert!(!mixed.whole_only());
    }

    #[test]
    fn a_list_item_gets_its_kind_and_api_version_in_front() {
        let identity = json!({"metadata": {"name": "a"}});
        let text = r#"{"metadata":{"name":"a"},"data":{}}"#;
        let out = with_type(text, &identity, "ConfigMap", || "v1".into());
        assert_eq!(
            out,
            r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a"},"data":{}}"#
        );
        let empty = with_type("{}", &json!({}), "ConfigMap", || "v1".into());
        assert_eq!(
            serde_json::from_str::<Json>(&empty).unwrap(),
            json!({"kind": "ConfigMap", "apiVersion": "v1"})
        );
        // Present: left as it is.
        let typed = r#"{"apiVersion":"v1","kind":"ConfigMap"}"#;
        let identity: Json = serde_json::from_str(typed).unwrap();
        assert_eq!(
            with_type(typed, &identity, "ConfigMap", || "v1".into()),
            typed
        );
    }

    #[test]
    fn keeps_nest_and_restore() {
        let outer = Arc::new(Keep::for_paths(&paths(&["spec.nodeName"])));
        let inner = Arc::new(Keep::for_paths(&paths(&["status.phase"])));
        let text = pod().to_string();
        with_keep(&outer, || {
            let a: Pruned = with_keep(&inner, || serde_json::from_str(&text)).unwrap();
            assert_eq!(a.body.head()["status"]["phase"], "Running");
            assert!(a.body.head().get("spec").is_none());
            let b: Pruned = serde_json::from_str(&text).unwrap();
            assert_eq!(b.body.head()["spec"]["nodeName"], "n1");
            assert!(b.body.head().get("status").is_none());
        });
        assert!(KEEP.with(|k| k.borrow().is_none()));
    }

    #[test]
    fn a_streaming_list_is_given_up_after_a_silence_before_its_mark() {
        let wait = std::time::Duration::from_secs(30);
        let t0 = tokio::time::Instant::now();
        let at = |s: u64| t0 + std::time::Duration::from_secs(s);
        let mut i = InitialEvents::new(wait);
        assert_eq!(i.give_up_at(), None, "nothing open");
        assert!(i.started(at(0)));
        assert_eq!(i.give_up_at(), Some(at(30)));
        i.object(at(5));
        assert_eq!(
            i.give_up_at(),
            Some(at(35)),
            "each object restarts the wait"
        );
        i.failed();
        assert_eq!(i.give_up_at(), None, "paused while the watcher retries");
        i.object(at(50));
        assert_eq!(i.give_up_at(), Some(at(80)), "resumed by the next object");
        i.done();
        assert_eq!(i.give_up_at(), None);
        i.object(at(90));
        assert_eq!(
            i.give_up_at(),
            None,
            "changes after the mark are no initial events"
        );
    }

    #[test]
    fn streaming_lists_ending_without_their_mark_are_given_up_after_two_in_a_row() {
        let t0 = tokio::time::Instant::now();
        let mut i = InitialEvents::new(std::time::Duration::from_secs(30));
        // One ends early (a dropped connection), the next marks its end:
        // the count starts over.
        assert!(i.started(t0));
        assert!(i.started(t0));
        i.done();
        assert!(i.started(t0), "a relist after a completed list");
        assert!(i.started(t0), "one ended without the mark");
        i.failed();
        assert!(!i.started(t0), "two in a row ended without the mark");
    }
}
