//! What the store hands out and takes: object keys, stored versions,
//! committed changes, list pages, watch subscriptions and the store's
//! errors. Plain data; it never reads or writes the store.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::broadcast;

use crate::selector::Attrs;

/// `(namespace, name)`; namespace is "" for cluster-scoped objects.
pub type ObjKey = (String, String);

/// One stored object version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// resourceVersion of this version.
    pub rv: u64,
    /// The object serialized as JSON (metadata.resourceVersion included).
    pub json: Arc<[u8]>,
    /// Labels and selectable fields.
    pub attrs: Arc<Attrs>,
}

impl Stored {
    /// Parses the stored JSON.
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.json).unwrap_or(Value::Null)
    }
}

/// Watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed; the payload is its last state with a new resourceVersion.
    Deleted,
}

impl EventType {
    /// Wire name (`ADDED`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed change, as kept in history and broadcast to watchers.
#[derive(Debug, Clone)]
pub struct Record {
    /// resourceVersion of the change.
    pub rv: u64,
    /// Storage key of the resource (`pods`, `leases.coordination.k8s.io`).
    pub resource: Arc<str>,
    /// Namespace of the object ("" for cluster-scoped).
    pub namespace: String,
    /// Name of the object.
    pub name: String,
    /// What happened.
    pub event: EventType,
    /// Object after the change (for deletes: last state).
    pub json: Arc<[u8]>,
    /// Attributes after the change.
    pub attrs: Arc<Attrs>,
    /// Attributes before the change (None for creates), for selector transitions.
    pub prev_attrs: Option<Arc<Attrs>>,
    /// Object before the change (None for creates), so a list can be served
    /// as of any retained resourceVersion.
    pub prev_json: Option<Arc<[u8]>>,
}

impl Record {
    /// Bytes of object JSON this change holds (new and previous state).
    pub fn bytes(&self) -> usize {
        self.json.len() + self.prev_json.as_ref().map_or(0, |p| p.len())
    }
}

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// No object under that key.
    #[error("not found")]
    NotFound,
    /// Create of an existing key.
    #[error("already exists")]
    AlreadyExists,
    /// The expected resourceVersion is not the current one.
    #[error("conflict")]
    Conflict,
    /// The requested version is older than the retained history; carries the oldest usable resourceVersion.
    #[error("too old resource version")]
    TooOld(u64),
    /// The object could not be serialized.
    #[error("serialize: {0}")]
    Serialize(String),
}

/// One page of a list.
#[derive(Debug, Clone)]
pub struct ListPage {
    /// resourceVersion the page was read at.
    pub rv: u64,
    /// Matching objects in key order.
    pub items: Vec<Arc<[u8]>>,
    /// Key of the last item when more matching items may follow (for `continue`).
    pub continue_after: Option<ObjKey>,
}

/// What a new watch starts with.
#[derive(Debug)]
pub struct Subscription {
    /// Current objects (only when subscribing without a resourceVersion).
    pub initial: Vec<(ObjKey, Stored)>,
    /// Retained changes after the requested resourceVersion.
    pub replay: Vec<Arc<Record>>,
    /// Changes committed after the subscription.
    pub live: broadcast::Receiver<Arc<Record>>,
    /// resourceVersion the subscription was taken at.
    pub rv: u64,
}

/// Told of every committed change to one resource, under the store's
/// lock (so in commit order, before any reader sees the change): the
/// object's key and its JSON as now stored, `None` once deleted. It must
/// be quick and must never call the store.
pub type Observer = Arc<dyn Fn(&ObjKey, Option<&[u8]>) + Send + Sync>;
