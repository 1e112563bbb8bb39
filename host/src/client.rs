//! The host's Kubernetes client: one `kube::Client` for every guest, with a
//! client-side rate limit (QPS and burst, as client-go's `rest.Config`) on
//! every request the host makes. Owns building the client from a
//! `kube::Config`, the limiter and metrics layers, and where kube's retry
//! sits. It never decides what to request; informers, the actuator and
//! leader election all go through the one client built here.
//!
//! # Where the retry sits
//! kube's retry of 429/503/504 sits *outside* both layers, so every
//! attempt, retries included, waits for a token and is counted in
//! `rest_client_*` (kube's own builder puts its retry underneath any layer
//! added later, where neither sees it).

use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tower::{Layer, Service};

/// Client-side request rate limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClientLimits {
    /// Sustained requests per second.
    pub qps: f64,
    /// Requests that may go out at once after a quiet period.
    pub burst: u32,
}

impl Default for ClientLimits {
    /// client-go's defaults for controllers are 5 QPS / burst 10; a host
    /// serving several guests gets more headroom.
    fn default() -> Self {
        ClientLimits {
            qps: 20.0,
            burst: 40,
        }
    }
}

impl ClientLimits {
    /// Sets QPS.
    #[must_use]
    pub fn qps(mut self, qps: f64) -> Self {
        self.qps = qps;
        self
    }

    /// Sets burst.
    #[must_use]
    pub fn burst(mut self, burst: u32) -> Self {
        self.burst = burst;
        self
    }

    fn quota(&self) -> Option<Quota> {
        if !(self.qps.is_finite() && self.qps > 0.0) {
            return None;
        }
        let period = std::time::Duration::from_secs_f64(1.0 / self.qps);
        let burst = NonZeroU32::new(self.burst.max(1))?;
        Quota::with_period(period).map(|q| q.allow_burst(burst))
    }
}

/// A tower layer that waits for a token before each request.
#[derive(Clone)]
pub struct RateLimitLayer {
    limiter: Option<Arc<DefaultDirectRateLimiter>>,
    metrics: Option<(Arc<crate::metrics::Metrics>, Arc<str>)>,
}

impl RateLimitLayer {
    /// A layer enforcing `limits` (no limit for a non-positive QPS).
    pub fn new(limits: ClientLimits) -> Self {
        RateLimitLayer {
            limiter: limits.quota().map(|q| Arc::new(RateLimiter::direct(q))),
            metrics: None,
        }
    }

    /// Records each wait for a token in
    /// `rest_client_rate_limiter_duration_seconds{verb,host}` (client-go's
    /// name), one observation per request that passed the limiter.
    #[must_use]
    pub fn measured(mut self, metrics: Arc<crate::metrics::Metrics>, host: Arc<str>) -> Self {
        self.metrics = Some((metrics, host));
        self
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimited {
            inner,
            limiter: self.limiter.clone(),
            metrics: self.metrics.clone(),
            wait: None,
            waited: None,
            permitted: false,
        }
    }
}

type Wait = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The rate-limited service. The wait happens in `poll_ready`, so it works
/// behind kube's buffer with a service that is not `Clone`.
pub struct RateLimited<S> {
    inner: S,
    limiter: Option<Arc<DefaultDirectRateLimiter>>,
    metrics: Option<(Arc<crate::metrics::Metrics>, Arc<str>)>,
    /// The wait for the next token, with when it began.
    wait: Option<(Wait, std::time::Instant)>,
    /// How long the permitted request waited for its token.
    waited: Option<std::time::Duration>,
    permitted: bool,
}

impl<S, B> Service<http::Request<B>> for RateLimited<S>
where
    S: Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if !self.permitted {
            if let Some(limiter) = &self.limiter {
                let (wait, since) = self.wait.get_or_insert_with(|| {
                    let limiter = limiter.clone();
                    let wait: Wait = Box::pin(async move { limiter.until_ready().await });
                    (wait, std::time::Instant::now())
                });
                if wait.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.waited = Some(since.elapsed());
                self.wait = None;
            }
            self.permitted = true;
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        self.permitted = false;
        if let (Some(waited), Some((metrics, host))) = (self.waited.take(), &self.metrics) {
            record_rate_limiter_wait(metrics, req.method().as_str(), host, waited);
        }
        self.inner.call(req)
    }
}

