//! Calling an `aggregate-controller` guest's `aggregator` export: its spec
//! (which key is incremental, how groups reduce), `map-objects` over a
//! snapshot of changed objects, and `render` from reduced groups. Owns the
//! bindings of that world (sharing [`super::bindings`]' types), detecting
//! the export on a component, and checking what the guest returns. It never
//! keeps state between calls: the reductions and the cached contributions
//! belong to [`crate::aggregate`].
//!
//! # Checks
//! Contributions and diagnostics must name objects of the snapshot it was
//! given, one call's contributions stay within
//! [`MAX_CONTRIBUTIONS_PER_OBJECT`] per object mapped and its diagnostics
//! within the plan event cap, diagnostics are validated like plan events,
//! and `render`'s plan like any plan (it saw no objects, so a pinned write
//! is refused).

use std::time::Instant;

use wasmtime::component::{Component, InstancePre};
use wasmtime::Engine;

use super::bindings::wasmctrl::controller::types as wit;
use super::{
    plan, snapshot, CallState, CallStats, Environment, GuestErrorKind, GuestManifest, GuestModule,
    PlanError, PlannedEvent, Result, SnapshotData, ValidatedPlan,
};

/// Host-side bindings of the `aggregate-controller` world.
#[allow(missing_docs, clippy::all)]
pub mod bindings {
    wasmtime::component::bindgen!({
        world: "aggregate-controller",
        path: "../wit",
        with: {
            "wasmctrl:controller/types": crate::guest::bindings::wasmctrl::controller::types,
            "wasmctrl:controller/log": crate::guest::bindings::wasmctrl::controller::log,
        },
    });
}

pub use bindings::exports::wasmctrl::controller::aggregator::{AggregateSpec, Group, Reduction};
use bindings::{AggregateController, AggregateControllerPre};

/// The interface an aggregate guest exports besides `reconciler`.
const AGGREGATOR: &str = "wasmctrl:controller/aggregator@";

/// The optional interface of an aggregate guest whose `render` is
/// entry-wise.
const ENTRYWISE: &str = "wasmctrl:controller/entrywise@";

/// Most contributions `map-objects` may return per object it was given.
pub const MAX_CONTRIBUTIONS_PER_OBJECT: usize = 256;

/// Whether `component` exports the `aggregator` interface.
pub(super) fn exports_aggregator(component: &Component, engine: &Engine) -> bool {
    component
        .component_type()
        .exports(engine)
        .any(|(name, _)| name.starts_with(AGGREGATOR))
}

/// The pre-instantiated aggregate world of a component that exports it.
pub(super) fn pre(
    pre: InstancePre<CallState>,
) -> std::result::Result<AggregateControllerPre<CallState>, GuestErrorKind> {
    AggregateControllerPre::new(pre).map_err(|e| GuestErrorKind::Instantiate(format!("{e:#}")))
}

/// What `map-objects` said about one object of its snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectOutput {
    /// (group key, value) pairs, in the order the guest returned them.
    pub contributions: Vec<(String, i64)>,
    /// Events about the object, validated.
    pub diagnostics: Vec<PlannedEvent>,
}

impl GuestModule {
    /// Whether the guest exports `aggregator` (the `aggregate-controller`
    /// world).
    pub fn is_aggregate(&self) -> bool {
        self.inner.aggregate.is_some()
    }

    fn aggregate_instance(
        &self,
        guest: &str,
    ) -> Result<(wasmtime::Store<CallState>, AggregateController)> {
        let Some(pre) = &self.inner.aggregate else {
            return Err(self.error(
                guest,
                GuestErrorKind::Aggregate("the guest does not export aggregator".into()),
            ));
        };
        let mut store = self.new_store(guest)?;
        match pre.instantiate(&mut store) {
            Ok(instance) => Ok((store, instance)),
            Err(e) => Err(self.classify(guest, &store, e)),
        }
    }

