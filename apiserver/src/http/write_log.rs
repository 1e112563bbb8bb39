//! The write log: when [`ApiServerConfig::write_log`](crate::ApiServerConfig::write_log)
//! is on, every write the server stored (a create, or an update or patch
//! that made a new version; not a delete, nor the update that removes the
//! last finalizer of an object being deleted) as one [`WriteRecord`]: which object, at which
//! resourceVersion, and who sent it (its `User-Agent` and user). Benches
//! and tests read it through [`RunningApiServer::write_log`](crate::RunningApiServer::write_log)
//! to ask who wrote what, in the store's own order. It only records; it
//! never changes what a request does, and it is off by default (it grows
//! with every write).

use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One stored write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteRecord {
    /// The resourceVersion the write was stored at: the store's order.
    pub rv: u64,
    /// The resource's plural, and `/SUB` for a subresource (`apps/status`).
    pub resource: String,
    /// The object's namespace ("" for a cluster-scoped one).
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// The request's `User-Agent` ("" without one).
    pub user_agent: String,
    /// The authenticated user's name.
    pub user: String,
    /// When the server stored it.
    pub at: Instant,
}

/// A handle on the log; clones share it.
#[derive(Debug, Clone, Default)]
pub struct WriteLog {
    records: Option<Arc<Mutex<Vec<WriteRecord>>>>,
}

impl WriteLog {
    /// A log that records when `on`, else one that drops everything.
    pub(crate) fn new(on: bool) -> Self {
        WriteLog {
            records: on.then(Arc::default),
        }
    }

    /// Whether writes are recorded.
    pub fn is_on(&self) -> bool {
        self.records.is_some()
    }

    pub(crate) fn record(&self, record: impl FnOnce() -> WriteRecord) {
        if let Some(records) = &self.records {
            let record = record();
            records
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(record);
        }
    }

    /// Every write recorded so far, in the order they were recorded
    /// (sort by `rv` for the store's order).
    pub fn records(&self) -> Vec<WriteRecord> {
        self.records.as_ref().map_or_else(Vec::new, |r| {
            r.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()
        })
    }

    /// How many writes were recorded so far.
    pub fn len(&self) -> usize {
        self.records.as_ref().map_or(0, |r| {
            r.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .len()
        })
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
