//! The plan builder: what a reconcile returns, written as calls
//! (`plan.status(&quota, &status)`, `plan.remove_finalizer(..)`,
//! `plan.event(Event::warning(..))`) instead of contract records, with
//! documents serialised by serde_json. It only records intent; the host
//! carries the writes out in order, and every write aimed at an object the
//! guest saw is pinned to that object's uid, so nothing here can resurrect a
//! deleted object (only [`Plan::apply`] ever creates).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::owner::OwnerReference;
use crate::wit;
use crate::{EventType, ObjectRef, ReconcileError};

/// A complete object document: `apiVersion`, `kind`, `metadata` (`name`,
/// `namespace` when the target has one, then any `labels`, `annotations`
/// and `ownerReferences` set with [`Document::label`],
/// [`Document::annotation`] and [`Document::owned_by`]), then the fields of
/// `body` (a struct or map: `json!({"data": ..})`, [`Entry`]`("data",
/// &data)`), in that order: what [`Plan::apply`] expects, since an apply
/// states the whole object the guest owns. Build one with [`document`].
/// `body` must not repeat those keys.
#[derive(Serialize)]
pub struct Document<'a, B> {
    #[serde(rename = "apiVersion")]
    api_version: &'a str,
    kind: &'a str,
    metadata: Metadata<'a>,
    #[serde(flatten)]
    body: B,
}

/// `metadata`: identity, then what the guest states about the object.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Metadata<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a str>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    labels: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    annotations: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    owner_references: Vec<OwnerReference>,
}

impl<B> Document<'_, B> {
    /// With the label `key: value` (a later value for the same key wins).
    #[must_use]
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.metadata
            .labels
            .insert(key.to_string(), value.to_string());
        self
    }

    /// With the annotation `key: value` (a later value for the same key
    /// wins).
    #[must_use]
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.metadata
            .annotations
            .insert(key.to_string(), value.to_string());
        self
    }

    /// With the owner reference `owner` (see [`crate::owner_ref`] and
    /// [`crate::controller_ref`]), after any added before. An object has
    /// at most one controller: add one controller reference.
    #[must_use]
    pub fn owned_by(mut self, owner: OwnerReference) -> Self {
        self.metadata.owner_references.push(owner);
        self
    }
}

/// `target`'s identity plus `body`'s fields, as one document.
pub fn document<B: Serialize>(target: &ObjectRef, body: B) -> Document<'_, B> {
    Document {
        api_version: &target.api_version,
        kind: &target.kind,
        metadata: Metadata {
            name: &target.name,
            namespace: target.namespace.as_deref(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            owner_references: Vec::new(),
        },
        body,
    }
}

/// A one-entry map `{key: value}`: a document body such as
/// `Entry("data", &data)` without building a `serde_json::Value` (which
/// costs a guest ~20 KB of code).
#[derive(Clone, Copy, Debug)]
pub struct Entry<'k, V>(pub &'k str, pub V);

impl<V: Serialize> Serialize for Entry<'_, V> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry(self.0, &self.1)?;
        map.end()
    }
}

impl wit::Event {
    /// A Warning event about `regarding`, with action `Reconcile`.
    pub fn warning(regarding: ObjectRef, reason: &str, message: impl Into<String>) -> Self {
        Self::new(EventType::Warning, regarding, reason, message)
    }

    /// A Normal event about `regarding`, with action `Reconcile`.
    pub fn normal(regarding: ObjectRef, reason: &str, message: impl Into<String>) -> Self {
        Self::new(EventType::Normal, regarding, reason, message)
    }

    fn new(
        event_type: EventType,
        regarding: ObjectRef,
        reason: &str,
        message: impl Into<String>,
    ) -> Self {
        wit::Event {
            regarding,
            related: None,
            event_type,
            reason: reason.to_string(),
            action: "Reconcile".to_string(),
            message: message.into(),
        }
    }

    /// What the controller did or failed to do (UpperCamelCase).
    #[must_use]
    pub fn action(mut self, action: &str) -> Self {
        self.action = action.to_string();
        self
    }

    /// A second object involved.
    #[must_use]
    pub fn related(mut self, related: ObjectRef) -> Self {
        self.related = Some(related);
        self
    }
}

