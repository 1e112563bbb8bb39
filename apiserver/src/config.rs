//! Configuration of an embedded API server: where it listens, who may
//! talk to it, which controllers it runs, and the limits that keep one
//! client from freezing, crashing or bloating it (body size, watch
//! history bytes, watch and connection timeouts). Defaults follow the real
//! kube-apiserver where it has the same knob. It holds values only; the
//! server, handlers and store enforce them.

use std::net::SocketAddr;
use std::time::Duration;

use crate::auth::User;

/// Default number of changes kept for watch resumption.
pub const DEFAULT_HISTORY: usize = 10_000;
/// Default watch duration when the client sets no `timeoutSeconds` (the real server picks 30–60 min).
pub const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);
/// Default interval between BOOKMARK events (the real server sends one about every minute).
pub const DEFAULT_BOOKMARK_INTERVAL: Duration = Duration::from_secs(60);
/// Default bound on the bytes of serialized objects the watch history
/// holds (each change counts its new and its previous state).
pub const DEFAULT_HISTORY_BYTES: usize = 256 * 1024 * 1024;
/// Default TLS handshake timeout: Go's `http.Server` bounds the handshake
/// by its smallest read timeout, kube-apiserver's `ReadHeaderTimeout` of
/// 32 s (`apiserver/pkg/server/secure_serving.go`).
pub const DEFAULT_TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(32);
/// Default time a client has to send a request's headers, and (HTTP/1)
/// how long an idle keep-alive connection waits for the next request:
/// kube-apiserver's `ReadHeaderTimeout` (32 s).
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);
/// Default time a watch's client has to take the events already queued
/// for it before the watch is closed, as the watch cache closes an
/// unresponsive watcher ("Forcing ... watcher close due to unresponsiveness").
pub const DEFAULT_WATCH_SEND_DEADLINE: Duration = Duration::from_secs(5);
/// How long a watch with `sendInitialEvents` waits for a resourceVersion
/// the store has not reached (the watch cache's `blockTimeout`, 3 s).
pub const DEFAULT_TOO_LARGE_RV_WAIT: Duration = Duration::from_secs(3);
/// The real server's default request body limit
/// (`genericapiserver.Config.MaxRequestBodyBytes`, 3 MiB).
pub const DEFAULT_MAX_REQUEST_BODY_BYTES: usize = 3 * 1024 * 1024;
/// Namespaces a fresh server starts with, as a new cluster does.
pub const INITIAL_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// How the server answers a watch asking for `sendInitialEvents=true` (a
/// streaming list).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WatchList {
    /// Served: the state as `ADDED` events, a bookmark annotated
    /// `k8s.io/initial-events-end`, then changes (the `WatchList` feature
    /// on, as in Kubernetes 1.32 and from 1.34).
    #[default]
    Served,
    /// Refused with 422, as by a server with the `WatchList` feature gate
    /// off (1.33's default, and every release before 1.32).
    Refused,
    /// Refused by the storage layer, as by a 1.32 kube-apiserver on its
    /// defaults (`WatchList` on) over an etcd that cannot report watch
    /// progress (before 3.4.31 and 3.5.13), which streaming lists need: the
    /// watch is answered 200, its one event is an `ERROR` whose object is a
    /// `Status` 500 `InternalError` [`STORAGE_REFUSAL`], and it ends.
    StorageRefused,
    /// Accepted and ignored, as by some aggregated API servers: the watch
    /// goes on as one without the parameter (the state as `ADDED` events,
    /// then changes), and the end of the initial events is never marked.
    Ignored,
}

/// The message of [`WatchList::StorageRefused`]'s `ERROR` event, as
/// kube-apiserver words it.
pub const STORAGE_REFUSAL: &str = "a watch stream was requested by the client but the required storage feature RequestWatchProgress is disabled";

/// Configuration of an embedded API server.
#[derive(Debug, Clone)]
pub struct ApiServerConfig {
    pub(crate) listen: SocketAddr,
    pub(crate) history: usize,
    pub(crate) history_bytes: usize,
    pub(crate) admin_token: Option<String>,
    pub(crate) tokens: Vec<(String, User)>,
    pub(crate) watch_timeout: Duration,
    pub(crate) bookmark_interval: Duration,
    pub(crate) kubelet: bool,
    pub(crate) garbage_collector: bool,
    pub(crate) simulated_nodes: usize,
    pub(crate) max_request_body_bytes: usize,
    pub(crate) tls_handshake_timeout: Duration,
    pub(crate) header_read_timeout: Duration,
    pub(crate) watch_send_deadline: Duration,
    pub(crate) too_large_rv_wait: Duration,
    pub(crate) watch_list: WatchList,
    pub(crate) write_log: bool,
}

