//! Shared informers: one list+watch per (type, namespace, selectors), a
//! projected cache ([`crate::store`]), and change notifications to handlers.
//!
//! Owns the reflector loop (kube-runtime's `watcher`), how it lists, what it
//! decodes, when a failing watch is fatal, and the registry that shares one
//! informer between every guest that needs it. It never computes request
//! keys or does work for a guest: handlers are plain callbacks that must
//! return at once.
//!
//! # Layout
//! - `mod.rs`: [`Informer`] (the handle). `key`: [`InformerKey`].
//!   `state`: [`SyncState`], [`SyncError`]. `inner`: what the handle and
//!   the loop share.
//! - `registry`: [`InformerRegistry`], one informer per key, projections merged.
//! - `list`: streaming list or pages, and giving a silent streaming list up.
//!   `streaming`: what the informers of one server learned of its
//!   streaming lists.
//! - `decode`: decoding only the projected fields, at ingest.
//! - `run`: the loop from watcher events to the store, and the failure policy.
//! - [`health`]: how long a failing watch is tolerated.
//!
//! # Identities only
//! An informer whose one reader is an incremental aggregate keeps each
//! object's identity, not its projection ([`Retention::Identity`]): the
//! projection goes to the handlers (the aggregate maps it and keeps only
//! its contributions). It lists once its first handler is added, so that
//! handler sees every object. When anything else needs the projections —
//! a second handler, a user from the registry needing them, a shadow or
//! a recording — [`Informer::retain_projections`] switches it back and it
//! relists (a second user asking for identities gets an informer of its
//! own): every identity comes back as an update carrying its
//! projection, and the store says it [`Store::holds_projections`] again
//! once the last one has.
//!
//! # Dormant
//! An informer acquired through [`InformerRegistry::dormant`] (for a guest
//! a replica stands by for, cold, whose controller never runs) is its own:
//! it lists nothing, stays pending and is shared with nobody.
//!
//! # How it lists
//! Where the API server serves a streaming list (a watch with
//! `sendInitialEvents=true`: every object arrives as an event, decoded as
//! it comes while the server sends the next, and a bookmark ends the
//! initial state; Kubernetes 1.32 and 1.34 on), the informer uses one.
//! When the server refuses that watch as invalid (1.33, where `WatchList`
//! is off by default; a 422 or 400), or its storage cannot stream (1.32
//! over an etcd before 3.4.31 or 3.5.13: a 500 naming the disabled storage
//! feature, in the watch's one ERROR event), it lists in pages of 500 and
//! then watches, from then on; so does every informer of the registry
//! (one server) started after that, without asking again. The first to
//! learn it logs it once, at INFO. A server that accepts the streaming
//! list and ignores it (some aggregated API servers: a plain watch that
//! never marks the end of the initial state) gets pages too, for that
//! informer, once its list has sent nothing for the configured wait
//! (`--streaming-list-wait-seconds`, default 30 s) before that mark, or
//! two of its lists in a row have ended without it. Relists after a
//! `410 Gone` go the same way.

mod decode;
pub mod health;
mod inner;
mod key;
mod list;
mod registry;
mod run;
mod state;
mod streaming;

pub use health::{WatchHealth, WatchHealthConfig};
pub use key::InformerKey;
pub use registry::InformerRegistry;
pub use state::{SyncError, SyncState};

use std::sync::{Arc, Mutex, RwLock};

use kube::Client;
use tokio::sync::watch as tokio_watch;
use tokio::task::JoinHandle;

pub use crate::store::{Change, ChangeKind, Handler, Retention};

