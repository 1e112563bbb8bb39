//! Decoding at ingest: only identity and the projected fields of each
//! object are built (the rest of the response text is skipped by the
//! parser), and whole objects stay text. It never touches the store.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ApiResource;
use kube::core::{DynamicResourceScope, Resource};
use serde_json::Value as Json;

use super::inner::Inner;
use crate::projection::{FieldPath, Keep, ProjectedObject};
use crate::sync::lock;

/// What an informer keeps of each object it decodes: `keep`, and, when
/// that is the whole object (the outputs cache), the `head` decoded from
/// the kept text — identity and the informer's other fields, for
/// projecting without building the whole object.
#[derive(Debug)]
pub(super) struct Filter {
    keep: Keep,
    head: Keep,
}

impl Filter {
    /// The filter of an informer projecting `paths`.
    pub(super) fn for_paths(paths: &[FieldPath]) -> Self {
        let parts = paths.iter().filter(|p| !p.segments().is_empty());
        Filter {
            keep: Keep::for_paths(paths),
            head: Keep::for_paths(parts),
        }
    }
}

thread_local! {
    /// What the informer polling on this thread keeps of each object it
    /// decodes (see [`Pruned`]).
    static KEEP: RefCell<Option<Arc<Filter>>> = const { RefCell::new(None) };
}

/// Runs `f` (one poll of the watch stream) with `keep` as this thread's
/// decode filter, restoring the previous one afterwards.
pub(super) fn with_keep<T>(keep: &Arc<Filter>, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Arc<Filter>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            KEEP.with(|k| *k.borrow_mut() = previous);
        }
    }
    let _restore = Restore(KEEP.with(|k| k.borrow_mut().replace(keep.clone())));
    f()
}

/// An object as the informer decodes it: only identity and the projected
/// fields survive decoding; everything else in the response text
/// (managedFields, annotations, most of spec and status) is skipped by the
/// parser instead of being built and then thrown away.
///
/// kube's client decodes list pages and watch lines synchronously inside
/// the stream's poll, so the filter travels in a thread-local set around
/// each poll ([`with_keep`]); decoded anywhere else, the whole object is kept.
#[derive(Debug, Clone)]
pub(super) struct Pruned {
    pub(super) metadata: ObjectMeta,
    body: Body,
}

/// What decoding kept of an object.
#[derive(Debug, Clone)]
enum Body {
    /// The kept fields, decoded.
    Json(Json),
    /// A whole object (the filter keeps everything), as the server's text:
    /// an informer of whole objects (the outputs cache) never builds the
    /// object only to encode it again. `identity` holds the filter's head
    /// (the fields [`Keep::for_paths`] keeps of any object, and the
    /// informer's other fields), decoded from the text.
    Raw {
        text: Box<serde_json::value::RawValue>,
        identity: Json,
    },
}

impl Body {
    /// The decoded part: the object, or its identity fields.
    fn head(&self) -> &Json {
        match self {
            Body::Json(json) => json,
            Body::Raw { identity, .. } => identity,
        }
    }
}

impl<'de> serde::Deserialize<'de> for Pruned {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{DeserializeSeed, Error};
        let body = match KEEP.with(|k| k.borrow().clone()) {
            // Only serde_json's own deserializer hands out raw text; kube
            // decodes list pages and watch lines with it, and both the
            // list's `items` and the watch event's `object` (after its
            // `type`, as Kubernetes encodes events) reach us unbuffered.
            Some(filter) if filter.keep.is_everything() => {
                let text = Box::<serde_json::value::RawValue>::deserialize(d)?;
                let identity = (&filter.head)
                    .deserialize(&mut serde_json::Deserializer::from_str(text.get()))
                    .map_err(D::Error::custom)?;
                Body::Raw { text, identity }
            }
            Some(filter) => Body::Json((&filter.keep).deserialize(d)?),
            None => Body::Json(Json::deserialize(d)?),
        };
        let meta = body.head().get("metadata");
        let text = |f: &str| {
            meta.and_then(|m| m.get(f))
                .and_then(Json::as_str)
                .map(str::to_owned)
        };
        let metadata = ObjectMeta {
            name: text("name"),
            namespace: text("namespace"),
            uid: text("uid"),
            resource_version: text("resourceVersion"),
            ..ObjectMeta::default()
        };
        Ok(Pruned { metadata, body })
    }
}

