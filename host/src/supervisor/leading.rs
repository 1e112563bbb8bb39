//! Per-guest leadership on the supervisor's side (`--leader-elect=per-guest`):
//! a guest's workers run only while this replica holds the guest's Lease
//! ([`crate::leader_per_guest`]). A lost Lease stops that guest's writes at
//! once and a handed-over one drains first; either way the other guests
//! and the process go on, and a guest led again gets a fresh controller.
//! A guest whose keys are sharded ([`crate::leader_per_guest::Shards`])
//! runs its workers all along instead; each key passes its bucket's gate.
//! Standing by cold ([`Standby::Cold`]), a guest not led here has a
//! dormant controller (no caches of its own), replaced by a fresh one when
//! led, and again by a dormant one when its workers stop; a sharded
//! guest's controller caches only the buckets led here (selected by their
//! label), and is replaced by one caching the new set whenever a bucket
//! is led or no longer led (the old one's in-flight keys finish first).
//! Standing by warm, a sharded guest caches everything and looks at every
//! key again when a bucket is newly led. It never decides which guests
//! this replica leads.

use crate::leader_per_guest::{GuestLease, GuestLeases, Stop};

use super::status::{BucketLeader, GuestLeader};
use super::*;

/// How long a guest this replica gives up may take to finish its in-flight
/// reconciles before they are abandoned (its Lease is renewed meanwhile,
/// so no other replica starts).
const HANDOVER_DRAIN: Duration = Duration::from_secs(10);

impl Supervisor {
    /// Tells per-guest leadership which guests run here, each with the
    /// buckets of its keys (0: led whole): each from the moment its caches
    /// first synced here (at once for one standing by cold), so a replica
    /// stands for no guest it could not run yet, and replicas started
    /// together have all announced themselves before any stands. Returns
    /// whether a guest waits for that.
    pub(super) fn publish_guests(&self) -> bool {
        let Some(leases) = &self.guest_leases else {
            return false;
        };
        let guests = lock(&self.guests);
        let mut published = lock(&self.published);
        published.retain(|name| guests.values().any(|g| g.controller.name() == name));
        let mut waits = false;
        for g in guests.values() {
            let name = g.controller.name();
            if !published.contains(name) {
                match g.controller.is_synced() {
                    true => {
                        published.insert(name.to_string());
                    }
                    false => waits = true,
                }
            }
        }
        let units: Vec<(String, u32)> = guests
            .values()
            .filter(|g| published.contains(g.controller.name()))
            .map(|g| {
                let buckets = g.controller.shards().map_or(0, |s| s.buckets());
                (g.controller.name().to_string(), buckets)
            })
            .collect();
        leases.set_guests(units);
        waits
    }

    /// The key sharding of a guest declaring `manifest`: with per-guest
    /// leadership and `shard_buckets` above 1, for a guest with per-object
    /// keys and no aggregate key (one key cannot be split: such a guest is
    /// led whole).
    pub(super) fn shards_for(
        &self,
        manifest: &crate::guest::GuestManifest,
    ) -> Option<crate::leader_per_guest::Shards> {
        let leases = self.guest_leases.as_ref()?;
        let buckets = self.config.shard_buckets;
        let keys = || manifest.watches.iter().map(|w| &w.keys);
        let per_object = keys().any(|k| *k == crate::guest::KeyMapping::PerObject);
        let aggregate = keys().any(|k| matches!(k, crate::guest::KeyMapping::Aggregate(_)));
        (buckets > 1 && per_object && !aggregate)
            .then(|| crate::leader_per_guest::Shards::new(leases.clone(), &manifest.name, buckets))
    }

    /// The key sharding a controller of the guest declaring `manifest`
    /// starts with now: standing by cold, caching only the buckets led
    /// here now (see [`Self::shards_for`]).
    pub(super) fn shards_now(
        &self,
        manifest: &crate::guest::GuestManifest,
    ) -> Option<crate::leader_per_guest::Shards> {
        let shards = self.shards_for(manifest)?;
        match (self.config.standby, &self.guest_leases) {
            (Standby::Cold, Some(leases)) => {
                Some(shards.caching(leases.buckets_led(&manifest.name).into_iter().collect()))
            }
            _ => Some(shards),
        }
    }

