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

mod access;
pub mod auth;
pub mod body;
pub mod config;
pub mod convert;
pub mod crd;
pub mod discovery;
pub mod faults;
mod gc;
mod handlers;
mod kubelet;
mod namespaces;
mod object_rules;
pub mod objects;
pub mod openapi;
mod outbox;
pub mod patch;
mod pods;
mod printer_columns;
pub mod proto;
pub mod registry;
pub mod server;
pub mod status;
pub mod store;
pub mod table;
pub mod validation;
pub mod watch;

pub use wasmctrl_kube_rules::selector;

pub use auth::{Rule, Scope, User};
pub use faults::{FailRequests, FaultCommand, Faults};
pub use server::{
    serve_until_signal, ApiServer, ApiServerConfig, RunningApiServer, ServerError, WatchList,
};
pub use status::ApiError;
