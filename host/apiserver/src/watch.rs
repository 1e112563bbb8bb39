//! Watch streams: turns a store [`Subscription`] into newline-delimited
//! `WatchEvent` JSON, applying namespace and selector filters with the real
//! transition semantics (an object that stops matching is sent as DELETED,
//! one that starts matching as ADDED), bookmarks, timeouts and fault-injected
//! drops. It never reads or writes objects outside its subscription.

use std::time::Duration;

use axum::body::{Body, Bytes};
use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc, watch as tokio_watch};

use super::registry::ResourceInfo;
use super::selector::Selector;
use super::store::{EventType, Record, Subscription};

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
            let obj = super::convert::from_storage(&self.spec.info, obj);
            let table = super::table::table(&self.spec.info, &[obj], *first, None);
            *first = false;
            event_line(event.as_str(), table.to_string().as_bytes())
        } else if super::convert::needs_conversion(&self.spec.info) {
            event_line(
                event.as_str(),
                &super::convert::bytes_from_storage(&self.spec.info, json),
            )
        } else {
            event_line(event.as_str(), json)
        }
    }
}

/// Streams `sub` as a watch response body; the stream ends on timeout, on
/// `drops` changing (fault injection), when the client goes away, or when
/// the watcher falls too far behind the broadcast.
pub fn stream(spec: WatchSpec, sub: Subscription, mut drops: tokio_watch::Receiver<u64>) -> Body {
    let (tx, mut rx) = mpsc::channel::<Bytes>(256);
    let filter = Filter {
        storage_key: spec.info.storage_key(),
        spec,
    };
    tokio::spawn(async move {
        let Subscription {
            initial,
            replay,
            mut live,
            rv,
        } = sub;
        let from = filter.spec.from.unwrap_or(rv);
        let mut last_rv = from.max(rv);
        let mut first = true;
        for (key, stored) in initial {
            if filter.in_scope(&key.0) && filter.spec.selector.matches(&stored.attrs) {
                let line = filter.render(EventType::Added, &stored.json, &mut first);
                if tx.send(line).await.is_err() {
                    return;
                }
            }
        }
        if filter.spec.initial_events_end
            && tx
                .send(bookmark(&filter.spec.info, rv, true))
                .await
                .is_err()
        {
            return;
        }
        for rec in replay {
            if let Some(ev) = filter.translate(&rec) {
                if tx
                    .send(filter.render(ev, &rec.json, &mut first))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
        let deadline = tokio::time::sleep(filter.spec.timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(filter.spec.bookmark_interval);
        ticker.tick().await;
        loop {
            // Biased: once a drop was requested (or the deadline passed), no
            // event broadcast after that may still be delivered.
            tokio::select! {
                biased;
                _ = drops.changed() => break,
                _ = &mut deadline => break,
                _ = tx.closed() => break,
                _ = ticker.tick(), if filter.spec.bookmarks => {
                    if tx.send(bookmark(&filter.spec.info, last_rv, false)).await.is_err() {
                        break;
                    }
                }
                got = live.recv() => match got {
                    Ok(rec) => {
                        if rec.rv <= from {
                            continue;
                        }
                        last_rv = rec.rv;
                        if let Some(ev) = filter.translate(&rec) {
                            if tx.send(filter.render(ev, &rec.json, &mut first)).await.is_err() {
                                break;
                            }
                        }
                    }
                    // Too far behind: end the stream; the client resumes from history.
                    Err(broadcast::error::RecvError::Lagged(_)) => break,
                    Err(broadcast::error::RecvError::Closed) => break,
                },
            }
        }
    });
    let s = futures::stream::poll_fn(move |cx| {
        rx.poll_recv(cx)
            .map(|o| o.map(Ok::<_, std::convert::Infallible>))
    });
    Body::from_stream(s)
}

/// Body of a watch that can only report an error (e.g. 410 Expired) and end.
pub fn error_stream(status: &Value) -> Body {
    Body::from(error_line(status))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use crate::selector::{extract_attrs, FieldSelector, LabelSelector};
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
