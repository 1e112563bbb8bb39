//! Incremental aggregates for wasmctrl guests (the `aggregate-controller`
//! world): the [`AggregateGuest`] trait, the three entry points its
//! `aggregator` export runs ([`aggregate`], [`map`], [`render`]), the
//! [`export_aggregate_guest!`] macro, and [`whole`], the same fold done
//! natively over a whole snapshot, so a guest's tests can check that its
//! incremental path and its `reconcile` agree.
//!
//! A guest implements `map` for one object at a time (this crate walks the
//! batch, so a contribution can only depend on its own object) and
//! `render` from the reduced groups. Nothing here does I/O, sees the
//! host's cached state, or panics on snapshot contents.
//!
//! A crate of its own, beside `wasmctrl-guest-sdk`, because wit-bindgen's
//! per-interface export macros are crate-global names: this world's
//! `reconciler` export macro would collide with the SDK's.

use std::collections::BTreeMap;

use wasmctrl_guest_sdk::snapshot::{Object, Snapshot, SnapshotData};
use wasmctrl_guest_sdk::{wit, Environment, Guest, KeyMapping, Plan, ReconcileError};

/// The bindings of the `entrywise-aggregate-controller` world (the
/// `aggregate-controller` world and `entrywise`), sharing the SDK's
/// `types` and `log`.
#[allow(missing_docs, unsafe_code, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "entrywise-aggregate-controller",
        path: "wit/controller.wit",
        pub_export_macro: true,
        default_bindings_module: "wasmctrl_guest_aggregate::bindings",
        additional_derives: [PartialEq],
        with: {
            "wasmctrl:controller/types@0.3.0": wasmctrl_guest_sdk::bindings::wasmctrl::controller::types,
            "wasmctrl:controller/log@0.3.0": wasmctrl_guest_sdk::bindings::wasmctrl::controller::log,
        },
    });
}

/// The `aggregator` interface's records.
pub use bindings::exports::wasmctrl::controller::aggregator::{
    AggregateSpec, Contribution, Diagnostic, Group, Mapped, Reduction,
};

/// The SDK, for the macro's paths.
#[doc(hidden)]
pub use wasmctrl_guest_sdk as sdk;

/// A guest whose aggregate key the host keeps up to date incrementally.
/// Export it with [`export_aggregate_guest!`]:
/// its [`Guest::reconcile`] still serves every other key, offline runs and
/// a host that predates the aggregator.
pub trait AggregateGuest: Guest {
    /// The aggregate key maintained incrementally and its reduction; an
    /// error rejects the guest. The key must be one the manifest maps a
    /// watch to.
    fn aggregate(env: &Environment) -> Result<AggregateSpec, String>;

    /// What one object contributes: groups and values with
    /// [`Contributions::add`], events about it with
    /// [`Contributions::event`]. Only objects of watches mapped to the
    /// aggregate key are passed.
    fn map(
        env: &Environment,
        object: &Object<'_>,
        fields: &Self::Fields,
        out: &mut Contributions,
    ) -> Result<(), ReconcileError>;

    /// The plan from every non-empty group, sorted by key. The host appends
    /// the objects' diagnostic events.
    fn render(
        env: &Environment,
        groups: &[Group],
        fields: &Self::Fields,
    ) -> Result<Plan, ReconcileError>;

    /// The top-level field of `render`'s one applied document that holds
    /// one string entry per group, keyed by the group key (e.g. "data"),
    /// when `render` is entry-wise (see `entrywise` in the WIT: the entry
    /// of a group depends on that group alone, the rest of the plan on no
    /// group); the host then renders only changed groups. `None` (the
    /// default): `render` gets every group each time.
    fn entry_field(_env: &Environment) -> Option<String> {
        None
    }
}

/// The contributions and events of the object being mapped.
#[derive(Debug)]
pub struct Contributions {
    object: u32,
    mapped: Mapped,
}

impl Default for Contributions {
    fn default() -> Self {
        Contributions {
            object: 0,
            mapped: Mapped {
                contributions: Vec::new(),
                diagnostics: Vec::new(),
            },
        }
    }
}

