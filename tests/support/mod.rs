//! Shared fixtures for integration tests: an embedded API server, namespaces,
//! pods that read like sentences, and a running host.

#![allow(dead_code, missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};
use wasmctrl::controller::ControllerConfig;
use wasmctrl::guest::RuntimeConfig;
use wasmctrl::supervisor::{Supervisor, SupervisorConfig, SupervisorError};
use wasmctrl_apiserver::{ApiServer, ApiServerConfig, RunningApiServer};

/// Namespace the host runs in during tests.
pub mod wat;

/// Namespace the host runs in during tests.
pub const HOST_NS: &str = "ops";
/// Namespace test pods live in.
pub const PODS_NS: &str = "ml";
/// How long any convergence may take before a test fails.
pub const CONVERGE: Duration = Duration::from_secs(30);

pub fn guest_path() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let p = target.join("wasm32-wasip2/guest/guest_gpu_summary.wasm");
    assert!(p.exists(), "build the guest first: make guest");
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
    let ns: Api<Namespace> = Api::all(client.clone());
    for n in [HOST_NS, PODS_NS] {
        ns.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": n}})).unwrap(),
        )
        .await
        .unwrap();
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

/// Polls `check` until it returns true or `CONVERGE` passes.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        if check().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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

/// A host running the GPU guest in the background.
pub struct RunningHost {
    pub host: Arc<Supervisor>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub task: tokio::task::JoinHandle<Result<(), SupervisorError>>,
}

impl RunningHost {
    pub async fn stop(mut self) -> Result<(), SupervisorError> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        self.task.await.unwrap()
    }
    pub fn applies(&self) -> u64 {
        self.host.controllers()[0].metrics().applies()
    }
    pub fn skipped(&self) -> u64 {
        self.host.controllers()[0].metrics().skipped()
    }
    pub fn reconciles(&self) -> u64 {
        self.host.controllers()[0].metrics().reconciles()
    }
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
    metrics: Option<Arc<wasmctrl::metrics::Metrics>>,
) -> RunningHost {
    run_host(client, host_config(controller), metrics).await
}

/// Starts a host with `config` and runs it in the background.
pub async fn run_host(
    client: &Client,
    config: SupervisorConfig,
    metrics: Option<Arc<wasmctrl::metrics::Metrics>>,
) -> RunningHost {
    let host = Arc::new(
        Supervisor::start(client.clone(), config, metrics)
            .await
            .expect("host starts"),
    );
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let h = host.clone();
    let task = tokio::spawn(async move {
        h.run(
            async {
                let _ = rx.await;
            },
            Duration::from_secs(5),
        )
        .await
    });
    RunningHost {
        host,
        stop: Some(tx),
        task,
    }
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
