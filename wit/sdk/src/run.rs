//! The [`Guest`] trait and the two entry points that run it: what the
//! component's exports do ([`export_guest!`](crate::export_guest!)) and what
//! native tests call ([`crate::testing`]), so both take the same path —
//! describe, resolve the fields against the manifest, validate the
//! snapshot, reconcile, finish the plan. It never panics on its inputs;
//! every failure becomes the contract's error value, naming the guest.

use crate::snapshot::{Schema, Snapshot, SnapshotData};
use crate::{wit, Environment, Manifest, Plan, ReconcileError, Request};

/// A controller guest, written against SDK types.
///
/// `describe` declares what the guest reads and writes; `fields` resolves,
/// by name, every projected field `reconcile` reads (an unknown watch,
/// field or index is an error at `describe`, naming the guest and the
/// name); `reconcile` computes a [`Plan`] from the snapshot. All three must
/// be pure functions of their arguments: the SDK calls `describe` and
/// `fields` again before every reconcile instead of caching them (a guest
/// instance lives for one call).
pub trait Guest {
    /// What `reconcile` reads, resolved: [`Field`](crate::Field) handles,
    /// and anything else derived from the environment (settings).
    type Fields;

    /// The manifest for this environment; an error rejects the guest.
    fn describe(env: &Environment) -> Result<Manifest, String>;

    /// Resolves the fields `reconcile` reads against `schema` (the
    /// manifest `describe` returned). A [`SchemaError`] converts into the
    /// error with `?`; the SDK prefixes it with the guest's name.
    fn fields(env: &Environment, schema: &Schema) -> Result<Self::Fields, String>;

    /// The desired state for `request`.
    fn reconcile(
        env: &Environment,
        request: &Request,
        snapshot: &Snapshot<'_>,
        fields: &Self::Fields,
    ) -> Result<Plan, ReconcileError>;
}

/// `describe` as the component exports it: the guest's manifest, checked by
/// resolving its fields (so an unknown name rejects the guest now, not at
/// its first reconcile).
pub fn describe<G: Guest>(env: &Environment) -> Result<Manifest, String> {
    crate::log::install_panic_hook();
    let manifest = G::describe(env)?;
    resolve::<G>(env, &manifest)?;
    Ok(manifest)
}

/// `reconcile` as the component exports it. Describing or resolving fails
/// only if the guest is not deterministic (the host described it with the
/// same environment) and a malformed snapshot is a host bug: both are
/// terminal errors, not panics.
pub fn reconcile<G: Guest>(
    env: &Environment,
    request: &Request,
    data: SnapshotData,
) -> Result<wit::Plan, ReconcileError> {
    crate::log::install_panic_hook();
    let manifest = G::describe(env).map_err(ReconcileError::Terminal)?;
    let (schema, fields) = resolve::<G>(env, &manifest).map_err(ReconcileError::Terminal)?;
    let snapshot = Snapshot::new(&schema, &data)
        .map_err(|e| ReconcileError::Terminal(format!("guest {}: {e}", manifest.name)))?;
    G::reconcile(env, request, &snapshot, &fields)?.finish()
}

fn resolve<G: Guest>(
    env: &Environment,
    manifest: &Manifest,
) -> Result<(Schema, G::Fields), String> {
    let named = |e: String| format!("guest {}: {e}", manifest.name);
    let schema = Schema::new(manifest).map_err(|e| named(e.to_string()))?;
    let fields = G::fields(env, &schema).map_err(named)?;
    Ok((schema, fields))
}