impl Contributions {
    /// Folds `value` into group `group`.
    pub fn add(&mut self, group: &str, value: i64) -> &mut Self {
        self.mapped.contributions.push(Contribution {
            object: self.object,
            group: group.to_string(),
            value,
        });
        self
    }

    /// Records `event` about this object for as long as it is unchanged.
    pub fn event(&mut self, event: wit::Event) -> &mut Self {
        self.mapped.diagnostics.push(Diagnostic {
            object: self.object,
            event,
        });
        self
    }
}

fn terminal(guest: &str) -> impl Fn(String) -> ReconcileError + '_ {
    move |e| ReconcileError::Terminal(format!("guest {guest}: {e}"))
}

/// `aggregate` as the component exports it: the guest's spec, refused
/// (naming the guest and the key) when no watch maps to its key.
pub fn aggregate<G: AggregateGuest>(env: &Environment) -> Result<AggregateSpec, String> {
    wasmctrl_guest_sdk::log::install_panic_hook();
    let manifest = G::describe(env)?;
    let spec = G::aggregate(env)?;
    let mapped = manifest
        .watches
        .iter()
        .any(|w| matches!(&w.keys, KeyMapping::Aggregate(k) if *k == spec.key));
    if !mapped {
        return Err(format!(
            "guest {}: aggregate key {:?} is not a key any watch maps to",
            manifest.name, spec.key
        ));
    }
    Ok(spec)
}

/// `map` as the component exports it: [`AggregateGuest::map`] for every
/// object of a watch mapped to the aggregate key, in snapshot order.
pub fn map<G: AggregateGuest>(
    env: &Environment,
    data: SnapshotData,
) -> Result<Mapped, ReconcileError> {
    wasmctrl_guest_sdk::log::install_panic_hook();
    let manifest = G::describe(env).map_err(ReconcileError::Terminal)?;
    let named = terminal(&manifest.name);
    let spec = G::aggregate(env).map_err(&named)?;
    let (schema, fields) = wasmctrl_guest_sdk::run::resolve::<G>(env, &manifest).map_err(&named)?;
    let snapshot = Snapshot::new(&schema, &data).map_err(&named)?;
    let mapped_watch: Vec<bool> = manifest
        .watches
        .iter()
        .map(|w| matches!(&w.keys, KeyMapping::Aggregate(k) if *k == spec.key))
        .collect();
    let mut out = Contributions::default();
    for object in snapshot.all() {
        if !mapped_watch
            .get(object.watch().index())
            .copied()
            .unwrap_or(false)
        {
            continue;
        }
        out.object = u32::try_from(object.position()).unwrap_or(u32::MAX);
        G::map(env, &object, &fields, &mut out)?;
    }
    Ok(out.mapped)
}

/// `render` as the component exports it.
pub fn render<G: AggregateGuest>(
    env: &Environment,
    groups: &[Group],
) -> Result<wit::Plan, ReconcileError> {
    wasmctrl_guest_sdk::log::install_panic_hook();
    let manifest = G::describe(env).map_err(ReconcileError::Terminal)?;
    let (_, fields) =
        wasmctrl_guest_sdk::run::resolve::<G>(env, &manifest).map_err(terminal(&manifest.name))?;
    G::render(env, groups, &fields)?.finish()
}

/// Folds contributions as the host does (see `aggregator.reduction` in
/// the WIT): groups with at least one contribution, sorted by key.
pub fn reduce(reduction: Reduction, contributions: &[Contribution]) -> Vec<Group> {
    let mut by_group: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for c in contributions {
        by_group.entry(&c.group).or_default().push(c.value);
    }
    by_group
        .into_iter()
        .map(|(key, mut values)| {
            values.sort_unstable();
            let count = values.len() as u64;
            let clamp =
                |v: i128| i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX });
            let mut members = Vec::new();
            let value = match reduction {
                Reduction::Sum => clamp(values.iter().map(|&v| i128::from(v)).sum()),
                Reduction::Count => i64::try_from(count).unwrap_or(i64::MAX),
                Reduction::Min => values.first().copied().unwrap_or(0),
                Reduction::Max => values.last().copied().unwrap_or(0),
                Reduction::Set => {
                    values.dedup();
                    members = values;
                    i64::try_from(members.len()).unwrap_or(i64::MAX)
                }
            };
            Group {
                key: key.to_string(),
                value,
                count,
                members,
            }
        })
        .collect()
}

