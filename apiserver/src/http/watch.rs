//! Watch streams: turns a store [`Subscription`] into newline-delimited
//! `WatchEvent` JSON, applying namespace and selector filters with the real
//! transition semantics (an object that stops matching is sent as DELETED,
//! one that starts matching as ADDED), bookmarks, timeouts and fault-injected
//! drops. It never reads or writes objects outside its subscription.
//!
//! A watch never outlives its `timeoutSeconds` (initial events included),
//! and a client that stops reading is cut off, as the real watch cache
//! closes an unresponsive watcher: when it leaves queued events unread for
//! the send deadline, or lets more than [`WATCH_BUFFER_BYTES`] pile up.
//! A watch reads the store's broadcast as changes come, whatever its
//! client does, so a slow client never holds the store's history; a
//! cut-off watch frees its queue and its place in the broadcast at once.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use serde_json::{json, Value};
use tokio::sync::{broadcast, watch as tokio_watch};
use tokio::time::Instant;

use super::convert;
use super::outbox::{outbox, Outbox, Refused};
use super::table;
use crate::selector::Selector;
use crate::status::ApiError;
use crate::storage::registry::ResourceInfo;
use crate::storage::store::{EventType, Record, Store, Subscription};

/// Bytes of events one watch may have queued for its client; more means
/// the client does not keep up and the watch is cut off (a single larger
/// event is still sent).
pub const WATCH_BUFFER_BYTES: usize = 16 * 1024 * 1024;

/// How a watch stream treats a slow client.
#[derive(Debug, Clone, Copy)]
pub struct WatchLimits {
    /// How long queued events may stay unread before the watch is cut off.
    pub send_deadline: Duration,
    /// Bytes of queued events beyond which the watch is cut off.
    pub buffer_bytes: usize,
}

/// What one watch request asked for.
#[derive(Debug, Clone)]
pub struct WatchSpec {
    /// Resource being watched.
    pub info: ResourceInfo,
    /// Namespace filter (None = all namespaces).
    pub namespace: Option<String>,
    /// Label and field selector.
    pub selector: Selector,
    /// Only changes after this resourceVersion (None: start with current state).
    pub from: Option<u64>,
    /// Send BOOKMARK events.
    pub bookmarks: bool,
    /// End the initial state with an `initial-events-end` bookmark.
    pub initial_events_end: bool,
    /// Close the stream after this long.
    pub timeout: Duration,
    /// Interval of periodic bookmarks.
    pub bookmark_interval: Duration,
    /// Render each object as a one-row Table (kubectl `get -w`).
    pub table: bool,
}

