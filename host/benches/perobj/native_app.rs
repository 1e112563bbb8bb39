//! The native peer of `examples/guest-app`: the same App controller written
//! the usual way with kube-runtime — `Controller::new(apps)
//! .owns(configmaps).watches(shared-settings, every App of its namespace)`,
//! the finalizer through `kube::runtime::finalizer`, and on every reconcile
//! a server-side apply (field manager [`FIELD_MANAGER`], forced) of the
//! child ConfigMap (controlled by the App) and of the App's status through
//! the status subresource. Compare-before-write is the idiom's: the applies
//! are always sent, and the API server gives one that changes nothing no
//! new resourceVersion. `shared-settings` is read with a GET in each
//! reconcile (the stable `watches` gives a trigger but no store, and a
//! second reflector would race the trigger). Every reconcile ends with
//! `Action::requeue(resync)`, kube-runtime's resync. At most
//! [`CONCURRENCY`] reconciles run at once.
//!
//! It prints one line per reconcile ended (`reconcile NS/NAME`), per write request
//! (`write`) and per read request (`read`) for the bench to count, and runs
//! as a subprocess of the bench's own binary (`perobj --native-app ...`), so
//! its memory and CPU are measured like the wasmctrl host's.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::finalizer::{finalizer, Event};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, CustomResource, Resource, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The bench binary's flag to run as this peer.
pub const PEER_FLAG: &str = "--native-app";
/// The field manager of the peer's applies.
pub const FIELD_MANAGER: &str = "native-app";
/// The finalizer (the guest's).
pub const FINALIZER: &str = "apps.example.com/cleanup";
/// The ConfigMap whose `data.banner` every child of its namespace copies.
pub const SHARED_SETTINGS: &str = "shared-settings";
/// Reconciles run at once (kube-runtime's default is unbounded: at 20,000
/// Apps every key reconciled at once and thousands of its requests failed
/// to connect). Each reconcile is three requests in a row (GET, two
/// applies), mostly waiting on the server: 16 in flight keep the
/// two-core server busy, as a production controller sized to its API
/// server would be.
pub const CONCURRENCY: u16 = 16;
/// What the peer prints (before the key) for each reconcile.
pub const RECONCILE_LINE: &str = "reconcile";
/// What the peer prints for each write request it sends.
pub const WRITE_LINE: &str = "write";
/// What the peer prints for each read request it sends.
pub const READ_LINE: &str = "read";

/// `App.spec` (`examples/guest-app/crd.yaml` requires both fields).
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug)]
#[kube(
    group = "apps.example.com",
    version = "v1",
    kind = "App",
    namespaced,
    status = "AppStatus",
    schema = "disabled"
)]
pub struct AppSpec {
    /// Copied into the child's `data.message`.
    pub message: String,
    /// Copied (as a decimal string) into the child's `data.replicas`.
    pub replicas: i64,
}

/// `App.status`, as the guest writes it.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AppStatus {
    /// The generation the status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` only.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// A `metav1.Condition`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True` or `False`.
    pub status: String,
    /// Why.
    pub reason: String,
    /// Said to people.
    pub message: String,
    /// When `status` last changed.
    pub last_transition_time: String,
    /// The generation it was set from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// What the peer is told on its command line.
#[derive(Debug, Clone)]
pub struct PeerArgs {
    /// Kubeconfig to connect with.
    pub kubeconfig: PathBuf,
    /// Resync period.
    pub resync: Duration,
}

impl PeerArgs {
    /// The flags that [`PeerArgs::parse`] reads back, after `peer` (which
    /// peer the bench binary runs as: [`PEER_FLAG`] or the floor's).
    pub fn to_args(&self, peer: &str) -> Vec<String> {
        vec![
            peer.into(),
            "--kubeconfig".into(),
            self.kubeconfig.display().to_string(),
            "--resync-seconds".into(),
            self.resync.as_secs().to_string(),
        ]
    }

    /// Reads `--kubeconfig P --resync-seconds S`.
    pub fn parse(args: &[String]) -> anyhow::Result<Self> {
        let get = |flag: &str| crate::args::required(args, flag, "native app");
        Ok(PeerArgs {
            kubeconfig: PathBuf::from(get("--kubeconfig")?),
            resync: Duration::from_secs(get("--resync-seconds")?.parse()?),
        })
    }
}

struct Ctx {
    client: Client,
    resync: Duration,
}

/// The child's `data`, as the guest's `app::child_data`.
fn child_data(app: &App, banner: Option<String>) -> BTreeMap<String, String> {
    let mut data = BTreeMap::from([
        ("message".to_string(), app.spec.message.clone()),
        ("replicas".to_string(), app.spec.replicas.to_string()),
    ]);
    if let Some(banner) = banner {
        data.insert("banner".into(), banner);
    }
    data
}

