//! The coordinator: one task per replica that, every retry period, lists
//! the group's Leases, keeps this replica's presence Lease, runs one
//! elector ([`crate::leader::LeaderElector`]) per guest it stands for,
//! applies the spreading rule, and hands guests over.
//!
//! Owns the electors and the order of a handover (ask the guest to stop,
//! wait until its workers are gone, then release). It never runs or stops
//! workers (the supervisor does, told through [`GuestLease`]) and never
//! writes a Lease itself (each elector writes its own).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams};
use kube::Client;
use tokio::sync::oneshot;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::leader::{LeaderElectionConfig, LeaderElector, LeaderHandle, LeaderState};
use crate::metrics::{GuestLabels, GuestReasonLabels, Metrics};
use crate::sync::lock;

use super::lease::GuestLease;
use super::naming::{
    dns_label, guest_of, replica_lease, unit_lease, BUCKET_LABEL, GROUP_LABEL, GUEST_LABEL,
    ROLE_GUEST, ROLE_LABEL, ROLE_REPLICA,
};
use super::observe::Observer;
use super::share::{decide, Hysteresis, View};
use super::shared::{GuestHolder, Shared};

/// How long a candidate that starts leading waits for the others stood for
/// in the same round before the supervisor is told.
const LEADS_TOGETHER: std::time::Duration = std::time::Duration::from_millis(200);

/// One guest this replica stands for or leads.
struct Candidate {
    handle: LeaderHandle,
    /// Set once it leads (and the supervisor was told).
    lease: Option<GuestLease>,
}

pub(super) struct Coordinator {
    client: Client,
    /// The host's election settings; `lease_name` is the group.
    base: LeaderElectionConfig,
    shared: Arc<Shared>,
    metrics: Arc<Metrics>,
    observer: Observer,
    hysteresis: Hysteresis,
    electors: BTreeMap<String, Candidate>,
    presence: Option<LeaderHandle>,
    handovers: JoinSet<()>,
    /// Guests whose handover is under way (their Lease still names this
    /// replica): not stood for again until it is done.
    handing: Arc<std::sync::Mutex<BTreeSet<String>>>,
    /// Guests given up because they could not be started here, and until
    /// when this replica does not stand for them.
    cooling: BTreeMap<String, Instant>,
    /// From when this replica stands for guests: a retry period after it
    /// first announced itself (its presence elector started), so that
    /// replicas started together count each other first.
    stands_from: Option<Instant>,
}

impl Coordinator {
    pub(super) fn new(
        client: Client,
        base: LeaderElectionConfig,
        shared: Arc<Shared>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Coordinator {
            client,
            base,
            shared,
            metrics,
            observer: Observer::default(),
            hysteresis: Hysteresis::default(),
            electors: BTreeMap::new(),
            presence: None,
            handovers: JoinSet::new(),
            handing: Arc::default(),
            cooling: BTreeMap::new(),
            stands_from: None,
        }
    }

    fn group(&self) -> &str {
        &self.base.lease_name
    }

