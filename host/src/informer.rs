//! Shared informers: one list+watch per (type, namespace, selectors), a
//! projected cache, and change notifications to handlers.
//!
//! Owns the reflector loop (kube-runtime's `watcher`, which relists after a
//! `410 Gone`), the store of [`ProjectedObject`]s (projection at ingest, like
//! client-go's transform), delete notifications for objects that vanished
//! while the watch was down (the tombstone case), the sync state, and the
//! registry that shares one informer between every guest that needs it.
//! It never computes request keys or does work for a guest: handlers are
//! plain callbacks that must return at once.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::watcher;
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};
use serde_json::Value as Json;
use tokio::sync::watch as tokio_watch;
use tokio::task::JoinHandle;

use crate::projection::{FieldPath, Interner, ProjectedObject, Projection};

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
    /// unauthorized, unknown resource).
    Failed(SyncError),
}

/// What happened to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// Seen for the first time.
    Added,
    /// Its projected fields changed.
    Updated,
    /// Deleted, left the selector, or vanished during a relist (tombstone).
    Deleted,
}

/// A change notification. Handlers get it by reference and must not block.
#[derive(Debug, Clone)]
pub struct Change {
    /// What happened.
    pub kind: ChangeKind,
    /// The object's namespace ("" for cluster-scoped).
    pub namespace: Arc<str>,
    /// The object's name.
    pub name: Arc<str>,
}

/// A change callback.
pub type Handler = Arc<dyn Fn(&Change) + Send + Sync>;

type ObjKey = (Arc<str>, Arc<str>);

struct Inner {
    key: InformerKey,
    projection: Projection,
    objects: RwLock<BTreeMap<ObjKey, Arc<ProjectedObject>>>,
    interner: Mutex<Interner>,
    handlers: RwLock<Vec<(u64, Handler)>>,
    next_handler: Mutex<u64>,
    state: tokio_watch::Sender<SyncState>,
    lists: std::sync::atomic::AtomicU64,
}

/// A running informer. Cheap to clone; the watch stops when the last clone
/// (and the registry's reference) is dropped.
#[derive(Clone)]
pub struct Informer {
    inner: Arc<Inner>,
    task: Arc<TaskGuard>,
}

