//! A host over a guest directory, as an operator sees it: its `/guests`
//! over HTTP and the Events on its Pod.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::Client;
use serde_json::Value;
use sha2::{Digest, Sha256};
use wasmctrl::guest::RuntimeConfig;
use wasmctrl::metrics::{Endpoint, Health, Metrics};
use wasmctrl::supervisor::{Supervisor, SupervisorConfig};

use super::{events_with_reason, http_get, prom, HOST_NS};

/// The host's own Pod, which its guest Events regard.
pub const HOST_POD: &str = "wasmctrl-0";

/// A host over the guest directory `dir`, knowing its Pod.
pub fn dir_config(dir: &Path) -> SupervisorConfig {
    SupervisorConfig {
        guest_dir: Some(dir.to_path_buf()),
        namespace: HOST_NS.into(),
        runtime: RuntimeConfig::default().cache_dir(None),
        rescan: Some(Duration::from_secs(60)),
        pod: Some((HOST_NS.into(), HOST_POD.into())),
        ..SupervisorConfig::default()
    }
}

/// Serves `host`'s health address on a free port, `/guests` included, as
/// `wasmctrl run` does.
pub async fn serve_health(host: &Arc<Supervisor>) -> Endpoint {
    let (ready, refused, guests) = (host.clone(), host.clone(), host.clone());
    Health::new(Arc::new(move || ready.readiness()))
        .detail(Arc::new(move || refused.refused()))
        .guests(Arc::new(move || guests.guests_json()))
        .serve("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// `GET /guests` at `addr`: its guests by key.
pub async fn guests_over_http(addr: SocketAddr) -> serde_json::Map<String, Value> {
    let (status, body) = http_get(addr, "/guests").await.expect("/guests answers");
    assert_eq!(status, 200, "{body}");
    let json: Value = serde_json::from_str(&body).unwrap();
    json["guests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["key"].as_str().unwrap().to_string(), g.clone()))
        .collect()
}

/// `wasmctrl_guests_refused_total{guest, reason}` as `metrics` encode it.
pub fn refused(metrics: &Metrics, guest: &str, reason: &str) -> f64 {
    prom::metric(
        &metrics.encode(),
        "wasmctrl_guests_refused_total",
        &[
            &format!("guest=\"{guest}\""),
            &format!("reason=\"{reason}\""),
        ],
    )
}

/// SHA-256 (hex) of `bytes`: what `/guests` gives as a component's digest.
pub fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The Events on `pod` in the host's namespace with `reason`.
pub async fn pod_events(client: &Client, pod: &str, reason: &str) -> Vec<Event> {
    events_with_reason(client, Some(HOST_NS), reason)
        .await
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod))
        .collect()
}

/// The notes of the Events on the host's Pod with `reason`, each of type
/// `warning` (Warning, else Normal).
pub async fn host_event_notes(client: &Client, reason: &str, warning: bool) -> Vec<String> {
    let want = if warning { "Warning" } else { "Normal" };
    pod_events(client, HOST_POD, reason)
        .await
        .into_iter()
        .inspect(|e| assert_eq!(e.type_.as_deref(), Some(want), "{reason}: {e:?}"))
        .filter_map(|e| e.note)
        .collect()
}
