//! The namespace provisioner: a per-object controller of Namespaces,
//! written with the guest SDK.
//!
//! Every Namespace labelled `platform.example.com/tier` with a tier of
//! [`tier::TIERS`] (`small`, `large`) gets three children in it, each
//! controlled by the Namespace (an owner reference with `controller: true`):
//! a ResourceQuota `tier-quota`, a LimitRange `tier-limits` and a
//! RoleBinding `tier-ROLE` granting the ClusterRole `ROLE` (`edit` unless
//! configured) to the Group `NAMESPACE:members`. A tier's limits are the
//! guest's defaults (built in, or `--config namespaces.TIER=...`),
//! overridden entry by entry by `data.TIER` of the ConfigMap
//! `tier-overrides` in the namespace `platform`.
//!
//! The key mappings: the Namespaces are the primary (`per-object`, selected
//! by the label); a change to a child wakes the Namespace controlling it
//! (`owner`), so a person's edit is undone; a change to `tier-overrides`
//! wakes every Namespace (`all`), whose snapshot holds it whatever its
//! namespace. When the label goes (or names no tier of ours), the key
//! reconciles as [`Lifecycle::Unselected`] with a snapshot still holding
//! the children the Namespace controls, and this guest deletes them; a
//! deleted Namespace ([`Lifecycle::Gone`]) takes its children with it. This
//! file is the glue (manifest, plan; it reads through the SDK's typed views
//! of built-in kinds, [`wasmctrl_guest_sdk::kinds`]); the decision is
//! [`tier`].

pub mod tier;

use wasmctrl_guest_sdk::kinds::{
    ConfigMap, ConfigMapFields, Kind, LimitRange, Namespace, NamespaceFields, ResourceQuota,
    RoleBinding,
};
use wasmctrl_guest_sdk::snapshot::WatchId;
use wasmctrl_guest_sdk::{
    controller_ref, document, Entry, Environment, Event, Lifecycle, Manifest, Object, Plan,
    ReconcileError, Request, Schema, Snapshot, View, Watch, WriteRule,
};

use tier::{Limits, LimitsError, TIERS};

/// The guest's name (field manager `wasmctrl/namespaces`, config keys
/// `namespaces.KEY`).
pub const GUEST_NAME: &str = "namespaces";
/// The primary watch: the Namespaces carrying a tier.
pub const NAMESPACE_WATCH: &str = "namespaces";
/// The ResourceQuotas a Namespace controls.
pub const QUOTA_WATCH: &str = "quotas";
/// The LimitRanges a Namespace controls.
pub const LIMITS_WATCH: &str = "limits";
/// The RoleBindings a Namespace controls.
pub const BINDING_WATCH: &str = "bindings";
/// The shared input: the `tier-overrides` ConfigMap.
pub const OVERRIDES_WATCH: &str = "overrides";
/// The namespace of the overrides ConfigMap.
pub const PLATFORM_NS: &str = "platform";
/// The name of the overrides ConfigMap.
pub const OVERRIDES: &str = "tier-overrides";
/// The name of the ResourceQuota in each namespace.
pub const QUOTA_NAME: &str = "tier-quota";
/// The name of the LimitRange in each namespace.
pub const LIMITS_NAME: &str = "tier-limits";
/// The ClusterRole bound when the configuration names none.
pub const DEFAULT_ROLE: &str = "edit";
/// The reason of the Warning event about an override that cannot be read.
pub const INVALID_OVERRIDE: &str = "InvalidOverride";

/// The operator's configuration, checked at `describe`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The ClusterRole each namespace's group is bound to (`role`).
    pub role: String,
    /// Each tier's default limits, in [`TIERS`] order: built in, with the
    /// entries of the config key named after the tier.
    pub defaults: [Limits; TIERS.len()],
}

