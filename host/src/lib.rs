//! wasmctrl: a WebAssembly-pluggable Kubernetes controller host.
//!
//! The host owns every read, write, retry and election; guests are pure
//! WebAssembly components that turn a snapshot of the objects they watch into
//! a plan of desired state.

pub mod apiserver;
pub mod guest;
pub mod objects;
pub mod offline;
pub mod projection;
pub mod selector;
pub mod workqueue;
pub mod informer;
pub mod actuator;
pub mod controller;
pub mod runner;
pub mod demo;