impl Resource for Pruned {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

pub(super) fn project(inner: &Inner, obj: Pruned) -> ProjectedObject {
    match obj.body {
        // The whole object stays text; the other fields come from the head
        // decoded with it.
        Body::Raw { text, identity } => {
            let text = with_type(text.get(), &identity, &inner.key.kind, || {
                api_version(inner)
            });
            let head = typed(inner, identity);
            let mut interner = lock(&inner.interner);
            inner
                .projection
                .project_text(&head, text.into(), &mut interner)
        }
        Body::Json(json) => project_json(inner, json),
    }
}

/// `body`, one object of the informer's kind as JSON (a list item, say),
/// projected as the informer projects what it lists and watches.
pub(super) fn project_json(inner: &Inner, body: Json) -> ProjectedObject {
    let body = typed(inner, body);
    let mut interner = lock(&inner.interner);
    inner.projection.project(&body, &mut interner)
}

/// The informer's kind's apiVersion.
fn api_version(inner: &Inner) -> String {
    let key = &inner.key;
    if key.group.is_empty() {
        key.version.clone()
    } else {
        format!("{}/{}", key.group, key.version)
    }
}

/// `body` with the informer's apiVersion and kind when it lacks them. List
/// items come without them (the list names them once); watch events carry
/// them. Filled in so a guest projecting them sees the same either way.
fn typed(inner: &Inner, mut body: Json) -> Json {
    if let Json::Object(map) = &mut body {
        map.entry("apiVersion")
            .or_insert_with(|| Json::String(api_version(inner)));
        map.entry("kind")
            .or_insert_with(|| Json::String(inner.key.kind.clone()));
    }
    body
}

fn with_type(
    text: &str,
    identity: &Json,
    kind: &str,
    api_version: impl FnOnce() -> String,
) -> String {
    let has = |f: &str| identity.get(f).is_some();
    let Some(rest) = text.trim_start().strip_prefix('{') else {
        return text.to_string();
    };
    let mut out = String::with_capacity(text.len() + 64);
    out.push('{');
    let mut added = false;
    if !has("kind") {
        out.push_str(&format!("\"kind\":{}", Json::from(kind)));
        added = true;
    }
    if !has("apiVersion") {
        if added {
            out.push(',');
        }
        out.push_str(&format!("\"apiVersion\":{}", Json::from(api_version())));
        added = true;
    }
    if added && !rest.trim_start().starts_with('}') {
        out.push(',');
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projection::{whole_object, Interner, Projection};
    use serde_json::json;

    fn pod() -> Json {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "a", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                "annotations": {"big": "x".repeat(1000)},
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
            },
            "spec": {
                "nodeName": "n1",
                "containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]
            },
            "status": {"phase": "Running", "conditions": [{"type": "Ready"}]}
        })
    }

    fn paths(p: &[&str]) -> Vec<FieldPath> {
        p.iter().map(|p| FieldPath::parse(p).unwrap()).collect()
    }

    #[test]
    fn decoding_under_a_keep_skips_everything_not_projected() {
        let text = pod().to_string();
        let keep = Arc::new(Filter::for_paths(&paths(&[
            "spec.nodeName",
            "spec.containers[*].resources.limits['nvidia.com/gpu']",
        ])));
        let pruned: Pruned = with_keep(&keep, || serde_json::from_str(&text)).unwrap();
        assert_eq!(
            *pruned.body.head(),
            json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "a", "namespace": "ns", "uid": "u1", "resourceVersion": "7"},
                "spec": {
                    "nodeName": "n1",
                    "containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}]
                }
            })
        );
        assert_eq!(pruned.metadata.name.as_deref(), Some("a"));
        assert_eq!(pruned.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(pruned.metadata.resource_version.as_deref(), Some("7"));
        // The filter is scoped to the poll: outside it, objects decode whole.
        let whole: Pruned = serde_json::from_str(&text).unwrap();
        assert_eq!(*whole.body.head(), pod());
    }

    /// The raw text of a whole object kept by `pruned`, and its identity.
    fn raw(pruned: &Pruned) -> (Json, &Json) {
        match &pruned.body {
            Body::Raw { text, identity } => (serde_json::from_str(text.get()).unwrap(), identity),
            Body::Json(_) => panic!("a whole object was decoded, not kept as text"),
        }
    }

    #[test]
    fn the_whole_object_path_keeps_the_text_and_decodes_only_identity() {
        let text = pod().to_string();
        let keep = Arc::new(Filter::for_paths(&[FieldPath::whole()]));
        let pruned: Pruned = with_keep(&keep, || serde_json::from_str(&text)).unwrap();
        let (whole, identity) = raw(&pruned);
        assert_eq!(whole, pod());
        assert_eq!(
            *identity,
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "a", "namespace": "ns", "uid": "u1", "resourceVersion": "7"}})
        );
        assert_eq!(pruned.metadata.resource_version.as_deref(), Some("7"));
    }

    #[test]
    fn whole_objects_stay_text_in_list_pages_and_watch_events_as_kube_decodes_them() {
        let keep = Arc::new(Filter::for_paths(&[FieldPath::whole()]));
        let mut item = pod();
        item.as_object_mut().unwrap().remove("kind");
        item.as_object_mut().unwrap().remove("apiVersion");
        let page = json!({"kind": "PodList", "apiVersion": "v1",
                          "metadata": {"resourceVersion": "9"}, "items": [item]})
        .to_string();
        let list: kube::core::ObjectList<Pruned> =
            with_keep(&keep, || serde_json::from_str(&page)).unwrap();
        assert_eq!(raw(&list.items[0]).0, item);
        let line = format!(r#"{{"type":"MODIFIED","object":{}}}"#, pod());
        let event: kube::core::WatchEvent<Pruned> =
            with_keep(&keep, || serde_json::from_str(&line)).unwrap();
        let kube::core::WatchEvent::Modified(obj) = event else {
            panic!("not a MODIFIED event")
        };
        assert_eq!(raw(&obj).0, pod());
    }

    #[test]
    fn a_whole_object_projects_from_its_text_as_from_the_parsed_object() {
        let projection = Projection::new(vec![FieldPath::whole()], vec![]);
        let mut interner = Interner::default();
        let mut obj = pod();
        obj["metadata"]["ownerReferences"] = json!([
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "r1", "controller": true}
        ]);
        obj["metadata"]["finalizers"] = json!(["a/b"]);
        obj["metadata"]["generation"] = json!(3);
        obj["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let keep = Arc::new(Filter::for_paths(&[FieldPath::whole()]));
        let text = obj.to_string();
        let pruned: Pruned = with_keep(&keep, || serde_json::from_str(&text)).unwrap();
        let Body::Raw {
            text: raw_text,
            identity,
        } = &pruned.body
        else {
            panic!("not kept as text")
        };
        let from_text = projection.project_text(identity, raw_text.get().into(), &mut interner);
        let parsed = projection.project(&obj, &mut interner);
        assert!(from_text.same_content(&parsed));
        assert_eq!(from_text.resource_version, parsed.resource_version);
        assert_eq!(whole_object(&from_text, 0), Some(obj.clone()));
        // Whole objects and some of their fields, in any order: the
        // fields come from the head decoded with the text.
        let fields = vec![
            paths(&["spec.nodeName"])[0].clone(),
            FieldPath::whole(),
            paths(&["spec.containers[*].name"])[0].clone(),
        ];
        let mixed = Projection::new(fields.clone(), vec![]);
        let keep = Arc::new(Filter::for_paths(&fields));
        let pruned: Pruned = with_keep(&keep, || serde_json::from_str(&text)).unwrap();
        let Body::Raw {
            text: raw_text,
            identity: head,
        } = &pruned.body
        else {
            panic!("not kept as text")
        };
        assert!(
            head.get("status").is_none(),
            "the head holds only what is projected"
        );
        let from_text = mixed.project_text(head, raw_text.get().into(), &mut interner);
        let parsed = mixed.project(&obj, &mut interner);
        assert!(from_text.same_content(&parsed));
        assert_eq!(from_text.field(0), parsed.field(0));
        assert_eq!(whole_object(&from_text, 1), Some(obj));
        assert_eq!(from_text.field(2), parsed.field(2));
    }

    #[test]
    fn a_list_item_gets_its_kind_and_api_version_in_front() {
        let identity = json!({"metadata": {"name": "a"}});
        let text = r#"{"metadata":{"name":"a"},"data":{}}"#;
        let out = with_type(text, &identity, "ConfigMap", || "v1".into());
        assert_eq!(
            out,
            r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a"},"data":{}}"#
        );
        let empty = with_type("{}", &json!({}), "ConfigMap", || "v1".into());
        assert_eq!(
            serde_json::from_str::<Json>(&empty).unwrap(),
            json!({"kind": "ConfigMap", "apiVersion": "v1"})
        );
        // Present: left as it is.
        let typed = r#"{"apiVersion":"v1","kind":"ConfigMap"}"#;
        let identity: Json = serde_json::from_str(typed).unwrap();
        assert_eq!(
            with_type(typed, &identity, "ConfigMap", || "v1".into()),
            typed
        );
    }

    #[test]
    fn keeps_nest_and_restore() {
        let outer = Arc::new(Filter::for_paths(&paths(&["spec.nodeName"])));
        let inner = Arc::new(Filter::for_paths(&paths(&["status.phase"])));
        let text = pod().to_string();
        with_keep(&outer, || {
            let a: Pruned = with_keep(&inner, || serde_json::from_str(&text)).unwrap();
            assert_eq!(a.body.head()["status"]["phase"], "Running");
            assert!(a.body.head().get("spec").is_none());
            let b: Pruned = serde_json::from_str(&text).unwrap();
            assert_eq!(b.body.head()["spec"]["nodeName"], "n1");
            assert!(b.body.head().get("status").is_none());
        });
        assert!(KEEP.with(|k| k.borrow().is_none()));
    }
}
