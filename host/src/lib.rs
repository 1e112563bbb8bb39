//! wasmctrl: a WebAssembly-pluggable Kubernetes controller host.
//!
//! The host owns every read, write, retry and election; guests are pure
//! WebAssembly components that turn a snapshot of the objects they watch into
//! a plan of desired state.

pub mod actuator;
pub mod aggregate;
pub mod claims;
pub mod client;
pub mod config;
pub mod controller;
#[cfg(feature = "dev-server")]
pub mod demo;
pub mod discovery;
pub mod events;
pub mod failure;
pub mod guest;
pub mod informer;
#[cfg(test)]
mod layering;
pub mod leader;
pub mod metrics;
pub mod objects;
pub mod offline;
pub mod packaging;
pub mod permissions;
pub mod projection;
pub mod quarantine;
pub mod recording;
pub mod relations;
pub mod request;
pub mod scaffold;
pub mod shadow;
pub mod store;
pub mod supervisor;
mod sync;
pub mod urlpath;
pub mod workqueue;
