//! The HTTPS listener: generates a CA and serving certificate, serves the
//! API over rustls on a chosen or ephemeral port, writes kubeconfigs, hands
//! out kube clients, and can stop and restart the listener while the store
//! keeps its state. It never interprets requests; `handlers` does.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use axum::Router;
use base64::Engine;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use super::faults::Faults;
use super::handlers::{self, AppState};
use crate::auth::{Tokens, User};
use crate::cluster::Cluster;
use crate::controllers::{gc, nodes, workloads};
use crate::rules::objects::{now_rfc3339, prepare_create, strategy_create};
use crate::storage::registry::Registry;
use crate::storage::store::Store;

pub use crate::config::{
    ApiServerConfig, WatchList, DEFAULT_BOOKMARK_INTERVAL, DEFAULT_HISTORY, DEFAULT_WATCH_TIMEOUT,
    INITIAL_NAMESPACES,
};

/// Why the server could not start or produce a client.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Certificate generation failed.
    #[error("certificate generation failed: {0}")]
    Certificate(#[from] rcgen::Error),
    /// TLS configuration failed.
    #[error("TLS configuration failed: {0}")]
    Tls(#[from] rustls::Error),
    /// Binding or writing failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// Building a kube client from the generated kubeconfig failed.
    #[error("kube client: {0}")]
    Kube(String),
    /// The listener is already running (restart) or not running (stop).
    #[error("listener state: {0}")]
    Listener(&'static str),
}

/// Result alias for server lifecycle operations.
pub type Result<T, E = ServerError> = std::result::Result<T, E>;

/// Entry point: `ApiServer::start(config)`.
#[derive(Debug)]
pub struct ApiServer;

impl ApiServer {
    /// Generates certificates, seeds the initial namespaces and bootstrap
    /// ClusterRoles, and starts listening.
    pub async fn start(config: ApiServerConfig) -> Result<RunningApiServer> {
        let (ca_pem, tls) = certificates()?;
        let store = Arc::new(Store::new(config.history).with_history_bytes(config.history_bytes));
        let admin_token = config
            .admin_token
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
        let mut tokens = Tokens::default();
        tokens.insert(admin_token.clone(), User::admin("admin"));
        for (t, u) in config.tokens {
            tokens.insert(t, u);
        }
        let registry = Registry::new();
        seed(&store, &registry);
        let faults = Faults::new(store.clone());
        let cluster = Arc::new(Cluster {
            services: crate::rules::services::Allocator::attach(&store),
            store,
            registry,
            kubelet: config.kubelet,
        });
        let state = Arc::new(AppState {
            cluster,
            faults,
            tokens: Arc::new(RwLock::new(tokens)),
            watch_timeout: config.watch_timeout,
            bookmark_interval: config.bookmark_interval,
            max_request_body_bytes: config.max_request_body_bytes,
            too_large_rv_wait: config.too_large_rv_wait,
            watch_send_deadline: config.watch_send_deadline,
            watch_list: config.watch_list,
            write_log: crate::http::write_log::WriteLog::new(config.write_log),
        });
        if config.garbage_collector {
            gc::spawn(&state.cluster);
        }
        nodes::spawn(
            &state.cluster.store,
            &state.cluster.registry,
            config.simulated_nodes,
        );
        if config.simulated_nodes > 0 {
            workloads::spawn(&state.cluster.store, &state.cluster.registry);
        }
        let router = Router::new()
            .fallback(handlers::handle)
            .with_state(state.clone());
        let listener = TcpListener::bind(config.listen).await?;
        let addr = listener.local_addr()?;
        let ctl = Arc::new(Listener {
            addr,
            router,
            acceptor: TlsAcceptor::from(Arc::new(tls)),
            handshake_timeout: config.tls_handshake_timeout,
            header_read_timeout: config.header_read_timeout,
            handle: Mutex::new(None),
        });
        ctl.spawn(listener);
        spawn_restart_requests(&ctl, &state.faults);
        Ok(RunningApiServer {
            addr,
            ca_pem,
            admin_token,
            state,
            listener: ctl,
        })
    }
}

/// The ClusterRoles a fresh 1.32 kube-apiserver stores (its RBAC
/// bootstrapping, read from one with `kubectl get clusterroles -o json`):
/// each role's name, labels, annotations, rules and aggregation rule. The
/// aggregated `admin`, `edit` and `view` hold no rules, as on a server whose
/// kube-controller-manager has not aggregated them.
const BOOTSTRAP_CLUSTER_ROLES: &str = include_str!("../../data/k8s-1.32/clusterroles.json");

/// Creates what a new cluster starts with: its namespaces and its
/// bootstrap ClusterRoles.
fn seed(store: &Store, registry: &Registry) {
    let namespaces = INITIAL_NAMESPACES.map(|ns| json!({"metadata": {"name": ns}}));
    seed_objects(store, registry, ("", "v1", "namespaces"), namespaces);
    // Data compiled in: a parse failure is a broken build, caught by the tests.
    let roles: Vec<Value> = serde_json::from_str(BOOTSTRAP_CLUSTER_ROLES).unwrap_or_default();
    seed_objects(
        store,
        registry,
        ("rbac.authorization.k8s.io", "v1", "clusterroles"),
        roles,
    );
}

/// Creates the cluster-scoped `objects` (each with its metadata) of
/// `(group, version, plural)` in a fresh store.
fn seed_objects(
    store: &Store,
    registry: &Registry,
    (group, version, plural): (&str, &str, &str),
    objects: impl IntoIterator<Item = Value>,
) {
    let Some(info) = registry.lookup(group, version, plural) else {
        return;
    };
    let now = now_rfc3339();
    for mut obj in objects {
        obj["apiVersion"] = json!(info.api_version());
        obj["kind"] = json!(info.kind);
        let name = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        prepare_create(&info, &mut obj, &now);
        strategy_create(&info, &mut obj);
        // A fresh store cannot already hold them.
        let _ = store.create(&info.storage_key(), (String::new(), name), obj);
    }
}

fn certificates() -> Result<(String, rustls::ServerConfig)> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        KeyUsagePurpose, SanType,
    };
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "wasmctrl-apiserver-ca");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key)?;
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(vec!["localhost".to_string()])?;
    params
        .distinguished_name
        .push(DnType::CommonName, "wasmctrl-apiserver");
    params
        .subject_alt_names
        .push(SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])));
    params
        .subject_alt_names
        .push(SanType::IpAddress(std::net::IpAddr::from(
            std::net::Ipv6Addr::LOCALHOST,
        )));
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let cert = params.signed_by(&key, &ca_cert, &ca_key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(cert.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )?;
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok((ca_cert.pem(), tls))
}

