//! One reconcile of one key: the host-managed finalizer (added; released
//! from an object that left the watch's selectors), the snapshot, the
//! guest call with the host's clock, the plan handed to the actuator, and
//! the result as a queue outcome (a sandbox failure may quarantine the
//! guest). It never maps changes to keys and never writes itself.

use super::*;

impl GuestController {
    /// One reconcile of `key`, measured, inside its own span. The span is
    /// attached to the future (`Instrument`), never entered across an
    /// `.await`: a guard held over a suspension point leaks into whatever
    /// the worker thread polls next (another key's reconcile), nesting spans
    /// across keys and guests.
    pub(super) async fn reconcile(&self, key: RequestKey) -> Outcome {
        use tracing::Instrument;
        if let Some(left) = self.quarantine.remaining(tokio::time::Instant::now()) {
            // Quarantined: nothing is called; the key comes back when the
            // quarantine ends, its backoff kept.
            return Outcome::Postpone(left);
        }
        let started = std::time::Instant::now();
        let span = tracing::info_span!("reconcile", guest = %self.name, key = %key);
        let (outcome, reason) = self.reconcile_inner(key).instrument(span).await;
        let result = match (&outcome, reason) {
            (_, Some(reason)) => ReconcileResult::Error(reason),
            (Outcome::RequeueAfter(_), None) => ReconcileResult::RequeueAfter,
            _ => ReconcileResult::Success,
        };
        self.metrics.reconciled(result, started.elapsed());
        outcome
    }

    /// Adds the primary watch's declared finalizer to `key`'s object when it
    /// lacks it and is not being deleted: before the guest ever sees it, so
    /// no deletion can happen without the guest's plan releasing it.
    async fn ensure_finalizer(
        &self,
        key: &RequestKey,
    ) -> Result<Executed, crate::actuator::ActuatorError> {
        let Some(p) = key.watch else {
            return Ok(Executed::default());
        };
        let spec = &self.manifest.watches[p];
        let Some(finalizer) = &spec.finalizer else {
            return Ok(Executed::default());
        };
        let (ns, name) = key.namespace_and_name();
        let Some(obj) = self.caches[p].store.get(ns, name) else {
            return Ok(Executed::default());
        };
        if obj.deletion_timestamp.is_some() || obj.has_finalizer(finalizer) {
            return Ok(Executed::default());
        }
        self.actuator
            .ensure_finalizer(&primary_target(spec, key), &obj.uid, finalizer)
            .await
    }

    /// Where `key`'s primary stands, from the server's facts, not the
    /// cache's guess: present when its watch holds it; when it does not,
    /// `gone` for a watch without selectors (only a deletion makes an object
    /// leave it), else as the server says (missing or a namesake: `gone`;
    /// there with the uid last seen, out of the selectors: `unselected`,
    /// the server's copy its last state when the host never saw it leave).
    /// None when the server says it is still selected: the cache is behind
    /// and its event comes. A failed question is an error: the key is
    /// retried, never reconciled on a guess.
    async fn standing(
        &self,
        key: &RequestKey,
    ) -> Result<Option<Standing>, crate::actuator::ActuatorError> {
        let Some(p) = key.watch else {
            return Ok(Some(Standing::Aggregate));
        };
        let (ns, name) = key.namespace_and_name();
        if let Some(primary) = self.caches[p].store.get(ns, name) {
            self.departed.returned(key);
            return Ok(Some(Standing::Present(primary)));
        }
        let last = self.departed.get(key);
        let spec = &self.manifest.watches[p];
        let left = |presence, last, live| {
            Ok(Some(Standing::Left {
                presence,
                last,
                live,
            }))
        };
        // A cache selected by bucket may have lost it to a label alone:
        // the server says.
        if spec.label_selector.is_none() && spec.field_selector.is_none() && !self.by_bucket(p) {
            return left(Presence::Gone, last, None);
        }
        let on_server = self
            .actuator
            .on_server(
                &primary_target(spec, key),
                spec.label_selector.as_deref(),
                spec.field_selector.as_deref(),
            )
            .await?;
        match on_server {
            OnServer::Selected => Ok(None),
            OnServer::Missing => left(Presence::Gone, last, None),
            OnServer::Unselected { current, .. }
                if last.as_ref().is_some_and(|l| *l.uid != current.uid) =>
            {
                // A namesake: the object we knew was deleted.
                left(Presence::Gone, last, None)
            }
            OnServer::Unselected { current, object } => {
                // Never seen leaving (it left while no host ran): the
                // server's copy is its last state.
                let last =
                    last.or_else(|| Some(Arc::new(self.watches[p].informer.project(object))));
                left(Presence::Unselected, last, Some(current))
            }
        }
    }

