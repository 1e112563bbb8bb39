//! Watch health: how long an informer may go without a working watch
//! before the host stops claiming to be ready, and before it gives up.
//!
//! Owns the [`WatchHealthConfig`], each informer's [`WatchHealth`] record
//! (is a watch established, since when is it failing, with what error) and
//! the client wrapper that notices a watch being answered.
//! It never retries anything (kube-runtime's watcher backoff does) and
//! never ends the process itself: an informer past its deadline reports
//! itself failed, and the supervisor's existing failure path exits.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::state::SyncError;
use crate::sync::lock;

/// Default time without a working watch after which the host is not
/// ready: long enough for a watch to be re-established after an API
/// server restart (kube-runtime's watcher backs off up to 30 s between
/// attempts), short enough that a Service stops routing to a host
/// serving a stale cache within a minute.
pub const DEFAULT_UNHEALTHY_AFTER: Duration = Duration::from_secs(30);
/// Default time without a working watch after which the host exits
/// non-zero: five minutes outlasts a control-plane rolling upgrade; past
/// it, a restart (new credentials, new CA bundle, fresh connections) is
/// more likely to help than further retries.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(300);
/// Default time a streaming list may go without sending anything before
/// marking the end of its initial events, after which the informer lists
/// in pages instead. A server serving streaming lists sends the initial
/// events back to back and the mark right after them (waiting at most 3 s
/// first for its cache to catch up); one that accepted the request and
/// ignored it (some aggregated API servers) never sends the mark.
pub const DEFAULT_STREAMING_LIST_WAIT: Duration = Duration::from_secs(30);

/// How long a failing watch is tolerated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchHealthConfig {
    /// After this long without a working watch, the host is not ready.
    pub unhealthy_after: Duration,
    /// After this long without a working watch, the informer fails and the
    /// host exits non-zero.
    pub deadline: Duration,
    /// After this long with nothing from a streaming list that has not
    /// marked the end of its initial events, the informer lists in pages.
    pub streaming_list_wait: Duration,
}

impl Default for WatchHealthConfig {
    fn default() -> Self {
        WatchHealthConfig {
            unhealthy_after: DEFAULT_UNHEALTHY_AFTER,
            deadline: DEFAULT_DEADLINE,
            streaming_list_wait: DEFAULT_STREAMING_LIST_WAIT,
        }
    }
}

impl WatchHealthConfig {
    /// Sets the time after which a failing watch makes the host not ready.
    #[must_use]
    pub fn unhealthy_after(mut self, after: Duration) -> Self {
        self.unhealthy_after = after;
        self
    }

    /// Sets the time after which a failing watch ends the host. Shorter
    /// than `unhealthy_after`, the host exits without ever reporting
    /// not-ready for it.
    #[must_use]
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Sets how long a streaming list may send nothing before marking the
    /// end of its initial events (then the informer lists in pages).
    #[must_use]
    pub fn streaming_list_wait(mut self, wait: Duration) -> Self {
        self.streaming_list_wait = wait;
        self
    }
}

#[derive(Debug, Default)]
struct State {
    /// A watch request of this informer has been answered 2xx at least once.
    established: bool,
    /// Since when list or watch requests have been failing, with no watch
    /// established since.
    failing_since: Option<Instant>,
    /// The latest failure, described.
    last_error: Option<String>,
}

/// One informer's watch health. Cheap to clone; clones share the record.
#[derive(Debug, Clone, Default)]
pub struct WatchHealth {
    state: Arc<Mutex<State>>,
}

/// What [`WatchHealth::status`] finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// No failure since the last established watch (or none yet).
    Healthy,
    /// Failing for `for_` with `error` as the latest failure.
    Failing {
        /// How long.
        for_: Duration,
        /// The latest failure.
        error: String,
    },
}

impl WatchHealth {
    /// A watch request was answered 2xx: the informer follows the server again.
    pub fn watch_established(&self) {
        let mut s = lock(&self.state);
        if let Some(since) = s.failing_since.take() {
            tracing::info!(
                "watch re-established after {:.1} s of failures",
                since.elapsed().as_secs_f64()
            );
        }
        s.established = true;
    }

