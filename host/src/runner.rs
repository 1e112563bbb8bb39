//! The host process: several guests, one client, shared informers.
//!
//! Owns loading every guest, giving each its configuration and namespace,
//! starting one [`GuestController`] per guest over one
//! [`InformerRegistry`], and running them until shutdown or until one of
//! them fails (a cache that cannot sync is fatal: a controller that silently
//! does nothing is worse than one that exits). It never reconciles anything
//! itself.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;

use crate::controller::{ControllerConfig, ControllerError, GuestController};
use crate::guest::{self, GuestError, GuestModule, GuestRuntime, RuntimeConfig};
use crate::informer::InformerRegistry;
use crate::metrics::Metrics;

/// Why the host stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// A guest could not be loaded.
    #[error(transparent)]
    Guest(#[from] GuestError),
    /// A guest's controller failed.
    #[error(transparent)]
    Controller(#[from] ControllerError),
    /// No guests were given.
    #[error("no guests to run: pass --guest PATH.wasm")]
    NoGuests,
}

/// Everything the host needs to start.
#[derive(Debug, Clone, Default)]
pub struct HostConfig {
    /// Guest component files.
    pub guests: Vec<PathBuf>,
    /// The host's namespace (told to guests).
    pub namespace: String,
    /// Per-guest configuration, keyed by guest name or file stem.
    pub guest_config: BTreeMap<String, BTreeMap<String, String>>,
    /// Controller settings shared by all guests.
    pub controller: ControllerConfig,
    /// Sandbox settings.
    pub runtime: RuntimeConfig,
}

/// A running host.
pub struct Host {
    controllers: Vec<Arc<GuestController>>,
    registry: InformerRegistry,
}

fn stem(path: &std::path::Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

impl Host {
    /// Loads every guest and starts its informers (not its workers).
    pub async fn start(
        client: Client,
        config: HostConfig,
        metrics: Option<Arc<Metrics>>,
    ) -> Result<Self, HostError> {
        if config.guests.is_empty() {
            return Err(HostError::NoGuests);
        }
        let runtime = GuestRuntime::new(config.runtime.clone())?;
        let registry = InformerRegistry::new(client.clone());
        let mut controllers = Vec::new();
        for path in &config.guests {
            let module = runtime.load_file(path)?;
            let env = Self::environment(&module, path, &config);
            let controller = GuestController::start(
                client.clone(),
                &registry,
                module,
                env,
                config.controller.clone(),
                metrics.clone(),
            )
            .await?;
            tracing::info!(guest = controller.name(), path = %path.display(), "guest loaded");
            controllers.push(Arc::new(controller));
        }
        Ok(Host {
            controllers,
            registry,
        })
    }

    /// The guest's environment: its configuration is looked up by the name
    /// it declares (asked once without configuration) or its file stem.
    fn environment(
        module: &GuestModule,
        path: &std::path::Path,
        config: &HostConfig,
    ) -> guest::Environment {
        let bare = guest::environment(&config.namespace, &BTreeMap::new());
        let declared = module.manifest(&bare).ok().map(|m| m.name);
        let values = declared
            .as_ref()
            .and_then(|n| config.guest_config.get(n))
            .or_else(|| config.guest_config.get(&stem(path)))
            .cloned()
            .unwrap_or_default();
        guest::environment(&config.namespace, &values)
    }

    /// The guests' controllers.
    pub fn controllers(&self) -> &[Arc<GuestController>] {
        &self.controllers
    }

    /// The shared informer registry.
    pub fn registry(&self) -> &InformerRegistry {
        &self.registry
    }

    /// Readiness: Ok once every cache of every guest has synced; otherwise
    /// which guest is still waiting.
    pub fn readiness(&self) -> Result<(), String> {
        match self.controllers.iter().find(|c| !c.is_synced()) {
            None => Ok(()),
            Some(c) => Err(format!("caches of guest {} not synced", c.name())),
        }
    }

    /// Whether every guest's caches have synced.
    pub fn is_synced(&self) -> bool {
        self.controllers.iter().all(|c| c.is_synced())
    }

    /// Runs every guest until `shutdown` resolves (then drains in-flight
    /// reconciles for up to `drain`) or until one fails.
    pub async fn run(
        &self,
        shutdown: impl Future<Output = ()>,
        drain: Duration,
    ) -> Result<(), HostError> {
        let mut tasks = tokio::task::JoinSet::new();
        for c in &self.controllers {
            tasks.spawn(c.clone().run());
        }
        tokio::pin!(shutdown);
        let failed = tokio::select! {
            () = &mut shutdown => None,
            Some(joined) = tasks.join_next() => match joined {
                Ok(Err(e)) => Some(e),
                Ok(Ok(())) => None,
                Err(e) => Some(ControllerError::Guest(GuestError {
                    guest: "(host)".into(),
                    kind: crate::guest::GuestErrorKind::Trap(format!("controller task failed: {e}")),
                })),
            },
        };
        for c in &self.controllers {
            c.shutdown();
        }
        let _ =
            tokio::time::timeout(drain, async { while tasks.join_next().await.is_some() {} }).await;
        tasks.abort_all();
        match failed {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }
}
