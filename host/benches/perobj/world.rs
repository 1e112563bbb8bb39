//! The per-object world and what the bench sees of it: `guest-app`'s CRD,
//! one namespace holding N Apps (each already holding the finalizer, none
//! with a child or a status yet) and the namespace's `shared-settings`
//! ConfigMap, created by the bench; and a [`Tracker`] — two watches opened
//! before a system starts, on the Apps and on the ConfigMaps of the
//! namespace — that records when each App's child and status changed and
//! every new version a controller wrote. It only creates and edits Apps and
//! `shared-settings`; it never writes a child or a status.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, ResourceExt};
use serde_json::{json, Value};

use crate::native_app::{FINALIZER, SHARED_SETTINGS};

/// The namespace of every App, child and `shared-settings`: one, so one
/// change of `shared-settings` maps to every App.
pub const NAMESPACE: &str = "apps";
/// The banner `shared-settings` starts with.
pub const BANNER: &str = "welcome";
/// Requests in flight while creating Apps.
const CREATE_CONCURRENCY: usize = 64;

/// The App resource.
pub fn app_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("apps.example.com", "v1", "App");
    ApiResource::from_gvk_with_plural(&gvk, "apps")
}

fn apps(client: &Client) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), NAMESPACE, &app_resource())
}

/// The name of App `i` (and of its child).
pub fn app_name(i: usize) -> String {
    format!("app-{i:05}")
}

/// What one App's child should hold: `message`, `replicas`, `banner`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildData {
    /// `data.message`.
    pub message: String,
    /// `data.replicas`.
    pub replicas: String,
    /// `data.banner`.
    pub banner: Option<String>,
}

/// The bench's model: each App's spec, and the banner.
pub struct World {
    /// Each App's `spec.message`, by index.
    pub messages: Vec<String>,
    /// The current banner.
    pub banner: String,
}

impl World {
    /// Apps in the world.
    pub fn apps(&self) -> usize {
        self.messages.len()
    }

    /// Whether `data` is what App `name`'s child should hold. Compared in
    /// place: the convergence check runs it for every App every 20 ms, and
    /// building the expected data (three strings) each time took about a
    /// quarter of the bench process's samples at 50,000 Apps, beside the
    /// API server.
    pub fn holds(&self, name: &str, data: &ChildData) -> bool {
        let Some(i) = name
            .strip_prefix("app-")
            .and_then(|n| n.parse::<usize>().ok())
        else {
            return false;
        };
        self.messages.get(i) == Some(&data.message)
            && prints_as(&data.replicas, replicas_of(i))
            && data.banner.as_deref() == Some(self.banner.as_str())
    }
}

/// Whether `text` is `n` as `n.to_string()` writes it (no sign, no
/// leading zero), without building that string.
fn prints_as(text: &str, n: i64) -> bool {
    text.parse::<i64>().ok() == Some(n)
        && !text.starts_with('+')
        && (text.len() == 1 || !text.trim_start_matches('-').starts_with('0'))
}

fn replicas_of(i: usize) -> i64 {
    (i % 5) as i64 + 1
}

/// Installs `examples/guest-app/crd.yaml` and waits until Apps are served.
pub async fn install_crd(client: &Client) {
    let path =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/guest-app/crd.yaml");
    let crd: CustomResourceDefinition =
        serde_yaml::from_str(&std::fs::read_to_string(&path).expect("crd.yaml")).expect("a CRD");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("CRD created");
    let api = apps(client);
    for _ in 0..200 {
        if api.list(&ListParams::default().limit(1)).await.is_ok() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("Apps are never served");
}

/// Creates the namespace, `shared-settings` and `n` Apps, each holding the
/// finalizer (as after an earlier run) but with no child and no status.
pub async fn populate(client: &Client, n: usize) -> World {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).expect("namespace"),
        )
        .await
        .expect("namespace created");
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    configmaps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": SHARED_SETTINGS}, "data": {"banner": BANNER},
            }))
            .expect("shared-settings"),
        )
        .await
        .expect("shared-settings created");
    let api = apps(client);
    let messages: Vec<String> = (0..n).map(|i| format!("hello {i}")).collect();
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            let message = messages[i].clone();
            async move {
                let app: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "apps.example.com/v1", "kind": "App",
                    "metadata": {"name": app_name(i), "namespace": NAMESPACE, "finalizers": [FINALIZER]},
                    "spec": {"message": message, "replicas": replicas_of(i)},
                }))
                .expect("an App");
                api.create(&PostParams::default(), &app).await
            }
        })
        .buffer_unordered(CREATE_CONCURRENCY)
        .try_for_each(|_| futures::future::ready(Ok(())))
        .await
        .expect("Apps created");
    World {
        messages,
        banner: BANNER.into(),
    }
}

