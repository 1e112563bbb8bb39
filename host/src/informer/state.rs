//! Whether an informer serves its cache ([`SyncState`]), and why not
//! ([`SyncError`]). Plain values.

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
