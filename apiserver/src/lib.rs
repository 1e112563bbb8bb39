//! Embedded, in-memory Kubernetes API server: real HTTPS, real API
//! semantics (resourceVersions, watch, selectors, paging, patches,
//! finalizers, garbage collection of dependents, status subresources, graceful pod deletion, namespace
//! termination, unknown-field validation, Status errors), bearer-token auth
//! with RBAC-like rules
//! (namespace scope, resourceNames, self access reviews), fault
//! injection, and limits that keep one client from freezing, crashing or
//! bloating it (body size and depth, connection timeouts, watch deadlines,
//! history bytes; see [`config`]). It is wasmctrl's dev/demo/test cluster; it never talks
//! to a real cluster.
//!
//! Start one with [`ApiServer::start`]; talk to it with
//! [`RunningApiServer::client`] or kubectl via [`RunningApiServer::kubeconfig`].
//!
//! # Layout
//! - `http`: the listener, routing, auth, bodies, discovery, printing, faults, errors.
//! - `storage`: the registry, the object store and watch streams.
//! - `rules`: per-kind object semantics (metadata, validation, pods, CRDs).
//! - `controllers`: garbage collection, the kubelet's pod deletion, namespace termination,
//!   simulated nodes.
//! - [`patch`]: patch and server-side apply semantics; [`config`]: the server's knobs.

mod cluster;
mod controllers;
mod http;
#[cfg(test)]
mod layering;
mod rules;
mod storage;

pub mod auth;
pub mod config;
pub mod patch;
pub mod status;

pub use wasmctrl_kube_rules::selector;

// The modules of each group that were public before the grouping, at the
// crate-root paths callers use (`wasmctrl_apiserver::registry::Registry`).
pub use http::{body, convert, discovery, faults, openapi, proto, server, table, watch};
pub use rules::{crd, objects, validation};
pub use storage::{registry, store};

pub use auth::{Rule, Scope, User};
pub use http::faults::{FailRequests, FaultCommand, Faults};
pub use http::server::{
    serve_until_signal, ApiServer, ApiServerConfig, RunningApiServer, ServerError, WatchList,
};
pub use status::ApiError;
