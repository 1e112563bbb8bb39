//! Fault injection: a [`Faults`] handle tests (and the `/wasmctrl/faults`
//! admin endpoint) use to drop watches, compact history, fail requests,
//! hold requests until released, add latency and deny verbs. Faults only
//! decide *whether* a request is disturbed; the request handler applies
//! them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::{mpsc, watch};

use crate::status::ApiError;
use crate::storage::store::Store;

/// "Fail the next `count` requests matching `verb`/`resource` with `code`".
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FailRequests {
    /// Verb to match (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`); None matches all.
    #[serde(default)]
    pub verb: Option<String>,
    /// Resource plural to match (`pods`); None matches all.
    #[serde(default)]
    pub resource: Option<String>,
    /// How many requests to fail.
    pub count: u32,
    /// HTTP status to answer with (409, 429, 500, 503, ...).
    pub code: u16,
    /// `Retry-After` seconds for 429 (and 503).
    #[serde(default)]
    pub retry_after: u64,
}

impl FailRequests {
    /// Fail the next `count` requests of any verb and resource with `code`.
    pub fn new(code: u16, count: u32) -> Self {
        FailRequests {
            verb: None,
            resource: None,
            count,
            code,
            retry_after: 1,
        }
    }

    /// Only requests with this verb.
    #[must_use]
    pub fn verb(mut self, verb: &str) -> Self {
        self.verb = Some(verb.into());
        self
    }

    /// Only requests for this resource plural.
    #[must_use]
    pub fn resource(mut self, resource: &str) -> Self {
        self.resource = Some(resource.into());
        self
    }

    /// `Retry-After` seconds sent with 429.
    #[must_use]
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = secs;
        self
    }

    fn matches(&self, verb: &str, resource: &str) -> bool {
        self.verb.as_deref().is_none_or(|v| v == verb)
            && self.resource.as_deref().is_none_or(|r| r == resource)
    }
}

/// One admin-endpoint command (`POST /wasmctrl/faults`, JSON body `{"action": ...}`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum FaultCommand {
    /// Close every open watch stream.
    DropWatches,
    /// Forget history so watches from older resourceVersions get 410.
    CompactHistory,
    /// Fail matching requests.
    Fail(FailRequests),
    /// Delay every request by `millis`.
    Latency {
        /// Delay in milliseconds (0 removes it).
        millis: u64,
    },
    /// Answer 403 to every request with this verb.
    DenyVerb {
        /// The verb.
        verb: String,
    },
    /// Stop the listener (closing every connection), stay down for
    /// `down_millis`, then listen again on the same address; state is kept.
    RestartListener {
        /// How long the server stays unreachable.
        #[serde(default)]
        down_millis: u64,
    },
    /// Undo every fault.
    Clear,
}

/// Requests of one verb and resource held until [`Held::release`].
#[derive(Debug)]
struct Hold {
    verb: String,
    resource: String,
    released: watch::Sender<bool>,
    /// Requests waiting at the hold now.
    waiting: Arc<AtomicU64>,
}

/// A hold on requests ([`Faults::hold`]): every matching request waits
/// until it is released (or dropped), then goes on as usual.
#[derive(Debug)]
pub struct Held {
    faults: Faults,
    released: watch::Sender<bool>,
    waiting: Arc<AtomicU64>,
}

impl Held {
    /// How many requests are waiting at the hold now.
    pub fn waiting(&self) -> u64 {
        self.waiting.load(Ordering::SeqCst)
    }

    /// Lets every waiting request go on, and later ones through.
    pub fn release(self) {}
}

impl Drop for Held {
    fn drop(&mut self) {
        lock(&self.faults.inner.holds).retain(|h| !h.released.same_channel(&self.released));
        self.released.send_replace(true);
    }
}

