//! Hot swap: rescanning the guest directory, compiling and validating a
//! new version off the reconcile path (in-flight reconciles finish on the
//! old module), replacing or removing a running guest. A rejected version
//! is not tried again until its file changes — but one needing a kind not
//! served yet is tried at every rescan — and the old one keeps running.
//! It never loads a guest from `--guest` files (see `load`).

use super::*;

impl Supervisor {
    pub(super) fn count_swap(&self, guest: &str, result: &str) {
        self.metrics
            .guest_swaps
            .get_or_create(&GuestResultLabels {
                guest: guest.to_string(),
                result: result.to_string(),
            })
            .inc();
    }

    /// Brings the running set in line with the guest directory: new files
    /// start, changed ones are swapped, removed ones stop (one call at a
    /// time; a concurrent call waits and then finds nothing left to do). A file that fails
    /// to compile or validate is rejected; what ran before keeps running,
    /// and the file is tried again only once it changes.
    pub async fn sync_dir(&self) -> Result<(), SupervisorError> {
        let Some(dir) = self.config.guest_dir.clone() else {
            return Ok(());
        };
        // One look at a time: the next one sees what this one swapped in.
        let _one_at_a_time = self.syncing.lock().await;
        let files = guest_dir::scan(&dir)?;
        let mut current: BTreeMap<String, String> = lock(&self.guests)
            .values()
            .filter(|g| !g.digest.is_empty())
            .map(|g| (g.key.clone(), g.digest.clone()))
            .collect();
        // A waiting guest is current too: it starts once its kind is served
        // (a changed file replaces it; a removed one ends its wait). So is
        // a refused one: it is tried again when its file changes.
        current.extend(self.waiting.digests());
        current.extend(lock(&self.shadow_files).clone());
        current.extend(
            lock(&self.refused)
                .iter()
                .filter(|(_, r)| !r.digest.is_empty())
                .map(|(k, r)| (k.clone(), r.digest.clone())),
        );
        // A rejected new version of a running guest is tried again only
        // when its file changes (or changes back after another version).
        let rejected = {
            let mut rejected = lock(&self.rejected);
            rejected.retain(|k, d| files.get(k).is_some_and(|f| f.digest == *d));
            rejected.clone()
        };
        for (key, file) in &files {
            if current.get(key) != Some(&file.digest) && rejected.get(key) != Some(&file.digest) {
                match guest_dir::shadow_target(key) {
                    Some(_) => self.swap_shadow(file).await,
                    None => self.swap_in(file).await,
                }
            }
        }
        for key in current.keys().filter(|k| !files.contains_key(*k)) {
            match guest_dir::shadow_target(key) {
                Some(target) => self.remove_shadow(key, target),
                None => self.remove(key).await,
            }
        }
        Ok(())
    }