    fn labels(&self, role: &str, guest: Option<&str>) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::from([
            (GROUP_LABEL.to_string(), dns_label(self.group())),
            (ROLE_LABEL.to_string(), role.to_string()),
        ]);
        if let Some(unit) = guest {
            let (guest, bucket) = guest_of(unit);
            labels.insert(GUEST_LABEL.to_string(), dns_label(guest));
            if let Some(b) = bucket {
                labels.insert(BUCKET_LABEL.to_string(), b.to_string());
            }
        }
        labels
    }

    /// An elector for the Lease `name`, seeded with what this replica has
    /// seen of it, so an expired holder is not waited for twice.
    fn elector(&self, name: String, labels: BTreeMap<String, String>) -> Option<LeaderHandle> {
        let seen = self.observer.seen(&name);
        let config = self.base.clone().lease_name(name).labels(labels);
        match LeaderElector::new(self.client.clone(), config) {
            Ok(e) => Some(match seen {
                Some((lease, since)) => e.seen(lease, since).spawn(),
                None => e.spawn(),
            }),
            Err(e) => {
                tracing::error!("per-guest leadership: {e}");
                None
            }
        }
    }

    /// Runs rounds until `stop` resolves, then hands every guest over
    /// (the supervisor has drained by then) and releases the presence Lease.
    /// Without `release` (or when the handle is dropped), every elector is
    /// aborted instead: the Leases expire on their own.
    pub(super) async fn run(mut self, mut stop: oneshot::Receiver<bool>) {
        let presence_name = replica_lease(self.group(), &self.base.identity);
        tracing::info!(group = %self.group(), identity = %self.base.identity, presence = %presence_name, "per-guest leadership: starting");
        let release = loop {
            self.round(&presence_name).await;
            let pause = self.base.retry_period;
            // A candidate that starts leading is told to the supervisor at
            // once, not at the next round: a replica's work starts then.
            let next = Instant::now() + pause;
            let stopped = loop {
                let leading = self.candidates_leading();
                tokio::select! {
                    release = &mut stop => break Some(release.unwrap_or(false)),
                    () = tokio::time::sleep_until(next) => break None,
                    () = self.shared.guests_changed.notified() => break None,
                    () = leading => {
                        // The others stood for in the same round lead
                        // within moments: told together, the supervisor
                        // starts the guest's work once.
                        let _ = tokio::time::timeout(LEADS_TOGETHER, self.candidates_all_leading()).await;
                        self.harvest();
                    }
                }
            };
            if let Some(release) = stopped {
                break release;
            }
        };
        self.shared.closing.store(true, Ordering::SeqCst);
        if !release {
            for (_, c) in std::mem::take(&mut self.electors) {
                c.handle.abort();
            }
            if let Some(p) = self.presence.take() {
                p.abort();
            }
            return;
        }
        for (guest, c) in std::mem::take(&mut self.electors) {
            self.hand_over(guest, c, "released");
        }
        while self.handovers.join_next().await.is_some() {}
        if let Some(p) = self.presence.take() {
            let _ = p.stop().await;
        }
        tracing::info!(group = %self.group(), "per-guest leadership: stopped, leases released");
    }

    /// Resolves once every candidate leads or has ended.
    fn candidates_all_leading(&self) -> impl std::future::Future<Output = ()> + 'static {
        let waits = futures::future::join_all(self.candidate_waits());
        async move {
            waits.await;
        }
    }

    /// Each candidate's wait until it leads or ends.
    fn candidate_waits(
        &self,
    ) -> Vec<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>> {
        self.electors
            .values()
            .filter(|c| c.lease.is_none())
            .map(|c| {
                let mut status = c.handle.status();
                Box::pin(async move {
                    let _ = status.until_leading().await;
                })
                    as std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>
            })
            .collect()
    }

    /// Resolves once any candidate (an elector not yet seen leading) leads,
    /// or ends; never when there is none.
    fn candidates_leading(&self) -> impl std::future::Future<Output = ()> + 'static {
        let waits = self.candidate_waits();
        async move {
            if waits.is_empty() {
                return std::future::pending().await;
            }
            futures::future::select_all(waits).await;
        }
    }

    async fn round(&mut self, presence_name: &str) {
        while self.handovers.try_join_next().is_some() {}
        // This replica's presence: restarted if its elector ended.
        let presence_ended = self.presence.as_ref().is_none_or(|p| {
            matches!(
                p.status().state(),
                LeaderState::Lost(_) | LeaderState::Stopped
            )
        });
        if presence_ended {
            if let Some(old) = self.presence.take() {
                old.abort();
            }
            self.presence =
                self.elector(presence_name.to_string(), self.labels(ROLE_REPLICA, None));
            if self.stands_from.is_none() {
                self.stands_from = Some(Instant::now() + self.base.retry_period);
            }
        }
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.base.namespace);
        let selector = format!("{GROUP_LABEL}={}", dns_label(self.group()));
        match api.list(&ListParams::default().labels(&selector)).await {
            Ok(list) => self.observer.update(list.items, Instant::now()),
            Err(e) => {
                // Without a fresh look, nothing new is decided; the
                // electors keep renewing (or time out) on their own.
                tracing::warn!(group = %self.group(), "per-guest leadership: listing leases failed: {e}");
                self.harvest();
                return;
            }
        }
        // After the LIST: an elector that acquired since is seen leading
        // here, never as a candidate for a guest the LIST shows held (by
        // this very replica).
        self.harvest();
        let now = Instant::now();
        let given_up = std::mem::take(&mut *lock(&self.shared.give_up));
        for guest in given_up {
            if let Some(c) = self.electors.remove(&guest) {
                tracing::warn!(unit = %shown(&guest), "per-guest leadership: giving up a guest this replica could not start");
                self.hand_over(guest.clone(), c, "released");
            }
            self.cooling.insert(guest, now + self.base.lease_duration);
        }
        self.cooling.retain(|_, until| *until > now);
        let guests = lock(&self.shared.guests).clone();
        let me = self.base.identity.clone();
        let mut live = self.observer.live_replicas(now);
        if self.observer.holder(presence_name, now) != Some(me.as_str()) {
            live += 1;
        }
        let mut live_ids = self.observer.live_identities(now);
        live_ids.insert(me.clone());
        let names: BTreeMap<&String, String> = guests
            .iter()
            .map(|g| (g, unit_lease(self.group(), g)))
            .collect();
        let handing = lock(&self.handing).clone();
        let settling = self.stands_from.is_none_or(|from| now < from);
        let free: BTreeSet<String> = names
            .iter()
            .filter(|(g, lease)| {
                !handing.contains(**g)
                    && !self.cooling.contains_key(**g)
                    && self
                        .observer
                        .holder(lease, now)
                        .is_none_or(|holder| holder == me)
            })
            .map(|(g, _)| (*g).clone())
            .filter(|_| !settling)
            .collect();
        let view = View {
            guests: guests.clone(),
            live_replicas: live,
            live: live_ids,
            held: names
                .iter()
                .filter_map(|(g, lease)| {
                    Some(((*g).clone(), self.observer.holder(lease, now)?.to_string()))
                })
                .collect(),
            led: self
                .electors
                .iter()
                .filter(|(_, c)| c.lease.is_some())
                .map(|(g, _)| g.clone())
                .collect(),
            candidates: self
                .electors
                .iter()
                .filter(|(_, c)| c.lease.is_none())
                .map(|(g, _)| g.clone())
                .collect(),
            free,
        };
        let decision = decide(&me, &view, &mut self.hysteresis);
        for guest in decision.withdraw {
            if let Some(c) = self.electors.remove(&guest) {
                self.hand_over(guest, c, "withdrawn");
            }
        }
        for guest in decision.release {
            if let Some(c) = self.electors.remove(&guest) {
                tracing::info!(unit = %shown(&guest), share = super::share::fair_share(guests.len(), live), "per-guest leadership: giving the guest up");
                self.hand_over(guest, c, "released");
            }
        }
        if !self.shared.closing.load(Ordering::SeqCst) {
            for guest in decision.acquire {
                let lease = unit_lease(self.group(), &guest);
                if let Some(handle) = self.elector(lease, self.labels(ROLE_GUEST, Some(&guest))) {
                    self.electors.insert(
                        guest,
                        Candidate {
                            handle,
                            lease: None,
                        },
                    );
                }
            }
        }
        // What `/guests` shows.
        let holders = names
            .iter()
            .map(|(g, lease)| {
                let holder = GuestHolder {
                    lease: lease.clone(),
                    holder: self.observer.holder(lease, now).map(String::from),
                };
                ((*g).clone(), holder)
            })
            .collect();
        *lock(&self.shared.holders) = holders;
    }

    /// Notes electors that started leading (the supervisor is told) and
    /// those that ended (a leader's end is a lost lease).
    fn harvest(&mut self) {
        let mut ended = Vec::new();
        // Told to the supervisor once every new lead is recorded: it reads
        // all the buckets of a guest led here at once.
        let mut started = Vec::new();
        for (guest, c) in &mut self.electors {
            match c.handle.status().state() {
                LeaderState::Leader { .. } if c.lease.is_none() => {
                    let lease = GuestLease::new(
                        guest,
                        &unit_lease(&self.base.lease_name, guest),
                        c.handle.status(),
                    );
                    lock(&self.shared.led).insert(guest.clone(), lease.clone());
                    c.lease = Some(lease);
                    leading(&self.metrics, guest, true);
                    count(&self.metrics, guest, "acquired");
                    tracing::info!(unit = %shown(guest), "per-guest leadership: leading the guest");
                    started.push(guest.clone());
                }
                LeaderState::Lost(_) | LeaderState::Stopped => ended.push(guest.clone()),
                _ => {}
            }
        }
        for guest in started {
            let _ = self.shared.led_tx.send(guest);
        }
        for guest in ended {
            let Some(c) = self.electors.remove(&guest) else {
                continue;
            };
            if let Some(lease) = &c.lease {
                tracing::error!(unit = %shown(&guest), state = ?c.handle.status().state(), "per-guest leadership: lost the guest's lease; its writes stopped");
                forget(&self.shared, lease);
                leading(&self.metrics, &guest, false);
                count(&self.metrics, &guest, "lost");
            }
            c.handle.abort();
        }
    }

    /// Stops leading or standing for `guest`: a leader's workers are asked
    /// to stop and waited for before its Lease is released.
    fn hand_over(&mut self, guest: String, c: Candidate, reason: &'static str) {
        let (shared, metrics) = (self.shared.clone(), self.metrics.clone());
        let handing = self.handing.clone();
        lock(&handing).insert(guest.clone());
        self.handovers.spawn(async move {
            if let Some(lease) = &c.lease {
                lease.begin_handover();
                lease.until_idle().await;
            }
            match c.handle.stop().await {
                Ok(t) => tracing::debug!(unit = %shown(&guest), ?t, "per-guest leadership: elector stopped"),
                Err(e) => tracing::warn!(unit = %shown(&guest), "per-guest leadership: cannot release the lease; it will expire: {e}"),
            }
            if let Some(lease) = &c.lease {
                forget(&shared, lease);
                leading(&metrics, &guest, false);
                count(&metrics, &guest, reason);
            }
            lock(&handing).remove(&guest);
        });
    }
}

