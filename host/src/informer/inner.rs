//! What an informer's handles and its reflector loop share: the key, the
//! projection and store, the handlers, the sync state and watch health.
//! Only a holder of state; it never runs anything.

use std::sync::{Arc, Mutex, RwLock};

use tokio::sync::watch as tokio_watch;

use super::health::{WatchHealth, WatchHealthConfig};
use super::key::InformerKey;
use super::state::SyncState;
use super::streaming::StreamingLists;
use crate::projection::{Interner, Projection};
use crate::store::{Handler, Store};

/// What an informer's handles and its loop share.
pub(crate) struct Inner {
    pub(super) key: InformerKey,
    pub(super) projection: Projection,
    pub(super) store: Store,
    pub(super) interner: Arc<Mutex<Interner>>,
    pub(super) handlers: RwLock<Vec<(u64, Handler)>>,
    pub(super) next_handler: Mutex<u64>,
    pub(super) state: tokio_watch::Sender<SyncState>,
    pub(super) lists: std::sync::atomic::AtomicU64,
    pub(super) health: WatchHealth,
    pub(super) health_config: WatchHealthConfig,
    pub(super) metrics: Option<Arc<crate::metrics::Metrics>>,
    /// What this informer's server is known to do with streaming lists.
    pub(super) streaming: StreamingLists,
    /// Told when the store was asked to hold projections again: the loop
    /// relists, so every identity is applied again as a projection.
    pub(super) restore: tokio::sync::Notify,
    /// Told when a handler is added: an informer keeping identities waits
    /// for its first handler before listing, so that handler sees every
    /// object as a change, not as an identity it cannot replay.
    pub(super) handler_added: tokio::sync::Notify,
    /// Whether it lists: a dormant informer (acquired for a guest standing
    /// by cold) never does.
    pub(super) wanted: bool,
}