impl Settings {
    /// The configuration keys: `role`, and one per tier.
    pub const KEYS: [&'static str; 3] = ["role", TIERS[0], TIERS[1]];

    /// Reads `env.config`; an unknown key, an empty value or a bad limits
    /// text is an error naming it.
    pub fn from_env(env: &Environment) -> Result<Settings, String> {
        let config = env.settings(&Self::KEYS)?;
        let defaults = TIERS.map(|tier| {
            Limits::builtin(tier)
                .overridden(config.get(tier).unwrap_or_default())
                .map_err(|e| format!("configuration key {tier:?}: {e}"))
        });
        let [small, large] = defaults;
        Ok(Settings {
            role: config.get_or("role", DEFAULT_ROLE),
            defaults: [small?, large?],
        })
    }

    /// The default limits of `tier`; `None` for a tier not in [`TIERS`].
    pub fn defaults(&self, tier: &str) -> Option<&Limits> {
        let at = TIERS.iter().position(|t| *t == tier)?;
        self.defaults.get(at)
    }
}

/// The manifest: tiered Namespaces (per object, by label), the three kinds
/// of children they control, and the overrides (a shared input of every
/// Namespace); writes: the three kinds of children.
// ANCHOR: manifest
pub fn manifest() -> Manifest {
    let namespaces = Watch::new(NAMESPACE_WATCH, Namespace::gvk())
        .label_selector(&tier::tier_selector())
        .fields(Namespace::FIELDS)
        .per_object();
    // Nothing of a child is read: the host compares each planned child with
    // the live one, and the snapshot holds only the children the Namespace
    // controls.
    let quotas = Watch::new(QUOTA_WATCH, ResourceQuota::gvk()).owner(NAMESPACE_WATCH);
    let limits = Watch::new(LIMITS_WATCH, LimitRange::gvk()).owner(NAMESPACE_WATCH);
    let bindings = Watch::new(BINDING_WATCH, RoleBinding::gvk()).owner(NAMESPACE_WATCH);
    let overrides = Watch::new(OVERRIDES_WATCH, ConfigMap::gvk())
        .namespace(PLATFORM_NS)
        .field_selector(&format!("metadata.name={OVERRIDES}"))
        .fields(ConfigMap::FIELDS)
        .all(NAMESPACE_WATCH);
    Manifest::new(GUEST_NAME)
        .watch(namespaces)
        .watch(quotas)
        .watch(limits)
        .watch(bindings)
        .watch(overrides)
        .write(WriteRule::new(ResourceQuota::gvk()).name(QUOTA_NAME))
        .write(WriteRule::new(LimitRange::gvk()).name(LIMITS_NAME))
        .write(WriteRule::new(RoleBinding::gvk()))
}
// ANCHOR_END: manifest

/// The guest.
pub struct NamespaceProvisioner;

/// The views a reconcile reads through, resolved, and the settings.
pub struct Fields {
    namespaces: NamespaceFields,
    overrides: ConfigMapFields,
    quotas: WatchId,
    limits: WatchId,
    bindings: WatchId,
    settings: Settings,
}

impl Fields {
    /// The children watches, each with the name of the child this guest
    /// keeps in it: its three children's when `binding` names the
    /// RoleBinding to keep, none when `binding` is `None`.
    fn children<'a>(&self, binding: Option<&'a str>) -> [(WatchId, Option<&'a str>); 3] {
        [
            (self.quotas, binding.map(|_| QUOTA_NAME)),
            (self.limits, binding.map(|_| LIMITS_NAME)),
            (self.bindings, binding),
        ]
    }
}

/// Plans the deletion of every child in `snapshot` (the snapshot holds only
/// those this key's Namespace controls) other than the one each watch keeps.
fn prune(snapshot: &Snapshot<'_>, children: &[(WatchId, Option<&str>)], plan: &mut Plan) {
    for &(watch, keep) in children {
        plan.delete_all(
            snapshot
                .objects(watch)
                .filter(|child| Some(child.name()) != keep),
        );
    }
}

/// Plans the three children of the live `namespace` of `tier`, with that
/// tier's limits, and the deletion of any other child it controls.
fn provision(
    snapshot: &Snapshot<'_>,
    f: &Fields,
    namespace: &Object<'_>,
    tier: &str,
    defaults: &Limits,
    plan: &mut Plan,
) {
    let overrides = snapshot.get(f.overrides.watch(), PLATFORM_NS, OVERRIDES);
    let data = overrides
        .map(|o| f.overrides.read(&o).data)
        .unwrap_or_default();
    let text = data.get(tier).map_or("", String::as_str);
    let limits = match defaults.overridden(text) {
        Ok(limits) => limits,
        Err(e) => return refuse_override(overrides, tier, &e, plan),
    };
    let name = namespace.name();
    let owner = controller_ref(namespace);
    let quota = ResourceQuota::gvk().object(name, QUOTA_NAME);
    plan.apply(&document(&quota, Entry("spec", tier::quota_spec(&limits))).owned_by(owner.clone()));
    let range = LimitRange::gvk().object(name, LIMITS_NAME);
    plan.apply(
        &document(&range, Entry("spec", tier::limit_range_spec(&limits))).owned_by(owner.clone()),
    );
    let role = f.settings.role.as_str();
    let binding_name = tier::binding_name(role);
    let group = tier::group_name(name);
    let binding = RoleBinding::gvk().object(name, &binding_name);
    plan.apply(&document(&binding, tier::role_binding(role, &group)).owned_by(owner));
    prune(snapshot, &f.children(Some(&binding_name)), plan);
}

/// An override that cannot be read changes nothing: the namespaces of its
/// tier keep their children as they are (never half an override, never a
/// reset to the defaults on a typo), and a Warning event on the ConfigMap
/// says why.
fn refuse_override(overrides: Option<Object<'_>>, tier: &str, e: &LimitsError, plan: &mut Plan) {
    if let Some(o) = overrides {
        plan.event(Event::warning(
            o.object_ref(),
            INVALID_OVERRIDE,
            format!(
                "data.{tier}: {e}; the namespaces of tier {tier} keep their children as they are"
            ),
        ));
    }
}

// ANCHOR: guest
impl wasmctrl_guest_sdk::Guest for NamespaceProvisioner {
    type Fields = Fields;

