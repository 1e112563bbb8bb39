//! Decoding at ingest: each object is decoded straight into its
//! projection (identity and the projected fields; the rest of the response
//! text is skipped by the parser, and no JSON tree is built), and whole
//! objects stay text. It never touches the store.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ApiResource;
use kube::core::{DynamicResourceScope, Resource};
use serde_json::Value as Json;

use super::inner::Inner;
use crate::projection::{Decoder, Interner, Keep, ProjectedObject, Projection};
use crate::sync::lock;

/// How an informer decodes each object: straight into its projection
/// (`decoder`, interning into the informer's `interner`), or, when the
/// projection holds the whole object (the outputs cache), keeping the
/// text with the `head` decoded from it — identity and the informer's
/// other fields, for projecting without building the whole object.
#[derive(Debug)]
pub(super) struct Filter {
    whole: bool,
    head: Keep,
    decoder: Decoder,
    interner: Arc<Mutex<Interner>>,
}

impl Filter {
    /// The filter of an informer projecting `projection` of objects of
    /// `api_version` and `kind`, interning into `interner`.
    pub(super) fn new(
        projection: &Projection,
        (api_version, kind): (&str, &str),
        interner: Arc<Mutex<Interner>>,
    ) -> Self {
        let paths = projection.paths();
        let parts = paths.iter().filter(|p| !p.segments().is_empty());
        Filter {
            whole: paths.iter().any(|p| p.segments().is_empty()),
            head: Keep::for_paths(parts),
            decoder: Decoder::new(projection).with_type(api_version, kind),
            interner,
        }
    }