/// The aggregate key's plan over a whole snapshot, computed the way the
/// host's incremental path computes it: every object mapped, the groups
/// reduced, rendered, and the diagnostics appended in object order. Native
/// tests compare it with [`wasmctrl_guest_sdk::run::reconcile`].
pub fn whole<G: AggregateGuest>(
    env: &Environment,
    data: SnapshotData,
) -> Result<wit::Plan, ReconcileError> {
    let spec = aggregate::<G>(env).map_err(ReconcileError::Terminal)?;
    let mut mapped = map::<G>(env, data)?;
    let groups = reduce(spec.reduction, &mapped.contributions);
    let mut plan = render::<G>(env, &groups)?;
    mapped.diagnostics.sort_by_key(|d| d.object);
    plan.events
        .extend(mapped.diagnostics.into_iter().map(|d| d.event));
    Ok(plan)
}

/// `render` over `groups` composed the way the host composes an
/// entry-wise guest's plan ([`AggregateGuest::entry_field`]): the plan of
/// `render(env, [])` with its one document's entry field holding each
/// group's entry from `render(env, [group])`. Native tests compare it with
/// `render(env, groups)` to check the promise; an error names what broke
/// it (or says the guest is not entry-wise).
pub fn render_by_entries<G: AggregateGuest>(
    env: &Environment,
    groups: &[Group],
) -> Result<wit::Plan, String> {
    let field = G::entry_field(env).ok_or("the guest declares no entry field")?;
    let render = |gs: &[Group]| render::<G>(env, gs).map_err(|e| format!("render: {e:?}"));
    let one_doc = |plan: &wit::Plan| -> Result<serde_json::Value, String> {
        match plan.writes.as_slice() {
            [wit::Write::Apply(doc)] => serde_json::from_str(doc).map_err(|e| e.to_string()),
            _ => Err("render did not return exactly one apply".to_string()),
        }
    };
    let mut plan = render(&[])?;
    let mut doc = one_doc(&plan)?;
    let mut entries = serde_json::Map::new();
    for g in groups {
        let one = one_doc(&render(std::slice::from_ref(g))?)?;
        if let Some(map) = one.get(&field).and_then(serde_json::Value::as_object) {
            for (k, v) in map {
                if *k != g.key {
                    return Err(format!("group {:?} rendered entry {k:?}", g.key));
                }
                entries.insert(k.clone(), v.clone());
            }
        }
    }
    let obj = doc.as_object_mut().ok_or("the document is not an object")?;
    if !entries.is_empty() || obj.contains_key(&field) {
        obj.insert(field, serde_json::Value::Object(entries));
    }
    plan.writes = vec![wit::Write::Apply(doc.to_string())];
    Ok(plan)
}

/// Whether `render(env, groups)` breaks the entry-wise promise: `None`
/// when it equals [`render_by_entries`] (documents compared as JSON,
/// events and requeue as returned), else what differs.
pub fn entry_wise_mismatch<G: AggregateGuest>(
    env: &Environment,
    groups: &[Group],
) -> Option<String> {
    let whole = match render::<G>(env, groups) {
        Ok(p) => p,
        Err(e) => return Some(format!("render: {e:?}")),
    };
    let composed = match render_by_entries::<G>(env, groups) {
        Ok(p) => p,
        Err(e) => return Some(e),
    };
    let docs = |p: &wit::Plan| -> Vec<Option<serde_json::Value>> {
        p.writes
            .iter()
            .map(|w| match w {
                wit::Write::Apply(d) => serde_json::from_str(d).ok(),
                _ => None,
            })
            .collect()
    };
    if docs(&whole) != docs(&composed) {
        return Some(format!(
            "documents differ: render gives {:?}, composed {:?}",
            docs(&whole),
            docs(&composed)
        ));
    }
    if whole.events != composed.events || whole.requeue_after_ms != composed.requeue_after_ms {
        return Some("events or requeue differ".to_string());
    }
    None
}