/// The child ConfigMap of `app` to apply, controlled by it.
pub fn child_doc(app: &App, banner: Option<String>) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": app.name_any(), "namespace": app.namespace(),
            "ownerReferences": [app.controller_owner_ref(&())],
        },
        "data": child_data(app, banner),
    })
}

/// `app`'s `Ready` status to apply through the status subresource.
pub fn status_doc(app: &App) -> serde_json::Value {
    let (ns, name) = (app.namespace().unwrap_or_default(), app.name_any());
    json!({
        "apiVersion": App::api_version(&()), "kind": App::kind(&()),
        "status": ready_status(app, &format!("{ns}/{name}")),
    })
}

/// The status after a successful apply of the child: `Ready=True`, its
/// `lastTransitionTime` kept unless it flips (controller-runtime's
/// `meta.SetStatusCondition`).
fn ready_status(app: &App, child: &str) -> AppStatus {
    let generation = app.metadata.generation;
    let kept = app
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .filter(|c| c.status == "True")
        .map(|c| c.last_transition_time.clone());
    let now = || chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    AppStatus {
        observed_generation: generation,
        conditions: vec![Condition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: "ChildReady".into(),
            message: format!("ConfigMap {child} is applied"),
            last_transition_time: kept.unwrap_or_else(now),
            observed_generation: generation,
        }],
    }
}

async fn apply(app: Arc<App>, ctx: &Ctx) -> kube::Result<Action> {
    let ns = app.namespace().unwrap_or_default();
    let name = app.name_any();
    let configmaps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    println!("{READ_LINE}");
    let banner = configmaps
        .get_opt(SHARED_SETTINGS)
        .await?
        .and_then(|cm| cm.data?.remove("banner"));
    let params = PatchParams::apply(FIELD_MANAGER).force();
    println!("{WRITE_LINE}");
    configmaps
        .patch(&name, &params, &Patch::Apply(&child_doc(&app, banner)))
        .await?;
    let status = status_doc(&app);
    let apps: Api<App> = Api::namespaced(ctx.client.clone(), &ns);
    println!("{WRITE_LINE}");
    apps.patch_status(&name, &params, &Patch::Apply(&status))
        .await?;
    Ok(Action::requeue(ctx.resync))
}

/// A deleted App: its child is deleted explicitly (no garbage collector on
/// this API server), then the helper removes the finalizer.
async fn cleanup(app: Arc<App>, ctx: &Ctx) -> kube::Result<Action> {
    let configmaps: Api<ConfigMap> =
        Api::namespaced(ctx.client.clone(), &app.namespace().unwrap_or_default());
    println!("{WRITE_LINE}");
    match configmaps
        .delete(&app.name_any(), &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(Action::await_change()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Action::await_change()),
        Err(e) => Err(e),
    }
}

async fn reconcile(
    app: Arc<App>,
    ctx: Arc<Ctx>,
) -> Result<Action, kube::runtime::finalizer::Error<kube::Error>> {
    let ns = app.namespace().unwrap_or_default();
    let key = format!("{ns}/{}", app.name_any());
    let apps: Api<App> = Api::namespaced(ctx.client.clone(), &ns);
    let done = finalizer(&apps, FINALIZER, app, |event| async {
        match event {
            Event::Apply(app) => apply(app, &ctx).await,
            Event::Cleanup(app) => cleanup(app, &ctx).await,
        }
    })
    .await;
    // Printed once the reconcile has ended (as wasmctrl counts them).
    println!("{RECONCILE_LINE} {key}");
    done
}

fn error_policy(
    _: Arc<App>,
    error: &kube::runtime::finalizer::Error<kube::Error>,
    _: Arc<Ctx>,
) -> Action {
    eprintln!("native app: reconcile failed: {error}");
    Action::requeue(Duration::from_secs(1))
}

/// Runs the peer until killed.
pub async fn run(args: PeerArgs) -> anyhow::Result<()> {
    let kubeconfig = kube::config::Kubeconfig::read_from(&args.kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    let client = Client::try_from(config)?;
    let apps: Api<App> = Api::all(client.clone());
    let configmaps: Api<ConfigMap> = Api::all(client.clone());
    let controller = Controller::new(apps, watcher::Config::default())
        .with_config(controller::Config::default().concurrency(CONCURRENCY));
    let store = controller.store();
    let settings = watcher::Config::default().fields(&format!("metadata.name={SHARED_SETTINGS}"));
    controller
        .owns(configmaps.clone(), watcher::Config::default())
        .watches(configmaps, settings, move |cm: ConfigMap| {
            let ns = cm.namespace();
            store
                .state()
                .into_iter()
                .filter(|app| app.namespace() == ns)
                .map(|app| ObjectRef::from_obj(&*app))
                .collect::<Vec<_>>()
        })
        .run(
            reconcile,
            error_policy,
            Arc::new(Ctx {
                client,
                resync: args.resync,
            }),
        )
        .for_each(|_| futures::future::ready(()))
        .await;
    Ok(())
}
