//! The guest runtime: loading, sandboxing and calling WebAssembly guests.
//! It never talks to the cluster and never acts on a plan: callers get a
//! validated plan back and decide what to do with it.
//!
//! # Layout
//! - `mod.rs`: the bindings, the contract version, the environment.
//! - `error`: [`GuestError`], every way a guest can fail, classified.
//! - `runtime`: [`GuestRuntime`] and [`RuntimeConfig`]: the one wasmtime
//!   engine, compilation once per content digest, the on-disk cache.
//! - `module`: [`GuestModule`], one compiled guest: `describe`, `reconcile`.
//! - `warm`: [`WarmInstances`], one guest's instances kept between its
//!   reconciles.
//! - `sandbox`: per-call state (no ambient authority: the governed WASI
//!   of [`wasi`], stdout/stderr to the log, see [`stdio`]), the memory cap
//!   and the guest's log import.
//! - [`manifest`], [`plan`], [`snapshot`], [`policy`], [`limits`],
//!   [`aggregate`], [`imports`], [`stdio`]: what a guest declares and
//!   returns, checked.

mod error;
mod exception;
mod module;
mod runtime;
mod sandbox;
mod warm;

pub use error::{GuestError, GuestErrorKind};
pub use module::{CallStats, GuestModule};
pub use runtime::{GuestRuntime, RuntimeConfig};
pub use sandbox::CallState;
pub use warm::{Here, WarmInstances};

pub mod aggregate;
pub mod imports;
pub mod limits;
pub mod manifest;
pub mod plan;
pub mod policy;
pub mod snapshot;
pub mod stdio;
pub mod wasi;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, ResourceLimiter, Store, Trap};

pub use manifest::{GuestManifest, Gvk, KeyMapping, ManifestError, WatchSpec, WriteRule};
pub use plan::{
    EntryWrite, EventType, ObjectKey, PlanError, PlannedEvent, PlannedWrite, ValidatedPlan,
};
pub use wasmctrl_snapshot::SnapshotData;

/// Host-side bindings generated from `wit/`.
#[allow(missing_docs, clippy::all)]
pub mod bindings {
    wasmtime::component::bindgen!({ world: "controller", path: "../wit" });
}

use bindings::wasmctrl::controller::types as wit;
pub use bindings::wasmctrl::controller::types::{Environment, Presence, Request, Snapshot};
use bindings::{Controller, ControllerPre};

/// The contract version this host implements (the WIT package version).
pub const CONTRACT_VERSION: &str = "wasmctrl:controller@0.3.0";

/// The interface every guest exports, without its version.
pub(crate) const RECONCILER: &str = "wasmctrl:controller/reconciler@";

/// Result alias for this module.
pub type Result<T, E = GuestError> = std::result::Result<T, E>;

/// Builds an [`Environment`] from a namespace and key/value pairs (sorted by
/// key, so the guest sees a deterministic order).
/// `now_ms` is 0: what `describe` gets; see [`Environment::at`].
pub fn environment(
    namespace: &str,
    config: &std::collections::BTreeMap<String, String>,
) -> Environment {
    Environment {
        namespace: namespace.to_string(),
        config: config.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        now_ms: 0,
    }
}

impl Environment {
    /// This environment with the clock at `now_ms` (milliseconds since the
    /// Unix epoch).
    #[must_use]
    pub fn at(&self, now_ms: u64) -> Self {
        Environment {
            now_ms,
            ..self.clone()
        }
    }
}

impl Presence {
    /// The contract's name of this case (`present`, `gone`, `unselected`).
    pub fn as_str(self) -> &'static str {
        match self {
            Presence::Present => "present",
            Presence::Gone => "gone",
            Presence::Unselected => "unselected",
        }
    }

    /// The case the contract names `name`, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        [Presence::Present, Presence::Gone, Presence::Unselected]
            .into_iter()
            .find(|p| p.as_str() == name)
    }
}

/// The host's clock in milliseconds since the Unix epoch (0 if the clock is
/// before it).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests;