    /// The guest's aggregate spec; `None` when it exports no aggregator.
    /// The key must be an aggregate key of `manifest`.
    pub fn aggregate_spec(
        &self,
        manifest: &GuestManifest,
        env: &Environment,
    ) -> Result<Option<AggregateSpec>> {
        if !self.is_aggregate() {
            return Ok(None);
        }
        let name = manifest.name.as_str();
        let (mut store, instance) = self.aggregate_instance(name)?;
        let spec = instance
            .wasmctrl_controller_aggregator()
            .call_aggregate(&mut store, env)
            .map_err(|e| self.classify(name, &store, e))?
            .map_err(|m| self.error(name, GuestErrorKind::Aggregate(m)))?;
        let known = manifest
            .watches
            .iter()
            .any(|w| matches!(&w.keys, super::KeyMapping::Aggregate(k) if k.as_str() == spec.key));
        if !known {
            return Err(self.error(
                name,
                GuestErrorKind::Aggregate(format!(
                    "aggregate key {:?} is not a key any watch maps to",
                    spec.key
                )),
            ));
        }
        Ok(Some(spec))
    }

    /// The field `render` is entry-wise over (the optional `entrywise`
    /// export's `entry-field`); `None` when the guest does not export it
    /// or answers `none`. A field the host could not keep apart from the
    /// object's identity (`apiVersion`, `kind`, `metadata`, `status`, or
    /// empty) is refused.
    pub fn entry_field(
        &self,
        manifest: &GuestManifest,
        env: &Environment,
    ) -> Result<Option<String>> {
        let name = manifest.name.as_str();
        let Some(pre) = &self.inner.aggregate else {
            return Ok(None);
        };
        let component = pre.instance_pre().component();
        let export = format!(
            "{ENTRYWISE}{}",
            super::CONTRACT_VERSION
                .rsplit('@')
                .next()
                .unwrap_or_default()
        );
        let Some(interface) = component.get_export_index(None, &export) else {
            return Ok(None);
        };
        let refuse = |why: String| self.error(name, GuestErrorKind::Aggregate(why));
        let Some(func) = component.get_export_index(Some(&interface), "entry-field") else {
            return Err(refuse(format!("{export} exports no entry-field function")));
        };
        let mut store = self.new_store(name)?;
        let instance = pre
            .instance_pre()
            .instantiate(&mut store)
            .map_err(|e| self.classify(name, &store, e))?;
        let typed = instance
            .get_typed_func::<(Environment,), (Option<String>,)>(&mut store, &func)
            .map_err(|e| refuse(format!("{export}: entry-field has the wrong type: {e:#}")))?;
        let (field,) = typed
            .call(&mut store, (env.clone(),))
            .map_err(|e| self.classify(name, &store, e))?;
        match field.as_deref() {
            Some("" | "apiVersion" | "kind" | "metadata" | "status") => Err(refuse(format!(
                "entry-field {:?} cannot hold a render's entries (it must be a top-level field other than apiVersion, kind, metadata and status)",
                field.unwrap_or_default()
            ))),
            _ => Ok(field),
        }
    }

