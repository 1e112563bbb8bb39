//! Kubernetes API rules that every side of wasmctrl follows: the host (which
//! must predict what a real API server accepts and says), the guests' SDK
//! (which must read objects as Kubernetes does) and the embedded API server
//! (which must behave like one).
//!
//! Owns selector parsing and the field labels each resource supports
//! ([`selector`]), object-name syntax ([`names`]), ConfigMap data keys
//! ([`configmap_key`]), resource quantities ([`quantity`]) and the
//! canonical form a server stores them in within built-in kinds
//! ([`builtin`], from the real server's OpenAPI documents), how the server
//! reads and prints a custom object's numbers ([`numbers`]), how deep a
//! document nests ([`nesting`]) and the wording of a Forbidden answer
//! ([`forbidden`]). Pure functions over strings and JSON: it depends on
//! neither the host nor the server, and never does I/O. `configmap_key` and
//! `quantity` use nothing but std, so guests built for wasm32-wasip2 link
//! only what they call.

pub mod builtin;
pub mod configmap_key;
pub mod forbidden;
pub mod names;
pub mod nesting;
pub mod numbers;
pub mod quantity;
pub mod selector;
