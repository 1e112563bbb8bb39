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
    /// manifest `describe` returned). A [`SchemaError`](crate::SchemaError) converts into the
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
/// same environment); a request for a watch the manifest lacks and a
/// malformed snapshot are host bugs: all are terminal errors naming the
/// guest, not panics.
pub fn reconcile<G: Guest>(
    env: &Environment,
    request: &Request,
    data: SnapshotData,
) -> Result<wit::Plan, ReconcileError> {
    crate::log::install_panic_hook();
    let manifest = G::describe(env).map_err(ReconcileError::Terminal)?;
    let (schema, fields) = resolve::<G>(env, &manifest).map_err(ReconcileError::Terminal)?;
    let named = |e: String| ReconcileError::Terminal(format!("guest {}: {e}", manifest.name));
    if let Some(watch) = &request.watch {
        schema
            .watch(watch)
            .map_err(|e| named(format!("request {:?}: {e}", request.key)))?;
    }
    let snapshot = Snapshot::new(&schema, &data).map_err(named)?;
    G::reconcile(env, request, &snapshot, &fields)?.finish()
}

/// Resolves `G`'s fields against `manifest` (errors name the guest):
/// what every entry point does before calling the guest; public for
/// `wasmctrl-guest-aggregate`.
pub fn resolve<G: Guest>(
    env: &Environment,
    manifest: &Manifest,
) -> Result<(Schema, G::Fields), String> {
    let named = |e: String| format!("guest {}: {e}", manifest.name);
    let schema = Schema::new(manifest).map_err(|e| named(e.to_string()))?;
    let fields = G::fields(env, &schema).map_err(named)?;
    Ok((schema, fields))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::condition::condition_paths;
    use crate::testing::{Obj, World};
    use crate::{Condition, ConditionFields, Field, GroupVersionKind, Watch};

    /// Reads `spec.replicas` and the conditions of "apps"; the manifest
    /// projects `spec.replicas` only when configured to.
    struct Toy;

    impl Guest for Toy {
        type Fields = (Field, ConditionFields);

        fn describe(env: &Environment) -> Result<Manifest, String> {
            let mut apps = Watch::new("apps", GroupVersionKind::new("apps", "v1", "Deployment"))
                .fields(condition_paths("status.conditions"))
                .per_object();
            if env.config.is_empty() {
                apps = apps.fields(["spec.replicas"]);
            }
            Ok(Manifest::new("toy").watch(apps))
        }

        fn fields(_: &Environment, schema: &Schema) -> Result<Self::Fields, String> {
            let apps = schema.watch("apps")?;
            let conditions = ConditionFields::resolve(&apps, "status.conditions")?;
            Ok((apps.field("spec.replicas")?, conditions))
        }

        fn reconcile(
            _: &Environment,
            request: &Request,
            snapshot: &Snapshot<'_>,
            (replicas, conditions): &Self::Fields,
        ) -> Result<Plan, ReconcileError> {
            let app = snapshot
                .primary(request)
                .ok_or_else(|| ReconcileError::Retryable("gone".into()))?;
            let mut plan = Plan::new();
            let seen = conditions.read(&app);
            let status = serde_json::json!({"replicas": app.int(*replicas), "seen": seen});
            plan.status(&app.object_ref(), &status);
            Ok(plan)
        }
    }

    #[test]
    fn describe_rejects_a_field_the_manifest_does_not_project_naming_guest_and_field() {
        let env = Environment::test("ns");
        assert!(describe::<Toy>(&env).is_ok());
        let err = describe::<Toy>(&env.clone().config("lean", "1")).unwrap_err();
        assert!(err.starts_with("guest toy: "), "{err}");
        assert!(
            err.contains("\"apps\"") && err.contains("\"spec.replicas\""),
            "{err}"
        );
        let data = World::new(&Toy::describe(&env).unwrap_or_else(|e| panic!("{e}")))
            .snapshot()
            .expect("empty world");
        let err = reconcile::<Toy>(&env.config("lean", "1"), &Request::aggregate("k"), data);
        assert!(matches!(err, Err(ReconcileError::Terminal(m)) if m.contains("spec.replicas")));
    }

    #[test]
    fn reconcile_reads_by_name_and_returns_the_guests_own_errors() {
        let env = Environment::test("ns");
        let manifest = Toy::describe(&env).unwrap_or_else(|e| panic!("{e}"));
        let [t, s, g, l, r, m] = condition_paths("status.conditions");
        let data = World::new(&manifest)
            .with(
                Obj::new("apps", "ns", "web")
                    .set("spec.replicas", 3)
                    .set_list(&t, ["Available", ""])
                    .set_list(&s, ["True", "False"])
                    .set_list(&g, [2_i64])
                    .set_list(&l, ["2026-01-01T00:00:00Z"])
                    .set_list(&r, ["Ok"])
                    .set_list(&m, ["up"]),
            )
            .snapshot()
            .expect("declared names");
        let plan = reconcile::<Toy>(&env, &Request::object("apps", "ns/web"), data.clone())
            .expect("reconciles");
        let want = Condition {
            observed_generation: 2,
            last_transition_time: "2026-01-01T00:00:00Z".into(),
            ..Condition::new("Available", true, "Ok", "up")
        };
        let body = serde_json::json!({"replicas": 3, "seen": [want]});
        let doc = serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns"}, "status": body,
        });
        match plan.writes.as_slice() {
            [wit::Write::ApplyStatus(json)] => {
                let got: serde_json::Value = serde_json::from_str(json).expect("JSON");
                assert_eq!(got, doc);
            }
            other => panic!("expected a status write, got {other:?}"),
        }
        let err = reconcile::<Toy>(&env, &Request::object("apps", "ns/gone"), data.clone());
        assert_eq!(err, Err(ReconcileError::Retryable("gone".into())));
        let err = reconcile::<Toy>(&env, &Request::object("app", "ns/web"), data.clone());
        assert!(
            matches!(err, Err(ReconcileError::Terminal(m)) if m.contains("no watch named \"app\""))
        );
        let mut bad = data;
        bad.object_name.clear();
        let err = reconcile::<Toy>(&env, &Request::object("apps", "ns/web"), bad);
        assert!(matches!(err, Err(ReconcileError::Terminal(m)) if m.starts_with("guest toy: ")));
    }
}