    /// The watch answered 2xx established nothing after all (a streaming
    /// list refused in its first event), and none did before it.
    pub(crate) fn not_established(&self) {
        lock(&self.state).established = false;
    }

    /// Whether a watch has ever been established.
    pub fn ever_established(&self) -> bool {
        lock(&self.state).established
    }

    /// Records a failed list or watch; returns whether it starts a failure
    /// period (the previous request succeeded).
    pub fn failed(&self, error: String) -> bool {
        let mut s = lock(&self.state);
        s.last_error = Some(error);
        let first = s.failing_since.is_none();
        s.failing_since.get_or_insert_with(Instant::now);
        first
    }

    /// When the current failure period passes `after`, if failing.
    pub fn failing_past(&self, after: Duration) -> Option<Instant> {
        lock(&self.state).failing_since.map(|since| since + after)
    }

    /// Healthy, or failing for how long and why.
    pub fn status(&self) -> Status {
        let s = lock(&self.state);
        match s.failing_since {
            None => Status::Healthy,
            Some(since) => Status::Failing {
                for_: since.elapsed(),
                error: s.last_error.clone().unwrap_or_default(),
            },
        }
    }

    /// The error an informer for `resource` fails with once no watch has
    /// worked for `config.deadline`.
    pub fn deadline_passed(&self, config: &WatchHealthConfig, resource: &str) -> SyncError {
        let error = match self.status() {
            Status::Failing { error, .. } => error,
            Status::Healthy => String::new(),
        };
        SyncError {
            verb: "watch",
            resource: resource.to_string(),
            code: None,
            message: format!(
                "no working watch for {} s (--watch-failure-deadline-seconds); last error: {error}",
                config.deadline.as_secs_f64()
            ),
        }
    }

    /// Why the informer for `resource` makes the host not ready under
    /// `config`, if it does.
    pub fn unready(&self, resource: &str, config: &WatchHealthConfig) -> Option<String> {
        match self.status() {
            Status::Failing { for_, error } if for_ >= config.unhealthy_after => Some(format!(
                "no working watch of {resource} for {:.0} s (not ready after {} s, exiting after {} s): {error}",
                for_.as_secs_f64(),
                config.unhealthy_after.as_secs_f64(),
                config.deadline.as_secs_f64(),
            )),
            _ => None,
        }
    }
}

/// `client`, telling `health` each time a watch request is answered 2xx:
/// kube-runtime's watcher resumes a watch silently, and that answer is the
/// only sign the informer follows the server again.
pub(crate) fn observed(client: kube::Client, health: WatchHealth) -> kube::Client {
    let namespace = client.default_namespace().to_string();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let (client, health) = (client.clone(), health.clone());
        let watch = req
            .uri()
            .query()
            .is_some_and(|q| q.split('&').any(|p| p == "watch=true"));
        async move {
            let response = client.send(req).await;
            if watch && matches!(&response, Ok(r) if r.status().is_success()) {
                health.watch_established();
            }
            response
        }
    });
    kube::Client::new(service, namespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_failing_watch_is_unready_only_after_the_grace_time_and_until_a_watch_works() {
        let config = WatchHealthConfig::default()
            .unhealthy_after(Duration::from_secs(30))
            .deadline(Duration::from_secs(300));
        let h = WatchHealth::default();
        h.watch_established();
        assert!(h.failed("403".into()), "starts a failure period");
        assert!(!h.failed("503".into()), "continues it");
        tokio::time::advance(Duration::from_secs(29)).await;
        assert_eq!(h.unready("pods", &config), None);
        tokio::time::advance(Duration::from_secs(2)).await;
        let why = h.unready("pods", &config).expect("unready after 30 s");
        assert!(why.contains("pods") && why.contains("503"), "{why}");
        assert_eq!(
            h.failing_past(config.deadline),
            Some(Instant::now() - Duration::from_secs(31) + config.deadline)
        );
        h.watch_established();
        assert_eq!(h.status(), Status::Healthy);
        assert_eq!(h.unready("pods", &config), None);
        assert_eq!(h.failing_past(config.deadline), None);
    }
}