    /// Whether a controller of the guest declaring `manifest`, started now,
    /// stands by cold: per-guest leadership with [`Standby::Cold`], and
    /// nothing of the guest led here now (neither the guest nor a bucket).
    pub(super) fn stands_by_cold(&self, manifest: &crate::guest::GuestManifest) -> bool {
        let Some(leases) = self.guest_leases.as_ref() else {
            return false;
        };
        self.config.standby == Standby::Cold
            && match self.shards_for(manifest) {
                Some(_) => leases.buckets_led(&manifest.name).is_empty(),
                None => leases.lease(&manifest.name).is_none(),
            }
    }

    /// Whether the guest declaring `manifest` stands by cold when not led
    /// here: per-guest leadership with [`Standby::Cold`], and led whole.
    fn cold_standby(&self, manifest: &crate::guest::GuestManifest) -> bool {
        self.guest_leases.is_some()
            && self.config.standby == Standby::Cold
            && self.shards_for(manifest).is_none()
    }

    /// A guest this replica led was handed over or lost: standing by cold,
    /// its controller (stopped, still holding its caches) is replaced by a
    /// dormant one, and caches nobody else uses are dropped.
    pub(super) async fn cool(&self, guest: &str) {
        let found = lock(&self.guests)
            .iter()
            .find(|(_, g)| g.controller.name() == guest)
            .map(|(k, g)| (k.clone(), g.controller.clone()));
        let Some((key, controller)) = found else {
            return;
        };
        // Its Lease may still be held (it is released once the workers
        // are gone); led again, a fresh controller replaces whatever is here.
        if controller.is_dormant()
            || !controller.queue().is_shutting_down()
            || !self.cold_standby(controller.manifest())
        {
            return;
        }
        let dormant = match self.controller_with(controller.described(), true).await {
            Ok(d) => Arc::new(d),
            Err(e) => {
                // Kept as it is: led again, a fresh controller starts.
                tracing::warn!(%guest, "cannot stand by cold for the guest handed over; its caches stay: {e}");
                return;
            }
        };
        if let Some(spec) = controller.shadow() {
            dormant.attach_shadow(spec, self.config.shadow_dry_run);
        }
        drop(controller);
        let task = {
            let mut guests = lock(&self.guests);
            let Some(g) = guests.get_mut(&key) else {
                return;
            };
            // Led again meanwhile (a fresh controller runs): left alone.
            if g.controller.name() != guest || !g.controller.queue().is_shutting_down() {
                return;
            }
            g.controller = dormant;
            std::mem::replace(&mut g.task, tokio::spawn(std::future::pending()))
        };
        // The stopped workers' task holds the old controller until it ends.
        task.abort();
        let _ = task.await;
        self.registry.release_unused();
        tracing::info!(%guest, "standing by cold for the guest: its caches are dropped");
    }

    /// Who leads guest `name` (or each bucket of its keys), with per-guest
    /// leadership.
    pub(super) fn guest_leader(&self, name: &str) -> Option<GuestLeader> {
        let leases = self.guest_leases.as_ref()?;
        let buckets = leases.bucket_holders(name);
        if !buckets.is_empty() {
            let led = leases.buckets_led(name);
            let controller = self.controller(name).filter(|c| !c.is_dormant());
            let shards = controller.as_ref().and_then(|c| c.shards());
            let buckets = buckets
                .into_iter()
                .map(|(bucket, h)| BucketLeader {
                    bucket,
                    lease: h.lease,
                    leads: led.contains(&bucket),
                    holder: h.holder,
                    cached: shards.is_some_and(|s| s.cached().is_none_or(|c| c.contains(&bucket))),
                })
                .collect();
            return Some(GuestLeader {
                lease: None,
                leads: !led.is_empty(),
                holder: None,
                cached: controller.is_some(),
                buckets: Some(buckets),
                primaries: Some(controller.as_ref().map_or(0, |c| c.primaries())),
            });
        }
        let holder = leases.holder(name)?;
        Some(GuestLeader {
            lease: Some(holder.lease),
            leads: leases.lease(name).is_some(),
            holder: holder.holder,
            cached: self.controller(name).is_some_and(|c| !c.is_dormant()),
            buckets: None,
            primaries: None,
        })
    }

