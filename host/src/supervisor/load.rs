//! Loading one guest: compiling and describing it, checking it against the
//! others (unique name, write-rule overlap), starting it or keeping it
//! waiting (not ready, retried with backoff), and refusing it alone when
//! it cannot run (policy, `describe` failing, write rules naming another
//! guest's object, missing permissions: a log line, a metric, an Event on
//! the host's Pod, a `/readyz` detail line). It never swaps a running
//! guest (see `swap`).

use super::*;

impl Supervisor {
    /// Refuses a guest that could not be loaded: ends the host when
    /// `strict_guests` asks; otherwise logs it, counts it
    /// (`wasmctrl_guests_refused_total`), records a `GuestRefused` Warning
    /// Event on the host's Pod and keeps it for `/readyz`'s detail (and
    /// the first such error in `first`).
    pub(super) async fn refuse(
        &self,
        key: String,
        name: String,
        tried: Version,
        digest: String,
        e: SupervisorError,
        first: &mut Option<SupervisorError>,
    ) -> Result<(), SupervisorError> {
        if self.config.strict_guests {
            return Err(e);
        }
        tracing::error!(guest = %name, path = %tried.source, reason = e.reason(), "guest refused; the other guests run: {e}");
        let version = announce::refused(tried, &e);
        match key.strip_prefix(SHADOW_KEY) {
            Some(target) => self.announce_shadow(target, Some(version)).await,
            None => self.announce(&key, &name, version).await,
        }
        self.record_refused(key, &name, digest, &e);
        if first.is_none() {
            *first = Some(e);
        }
        Ok(())
    }

    /// Keeps a refused guest for `/readyz`'s detail (a changed file is
    /// tried again; an unchanged one is not) and counts it.
    pub(super) fn record_refused(
        &self,
        key: String,
        name: &str,
        digest: String,
        e: &SupervisorError,
    ) {
        self.metrics
            .guests_refused
            .get_or_create(&GuestReasonLabels {
                guest: name.to_string(),
                reason: e.reason().to_string(),
            })
            .inc();
        let why = e.to_string().replace('\n', " ");
        let why = if why.starts_with("guest ") {
            why
        } else {
            format!("guest {name}: {why}")
        };
        lock(&self.refused).insert(
            key,
            Refused {
                name: name.to_string(),
                digest,
                why,
            },
        );
    }

    /// Refuses a guest whose write rules name an object the rules of
    /// another guest of this host (running or waiting) name.
    pub(super) fn check_overlap(
        &self,
        key: &str,
        manifest: &crate::guest::GuestManifest,
    ) -> Result<(), SupervisorError> {
        let guests = lock(&self.guests);
        let running = guests
            .values()
            .filter(|g| g.key != key)
            .map(|g| g.controller.manifest().clone());
        let waiting = self
            .waiting
            .manifests()
            .into_iter()
            .filter(|(k, _)| k != key);
        for other in running.chain(waiting.map(|(_, m)| m)) {
            if let Some(overlap) = claims::static_overlap(manifest, &other) {
                return Err(SupervisorError::Overlap(Box::new(overlap)));
            }
        }
        Ok(())
    }

    /// Starts a described guest's controller (registered, to run with
    /// [`Supervisor::run`]), or, when a kind it needs is not served yet,
    /// keeps it waiting. Any other failure is returned.
    pub(super) async fn start_or_wait(
        &self,
        key: String,
        origin: GuestSource,
        digest: String,
        described: DescribedGuest,
    ) -> Result<(), SupervisorError> {
        let name = described.manifest.name.clone();
        let source = origin.to_string();
        self.check_unique(&name, &source)?;
        self.check_overlap(&key, &described.manifest)?;
        let component = described.module.digest().to_string();
        let version = match or_wait(self.controller_for(described.clone()).await)? {
            Ok(controller) => {
                tracing::info!(guest = %name, path = %source, "guest loaded");
                self.insert(key.clone(), source, digest, controller, false);
                Version::loaded(origin, &component)
            }
            Err(kind) => {
                let version = Version::waiting_for_kind(origin, &component, &kind);
                let w = WaitingGuest::new(source, digest, described, kind);
                self.waiting.wait(key.clone(), w);
                version
            }
        };
        self.announce(&key, &name, version).await;
        Ok(())
    }