#[derive(Debug)]
struct Inner {
    store: Arc<Store>,
    failures: Mutex<Vec<FailRequests>>,
    holds: Mutex<Vec<Hold>>,
    denied: Mutex<Vec<String>>,
    latency_ms: AtomicU64,
    drops: watch::Sender<u64>,
    /// Requests failed so far (observable by tests).
    injected: AtomicU64,
    /// Where listener restarts are requested (set by the server).
    restart: Mutex<Option<mpsc::UnboundedSender<Duration>>>,
}

/// Handle to the server's fault state; cheap to clone.
#[derive(Debug, Clone)]
pub struct Faults {
    inner: Arc<Inner>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Faults {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        let (drops, _) = watch::channel(0);
        Faults {
            inner: Arc::new(Inner {
                store,
                failures: Mutex::new(Vec::new()),
                holds: Mutex::new(Vec::new()),
                denied: Mutex::new(Vec::new()),
                latency_ms: AtomicU64::new(0),
                drops,
                injected: AtomicU64::new(0),
                restart: Mutex::new(None),
            }),
        }
    }

    /// Closes every open watch stream (clients see the stream end).
    pub fn drop_watches(&self) {
        self.inner.drops.send_modify(|n| *n += 1);
    }

    /// Forgets all watch history at the current resourceVersion: a watch (or
    /// list continue) from an older resourceVersion is answered 410 Expired.
    pub fn compact_history(&self) {
        self.inner.store.compact();
    }

    /// Fails the next matching requests.
    pub fn fail(&self, rule: FailRequests) {
        lock(&self.inner.failures).push(rule);
    }

    /// Holds every request with `verb` for `resource` (a plural) from now
    /// on, before it is authorised or carried out, until the result is
    /// released: a test keeps a client's write in flight for as long as it
    /// needs, without guessing a latency.
    pub fn hold(&self, verb: &str, resource: &str) -> Held {
        let (released, _) = watch::channel(false);
        let waiting = Arc::new(AtomicU64::new(0));
        lock(&self.inner.holds).push(Hold {
            verb: verb.into(),
            resource: resource.into(),
            released: released.clone(),
            waiting: waiting.clone(),
        });
        Held {
            faults: self.clone(),
            released,
            waiting,
        }
    }

    /// Waits while a hold matches `verb` on `resource`.
    pub(crate) async fn wait_if_held(&self, verb: &str, resource: &str) {
        let held = lock(&self.inner.holds)
            .iter()
            .find(|h| h.verb == verb && h.resource == resource)
            .map(|h| (h.released.subscribe(), h.waiting.clone()));
        let Some((mut released, waiting)) = held else {
            return;
        };
        waiting.fetch_add(1, Ordering::SeqCst);
        // An error: the hold is gone, which releases it too.
        let _ = released.wait_for(|r| *r).await;
        waiting.fetch_sub(1, Ordering::SeqCst);
    }

    /// Delays every request by `latency` (zero removes the delay).
    pub fn set_latency(&self, latency: Duration) {
        let ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
        self.inner.latency_ms.store(ms, Ordering::Relaxed);
    }

    /// Answers 403 Forbidden to every request with `verb`, whatever the token allows.
    pub fn deny_verb(&self, verb: &str) {
        lock(&self.inner.denied).push(verb.to_string());
    }

    /// Removes every fault (latency, denials, pending failures).
    pub fn clear(&self) {
        lock(&self.inner.failures).clear();
        lock(&self.inner.denied).clear();
        self.inner.latency_ms.store(0, Ordering::Relaxed);
    }

    /// How many requests were failed by injected failures so far.
    pub fn injected_failures(&self) -> u64 {
        self.inner.injected.load(Ordering::Relaxed)
    }

    /// Applies an admin-endpoint command.
    pub fn apply(&self, cmd: FaultCommand) {
        match cmd {
            FaultCommand::DropWatches => self.drop_watches(),
            FaultCommand::CompactHistory => self.compact_history(),
            FaultCommand::Fail(rule) => self.fail(rule),
            FaultCommand::Latency { millis } => self.set_latency(Duration::from_millis(millis)),
            FaultCommand::DenyVerb { verb } => self.deny_verb(&verb),
            FaultCommand::RestartListener { down_millis } => {
                self.restart_listener(Duration::from_millis(down_millis));
            }
            FaultCommand::Clear => self.clear(),
        }
    }

