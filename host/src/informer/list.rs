//! How an informer fills its cache: a streaming list where the server
//! serves one, else pages then a watch, and when a streaming list that
//! never marks the end of its initial events is given up for pages. It
//! never decodes or stores objects.

use std::sync::Arc;

use futures::StreamExt;
use kube::runtime::watcher;
use kube::runtime::WatchStreamExt;
use kube::Api;

use super::decode::{with_keep, Filter, Pruned};
use super::key::InformerKey;

/// How an informer fills its cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ListStrategy {
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
/// proxies). A 1.32 server whose storage cannot stream (its etcd cannot
/// report watch progress: before 3.4.31 and 3.5.13) accepts the watch and
/// sends one ERROR event, a 500 "a watch stream was requested by the client
/// but the required storage feature RequestWatchProgress is disabled", then
/// ends it; some proxies turn that into the watch request's own 500. Any
/// other 500 is an outage, retried as usual.
pub(super) fn streaming_refused(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::WatchStartFailed(kube::Error::Api(status)) => match status.code {
            400 | 422 => true,
            500 => storage_cannot_stream(status),
            _ => false,
        },
        watcher::Error::WatchError(status) => status.code == 500 && storage_cannot_stream(status),
        _ => false,
    }
}

/// Whether a 500 is the storage layer saying it cannot serve a streaming
/// list (the watch cache's words), not an outage.
fn storage_cannot_stream(status: &kube::core::Status) -> bool {
    status.message.contains("watch stream was requested")
        || (status.message.contains("feature") && status.message.contains("disabled"))
}

/// The informer's event stream: kube-runtime's watcher (with its backoff)
/// listing the `strategy` way, each poll decoding with `keep`.
pub(super) fn events(
    api: &Api<Pruned>,
    key: &InformerKey,
    strategy: ListStrategy,
    keep: &Arc<Filter>,
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
pub(super) const UNFINISHED_STREAMING_LISTS: u32 = 2;

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
pub(super) struct InitialEvents {
    pub(super) wait: std::time::Duration,
    /// Between a streaming list's start and its mark.
    open: bool,
    /// When it last sent something (None: not open, or paused).
    last: Option<tokio::time::Instant>,
    /// Streaming lists in a row that ended without the mark.
    unfinished: u32,
}

impl InitialEvents {
    pub(super) fn new(wait: std::time::Duration) -> Self {
        InitialEvents {
            wait,
            open: false,
            last: None,
            unfinished: 0,
        }
    }

    /// A streaming list starts at `now`; false when too many in a row
    /// ended without the mark.
    pub(super) fn started(&mut self, now: tokio::time::Instant) -> bool {
        if self.open {
            self.unfinished += 1;
        }
        self.open = true;
        self.last = Some(now);
        self.unfinished < UNFINISHED_STREAMING_LISTS
    }

    /// An object of the initial events came at `now`.
    pub(super) fn object(&mut self, now: tokio::time::Instant) {
        if self.open {
            self.last = Some(now);
        }
    }

    /// The watcher met an error: its retries are timed by the deadline.
    pub(super) fn failed(&mut self) {
        self.last = None;
    }

    /// The end of the initial events was marked.
    pub(super) fn done(&mut self) {
        *self = InitialEvents::new(self.wait);
    }

    /// When an open list that sends nothing more is given up.
    pub(super) fn give_up_at(&self) -> Option<tokio::time::Instant> {
        self.last.map(|at| at + self.wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_watch_cache_refusing_a_stream_in_its_one_error_event_is_a_refused_streaming_list() {
        let event = |code: u16, message: &str| {
            watcher::Error::WatchError(Box::new(
                kube::core::Status::failure(message, "InternalError").with_code(code),
            ))
        };
        assert!(streaming_refused(&event(
            500,
            "a watch stream was requested by the client but the required storage feature RequestWatchProgress is disabled"
        )));
        assert!(!streaming_refused(&event(
            500,
            "etcdserver: request timed out"
        )));
        assert!(
            !streaming_refused(&event(410, "too old resource version: 1 (5)")),
            "an expired watch is relisted, not a refusal"
        );
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