    /// `key`, dropped at its bucket's gate, is relabelled when its cache
    /// holds its primary although it caches no such bucket: the primary's
    /// label names another bucket than its key's (set by hand, or by a
    /// host with another number of buckets), and no other replica would
    /// ever see it.
    pub(super) fn mislabelled(&self, key: &RequestKey) {
        let (Some(labeller), Some(shards), Some(p)) =
            (&self.labeller, &self.config.shards, key.watch)
        else {
            return;
        };
        let (ns, name) = key.namespace_and_name();
        if shards.caches(&key.key) || self.caches[p].store.get(ns, name).is_none() {
            return;
        }
        labeller.relabel(
            primary_target(&self.manifest.watches[p], key),
            &key.key,
            false,
        );
    }

    /// `key`'s primary is selected on the server but not in its cache: with
    /// caches selected by bucket, its label is missing or wrong (removed
    /// or changed by hand); labelled again when this replica leads its
    /// bucket, it comes back to the cache without a clean-up.
    fn relabel_selected(&self, key: &RequestKey) {
        let (Some(labeller), Some(shards), Some(p)) =
            (&self.labeller, &self.config.shards, key.watch)
        else {
            return;
        };
        if self.by_bucket(p) && shards.leads(&key.key) {
            labeller.relabel(
                primary_target(&self.manifest.watches[p], key),
                &key.key,
                true,
            );
        }
    }

    /// After a successful reconcile of `key`, whose primary left the
    /// watch's selectors and stands on the server as `live`: removes the
    /// watch's host-managed finalizer from it (pinned to its uid). It
    /// would never see its deletion again and hang in deletion forever;
    /// the guest has had its clean-up reconcile.
    async fn release_unselected(
        &self,
        key: &RequestKey,
        live: &Current,
    ) -> Result<(), crate::actuator::ActuatorError> {
        let Some(p) = key.watch else {
            return Ok(());
        };
        let spec = &self.manifest.watches[p];
        let Some(finalizer) = &spec.finalizer else {
            return Ok(());
        };
        let released = self
            .actuator
            .release_unselected(&primary_target(spec, key), live, finalizer)
            .await?;
        if released {
            tracing::info!(
                finalizer,
                uid = %live.uid,
                "the object left the watch's selectors and its clean-up reconcile succeeded: the host's finalizer released"
            );
        }
        Ok(())
    }

