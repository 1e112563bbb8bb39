//! A namespace provisioner reading through three of the SDK's built-in
//! views (`host/tests/scaffold.rs` builds it in a scaffolded crate to
//! measure what the views cost a guest): every Namespace labelled `tier`
//! gets a ResourceQuota and a RoleBinding it controls.

use serde::Serialize;
use wasmctrl_guest_sdk::kinds::{
    Kind, Namespace, NamespaceFields, ResourceQuota, ResourceQuotaFields, RoleBinding,
    RoleBindingFields,
};
use wasmctrl_guest_sdk::{
    controller_ref, document, Entry, Environment, Lifecycle, Manifest, Plan, ReconcileError,
    Request, Schema, Snapshot, View, Watch, WriteRule,
};

/// The handles of the three views.
pub struct Fields {
    namespaces: NamespaceFields,
    quotas: ResourceQuotaFields,
    bindings: RoleBindingFields,
}

/// `roleRef` of a RoleBinding.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RoleRef<'a> {
    api_group: &'a str,
    kind: &'a str,
    name: &'a str,
}

/// One subject of a RoleBinding.
#[derive(Serialize)]
struct Subject<'a> {
    kind: &'a str,
    name: &'a str,
}

/// What a RoleBinding holds.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Binding<'a> {
    role_ref: RoleRef<'a>,
    subjects: [Subject<'a>; 1],
}

/// The guest.
pub struct Provisioner;

impl wasmctrl_guest_sdk::Guest for Provisioner {
    type Fields = Fields;

    fn describe(env: &Environment) -> Result<Manifest, String> {
        env.settings(&[])?;
        let namespaces = Watch::new("namespaces", Namespace::gvk())
            .label_selector("tier")
            .fields(Namespace::FIELDS)
            .per_object();
        let quotas = Watch::new("quotas", ResourceQuota::gvk())
            .fields(ResourceQuota::FIELDS)
            .owner("namespaces");
        let bindings = Watch::new("bindings", RoleBinding::gvk())
            .fields(RoleBinding::FIELDS)
            .owner("namespaces");
        Ok(Manifest::new("three-views")
            .watch(namespaces)
            .watch(quotas)
            .watch(bindings)
            .write(WriteRule::new(ResourceQuota::gvk()))
            .write(WriteRule::new(RoleBinding::gvk())))
    }

    fn fields(_: &Environment, schema: &Schema) -> Result<Fields, String> {
        Ok(Fields {
            namespaces: Namespace::resolve(&schema.watch("namespaces")?)?,
            quotas: ResourceQuota::resolve(&schema.watch("quotas")?)?,
            bindings: RoleBinding::resolve(&schema.watch("bindings")?)?,
        })
    }

    fn reconcile(
        _: &Environment,
        request: &Request,
        snapshot: &Snapshot<'_>,
        f: &Fields,
    ) -> Result<Plan, ReconcileError> {
        let mut plan = Plan::new();
        let namespace = match snapshot.lifecycle(request) {
            Lifecycle::Live(namespace) => namespace,
            Lifecycle::Gone(_) | Lifecycle::Unselected(_) => {
                plan.delete_all(snapshot.objects(f.quotas.watch()));
                plan.delete_all(snapshot.objects(f.bindings.watch()));
                return Ok(plan);
            }
            Lifecycle::Deleting(_) => return Ok(plan),
        };
        let ns = namespace.name();
        let tier = f.namespaces.read(&namespace).labels.remove("tier");
        let tier = tier.unwrap_or_default();
        let pods = if tier == "gold" { "100" } else { "10" };
        let quota = snapshot.get(f.quotas.watch(), ns, "tier");
        let hard = quota.map(|q| f.quotas.read(&q).hard);
        if hard.and_then(|h| h.get("pods").cloned()).as_deref() != Some(pods) {
            let target = ResourceQuota::gvk().object(ns, "tier");
            let spec = Entry("spec", Entry("hard", Entry("pods", pods)));
            plan.apply(&document(&target, spec).owned_by(controller_ref(&namespace)));
        }
        let binding = snapshot.get(f.bindings.watch(), ns, "team");
        let subjects = binding.map(|b| f.bindings.read(&b).subject_names);
        if subjects.as_deref() != Some(&[tier.as_str()][..]) {
            let target = RoleBinding::gvk().object(ns, "team");
            let body = Binding {
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io",
                    kind: "ClusterRole",
                    name: "edit",
                },
                subjects: [Subject {
                    kind: "Group",
                    name: &tier,
                }],
            };
            plan.apply(&document(&target, body).owned_by(controller_ref(&namespace)));
        }
        Ok(plan)
    }
}

wasmctrl_guest_sdk::export_guest!(Provisioner);

#[cfg(test)]
mod tests {
    use wasmctrl_guest_sdk::serde_json::{self, Value};
    use wasmctrl_guest_sdk::testing::{Obj, Val, World};
    use wasmctrl_guest_sdk::wit::Write;
    use wasmctrl_guest_sdk::{run, Environment};

    use super::*;

    #[test]
    fn a_gold_namespace_gets_its_quota_and_binding_and_then_nothing_more() {
        let env = Environment::test("ops");
        let manifest = run::describe::<Provisioner>(&env).expect("describe succeeds");
        let ns = Obj::new("namespaces", "", "team-a").label("tier", "gold");
        let world = World::new(&manifest).with(ns.clone());
        let request = world.request("namespaces", "team-a").expect("declared");
        let data = world.snapshot_for(&request).expect("declared");
        let plan = run::reconcile::<Provisioner>(&env, &request, data).expect("a plan");
        let docs: Vec<Value> = plan
            .writes
            .iter()
            .map(|w| match w {
                Write::Apply(doc) => serde_json::from_str(doc).expect("JSON"),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(docs.len(), 2, "{docs:?}");
        assert_eq!(docs[0]["spec"]["hard"]["pods"], "100");
        assert_eq!(docs[1]["roleRef"]["name"], "edit");
        assert_eq!(docs[1]["subjects"][0]["name"], "gold");
        // Both in place, as the views read them: nothing to write.
        let gvk = Namespace::gvk();
        let quota = Obj::new("quotas", "team-a", "tier")
            .controlled_by(&gvk, &ns)
            .set("spec.hard", Val::Json(r#"{"pods":"100"}"#.into()));
        let binding = Obj::new("bindings", "team-a", "team")
            .controlled_by(&gvk, &ns)
            .set_list("subjects[*].name", ["gold"]);
        let world = world.with(quota).with(binding);
        let data = world.snapshot_for(&request).expect("declared");
        let plan = run::reconcile::<Provisioner>(&env, &request, data).expect("a plan");
        assert!(plan.writes.is_empty(), "{:?}", plan.writes);
    }
}