    /// Stops the listener shortly after this call (closing every
    /// connection and watch), keeps it down for `down`, then listens again
    /// on the same address. Returns false if the server is gone.
    pub fn restart_listener(&self, down: Duration) -> bool {
        lock(&self.inner.restart)
            .as_ref()
            .is_some_and(|tx| tx.send(down).is_ok())
    }

    pub(crate) fn set_restart_channel(&self, tx: mpsc::UnboundedSender<Duration>) {
        *lock(&self.inner.restart) = Some(tx);
    }

    pub(crate) fn latency(&self) -> Option<Duration> {
        match self.inner.latency_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    pub(crate) fn is_denied(&self, verb: &str) -> bool {
        lock(&self.inner.denied).iter().any(|v| v == verb)
    }

    /// Consumes one matching failure, if any.
    pub(crate) fn take_failure(&self, verb: &str, resource: &str) -> Option<ApiError> {
        let mut rules = lock(&self.inner.failures);
        let idx = rules.iter().position(|r| r.matches(verb, resource))?;
        let rule = &mut rules[idx];
        rule.count = rule.count.saturating_sub(1);
        let (code, retry_after) = (rule.code, rule.retry_after);
        if rule.count == 0 {
            rules.remove(idx);
        }
        self.inner.injected.fetch_add(1, Ordering::Relaxed);
        let message = match code {
            429 => "the server has received too many requests and has asked us to try again later"
                .to_string(),
            503 => "the server is currently unable to handle the request".to_string(),
            409 => format!("Operation cannot be fulfilled on {resource}: injected conflict"),
            _ => format!("injected failure ({code})"),
        };
        Some(ApiError::from_code(code, message, retry_after))
    }

    pub(crate) fn watch_drops(&self) -> watch::Receiver<u64> {
        self.inner.drops.subscribe()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_consumed_in_order_and_only_when_matching() {
        let f = Faults::new(Arc::new(Store::new(10)));
        f.fail(FailRequests::new(503, 2).verb("list").resource("pods"));
        assert!(f.take_failure("get", "pods").is_none());
        assert!(f.take_failure("list", "configmaps").is_none());
        assert_eq!(f.take_failure("list", "pods").unwrap().code(), 503);
        assert_eq!(f.take_failure("list", "pods").unwrap().code(), 503);
        assert!(f.take_failure("list", "pods").is_none());
        assert_eq!(f.injected_failures(), 2);
    }

    #[tokio::test]
    async fn a_held_request_waits_until_released_and_others_pass() {
        let f = Faults::new(Arc::new(Store::new(10)));
        let held = f.hold("patch", "configmaps");
        f.wait_if_held("patch", "pods").await;
        f.wait_if_held("get", "configmaps").await;
        let waiter = {
            let f = f.clone();
            tokio::spawn(async move { f.wait_if_held("patch", "configmaps").await })
        };
        while held.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        assert!(!waiter.is_finished());
        held.release();
        waiter.await.unwrap();
        f.wait_if_held("patch", "configmaps").await;
    }

    #[test]
    fn admin_commands_parse_from_json() {
        let cmd: FaultCommand = serde_json::from_str(
            r#"{"action":"fail","verb":"get","count":1,"code":429,"retry_after":3}"#,
        )
        .unwrap();
        assert_eq!(
            cmd,
            FaultCommand::Fail(FailRequests::new(429, 1).verb("get").retry_after(3))
        );
        let cmd: FaultCommand = serde_json::from_str(r#"{"action":"drop-watches"}"#).unwrap();
        assert_eq!(cmd, FaultCommand::DropWatches);
    }
}