/// The desired state one reconcile computed. Empty by default: a plan that
/// writes nothing and records nothing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    writes: Vec<wit::Write>,
    events: Vec<wit::Event>,
    requeue_after_ms: Option<u64>,
    /// The first document that failed to serialise (a map with non-string
    /// keys, a failing `Serialize` impl): turned into a terminal error by
    /// [`Plan::finish`] rather than a half-written plan.
    error: Option<String>,
}

impl Plan {
    /// An empty plan.
    pub fn new() -> Self {
        Self::default()
    }

    fn push_doc(&mut self, doc: &impl Serialize, write: fn(String) -> wit::Write) -> &mut Self {
        match serde_json::to_string(doc) {
            Ok(json) => self.writes.push(write(json)),
            Err(e) => {
                self.error
                    .get_or_insert_with(|| format!("cannot serialise a planned document: {e}"));
            }
        }
        self
    }

    /// Create or update `doc` (a complete document, e.g. from [`document`])
    /// by server-side apply. The only write that creates: use it for objects
    /// the guest owns outright.
    pub fn apply(&mut self, doc: &impl Serialize) -> &mut Self {
        self.push_doc(doc, wit::Write::Apply)
    }

    /// Update `doc` only if the object exists as the snapshot saw it.
    pub fn update(&mut self, doc: &impl Serialize) -> &mut Self {
        self.push_doc(doc, wit::Write::Update)
    }

    /// Server-side apply `doc` (a complete document whose `status` is taken)
    /// to the status subresource of an object the snapshot saw.
    pub fn apply_status(&mut self, doc: &impl Serialize) -> &mut Self {
        self.push_doc(doc, wit::Write::ApplyStatus)
    }

    /// [`Plan::apply_status`] of `{"status": status}` on `target`.
    pub fn status(&mut self, target: &ObjectRef, status: &impl Serialize) -> &mut Self {
        self.apply_status(&document(target, Entry("status", status)))
    }

    /// Delete `target` (pinned to the uid the snapshot saw, if it saw it).
    pub fn delete(&mut self, target: ObjectRef) -> &mut Self {
        self.writes.push(wit::Write::Delete(target));
        self
    }

    /// Delete each of `objects` (each pinned to the uid the snapshot saw):
    /// the clean-up of a primary that is `Gone` or `Unselected`, whose
    /// snapshot still holds what it controlled.
    pub fn delete_all<'o>(
        &mut self,
        objects: impl IntoIterator<Item = crate::Object<'o>>,
    ) -> &mut Self {
        for object in objects {
            self.delete(object.object_ref());
        }
        self
    }

    /// Add `finalizer` to `target`.
    pub fn add_finalizer(&mut self, target: &ObjectRef, finalizer: &str) -> &mut Self {
        self.writes
            .push(wit::Write::AddFinalizer(finalizer_ref(target, finalizer)));
        self
    }

    /// Remove `finalizer` from `target`; for a watch's declared finalizer
    /// this tells the host clean-up is done.
    pub fn remove_finalizer(&mut self, target: &ObjectRef, finalizer: &str) -> &mut Self {
        self.writes.push(wit::Write::RemoveFinalizer(finalizer_ref(
            target, finalizer,
        )));
        self
    }

    /// Record `event` (see [`wit::Event::warning`], [`wit::Event::normal`]).
    pub fn event(&mut self, event: wit::Event) -> &mut Self {
        self.events.push(event);
        self
    }

    /// Reconcile this key again after `ms` milliseconds.
    pub fn requeue_after_ms(&mut self, ms: u64) -> &mut Self {
        self.requeue_after_ms = Some(ms);
        self
    }

    /// The writes so far, in order.
    pub fn writes(&self) -> &[wit::Write] {
        &self.writes
    }

    /// The events so far.
    pub fn events(&self) -> &[wit::Event] {
        &self.events
    }

    /// The contract's plan, or a terminal error if a document could not be
    /// serialised.
    pub fn finish(self) -> Result<wit::Plan, ReconcileError> {
        if let Some(error) = self.error {
            return Err(ReconcileError::Terminal(error));
        }
        Ok(wit::Plan {
            writes: self.writes,
            events: self.events,
            requeue_after_ms: self.requeue_after_ms,
        })
    }
}