    pub(super) async fn swap_in(&self, file: &GuestFile) {
        let started = Instant::now();
        let key = file.key.clone();
        let previous_name = lock(&self.guests)
            .get(&key)
            .map(|g| g.controller.name().to_string());
        let label = previous_name.clone().unwrap_or_else(|| key.clone());
        let candidate = async {
            let module = self
                .compile(
                    format!("{key}.wasm"),
                    super::load::Compile::Bytes(file.bytes.clone()),
                )
                .await?;
            let config = match file.config.clone() {
                Ok(config) => config,
                Err(source) => return Err(self.config_error(&key, &module, source).await),
            };
            let described = self.describe(module, config).await?;
            self.check_overlap(&key, &described.manifest)?;
            let controller = match or_wait(self.controller_for(described.clone()).await)? {
                Ok(c) => c,
                // A new guest (nothing of it runs) may wait for its kind.
                Err(kind) if previous_name.is_none() => return Ok(Swap::Waits(described, kind)),
                Err(kind) => return Err(SupervisorError::NotServed { kind }),
            };
            if let Some(other) = lock(&self.guests)
                .values()
                .find(|g| g.key != key && g.controller.name() == controller.name())
            {
                return Err(SupervisorError::DuplicateName {
                    name: controller.name().to_string(),
                    first: other.source.clone(),
                    second: file.path.display().to_string(),
                });
            }
            controller.wait_synced().await?;
            Ok(Swap::Ready(Box::new(controller)))
        };
        let controller = match candidate.await {
            Ok(Swap::Ready(c)) => *c,
            Ok(Swap::Waits(described, kind)) => {
                let source = file.path.display().to_string();
                let w = WaitingGuest::new(source, file.digest.clone(), described, kind);
                self.waiting.wait(key, w);
                return;
            }
            Err(e) => {
                tracing::error!(guest = %label, path = %file.path.display(), "guest rejected, previous version keeps running: {e}");
                self.count_swap(&label, "rejected");
                if previous_name.is_none() {
                    // No version of it runs: refused until its file changes.
                    self.record_refused(key.clone(), &label, file.digest.clone(), &e);
                } else if !matches!(e, SupervisorError::NotServed { .. }) {
                    // Not tried again until its file changes. A version
                    // that needs a kind not served yet is: at every rescan,
                    // so it starts once its CRD is installed.
                    lock(&self.rejected).insert(key.clone(), file.digest.clone());
                }
                self.event(
                    true,
                    "GuestRejected",
                    format!("{}: {e}", file.path.display()),
                )
                .await;
                self.registry.release_unused();
                return;
            }
        };
        let name = controller.name().to_string();
        let controller = Arc::new(controller);
        // A version that waited for its kind, or was refused, is superseded.
        self.waiting.remove(&key);
        lock(&self.refused).remove(&key);
        lock(&self.rejected).remove(&key);
        if let Some(previous) = previous_name.as_ref().filter(|p| **p != name) {
            self.release_claims(previous);
        }
        self.reserve(&key, controller.manifest());
        let old = lock(&self.guests).remove(&key);
        if let Some(spec) = old.as_ref().and_then(|o| o.controller.shadow()) {
            // The shadow stays beside the new version while it still reads
            // the same snapshots.
            match spec.rebind(controller.manifest()) {
                Ok(spec) => controller.attach_shadow(spec, self.config.shadow_dry_run),
                Err(e) => tracing::warn!(guest = %name, "shadow dropped at the swap: {e}"),
            }
        }
        if let Some(old) = &old {
            // In-flight reconciles finish on the old module; new keys wait
            // in the new controller's queue (its handlers are registered).
            old.controller.shutdown();
            let drained = old
                .controller
                .queue()
                .shutdown_with_drain(Duration::from_secs(30))
                .await;
            if !drained {
                tracing::warn!(guest = %name, "old module still busy after 30 s; abandoning its in-flight reconcile");
            }
            old.task.abort();
        }
        let task = self.spawn(controller.clone());
        let digest = file.digest.clone();
        lock(&self.guests).insert(
            key.clone(),
            RunningGuest {
                key: key.clone(),
                source: file.path.display().to_string(),
                digest,
                controller: controller.clone(),
                task,
            },
        );
        drop(old);
        self.registry.release_unused();
        let what = if previous_name.is_some() {
            "swapped"
        } else {
            "loaded"
        };
        tracing::info!(guest = %name, digest = %controller.digest(), elapsed = ?started.elapsed(), "guest {what}");
        self.count_swap(&name, what);
        self.event(
            false,
            if previous_name.is_some() {
                "GuestSwapped"
            } else {
                "GuestLoaded"
            },
            format!(
                "guest {name} {what} from {} (sha256 {})",
                file.path.display(),
                controller.digest()
            ),
        )
        .await;
    }

