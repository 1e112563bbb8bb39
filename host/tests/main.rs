//! Every integration test of the `wasmctrl` host, in one test binary.
//!
//! One binary links the host (wasmtime, kube, the embedded API server) once
//! instead of once per file: on a clean CI machine that is minutes and
//! gigabytes saved. Each file stays a module named after what it tests, so
//! `cargo test -p wasmctrl --test integration pipeline::` runs one of them.
//!
//! They all run against the embedded API server over real HTTPS with the real
//! kube client (or kubectl and the Python client), never against mocks.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

mod adversarial;
mod aggregate;
mod app;
mod builtin_children;
mod cleanup;
mod cli_reconcile;
mod cli_reconcile_keys;
mod cluster_owner;
mod compressed_guests;
mod delivery;
mod deploy;
mod failover;
mod faults;
mod finalizers;
mod flapping_label;
mod governance;
mod guest_runtime;
mod guest_status;
mod hot_loops;
mod hotswap;
mod informer;
mod isolation;
mod leader;
mod matrix;
mod metrics;
mod missing_kind;
mod namespaces;
mod own_kind;
mod pipeline;
mod probes;
mod quota;
mod related;
mod replicas;
mod shadow;
mod spans;
mod tombstones;
mod typescript;
mod write_wars;