fn finalizer_ref(target: &ObjectRef, finalizer: &str) -> wit::FinalizerRef {
    wit::FinalizerRef {
        target: target.clone(),
        finalizer: finalizer.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::GroupVersionKind;

    fn quota() -> ObjectRef {
        GroupVersionKind::new("example.com", "v1", "GpuQuota").object("team-a", "gpus")
    }

    #[test]
    fn documents_start_with_identity_then_the_body_in_order() {
        let cm = GroupVersionKind::core("ConfigMap").object("ops", "summary");
        let data: BTreeMap<&str, &str> = [("n1", "2")].into();
        let mut plan = Plan::new();
        plan.apply(&document(&cm, Entry("data", &data)));
        plan.status(&quota(), &json!({"used": 3}));
        let node = GroupVersionKind::core("Node").object("", "n1");
        plan.update(&document(&node, json!({"spec": {"unschedulable": true}})));
        let p = plan.finish().expect("serialisable");
        assert_eq!(
            p.writes,
            vec![
                wit::Write::Apply(
                    r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"summary","namespace":"ops"},"data":{"n1":"2"}}"#.into()
                ),
                wit::Write::ApplyStatus(
                    r#"{"apiVersion":"example.com/v1","kind":"GpuQuota","metadata":{"name":"gpus","namespace":"team-a"},"status":{"used":3}}"#.into()
                ),
                // Cluster-scoped targets carry no namespace.
                wit::Write::Update(
                    r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"},"spec":{"unschedulable":true}}"#.into()
                ),
            ]
        );
    }

    #[test]
    fn a_child_document_states_labels_annotations_and_owner_before_its_body() {
        let owner = OwnerReference {
            api_version: "apps.example.com/v1".into(),
            kind: "App".into(),
            name: "web".into(),
            uid: "u1".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let cm = GroupVersionKind::core("ConfigMap").object("ops", "web");
        let doc = document(&cm, Entry("data", json!({"k": "v"})))
            .label("b", "2")
            .label("a", "1")
            .annotation("note", "x")
            .owned_by(owner);
        assert_eq!(
            serde_json::to_string(&doc).expect("serialisable"),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","namespace":"ops","labels":{"a":"1","b":"2"},"annotations":{"note":"x"},"ownerReferences":[{"apiVersion":"apps.example.com/v1","kind":"App","name":"web","uid":"u1","controller":true,"blockOwnerDeletion":true}]},"data":{"k":"v"}}"#
        );
    }

    #[test]
    fn finalizers_deletes_events_and_requeue_are_recorded_in_order() {
        let mut plan = Plan::new();
        plan.add_finalizer(&quota(), "example.com/a")
            .remove_finalizer(&quota(), "example.com/b")
            .delete(quota())
            .event(
                wit::Event::warning(quota(), "OverLimit", "5 of 4 GPUs")
                    .related(GroupVersionKind::core("Pod").object("team-a", "p")),
            )
            .event(wit::Event::normal(quota(), "Released", "done").action("Finalize"))
            .requeue_after_ms(500);
        let p = plan.finish().expect("nothing to serialise");
        assert!(
            matches!(&p.writes[0], wit::Write::AddFinalizer(f) if f.finalizer == "example.com/a")
        );
        assert!(matches!(&p.writes[1], wit::Write::RemoveFinalizer(f) if f.target == quota()));
        assert_eq!(p.writes[2], wit::Write::Delete(quota()));
        assert_eq!(p.events[0].event_type, EventType::Warning);
        assert_eq!(p.events[0].action, "Reconcile");
        assert_eq!(
            p.events[0].related.as_ref().map(|r| r.name.as_str()),
            Some("p")
        );
        assert_eq!(
            (p.events[1].event_type, p.events[1].action.as_str()),
            (EventType::Normal, "Finalize")
        );
        assert_eq!(p.requeue_after_ms, Some(500));
    }

    #[test]
    fn an_unserialisable_document_is_a_terminal_error_not_a_partial_plan() {
        let bad: BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
        let mut plan = Plan::new();
        plan.apply(&json!({"ok": true})).apply(&bad);
        assert_eq!(plan.writes().len(), 1);
        match plan.finish() {
            Err(ReconcileError::Terminal(msg)) => assert!(msg.contains("serialise"), "{msg}"),
            other => panic!("expected a terminal error, got {other:?}"),
        }
    }
}
