//! wasmctrl: a WebAssembly-pluggable Kubernetes controller host.
//!
//! The host owns every read, write, retry and election; guests are pure
//! WebAssembly components that turn a snapshot of the objects they watch into
//! a plan of desired state.
//!
//! These are the API docs; the book (`docs/src` in the repository, built by
//! `make book`, which puts these docs at `api/` inside it) explains how to
//! write, test, deploy and operate guests: [the book](../../index.html),
//! [Architecture and the data path](../../internals/architecture.html) for
//! how the modules below fit together, and
//! [What happens when…](../../operating/what-happens-when.html) for the
//! host's answer to each failure.

pub mod actuator;
pub mod aggregate;
pub mod claims;
pub mod client;
pub mod compare;
pub mod config;
pub mod controller;
pub mod delivery;
pub mod discovery;
pub mod events;
pub mod failure;
pub mod guard;
pub mod guest;
pub mod informer;
#[cfg(test)]
mod layering;
pub mod leader;
pub mod leader_per_guest;
pub mod metrics;
pub mod offline;
pub mod outputs;
pub mod permissions;
pub mod projection;
pub mod quarantine;
pub mod recording;
pub mod relations;
pub mod request;
pub mod shadow;
pub mod store;
pub mod supervisor;
mod sync;
pub mod urlpath;
pub mod workqueue;
