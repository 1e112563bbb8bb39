//! The third guest, `examples/guest-app` ("App owns a child ConfigMap"),
//! end to end: its `crd.yaml` loaded into the embedded API server — with the
//! garbage collector off, as on a real API server without
//! kube-controller-manager, so a child only goes if the host deletes it —
//! and the host running the built guest over real HTTPS with the real kube
//! client. Each test is one scenario of issue 21: children and Ready status
//! for several Apps; a person's spec edits observed without a write war; a
//! person's edits and deletion of a child repaired; `shared-settings`
//! fanned out to every App of its namespace; an idle controller sending no
//! writes while its resyncs are skipped; a deleted App's child deleted by
//! the host's own DELETE before the finalizer is released, and no record of
//! deleted Apps and children left in its write bookkeeping; 60 create/delete
//! races leaving nothing behind; the real binary SIGKILLed in the middle of
//! deletions and a new one finishing them.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use kube::Client;
use serde_json::{json, Value};
use tokio::time::Instant;
use wasmctrl::controller::GuestController;
use wasmctrl::metrics::WriteVerb;
use wasmctrl_apiserver::{ApiServerConfig, RunningApiServer};

use crate::support::*;

/// The guest's declared name (`GUEST_NAME` in its lib.rs).
const GUEST: &str = "app";
/// The finalizer the host keeps on every App (`FINALIZER` in its lib.rs).
const FINALIZER: &str = "apps.example.com/cleanup";
/// The ConfigMap whose `data.banner` every child of its namespace copies.
const SHARED_SETTINGS: &str = "shared-settings";
/// A second namespace, whose Apps must not see the first one's settings.
const OTHER_NS: &str = "other";
/// How soon a person's change to a child must be undone.
const REPAIR: Duration = Duration::from_secs(2);

fn app_resource() -> ApiResource {
    ApiResource {
        group: "apps.example.com".into(),
        version: "v1".into(),
        api_version: "apps.example.com/v1".into(),
        kind: "App".into(),
        plural: "apps".into(),
    }
}

pub(crate) fn apps(client: &Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &app_resource())
}

pub(crate) fn configmaps(client: &Client, namespace: &str) -> Api<ConfigMap> {
    Api::namespaced(client.clone(), namespace)
}

/// An embedded API server without a garbage collector, with the example's
/// own `crd.yaml` installed.
pub(crate) async fn app_server() -> (RunningApiServer, Client) {
    app_server_with(ApiServerConfig::default()).await
}

/// [`app_server`] from `config` (its garbage collector off).
pub(crate) async fn app_server_with(config: ApiServerConfig) -> (RunningApiServer, Client) {
    let (server, client) = server_with(config.garbage_collector(false)).await;
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/guest-app/crd.yaml");
    let crd: CustomResourceDefinition =
        serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let api = apps(&client, PODS_NS);
    eventually("the App resource is served", || async {
        api.list(&ListParams::default()).await.is_ok()
    })
    .await;
    (server, client)
}

/// The host running only the App guest, resyncing every `resync`.
async fn start_app_host(client: &Client, resync: Duration) -> RunningHost {
    run_built_guest(client, "guest_app", resync).await
}

fn app_controller(host: &RunningHost) -> Arc<GuestController> {
    host.host
        .controller(GUEST)
        .expect("the host runs the app guest")
}

pub(crate) async fn create_app(
    client: &Client,
    namespace: &str,
    name: &str,
    message: &str,
    replicas: i64,
) {
    let app: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps.example.com/v1", "kind": "App",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"message": message, "replicas": replicas}}))
    .unwrap();
    apps(client, namespace)
        .create(&PostParams::default(), &app)
        .await
        .unwrap();
}

