//! Where objects live and how changes reach watchers: the resource
//! registry, the versioned object store with its watch history, and the
//! watch streams that turn store changes into `WatchEvent`s for one client.
//! It enforces optimistic concurrency and nothing else: it never validates,
//! defaults, authorizes or patches an object (`rules`, `patch` and `http`
//! do that before a write reaches it).
//!
//! # Layout
//! - `registry`: which resources are served, built-in and custom.
//! - `builtin`: the built-in resources, from a real server's embedded discovery.
//! - `store`: objects, resourceVersions, history and the change broadcast.
//! - `watch`: watch streams with filters, bookmarks, timeouts and cut-offs.
//! - `outbox`: the byte-counted buffer between a watch and its response body.

pub(crate) mod builtin;
pub mod registry;
pub mod store;
pub mod watch;

mod outbox;