    fn describe(env: &Environment) -> Result<Manifest, String> {
        Settings::from_env(env)?;
        Ok(manifest())
    }

    fn fields(env: &Environment, schema: &Schema) -> Result<Fields, String> {
        Ok(Fields {
            namespaces: Namespace::resolve(&schema.watch(NAMESPACE_WATCH)?)?,
            overrides: ConfigMap::resolve(&schema.watch(OVERRIDES_WATCH)?)?,
            quotas: schema.watch(QUOTA_WATCH)?.id(),
            limits: schema.watch(LIMITS_WATCH)?.id(),
            bindings: schema.watch(BINDING_WATCH)?.id(),
            settings: Settings::from_env(env)?,
        })
    }

    fn reconcile(
        _: &Environment,
        request: &Request,
        snapshot: &Snapshot<'_>,
        f: &Fields,
    ) -> Result<Plan, ReconcileError> {
        let mut plan = Plan::new();
        // ANCHOR: lifecycle
        let namespace = match snapshot.lifecycle(request) {
            Lifecycle::Live(namespace) => namespace,
            // The label went (or names no tier of ours) while the Namespace
            // stays: the snapshot still holds the children it controls, and
            // only those; they go.
            Lifecycle::Unselected(_) => {
                prune(snapshot, &f.children(None), &mut plan);
                return Ok(plan);
            }
            // Deleted, or being deleted: its children go with it (and the
            // server refuses a create in a terminating namespace).
            Lifecycle::Gone(_) | Lifecycle::Deleting(_) => return Ok(plan),
        };
        // ANCHOR_END: lifecycle
        let labels = f.namespaces.read(&namespace).labels;
        let tier = labels.get(tier::TIER_LABEL).map_or("", String::as_str);
        match f.settings.defaults(tier) {
            Some(defaults) => provision(snapshot, f, &namespace, tier, defaults, &mut plan),
            // A tier the label selector should not have let in: as if
            // unselected.
            None => prune(snapshot, &f.children(None), &mut plan),
        }
        Ok(plan)
    }
}

wasmctrl_guest_sdk::export_guest!(NamespaceProvisioner);
// ANCHOR_END: guest

#[cfg(test)]
mod tests;
