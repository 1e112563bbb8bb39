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
//! Bottom first; a module uses only the ones above it in this list (see
//! `layering`, a test over the sources).
//! - [`auth`]: users, tokens and RBAC-like rules; [`status`]: API errors as
//!   `meta/v1 Status`; `storage`: the registry and the object store.
//! - [`config`]: the server's knobs; [`patch`]: patch and server-side apply semantics.
//! - `rules`: per-kind object semantics (metadata, validation, pods, CRDs).
//! - `cluster`: the store, registry and Service allocations the verbs and
//!   controllers share.
//! - `controllers`: garbage collection, the kubelet's pod deletion, namespace termination,
//!   simulated nodes.
//! - `http`: the listener, routing, bodies, watch streams, discovery, printing, faults,
//!   responses.

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
pub use http::{body, convert, discovery, faults, openapi, proto, server, table, watch, write_log};
pub use rules::{crd, objects, validation};
pub use storage::{registry, store};

pub use auth::{Rule, Scope, User};
pub use http::faults::{FailRequests, FaultCommand, Faults, Held};
pub use http::server::{
    serve_until_signal, ApiServer, ApiServerConfig, RunningApiServer, ServerError, WatchList,
};
pub use http::write_log::{WriteLog, WriteRecord};
pub use status::ApiError;
