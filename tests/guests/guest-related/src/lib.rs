//! A test guest for the key mappings `owner` and `by-index` (across
//! namespaces and kept to one): for each
//! primary it reports, in a ConfigMap, the related objects its reconcile's
//! snapshot held. The host's integration tests (`host/tests/related.rs`) change
//! related objects and read the reports to see which primary each change
//! woke and what its per-key snapshot contained.
//!
//! Watches (ConfigMaps in the configured namespace, told apart by the label
//! `role`):
//! - `owners` (`role=owner`): the primaries, one key each, indexed by
//!   `data.team` (index `team`);
//! - `owned` (`role=owned`): related to their controller owner (`owner`);
//! - `members` (`role=member`): related to the owners whose `data.team`
//!   equals theirs (`by-index`);
//! - `settings` (`role=setting`, in every namespace): related to the
//!   owners of their own namespace whose `data.settings` (index `settings`)
//!   is their name (`by-index`, `same-namespace:owners`).
//!
//! For primary `P` it applies the ConfigMap `seen-P` in the host's
//! namespace with `data.owned` and `data.members`: the sorted, comma-joined
//! names of the related objects of each watch in the snapshot, and
//! `data.settings`: those of the settings, as `namespace/name`. Gone
//! primaries get nothing.
//!
//! Configuration: `namespace` (where the watched ConfigMaps live; default
//! `ml`). With `shape=cleanup`, the guest is instead the [`cleanup`] shape:
//! label-selected primaries of a built-in kind that clean up their
//! children when they are gone or leave the selector, and a shared input.

pub mod cleanup;

use wasmctrl_guest_sdk::snapshot::WatchId;
use wasmctrl_guest_sdk::{
    document, Entry, Environment, GroupVersionKind, Manifest, Plan, ReconcileError, Request,
    Schema, Snapshot, Watch, WriteRule,
};

/// The primary watch.
pub const OWNERS: &str = "owners";
/// Objects owned by a primary (controller owner reference).
pub const OWNED: &str = "owned";
/// Objects related to primaries through the `team` index.
pub const MEMBERS: &str = "members";
/// The index on the owners' `data.team`.
pub const TEAM_INDEX: &str = "team";
/// The field both sides of the index link read.
pub const TEAM: &str = "data.team";
/// ConfigMaps of any namespace related to the owners of theirs by name.
pub const SETTINGS: &str = "settings";
/// The index on the owners' `data.settings` (the name of their settings).
pub const SETTINGS_INDEX: &str = "settings";

/// The manifest for watched ConfigMaps in `namespace`, reports in
/// `report_namespace`.
pub fn manifest(namespace: &str, report_namespace: &str) -> Manifest {
    let cm = || GroupVersionKind::core("ConfigMap");
    let owners = Watch::new(OWNERS, cm())
        .namespace(namespace)
        .label_selector("role=owner")
        .fields([TEAM])
        .index(TEAM_INDEX, TEAM)
        .index(SETTINGS_INDEX, "data.settings")
        .per_object();
    let owned = Watch::new(OWNED, cm())
        .namespace(namespace)
        .label_selector("role=owned")
        .owner(OWNERS);
    let members = Watch::new(MEMBERS, cm())
        .namespace(namespace)
        .label_selector("role=member")
        .fields([TEAM])
        .by_index(OWNERS, TEAM_INDEX, TEAM);
    let settings = Watch::new(SETTINGS, cm())
        .label_selector("role=setting")
        .fields(["metadata.name"])
        .by_index_same_namespace(OWNERS, SETTINGS_INDEX, "metadata.name");
    Manifest::new("related")
        .watch(owners)
        .watch(owned)
        .watch(members)
        .watch(settings)
        .write(WriteRule::new(cm()).namespace(report_namespace))
}

/// The guest.
pub struct Related;

/// The handles of the configured shape.
pub enum Fields {
    /// The default shape (owner, by-index).
    Related(RelatedFields),
    /// [`cleanup`].
    Cleanup(cleanup::Fields),
}

/// Watch handles of the default shape.
pub struct RelatedFields {
    owned: WatchId,
    members: WatchId,
    settings: WatchId,
    report_namespace: String,
}

fn namespace(env: &Environment) -> Result<String, String> {
    Ok(env
        .settings(&["namespace", "shape"])?
        .get_or("namespace", "ml"))
}

/// Whether `env` configures the [`cleanup`] shape.
fn is_cleanup(env: &Environment) -> bool {
    env.config
        .iter()
        .any(|(k, v)| k == "shape" && v == "cleanup")
}

fn names(snapshot: &Snapshot<'_>, watch: WatchId) -> String {
    let mut names: Vec<&str> = snapshot.objects(watch).map(|o| o.name()).collect();
    names.sort_unstable();
    names.join(",")
}

/// As [`names`], each `namespace/name`.
fn keys(snapshot: &Snapshot<'_>, watch: WatchId) -> String {
    let mut keys: Vec<String> = snapshot
        .objects(watch)
        .map(|o| format!("{}/{}", o.namespace(), o.name()))
        .collect();
    keys.sort_unstable();
    keys.join(",")
}

impl wasmctrl_guest_sdk::Guest for Related {
    type Fields = Fields;

    fn describe(env: &Environment) -> Result<Manifest, String> {
        if is_cleanup(env) {
            return cleanup::manifest(env);
        }
        Ok(manifest(&namespace(env)?, &env.namespace))
    }

    fn fields(env: &Environment, schema: &Schema) -> Result<Fields, String> {
        if is_cleanup(env) {
            return Ok(Fields::Cleanup(cleanup::Fields::resolve(env, schema)?));
        }
        Ok(Fields::Related(RelatedFields {
            owned: schema.watch(OWNED)?.id(),
            members: schema.watch(MEMBERS)?.id(),
            settings: schema.watch(SETTINGS)?.id(),
            report_namespace: env.namespace.clone(),
        }))
    }

    fn reconcile(
        _: &Environment,
        request: &Request,
        snapshot: &Snapshot<'_>,
        f: &Fields,
    ) -> Result<Plan, ReconcileError> {
        let f = match f {
            Fields::Related(f) => f,
            Fields::Cleanup(f) => return Ok(cleanup::reconcile(request, snapshot, f)),
        };
        let mut plan = Plan::new();
        let Some(primary) = snapshot.primary(request) else {
            return Ok(plan);
        };
        let report = GroupVersionKind::core("ConfigMap")
            .object(&f.report_namespace, &format!("seen-{}", primary.name()));
        plan.apply(&document(
            &report,
            Entry(
                "data",
                [
                    ("owned", names(snapshot, f.owned)),
                    ("members", names(snapshot, f.members)),
                    ("settings", keys(snapshot, f.settings)),
                ]
                .into_iter()
                .collect::<std::collections::BTreeMap<_, _>>(),
            ),
        ));
        Ok(plan)
    }
}

wasmctrl_guest_sdk::export_guest!(Related);
