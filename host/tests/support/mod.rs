//! Shared fixtures for the host's integration tests: an embedded API server
//! with namespaces, pods that read like sentences, a host running in the
//! background ([`spawn`], [`RunningHost`]), replicas of the real binary
//! ([`replica`]), hand-written guests ([`wat`]) and the Widget resource they
//! reconcile ([`widget`]). What the server's tests
//! share too (kubectl, waits, HTTP probes) is in `wasmctrl-test-support`.

#![allow(dead_code, missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};
use wasmctrl::controller::{ControllerConfig, GuestController};
use wasmctrl::guest::RuntimeConfig;
use wasmctrl::metrics::Metrics;
use wasmctrl::supervisor::{Supervisor, SupervisorConfig, SupervisorError};
use wasmctrl_apiserver::{ApiServer, ApiServerConfig, FailRequests, Faults, RunningApiServer};
pub use wasmctrl_test_support::{
    bounded, create_namespace, eventually, free_port, http_get, http_status, prom, stays_for,
    CONVERGE,
};

pub mod guests;
pub mod logs;
pub mod replica;
pub mod wat;
pub mod widget;

/// Namespace the host runs in during tests.
pub const HOST_NS: &str = "ops";
/// Namespace test pods live in.
pub const PODS_NS: &str = "ml";
/// The built GPU-summary guest (`make guest`).
pub fn guest_path() -> PathBuf {
    built_guest("guest_gpu_summary")
}

/// The workspace's target directory (`CARGO_TARGET_DIR`, else `target/`).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// A guest `make guest` built: `target/wasm32-wasip2/guest/<name>.wasm`.
pub fn built_guest(name: &str) -> PathBuf {
    built(&format!("wasm32-wasip2/guest/{name}.wasm"), "make guest")
}

/// A guest in another language `make guests-js` built (TypeScript, with
/// componentize-qjs): `target/guests-js/<name>.wasm`.
pub fn built_js_guest(name: &str) -> PathBuf {
    built(&format!("guests-js/{name}.wasm"), "make guests-js")
}

/// A guest in Python `make guest-py` built (componentize-py's default
/// build): `target/guests-py/<name>.wasm`.
pub fn built_py_guest(name: &str) -> PathBuf {
    built(&format!("guests-py/{name}.wasm"), "make guest-py")
}

/// `relative` in the target directory, which `make` must have built.
fn built(relative: &str, make: &str) -> PathBuf {
    let p = target_dir().join(relative);
    assert!(
        p.exists(),
        "build the guests first: {make} ({} is missing)",
        p.display()
    );
    p
}

pub async fn server() -> (RunningApiServer, Client) {
    server_with(ApiServerConfig::default()).await
}

pub async fn server_with(config: ApiServerConfig) -> (RunningApiServer, Client) {
    let server = ApiServer::start(config)
        .await
        .expect("embedded API server starts");
    let client = server.client().await.unwrap();
    for namespace in [HOST_NS, PODS_NS] {
        create_namespace(&client, namespace).await;
    }
    (server, client)
}

/// A pod fixture: `PodSpec::gpus(2).on("n1").running()`.
#[derive(Clone)]
pub struct TestPod {
    pub name: String,
    pub node: Option<String>,
    pub phase: Option<String>,
    pub requests: Option<String>,
    pub limits: Option<String>,
    pub grace: Option<i64>,
}

pub fn pod(name: &str) -> TestPod {
    TestPod {
        name: name.into(),
        node: None,
        phase: None,
        requests: None,
        limits: None,
        grace: None,
    }
}

impl TestPod {
    pub fn on(mut self, node: &str) -> Self {
        self.node = Some(node.into());
        self
    }
    pub fn requesting(mut self, gpus: &str) -> Self {
        self.requests = Some(gpus.into());
        self
    }
    pub fn limited_to(mut self, gpus: &str) -> Self {
        self.limits = Some(gpus.into());
        self
    }
    /// `spec.terminationGracePeriodSeconds` (the server defaults it to 30).
    pub fn grace_period(mut self, seconds: i64) -> Self {
        self.grace = Some(seconds);
        self
    }
    pub fn json(&self) -> Value {
        let mut resources = json!({});
        if let Some(r) = &self.requests {
            resources["requests"] = json!({"nvidia.com/gpu": r});
        }
        // An extended resource needs a limit (the API server refuses a
        // request without one), so a pod that only requests GPUs is
        // limited to what it requests, as a valid pod would be.
        if let Some(l) = self.limits.as_ref().or(self.requests.as_ref()) {
            resources["limits"] = json!({"nvidia.com/gpu": l});
        }
        let mut spec = json!({"containers": [{"name": "c", "image": "x", "resources": resources}]});
        if let Some(n) = &self.node {
            spec["nodeName"] = json!(n);
        }
        if let Some(g) = self.grace {
            spec["terminationGracePeriodSeconds"] = json!(g);
        }
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": self.name, "namespace": PODS_NS}, "spec": spec})
    }
    pub async fn create(&self, client: &Client) {
        let pods: Api<Pod> = Api::namespaced(client.clone(), PODS_NS);
        pods.create(
            &PostParams::default(),
            &serde_json::from_value(self.json()).unwrap(),
        )
        .await
        .unwrap();
    }
}

