//! Fixtures shared by the kube-client test modules: a started server with
//! an admin client, object builders, one-line writes and reads, and waits
//! that fail the test after [`WAIT`] instead of sleeping for a guessed time.
//!
//! This module owns no test and asserts nothing about the server itself;
//! a helper here panics only when a step a test relies on fails (a write,
//! a read, an event that never comes).

use std::fmt::Debug;
use std::time::{Duration, Instant};

use futures::stream::BoxStream;
use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::{Client, Error, Resource};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::json;
use wasmctrl_apiserver::{ApiServer, ApiServerConfig, RunningApiServer};

/// How long any wait for the server (an event, a state, a reply) may take
/// before the test fails.
pub const WAIT: Duration = Duration::from_secs(10);

/// How often [`eventually`] looks again.
const POLL: Duration = Duration::from_millis(20);

/// A server with the default configuration and an admin client.
pub async fn start() -> (RunningApiServer, Client) {
    start_with(ApiServerConfig::default()).await
}

/// A server with `config` and an admin client.
pub async fn start_with(config: ApiServerConfig) -> (RunningApiServer, Client) {
    let server = ApiServer::start(config).await.unwrap();
    let client = server.client().await.unwrap();
    (server, client)
}

/// An admin client that gives up at the first failure (kube retries 429,
/// 503 and 504 by default).
pub async fn client_without_retries(server: &RunningApiServer) -> Client {
    let mut config = server
        .kube_config_for_token(server.admin_token())
        .await
        .unwrap();
    config.default_retry = false;
    Client::try_from(config).unwrap()
}

/// The `Status` of an API error; any other error fails the test.
pub fn status(err: Error) -> kube::core::Status {
    match err {
        Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// A ConfigMap named `name` with `data`.
pub fn cm(name: &str, data: serde_json::Value) -> ConfigMap {
    serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}),
    )
    .unwrap()
}

/// An unscheduled pod named `name` with `labels` and one container whose
/// limits (a GPU included) make it Guaranteed.
pub fn pod(name: &str, labels: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36",
            "resources": {"limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}}}]}
    }))
    .unwrap()
}

/// Creates `obj` through `api` and returns what the server stored.
pub async fn create<K>(api: &Api<K>, obj: &K) -> K
where
    K: Clone + Debug + DeserializeOwned + Serialize,
{
    api.create(&PostParams::default(), obj).await.unwrap()
}

/// The `Status` of a create of `obj` that must fail.
pub async fn create_error<K>(api: &Api<K>, obj: &K) -> kube::core::Status
where
    K: Clone + Debug + DeserializeOwned + Serialize,
{
    status(api.create(&PostParams::default(), obj).await.unwrap_err())
}

/// Merge-patches the object `name` with `patch` and returns the result.
pub async fn merge_patch<K>(api: &Api<K>, name: &str, patch: serde_json::Value) -> K
where
    K: Clone + Debug + DeserializeOwned,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap()
}

/// The names of the objects `lp` lists, in the order the server lists them.
pub async fn list_names<K>(api: &Api<K>, lp: &ListParams) -> Vec<String>
where
    K: Clone + Debug + DeserializeOwned + Resource,
{
    api.list(lp)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|o| o.meta().name.clone().unwrap())
        .collect()
}

/// The resourceVersion of a fresh list: where a watch that must see every
/// later change starts.
pub async fn list_rv<K>(api: &Api<K>) -> String
where
    K: Clone + Debug + DeserializeOwned,
{
    api.list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
}

/// A watch of `api` with `wp` from resourceVersion `rv`.
pub async fn watch<K>(
    api: &Api<K>,
    wp: &WatchParams,
    rv: &str,
) -> BoxStream<'static, kube::Result<WatchEvent<K>>>
where
    K: Clone + Debug + DeserializeOwned + Send + 'static,
{
    api.watch(wp, rv).await.unwrap().boxed()
}

/// The next item of a watch (or watcher) stream; fails the test if none
/// comes within [`WAIT`], the stream reports an error or ends.
pub async fn next<T, E: Debug>(stream: &mut (impl Stream<Item = Result<T, E>> + Unpin)) -> T {
    next_or_end(stream)
        .await
        .expect("the stream ended before its next item")
}

/// The next item of a stream, or `None` when it ends; fails the test if
/// neither happens within [`WAIT`] or the stream reports an error.
pub async fn next_or_end<T, E: Debug>(
    stream: &mut (impl Stream<Item = Result<T, E>> + Unpin),
) -> Option<T> {
    tokio::time::timeout(WAIT, stream.try_next())
        .await
        .expect("nothing from the stream in time")
        .unwrap()
}

/// The types (`ADDED`, `MODIFIED`, `DELETED`) of the next `n` events of a
/// watch, bookmarks skipped; an `ERROR` event fails the test.
pub async fn next_event_types<K>(
    stream: &mut (impl Stream<Item = kube::Result<WatchEvent<K>>> + Unpin),
    n: usize,
) -> Vec<&'static str> {
    let mut types = Vec::with_capacity(n);
    while types.len() < n {
        types.push(match next(stream).await {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(e) => panic!("{e:?}"),
        });
    }
    types
}

/// Waits until `holds` answers true, looking again every few milliseconds;
/// fails the test with `what` if that takes longer than [`WAIT`].
pub async fn eventually(what: &str, mut holds: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !holds().await {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(POLL).await;
    }
}

/// Creates the namespaced CustomResourceDefinition `widgets.example.com`
/// (kind `Widget`, version `v1`) with `schema` as its `openAPIV3Schema` and
/// `extra` merged into its one version (`subresources`,
/// `additionalPrinterColumns`), and returns an API for its objects in
/// `default`.
pub async fn widgets(
    client: &Client,
    schema: serde_json::Value,
    extra: serde_json::Value,
) -> Api<kube::core::DynamicObject> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::core::{ApiResource, GroupVersionKind};
    let mut version = json!({"name": "v1", "served": true, "storage": true,
        "schema": {"openAPIV3Schema": schema}});
    if let (Some(v), Some(extra)) = (version.as_object_mut(), extra.as_object()) {
        v.extend(extra.clone());
    }
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [version]}
    }))
    .unwrap();
    create(&Api::<CustomResourceDefinition>::all(client.clone()), &crd).await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    Api::namespaced_with(client.clone(), "default", &ar)
}

/// A `Widget` named `name` with `fields` (`spec`, `status`, ...) beside its metadata.
pub fn widget(name: &str, fields: serde_json::Value) -> kube::core::DynamicObject {
    let mut obj =
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}});
    if let (Some(o), Some(f)) = (obj.as_object_mut(), fields.as_object()) {
        o.extend(f.clone());
    }
    serde_json::from_value(obj).unwrap()
}

/// Binds the pod `name` to `node` through `pods/binding`, as a scheduler
/// does (a pod's `spec.nodeName` cannot be changed by an update).
pub async fn bind(pods: &Api<Pod>, name: &str, node: &str) {
    let binding = json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": name}, "target": {"kind": "Node", "name": node}});
    pods.create_subresource::<_, serde_json::Value>(
        "binding",
        name,
        &PostParams::default(),
        &binding,
    )
    .await
    .unwrap();
}
