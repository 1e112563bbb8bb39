//! The informer's loop: watcher events into the store, handlers notified,
//! the sync state kept, and the failure policy (a refusal before any watch
//! worked is fatal; later failures are retried until the deadline). It
//! never chooses how to list (see `list`) or what to decode (see `decode`).

use std::sync::Arc;

use futures::StreamExt;
use kube::runtime::watcher;
use kube::{Api, Client};

use super::decode::{project, Filter, Pruned};
use super::inner::Inner;
use super::list::{
    events, streaming_refused, InitialEvents, ListStrategy, UNFINISHED_STREAMING_LISTS,
};
use super::state::{SyncError, SyncState};
use crate::store::Change;
use crate::store::Writer;
use crate::sync::{lock, read};

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

/// Sleeps until `at`, or forever when there is none.
async fn until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

pub(super) async fn run(client: Client, inner: Arc<Inner>, mut writer: Writer) {
    let client = super::health::observed(client, inner.health.clone());
    let ar = inner.key.api_resource();
    let api: Api<Pruned> = match &inner.key.namespace {
        Some(ns) => Api::namespaced_with(client, ns, &ar),
        None => Api::all_with(client, &ar),
    };
    let resource = inner.key.to_string();
    let keep = Arc::new(Filter::of(&inner));
    // A dormant informer lists nothing.
    if !inner.wanted {
        return;
    }
    if inner.store.retention() == crate::store::Retention::Identity {
        // Its first handler must see every object: an identity cannot be
        // replayed to it.
        inner.handler_added.notified().await;
    }
    let mut strategy = match inner.streaming.known_refused() {
        true => ListStrategy::Paged,
        false => ListStrategy::Streaming,
    };
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
            () = inner.restore.notified() => {
                // Projections are needed again: a relist applies every
                // object again, each identity coming back as an update.
                stream = events(&api, &inner.key, strategy, &keep);
                continue;
            }
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
                let (ns, name) = obj.namespace_and_name();
                if let Some(tombstone) = writer.delete(ns, name) {
                    notify(&inner, &tombstone);
                }
                false
            }
            Some(Err(e)) if strategy == ListStrategy::Streaming && streaming_refused(&e) => {
                // The server does not serve streaming lists (or refuses
                // this watch's parameters, which the paged path then meets
                // at its list, retried as any failure). Said once per
                // server: every informer started from now on pages at once.
                let described = crate::failure::describe(&e);
                if inner.streaming.refused() {
                    tracing::info!(
                        resource = %resource,
                        "the API server does not serve streaming lists ({described}); every informer lists in pages"
                    );
                } else {
                    tracing::debug!(
                        resource = %resource,
                        "the API server does not serve streaming lists ({described}); listing in pages"
                    );
                }
                // A refusal sent as the watch's one event came with a 2xx
                // answer, which established no watch: before any list
                // completed, a refusal of the paged list is still fatal.
                if inner.lists.load(std::sync::atomic::Ordering::Relaxed) == 0 {
                    inner.health.not_established();
                }
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