struct TaskGuard(JoinHandle<()>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Informer {
    /// Starts listing and watching `key`, keeping `projection` of each object.
    pub fn start(client: Client, key: InformerKey, projection: Projection) -> Self {
        let (state, _) = tokio_watch::channel(SyncState::Pending);
        let inner = Arc::new(Inner {
            key,
            projection,
            objects: RwLock::new(BTreeMap::new()),
            interner: Mutex::new(Interner::default()),
            handlers: RwLock::new(Vec::new()),
            next_handler: Mutex::new(0),
            state,
            lists: std::sync::atomic::AtomicU64::new(0),
        });
        let task = tokio::spawn(run(client, inner.clone()));
        Informer {
            inner,
            task: Arc::new(TaskGuard(task)),
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

    /// A receiver of state changes (for readiness and failure detection).
    pub fn subscribe_state(&self) -> tokio_watch::Receiver<SyncState> {
        self.inner.state.subscribe()
    }

    /// Registers a handler; returns an id for [`Informer::remove_handler`].
    pub fn add_handler(&self, handler: Handler) -> u64 {
        let id = {
            let mut next = lock(&self.inner.next_handler);
            *next += 1;
            *next
        };
        write(&self.inner.handlers).push((id, handler));
        id
    }

    /// Unregisters a handler.
    pub fn remove_handler(&self, id: u64) {
        write(&self.inner.handlers).retain(|(h, _)| *h != id);
    }

    /// All cached objects, sorted by namespace then name.
    pub fn list(&self) -> Vec<Arc<ProjectedObject>> {
        read(&self.inner.objects).values().cloned().collect()
    }

    /// One cached object.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<ProjectedObject>> {
        let key: ObjKey = (Arc::from(namespace), Arc::from(name));
        read(&self.inner.objects).get(&key).cloned()
    }

    /// How many complete lists (the initial one plus relists after a
    /// `410 Gone` or a failed watch) the informer has done.
    pub fn lists(&self) -> u64 {
        self.inner.lists.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        read(&self.inner.objects).len()
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
fn read<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}
fn write<T>(m: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(std::sync::PoisonError::into_inner)
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

fn meta_key(obj: &DynamicObject) -> ObjKey {
    (
        Arc::from(obj.metadata.namespace.as_deref().unwrap_or("")),
        Arc::from(obj.metadata.name.as_deref().unwrap_or("")),
    )
}

fn project(inner: &Inner, obj: DynamicObject) -> Option<ProjectedObject> {
    // Move the decoded body instead of re-serialising the whole object:
    // only the (small) metadata is converted, so no second copy of the
    // object is built just to be thrown away.
    let DynamicObject {
        types,
        metadata,
        data,
    } = obj;
    let mut json = match data {
        Json::Object(map) => Json::Object(map),
        _ => Json::Object(serde_json::Map::new()),
    };
    if let Json::Object(map) = &mut json {
        map.insert("metadata".into(), serde_json::to_value(metadata).ok()?);
        if let Some(t) = types {
            map.insert("apiVersion".into(), Json::String(t.api_version));
            map.insert("kind".into(), Json::String(t.kind));
        }
    }
    let mut interner = lock(&inner.interner);
    Some(inner.projection.project(&json, &mut interner))
}

/// Upserts; returns the change to report (None when projected fields are
/// unchanged, so a resourceVersion-only update wakes nobody).
fn upsert(inner: &Inner, obj: DynamicObject) -> Option<Change> {
    let projected = project(inner, obj)?;
    // The key shares the projected object's strings: no second copy.
    let key: ObjKey = (projected.namespace.clone(), projected.name.clone());
    let mut objects = write(&inner.objects);
    let kind = match objects.get(&key) {
        Some(old) if old.same_content(&projected) => {
            // Keep the newest resourceVersion without waking handlers.
            objects.insert(key, Arc::new(projected));
            return None;
        }
        Some(_) => ChangeKind::Updated,
        None => ChangeKind::Added,
    };
    let (namespace, name) = key.clone();
    objects.insert(key, Arc::new(projected));
    Some(Change {
        kind,
        namespace,
        name,
    })
}

async fn run(client: Client, inner: Arc<Inner>) {
    let ar = inner.key.api_resource();
    let api: Api<DynamicObject> = match &inner.key.namespace {
        Some(ns) => Api::namespaced_with(client, ns, &ar),
        None => Api::all_with(client, &ar),
    };
    let mut config = watcher::Config::default().page_size(500);
    if let Some(l) = &inner.key.label_selector {
        config = config.labels(l);
    }
    if let Some(f) = &inner.key.field_selector {
        config = config.fields(f);
    }
    let resource = inner.key.to_string();
    let mut stream = watcher(api, config).default_backoff().boxed();
    // Keys seen since the last Init: what survives a relist.
    let mut relisting: Option<BTreeSet<ObjKey>> = None;
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => relisting = Some(BTreeSet::new()),
            Ok(watcher::Event::InitApply(obj)) => {
                if let Some(seen) = relisting.as_mut() {
                    seen.insert(meta_key(&obj));
                }
                if let Some(change) = upsert(&inner, obj) {
                    notify(&inner, &change);
                }
            }
            Ok(watcher::Event::InitDone) => {
                let seen = relisting.take().unwrap_or_default();
                let gone: Vec<ObjKey> = {
                    let mut objects = write(&inner.objects);
                    let gone: Vec<ObjKey> = objects
                        .keys()
                        .filter(|k| !seen.contains(*k))
                        .cloned()
                        .collect();
                    for k in &gone {
                        objects.remove(k);
                    }
                    gone
                };
                for (namespace, name) in gone {
                    notify(
                        &inner,
                        &Change {
                            kind: ChangeKind::Deleted,
                            namespace,
                            name,
                        },
                    );
                }
                lock(&inner.interner).sweep();
                inner
                    .lists
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                inner.state.send_replace(SyncState::Synced);
            }
            Ok(watcher::Event::Apply(obj)) => {
                if let Some(change) = upsert(&inner, obj) {
                    notify(&inner, &change);
                }
            }
            Ok(watcher::Event::Delete(obj)) => {
                let key = meta_key(&obj);
                let removed = write(&inner.objects).remove(&key);
                if removed.is_some() {
                    let (namespace, name) = key;
                    notify(
                        &inner,
                        &Change {
                            kind: ChangeKind::Deleted,
                            namespace,
                            name,
                        },
                    );
                }
            }
            Err(e) => {
                if let Some(err) = fatal(&e, &resource) {
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
                    return;
                }
                tracing::warn!(resource = %resource, "watch error, retrying with backoff: {e}");
            }
        }
    }
}

/// Shares informers between guests: one per [`InformerKey`], holding the
/// union of every user's projection.
#[derive(Clone)]
pub struct InformerRegistry {
    client: Client,
    informers: Arc<Mutex<HashMap<InformerKey, Informer>>>,
}

impl InformerRegistry {
    /// A registry creating informers with `client`.
    pub fn new(client: Client) -> Self {
        InformerRegistry {
            client,
            informers: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The informer for `key` whose projection includes `fields`. An existing
    /// informer is shared when it already keeps those fields; otherwise a new
    /// one with the union of fields replaces it for new users (existing
    /// users keep theirs until they release it).
    pub fn acquire(&self, key: &InformerKey, fields: &[FieldPath]) -> Informer {
        let mut map = lock(&self.informers);
        if let Some(existing) = map.get(key) {
            let have = existing.projection().paths();
            if fields.iter().all(|f| have.contains(f)) {
                return existing.clone();
            }
        }
        let mut union: Vec<FieldPath> = map
            .get(key)
            .map(|i| i.projection().paths().to_vec())
            .unwrap_or_default();
        for f in fields {
            if !union.contains(f) {
                union.push(f.clone());
            }
        }
        let informer = Informer::start(
            self.client.clone(),
            key.clone(),
            Projection::new(union, vec![]),
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

/// Parses a whole object from a projected `Json` text value (outputs cache).
pub fn whole_object(obj: &ProjectedObject) -> Option<Json> {
    match obj.field(0).first()? {
        crate::projection::Projected::Json(text) => serde_json::from_str(text).ok(),
        _ => None,
    }
}