struct ListenerHandle {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// The accept loop and its connections; restartable on the same address.
struct Listener {
    addr: SocketAddr,
    router: Router,
    acceptor: TlsAcceptor,
    handshake_timeout: Duration,
    header_read_timeout: Duration,
    handle: Mutex<Option<ListenerHandle>>,
}

impl Listener {
    fn slot(&self) -> std::sync::MutexGuard<'_, Option<ListenerHandle>> {
        self.handle.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn spawn(&self, listener: TcpListener) {
        let (stop, mut stopped) = watch::channel(false);
        let acceptor = self.acceptor.clone();
        let router = self.router.clone();
        let handshake_timeout = self.handshake_timeout;
        let header_read_timeout = self.header_read_timeout;
        let task = tokio::spawn(async move {
            let mut backoff = AcceptBackoff::default();
            loop {
                let accepted = tokio::select! {
                    _ = stopped.changed() => break,
                    a = listener.accept() => a,
                };
                let tcp = match accepted {
                    Ok((tcp, _)) => {
                        backoff.reset();
                        // As Go's net package does for kube-apiserver: no
                        // Nagle delay on a response's last small segment.
                        if let Err(e) = tcp.set_nodelay(true) {
                            tracing::debug!(error = %e, "TCP_NODELAY not set");
                        }
                        tcp
                    }
                    Err(e) => {
                        // Out of file descriptors and the like: wait
                        // instead of spinning on the same error.
                        let delay = backoff.next_delay();
                        tracing::warn!(error = %e, ?delay, "accept failed; retrying");
                        tokio::select! {
                            _ = stopped.changed() => break,
                            _ = tokio::time::sleep(delay) => continue,
                        }
                    }
                };
                let acceptor = acceptor.clone();
                let svc = TowerToHyperService::new(router.clone());
                let mut conn_stop = stopped.clone();
                tokio::spawn(async move {
                    // A client that never finishes the handshake holds a
                    // socket and a task: bound it.
                    let Ok(Ok(tls)) =
                        tokio::time::timeout(handshake_timeout, acceptor.accept(tcp)).await
                    else {
                        return;
                    };
                    let mut builder = auto::Builder::new(TokioExecutor::new());
                    builder
                        .http1()
                        .timer(TokioTimer::new())
                        .header_read_timeout(header_read_timeout);
                    let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), svc);
                    tokio::select! {
                        _ = conn => {}
                        _ = conn_stop.changed() => {}
                    }
                });
            }
        });
        *self.slot() = Some(ListenerHandle { stop, task });
    }

    async fn stop(&self) -> Result<()> {
        let handle = self
            .slot()
            .take()
            .ok_or(ServerError::Listener("not running"))?;
        let _ = handle.stop.send(true);
        let _ = handle.task.await;
        Ok(())
    }

    async fn restart(&self) -> Result<()> {
        if self.slot().is_some() {
            return Err(ServerError::Listener("already running"));
        }
        let listener = TcpListener::bind(self.addr).await?;
        self.spawn(listener);
        Ok(())
    }
}