/// Sets App `i`'s `spec.message` (a person's edit); returns the App's new
/// generation.
pub async fn edit(client: &Client, world: &mut World, i: usize, message: String) -> i64 {
    let patch = json!({"spec": {"message": message}});
    let app = apps(client)
        .patch(&app_name(i), &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("App edited");
    world.messages[i] = message;
    app.metadata.generation.expect("an App has a generation")
}

/// Sets the banner of `shared-settings`.
pub async fn set_banner(client: &Client, world: &mut World, banner: String) {
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let patch = json!({"data": {"banner": banner}});
    configmaps
        .patch(
            SHARED_SETTINGS,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .expect("shared-settings edited");
    world.banner = banner;
}

/// One App's status as the tracker reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusSeen {
    /// `status.observedGeneration`.
    pub observed: i64,
    /// `Ready` is `True`.
    pub ready: bool,
}

/// What the tracker knows of one App.
#[derive(Default)]
struct Key {
    generation: i64,
    status: Option<(Instant, StatusSeen)>,
    /// Each distinct child `data`, when it arrived.
    child: Vec<(Instant, ChildData)>,
    /// Each distinct status, when it arrived.
    statuses: Vec<(Instant, StatusSeen)>,
}

#[derive(Default)]
struct State {
    keys: HashMap<String, Key>,
    /// When each new version written by a controller arrived: a child's,
    /// or an App's whose status or finalizers changed.
    writes: Vec<Instant>,
    /// The last status and finalizers seen of each App (for `writes`).
    app_owned: HashMap<String, Value>,
}

/// Watches of the Apps and of the namespace's ConfigMaps, recording what
/// controllers did.
#[derive(Clone, Default)]
pub struct Tracker {
    state: Arc<Mutex<State>>,
}

fn status_of(app: &DynamicObject) -> Option<StatusSeen> {
    let status = app.data.get("status")?;
    let observed = status.get("observedGeneration")?.as_i64()?;
    let ready = status
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True");
    Some(StatusSeen { observed, ready })
}

fn child_of(cm: &ConfigMap) -> ChildData {
    let data = cm.data.clone().unwrap_or_default();
    let get = |k: &str| data.get(k).cloned();
    ChildData {
        message: get("message").unwrap_or_default(),
        replicas: get("replicas").unwrap_or_default(),
        banner: get("banner"),
    }
}

impl Tracker {
    /// Starts both watches; resolves once both initial lists are in. The
    /// tasks run until aborted.
    pub async fn start(client: &Client) -> (Self, Vec<tokio::task::JoinHandle<()>>) {
        let tracker = Tracker::default();
        let (app_ready, app_rx) = tokio::sync::oneshot::channel();
        let (cm_ready, cm_rx) = tokio::sync::oneshot::channel();
        let t = tracker.clone();
        let app_task = tokio::spawn(watch_each(
            watcher(apps(client), watcher::Config::default()),
            app_ready,
            move |app: DynamicObject, live| t.on_app(&app, live),
        ));
        let t = tracker.clone();
        let cm_api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
        let cm_task = tokio::spawn(watch_each(
            watcher(cm_api, watcher::Config::default()),
            cm_ready,
            move |cm: ConfigMap, live| t.on_child(&cm, live),
        ));
        let _ = app_rx.await;
        let _ = cm_rx.await;
        (tracker, vec![app_task, cm_task])
    }

    fn on_app(&self, app: &DynamicObject, live: bool) {
        let now = Instant::now();
        let name = app.name_any();
        let owned = json!({"status": app.data.get("status"), "finalizers": app.finalizers()});
        let mut state = self.state.lock().expect("tracker lock");
        let changed = state.app_owned.insert(name.clone(), owned.clone()) != Some(owned);
        if changed && live {
            state.writes.push(now);
        }
        let key = state.keys.entry(name).or_default();
        key.generation = app.metadata.generation.unwrap_or_default();
        if let Some(s) = status_of(app) {
            if key.status.map(|(_, old)| old) != Some(s) {
                key.status = Some((now, s));
                key.statuses.push((now, s));
            }
        }
    }

    fn on_child(&self, cm: &ConfigMap, live: bool) {
        let name = cm.name_any();
        if name == SHARED_SETTINGS {
            return;
        }
        let now = Instant::now();
        let data = child_of(cm);
        let mut state = self.state.lock().expect("tracker lock");
        if live {
            state.writes.push(now);
        }
        let key = state.keys.entry(name).or_default();
        if key.child.last().map(|(_, d)| d) != Some(&data) {
            key.child.push((now, data));
        }
    }

    /// Apps whose child holds what `world` says and whose status is
    /// `Ready` at their generation.
    pub fn converged(&self, world: &World) -> usize {
        let state = self.state.lock().expect("tracker lock");
        state
            .keys
            .iter()
            .filter(|(name, key)| {
                let child_ok = key.child.last().is_some_and(|(_, d)| world.holds(name, d));
                let status_ok = key
                    .status
                    .is_some_and(|(_, s)| s.ready && s.observed == key.generation);
                child_ok && status_ok
            })
            .count()
    }

    /// Versions written by a controller that arrived in `[from, to)`.
    pub fn writes_between(&self, from: Instant, to: Instant) -> usize {
        let state = self.state.lock().expect("tracker lock");
        state
            .writes
            .iter()
            .filter(|at| **at >= from && **at < to)
            .count()
    }

    /// When App `name`'s child first held `message`, and its status first
    /// showed `Ready` at `generation` or later, both after `since`; the
    /// later of the two.
    pub fn edit_seen(
        &self,
        name: &str,
        since: Instant,
        message: &str,
        generation: i64,
    ) -> Option<Instant> {
        let state = self.state.lock().expect("tracker lock");
        let key = state.keys.get(name)?;
        let child = key
            .child
            .iter()
            .find(|(at, d)| *at >= since && d.message == message)?
            .0;
        let status = key
            .statuses
            .iter()
            .find(|(at, s)| *at >= since && s.ready && s.observed >= generation)?
            .0;
        Some(child.max(status))
    }

    /// When the last of the children came to hold `banner` (after
    /// `since`), once all of them do.
    pub fn banner_everywhere(&self, since: Instant, banner: &str, n: usize) -> Option<Instant> {
        let state = self.state.lock().expect("tracker lock");
        let mut last = since;
        let mut count = 0;
        for key in state.keys.values() {
            if let Some((at, _)) = key
                .child
                .iter()
                .find(|(at, d)| *at >= since && d.banner.as_deref() == Some(banner))
            {
                last = last.max(*at);
                count += 1;
            }
        }
        (count >= n).then_some(last)
    }

    /// Children the tracker has seen exist.
    pub fn children(&self) -> usize {
        let state = self.state.lock().expect("tracker lock");
        state.keys.values().filter(|k| !k.child.is_empty()).count()
    }
}

/// Feeds every object of `events` to `on` (`live` is false for the
/// initial list), and signals `ready` once the initial list is in.
async fn watch_each<K>(
    events: impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
    ready: tokio::sync::oneshot::Sender<()>,
    on: impl Fn(K, bool) + Send,
) {
    let mut ready = Some(ready);
    let mut events = std::pin::pin!(events.default_backoff());
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::InitApply(obj)) => on(obj, false),
            Ok(watcher::Event::Apply(obj)) => on(obj, true),
            Ok(watcher::Event::InitDone) => {
                if let Some(tx) = ready.take() {
                    let _ = tx.send(());
                }
            }
            Ok(_) => {}
            Err(e) => eprintln!("perobj: watch: {e}"),
        }
    }
}