use crate::projection::{field_positions, FieldPath, Interner, ProjectedObject, Projection};
use crate::store::{Retention as Kept, Store, Writer};
use crate::sync::{lock, write};
use inner::Inner;

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
    /// Whether `other` is this very informer (a clone of it), not just
    /// one with the same key.
    pub fn same(&self, other: &Informer) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Starts listing and watching `key`, keeping `projection` of each object
    /// and indexing the values of the projected fields `indexed` (namespace
    /// and controller owner are always indexed).
    pub fn start(
        client: Client,
        key: InformerKey,
        projection: Projection,
        indexed: &[FieldPath],
    ) -> Self {
        Self::start_keeping(client, key, projection, indexed, Kept::Projections)
    }

    /// Like [`Informer::start`], keeping `retention` of each object (see
    /// "Identities only").
    pub fn start_keeping(
        client: Client,
        key: InformerKey,
        projection: Projection,
        indexed: &[FieldPath],
        retention: Retention,
    ) -> Self {
        Self::spawn(
            client,
            key,
            projection,
            indexed,
            WatchHealthConfig::default(),
            None,
            streaming::StreamingLists::default(),
            retention,
            true,
        )
    }

    /// Like [`Informer::start`], tolerating failing watches as `health`
    /// says, counting them in `metrics` when given, and sharing with the
    /// other informers of the same server what `streaming` knows of its
    /// streaming lists (the registry's way). Unless `wanted`, it never
    /// lists.
    #[allow(clippy::too_many_arguments)]
    fn spawn(
        client: Client,
        key: InformerKey,
        projection: Projection,
        indexed: &[FieldPath],
        health: WatchHealthConfig,
        metrics: Option<Arc<crate::metrics::Metrics>>,
        streaming: streaming::StreamingLists,
        retention: Retention,
        wanted: bool,
    ) -> Self {
        let (state, _) = tokio_watch::channel(SyncState::Pending);
        let writer = Writer::with_retention(&field_positions(&projection, indexed), retention);
        let inner = Arc::new(Inner {
            key,
            projection,
            store: writer.store(),
            interner: Arc::new(Mutex::new(Interner::default())),
            handlers: RwLock::new(Vec::new()),
            next_handler: Mutex::new(0),
            state,
            lists: std::sync::atomic::AtomicU64::new(0),
            health: WatchHealth::default(),
            health_config: health,
            metrics,
            streaming,
            restore: tokio::sync::Notify::new(),
            handler_added: tokio::sync::Notify::new(),
            wanted,
        });
        let task = tokio::spawn(run::run(client, inner.clone(), writer));
        Informer {
            inner,
            task: Arc::new(TaskGuard(task)),
            indexed: indexed.into(),
        }
    }

    /// Whether it never lists (acquired for a guest standing by cold; see
    /// [`InformerRegistry::dormant`]).
    pub fn is_dormant(&self) -> bool {
        !self.inner.wanted
    }

    /// The informer's identity.
    pub fn key(&self) -> &InformerKey {
        &self.inner.key
    }

    /// The projection it keeps.
    pub fn projection(&self) -> &Projection {
        &self.inner.projection
    }

    /// `object` (one object of the informer's kind, as the server serves
    /// it) projected as the informer projects what it lists and watches.
    pub fn project(&self, object: serde_json::Value) -> ProjectedObject {
        decode::project_json(&self.inner, object)
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
    /// Each change is handed to the handlers in the order they were added.
    ///
    /// Like client-go's `AddEventHandler` on a running informer, the handler
    /// first gets an `Added` for every object already cached, so it misses
    /// nothing whenever it is added. (Registered before that replay, it may
    /// see a concurrent change twice; never zero times.) A cache holding
    /// identities keeps projections again and relists: each identity
    /// reaches the handler as an update once applied again.
    pub fn add_handler(&self, handler: Handler) -> u64 {
        let id = {
            let mut next = lock(&self.inner.next_handler);
            *next += 1;
            *next
        };
        write(&self.inner.handlers).push((id, handler.clone()));
        if self.inner.store.identities() > 0 {
            self.retain_projections();
        }
        for object in self.inner.store.projected() {
            handler(&Change::added(object));
        }
        self.inner.handler_added.notify_one();
        id
    }

    /// What the cache keeps of objects applied from now on.
    pub fn retention(&self) -> Retention {
        self.inner.store.retention()
    }

    /// Keeps projections from now on; when the cache held identities, it
    /// relists, so that each comes back as an update with its projection
    /// ([`Store::holds_projections`] says when all have). True when it
    /// held identities.
    pub fn retain_projections(&self) -> bool {
        let restored = self.inner.store.restore_projections();
        // Identities are made no more: when none is held now (nothing was
        // listed yet), there is nothing to apply again.
        if restored && self.inner.store.identities() > 0 {
            tracing::info!(resource = %self.inner.key, "projections needed again: relisting");
            self.inner.restore.notify_one();
        }
        restored
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
