//! Kubernetes Events (`events.k8s.io/v1`) the host records: a guest's
//! planned events and the supervisor's guest-change events. Owns the
//! [`Recorder`] and its series bookkeeping. It never decides whether an
//! event is worth emitting or allowed (the actuator and supervisor do) and
//! never retries: errors go back to the caller.
//!
//! # Series
//! An event that repeats, within [`SERIES_TTL`] of the last time it was
//! seen, with the same type, action, reason, reporter, regarding and
//! related objects *and the same note* becomes a patch of the first Event's
//! `series` (count, last observed time), as client-go's `events` recorder
//! keys it. A different note is a new Event that carries it: kube-runtime's
//! `Recorder`, which this replaces, left the note out of its key, so a
//! second event with the same reason and a new message only bumped the old
//! Event's count and the new message was lost.
//!
//! # Paths
//! An Event's namespace and name reach the request path only as single
//! path segments ([`crate::urlpath`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;

pub use kube::runtime::events::{Event, EventType, Reporter};

use crate::sync::lock;
use crate::urlpath::{segment, UnsafeSegment};

/// Why an Event could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The API server refused it, or could not be reached.
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// Its namespace or name cannot be one URL path segment.
    #[error(transparent)]
    Path(#[from] UnsafeSegment),
}

/// How long after its last occurrence an event can still grow a series
/// (kube-runtime's and client-go's value).
pub const SERIES_TTL: SignedDuration = SignedDuration::from_mins(6);

/// What makes two events the same series (client-go's `getKey`: the note
/// included).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SeriesKey {
    warning: bool,
    action: String,
    reason: String,
    note: Option<String>,
    regarding: RefKey,
    related: Option<RefKey>,
}

/// The identifying fields of an [`ObjectReference`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct RefKey {
    api_version: Option<String>,
    kind: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
}

impl From<&ObjectReference> for RefKey {
    fn from(r: &ObjectReference) -> Self {
        RefKey {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            uid: r.uid.clone(),
        }
    }
}

/// A reference to the host's own Pod, which Events about the host's guests
/// (loaded, refused, quarantined) regard.
pub fn pod_reference(namespace: &str, name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: Some(namespace.to_string()),
        name: Some(name.to_string()),
        ..ObjectReference::default()
    }
}

/// A recorded Event: where it lives, how often it was seen, and when last.
#[derive(Debug, Clone)]
struct Recorded {
    namespace: String,
    name: String,
    count: i32,
    last: Timestamp,
}

/// Publishes Events as one reporter. Cheap to clone; clones share the
/// series cache.
#[derive(Clone)]
pub struct Recorder {
    client: Client,
    reporter: Reporter,
    series: Arc<Mutex<HashMap<SeriesKey, Recorded>>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("reporter", &self.reporter)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder reporting as `reporter`.
    pub fn new(client: Client, reporter: Reporter) -> Self {
        Recorder {
            client,
            reporter,
            series: Arc::default(),
        }
    }

    /// Records `ev` about `regarding`: a new Event, or one more occurrence
    /// of the identical event (same note too) recorded within
    /// [`SERIES_TTL`]. The Event lives in the namespace of `regarding`
    /// (`default` for a cluster-scoped object).
    pub async fn publish(
        &self,
        ev: &Event,
        regarding: &ObjectReference,
    ) -> Result<(), PublishError> {
        let now = Timestamp::now();
        let key = SeriesKey {
            warning: ev.type_ == EventType::Warning,
            action: ev.action.clone(),
            reason: ev.reason.clone(),
            note: ev.note.clone(),
            regarding: regarding.into(),
            related: ev.secondary.as_ref().map(RefKey::from),
        };
        let previous = {
            let mut series = lock(&self.series);
            series.retain(|_, r| r.last + SERIES_TTL > now);
            series.get(&key).cloned()
        };
        let recorded = match previous {
            Some(mut r) => {
                r.count += 1;
                r.last = now;
                let patch = serde_json::json!({"series": EventSeries {
                    count: r.count,
                    last_observed_time: MicroTime(now),
                }});
                Api::<K8sEvent>::namespaced(
                    self.client.clone(),
                    &segment("namespace", &r.namespace)?,
                )
                .patch(
                    &segment("name", &r.name)?,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
                r
            }
            None => {
                let event = self.new_event(ev, regarding, now);
                let namespace = event.metadata.namespace.clone().unwrap_or_default();
                let name = event.metadata.name.clone().unwrap_or_default();
                Api::<K8sEvent>::namespaced(
                    self.client.clone(),
                    &segment("namespace", &namespace)?,
                )
                .create(&PostParams::default(), &event)
                .await?;
                Recorded {
                    namespace,
                    name,
                    count: 1,
                    last: now,
                }
            }
        };
        lock(&self.series).insert(key, recorded);
        Ok(())
    }

    fn new_event(&self, ev: &Event, regarding: &ObjectReference, now: Timestamp) -> K8sEvent {
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let base = regarding
            .name
            .as_deref()
            .unwrap_or(&self.reporter.controller);
        K8sEvent {
            action: Some(ev.action.clone()),
            reason: Some(ev.reason.clone()),
            note: ev.note.clone(),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            related: ev.secondary.clone(),
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            type_: Some(
                match ev.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .into(),
            ),
            metadata: ObjectMeta {
                namespace: Some(namespace),
                name: Some(format!("{base}.{:x}", now.as_nanosecond())),
                ..ObjectMeta::default()
            },
            ..K8sEvent::default()
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use wasmctrl_apiserver::{ApiServer, ApiServerConfig};

    fn warning(reason: &str, note: &str) -> Event {
        Event {
            type_: EventType::Warning,
            reason: reason.into(),
            note: Some(note.into()),
            action: "Reconcile".into(),
            secondary: None,
        }
    }

    /// `(note, series count)` of every Event, sorted by note.
    async fn recorded(client: &Client) -> Vec<(String, Option<i32>)> {
        let events: Api<K8sEvent> = Api::namespaced(client.clone(), "default");
        let mut out: Vec<_> = events
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|e| (e.note.unwrap_or_default(), e.series.map(|s| s.count)))
            .collect();
        out.sort();
        out
    }

    #[tokio::test]
    async fn a_new_message_with_the_same_reason_is_a_new_event_not_a_series_of_the_old() {
        let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
        let client = server.client().await.unwrap();
        let recorder = Recorder::new(client.clone(), "wasmctrl".into());
        let quota = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
            namespace: Some("default".into()),
            name: Some("quota".into()),
            ..ObjectReference::default()
        };
        let over = |n: u32| warning("OverLimit", &format!("uses {n} of 2 GPUs"));
        recorder.publish(&over(3), &quota).await.unwrap();
        recorder.publish(&over(5), &quota).await.unwrap();
        assert_eq!(
            recorded(&client).await,
            vec![
                ("uses 3 of 2 GPUs".to_string(), None),
                ("uses 5 of 2 GPUs".to_string(), None),
            ]
        );
        // The identical event again is a series of its own first Event.
        recorder.publish(&over(3), &quota).await.unwrap();
        recorder.publish(&over(3), &quota).await.unwrap();
        assert_eq!(
            recorded(&client).await,
            vec![
                ("uses 3 of 2 GPUs".to_string(), Some(3)),
                ("uses 5 of 2 GPUs".to_string(), None),
            ]
        );
    }
}
