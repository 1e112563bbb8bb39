//! Kubernetes API rules that both sides of wasmctrl follow: the host (which
//! must predict what a real API server accepts and says) and the embedded
//! API server (which must behave like one).
//!
//! Owns selector parsing and the field labels each resource supports
//! ([`selector`]), object-name syntax ([`names`]), ConfigMap data keys
//! ([`configmap_key`]), how deep a document nests ([`nesting`]) and the
//! wording of a Forbidden answer ([`forbidden`]). Pure functions over strings and JSON:
//! it depends on neither the host nor the server, and never does I/O.

pub mod configmap_key;
pub mod forbidden;
pub mod names;
pub mod nesting;
pub mod selector;