/// A tower layer recording `rest_client_requests_total` and
/// `rest_client_request_duration_seconds` for every request.
#[derive(Clone)]
pub struct MetricsLayer {
    metrics: Arc<crate::metrics::Metrics>,
    host: Arc<str>,
}

impl<S> Layer<S> for MetricsLayer {
    type Service = Measured<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Measured {
            inner,
            metrics: self.metrics.clone(),
            host: self.host.clone(),
        }
    }
}

/// The measuring service.
pub struct Measured<S> {
    inner: S,
    metrics: Arc<crate::metrics::Metrics>,
    host: Arc<str>,
}

impl<S, ReqB, ResB> Service<http::Request<ReqB>> for Measured<S>
where
    S: Service<http::Request<ReqB>, Response = http::Response<ResB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<ReqB>) -> Self::Future {
        let method = req.method().as_str().to_string();
        let metrics = self.metrics.clone();
        let host = self.host.clone();
        let started = std::time::Instant::now();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let result = fut.await;
            let code = result.as_ref().ok().map(|r| r.status().as_u16());
            record_request(&metrics, &method, &host, code, started.elapsed());
            result
        })
    }
}

/// Requests queued in front of the limiter (kube's own buffer size).
const BUFFER: usize = 1024;

/// The `User-Agent` of the host's requests: `wasmctrl/VERSION`, and, given
/// the replica's identity, `wasmctrl/VERSION (IDENTITY)`, so an API
/// server's audit log (and the embedded server's write log) tells the
/// replicas apart. The part before the `/` is what an API server names as
/// the manager of a write without `fieldManager`: `wasmctrl` for every
/// replica, so the identity never splits field ownership. Characters a
/// header cannot carry (and parentheses) are left out of the identity.
pub fn user_agent(identity: Option<&str>) -> http::HeaderValue {
    let base = concat!("wasmctrl/", env!("CARGO_PKG_VERSION"));
    let identity: String = identity
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_graphic() && !matches!(c, '(' | ')'))
        .collect();
    let text = if identity.is_empty() {
        base.to_string()
    } else {
        format!("{base} ({identity})")
    };
    http::HeaderValue::from_str(&text).unwrap_or(http::HeaderValue::from_static(base))
}

/// Builds the host's client from `config` with `limits`, recording request
/// metrics when `metrics` is given. Must be called inside a tokio runtime
/// (the buffer in front of the limiter runs as a task).
///
/// The stack, outermost first: kube's server-aware retry of 429/503/504
/// (`RetryPolicy::server_retry`, the policy kube would use, when
/// `config.default_retry` is set, as it is by default), a buffer, the rate
/// limiter, the metrics, then kube's own stack (auth, base URI, HTTP)
/// without its retry. So each attempt takes a token and is counted.
///
/// Every request carries [`user_agent`]`(None)` unless `config.headers`
/// names a `User-Agent` already.
pub fn build(
    mut config: kube::Config,
    limits: ClientLimits,
    metrics: Option<Arc<crate::metrics::Metrics>>,
) -> Result<kube::Client, kube::Error> {
    let host: Arc<str> = config
        .cluster_url
        .authority()
        .map_or_else(|| Arc::from(""), |a| Arc::from(a.as_str()));
    let retry = std::mem::replace(&mut config.default_retry, false);
    if !config
        .headers
        .iter()
        .any(|(name, _)| name == http::header::USER_AGENT)
    {
        config
            .headers
            .push((http::header::USER_AGENT, user_agent(None)));
    }
    let builder = kube::client::ClientBuilder::try_from(config)?;
    let mut limiter = RateLimitLayer::new(limits);
    if let Some(metrics) = &metrics {
        limiter = limiter.measured(metrics.clone(), host.clone());
    }
    let builder = builder
        .with_layer(&tower::util::option_layer(
            metrics.map(|metrics| MetricsLayer { metrics, host }),
        ))
        .with_layer(&limiter)
        .with_layer(&tower::buffer::BufferLayer::new(BUFFER));
    Ok(builder
        .with_layer(&tower::util::option_layer(retry.then(|| {
            tower::retry::RetryLayer::new(kube::client::retry::RetryPolicy::server_retry())
        })))
        .build())
}