    /// Retries every waiting guest whose time has come: a guest whose kinds
    /// are now served starts; one still missing a kind waits longer; any
    /// other failure (a permission the host lacks, ...) refuses it, as at
    /// start.
    pub(super) async fn retry_waiting(&self) -> Result<(), SupervisorError> {
        for (key, w) in self.waiting.take_due() {
            let name = w.name().to_string();
            let component = w.described.module.digest().to_string();
            // Where the waiting version came from, as it was reported.
            let origin = self.status.get(&key).map_or_else(
                || GuestSource::File {
                    path: w.source.clone(),
                },
                |s| s.current.source,
            );
            let started = match or_wait(self.controller_for(w.described.clone()).await) {
                Ok(started) => started,
                Err(e) => {
                    let tried = Version::compiling(origin, Some(component));
                    self.refuse(key, name, tried, w.digest.clone(), e.into(), &mut None)
                        .await?;
                    continue;
                }
            };
            let version = match started {
                Ok(controller) => {
                    tracing::info!(guest = %w.name(), kind = %w.kind, path = %w.source, "the kind the guest waited for is served; guest starting");
                    self.insert(key.clone(), w.source, w.digest, controller, true);
                    Version::loaded(origin, &component)
                }
                Err(kind) => {
                    let version = Version::waiting_for_kind(origin, &component, &kind);
                    self.waiting.retry_later(key.clone(), w, kind);
                    version
                }
            };
            self.announce(&key, &name, version).await;
        }
        Ok(())
    }

    pub(super) fn check_unique(&self, name: &str, source: &str) -> Result<(), SupervisorError> {
        let running = lock(&self.guests)
            .values()
            .find(|g| g.controller.name() == name)
            .map(|g| g.source.clone());
        if let Some(first) = running.or_else(|| self.waiting.source_of(name)) {
            return Err(SupervisorError::DuplicateName {
                name: name.to_string(),
                first,
                second: source.to_string(),
            });
        }
        Ok(())
    }

    /// Registers a controller; its task starts now when `running` (the host
    /// already runs), else in [`Supervisor::run`].
    pub(super) fn insert(
        &self,
        key: String,
        source: String,
        digest: String,
        controller: GuestController,
        running: bool,
    ) {
        let controller = Arc::new(controller);
        self.reserve(&key, controller.manifest());
        lock(&self.refused).remove(&key);
        let task = if running {
            self.spawn(controller.clone())
        } else {
            tokio::spawn(std::future::pending())
        };
        lock(&self.guests).insert(
            key.clone(),
            RunningGuest {
                key,
                source,
                digest,
                controller,
                task,
            },
        );
    }