/// Deletes a pod at once (`gracePeriodSeconds: 0`, what `kubectl delete
/// --force --grace-period=0` sends): no terminating phase.
pub async fn delete_now(client: &Client, name: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), PODS_NS);
    pods.delete(name, &kube::api::DeleteParams::default().grace_period(0))
        .await
        .unwrap();
}

pub async fn set_phase(client: &Client, name: &str, phase: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), PODS_NS);
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": phase}})),
    )
    .await
    .unwrap();
}

pub async fn summary(client: &Client) -> Option<BTreeMap<String, String>> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), HOST_NS);
    cms.get_opt("gpu-summary")
        .await
        .unwrap()
        .map(|cm| cm.data.unwrap_or_default())
}

pub fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Breaks every watch and refuses every re-watch of pods (500) until
/// `faults.clear()`. Returns once a re-watch has been refused, so the
/// informers' pod watches are down for sure.
pub async fn pod_watches_down(faults: &Faults) {
    let refused_before = faults.injected_failures();
    faults.fail(
        FailRequests::new(500, 10_000)
            .verb("watch")
            .resource("pods"),
    );
    faults.drop_watches();
    eventually(
        "an informer tried to re-watch pods and was refused",
        || async { faults.injected_failures() > refused_before },
    )
    .await;
}

/// Waits until the summary equals `want`.
pub async fn summary_becomes(client: &Client, want: &[(&str, &str)]) {
    let want = data(want);
    let mut last = None;
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        let now = summary(client).await;
        if now.as_ref() == Some(&want) {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("summary never became {want:?}; last seen {now:?} (before: {last:?})");
        }
        last = now;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A host running in the background, as the binary runs it: `Supervisor::run`
/// on its own task until [`RunningHost::stop`] (the binary's SIGTERM) or
/// until it fails by itself.
pub struct RunningHost {
    pub host: Arc<Supervisor>,
    /// The host's metrics, when it was started with them ([`run_host`]
    /// always does).
    pub metrics: Option<Arc<Metrics>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), SupervisorError>>,
}

/// Runs a started `host` in the background; after a stop, in-flight
/// reconciles get `drain` to finish.
pub fn spawn(host: Arc<Supervisor>, drain: Duration) -> RunningHost {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn({
        let host = host.clone();
        async move {
            host.run(
                async {
                    let _ = stopped.await;
                },
                drain,
            )
            .await
        }
    });
    RunningHost {
        host,
        metrics: None,
        stop: Some(stop),
        task,
    }
}

impl RunningHost {
    /// Asks the host to stop (drain, then end) without waiting for it.
    pub fn request_stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Asks the host to stop and waits for its result.
    pub async fn stop(mut self) -> Result<(), SupervisorError> {
        self.request_stop();
        self.join().await
    }

    /// Waits for the host to end (by itself, or after a stop request) and
    /// returns its result.
    pub async fn join(self) -> Result<(), SupervisorError> {
        self.task.await.expect("the host task does not panic")
    }

    /// Whether the host has ended.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// The first (usually only) guest's controller.
    pub fn controller(&self) -> Arc<GuestController> {
        self.host.controllers()[0].clone()
    }

    pub fn applies(&self) -> u64 {
        self.controller().metrics().applies()
    }
    pub fn skipped(&self) -> u64 {
        self.controller().metrics().skipped()
    }
    pub fn reconciles(&self) -> u64 {
        self.controller().metrics().reconciles()
    }

    /// Whether the first guest's queue is idle: see [`idle`].
    pub fn idle(&self) -> bool {
        let metrics = self.metrics.as_ref().expect("a host started by run_host");
        idle(&self.controller(), metrics)
    }
}

/// Whether `controller`'s queue holds no key ready to run and none in
/// flight (its `workqueue_longest_running_processor_seconds` gauge is 0).
/// `metrics` must be the ones its host was started with.
pub fn idle(controller: &GuestController, metrics: &Metrics) -> bool {
    let name = format!("name=\"{}\"", controller.name());
    let longest = prom::metric(
        &metrics.encode(),
        "workqueue_longest_running_processor_seconds",
        &[&name],
    );
    controller.queue().is_empty() && longest == 0.0
}

pub fn host_config(controller: ControllerConfig) -> SupervisorConfig {
    SupervisorConfig {
        guests: vec![guest_path()],
        namespace: HOST_NS.into(),
        guest_config: BTreeMap::new(),
        controller,
        runtime: RuntimeConfig::default().cache_dir(None),
        ..SupervisorConfig::default()
    }
}

pub async fn start_host(client: &Client, controller: ControllerConfig) -> RunningHost {
    start_host_with(client, controller, None).await
}