/// Exports an [`AggregateGuest`] as the `entrywise-aggregate-controller`
/// world's `reconciler`, `aggregator` and `entrywise`:
/// `wasmctrl_guest_aggregate::export_aggregate_guest!(MyGuest);` instead of
/// `wasmctrl_guest_sdk::export_guest!` (not both). Like it, only the `wasm32` build exports.
#[macro_export]
macro_rules! export_aggregate_guest {
    ($guest:ty) => {
        #[cfg(target_arch = "wasm32")]
        #[allow(unsafe_code, missing_docs)]
        const _: () = {
            use $crate::bindings::exports::wasmctrl::controller::aggregator as a;
            use $crate::bindings::exports::wasmctrl::controller::entrywise as e;
            use $crate::bindings::exports::wasmctrl::controller::reconciler as r;

            struct Export;

            impl r::Guest for Export {
                fn describe(
                    env: $crate::sdk::Environment,
                ) -> ::std::result::Result<$crate::sdk::Manifest, ::std::string::String> {
                    $crate::sdk::run::describe::<$guest>(&env)
                }

                fn reconcile(
                    env: $crate::sdk::Environment,
                    request: $crate::sdk::Request,
                    snapshot: $crate::sdk::wit::Snapshot,
                ) -> ::std::result::Result<$crate::sdk::wit::Plan, $crate::sdk::ReconcileError>
                {
                    $crate::sdk::run::reconcile::<$guest>(
                        &env,
                        &request,
                        $crate::sdk::snapshot::from_wit(snapshot),
                    )
                }
            }

            impl a::Guest for Export {
                fn aggregate(
                    env: $crate::sdk::Environment,
                ) -> ::std::result::Result<a::AggregateSpec, ::std::string::String> {
                    $crate::aggregate::<$guest>(&env)
                }

                fn map_objects(
                    env: $crate::sdk::Environment,
                    snapshot: $crate::sdk::wit::Snapshot,
                ) -> ::std::result::Result<a::Mapped, $crate::sdk::ReconcileError> {
                    $crate::map::<$guest>(&env, $crate::sdk::snapshot::from_wit(snapshot))
                }

                fn render(
                    env: $crate::sdk::Environment,
                    groups: ::std::vec::Vec<a::Group>,
                ) -> ::std::result::Result<$crate::sdk::wit::Plan, $crate::sdk::ReconcileError>
                {
                    $crate::render::<$guest>(&env, &groups)
                }
            }

            impl e::Guest for Export {
                fn entry_field(
                    env: $crate::sdk::Environment,
                ) -> ::std::option::Option<::std::string::String> {
                    <$guest as $crate::AggregateGuest>::entry_field(&env)
                }
            }

    $crate::bindings::export!(Export with_types_in $crate::bindings);
        };
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(group: &str, value: i64) -> Contribution {
        Contribution {
            object: 0,
            group: group.to_string(),
            value,
        }
    }

    fn reduced(reduction: Reduction, cs: &[Contribution]) -> Vec<(String, i64, u64, Vec<i64>)> {
        reduce(reduction, cs)
            .into_iter()
            .map(|g| (g.key, g.value, g.count, g.members))
            .collect()
    }

    #[test]
    fn each_reduction_folds_groups_sorted_by_key_as_the_contract_says() {
        let cs = [
            c("b", 3),
            c("a", i64::MAX),
            c("b", -1),
            c("a", 5),
            c("b", 3),
        ];
        let s = |k: &str| k.to_string();
        assert_eq!(
            reduced(Reduction::Sum, &cs),
            [(s("a"), i64::MAX, 2, vec![]), (s("b"), 5, 3, vec![])]
        );
        assert_eq!(
            reduced(Reduction::Count, &cs),
            [(s("a"), 2, 2, vec![]), (s("b"), 3, 3, vec![])]
        );
        assert_eq!(
            reduced(Reduction::Min, &cs),
            [(s("a"), 5, 2, vec![]), (s("b"), -1, 3, vec![])]
        );
        assert_eq!(
            reduced(Reduction::Max, &cs),
            [(s("a"), i64::MAX, 2, vec![]), (s("b"), 3, 3, vec![])]
        );
        assert_eq!(
            reduced(Reduction::Set, &cs),
            [
                (s("a"), 2, 2, vec![5, i64::MAX]),
                (s("b"), 2, 3, vec![-1, 3])
            ]
        );
        assert!(reduce(Reduction::Sum, &[]).is_empty());
    }
}