/// Delay before retrying a failed `accept`, as Go's `http.Server.Serve`
/// does for temporary errors: 5 ms, doubling up to 1 s, back to the start
/// after a success.
#[derive(Debug, Default)]
struct AcceptBackoff {
    last: Option<Duration>,
}

impl AcceptBackoff {
    const FIRST: Duration = Duration::from_millis(5);
    const MAX: Duration = Duration::from_secs(1);

    fn next_delay(&mut self) -> Duration {
        let next = self.last.map_or(Self::FIRST, |d| (d * 2).min(Self::MAX));
        self.last = Some(next);
        next
    }

    fn reset(&mut self) {
        self.last = None;
    }
}

/// Serves `Faults::restart_listener` requests (also sent by the admin
/// endpoint): stop, stay down, listen again. Holds the listener weakly so
/// dropping the server ends it.
fn spawn_restart_requests(ctl: &Arc<Listener>, faults: &Faults) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Duration>();
    faults.set_restart_channel(tx);
    let weak = Arc::downgrade(ctl);
    tokio::spawn(async move {
        while let Some(down) = rx.recv().await {
            // let the response to an admin request leave before the connection closes
            tokio::time::sleep(Duration::from_millis(50)).await;
            let Some(ctl) = weak.upgrade() else { break };
            if ctl.stop().await.is_ok() {
                tokio::time::sleep(down).await;
                if let Err(e) = ctl.restart().await {
                    tracing::warn!(error = %e, "listener restart failed");
                }
            }
        }
    });
}

/// A running embedded API server. Dropping it stops the listener.
pub struct RunningApiServer {
    addr: SocketAddr,
    ca_pem: String,
    admin_token: String,
    state: Arc<AppState>,
    listener: Arc<Listener>,
}

