//! What the test binaries of `wasmctrl` and `wasmctrl-apiserver` share:
//! third-party clients found or required ([`tools`], [`Kubectl`]), waits on
//! conditions instead of sleeps ([`wait`]), plain HTTP probes ([`http`]),
//! Prometheus text ([`prom`]), bucket Leases' holders over time
//! ([`leases`]), a crate's sources read into its module
//! import graph for layering tests (`layering`, a default feature) and,
//! with the `component` feature, `.wat` guests turned into components
//! ([`component`]), and with the `registry` feature a real OCI registry
//! ([`registry`]).
//!
//! It never depends on the host crate or on wasmtime: the server's test
//! binary links it and stays free of both. Host-specific fixtures (a running
//! host, replicas of the binary, guest manifests) live in
//! `host/tests/support/`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[cfg(feature = "component")]
pub mod component;
pub mod http;
pub mod kubectl;
#[cfg(feature = "layering")]
pub mod layering;
pub mod leases;
pub mod prom;
#[cfg(feature = "registry")]
pub mod registry;
pub mod tools;
pub mod wait;

pub use http::{free_port, http_get, http_status};
pub use kubectl::Kubectl;
pub use wait::{bounded, eventually, stays_for, CONVERGE};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};

/// Creates namespace `name` (as the admin `client`).
pub async fn create_namespace(client: &kube::Client, name: &str) {
    let namespace: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
}
