//! The App controller (`examples/guest-app`) built in another language,
//! against its Rust build: the same person's steps on two embedded API
//! servers, one host each, and after every step both clusters must show
//! the same outputs (each App's child data and controller reference, its
//! status and `Ready` condition, its finalizers), timestamps and uids
//! aside. Steps: create, a shared banner, a spec edit, a person's edit and
//! deletion of a child, a host restart, a deleted App (its child deleted
//! first), the banner removed, a resync.
//!
//! The other builds' components are built once per run (`make guests-js`,
//! `make guest-py`) and compiled once into a shared cache (the first load
//! pays the compile).

use std::path::PathBuf;
use std::time::Duration;

use kube::Client;
use serde_json::json;
use tokio::time::Instant;
use wasmctrl::controller::ControllerConfig;
use wasmctrl::guest::RuntimeConfig;
use wasmctrl::supervisor::SupervisorConfig;
use wasmctrl_apiserver::RunningApiServer;

use super::delete_if_there;
use crate::app::{
    app_server, apps, configmaps, create_app, edit_child, edit_spec, seen, set_banner, war_events,
    Seen,
};
use crate::support::*;

/// Every App of the steps, in [`PODS_NS`].
const APPS: [&str; 2] = ["web", "api"];
/// Resync period: a step is judged after two resyncs reconciled every key.
const RESYNC: Duration = Duration::from_millis(400);

/// A person's step (see the module doc).
#[derive(Clone, Copy, Debug)]
enum AppStep {
    Create(&'static str),
    Banner(&'static str),
    EditSpec(&'static str),
    EditChild(&'static str),
    DeleteChild(&'static str),
    Restart,
    Delete(&'static str),
    RemoveBanner,
    Resync,
}

const STEPS: &[AppStep] = &[
    AppStep::Create("web"),
    AppStep::Create("api"),
    AppStep::Banner("welcome"),
    AppStep::EditSpec("web"),
    AppStep::EditChild("web"),
    AppStep::DeleteChild("api"),
    AppStep::Restart,
    AppStep::Delete("web"),
    AppStep::RemoveBanner,
    AppStep::Resync,
];

/// One build of the App guest on its own server.
struct AppLab {
    _server: RunningApiServer,
    client: Client,
    guest: PathBuf,
    host: Option<RunningHost>,
}

impl AppLab {
    async fn new(guest: PathBuf) -> AppLab {
        let (server, client) = app_server().await;
        let mut lab = AppLab {
            _server: server,
            client,
            guest,
            host: None,
        };
        lab.start().await;
        lab
    }

    async fn start(&mut self) {
        let config = SupervisorConfig {
            guests: vec![self.guest.clone()],
            namespace: HOST_NS.into(),
            controller: ControllerConfig::default().resync(RESYNC),
            // One compile per run for every lab and restart.
            runtime: RuntimeConfig::default().cache_dir(Some(target_dir().join("guest-cache"))),
            ..SupervisorConfig::default()
        };
        self.host = Some(run_host(&self.client, config, None).await);
    }

    fn host(&self) -> &RunningHost {
        self.host.as_ref().expect("a host runs")
    }

    /// (resyncs, errors) of the App guest.
    fn counters(&self) -> (u64, u64) {
        let m = self.host().controller().metrics().clone();
        (m.resyncs(), m.errors())
    }

    async fn act(&mut self, step: AppStep) {
        let c = &self.client;
        match step {
            AppStep::Create(name) => create_app(c, PODS_NS, name, "hello", 2).await,
            AppStep::Banner(banner) => set_banner(c, PODS_NS, banner).await,
            AppStep::EditSpec(name) => {
                edit_spec(c, PODS_NS, name, json!({"message": "bye", "replicas": 5})).await;
            }
            AppStep::EditChild(name) => {
                edit_child(c, PODS_NS, name, json!({"message": "tampered"})).await;
            }
            AppStep::DeleteChild(name) => delete_if_there(&configmaps(c, PODS_NS), name).await,
            AppStep::Restart => {
                if let Some(host) = self.host.take() {
                    host.stop().await.unwrap();
                }
                self.start().await;
            }
            AppStep::Delete(name) => delete_if_there(&apps(c, PODS_NS), name).await,
            AppStep::RemoveBanner => {
                delete_if_there(&configmaps(c, PODS_NS), "shared-settings").await;
            }
            AppStep::Resync => {}
        }
    }

    /// Every App's outputs once the host is idle after two more resyncs
    /// and the cluster stays the same for them.
    async fn settled(&self, step: AppStep) -> Vec<(&'static str, Option<Seen>)> {
        let (resyncs, _) = self.counters();
        let deadline = Instant::now() + CONVERGE;
        loop {
            let (now, errors) = self.counters();
            assert_eq!(errors, 0, "{step:?}: reconcile errors");
            if now >= resyncs + 2 && self.host().idle() {
                let first = self.outputs().await;
                tokio::time::sleep(2 * RESYNC).await;
                if self.host().idle() && self.outputs().await == first {
                    return first;
                }
            }
            assert!(Instant::now() < deadline, "{step:?}: never settled");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// What each App and its child show, timestamps and uids aside (they
    /// differ between two servers).
    async fn outputs(&self) -> Vec<(&'static str, Option<Seen>)> {
        let mut out = Vec::new();
        for name in APPS {
            let mut s = seen(&self.client, PODS_NS, name).await;
            if let Some(Seen {
                ready: Some((_, _, _, time)),
                ..
            }) = s.as_mut()
            {
                time.clear();
            }
            out.push((name, s));
        }
        out
    }
}

/// Runs [`STEPS`] on the Rust build and on `other`, side by side, and
/// asserts the same outputs after every step, no write war and no reconcile
/// error.
pub(crate) async fn same_outputs_as_the_rust_guest(other: PathBuf) {
    let mut rust = AppLab::new(built_guest("guest_app")).await;
    let mut them = AppLab::new(other.clone()).await;
    for &step in STEPS {
        rust.act(step).await;
        them.act(step).await;
        let (want, got) = tokio::join!(rust.settled(step), them.settled(step));
        assert_eq!(got, want, "{}: after {step:?}", other.display());
        eprintln!("app {}: {step:?}: {got:?}", other.display());
    }
    for lab in [&rust, &them] {
        assert!(war_events(&lab.client).await.is_empty(), "WriteWar events");
    }
    let last = them.outputs().await;
    assert!(
        last[0].1.is_none() && last[1].1.as_ref().is_some_and(|s| s.child.is_some()),
        "the deleted App is gone, the other has its child: {last:?}"
    );
}

#[tokio::test]
async fn the_typescript_app_guest_gives_the_rust_guest_s_outputs_at_every_step() {
    same_outputs_as_the_rust_guest(built_js_guest("guest_app_ts")).await;
}

#[tokio::test]
async fn the_python_app_guest_gives_the_rust_guest_s_outputs_at_every_step() {
    same_outputs_as_the_rust_guest(built_py_guest("guest_app")).await;
}