impl std::fmt::Debug for RunningApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningApiServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl RunningApiServer {
    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:PORT` (or the bound address).
    pub fn url(&self) -> String {
        let ip = if self.addr.ip().is_unspecified() {
            std::net::IpAddr::from([127, 0, 0, 1])
        } else {
            self.addr.ip()
        };
        format!("https://{}", SocketAddr::new(ip, self.addr.port()))
    }

    /// PEM of the CA that signed the serving certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// Bearer token of the built-in admin user.
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// The log of stored writes (empty unless
    /// [`ApiServerConfig::write_log`] turned it on).
    pub fn write_log(&self) -> crate::http::write_log::WriteLog {
        self.state.write_log.clone()
    }

    /// Fault-injection handle.
    pub fn faults(&self) -> Faults {
        self.state.faults.clone()
    }

    /// The latest resourceVersion.
    pub fn current_resource_version(&self) -> u64 {
        self.state.cluster.store.current_rv()
    }

    /// Number of stored objects of a resource (storage key: `pods`, `leases.coordination.k8s.io`).
    pub fn object_count(&self, storage_key: &str) -> usize {
        self.state.cluster.store.count(storage_key)
    }

    /// Bytes of serialized JSON stored for a resource's current objects.
    pub fn stored_bytes(&self, storage_key: &str) -> usize {
        self.state.cluster.store.stored_bytes(storage_key)
    }

    /// Bytes of object JSON held by the watch history (bounded by
    /// [`ApiServerConfig::history_bytes`]).
    pub fn history_bytes(&self) -> usize {
        self.state.cluster.store.history_bytes()
    }

    /// Receivers of the store's change broadcast: one per open watch plus
    /// the garbage collector's. A watch that ended (timed out, cut off,
    /// client gone) no longer counts.
    pub fn change_subscribers(&self) -> usize {
        self.state.cluster.store.change_subscribers()
    }

    /// Adds (or replaces) a bearer token while running.
    pub fn add_token(&self, token: impl Into<String>, user: User) {
        let mut t = self.state.tokens.write().unwrap_or_else(|p| p.into_inner());
        t.insert(token, user);
    }

    /// A kubeconfig (YAML) for the admin user.
    pub fn kubeconfig(&self) -> String {
        self.kubeconfig_for_token(&self.admin_token)
    }

    /// A kubeconfig (YAML) authenticating with `token`.
    pub fn kubeconfig_for_token(&self, token: &str) -> String {
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: wasmctrl\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\nusers:\n- name: wasmctrl\n  user:\n    token: {token}\ncontexts:\n- name: wasmctrl\n  context:\n    cluster: wasmctrl\n    user: wasmctrl\n    namespace: default\ncurrent-context: wasmctrl\n",
            url = self.url()
        )
    }

    /// Writes the admin kubeconfig to `path`, readable and writable by the
    /// owner only (mode 0600 on Unix, as kubectl writes kubeconfigs): it
    /// holds the admin's bearer token. An existing file's mode is tightened too.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<()> {
        write_private(path, self.kubeconfig().as_bytes())
    }

    /// A `kube::Config` for `token`, built from the generated kubeconfig.
    pub async fn kube_config_for_token(&self, token: &str) -> Result<kube::Config> {
        let kc = kube::config::Kubeconfig::from_yaml(&self.kubeconfig_for_token(token))
            .map_err(|e| ServerError::Kube(e.to_string()))?;
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| ServerError::Kube(e.to_string()))
    }

    /// A kube client for the admin user.
    pub async fn client(&self) -> Result<kube::Client> {
        self.client_for_token(&self.admin_token.clone()).await
    }

    /// A kube client authenticating with `token`.
    pub async fn client_for_token(&self, token: &str) -> Result<kube::Client> {
        let config = self.kube_config_for_token(token).await?;
        kube::Client::try_from(config).map_err(|e| ServerError::Kube(e.to_string()))
    }

    /// Stops accepting connections and closes open ones (state is kept).
    pub async fn stop_listener(&self) -> Result<()> {
        self.listener.stop().await
    }

    /// Listens again on the same address after [`Self::stop_listener`].
    pub async fn restart_listener(&self) -> Result<()> {
        self.listener.restart().await
    }

    /// Stops the server.
    pub async fn shutdown(self) {
        let _ = self.stop_listener().await;
    }
}

impl Drop for RunningApiServer {
    fn drop(&mut self) {
        if let Some(h) = self.listener.slot().take() {
            let _ = h.stop.send(true);
        }
    }
}

/// Writes `contents` to `path` with mode 0600 (Unix), replacing any
/// previous contents and mode.
fn write_private(path: &Path, contents: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(0o600);
        let mut file = options.open(path)?;
        // `mode` applies only to a file this call creates.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        file.write_all(contents)?;
    }
    #[cfg(not(unix))]
    options.open(path)?.write_all(contents)?;
    Ok(())
}

/// Runs a server until SIGINT/SIGTERM, writing the admin kubeconfig to
/// `kubeconfig_out` if given. What `wasmctrl apiserver` calls.
pub async fn serve_until_signal(
    config: ApiServerConfig,
    kubeconfig_out: Option<&Path>,
) -> Result<()> {
    let server = ApiServer::start(config).await?;
    if let Some(p) = kubeconfig_out {
        server.write_kubeconfig(p)?;
        tracing::info!(path = %p.display(), "wrote kubeconfig");
    }
    tracing::info!(url = %server.url(), "embedded API server listening");
    wait_for_signal().await?;
    server.shutdown().await;
    Ok(())
}

async fn wait_for_signal() -> Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r?,
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c().await?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn accept_backoff_doubles_from_5ms_to_1s_and_resets_after_success() {
        let mut b = AcceptBackoff::default();
        let delays: Vec<u64> = (0..10)
            .map(|_| u64::try_from(b.next_delay().as_millis()).unwrap())
            .collect();
        assert_eq!(delays, [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_millis(5));
    }
}
