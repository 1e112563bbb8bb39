//! The floor: the least any App controller does on this client stack, to
//! tell what share of a system's cost is the host's and what share any
//! client pays. It watches the Apps and the ConfigMaps of every namespace
//! with kube-runtime's `watcher` (every event decoded, as any controller's
//! informer decodes it), keeps the Apps by name and `shared-settings`'
//! banner, and sends the same two server-side applies as the native peer
//! (the child, then the status, field manager [`FIELD_MANAGER`]) for an
//! App whose status is not at its generation; a banner change re-applies
//! every child. Nothing else: no workqueue, no compare-before-write (an
//! App's status at its generation is taken to mean its child is right), no
//! finalizer, no retry, no resync, no leader election. It is not a correct
//! controller (a deleted child is never re-created); it is the cost of
//! receiving the events and sending the writes.
//!
//! It prints the native peer's lines (one per App event handled, per write
//! request) and runs as a subprocess of the bench's own binary (`perobj
//! --floor-app ...`), measured like the other systems.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher::{self, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::Semaphore;

use crate::native_app::{
    child_doc, status_doc, App, PeerArgs, CONCURRENCY, RECONCILE_LINE, SHARED_SETTINGS, WRITE_LINE,
};

/// The bench binary's flag to run as the floor.
pub const PEER_FLAG: &str = "--floor-app";
/// The field manager of the floor's applies.
pub const FIELD_MANAGER: &str = "floor-app";

/// What the floor knows: the Apps by namespace and name, and each
/// namespace's banner.
#[derive(Default)]
struct Known {
    apps: HashMap<(String, String), Arc<App>>,
    banners: HashMap<String, Option<String>>,
}

struct Floor {
    client: Client,
    known: Mutex<Known>,
    /// Writes in flight at most (the native peer's bound).
    writes: Semaphore,
}

impl Floor {
    fn banner(&self, ns: &str) -> Option<String> {
        let known = self.known.lock().expect("floor state");
        known.banners.get(ns).cloned().flatten()
    }

    /// Applies `app`'s child and, when `status`, its status.
    async fn write(&self, app: Arc<App>, status: bool) {
        let Ok(_permit) = self.writes.acquire().await else {
            return;
        };
        let ns = app.namespace().unwrap_or_default();
        let name = app.name_any();
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let child = child_doc(&app, self.banner(&ns));
        let configmaps: Api<ConfigMap> = Api::namespaced(self.client.clone(), &ns);
        println!("{WRITE_LINE}");
        if let Err(e) = configmaps
            .patch(&name, &params, &Patch::Apply(&child))
            .await
        {
            eprintln!("floor app: applying the child of {ns}/{name}: {e}");
            return;
        }
        if !status {
            return;
        }
        let status = status_doc(&app);
        let apps: Api<App> = Api::namespaced(self.client.clone(), &ns);
        println!("{WRITE_LINE}");
        if let Err(e) = apps
            .patch_status(&name, &params, &Patch::Apply(&status))
            .await
        {
            eprintln!("floor app: applying the status of {ns}/{name}: {e}");
        }
    }

    /// An App seen (listed or changed): written when its status is not at
    /// its generation.
    fn app(self: &Arc<Self>, app: App) {
        let key = (app.namespace().unwrap_or_default(), app.name_any());
        let behind = app
            .status
            .as_ref()
            .and_then(|s| s.observed_generation)
            .is_none_or(|g| Some(g) != app.metadata.generation);
        let app = Arc::new(app);
        self.known
            .lock()
            .expect("floor state")
            .apps
            .insert(key.clone(), app.clone());
        if behind {
            let floor = self.clone();
            tokio::spawn(async move { floor.write(app, true).await });
        }
        println!("{RECONCILE_LINE} {}/{}", key.0, key.1);
    }

    /// A ConfigMap seen: `shared-settings` whose banner changed re-applies
    /// every child of its namespace; any other is only decoded.
    fn configmap(self: &Arc<Self>, cm: ConfigMap) {
        if cm.name_any() != SHARED_SETTINGS {
            return;
        }
        let ns = cm.namespace().unwrap_or_default();
        let banner = cm.data.and_then(|mut d| d.remove("banner"));
        let children: Vec<Arc<App>> = {
            let mut known = self.known.lock().expect("floor state");
            let before = known.banners.insert(ns.clone(), banner.clone());
            if before.is_none() || before == Some(banner) {
                // First seen (the children were written with it), or
                // unchanged.
                return;
            }
            known
                .apps
                .iter()
                .filter(|((app_ns, _), _)| *app_ns == ns)
                .map(|(_, app)| app.clone())
                .collect()
        };
        for app in children {
            let floor = self.clone();
            tokio::spawn(async move { floor.write(app, false).await });
        }
    }
}

/// Runs the floor until killed.
pub async fn run(args: PeerArgs) -> anyhow::Result<()> {
    let kubeconfig = kube::config::Kubeconfig::read_from(&args.kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    let client = Client::try_from(config)?;
    let floor = Arc::new(Floor {
        client: client.clone(),
        known: Mutex::default(),
        writes: Semaphore::new(usize::from(CONCURRENCY)),
    });
    // The ConfigMaps are listed first, so that the Apps listed next are
    // written with their namespace's banner.
    let listed = Arc::new(tokio::sync::Notify::new());
    let on_configmaps = {
        let (floor, listed) = (floor.clone(), listed.clone());
        watcher(
            Api::<ConfigMap>::all(client.clone()),
            watcher::Config::default(),
        )
        .for_each(move |event| {
            match event {
                Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) => {
                    floor.configmap(cm)
                }
                Ok(watcher::Event::InitDone) => listed.notify_one(),
                Ok(_) => {}
                Err(e) => eprintln!("floor app: watching ConfigMaps: {e}"),
            }
            futures::future::ready(())
        })
    };
    let on_apps = async move {
        listed.notified().await;
        watcher(Api::<App>::all(client), watcher::Config::default())
            .for_each(move |event| {
                match event {
                    Ok(watcher::Event::Apply(app) | watcher::Event::InitApply(app)) => {
                        floor.app(app)
                    }
                    Ok(_) => {}
                    Err(e) => eprintln!("floor app: watching Apps: {e}"),
                }
                futures::future::ready(())
            })
            .await
    };
    futures::future::join(on_configmaps, on_apps).await;
    Ok(())
}
