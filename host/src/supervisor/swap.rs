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
        let mut files = guest_dir::scan(&dir)?;
        self.resolve_tags(&mut files).await;
        self.pending_pulls.retain_current(&files);
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
        // A guest waiting for its registry is tried again when due.
        current.extend(self.pending_pulls.not_due());
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
            if current.get(key) == Some(&file.digest) {
                // Back to the version that runs: a newer one tried
                // meanwhile is forgotten.
                self.status.clear_candidate(key);
            }
            if current.get(key) != Some(&file.digest) && rejected.get(key) != Some(&file.digest) {
                match guest_dir::shadow_target(key) {
                    Some(_) => self.swap_shadow(file).await,
                    None => self.swap_in(file).await,
                }
            }
        }
        for key in current.keys().filter(|k| !files.contains_key(*k)) {
            match guest_dir::shadow_target(key) {
                Some(target) => self.remove_shadow(key, target).await,
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
        let origin = GuestSource::of_file(file);
        self.announce(&key, &label, Version::compiling(origin.clone(), None))
            .await;
        // Decompressing and compiling take CPU: off the runtime.
        let (digest, module) = self.compile_file(file).await;
        let candidate = async {
            let module = module?;
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
                let (name, component) = (
                    described.manifest.name.clone(),
                    described.module.digest().to_string(),
                );
                let w = WaitingGuest::new(source, file.digest.clone(), described, kind.clone());
                self.waiting.wait(key.clone(), w);
                let version = Version::waiting_for_kind(origin, &component, &kind);
                self.announce(&key, &name, version).await;
                return;
            }
            Err(SupervisorError::Delivery { source, .. }) if source.is_transient() => {
                let runs = previous_name.is_some();
                self.wait_for_registry(&key, file, runs, &source).await;
                return;
            }
            Err(e) => {
                tracing::error!(guest = %label, path = %file.path.display(), "guest rejected, previous version keeps running: {e}");
                self.count_swap(&label, "rejected");
                let tried = Version::compiling(origin, digest);
                let version = if let SupervisorError::NotServed { kind } = &e {
                    // Tried again at every rescan, so it starts once its
                    // CRD is installed: it waits, as far as anyone sees.
                    let component = tried.digest.clone().unwrap_or_default();
                    Version::waiting_for_kind(tried.source, &component, kind)
                } else {
                    announce::refused(tried, &e)
                };
                if previous_name.is_none() {
                    // No version of it runs: refused until its file changes.
                    self.record_refused(key.clone(), &label, file.digest.clone(), &e);
                } else if !matches!(e, SupervisorError::NotServed { .. }) {
                    // Not tried again until its file changes. A version
                    // that needs a kind not served yet is: at every rescan,
                    // so it starts once its CRD is installed.
                    lock(&self.rejected).insert(key.clone(), file.digest.clone());
                }
                let name = e.declared_guest().unwrap_or(&label).to_string();
                self.announce(&key, &name, version).await;
                self.registry.release_unused();
                return;
            }
        };
        let name = controller.name().to_string();
        let controller = Arc::new(controller);
        // A version that waited for its kind or its registry, or was
        // refused, is superseded.
        self.waiting.remove(&key);
        self.pending_pulls.remove(&key);
        lock(&self.refused).remove(&key);
        lock(&self.rejected).remove(&key);
        if let Some(previous) = previous_name.as_ref().filter(|p| **p != name) {
            self.release_claims(previous);
        }
        self.reserve(&key, controller.manifest());
        let old = lock(&self.guests).remove(&key);
        let mut dropped_shadow = None;
        if let Some(spec) = old.as_ref().and_then(|o| o.controller.shadow()) {
            // The shadow stays beside the new version while it still reads
            // the same snapshots.
            match spec.rebind(controller.manifest()) {
                Ok(spec) => controller.attach_shadow(spec, self.config.shadow_dry_run),
                Err(e) => {
                    tracing::warn!(guest = %name, "shadow dropped at the swap: {e}");
                    dropped_shadow = Some(e.to_string());
                }
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
        self.announce(&key, &name, Version::loaded(origin, controller.digest()))
            .await;
        if let Some(why) = dropped_shadow {
            let shadow = self.status.get(&key).and_then(|g| g.shadow).map(|s| {
                let state = LoadState::Refused {
                    reason: "shadow".into(),
                    message: format!("dropped at the swap: {why}"),
                };
                Version { state, ..s }
            });
            self.announce_shadow(&key, shadow).await;
        }
    }

    pub(super) async fn remove(&self, key: &str) {
        self.pending_pulls.remove(key);
        if let Some(g) = self.status.get(key) {
            let gone = format!("{} is gone", g.current.source);
            self.announce_removed(key, &g.name, &gone).await;
        }
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
        let controller = self.controller_by_key_or_name(target);
        let mut digest = None;
        let attached = async {
            let controller = controller.ok_or_else(|| crate::shadow::ShadowError::NoTarget {
                file: source.clone(),
                target: target.to_string(),
            })?;
            let (component, module) = self.compile_file(file).await;
            digest = component;
            self.attach_shadow(&controller, &source, module?).await?;
            Ok::<_, SupervisorError>(controller.name().to_string())
        };
        let result = attached.await;
        let tried = Version::compiling(GuestSource::of_file(file), digest);
        match result {
            Ok(guest) => {
                lock(&self.shadow_files).insert(file.key.clone(), file.digest.clone());
                lock(&self.rejected).remove(&file.key);
                tracing::info!(guest = %guest, shadow = %source, "shadow loaded: its plans are compared with the guest's, never acted on");
                self.count_swap(&guest, "shadow_loaded");
                let component = tried.digest.clone().unwrap_or_default();
                let version = Version::loaded(tried.source, &component);
                self.announce_shadow(&guest, Some(version)).await;
            }
            Err(SupervisorError::Shadow(e @ crate::shadow::ShadowError::NoTarget { .. })) => {
                tracing::debug!("{e}; tried again at the next rescan");
            }
            Err(e) => {
                lock(&self.rejected).insert(file.key.clone(), file.digest.clone());
                tracing::error!(guest = %target, shadow = %source, reason = e.reason(), "shadow rejected: {e}");
                self.count_swap(target, "rejected");
                self.announce_shadow(target, Some(announce::refused(tried, &e)))
                    .await;
            }
        }
    }

    /// The running guest whose key, else whose declared name, is `target`.
    fn controller_by_key_or_name(&self, target: &str) -> Option<Arc<GuestController>> {
        // Its own statement: the guard must be gone before `controller`
        // locks the guests again (a guest and its shadow removed in one
        // update deadlocked here).
        let by_key = lock(&self.guests).get(target).map(|g| g.controller.clone());
        by_key.or_else(|| self.controller(target))
    }

    /// Stops the shadow `key` (its file is gone) beside guest `target`.
    pub(super) async fn remove_shadow(&self, key: &str, target: &str) {
        lock(&self.shadow_files).remove(key);
        self.announce_shadow(target, None).await;
        let controller = self.controller_by_key_or_name(target);
        if let Some(controller) = controller {
            controller.detach_shadow();
            tracing::info!(guest = %controller.name(), "shadow removed ({key}.wasm is gone)");
        }
    }
}