    /// `map-objects` over `snapshot`: one [`ObjectOutput`] per object of
    /// the snapshot, in its order.
    pub fn map_objects(
        &self,
        manifest: &GuestManifest,
        env: &Environment,
        snapshot: SnapshotData,
    ) -> (Result<Vec<ObjectOutput>>, CallStats) {
        let mut stats = CallStats::default();
        let name = manifest.name.as_str();
        let len = snapshot.object_watch.len();
        let wit_snapshot = snapshot::to_wit(snapshot);
        let called = self.call_aggregator(name, env.now_ms, &mut stats, |store, instance| {
            instance.call_map_objects(store, env, &wit_snapshot)
        });
        let (store, mapped) = match called {
            Ok(x) => x,
            Err(e) => return (Err(e), stats),
        };
        // The operator's caps bound what one call may hand back: events
        // as in a plan, contributions per object mapped.
        let limits = &store.data().limits;
        let caps = [
            (
                "events",
                mapped.diagnostics.len(),
                limits.max_plan_events,
                "maxPlanEvents",
            ),
            (
                "contributions",
                mapped.contributions.len(),
                len.max(1).saturating_mul(MAX_CONTRIBUTIONS_PER_OBJECT),
                "256 per object mapped",
            ),
        ];
        for (what, found, max, limit) in caps {
            if found > max {
                let e = PlanError::TooLarge {
                    what,
                    found,
                    max,
                    limit,
                };
                return (Err(self.error(name, GuestErrorKind::Plan(e))), stats);
            }
        }
        let bad = |what: &str, object: u32| {
            self.error(
                name,
                GuestErrorKind::Aggregate(format!(
                    "map-objects: {what} names object {object}, but the snapshot holds {len}"
                )),
            )
        };
        let mut out = vec![ObjectOutput::default(); len];
        for c in mapped.contributions {
            match out.get_mut(c.object as usize) {
                Some(o) => o.contributions.push((c.group, c.value)),
                None => return (Err(bad("a contribution", c.object)), stats),
            }
        }
        let data = snapshot::from_wit(wit_snapshot);
        let view = match wasmctrl_snapshot::SnapshotView::new(&data) {
            Ok(v) => v,
            Err(e) => {
                let kind = GuestErrorKind::Trap(format!("host snapshot: {e}"));
                return (Err(self.error(name, kind)), stats);
            }
        };
        for d in mapped.diagnostics {
            let Some(o) = out.get_mut(d.object as usize) else {
                return (Err(bad("a diagnostic", d.object)), stats);
            };
            let events = wit::Plan {
                writes: Vec::new(),
                events: vec![d.event],
                requeue_after_ms: None,
            };
            match plan::validate(&events, manifest, &view) {
                Ok(p) => o.diagnostics.extend(p.events),
                Err(e) => return (Err(self.error(name, GuestErrorKind::Plan(e))), stats),
            }
        }
        (Ok(out), stats)
    }

    /// `render` from `groups` (sorted by key), its plan validated against
    /// an empty snapshot.
    pub fn render(
        &self,
        manifest: &GuestManifest,
        env: &Environment,
        groups: &[Group],
    ) -> (Result<ValidatedPlan>, CallStats) {
        let mut stats = CallStats::default();
        let name = manifest.name.as_str();
        let called = self.call_aggregator(name, env.now_ms, &mut stats, |store, instance| {
            instance.call_render(store, env, groups)
        });
        // `render` sees no objects: its plan is validated against an empty
        // snapshot.
        let result = called.and_then(|(store, raw)| {
            let limits = store.data().limits.clone();
            let empty = snapshot::build(manifest, &[]);
            self.finish_plan(name, &raw, manifest, &empty, &limits, &mut stats)
        });
        (result, stats)
    }

    /// One call of the `aggregator` export on a fresh instance:
    /// instantiation and call timed into `stats`, a trap classified, the
    /// guest's own error as [`GuestErrorKind::Failed`]; on success the
    /// store (for its limits) and what the export returned.
    fn call_aggregator<T>(
        &self,
        name: &str,
        now_ms: u64,
        stats: &mut CallStats,
        call: impl FnOnce(
            &mut wasmtime::Store<CallState>,
            &bindings::exports::wasmctrl::controller::aggregator::Guest,
        ) -> wasmtime::Result<std::result::Result<T, wit::ReconcileError>>,
    ) -> Result<(wasmtime::Store<CallState>, T)> {
        let started = Instant::now();
        let (mut store, instance) = self.aggregate_instance(name)?;
        stats.instantiate = started.elapsed();
        // The clocks read env.now; randomness is seeded from the guest.
        store.data_mut().wasi.at(now_ms, name);
        let called = Instant::now();
        let raw = call(&mut store, instance.wasmctrl_controller_aggregator());
        stats.call = called.elapsed();
        stats.log_limited = store.data().output().budget.limited;
        match raw {
            Err(e) => Err(self.classify(name, &store, e)),
            Ok(Err(e)) => Err(self.failed(name, e)),
            Ok(Ok(value)) => Ok((store, value)),
        }
    }

    /// The operator's caps for `guest`.
    pub fn limits(&self, guest: &str) -> crate::guest::policy::Limits {
        self.inner.shared.config.policy.limits(guest)
    }
}
