//! The informer registry: one informer per [`InformerKey`], shared by
//! every guest that needs it, its projection the union of theirs, and what
//! its informers learned of the one server they list (whether it refuses
//! streaming lists). It never decides what a guest watches.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::Client;

use super::health::WatchHealthConfig;
use super::key::InformerKey;
use super::streaming::StreamingLists;
use super::Informer;
use crate::projection::{FieldPath, Projection};
use crate::store::Retention;
use crate::sync::lock;

/// Shares informers between guests: one per [`InformerKey`], holding the
/// union of every user's projection.
#[derive(Clone)]
pub struct InformerRegistry {
    client: Client,
    informers: Arc<Mutex<HashMap<InformerKey, Informer>>>,
    health: WatchHealthConfig,
    metrics: Option<Arc<crate::metrics::Metrics>>,
    /// What its informers learned of the server's streaming lists.
    streaming: StreamingLists,
    /// Acquiring for a guest standing by cold: each informer given is its
    /// own and never lists (see [`InformerRegistry::dormant`]).
    dormant: bool,
}

impl InformerRegistry {
    /// A registry creating informers with `client`.
    pub fn new(client: Client) -> Self {
        InformerRegistry {
            client,
            informers: Arc::new(Mutex::new(HashMap::new())),
            health: WatchHealthConfig::default(),
            metrics: None,
            streaming: StreamingLists::default(),
            dormant: false,
        }
    }

    /// The same registry, acquiring for a guest that stands by cold (whose
    /// controller is never run: a fresh one is started when it is led):
    /// each informer it gives is its own, never listing, never synced, and
    /// never shared — neither a running one nor with a later user, so
    /// dropping a guest's running controller for a dormant one drops the
    /// caches only it used.
    #[must_use]
    pub fn dormant(&self) -> Self {
        InformerRegistry {
            dormant: true,
            ..self.clone()
        }
    }

    /// Whether this is a [`InformerRegistry::dormant`] view.
    pub fn is_dormant(&self) -> bool {
        self.dormant
    }

    /// Informers started from now on count failed lists and watches in
    /// `wasmctrl_watch_failures_total`.
    #[must_use]
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Informers started from now on tolerate failing watches as `health` says.
    #[must_use]
    pub fn with_health(mut self, health: WatchHealthConfig) -> Self {
        self.health = health;
        self
    }

    /// The informer for `key` whose projection includes `fields` and whose
    /// store indexes the values of `indexed` (a subset of `fields`),
    /// keeping projections. See [`InformerRegistry::acquire_keeping`].
    pub fn acquire(
        &self,
        key: &InformerKey,
        fields: &[FieldPath],
        indexed: &[FieldPath],
    ) -> Informer {
        self.acquire_keeping(key, fields, indexed, Retention::Projections)
    }

    /// The informer for `key` whose projection includes `fields` and whose
    /// store indexes the values of `indexed` (a subset of `fields`). An
    /// existing informer is shared when it already keeps and indexes those
    /// fields; otherwise a new one with the union of fields and indexes
    /// replaces it for new users (existing users keep theirs until they
    /// release it). A new informer keeps `retention` of each object. One
    /// keeping identities is shared only with a user that needs the
    /// projections, and keeps them again from then on (it relists); a
    /// second user asking for identities gets an informer of its own,
    /// listing afresh, so neither holds projections nobody reads.
    pub fn acquire_keeping(
        &self,
        key: &InformerKey,
        fields: &[FieldPath],
        indexed: &[FieldPath],
        retention: Retention,
    ) -> Informer {
        if self.dormant {
            return Informer::spawn(
                self.client.clone(),
                key.clone(),
                Projection::new(fields.to_vec(), vec![]),
                indexed,
                self.health,
                None,
                self.streaming.clone(),
                retention,
                false,
            );
        }
        let mut map = lock(&self.informers);
        if let Some(existing) = map.get(key) {
            let have = existing.projection().paths();
            let shareable = existing.retention() == Retention::Projections
                || retention == Retention::Projections;
            if shareable
                && fields.iter().chain(indexed).all(|f| have.contains(f))
                && indexed.iter().all(|f| existing.indexed.contains(f))
            {
                existing.retain_projections();
                return existing.clone();
            }
        }
        let (mut union, mut union_indexed): (Vec<FieldPath>, Vec<FieldPath>) = map
            .get(key)
            .map(|i| (i.projection().paths().to_vec(), i.indexed.to_vec()))
            .unwrap_or_default();
        for f in fields.iter().chain(indexed) {
            if !union.contains(f) {
                union.push(f.clone());
            }
        }
        for f in indexed {
            if !union_indexed.contains(f) {
                union_indexed.push(f.clone());
            }
        }
        let informer = Informer::spawn(
            self.client.clone(),
            key.clone(),
            Projection::new(union, vec![]),
            &union_indexed,
            self.health,
            self.metrics.clone(),
            self.streaming.clone(),
            retention,
            true,
        );
        map.insert(key.clone(), informer.clone());
        informer
    }

    /// Drops registry entries no guest uses any more (stopping their watches).
    pub fn release_unused(&self) {
        lock(&self.informers).retain(|_, i| i.users() > 1);
    }

    /// Number of informers running.
    pub fn len(&self) -> usize {
        lock(&self.informers).len()
    }

    /// Whether no informers run.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All informers, for readiness reporting.
    pub fn all(&self) -> Vec<Informer> {
        lock(&self.informers).values().cloned().collect()
    }
}
