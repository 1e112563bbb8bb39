//! Where objects live and how changes reach watchers: the resource
//! registry and the versioned object store with its watch history and
//! change broadcast. It enforces optimistic concurrency and nothing else:
//! it never validates, defaults, authorizes or patches an object (`rules`,
//! `patch` and `http` do that before a write reaches it), and never
//! renders a change for a client (`http`'s `watch` does).
//!
//! # Layout
//! - `registry`: which resources are served, built-in and custom; `resource`: what it
//!   knows of one.
//! - `builtin`: the built-in resources, from a real server's embedded discovery.
//! - `store`: objects, resourceVersions, history and the change broadcast.

pub(crate) mod builtin;
pub mod registry;
mod resource;
pub mod store;