    /// One reconcile; the error reason (a metric label) when it failed.
    async fn reconcile_inner(&self, key: RequestKey) -> (Outcome, Option<&'static str>) {
        // The guard's one answer for this reconcile, handed to the actuator.
        let permit = match self.guard.admit(&key) {
            Admission::Write(permit) => permit,
            Admission::HeldBack(left) => {
                // A hot loop: the key is not reconciled (nothing is planned,
                // so nothing is written) until its hold-back ends.
                tracing::debug!("hot loop: not reconciled for another {left:?}");
                return (Outcome::RequeueAfter(left), None);
            }
        };
        let mut executed = match self.ensure_finalizer(&key).await {
            Ok(done) => done,
            Err(e) => {
                let reason = e.metric_label();
                tracing::warn!(reason, "adding the host-managed finalizer: {e}");
                return (write_outcome(e), Some(reason));
            }
        };
        if executed.dropped > 0 {
            // The finalizer could not be added: the object is gone or was
            // replaced. The snapshot would still hold it, and a plan made
            // on it could create children of an object that no longer
            // exists. Look again once the cache has caught up (its delete
            // or the namesake's add re-enqueues the key too).
            tracing::info!("primary gone or replaced before its finalizer landed; not reconciled on the stale cache");
            return (Outcome::RequeueAfter(DROPPED_WRITE_RECHECK), None);
        }
        let standing = match self.standing(&key).await {
            Ok(Some(standing)) => standing,
            Ok(None) => {
                tracing::info!("primary not cached but still selected on the server; not reconciled until the cache catches up");
                self.relabel_selected(&key);
                return (Outcome::RequeueAfter(DROPPED_WRITE_RECHECK), None);
            }
            Err(e) => {
                let reason = e.metric_label();
                tracing::warn!(reason, "asking the server where the primary stands: {e}");
                return (write_outcome(e), Some(reason));
            }
        };
        let instances = self.instances.clone();
        let manifest = self.manifest.clone();
        let caches = self.caches.clone();
        let env = self.env.at(crate::guest::now_ms());
        let request = relations::guest_request(&manifest, &key, standing.presence());
        let standing_seen = standing.clone();
        let k = key.clone();
        let request_sent = request.clone();
        let aggregate = self
            .aggregate
            .clone()
            .filter(|a| key.watch.is_none() && &*key.key == a.key());
        let shadowed = crate::sync::lock(&self.shadow).is_some()
            || crate::sync::lock(&self.recording).is_some();
        let joined = match aggregate {
            Some(aggregate) => {
                // The blocking pool's thread is outside this future: carry
                // the span.
                let span = tracing::Span::current();
                tokio::task::spawn_blocking(move || {
                    span.in_scope(|| {
                        let (result, stats) =
                            aggregate.reconcile(instances.module(), &manifest, &caches, &env);
                        tracing::debug!(?stats, "incremental aggregate");
                        let call = crate::guest::CallStats {
                            instantiate: stats.instantiate,
                            instantiated: true,
                            call: stats.call,
                            requeue_clamped: stats.requeue_clamped,
                            log_limited: stats.log_limited,
                        };
                        (result, call, None)
                    })
                })
                .await
            }
            None => {
                let snap = standing_seen.snapshot(&manifest, &caches, &k);
                // What the shadow gets: the very snapshot and clock.
                let seen = shadowed.then(|| (snap.clone(), env.clone()));
                let snap = crate::guest::snapshot::to_wit(snap);
                // A short call runs here; a long one, or one with no kept
                // instance, on the blocking pool (guest::WarmInstances).
                match instances.reconcile_here(&manifest, &env, &request, snap) {
                    crate::guest::Here::Ran(result, stats) => Ok((result, stats, seen)),
                    crate::guest::Here::Off(snap) => {
                        let span = tracing::Span::current();
                        tokio::task::spawn_blocking(move || {
                            span.in_scope(|| {
                                let (result, stats) =
                                    instances.reconcile_wit(&manifest, &env, &request, snap);
                                (result, stats, seen)
                            })
                        })
                        .await
                    }
                }
            }
        };
        let (result, stats, seen) = match joined {
            Ok(r) => r,
            Err(e) => {
                return (
                    Outcome::retry(format!("reconcile task failed: {e}")),
                    Some("panic"),
                );
            }
        };
        tracing::debug!(?stats, "guest call");
        self.metrics.guest_call(
            stats.instantiated.then_some(stats.instantiate),
            stats.call,
            result.as_ref().err().map(GuestError::reason),
        );
        match &result {
            Err(e) if quarantine::counts(e.reason()) => self.sandbox_failed(e).await,
            _ => {
                if self.quarantine.succeeded() {
                    tracing::info!("guest call returned; quarantine over");
                    self.metrics.quarantined(false);
                }
            }
        }
        self.metrics
            .limited("min_requeue", u64::from(stats.requeue_clamped));
        self.metrics.limited("log", stats.log_limited);
        let plan = match result {
            Ok(plan) => plan,
            Err(e) => {
                let reason = e.reason();
                let terminal = matches!(
                    e.kind,
                    crate::guest::GuestErrorKind::Failed {
                        retryable: false,
                        ..
                    }
                );
                if terminal {
                    tracing::error!(reason, "{e}; not retrying until the key changes");
                    // A departed primary's key never changes again: keep
                    // nothing for it.
                    self.settle(&key, &standing);
                    return (Outcome::Success, Some(reason));
                }
                tracing::warn!(reason, "{e}");
                return (Outcome::retry(e), Some(reason));
            }
        };
        self.offer_shadow(&key, &request_sent, &plan, seen);
        if let Err(c) = self.config.claims.claim(&self.name, &plan.writes) {
            tracing::warn!(guest = %self.name, owner = %c.owner, object = %c.object, "plan refused: {c}");
            self.metrics.refused_write(&c.owner);
            return (Outcome::retry(c), Some("claimed"));
        }
        let mut plan = plan;
        if let (Some(shards), Some(_)) = (&self.config.shards, &self.labeller) {
            labels::stamp(&mut plan, &self.manifest, shards, &key.key);
        }
        match self.actuator.execute(&key, &plan, &permit).await {
            Err(e) => {
                let reason = e.metric_label();
                tracing::warn!(reason, "{e}");
                return (write_outcome(e), Some(reason));
            }
            Ok(done) => {
                self.config.claims.deleted(&self.name, &plan.writes);
                executed.changed_meanwhile |= done.changed_meanwhile;
                executed.dropped += done.dropped;
                executed.held_back = done.held_back;
            }
        }
        if let Standing::Left {
            presence: Presence::Unselected,
            live: Some(live),
            ..
        } = &standing
        {
            if let Err(e) = self.release_unselected(&key, live).await {
                let reason = e.metric_label();
                tracing::warn!(reason, "releasing the host-managed finalizer: {e}");
                return (write_outcome(e), Some(reason));
            }
        }
        if executed.dropped == 0 && executed.held_back.is_none() {
            // The clean-up plan was carried out whole.
            self.settle(&key, &standing);
        }
        // Someone else wrote an output while our write was in flight: look
        // again (the key is being processed, so this re-queues it once it
        // is done).
        if executed.changed_meanwhile {
            self.queue.add(key.clone());
        }
        let mut requeue = plan.requeue_after;
        if executed.dropped > 0 {
            // A pinned write met a gone or replaced object: not an error;
            // the key is looked at again once the caches have caught up.
            requeue = Some(requeue.map_or(DROPPED_WRITE_RECHECK, |d| d.min(DROPPED_WRITE_RECHECK)));
        }
        if let Some(d) = executed.held_back {
            // A write war or a hot loop: come back when its hold-back ends.
            requeue = Some(requeue.map_or(d, |r| r.min(d)));
        }
        let outcome = match requeue {
            Some(d) => Outcome::RequeueAfter(d),
            None => Outcome::Success,
        };
        (outcome, None)
    }
}

