//! The embedded API server's own integration tests, in one test binary that
//! links neither wasmtime nor the host: the real kube client, kubectl and
//! the official Python client against the server over real HTTPS.
//!
//! One module per area a client can observe (`crud`, `lists`, `watch`,
//! `patch`, `field_validation`, `lifecycle`, `kinds`, `builtin_kinds`, `auth`, `faults`,
//! `writes`, `custom_resources`, `pods`, `gc`, `printer_columns`,
//! `decoding`, `object_rules`, `service_allocation`, `limits`, `managed_fields`,
//! `simulated_nodes`, `workload_selectors`, `write_log`)
//! drives the server with the real kube client, sharing the fixtures of
//! `common`; `kubectl` drives it with kubectl and the Python client (the
//! Python client's own e2e suite is a test binary of its own,
//! `python_e2e.rs`), `kubectl_writes`
//! shows kubectl users its write errors, `kubectl_printers` the built-in
//! kinds' `kubectl get` columns;
//! `scale` with many objects and watchers. Tests never share a server:
//! each starts its own, so they run in parallel and in any order.
//! `cargo test -p wasmctrl-apiserver --test apiserver watch::` runs one
//! area.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod auth;
mod builtin_kinds;
mod common;
mod crud;
mod custom_resources;
mod decoding;
mod faults;
mod field_validation;
mod gc;
mod kinds;
mod kubectl;
mod kubectl_printers;
mod kubectl_writes;
mod lifecycle;
mod limits;
mod lists;
mod managed_fields;
mod object_rules;
mod patch;
mod pods;
mod printer_columns;
mod scale;
mod service_allocation;
mod simulated_nodes;
mod watch;
mod workload_selectors;
mod write_log;
mod writes;