    /// The task of a guest's controller: its workers while this replica
    /// leads the guest, else nothing (started again by [`Self::lead`]).
    pub(super) fn spawn_led(
        &self,
        controller: Arc<GuestController>,
        leases: &GuestLeases,
    ) -> tokio::task::JoinHandle<()> {
        if controller.shards().is_some() {
            // Sharded: its workers always run (but standing by cold with
            // no bucket); each key passes its bucket's gate.
            lock(&self.led_tasks).remove(controller.name());
            if controller.is_dormant() {
                return tokio::spawn(std::future::pending());
            }
            let failures = self.failures_tx.clone();
            return tokio::spawn(async move {
                if let Err(e) = controller.run_when(std::future::ready(())).await {
                    let _ = failures.send(e);
                }
            });
        }
        match leases.lease(controller.name()) {
            // Standing by cold: [`Self::lead`] starts a fresh controller.
            Some(_) if controller.is_dormant() => {
                lock(&self.led_tasks).remove(controller.name());
                tokio::spawn(std::future::pending())
            }
            Some(lease) => {
                lock(&self.led_tasks).insert(controller.name().to_string(), lease.clone());
                let (failures, stopped) = (self.failures_tx.clone(), self.stopped_tx.clone());
                tokio::spawn(run_led(controller, lease, failures, stopped))
            }
            None => {
                lock(&self.led_tasks).remove(controller.name());
                tokio::spawn(std::future::pending())
            }
        }
    }

    /// This replica now leads `guest`: its workers start, on a fresh
    /// controller if the last one stopped (a Lease lost or handed over
    /// before).
    pub(super) async fn lead(&self, guest: &str) {
        let found = lock(&self.guests)
            .iter()
            .find(|(_, g)| g.controller.name() == guest)
            .map(|(k, g)| (k.clone(), g.controller.clone()));
        let Some((key, mut controller)) = found else {
            return;
        };
        if controller.shards().is_some() {
            self.reselect(key, controller).await;
            return;
        }
        // Its task already runs under this very lead (started when the
        // controller was, by a swap or at start): nothing to do. Aborting
        // it would strand the keys its workers hold.
        let current = self.guest_leases.as_ref().and_then(|l| l.lease(guest));
        let running = lock(&self.led_tasks).get(guest).cloned();
        let stale = controller.queue().is_shutting_down() || controller.is_dormant();
        if let (Some(current), Some(running)) = (&current, &running) {
            if current.same_lead(running) && !stale {
                return;
            }
        }
        if stale {
            // Stopped (handed over or lost before), or standing by cold:
            // a fresh controller, its caches listed now.
            match self.controller_with(controller.described(), false).await {
                Ok(fresh) => {
                    if let Some(spec) = controller.shadow() {
                        fresh.attach_shadow(spec, self.config.shadow_dry_run);
                    }
                    controller = Arc::new(fresh);
                }
                Err(e) => {
                    // Held but not run, it would be stuck here: given up,
                    // another replica (or this one, later) tries again.
                    tracing::error!(%guest, "cannot start the guest it leads; giving it up: {e}");
                    if let Some(leases) = &self.guest_leases {
                        leases.give_up(guest);
                    }
                    return;
                }
            }
        }
        let mut guests = lock(&self.guests);
        let Some(g) = guests.get_mut(&key) else {
            return;
        };
        if g.controller.name() != guest {
            return;
        }
        g.task.abort();
        g.controller = controller.clone();
        g.task = self.spawn(controller);
    }
}