impl GuestController {
    /// Forgets the last state a `Left` standing of `key` was built on.
    fn settle(&self, key: &RequestKey, standing: &Standing) {
        if let Standing::Left {
            last: Some(last), ..
        } = standing
        {
            self.departed.settled(key, last);
        }
    }

    /// Hands the key the active guest just planned to its shadow and its
    /// recording, where they run: without waiting, off the write path.
    fn offer_shadow(
        &self,
        key: &RequestKey,
        request: &Request,
        plan: &crate::guest::ValidatedPlan,
        seen: Option<(crate::guest::SnapshotData, Environment)>,
    ) {
        let shadow = crate::sync::lock(&self.shadow);
        let recording = crate::sync::lock(&self.recording);
        if shadow.is_none() && recording.is_none() {
            return;
        }
        let active = seen.as_ref().map(|_| shadow::normalise(&plan.to_json()));
        let case = || match (&seen, &active) {
            (Some((snapshot, env)), Some(active)) => shadow::Case::Seen {
                key: key.clone(),
                request: request.clone(),
                env: env.clone(),
                snapshot: Box::new(snapshot.clone()),
                active: active.clone(),
            },
            _ => shadow::Case::Aggregate(key.clone()),
        };
        if let Some(shadow) = shadow.as_ref() {
            shadow.offer(case());
        }
        if let Some(recording) = recording.as_ref() {
            recording.offer(case());
        }
    }