fn event_line(kind: &str, object: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(object.len() + 32);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(object);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

/// A whole watch body of one `ERROR` event carrying `err`'s Status with
/// its fields in the real server's order.
pub fn error_event_stream(err: &ApiError) -> Body {
    Body::from(event_line("ERROR", err.to_body().trim_end().as_bytes()))
}

/// A watch line carrying an `ERROR` event with `status`.
pub fn error_line(status: &Value) -> Bytes {
    event_line("ERROR", status.to_string().as_bytes())
}

fn bookmark(info: &ResourceInfo, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let obj = json!({"kind": info.kind, "apiVersion": info.api_version(), "metadata": meta});
    event_line("BOOKMARK", obj.to_string().as_bytes())
}

struct Filter {
    spec: WatchSpec,
    storage_key: String,
}

impl Filter {
    fn new(spec: WatchSpec) -> Self {
        Filter {
            storage_key: spec.info.storage_key(),
            spec,
        }
    }

    fn in_scope(&self, namespace: &str) -> bool {
        self.spec
            .namespace
            .as_deref()
            .is_none_or(|ns| ns == namespace)
    }

    /// The event type a client sees for `rec`, if any.
    fn translate(&self, rec: &Record) -> Option<EventType> {
        if *rec.resource != *self.storage_key || !self.in_scope(&rec.namespace) {
            return None;
        }
        let now = self.spec.selector.matches(&rec.attrs);
        let before = rec
            .prev_attrs
            .as_ref()
            .is_some_and(|a| self.spec.selector.matches(a));
        match (rec.event, before, now) {
            (EventType::Added, _, true) => Some(EventType::Added),
            (EventType::Modified, true, true) => Some(EventType::Modified),
            (EventType::Modified, false, true) => Some(EventType::Added),
            (EventType::Modified, true, false) => Some(EventType::Deleted),
            (EventType::Deleted, true, _) => Some(EventType::Deleted),
            _ => None,
        }
    }

    fn render(&self, event: EventType, json: &[u8], first: &mut bool) -> Bytes {
        if self.spec.table {
            let obj: Value = serde_json::from_slice(json).unwrap_or(Value::Null);
            let obj = convert::from_storage(&self.spec.info, obj);
            let table = table::table(&self.spec.info, &[obj], *first, None);
            *first = false;
            event_line(event.as_str(), table.to_string().as_bytes())
        } else if convert::needs_conversion(&self.spec.info) {
            event_line(
                event.as_str(),
                &convert::bytes_from_storage(&self.spec.info, json),
            )
        } else {
            event_line(event.as_str(), json)
        }
    }
}

/// Streams `sub` as a watch response body; the stream ends on timeout, on
/// `drops` changing (fault injection), when the client goes away, when
/// the watcher falls too far behind the broadcast, or (cut off, the
/// connection closed) when the client stops reading (see [`WatchLimits`]).
pub fn stream(
    spec: WatchSpec,
    sub: Subscription,
    drops: tokio_watch::Receiver<u64>,
    limits: WatchLimits,
) -> Body {
    let deadline = after(spec.timeout);
    let (out, body) = outbox(limits.buffer_bytes);
    let filter = Filter::new(spec);
    tokio::spawn(produce(filter, sub, drops, out, limits, deadline));
    body
}

/// Like [`stream`] for a watch with `sendInitialEvents` at a
/// resourceVersion the store has not reached: waits up to `wait` for the
/// store to reach `min_rv`, then streams the objects as they are then;
/// otherwise sends the watch cache's ERROR event ("Too large resource
/// version", 504; `waitUntilFreshAndBlock` in
/// `apiserver/pkg/storage/cacher/watch_cache.go`) and ends.
pub fn stream_when_fresh(
    spec: WatchSpec,
    store: Arc<Store>,
    min_rv: u64,
    wait: Duration,
    drops: tokio_watch::Receiver<u64>,
    limits: WatchLimits,
) -> Body {
    let deadline = after(spec.timeout);
    let (out, body) = outbox(limits.buffer_bytes);
    tokio::spawn(async move {
        let mut changes = store.changes();
        let fresh = tokio::time::timeout(wait, async {
            while store.current_rv() < min_rv {
                if let Err(broadcast::error::RecvError::Closed) = changes.recv().await {
                    return;
                }
            }
        })
        .await
        .is_ok()
            && store.current_rv() >= min_rv;
        drop(changes);
        if !fresh {
            let status = ApiError::TooLargeResourceVersion {
                requested: min_rv,
                current: store.current_rv(),
            }
            .to_status();
            let _ = out.push(error_line(&status));
            return;
        }
        let filter = Filter::new(spec);
        match store.subscribe(&filter.storage_key, None) {
            Ok(sub) => produce(filter, sub, drops, out, limits, deadline).await,
            Err(e) => {
                let _ = out.push(error_line(&ApiError::Internal(e.to_string()).to_status()));
            }
        }
    });
    body
}

/// A stand-in for "never" (about 30 years, as tokio's own far future).
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// `d` from now, saturating at [`FAR_FUTURE`]: `timeoutSeconds` comes from
/// the client and may be any `u64`.
pub(crate) fn after(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d.min(FAR_FUTURE)).unwrap_or(now)
}

/// Why a watch stopped sending.
enum Stop {
    /// Timeout, drop, client gone, lagging: the body just ends.
    End,
    /// The client does not keep up: drop its queue, close the connection.
    Cut,
}

impl From<Refused> for Stop {
    fn from(r: Refused) -> Self {
        match r {
            Refused::Gone => Stop::End,
            Refused::Unresponsive => Stop::Cut,
        }
    }
}

