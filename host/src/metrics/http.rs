//! The endpoint servers controller-runtime managers also run: `/metrics`
//! on the metrics address, `/healthz`, `/livez` and `/readyz` on the
//! health address, with `/shadow/GUEST` and `/guests` beside them. It never
//! decides what is ready or what a guest's state is: callers pass probes.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use super::Metrics;

/// Readiness probe: Ok when ready, Err(why not) otherwise.
pub type Readiness<E> = Arc<dyn Fn() -> Result<(), E> + Send + Sync>;

async fn metrics_handler(State(m): State<Arc<Metrics>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        m.encode(),
    )
}

async fn healthz() -> impl IntoResponse {
    // Answering at all proves the runtime is responsive.
    (StatusCode::OK, "ok\n")
}

/// Lines `/readyz` adds to its answer, ready or not (guests refused at
/// load: the host runs without them).
pub type Detail = Arc<dyn Fn() -> Vec<String> + Send + Sync>;

async fn readyz<E: std::fmt::Display>(
    State((ready, detail)): State<(Readiness<E>, Detail)>,
) -> impl IntoResponse {
    let (code, mut body) = match ready() {
        Ok(()) => (StatusCode::OK, "ok\n".to_string()),
        Err(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        ),
    };
    for line in detail() {
        body.push_str(&line);
        body.push('\n');
    }
    (code, body)
}

/// A bound endpoint server.
#[derive(Debug)]
pub struct Endpoint {
    /// The address actually bound (useful with port 0).
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(addr: SocketAddr, app: Router) -> std::io::Result<Endpoint> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(%addr, "endpoint server stopped: {e}");
        }
    });
    Ok(Endpoint { addr, task })
}

/// Serves `/metrics` on `addr`.
pub async fn serve_metrics(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<Endpoint> {
    serve(
        addr,
        Router::new()
            .route("/metrics", get(metrics_handler))
            .with_state(metrics),
    )
    .await
}

/// Serves `/healthz` and `/readyz` on `addr`.
pub async fn serve_health<E: std::fmt::Display + 'static>(
    addr: SocketAddr,
    ready: Readiness<E>,
) -> std::io::Result<Endpoint> {
    serve_health_with_detail(addr, ready, Arc::new(Vec::new)).await
}

/// Serves `/healthz` and `/readyz` on `addr`; `/readyz` adds the lines
/// `detail` gives to its answer.
pub async fn serve_health_with_detail<E: std::fmt::Display + 'static>(
    addr: SocketAddr,
    ready: Readiness<E>,
    detail: Detail,
) -> std::io::Result<Endpoint> {
    serve_health_with_reports(addr, ready, detail, Arc::new(|_: &str| None)).await
}

/// A guest's report by name (its shadow's), as JSON; None: no such report.
pub type Reports = Arc<dyn Fn(&str) -> Option<serde_json::Value> + Send + Sync>;

async fn shadow_report(
    State(reports): State<Reports>,
    Path(guest): Path<String>,
) -> impl IntoResponse {
    match reports(&guest) {
        Some(report) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            format!("{report:#}\n"),
        ),
        None => (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("no shadow runs beside a guest named {guest:?}\n"),
        ),
    }
}

/// Like [`serve_health_with_detail`], also serving `/shadow/GUEST`: the
/// report of the shadow running beside GUEST (404 when none does).
pub async fn serve_health_with_reports<E: std::fmt::Display + 'static>(
    addr: SocketAddr,
    ready: Readiness<E>,
    detail: Detail,
    reports: Reports,
) -> std::io::Result<Endpoint> {
    Health::new(ready)
        .detail(detail)
        .reports(reports)
        .serve(addr)
        .await
}

/// Every guest's state, as the JSON `/guests` answers.
pub type Guests = Arc<dyn Fn() -> serde_json::Value + Send + Sync>;

async fn guests(State(guests): State<Guests>) -> impl IntoResponse {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        format!("{:#}\n", guests()),
    )
}

/// What the health address serves: `/healthz` and `/livez` always;
/// `/readyz` from a probe and its detail lines; `/shadow/GUEST` from a
/// report per guest; `/guests` from every guest's state.
pub struct Health<E> {
    ready: Readiness<E>,
    detail: Detail,
    reports: Reports,
    guests: Guests,
}

impl<E: std::fmt::Display + 'static> Health<E> {
    /// `/readyz` answers `ready`; no detail, no shadow reports and no
    /// guests (`{"guests": []}`) until set.
    pub fn new(ready: Readiness<E>) -> Self {
        Health {
            ready,
            detail: Arc::new(Vec::new),
            reports: Arc::new(|_: &str| None),
            guests: Arc::new(|| serde_json::json!({ "guests": [] })),
        }
    }

    /// Sets the lines `/readyz` adds to its answer.
    #[must_use]
    pub fn detail(mut self, detail: Detail) -> Self {
        self.detail = detail;
        self
    }

    /// Sets the shadow reports `/shadow/GUEST` answers.
    #[must_use]
    pub fn reports(mut self, reports: Reports) -> Self {
        self.reports = reports;
        self
    }

    /// Sets what `/guests` answers. It is called on every request:
    /// it must be cheap (no request to the API server).
    #[must_use]
    pub fn guests(mut self, guests: Guests) -> Self {
        self.guests = guests;
        self
    }

    /// Serves these endpoints on `addr`.
    pub async fn serve(self, addr: SocketAddr) -> std::io::Result<Endpoint> {
        let shadows = Router::new()
            .route("/shadow/{guest}", get(shadow_report))
            .with_state(self.reports);
        let listed = Router::new()
            .route("/guests", get(guests))
            .with_state(self.guests);
        let app = Router::new()
            .route("/healthz", get(healthz))
            .route("/livez", get(healthz))
            .route("/readyz", get(readyz))
            .with_state((self.ready, self.detail))
            .merge(shadows)
            .merge(listed);
        serve(addr, app).await
    }
}