impl Default for ApiServerConfig {
    fn default() -> Self {
        ApiServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            history: DEFAULT_HISTORY,
            history_bytes: DEFAULT_HISTORY_BYTES,
            admin_token: None,
            tokens: Vec::new(),
            watch_timeout: DEFAULT_WATCH_TIMEOUT,
            bookmark_interval: DEFAULT_BOOKMARK_INTERVAL,
            kubelet: true,
            garbage_collector: true,
            simulated_nodes: 0,
            max_request_body_bytes: DEFAULT_MAX_REQUEST_BODY_BYTES,
            tls_handshake_timeout: DEFAULT_TLS_HANDSHAKE_TIMEOUT,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            watch_send_deadline: DEFAULT_WATCH_SEND_DEADLINE,
            too_large_rv_wait: DEFAULT_TOO_LARGE_RV_WAIT,
            watch_list: WatchList::Served,
            write_log: false,
        }
    }
}

impl ApiServerConfig {
    /// Record every stored write with who sent it (see
    /// [`write_log`](crate::write_log)); off by default: the log grows
    /// with every write and is never trimmed.
    #[must_use]
    pub fn write_log(mut self, on: bool) -> Self {
        self.write_log = on;
        self
    }

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

    /// Simulated nodes to run, as kwok adds them to envtest (default 0:
    /// none, as on a bare kube-apiserver, where a pod nobody binds stays
    /// Pending). With `n > 0` the server registers `n` Ready nodes named
    /// `sim-node-0`…, a scheduler binds each pending pod of the default
    /// scheduler to one whose labels its `nodeSelector` matches, and the
    /// node's kubelet moves it to Running with every container ready,
    /// writing the `PodScheduled`, `Initialized`, `ContainersReady` and
    /// `Ready` conditions step by step, and a minimal Deployment →
    /// ReplicaSet → Pod controller keeps Deployments and ReplicaSets and
    /// their status moving. No container runs: exec, logs, port-forward
    /// and probes are not simulated.
    #[must_use]
    pub fn simulated_nodes(mut self, n: usize) -> Self {
        self.simulated_nodes = n;
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

    /// Bytes of serialized objects the watch history may hold (default
    /// [`DEFAULT_HISTORY_BYTES`]); the oldest changes leave first, and a
    /// watch from a resourceVersion that left gets 410 Gone. The newest
    /// change is always kept, however large.
    #[must_use]
    pub fn history_bytes(mut self, bytes: usize) -> Self {
        self.history_bytes = bytes;
        self
    }

    /// Largest request body accepted (default 3 MiB, the real server's
    /// `MaxRequestBodyBytes`); a larger one gets 413 `RequestEntityTooLarge`.
    #[must_use]
    pub fn max_request_body_bytes(mut self, bytes: usize) -> Self {
        self.max_request_body_bytes = bytes;
        self
    }

    /// How long a new connection may take to complete its TLS handshake
    /// before it is closed (default [`DEFAULT_TLS_HANDSHAKE_TIMEOUT`]).
    #[must_use]
    pub fn tls_handshake_timeout(mut self, d: Duration) -> Self {
        self.tls_handshake_timeout = d;
        self
    }

    /// How long a client may take to send a request's headers, and how
    /// long an idle HTTP/1 keep-alive connection stays open (default
    /// [`DEFAULT_HEADER_READ_TIMEOUT`]).
    #[must_use]
    pub fn header_read_timeout(mut self, d: Duration) -> Self {
        self.header_read_timeout = d;
        self
    }

    /// How long a watch's client may leave queued events unread before the
    /// watch is cut off (default [`DEFAULT_WATCH_SEND_DEADLINE`]). A cut-off
    /// watch frees its queue; the client re-watches from its last
    /// resourceVersion.
    #[must_use]
    pub fn watch_send_deadline(mut self, d: Duration) -> Self {
        self.watch_send_deadline = d;
        self
    }

    /// How long a watch with `sendInitialEvents=true` waits for a
    /// resourceVersion newer than the store's before it fails with 504
    /// "Too large resource version" (default [`DEFAULT_TOO_LARGE_RV_WAIT`]).
    #[must_use]
    pub fn too_large_resource_version_wait(mut self, d: Duration) -> Self {
        self.too_large_rv_wait = d;
        self
    }

    /// How watches asking for `sendInitialEvents` are answered (default
    /// [`WatchList::Served`]).
    #[must_use]
    pub fn watch_list(mut self, mode: WatchList) -> Self {
        self.watch_list = mode;
        self
    }
}