    pub(super) async fn remove(&self, key: &str) {
        if let Some(w) = self.waiting.remove(key) {
            tracing::info!(guest = %w.name(), "waiting guest removed ({key}.wasm is gone)");
        }
        if let Some(r) = lock(&self.refused).remove(key) {
            tracing::info!(guest = %r.name, "refused guest removed ({key}.wasm is gone)");
        }
        let Some(old) = lock(&self.guests).remove(key) else {
            return;
        };
        let name = old.controller.name().to_string();
        // Its shadow goes with it; a shadow file left is attached again if
        // the guest comes back.
        lock(&self.shadow_files).retain(
            |k, _| !matches!(guest_dir::shadow_target(k), Some(t) if t == key || t == name),
        );
        old.controller.shutdown();
        old.controller
            .queue()
            .shutdown_with_drain(Duration::from_secs(30))
            .await;
        old.task.abort();
        drop(old);
        self.registry.release_unused();
        self.release_claims(&name);
        tracing::info!(guest = %name, "guest removed; its outputs are left in place");
        self.count_swap(&name, "removed");
        self.event(
            false,
            "GuestRemoved",
            format!("guest {name} removed ({key}.wasm is gone)"),
        )
        .await;
    }

    /// Runs `NAME.shadow.wasm` as the shadow of the running guest whose key
    /// or name is NAME, described with that guest's environment. A version
    /// that fails is rejected until its file changes (a shadow already
    /// running keeps running); one whose target does not run is tried again
    /// at every rescan.
    pub(super) async fn swap_shadow(&self, file: &GuestFile) {
        let Some(target) = guest_dir::shadow_target(&file.key) else {
            return;
        };
        let source = file.path.display().to_string();
        let controller = lock(&self.guests)
            .get(target)
            .map(|g| g.controller.clone())
            .or_else(|| self.controller(target));
        let attached = async {
            let controller = controller.ok_or_else(|| crate::shadow::ShadowError::NoTarget {
                file: source.clone(),
                target: target.to_string(),
            })?;
            let runtime = self.runtime.clone();
            let (bytes, label) = (file.bytes.clone(), format!("{}.wasm", file.key));
            let env = controller.environment().clone();
            let described = tokio::task::spawn_blocking(move || {
                let module = runtime.load_bytes(&label, &bytes)?;
                let manifest = module.manifest(&env)?;
                Ok::<_, GuestError>((module, manifest))
            })
            .await
            .map_err(|e| GuestError {
                guest: source.clone(),
                kind: guest::GuestErrorKind::Trap(format!("shadow load task failed: {e}")),
            })??;
            let (module, manifest) = described;
            let spec =
                crate::shadow::ShadowSpec::new(&source, module, manifest, controller.manifest())?;
            controller.attach_shadow(spec, self.config.shadow_dry_run);
            Ok::<_, SupervisorError>(controller.name().to_string())
        };
        match attached.await {
            Ok(guest) => {
                lock(&self.shadow_files).insert(file.key.clone(), file.digest.clone());
                lock(&self.rejected).remove(&file.key);
                tracing::info!(guest = %guest, shadow = %source, "shadow loaded: its plans are compared with the guest's, never acted on");
                self.count_swap(&guest, "shadow_loaded");
                self.event(
                    false,
                    "ShadowLoaded",
                    format!("{source} runs as the shadow of guest {guest}"),
                )
                .await;
            }
            Err(SupervisorError::Shadow(e @ crate::shadow::ShadowError::NoTarget { .. })) => {
                tracing::debug!("{e}; tried again at the next rescan");
            }
            Err(e) => {
                lock(&self.rejected).insert(file.key.clone(), file.digest.clone());
                tracing::error!(guest = %target, shadow = %source, reason = e.reason(), "shadow rejected: {e}");
                self.count_swap(target, "rejected");
                self.event(true, "GuestRejected", format!("{source}: {e}"))
                    .await;
            }
        }
    }

    /// Stops the shadow `key` (its file is gone) beside guest `target`.
    pub(super) fn remove_shadow(&self, key: &str, target: &str) {
        lock(&self.shadow_files).remove(key);
        let controller = lock(&self.guests)
            .get(target)
            .map(|g| g.controller.clone())
            .or_else(|| self.controller(target));
        if let Some(controller) = controller {
            controller.detach_shadow();
            tracing::info!(guest = %controller.name(), "shadow removed ({key}.wasm is gone)");
        }
    }
}
