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
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use super::auth::{Tokens, User};
use super::faults::Faults;
use super::gc;
use super::handlers::{self, AppState};
use super::objects::{now_rfc3339, prepare_create};
use super::registry::Registry;
use super::store::Store;

/// Default number of changes kept for watch resumption.
pub const DEFAULT_HISTORY: usize = 10_000;
/// Default watch duration when the client sets no `timeoutSeconds` (the real server picks 30–60 min).
pub const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);
/// Default interval between BOOKMARK events (the real server sends one about every minute).
pub const DEFAULT_BOOKMARK_INTERVAL: Duration = Duration::from_secs(60);
/// Namespaces a fresh server starts with, as a new cluster does.
pub const INITIAL_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

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

/// Configuration of an embedded API server.
#[derive(Debug, Clone)]
pub struct ApiServerConfig {
    listen: SocketAddr,
    history: usize,
    admin_token: Option<String>,
    tokens: Vec<(String, User)>,
    watch_timeout: Duration,
    bookmark_interval: Duration,
    kubelet: bool,
    garbage_collector: bool,
}

impl Default for ApiServerConfig {
    fn default() -> Self {
        ApiServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            history: DEFAULT_HISTORY,
            admin_token: None,
            tokens: Vec::new(),
            watch_timeout: DEFAULT_WATCH_TIMEOUT,
            bookmark_interval: DEFAULT_BOOKMARK_INTERVAL,
            kubelet: true,
            garbage_collector: true,
        }
    }
}

impl ApiServerConfig {
    /// Address to listen on; port 0 picks an ephemeral port (default `127.0.0.1:0`).
    #[must_use]
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// Changes kept for watch resumption. A watch from an older resourceVersion gets 410 Gone.
    #[must_use]
    pub fn history(mut self, n: usize) -> Self {
        self.history = n;
        self
    }

    /// Bearer token of the built-in `admin` user (default: random).
    #[must_use]
    pub fn admin_token(mut self, token: impl Into<String>) -> Self {
        self.admin_token = Some(token.into());
        self
    }

    /// Adds a token for `user` (see [`User::with_rules`]).
    #[must_use]
    pub fn token(mut self, token: impl Into<String>, user: User) -> Self {
        self.tokens.push((token.into(), user));
        self
    }

    /// Whether a stand-in for each pod's kubelet removes a gracefully
    /// deleted pod when its grace period ends (default true). Without it a
    /// deleted scheduled pod stays terminating, as on a cluster whose
    /// kubelets are gone.
    #[must_use]
    pub fn kubelet(mut self, on: bool) -> Self {
        self.kubelet = on;
        self
    }

    /// Whether a garbage collector deletes dependents whose owners are
    /// gone and finishes foreground and orphan deletions (default true).
    /// Without it an owner deleted with `propagationPolicy: Foreground` or
    /// `Orphan` keeps its finalizer, as on a cluster whose
    /// kube-controller-manager is down.
    #[must_use]
    pub fn garbage_collector(mut self, on: bool) -> Self {
        self.garbage_collector = on;
        self
    }

    /// Watch duration when the client sets no `timeoutSeconds`.
    #[must_use]
    pub fn watch_timeout(mut self, d: Duration) -> Self {
        self.watch_timeout = d;
        self
    }

    /// Interval of periodic BOOKMARK events. Short intervals are for tests only:
    /// every bookmark advances clients' resume resourceVersion.
    #[must_use]
    pub fn bookmark_interval(mut self, d: Duration) -> Self {
        self.bookmark_interval = d;
        self
    }
}

/// Entry point: `ApiServer::start(config)`.
#[derive(Debug)]
pub struct ApiServer;

impl ApiServer {
    /// Generates certificates, seeds the initial namespaces and starts listening.
    pub async fn start(config: ApiServerConfig) -> Result<RunningApiServer> {
        let (ca_pem, tls) = certificates()?;
        let store = Arc::new(Store::new(config.history));
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
        seed_namespaces(&store, &registry);
        let state = Arc::new(AppState {
            faults: Faults::new(store.clone()),
            store,
            registry,
            tokens: Arc::new(RwLock::new(tokens)),
            watch_timeout: config.watch_timeout,
            bookmark_interval: config.bookmark_interval,
            kubelet: config.kubelet,
        });
        if config.garbage_collector {
            gc::spawn(&state);
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

fn seed_namespaces(store: &Store, registry: &Registry) {
    let Some(info) = registry.lookup("", "v1", "namespaces") else {
        return;
    };
    let now = now_rfc3339();
    for ns in INITIAL_NAMESPACES {
        let mut obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        prepare_create(&info, &mut obj, &now);
        // A fresh store cannot already hold them.
        let _ = store.create("namespaces", (String::new(), ns.to_string()), obj);
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
        let task = tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = stopped.changed() => break,
                    a = listener.accept() => a,
                };
                let Ok((tcp, _)) = accepted else { continue };
                let acceptor = acceptor.clone();
                let svc = TowerToHyperService::new(router.clone());
                let mut conn_stop = stopped.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let builder = auto::Builder::new(TokioExecutor::new());
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

    /// Fault-injection handle.
    pub fn faults(&self) -> Faults {
        self.state.faults.clone()
    }

    /// The latest resourceVersion.
    pub fn current_resource_version(&self) -> u64 {
        self.state.store.current_rv()
    }

    /// Number of stored objects of a resource (storage key: `pods`, `leases.coordination.k8s.io`).
    pub fn object_count(&self, storage_key: &str) -> usize {
        self.state.store.count(storage_key)
    }

    /// Bytes of serialized JSON stored for a resource's current objects.
    pub fn stored_bytes(&self, storage_key: &str) -> usize {
        self.state.store.stored_bytes(storage_key)
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

    /// Writes the admin kubeconfig to `path`.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<()> {
        std::fs::write(path, self.kubeconfig())?;
        Ok(())
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