    /// Records a call that ran out of time or trapped; starts a quarantine
    /// (log line, metric, Warning Event on the host's Pod) when that makes
    /// too many in a row.
    async fn sandbox_failed(&self, e: &GuestError) {
        let Verdict::Quarantined(length, failures) =
            self.quarantine.failed(tokio::time::Instant::now())
        else {
            return;
        };
        let note = format!(
            "guest {} quarantined for {length:?} after {failures} calls in a row that ran out of time or trapped (last: {e}); its keys wait",
            self.name
        );
        tracing::warn!(guest = %self.name, reason = e.reason(), ?length, failures, "{note}");
        self.metrics.quarantined(true);
        let Some((namespace, pod)) = &self.config.host_pod else {
            return;
        };
        let event = crate::events::Event {
            type_: crate::events::EventType::Warning,
            reason: "GuestQuarantined".into(),
            note: Some(note),
            action: "Reconcile".into(),
            secondary: None,
        };
        let reference = crate::events::pod_reference(namespace, pod);
        if let Err(err) = self.recorder.publish(&event, &reference).await {
            tracing::warn!("cannot record event GuestQuarantined on pod {namespace}/{pod}: {err}");
        }
    }
}

/// The queue outcome of a key whose writes failed with `e`: the server's
/// failures are retried promptly once it answers again
/// ([`workqueue::Outcome::Unavailable`]); the request's keep their backoff.
fn write_outcome(e: ActuatorError) -> Outcome {
    match &e {
        ActuatorError::Api { source, .. } if crate::failure::is_server_side(source) => {
            Outcome::unavailable(e)
        }
        _ => Outcome::retry(e),
    }
}

/// The object a primary watch `spec`'s request `key` names.
fn primary_target(spec: &crate::guest::WatchSpec, key: &RequestKey) -> ObjectKey {
    let (ns, name) = key.namespace_and_name();
    ObjectKey {
        gvk: spec.gvk.clone(),
        namespace: (!ns.is_empty()).then(|| ns.to_string()),
        name: name.to_string(),
    }
}

/// Where a key's primary stands for one reconcile (see
/// [`GuestController::standing`]).
#[derive(Clone)]
enum Standing {
    /// An aggregate key: no primary.
    Aggregate,
    /// Its watch holds it, as cached.
    Present(Arc<crate::projection::ProjectedObject>),
    /// It left its watch.
    Left {
        /// `gone` or `unselected`.
        presence: Presence,
        /// Its last state the host saw, if it saw it.
        last: Option<Arc<crate::projection::ProjectedObject>>,
        /// Its uid and finalizers on the server, when `unselected`.
        live: Option<Current>,
    },
}

impl Standing {
    /// The request's presence.
    fn presence(&self) -> Option<Presence> {
        match self {
            Standing::Aggregate => None,
            Standing::Present(_) => Some(Presence::Present),
            Standing::Left { presence, .. } => Some(*presence),
        }
    }

    /// The snapshot of `key` standing so: around the cached primary when
    /// present, around its last state (without it) when it left — around
    /// its key when it was deleted unseen — every object for an aggregate
    /// key.
    fn snapshot(
        &self,
        manifest: &GuestManifest,
        caches: &[WatchCache],
        key: &RequestKey,
    ) -> crate::guest::SnapshotData {
        let (p, basis, present) = match (self, key.watch) {
            (Standing::Present(primary), Some(p)) => (p, Some(primary), true),
            (
                Standing::Left {
                    presence: Presence::Gone,
                    last: None,
                    ..
                },
                Some(p),
            ) => {
                // Deleted while no host ran: related through its key.
                let (ns, name) = key.namespace_and_name();
                let objects = relations::around_deleted(manifest, caches, p, ns, name);
                return relations::snapshot_of(manifest, caches, &objects);
            }
            (Standing::Left { last, .. }, Some(p)) => (p, last.as_ref(), false),
            _ => return snapshot_for(manifest, caches, key),
        };
        let objects = relations::around_primary(manifest, caches, p, basis, present);
        relations::snapshot_of(manifest, caches, &objects)
    }
}