/// What a person's `kubectl patch app NAME --type merge -p ...` sends.
pub(crate) async fn edit_spec(client: &Client, namespace: &str, name: &str, spec: Value) {
    apps(client, namespace)
        .patch(
            name,
            &PatchParams {
                field_manager: Some("kubectl-patch".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(json!({ "spec": spec })),
        )
        .await
        .unwrap();
}

/// What a person's `kubectl edit configmap NAME` sends: a merge patch of
/// `data`.
pub(crate) async fn edit_child(client: &Client, namespace: &str, name: &str, data: Value) {
    configmaps(client, namespace)
        .patch(
            name,
            &PatchParams {
                field_manager: Some("kubectl-edit".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(json!({ "data": data })),
        )
        .await
        .unwrap();
}

pub(crate) async fn set_banner(client: &Client, namespace: &str, banner: &str) {
    let doc = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": SHARED_SETTINGS, "namespace": namespace},
        "data": {"banner": banner}});
    configmaps(client, namespace)
        .patch(
            SHARED_SETTINGS,
            &PatchParams::apply("kubectl").force(),
            &Patch::Apply(&doc),
        )
        .await
        .unwrap();
}

fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// What an App and its child show, as read from the server.
#[derive(Debug, PartialEq)]
pub(crate) struct Seen {
    pub(crate) generation: Option<i64>,
    pub(crate) observed_generation: Option<i64>,
    /// `Ready`'s (status, reason, observedGeneration, lastTransitionTime).
    pub(crate) ready: Option<(String, String, Option<i64>, String)>,
    pub(crate) finalizers: Vec<String>,
    /// The child's data, if the child exists.
    pub(crate) child: Option<BTreeMap<String, String>>,
    /// Whether the child's one owner reference is the App's controller
    /// reference (its uid, controller and blockOwnerDeletion set).
    pub(crate) owned: bool,
}

pub(crate) async fn seen(client: &Client, namespace: &str, name: &str) -> Option<Seen> {
    let app = apps(client, namespace).get_opt(name).await.unwrap()?;
    let status = &app.data["status"];
    let ready = status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .map(|c: &Value| {
            let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (
                text("status"),
                text("reason"),
                c["observedGeneration"].as_i64(),
                text("lastTransitionTime"),
            )
        });
    let child = configmaps(client, namespace).get_opt(name).await.unwrap();
    let owned = child.as_ref().is_some_and(|c| {
        match c.metadata.owner_references.as_deref().unwrap_or_default() {
            [r] => {
                r.api_version == "apps.example.com/v1"
                    && r.kind == "App"
                    && r.name == name
                    && Some(&r.uid) == app.metadata.uid.as_ref()
                    && r.controller == Some(true)
                    && r.block_owner_deletion == Some(true)
            }
            _ => false,
        }
    });
    Some(Seen {
        generation: app.metadata.generation,
        observed_generation: status["observedGeneration"].as_i64(),
        ready,
        finalizers: app.metadata.finalizers.unwrap_or_default(),
        child: child.map(|c| c.data.unwrap_or_default()),
        owned,
    })
}

impl Seen {
    /// Converged on `want` (the child's data): the child exists with that
    /// data and the App's controller reference, status and `Ready=True`
    /// observe the current generation, and the App holds the finalizer.
    fn converged(&self, want: &BTreeMap<String, String>) -> bool {
        let generation = self.generation;
        self.child.as_ref() == Some(want)
            && self.owned
            && self.observed_generation == generation
            && self
                .ready
                .as_ref()
                .is_some_and(|(s, r, g, _)| s == "True" && r == "ChildReady" && *g == generation)
            && self.finalizers == [FINALIZER]
    }
}

/// Waits (up to `limit`) until `namespace/name` has converged on `want`;
/// returns what it showed, or what it last showed.
async fn converged_within(
    limit: Duration,
    client: &Client,
    namespace: &str,
    name: &str,
    want: &[(&str, &str)],
) -> Result<Seen, String> {
    let want = data(want);
    let deadline = Instant::now() + limit;
    let mut last = None;
    loop {
        let now = seen(client, namespace, name).await;
        if let Some(s) = now {
            if s.converged(&want) {
                return Ok(s);
            }
            last = Some(s);
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{namespace}/{name} did not converge on child data {want:?} within {limit:?}; last seen {last:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What the host's metrics say about the App guest's writes, for failure
/// messages.
fn write_report(host: &RunningHost) -> String {
    let m = app_controller(host).metrics().clone();
    format!(
        "host: applies {}, status applies {}, deletes {}, finalizers added {} removed {}, \
         skipped {}, held back {}, write wars {}, reconciles {}, errors {}",
        m.applies(),
        m.written(WriteVerb::ApplyStatus),
        m.written(WriteVerb::Delete),
        m.written(WriteVerb::AddFinalizer),
        m.written(WriteVerb::RemoveFinalizer),
        m.skipped(),
        m.held_back_writes(),
        write_wars(host),
        m.reconciles(),
        m.errors()
    )
}

async fn converges(client: &Client, namespace: &str, name: &str, want: &[(&str, &str)]) -> Seen {
    converged_within(CONVERGE, client, namespace, name, want)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Every `WriteWar` event, in every namespace.
pub(crate) async fn war_events(client: &Client) -> Vec<String> {
    events_with_reason(client, None, "WriteWar")
        .await
        .into_iter()
        .map(|e| e.note.unwrap_or_default())
        .collect()
}

/// Write wars the host declared for the App guest, against any manager.
fn write_wars(host: &RunningHost) -> u64 {
    let scraped = host.metrics.as_ref().expect("run_host").encode();
    prom::metric(
        &scraped,
        "wasmctrl_write_wars_total",
        &[&format!("guest=\"{GUEST}\"")],
    ) as u64
}

/// No write war declared and no WriteWar event recorded.
async fn assert_no_war(client: &Client, host: &RunningHost) {
    let events = war_events(client).await;
    assert!(events.is_empty(), "WriteWar events: {events:?}");
    assert_eq!(write_wars(host), 0, "wasmctrl_write_wars_total");
    assert_eq!(
        app_controller(host).metrics().held_back_writes(),
        0,
        "writes held back"
    );
}

#[tokio::test]
async fn three_apps_get_children_they_control_and_ready_status() {
    let (_server, client) = app_server().await;
    let host = start_app_host(&client, Duration::from_secs(600)).await;
    for (i, name) in ["a1", "a2", "a3"].into_iter().enumerate() {
        create_app(&client, PODS_NS, name, &format!("hello {name}"), i as i64).await;
    }
    for (i, name) in ["a1", "a2", "a3"].into_iter().enumerate() {
        let message = format!("hello {name}");
        let replicas = i.to_string();
        let s = converges(
            &client,
            PODS_NS,
            name,
            &[("message", &message), ("replicas", &replicas)],
        )
        .await;
        assert_eq!(s.generation, Some(1), "{name}");
    }
    let m = app_controller(&host).metrics().clone();
    assert!(m.applies() >= 3, "one child applied per App");
    assert!(m.written(WriteVerb::ApplyStatus) >= 3, "one status per App");
    assert!(
        m.written(WriteVerb::AddFinalizer) >= 3,
        "the host added the finalizer"
    );
    assert_eq!(m.errors(), 0, "reconcile errors");
    host.stop().await.unwrap();
}

#[tokio::test]
async fn five_spec_edits_in_five_seconds_are_observed_without_a_write_war() {
    let (_server, client) = app_server().await;
    let host = start_app_host(&client, Duration::from_secs(600)).await;
    create_app(&client, PODS_NS, "web", "v0", 1).await;
    converges(
        &client,
        PODS_NS,
        "web",
        &[("message", "v0"), ("replicas", "1")],
    )
    .await;
    for i in 1..=5 {
        edit_spec(
            &client,
            PODS_NS,
            "web",
            json!({"message": format!("v{i}"), "replicas": i}),
        )
        .await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let s = converges(
        &client,
        PODS_NS,
        "web",
        &[("message", "v5"), ("replicas", "5")],
    )
    .await;
    assert_eq!(s.generation, Some(6), "five edits bumped the generation");
    assert_eq!(s.observed_generation, s.generation);
    assert_no_war(&client, &host).await;
    host.stop().await.unwrap();
}

/// A guest watching the kinds it writes (its Apps' status, the children)
/// shares one informer per kind with its outputs cache: a spec edit costs
/// the edit's reconcile and the status echo's, never a reconcile on a
/// cache that has not seen the edit yet, nor one for the child's echo
/// (the children watch reads none of the child's fields).
#[tokio::test]
async fn each_spec_edit_costs_two_reconciles_the_edit_and_its_status_echo() {
    let (_server, client) = app_server().await;
    let host = start_app_host(&client, Duration::from_secs(600)).await;
    create_app(&client, PODS_NS, "web", "v0", 1).await;
    converges(
        &client,
        PODS_NS,
        "web",
        &[("message", "v0"), ("replicas", "1")],
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Apps (the primaries, and the status outputs), ConfigMaps (the
    // children, and the child outputs), the `shared-settings` ConfigMaps.
    assert_eq!(app_controller(&host).informer_count(), 3);
    let metrics = app_controller(&host).metrics().clone();
    let before = metrics.reconciles();
    for i in 1..=5 {
        let message = format!("v{i}");
        edit_spec(&client, PODS_NS, "web", json!({"message": message})).await;
        converges(
            &client,
            PODS_NS,
            "web",
            &[("message", &message), ("replicas", "1")],
        )
        .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(
        metrics.reconciles() - before,
        10,
        "five edits, two reconciles each; {}",
        write_report(&host)
    );
    host.stop().await.unwrap();
}

#[tokio::test]
async fn a_person_editing_the_child_five_times_in_ten_seconds_is_repaired_every_time() {
    let (_server, client) = app_server().await;
    let host = start_app_host(&client, Duration::from_secs(600)).await;
    create_app(&client, PODS_NS, "web", "hello", 2).await;
    let want = [("message", "hello"), ("replicas", "2")];
    converges(&client, PODS_NS, "web", &want).await;
    for i in 1..=5 {
        let started = Instant::now();
        edit_child(
            &client,
            PODS_NS,
            "web",
            json!({"message": format!("edited {i}"), "replicas": "99"}),
        )
        .await;
        if let Err(e) = converged_within(REPAIR, &client, PODS_NS, "web", &want).await {
            panic!("edit {i} not repaired: {e}; {}", write_report(&host));
        }
        eprintln!("edit {i} repaired in {:?}", started.elapsed());
        tokio::time::sleep(Duration::from_secs(2).saturating_sub(started.elapsed())).await;
    }
    assert_no_war(&client, &host).await;
    host.stop().await.unwrap();
}

#[tokio::test]
async fn a_deleted_child_is_restored_within_two_seconds() {
    let (_server, client) = app_server().await;
    let host = start_app_host(&client, Duration::from_secs(600)).await;
    create_app(&client, PODS_NS, "web", "hello", 2).await;
    let want = [("message", "hello"), ("replicas", "2")];
    converges(&client, PODS_NS, "web", &want).await;
    let cms = configmaps(&client, PODS_NS);
    let old_uid = cms.get("web").await.unwrap().metadata.uid;
    let started = Instant::now();
    cms.delete("web", &DeleteParams::default()).await.unwrap();
    if let Err(e) = converged_within(REPAIR, &client, PODS_NS, "web", &want).await {
        panic!("deleted child not restored: {e}; {}", write_report(&host));
    }
    eprintln!("child restored in {:?}", started.elapsed());
    let new_uid = cms.get("web").await.unwrap().metadata.uid;
    assert_ne!(new_uid, old_uid, "a new child, not the old one");
    host.stop().await.unwrap();
}

#[tokio::test]
async fn a_shared_settings_change_reaches_every_child_of_its_namespace_only() {
    let (_server, client) = app_server().await;
    create_namespace(&client, OTHER_NS).await;
    let host = start_app_host(&client, Duration::from_secs(600)).await;
    let names = ["a1", "a2", "a3"];
    for name in names {
        create_app(&client, PODS_NS, name, "m", 1).await;
    }
    create_app(&client, OTHER_NS, "elsewhere", "m", 1).await;
    let plain = [("message", "m"), ("replicas", "1")];
    for name in names {
        converges(&client, PODS_NS, name, &plain).await;
    }
    for banner in ["first", "second"] {
        set_banner(&client, PODS_NS, banner).await;
        for name in names {
            converges(
                &client,
                PODS_NS,
                name,
                &[("banner", banner), ("message", "m"), ("replicas", "1")],
            )
            .await;
        }
        converges(&client, OTHER_NS, "elsewhere", &plain).await;
    }
    // Absent settings: no banner key (the guest's documented choice).
    configmaps(&client, PODS_NS)
        .delete(SHARED_SETTINGS, &DeleteParams::default())
        .await
        .unwrap();
    for name in names {
        converges(&client, PODS_NS, name, &plain).await;
    }
    converges(&client, OTHER_NS, "elsewhere", &plain).await;
    host.stop().await.unwrap();
}

#[tokio::test]
async fn thirty_idle_seconds_with_a_five_second_resync_send_zero_writes_and_count_skips() {
    let (_server, client) = app_server().await;
    let host = start_app_host(&client, Duration::from_secs(5)).await;
    let controller = app_controller(&host);
    let names = ["a1", "a2", "a3"];
    for name in names {
        create_app(&client, PODS_NS, name, "m", 1).await;
    }
    set_banner(&client, PODS_NS, "b").await;
    for name in names {
        converges(
            &client,
            PODS_NS,
            name,
            &[("banner", "b"), ("message", "m"), ("replicas", "1")],
        )
        .await;
    }
    eventually("the app queue is idle", || async { host.idle() }).await;
    let m = controller.metrics().clone();
    let (writes, skipped, resyncs) = (m.writes(), m.skipped(), m.resyncs());
    let before = write_report(&host);
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(30) {
        assert_eq!(
            m.writes(),
            writes,
            "a write while idle, {:?} into the 30 s window; before: {before}; now: {}",
            started.elapsed(),
            write_report(&host)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let resynced = m.resyncs() - resyncs;
    let skips = m.skipped() - skipped;
    eprintln!(
        "idle 30 s: {resynced} resyncs, {skips} writes skipped, {} writes, {} reconciles",
        m.writes() - writes,
        m.reconciles()
    );
    assert!(resynced >= 5, "{resynced} resyncs in 30 s at 5 s");
    // Each resync reconciles every App; each plan is a child apply and a
    // status apply, both already true.
    let want = 2 * names.len() as u64 * resynced;
    assert!(
        skips >= want,
        "{skips} writes skipped over {resynced} resyncs of {} Apps (want >= {want})",
        names.len()
    );
    host.stop().await.unwrap();
}

#[tokio::test]
async fn a_deleted_app_has_its_child_deleted_by_the_host_then_both_are_gone() {
    let (_server, client) = app_server().await;
    let host = start_app_host(&client, Duration::from_secs(600)).await;
    create_app(&client, PODS_NS, "web", "hello", 2).await;
    converges(
        &client,
        PODS_NS,
        "web",
        &[("message", "hello"), ("replicas", "2")],
    )
    .await;
    let m = app_controller(&host).metrics().clone();
    assert_eq!(m.written(WriteVerb::Delete), 0);
    let api = apps(&client, PODS_NS);
    let cms = configmaps(&client, PODS_NS);
    api.delete("web", &DeleteParams::default()).await.unwrap();
    // No garbage collector here: only the host's DELETE removes the child.
    eventually("the host sent the DELETE of the child", || async {
        m.written(WriteVerb::Delete) == 1
    })
    .await;
    eventually("the App is gone", || async {
        api.get_opt("web").await.unwrap().is_none()
    })
    .await;
    assert!(
        cms.get_opt("web").await.unwrap().is_none(),
        "the finalizer was released only once the child was gone"
    );
    eventually("the finalizer's removal is counted", || async {
        m.written(WriteVerb::RemoveFinalizer) == 1
    })
    .await;
    stays_for(Duration::from_secs(1), "nothing comes back", || async {
        api.get_opt("web").await.unwrap().is_none() && cms.get_opt("web").await.unwrap().is_none()
    })
    .await;
    assert_eq!(m.dropped(WriteVerb::Delete), 0, "deletes dropped");
    assert_eq!(m.errors(), 0, "reconcile errors");
    host.stop().await.unwrap();
}

/// The host's write bookkeeping (each written object's producer, the
/// objects it merge-patched) forgets an object once it is deleted: a
/// controller whose primaries come and go keeps a record only of what
/// exists, not of every object it ever wrote.
#[tokio::test]
async fn deleted_apps_and_children_leave_no_record_in_the_write_bookkeeping() {
    let (_server, client) = app_server().await;
    let host = start_app_host(&client, Duration::from_secs(600)).await;
    let names = ["a1", "a2", "a3"];
    for name in names {
        create_app(&client, PODS_NS, name, "v0", 1).await;
    }
    for name in names {
        converges(
            &client,
            PODS_NS,
            name,
            &[("message", "v0"), ("replicas", "1")],
        )
        .await;
    }
    // An edit: the child's changed entry is merge-patched.
    edit_spec(&client, PODS_NS, "a1", json!({"message": "v1"})).await;
    converges(
        &client,
        PODS_NS,
        "a1",
        &[("message", "v1"), ("replicas", "1")],
    )
    .await;
    let controller = app_controller(&host);
    let before = controller.outputs_tracked();
    assert!(
        before >= 2 * names.len(),
        "each App's child and status are on record: {before}"
    );
    let api = apps(&client, PODS_NS);
    let cms = configmaps(&client, PODS_NS);
    for name in names {
        api.delete(name, &DeleteParams::default()).await.unwrap();
    }
    eventually("every App and child is gone", || async {
        let mut gone = true;
        for name in names {
            gone &= api.get_opt(name).await.unwrap().is_none()
                && cms.get_opt(name).await.unwrap().is_none();
        }
        gone
    })
    .await;
    eventually("the bookkeeping holds no record of them", || async {
        controller.outputs_tracked() == 0
    })
    .await;
    assert_eq!(controller.metrics().errors(), 0, "reconcile errors");
    host.stop().await.unwrap();
}

/// Creates App `name`, retrying while a previous one of that name is still
/// being finalized.
async fn create_app_when_free(client: &Client, name: &str, message: &str) {
    let app: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps.example.com/v1", "kind": "App",
        "metadata": {"name": name, "namespace": PODS_NS},
        "spec": {"message": message, "replicas": 1}}))
    .unwrap();
    let api = apps(client, PODS_NS);
    let deadline = Instant::now() + CONVERGE;
    loop {
        match api.create(&PostParams::default(), &app).await {
            Ok(_) => return,
            Err(kube::Error::Api(s)) if s.code == 409 && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(e) => panic!("create {name}: {e}"),
        }
    }
}

#[tokio::test]
async fn sixty_create_delete_races_leave_no_app_no_child_and_nothing_resurrected() {
    let (_server, client) = app_server().await;
    let api = apps(&client, PODS_NS);
    let cms = configmaps(&client, PODS_NS);
    // Every App that ever exists: each one the test created carries its
    // cycle in spec.message; one brought back by a late write would not be
    // a creation of ours.
    let mut events = api
        .watch(&WatchParams::default().timeout(290), "0")
        .await
        .unwrap()
        .boxed();
    let host = start_app_host(&client, Duration::from_secs(600)).await;
    const RACES: u64 = 60;
    for i in 0..RACES {
        create_app_when_free(&client, "race", &format!("cycle {i}")).await;
        tokio::time::sleep(Duration::from_millis(i % 61)).await;
        api.delete("race", &DeleteParams::default()).await.unwrap();
    }
    eventually("the last App is gone", || async {
        api.get_opt("race").await.unwrap().is_none()
    })
    .await;
    eventually("the host is idle", || async { host.idle() }).await;
    stays_for(
        Duration::from_secs(1),
        "no App and no child come back",
        || async {
            api.get_opt("race").await.unwrap().is_none()
                && cms.get_opt("race").await.unwrap().is_none()
        },
    )
    .await;
    let mut created = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while created.len() < RACES as usize + 1 {
        let Ok(Some(event)) = tokio::time::timeout_at(deadline, events.next()).await else {
            break;
        };
        if let WatchEvent::Added(a) = event.unwrap() {
            created.push(a.data["spec"]["message"].clone());
        }
    }
    let want: Vec<Value> = (0..RACES).map(|i| json!(format!("cycle {i}"))).collect();
    assert_eq!(created, want, "one creation per race, each the test's own");
    let m = app_controller(&host).metrics().clone();
    eprintln!(
        "60 races: {}; dropped applies {}, status {}, finalizer adds {}",
        write_report(&host),
        m.dropped(WriteVerb::Apply),
        m.dropped(WriteVerb::ApplyStatus),
        m.dropped(WriteVerb::AddFinalizer)
    );
    host.stop().await.unwrap();
}

/// The real binary running the App guest, as a replica of its own.
fn app_replica(id: &str, kubeconfig: &std::path::Path) -> replica::Replica {
    let kubeconfig = kubeconfig.to_path_buf();
    replica::Replica::start(id, move |command, dir, health, metrics| {
        command
            .arg("run")
            .arg("--guest")
            .arg(built_guest("guest_app"))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--namespace={HOST_NS}"))
            .arg(format!("--health-addr={health}"))
            .arg(format!("--metrics-addr={metrics}"))
            .arg(format!("--guest-cache-dir={}", dir.join("cache").display()))
            .env_remove("POD_NAME");
    })
}

#[tokio::test]
async fn a_host_killed_in_the_middle_of_deletions_is_replaced_by_one_that_finishes_them() {
    let (server, client) = app_server().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        server.kubeconfig_for_token(server.admin_token()),
    )
    .unwrap();
    let mut first = app_replica("first", &kubeconfig);
    first.wait_ready().await;
    let names: Vec<String> = (0..10).map(|i| format!("app{i}")).collect();
    for name in &names {
        create_app(&client, PODS_NS, name, "hello", 1).await;
    }
    for name in &names {
        converges(
            &client,
            PODS_NS,
            name,
            &[("message", "hello"), ("replicas", "1")],
        )
        .await;
    }
    let api = apps(&client, PODS_NS);
    let cms = configmaps(&client, PODS_NS);
    for name in &names {
        api.delete(name, &DeleteParams::default()).await.unwrap();
    }
    // SIGKILL as soon as the deletions are under way: no drain, no release.
    eventually("the host has begun deleting", || async {
        let left = api.list(&ListParams::default()).await.unwrap().items.len();
        let children = cms.list(&ListParams::default()).await.unwrap().items.len();
        left < names.len() || children < names.len()
    })
    .await;
    first.child.kill().await.unwrap();
    let left = api.list(&ListParams::default()).await.unwrap().items.len();
    eprintln!("killed with {left} of {} Apps left", names.len());
    let mut second = app_replica("second", &kubeconfig);
    second.wait_ready().await;
    let nothing_left = || async {
        let apps_left = api.list(&ListParams::default()).await.unwrap().items.len();
        let mut children = 0;
        for n in &names {
            children += usize::from(cms.get_opt(n).await.unwrap().is_some());
        }
        apps_left == 0 && children == 0
    };
    eventually("every App and every child is gone", nothing_left).await;
    stays_for(Duration::from_secs(1), "nothing comes back", nothing_left).await;
    second.stop_cleanly().await;
}