/// A unit for a person: `GUEST`, or `GUEST bucket B`.
fn shown(unit: &str) -> String {
    match guest_of(unit) {
        (guest, Some(b)) => format!("{guest} bucket {b}"),
        (guest, None) => guest.to_string(),
    }
}

/// `wasmctrl_guest_leader{guest}`: how many of the guest's units (the
/// guest, or its buckets) this replica leads.
fn leading(metrics: &Metrics, unit: &str, now: bool) {
    let gauge = metrics.guest_leader.get_or_create(&GuestLabels {
        guest: guest_of(unit).0.to_string(),
    });
    if now {
        gauge.inc();
    } else {
        gauge.dec();
    }
}

fn count(metrics: &Metrics, unit: &str, reason: &str) {
    metrics
        .guest_handovers
        .get_or_create(&GuestReasonLabels {
            guest: guest_of(unit).0.to_string(),
            reason: reason.to_string(),
        })
        .inc();
}

/// Forgets `lease` as led, unless a newer lead of its guest replaced it.
/// A bucket no longer led is told to the supervisor (its guest's caches
/// may change with it).
fn forget(shared: &Shared, lease: &GuestLease) {
    let mut led = lock(&shared.led);
    if led.get(lease.unit()).is_some_and(|l| l.same_lead(lease)) {
        led.remove(lease.unit());
        if guest_of(lease.unit()).1.is_some() {
            let _ = shared.led_tx.send(lease.unit().to_string());
        }
    }
}