impl Supervisor {
    /// A bucket of the sharded guest run by `controller` (the guest `key`)
    /// was led or is no longer led here. Standing by warm, every key is
    /// looked at (a newly led bucket's are cached already; the others are
    /// dropped at the gate again). Standing by cold, unless the controller
    /// caches exactly the buckets led now, a fresh one caching them
    /// replaces it (dormant when none is): it lists their objects while the
    /// old one still runs the buckets it has and still leads; once they
    /// have synced the old one stops, and the fresh one's workers start
    /// once its in-flight keys have finished (bounded by `HANDOVER_DRAIN`),
    /// so a key never runs in two controllers here.
    async fn reselect(&self, key: String, controller: Arc<GuestController>) {
        let guest = controller.name().to_string();
        let Some(fresh_shards) = self.shards_now(controller.manifest()) else {
            return;
        };
        let Some(cached) = fresh_shards.cached().cloned() else {
            controller.enqueue_all();
            return;
        };
        if cached_by(&controller).as_ref() == Some(&cached) {
            return;
        }
        // Built again when the buckets led changed meanwhile (the buckets
        // of one round are led within moments of each other).
        let mut attempts = 0;
        let fresh = loop {
            attempts += 1;
            let fresh = match self.controller_with(controller.described(), false).await {
                Ok(fresh) => Arc::new(fresh),
                Err(e) => {
                    // Its buckets given up: another replica (or this one,
                    // later) takes them.
                    tracing::error!(%guest, "cannot start the guest for the buckets it leads; giving them up: {e}");
                    if let Some(leases) = &self.guest_leases {
                        for b in leases.buckets_led(&guest) {
                            leases.give_up(&crate::leader_per_guest::unit(&guest, Some(b)));
                        }
                    }
                    return;
                }
            };
            let now = self
                .shards_now(controller.manifest())
                .and_then(|s| s.cached().cloned());
            if attempts >= 3 || cached_by(&fresh) == now {
                break fresh;
            }
        };
        let Some(cached) = cached_by(&fresh) else {
            return;
        };
        if let Some(spec) = controller.shadow() {
            fresh.attach_shadow(spec, self.config.shadow_dry_run);
        }
        tracing::info!(%guest, buckets = ?cached, "caching the buckets led here");
        let mut guests = lock(&self.guests);
        let Some(g) = guests.get_mut(&key) else {
            return;
        };
        // Replaced meanwhile (a swap, or a newer selection): left alone.
        if !Arc::ptr_eq(&g.controller, &controller) {
            return;
        }
        // The old controller's task, aborted if the new one's is (a swap,
        // the guest removed) before it has ended.
        let mut old = AbortOnDrop(std::mem::replace(
            &mut g.task,
            tokio::spawn(std::future::pending()),
        ));
        g.controller = fresh.clone();
        let failures = self.failures_tx.clone();
        g.task = tokio::spawn(async move {
            // The old one runs the buckets it still leads (the gate drops
            // the others) until the fresh one's caches have synced; a
            // failure to sync is the fresh one's run's to report.
            if !fresh.is_dormant() {
                let _ = fresh.wait_synced().await;
            }
            controller.shutdown();
            // A dormant controller never ran: nothing to wait for.
            if !controller.is_dormant()
                && tokio::time::timeout(HANDOVER_DRAIN, &mut old.0)
                    .await
                    .is_err()
            {
                tracing::warn!(%guest, "the controller of the buckets led before is still busy after {HANDOVER_DRAIN:?}; abandoning its in-flight reconciles");
            }
            drop(old);
            drop(controller);
            if fresh.is_dormant() {
                return std::future::pending().await;
            }
            if let Err(e) = fresh.run_when(std::future::ready(())).await {
                let _ = failures.send(e);
            }
        });
    }
}

/// The buckets a sharded guest's `controller` caches (none when dormant);
/// None: every object (standing by warm).
fn cached_by(controller: &GuestController) -> Option<std::collections::BTreeSet<u32>> {
    match controller.is_dormant() {
        true => Some(std::collections::BTreeSet::new()),
        false => controller.shards().and_then(|s| s.cached().cloned()),
    }
}

/// A task aborted when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A led guest's workers, until its Lease is lost (stop at once) or handed
/// over (drain, bounded), or the controller ends by itself. Stopped by the
/// Lease, the guest is named on `stopped`.
async fn run_led(
    controller: Arc<GuestController>,
    lease: GuestLease,
    failures: mpsc::UnboundedSender<ControllerError>,
    stopped: mpsc::UnboundedSender<String>,
) {
    // Taken before the check: a handover begun meanwhile is seen either
    // here or by the coordinator waiting for this guard.
    let _running = lease.run();
    if !lease.is_leader() {
        return;
    }
    let guest = controller.name().to_string();
    tracing::info!(%guest, lease = %lease.lease_name(), "leading the guest; starting its workers");
    let run = controller.clone().run_when(std::future::ready(()));
    tokio::pin!(run);
    tokio::select! {
        biased;
        stop = lease.until_stop() => {
            controller.shutdown();
            match stop {
                Stop::Lost(why) => {
                    // Dropping `run` aborts the in-flight reconciles.
                    tracing::error!(%guest, "lost the guest's lease; its writes stopped at once: {why}");
                }
                Stop::HandOver => {
                    tokio::select! {
                        biased;
                        Stop::Lost(why) = lease.until_lost() => {
                            tracing::error!(%guest, "lost the guest's lease while handing it over; in-flight reconciles abandoned: {why}");
                        }
                        _ = &mut run => {
                            tracing::info!(%guest, "guest handed over: its workers stopped");
                        }
                        () = tokio::time::sleep(HANDOVER_DRAIN) => {
                            tracing::warn!(%guest, "guest still busy after {HANDOVER_DRAIN:?}; abandoning its in-flight reconciles to hand it over");
                        }
                    }
                }
            }
            let _ = stopped.send(guest);
        }
        result = &mut run => {
            if let Err(e) = result {
                let _ = failures.send(e);
            }
        }
    }
}
