//! The embedded API server's own integration tests, in one test binary that
//! links neither wasmtime nor the host: the real kube client, kubectl and
//! the official Python client against the server over real HTTPS.
//!
//! `cargo test -p wasmctrl-apiserver --test apiserver kubectl::` runs one
//! area.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod kube_client;
mod kubectl;
mod scale;