async fn produce(
    filter: Filter,
    sub: Subscription,
    mut drops: tokio_watch::Receiver<u64>,
    out: Outbox,
    limits: WatchLimits,
    deadline: Instant,
) {
    if let Stop::Cut = produce_until_stop(&filter, sub, &mut drops, &out, limits, deadline).await {
        tracing::debug!(
            resource = %filter.storage_key,
            "watch closed: client does not keep up"
        );
        out.cut();
    }
}

async fn produce_until_stop(
    filter: &Filter,
    sub: Subscription,
    drops: &mut tokio_watch::Receiver<u64>,
    out: &Outbox,
    limits: WatchLimits,
    deadline: Instant,
) -> Stop {
    let Subscription {
        initial,
        replay,
        mut live,
        rv,
    } = sub;
    let from = filter.spec.from.unwrap_or(rv);
    let mut last_rv = from.max(rv);
    let mut first = true;
    let expired = tokio::time::sleep_until(deadline);
    tokio::pin!(expired);
    // The backlog (current objects, retained changes) goes at the client's
    // pace, within the watch's timeout; changes committed meanwhile are
    // taken off the broadcast as they come and held here, up to the
    // buffer budget, so a slow client never pins the broadcast.
    let mut held = Held::default();
    let mut backlog = Backlog {
        out,
        limits,
        expired: &mut expired,
        live: &mut live,
        held: &mut held,
    };
    for (key, stored) in initial {
        if filter.in_scope(&key.0) && filter.spec.selector.matches(&stored.attrs) {
            let line = filter.render(EventType::Added, &stored.json, &mut first);
            if let Err(stop) = backlog.send(line).await {
                return stop;
            }
        }
    }
    if filter.spec.initial_events_end {
        if let Err(stop) = backlog.send(bookmark(&filter.spec.info, rv, true)).await {
            return stop;
        }
    }
    for rec in replay {
        if let Some(ev) = filter.translate(&rec) {
            let line = filter.render(ev, &rec.json, &mut first);
            if let Err(stop) = backlog.send(line).await {
                return stop;
            }
        }
    }
    let mut ticker = tokio::time::interval(filter.spec.bookmark_interval);
    ticker.tick().await;
    let check_every = limits
        .send_deadline
        .clamp(Duration::from_millis(1), FAR_FUTURE);
    let mut stall_check = tokio::time::interval(check_every);
    stall_check.tick().await;
    // Changes that came while the backlog was sent go first.
    for rec in std::mem::take(&mut held.records) {
        if drops.has_changed().unwrap_or(true) || Instant::now() >= deadline {
            return Stop::End;
        }
        if let Err(stop) = deliver(filter, &rec, from, &mut last_rv, &mut first, out) {
            return stop;
        }
    }
    loop {
        // Biased: once a drop was requested (or the deadline passed), no
        // event broadcast after that may still be delivered.
        let rec = tokio::select! {
            biased;
            _ = drops.changed() => return Stop::End,
            _ = &mut expired => return Stop::End,
            _ = out.gone() => return Stop::End,
            _ = stall_check.tick() => {
                if out.stalled_for() >= limits.send_deadline {
                    return Stop::Cut;
                }
                continue;
            }
            _ = ticker.tick(), if filter.spec.bookmarks => {
                if let Err(refused) = out.push(bookmark(&filter.spec.info, last_rv, false)) {
                    return refused.into();
                }
                continue;
            }
            got = live.recv() => match got {
                Ok(rec) => rec,
                // Too far behind: end the stream; the client resumes from history.
                Err(broadcast::error::RecvError::Lagged(_)) => return Stop::End,
                Err(broadcast::error::RecvError::Closed) => return Stop::End,
            },
        };
        if let Err(stop) = deliver(filter, &rec, from, &mut last_rv, &mut first, out) {
            return stop;
        }
    }
}

/// Queues the event a live change means for this watch, if any.
fn deliver(
    filter: &Filter,
    rec: &Record,
    from: u64,
    last_rv: &mut u64,
    first: &mut bool,
    out: &Outbox,
) -> Result<(), Stop> {
    if rec.rv <= from {
        return Ok(());
    }
    *last_rv = rec.rv;
    match filter.translate(rec) {
        Some(ev) => out
            .push(filter.render(ev, &rec.json, first))
            .map_err(Stop::from),
        None => Ok(()),
    }
}