    /// The filter of `inner`'s informer.
    pub(super) fn of(inner: &Inner) -> Self {
        let api_version = api_version(inner);
        Filter::new(
            &inner.projection,
            (&api_version, &inner.key.kind),
            inner.interner.clone(),
        )
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

/// An object as the informer decodes it: its projection, decoded straight
/// from the response text; everything else in it (managedFields,
/// annotations, most of spec and status) is skipped by the parser instead
/// of being built and then thrown away.
///
/// kube's client decodes list pages and watch lines synchronously inside
/// the stream's poll, so the filter travels in a thread-local set around
/// each poll ([`with_keep`]); decoded anywhere else, the whole object is kept.
#[derive(Debug, Clone)]
pub(super) struct Pruned {
    /// Only the resourceVersion (what kube's watcher reads).
    pub(super) metadata: ObjectMeta,
    body: Body,
}

/// What decoding kept of an object.
#[derive(Debug, Clone)]
enum Body {
    /// Its projection.
    Projected(Box<ProjectedObject>),
    /// The whole object, decoded (no filter was set).
    Json(Json),
    /// A whole object (the projection holds it), as the server's text:
    /// an informer of whole objects (the outputs cache) never builds the
    /// object only to encode it again. `identity` holds the filter's head
    /// (the fields [`Keep::for_paths`] keeps of any object, and the
    /// informer's other fields), decoded from the text.
    Raw {
        text: Box<serde_json::value::RawValue>,
        identity: Json,
    },
}

impl Pruned {
    /// The object's namespace ("" when it has none) and name.
    pub(super) fn namespace_and_name(&self) -> (&str, &str) {
        let json = match &self.body {
            Body::Projected(object) => return (&object.namespace, &object.name),
            Body::Json(json) => json,
            Body::Raw { identity, .. } => identity,
        };
        let text = |f: &str| {
            json.get("metadata")
                .and_then(|m| m.get(f))
                .and_then(Json::as_str)
                .unwrap_or("")
        };
        (text("namespace"), text("name"))
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
            Some(filter) if filter.whole => {
                let text = Box::<serde_json::value::RawValue>::deserialize(d)?;
                let identity = (&filter.head)
                    .deserialize(&mut serde_json::Deserializer::from_str(text.get()))
                    .map_err(D::Error::custom)?;
                Body::Raw { text, identity }
            }
            Some(filter) => {
                let mut interner = lock(&filter.interner);
                Body::Projected(Box::new(filter.decoder.decode(d, &mut interner)?))
            }
            None => Body::Json(Json::deserialize(d)?),
        };
        let resource_version = match &body {
            Body::Projected(object) => {
                let rv = &object.resource_version;
                (!rv.is_empty()).then(|| rv.to_string())
            }
            Body::Json(json) | Body::Raw { identity: json, .. } => json
                .get("metadata")
                .and_then(|m| m.get("resourceVersion"))
                .and_then(Json::as_str)
                .map(str::to_owned),
        };
        let metadata = ObjectMeta {
            resource_version,
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
        Body::Projected(object) => *object,
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
    use crate::projection::{whole_object, FieldPath};
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

    /// The filter of an informer of pods projecting `paths`.
    fn filter(paths: &[FieldPath]) -> Arc<Filter> {
        let projection = Projection::new(paths.to_vec(), vec![]);
        Arc::new(Filter::new(&projection, ("v1", "Pod"), Arc::default()))
    }

    /// The projection decoded into `pruned`.
    fn projected(pruned: &Pruned) -> &ProjectedObject {
        match &pruned.body {
            Body::Projected(object) => object,
            other => panic!("not decoded into its projection: {other:?}"),
        }
    }

    #[test]
    fn decoding_under_a_filter_gives_the_projection_of_the_parsed_object() {
        let text = pod().to_string();
        let fields = paths(&[
            "spec.nodeName",
            "spec.containers[*].resources.limits['nvidia.com/gpu']",
            "kind",
        ]);
        let pruned: Pruned = with_keep(&filter(&fields), || serde_json::from_str(&text)).unwrap();
        let want = Projection::new(fields, vec![]).project(&pod(), &mut Interner::default());
        assert_eq!(*projected(&pruned), want);
        assert_eq!(pruned.namespace_and_name(), ("ns", "a"));
        assert_eq!(pruned.metadata.resource_version.as_deref(), Some("7"));
        // The filter is scoped to the poll: outside it, objects decode whole.
        let whole: Pruned = serde_json::from_str(&text).unwrap();
        let Body::Json(json) = &whole.body else {
            panic!("not decoded whole")
        };
        assert_eq!(*json, pod());
        assert_eq!(whole.namespace_and_name(), ("ns", "a"));
    }

    /// A list page of one pod, and that pod as a list item (without its
    /// kind and apiVersion).
    fn list_page() -> (Json, String) {
        let mut item = pod();
        item.as_object_mut().unwrap().remove("kind");
        item.as_object_mut().unwrap().remove("apiVersion");
        let page = json!({"kind": "PodList", "apiVersion": "v1",
                          "metadata": {"resourceVersion": "9"}, "items": [item]});
        (item, page.to_string())
    }

    #[test]
    fn a_list_item_without_its_type_reads_the_informers() {
        let (_, page) = list_page();
        let fields = paths(&["kind", "apiVersion", "spec.nodeName"]);
        let list: kube::core::ObjectList<Pruned> =
            with_keep(&filter(&fields), || serde_json::from_str(&page)).unwrap();
        let object = projected(&list.items[0]);
        assert_eq!(object.field(0)[0].as_str(), Some("Pod"));
        assert_eq!(object.field(1)[0].as_str(), Some("v1"));
        assert_eq!(object.field(2)[0].as_str(), Some("n1"));
    }

    #[test]
    fn a_malformed_watch_event_is_an_error_naming_the_problem() {
        let line = r#"{"type":"ADDED","object":{"metadata":{"name":"a","uid":7}"#;
        let fields = paths(&["spec.nodeName"]);
        let err = with_keep(&filter(&fields), || {
            serde_json::from_str::<kube::core::WatchEvent<Pruned>>(line)
        })
        .unwrap_err();
        assert!(err.to_string().contains("EOF"), "{err}");
        let line = r#"{"type":"ADDED","object":{"metadata":{"name":"a"},"spec":{"nodeName":tru}}}"#;
        let err = with_keep(&filter(&fields), || {
            serde_json::from_str::<kube::core::WatchEvent<Pruned>>(line)
        })
        .unwrap_err();
        assert!(err.to_string().contains("column"), "{err}");
    }

    /// The raw text of a whole object kept by `pruned`, and its identity.
    fn raw(pruned: &Pruned) -> (Json, &Json) {
        match &pruned.body {
            Body::Raw { text, identity } => (serde_json::from_str(text.get()).unwrap(), identity),
            _ => panic!("a whole object was decoded, not kept as text"),
        }
    }

    #[test]
    fn the_whole_object_path_keeps_the_text_and_decodes_only_identity() {
        let text = pod().to_string();
        let keep = filter(&[FieldPath::whole()]);
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
        let keep = filter(&[FieldPath::whole()]);
        let (item, page) = list_page();
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
        let keep = filter(&[FieldPath::whole()]);
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
        let keep = filter(&fields);
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
        let outer = filter(&paths(&["spec.nodeName"]));
        let inner = filter(&paths(&["status.phase"]));
        let text = pod().to_string();
        with_keep(&outer, || {
            let a: Pruned = with_keep(&inner, || serde_json::from_str(&text)).unwrap();
            assert_eq!(projected(&a).field(0)[0].as_str(), Some("Running"));
            let b: Pruned = serde_json::from_str(&text).unwrap();
            assert_eq!(projected(&b).field(0)[0].as_str(), Some("n1"));
        });
        assert!(KEEP.with(|k| k.borrow().is_none()));
    }
}