pub async fn start_host_with(
    client: &Client,
    controller: ControllerConfig,
    metrics: Option<Arc<Metrics>>,
) -> RunningHost {
    run_host(client, host_config(controller), metrics).await
}

/// Starts a host with `config` (and `metrics`, or metrics of its own) and
/// runs it in the background with a 5 s drain.
pub async fn run_host(
    client: &Client,
    config: SupervisorConfig,
    metrics: Option<Arc<Metrics>>,
) -> RunningHost {
    let metrics = metrics.unwrap_or_else(|| Arc::new(Metrics::new()));
    let host = Supervisor::start(client.clone(), config, Some(metrics.clone()))
        .await
        .expect("host starts");
    RunningHost {
        metrics: Some(metrics),
        ..spawn(Arc::new(host), Duration::from_secs(5))
    }
}

/// A host running only the guest `make guest` built as `name` (see
/// [`built_guest`]), resyncing every `resync`.
pub async fn run_built_guest(client: &Client, name: &str, resync: Duration) -> RunningHost {
    let config = SupervisorConfig {
        guests: vec![built_guest(name)],
        namespace: HOST_NS.into(),
        controller: ControllerConfig::default().resync(resync),
        runtime: RuntimeConfig::default().cache_dir(None),
        ..SupervisorConfig::default()
    };
    run_host(client, config, None).await
}

/// A TCP relay in front of the API server that can be cut: after `cut`,
/// every connection stays open but no byte passes (a network partition, so
/// requests hang rather than fail).
pub struct Partitionable {
    pub addr: std::net::SocketAddr,
    cut: tokio::sync::watch::Sender<bool>,
}

impl Partitionable {
    pub async fn start(upstream: std::net::SocketAddr) -> Self {
        use tokio::net::{TcpListener, TcpStream};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (cut, cut_rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let mut cut_rx = cut_rx.clone();
                tokio::spawn(async move {
                    if !*cut_rx.borrow() {
                        if let Ok(mut outbound) = TcpStream::connect(upstream).await {
                            tokio::select! {
                                _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => return,
                                _ = cut_rx.wait_for(|c| *c) => {}
                            }
                            // Cut: hold both ends open, pass nothing.
                            std::future::pending::<()>().await;
                        }
                    }
                    std::future::pending::<()>().await;
                });
            }
        });
        Partitionable { addr, cut }
    }

    /// An admin client of `server` that goes through the relay.
    pub async fn client(&self, server: &RunningApiServer) -> Client {
        let mut config = server
            .kube_config_for_token(server.admin_token())
            .await
            .unwrap();
        config.cluster_url = format!("https://{}", self.addr).parse().unwrap();
        Client::try_from(config).unwrap()
    }

    pub fn cut(&self) {
        self.cut.send_replace(true);
    }
}

/// Every request a [`recording`] client sent: `METHOD path?query`.
pub type Requests = Arc<std::sync::Mutex<Vec<String>>>;

/// A client that records the method, path and query of every request the
/// host sends through it (then sends it through `client`): what a test
/// asserts no request ever looked like.
pub fn recording(client: &Client) -> (Client, Requests) {
    let seen: Requests = Arc::default();
    let log = seen.clone();
    let inner = client.clone();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let line = format!(
            "{} {}",
            req.method(),
            req.uri().path_and_query().map_or("", |p| p.as_str())
        );
        log.lock().unwrap().push(line);
        let inner = inner.clone();
        async move { inner.send(req).await }
    });
    (
        Client::new(service, client.default_namespace().to_string()),
        seen,
    )
}

/// The Events in `namespace` (every namespace when None) whose reason is
/// `reason`.
pub async fn events_with_reason(
    client: &Client,
    namespace: Option<&str>,
    reason: &str,
) -> Vec<k8s_openapi::api::events::v1::Event> {
    let events: Api<k8s_openapi::api::events::v1::Event> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

/// Write wars `host` declared for its guest `guest`, against any manager
/// (`wasmctrl_write_wars_total`, as scraped).
pub fn guest_write_wars(host: &RunningHost, guest: &str) -> u64 {
    let scraped = host
        .metrics
        .as_ref()
        .expect("a host started by run_host")
        .encode();
    let label = format!("guest=\"{guest}\"");
    prom::metric(&scraped, "wasmctrl_write_wars_total", &[&label]) as u64
}

/// No write war declared for `guest`, none of its writes held back, and no
/// `WriteWar` event recorded in any namespace.
pub async fn assert_no_write_war(client: &Client, host: &RunningHost, guest: &str) {
    let notes: Vec<String> = events_with_reason(client, None, "WriteWar")
        .await
        .into_iter()
        .map(|e| e.note.unwrap_or_default())
        .collect();
    assert!(notes.is_empty(), "WriteWar events: {notes:?}");
    assert_eq!(guest_write_wars(host, guest), 0, "write wars of {guest}");
    let controller = host.host.controller(guest).expect("the host runs it");
    assert_eq!(
        controller.metrics().held_back_writes(),
        0,
        "writes of {guest} held back"
    );
}