/// Changes received while the backlog was being sent.
#[derive(Default)]
struct Held {
    records: Vec<Arc<Record>>,
    bytes: usize,
}

/// Sends the backlog at the client's pace while keeping up with the broadcast.
struct Backlog<'a, 'b> {
    out: &'a Outbox,
    limits: WatchLimits,
    expired: &'a mut std::pin::Pin<&'b mut tokio::time::Sleep>,
    live: &'a mut broadcast::Receiver<Arc<Record>>,
    held: &'a mut Held,
}

impl Backlog<'_, '_> {
    /// Queues one backlog line; `Err` when the watch must stop.
    async fn send(&mut self, line: Bytes) -> Result<(), Stop> {
        loop {
            tokio::select! {
                biased;
                _ = self.expired.as_mut() => return Err(Stop::End),
                r = self.out.send(line.clone(), self.limits.send_deadline) => {
                    return r.map_err(Stop::from);
                }
                got = self.live.recv() => match got {
                    Ok(rec) => {
                        self.held.bytes += rec.json.len();
                        self.held.records.push(rec);
                        // As far behind as a lagging receiver: the client
                        // resumes from history.
                        if self.held.bytes > self.limits.buffer_bytes {
                            return Err(Stop::End);
                        }
                    }
                    Err(_) => return Err(Stop::End),
                },
            }
        }
    }
}

/// Body of a watch that can only report an error (e.g. 410 Expired) and end.
pub fn error_stream(status: &Value) -> Body {
    Body::from(error_line(status))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::selector::{extract_attrs, FieldSelector, LabelSelector};
    use crate::storage::registry::Registry;
    use std::sync::Arc;

    fn rec(event: EventType, prev: Option<Value>, now: Value) -> Record {
        Record {
            rv: 5,
            resource: Arc::from("pods"),
            namespace: "d".into(),
            name: "p".into(),
            event,
            json: Arc::from(now.to_string().into_bytes()),
            attrs: Arc::new(extract_attrs("pods", &now)),
            prev_attrs: prev.as_ref().map(|p| Arc::new(extract_attrs("pods", p))),
            prev_json: prev.map(|p| Arc::from(p.to_string().into_bytes())),
        }
    }

    fn pod(node: &str) -> Value {
        json!({"metadata": {"name": "p", "namespace": "d", "labels": {"app": "x"}}, "spec": {"nodeName": node}})
    }

    #[test]
    fn a_huge_timeout_saturates_instead_of_overflowing() {
        let far = after(Duration::from_secs(u64::MAX));
        assert!(far > Instant::now() + Duration::from_secs(86_400 * 365));
    }

    #[test]
    fn selector_transitions_become_added_and_deleted() {
        let spec = WatchSpec {
            info: Registry::new().lookup("", "v1", "pods").unwrap(),
            namespace: Some("d".into()),
            selector: Selector {
                labels: LabelSelector::parse("app=x").unwrap(),
                fields: FieldSelector::parse("spec.nodeName=n1", "pods").unwrap(),
            },
            from: None,
            bookmarks: false,
            initial_events_end: false,
            timeout: Duration::from_secs(1),
            bookmark_interval: Duration::from_secs(1),
            table: false,
        };
        let f = Filter {
            storage_key: "pods".into(),
            spec,
        };
        let t = |r: Record| f.translate(&r);
        assert_eq!(
            t(rec(EventType::Added, None, pod("n1"))),
            Some(EventType::Added)
        );
        assert_eq!(t(rec(EventType::Added, None, pod(""))), None);
        assert_eq!(
            t(rec(EventType::Modified, Some(pod("")), pod("n1"))),
            Some(EventType::Added)
        );
        assert_eq!(
            t(rec(EventType::Modified, Some(pod("n1")), pod("n2"))),
            Some(EventType::Deleted)
        );
        assert_eq!(
            t(rec(EventType::Modified, Some(pod("n1")), pod("n1"))),
            Some(EventType::Modified)
        );
        assert_eq!(
            t(rec(EventType::Modified, Some(pod("n2")), pod("n3"))),
            None
        );
        assert_eq!(
            t(rec(EventType::Deleted, Some(pod("n1")), pod("n1"))),
            Some(EventType::Deleted)
        );
    }
}