    pub(super) fn spawn(&self, controller: Arc<GuestController>) -> tokio::task::JoinHandle<()> {
        if let Some(leases) = &self.guest_leases {
            return self.spawn_led(controller, leases);
        }
        let failures = self.failures_tx.clone();
        let mut leadership = self.leadership.clone();
        tokio::spawn(async move {
            let gate = async move {
                loop {
                    if *leadership.borrow_and_update() == Leadership::Leading {
                        return;
                    }
                    if leadership.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
            };
            if let Err(e) = controller.run_when(gate).await {
                let _ = failures.send(e);
            }
        })
    }

    /// Loads the guest file `path` off the async runtime, on the blocking
    /// pool (a guest directory's files and hot swaps go through
    /// [`Self::compile_file`], off the runtime too): compiling an 18 MB component takes
    /// tens of seconds the first time, and other guests keep reconciling
    /// meanwhile. The compile cache (by digest) is the runtime's.
    pub(super) fn compile(
        &self,
        label: String,
        path: std::path::PathBuf,
    ) -> impl std::future::Future<Output = Result<GuestModule, SupervisorError>> + Send + 'static
    {
        let runtime = self.runtime.clone();
        let guest = label;
        let task = tokio::task::spawn_blocking(move || runtime.load_file(&path));
        async move {
            task.await
                .map_err(|e| {
                    SupervisorError::Guest(GuestError {
                        guest,
                        kind: guest::GuestErrorKind::Compile(format!("compile task failed: {e}")),
                    })
                })?
                .map_err(SupervisorError::Guest)
        }
    }

    /// Describes `module` with `values` as its configuration (off the
    /// async runtime: a guest call may take up to its deadline).
    pub(super) async fn describe(
        &self,
        module: GuestModule,
        values: BTreeMap<String, String>,
    ) -> Result<DescribedGuest, SupervisorError> {
        let env = guest::environment(&self.config.namespace, &values);
        let (m, e) = (module.clone(), env.clone());
        let manifest = tokio::task::spawn_blocking(move || m.manifest(&e))
            .await
            .map_err(|e| GuestError {
                guest: module.label().to_string(),
                kind: guest::GuestErrorKind::Trap(format!("describe task failed: {e}")),
            })??;
        Ok(DescribedGuest {
            module,
            env,
            manifest,
        })
    }

    /// The refusal of the guest `key` whose configuration file is unusable,
    /// naming it by what `module` declares without configuration when it
    /// can be described so (off the async runtime, as every describe).
    pub(super) async fn config_error(
        &self,
        key: &str,
        module: &GuestModule,
        source: guest_dir::ConfigFileError,
    ) -> SupervisorError {
        let (m, namespace) = (module.clone(), self.config.namespace.clone());
        let guest = tokio::task::spawn_blocking(move || m.name_without_configuration(&namespace))
            .await
            .ok()
            .flatten();
        SupervisorError::Config {
            key: key.to_string(),
            guest,
            source,
        }
    }

    /// Describes a `--guest` file with its `--config` entries, found under
    /// its declared name or else its file stem. The name is only known by
    /// describing, so the guest is described with the stem's entries (or
    /// none) first, and again only when entries under its declared name
    /// differ from those.
    pub(super) async fn describe_file(
        &self,
        module: GuestModule,
        path: &Path,
    ) -> Result<DescribedGuest, SupervisorError> {
        let by_stem = self.config.guest_config.get(&stem(path)).cloned();
        let first = self
            .describe(module.clone(), by_stem.clone().unwrap_or_default())
            .await?;
        match self.config.guest_config.get(&first.manifest.name) {
            Some(by_name) if Some(by_name) != by_stem.as_ref() => {
                self.describe(module, by_name.clone()).await
            }
            _ => Ok(first),
        }
    }

    pub(super) async fn controller_for(
        &self,
        described: DescribedGuest,
    ) -> Result<GuestController, ControllerError> {
        let dormant = self.stands_by_cold(&described.manifest);
        self.controller_with(described, dormant).await
    }

    /// [`Self::controller_for`], started dormant (standing by cold: its
    /// caches list nothing of their own) or not.
    pub(super) async fn controller_with(
        &self,
        described: DescribedGuest,
        dormant: bool,
    ) -> Result<GuestController, ControllerError> {
        let shards = self.shards_now(&described.manifest);
        // Caching no bucket is standing by cold: no valid selector selects
        // nothing.
        let dormant = dormant
            || shards
                .as_ref()
                .and_then(|s| s.cached())
                .is_some_and(|c| c.is_empty());
        let registry = match dormant {
            true => self.registry.dormant(),
            false => self.registry.clone(),
        };
        let config = self
            .config
            .controller
            .clone()
            .claims(self.claims.clone())
            .host_pod(self.config.pod.clone())
            .shards(shards)
            // Replicas hand guests and buckets over: a late write of one
            // that lost it must not overwrite the next holder's.
            .pin_versions(self.guest_leases.is_some());
        let controller = GuestController::start(
            self.client.clone(),
            &registry,
            &self.discovery,
            described,
            config,
            self.metrics.clone(),
        )
        .await?;
        if let Some(record) = &self.config.record {
            controller.start_recording(record);
        }
        Ok(controller)
    }

    /// Registers `manifest`'s write rules with the claims, before its guest
    /// writes: the objects the other running guests wrote while no other
    /// guest could name them, and which it can, are claimed for them now.
    pub(super) fn reserve(&self, key: &str, manifest: &crate::guest::GuestManifest) {
        self.claims.reserve(manifest);
        let others: Vec<_> = lock(&self.guests)
            .values()
            .filter(|g| g.key != key)
            .map(|g| g.controller.clone())
            .collect();
        for c in others {
            self.claims.seed(c.name(), &c.written());
        }
    }

    /// Ends what `guest` reserved and claimed; when it held objects, every
    /// other guest looks again at once (one whose plan a claim refused
    /// need not wait out its backoff).
    pub(super) fn release_claims(&self, guest: &str) {
        if self.claims.release_guest(guest) {
            for c in self.controllers().iter().filter(|c| c.name() != guest) {
                c.enqueue_all();
            }
        }
    }

    /// Loads `path` as the shadow of the running guest `target`: described
    /// with its target's environment (namespace and configuration), checked
    /// against its target's manifest, then attached.
    pub(super) async fn load_shadow(
        &self,
        target: &str,
        path: &Path,
    ) -> Result<(), SupervisorError> {
        let file = path.display().to_string();
        let controller =
            self.controller(target)
                .ok_or_else(|| crate::shadow::ShadowError::NoTarget {
                    file: file.clone(),
                    target: target.to_string(),
                })?;
        let module = self.compile(file.clone(), path.to_path_buf()).await?;
        let digest = module.digest().to_string();
        self.attach_shadow(&controller, &file, module).await?;
        tracing::info!(guest = %target, shadow = %file, "shadow loaded: its plans are compared with the guest's, never acted on");
        let origin = GuestSource::File { path: file };
        self.announce_shadow(target, Some(Version::loaded(origin, &digest)))
            .await;
        Ok(())
    }

    /// Reads a guest file's component (decompressed, under the cap; or
    /// fetched, for a `NAME.oci`) and
    /// compiles it, off the async runtime (both take CPU): the component's
    /// digest once it could be read, and the module or why not.
    pub(super) async fn compile_file(
        &self,
        file: &GuestFile,
    ) -> (Option<String>, Result<GuestModule, SupervisorError>) {
        let cap = self
            .config
            .decompressed_max
            .unwrap_or(compressed::DEFAULT_DECOMPRESSED_MAX);
        // A guest named by OCI reference: pulled (or found in the cache)
        // and verified first.
        let fetched = match &file.oci {
            Some(_) => match self.fetch(file).await {
                Ok(bytes) => Some(bytes),
                Err(e) => return (None, Err(e)),
            },
            None => None,
        };
        let (runtime, file) = (self.runtime.clone(), file.clone());
        let key = file.key.clone();
        let compiled = tokio::task::spawn_blocking(move || {
            let component = match fetched {
                Some(bytes) => std::borrow::Cow::Owned(bytes),
                None => match file.component(cap) {
                    Ok(component) => component,
                    Err(e) => return (None, Err(e.into())),
                },
            };
            match runtime.load_bytes(&file.file_name(), &component) {
                Ok(module) => (Some(module.digest().to_string()), Ok(module)),
                Err(e) => (
                    Some(hex::encode(<sha2::Sha256 as sha2::Digest>::digest(
                        &component,
                    ))),
                    Err(e.into()),
                ),
            }
        })
        .await;
        compiled.unwrap_or_else(|e| {
            let kind = guest::GuestErrorKind::Compile(format!("compile task failed: {e}"));
            (None, Err(GuestError { guest: key, kind }.into()))
        })
    }

    /// Describes `module`, from `file`, with `controller`'s environment
    /// (off the async runtime, as every describe), checks it against its
    /// guest's manifest and attaches it as the guest's shadow.
    pub(super) async fn attach_shadow(
        &self,
        controller: &GuestController,
        file: &str,
        module: GuestModule,
    ) -> Result<(), SupervisorError> {
        let (m, env) = (module.clone(), controller.environment().clone());
        let manifest = tokio::task::spawn_blocking(move || m.manifest(&env))
            .await
            .map_err(|e| GuestError {
                guest: file.to_string(),
                kind: guest::GuestErrorKind::Trap(format!("describe task failed: {e}")),
            })??;
        let spec = crate::shadow::ShadowSpec::new(file, module, manifest, controller.manifest())?;
        controller.attach_shadow(spec, self.config.shadow_dry_run);
        Ok(())
    }

    /// The report of the shadow running beside `guest`, if one does.
    pub fn shadow_report(&self, guest: &str) -> Option<serde_json::Value> {
        Some(self.controller(guest)?.shadow()?.report())
    }
}