/// Records one API request in `rest_client_*`.
fn record_request(
    m: &crate::metrics::Metrics,
    method: &str,
    host: &str,
    code: Option<u16>,
    elapsed: std::time::Duration,
) {
    m.rest_requests
        .get_or_create(&crate::metrics::RequestLabels {
            code: code.map_or_else(|| "<error>".to_string(), |c| c.to_string()),
            method: method.to_string(),
            host: host.to_string(),
        })
        .inc();
    m.rest_latency
        .get_or_create(&crate::metrics::LatencyLabels {
            verb: method.to_string(),
            host: host.to_string(),
        })
        .observe(elapsed.as_secs_f64());
}

/// Records one request's wait for a client-side rate-limiter token.
fn record_rate_limiter_wait(
    m: &crate::metrics::Metrics,
    method: &str,
    host: &str,
    waited: std::time::Duration,
) {
    m.rest_rate_limiter
        .get_or_create(&crate::metrics::LatencyLabels {
            verb: method.to_string(),
            host: host.to_string(),
        })
        .observe(waited.as_secs_f64());
}
#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};
    use tower::ServiceExt;

    #[test]
    fn the_user_agent_names_the_replica_and_keeps_wasmctrl_as_the_manager() {
        let version = env!("CARGO_PKG_VERSION");
        assert_eq!(user_agent(None), format!("wasmctrl/{version}").as_str());
        assert_eq!(
            user_agent(Some("r-a")),
            format!("wasmctrl/{version} (r-a)").as_str()
        );
        // What a header cannot carry is left out, never a panic.
        assert_eq!(
            user_agent(Some("pod (1)\nx\u{e9}")),
            format!("wasmctrl/{version} (pod1x)").as_str()
        );
        assert_eq!(
            user_agent(Some(" ")),
            format!("wasmctrl/{version}").as_str()
        );
        let ua = user_agent(Some("r-b"));
        let manager = ua.to_str().unwrap().split('/').next().unwrap();
        assert_eq!(manager, "wasmctrl");
    }

    #[tokio::test]
    async fn requests_beyond_the_burst_wait_for_tokens() {
        let layer = RateLimitLayer::new(ClientLimits {
            qps: 20.0,
            burst: 5,
        });
        let mut svc = layer.layer(tower::service_fn(|r: http::Request<u32>| async move {
            Ok::<_, std::convert::Infallible>(r.into_body())
        }));
        let req = |i: u32| http::Request::new(i);
        let started = Instant::now();
        for i in 0..5 {
            assert_eq!(svc.ready().await.unwrap().call(req(i)).await.unwrap(), i);
        }
        assert!(
            started.elapsed() < Duration::from_millis(40),
            "the burst is not throttled"
        );
        for i in 0..4 {
            svc.ready().await.unwrap().call(req(i)).await.unwrap();
        }
        // Four more at 20 QPS cannot complete before ~150 ms (one token per
        // 50 ms); a lower bound, so a slow machine cannot fail it.
        assert!(
            started.elapsed() >= Duration::from_millis(150),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn non_positive_qps_disables_the_limit() {
        assert!(ClientLimits { qps: 0.0, burst: 1 }.quota().is_none());
        assert!(ClientLimits {
            qps: f64::INFINITY,
            burst: 1
        }
        .quota()
        .is_none());
        assert!(ClientLimits::default().quota().is_some());
    }
}
