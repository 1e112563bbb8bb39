//! The App guest end to end, natively: snapshots built by the SDK's `World`
//! (the host's layout code), run through the same path as the component's
//! exports, plans checked as the host would receive them.

use wasmctrl_guest_sdk::condition::condition_paths;
use wasmctrl_guest_sdk::serde_json::{self, json, Value};
use wasmctrl_guest_sdk::testing::{Obj, World};
use wasmctrl_guest_sdk::wit::{Plan, Write};
use wasmctrl_guest_sdk::{run, KeyMapping, Presence};

use super::*;

const NS: &str = "team-a";
const NAME: &str = "web";
const UID: &str = "uid-team-a-web";
/// 2026-12-01T03:44:00Z.
const NOW: u64 = 1_796_096_640_000;
const NOW_TEXT: &str = "2026-12-01T03:44:00Z";
const EARLIER: &str = "2026-11-30T00:00:00Z";

/// The App `team-a/web` holding our finalizer.
fn app(message: &str, replicas: i64) -> Obj {
    Obj::new(APP_WATCH, NS, NAME)
        .set("spec.message", message)
        .set("spec.replicas", replicas)
        .set_list(FINALIZERS, [FINALIZER])
}

/// With a `Ready` condition already in status.
fn with_ready(app: Obj, status: &str, reason: &str, since: &str, generation: i64) -> Obj {
    let [t, s, g, l, r, m] = condition_paths("status.conditions");
    app.set_list(&t, ["Ready"])
        .set_list(&s, [status])
        .set_list(&g, [generation])
        .set_list(&l, [since])
        .set_list(&r, [reason])
        .set_list(&m, [format!("ConfigMap {NS}/{NAME} is applied")])
}

/// The child ConfigMap of `team-a/web`, as the host's owner index hands it
/// to the App's snapshot (only children the App controls are in it).
fn its_child() -> Obj {
    Obj::new(CHILD_WATCH, NS, NAME).uid("uid-child")
}

/// The namespace's `shared-settings`, with `data.banner` = `banner`.
fn settings(namespace: &str, banner: Option<&str>) -> Obj {
    Obj::new(SETTINGS_WATCH, namespace, SHARED_SETTINGS).set("data.banner", banner)
}

// ANCHOR: run
fn reconcile(objects: Vec<Obj>) -> Plan {
    let data = World::new(&manifest())
        .with_all(objects)
        .snapshot()
        .expect("fixture names are in the manifest");
    let env = Environment::test("wasmctrl").now_ms(NOW);
    let request = Request::object(APP_WATCH, &format!("{NS}/{NAME}"));
    run::reconcile::<AppController>(&env, &request, data).expect("reconcile succeeds")
}
// ANCHOR_END: run

/// The two writes of a live App: the child (applied) and the status.
fn child_and_status(plan: &Plan) -> (Value, Value) {
    match plan.writes.as_slice() {
        [Write::Apply(child), Write::ApplyStatus(status)] => {
            let child: Value = serde_json::from_str(child).expect("valid JSON");
            let status: Value = serde_json::from_str(status).expect("valid JSON");
            assert_eq!(status["apiVersion"], "apps.example.com/v1");
            assert_eq!(status["kind"], "App");
            assert_eq!(status["metadata"], json!({"name": NAME, "namespace": NS}));
            (child, status["status"].clone())
        }
        other => panic!("expected the child's apply and a status write, got {other:?}"),
    }
}

fn ready(status: &Value) -> &Value {
    let conditions = status["conditions"].as_array().expect("conditions");
    assert_eq!(conditions.len(), 1, "only our condition: {status}");
    assert_eq!(conditions[0]["type"], "Ready");
    &conditions[0]
}

#[test]
fn a_new_app_gets_a_child_controlled_by_it_and_ready_false_until_it_exists() {
    let (child, status) = child_and_status(&reconcile(vec![app("hello", 2)]));
    assert_eq!(
        child,
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": NAME,
                "namespace": NS,
                "ownerReferences": [{
                    "apiVersion": "apps.example.com/v1",
                    "kind": "App",
                    "name": NAME,
                    "uid": UID,
                    "controller": true,
                    "blockOwnerDeletion": true,
                }],
            },
            "data": {"message": "hello", "replicas": "2"},
        })
    );
    assert_eq!(status["observedGeneration"], 1);
    let c = ready(&status);
    assert_eq!(
        (&c["status"], &c["reason"], &c["observedGeneration"]),
        (&json!("False"), &json!("ChildMissing"), &json!(1))
    );
    assert_eq!(c["lastTransitionTime"], NOW_TEXT);

    // Once the child is in the snapshot: Ready flips, with a new time.
    let was = with_ready(app("hello", 2), "False", "ChildMissing", EARLIER, 1);
    let (_, status) = child_and_status(&reconcile(vec![was, its_child()]));
    let c = ready(&status);
    assert_eq!(
        (&c["status"], &c["reason"]),
        (&json!("True"), &json!("ChildReady"))
    );
    assert_eq!(c["lastTransitionTime"], NOW_TEXT);
}

#[test]
fn a_spec_change_is_mirrored_in_the_child_and_observed_in_status() {
    let edited = with_ready(
        app("bye", 5).generation(4),
        "True",
        "ChildReady",
        EARLIER,
        3,
    );
    let (child, status) = child_and_status(&reconcile(vec![edited, its_child()]));
    assert_eq!(child["data"], json!({"message": "bye", "replicas": "5"}));
    assert_eq!(status["observedGeneration"], 4);
    let c = ready(&status);
    assert_eq!(c["observedGeneration"], 4);
    assert_eq!(c["lastTransitionTime"], EARLIER, "Ready did not flip");
}

#[test]
fn an_unchanged_world_plans_exactly_the_state_it_already_has() {
    // What the host compares against: the same child and the same status
    // every time (time kept), so an idle controller writes nothing.
    let world = || {
        vec![
            with_ready(app("hello", 2), "True", "ChildReady", EARLIER, 1),
            its_child(),
            settings(NS, Some("hi")),
        ]
    };
    let first = reconcile(world());
    let again = reconcile(world());
    assert_eq!(first.writes, again.writes);
    assert!(first.events.is_empty() && first.requeue_after_ms.is_none());
    let (child, status) = child_and_status(&first);
    assert_eq!(
        child["data"],
        json!({"banner": "hi", "message": "hello", "replicas": "2"})
    );
    assert_eq!(
        status,
        json!({"observedGeneration": 1, "conditions": [{
            "type": "Ready", "status": "True", "observedGeneration": 1,
            "lastTransitionTime": EARLIER, "reason": "ChildReady",
            "message": format!("ConfigMap {NS}/{NAME} is applied"),
        }]})
    );
}

#[test]
fn ready_keeps_its_transition_time_unless_its_status_flips() {
    let cases = [
        ("still ready", "True", "ChildReady", true, EARLIER),
        ("still missing", "False", "ChildMissing", false, EARLIER),
        ("child appears", "False", "ChildMissing", true, NOW_TEXT),
        ("child deleted", "True", "ChildReady", false, NOW_TEXT),
    ];
    for (what, was, reason, exists, want) in cases {
        let mut objects = vec![with_ready(app("m", 1), was, reason, EARLIER, 1)];
        if exists {
            objects.push(its_child());
        }
        let (_, status) = child_and_status(&reconcile(objects));
        assert_eq!(ready(&status)["lastTransitionTime"], want, "{what}");
    }
}

#[test]
fn the_banner_of_shared_settings_is_copied_and_absent_means_no_key() {
    let cases = [
        (
            "banner set",
            vec![settings(NS, Some("maintenance at 5"))],
            Some("maintenance at 5"),
        ),
        ("empty banner", vec![settings(NS, Some(""))], Some("")),
        ("settings without banner", vec![settings(NS, None)], None),
        ("no settings", vec![], None),
        // The host only relates same-namespace settings; the guest only
        // reads its own namespace's, whatever the snapshot holds.
        (
            "another namespace's",
            vec![settings("team-b", Some("x"))],
            None,
        ),
    ];
    for (what, extra, want) in cases {
        let mut objects = vec![app("m", 1), its_child()];
        objects.extend(extra);
        let (child, _) = child_and_status(&reconcile(objects));
        assert_eq!(
            child["data"].get("banner").and_then(Value::as_str),
            want,
            "{what}"
        );
        assert_eq!(child["data"]["message"], "m", "{what}");
    }
}

// ANCHOR: deleting
#[test]
fn a_deleting_app_with_its_child_deletes_the_child_and_keeps_the_finalizer() {
    let deleting = app("m", 1).deleting("2026-12-01T03:40:00Z");
    let plan = reconcile(vec![deleting.clone(), its_child()]);
    match plan.writes.as_slice() {
        // The host pins the delete to the uid its snapshot saw (uid-child).
        [Write::Delete(target)] => assert_eq!(*target, configmap_gvk().object(NS, NAME)),
        other => panic!("expected only the child's delete, got {other:?}"),
    }
    assert!(plan.events.is_empty());
    // Someone else's finalizer only: the child still goes.
    let plan = reconcile(vec![
        deleting.set_list(FINALIZERS, ["other.io/x"]),
        its_child(),
    ]);
    assert!(
        matches!(plan.writes.as_slice(), [Write::Delete(_)]),
        "{:?}",
        plan.writes
    );
}
// ANCHOR_END: deleting

#[test]
fn a_deleting_app_without_a_child_releases_the_finalizer_and_nothing_else() {
    let deleting = app("m", 1).deleting("2026-12-01T03:40:00Z");
    let plan = reconcile(vec![deleting.clone(), settings(NS, Some("b"))]);
    match plan.writes.as_slice() {
        [Write::RemoveFinalizer(f)] => {
            assert_eq!(f.finalizer, FINALIZER);
            assert_eq!(f.target, app_gvk().object(NS, NAME));
        }
        other => panic!("expected only the finalizer's removal, got {other:?}"),
    }
    // Our finalizer already gone: nothing to write.
    let plan = reconcile(vec![deleting.set_list(FINALIZERS, ["other.io/x"])]);
    assert!(plan.writes.is_empty(), "{:?}", plan.writes);
}

#[test]
fn a_gone_app_plans_nothing_once_its_child_is_gone() {
    let plan = reconcile(vec![]);
    assert!(plan.writes.is_empty() && plan.events.is_empty());
}

#[test]
fn a_gone_or_unselected_app_deletes_the_child_it_left_and_writes_nothing_else() {
    // The clean-up snapshot holds the children the App controlled (by its
    // last state), not the App: whichever way it left, the child goes.
    let last = app("hello", 1);
    let child = its_child().controlled_by(&app_gvk(), &last);
    let world = World::new(&manifest())
        .with(child)
        .with(settings(NS, None))
        .gone(last);
    let request = world
        .request(APP_WATCH, &format!("{NS}/{NAME}"))
        .expect("declared");
    assert_eq!(request.presence, Some(Presence::Gone));
    for presence in [Presence::Gone, Presence::Unselected] {
        let request = request.clone().presence(presence);
        let data = world.snapshot_for(&request).expect("declared");
        let plan = run::reconcile::<AppController>(&Environment::test("wasmctrl"), &request, data)
            .expect("reconcile succeeds");
        assert!(
            matches!(plan.writes.as_slice(), [Write::Delete(t)] if t.name == NAME && t.kind == "ConfigMap"),
            "{presence:?}: {:?}",
            plan.writes
        );
    }
}

#[test]
fn manifest_relates_children_to_their_owner_and_settings_to_their_namespace() {
    let env = Environment::test("wasmctrl");
    let m = run::describe::<AppController>(&env).expect("describes");
    assert_eq!(m, manifest());
    let [apps, children, settings] = m.watches.as_slice() else {
        panic!("three watches: {:?}", m.watches);
    };
    assert_eq!(apps.keys, KeyMapping::PerObject);
    assert_eq!(apps.finalizer.as_deref(), Some(FINALIZER));
    assert_eq!(children.keys, KeyMapping::Owner(APP_WATCH.into()));
    assert_eq!(children.gvk, configmap_gvk());
    assert_eq!(settings.keys, KeyMapping::SameNamespace(APP_WATCH.into()));
    assert_eq!(
        settings.field_selector.as_deref(),
        Some("metadata.name=shared-settings")
    );
    let rules: Vec<_> = m.writes.iter().map(|w| (&w.gvk, w.status)).collect();
    assert_eq!(rules, [(&configmap_gvk(), false), (&app_gvk(), true)]);
    let err = run::describe::<AppController>(&env.config("banner", "x")).unwrap_err();
    assert!(err.contains("\"banner\""), "{err}");
}

#[test]
fn crd_yaml_declares_what_the_manifest_reads_and_writes() {
    let crd: serde_yaml::Value =
        serde_yaml::from_str(include_str!("../crd.yaml")).expect("crd.yaml parses");
    let gvk = app_gvk();
    assert_eq!(
        crd["metadata"]["name"].as_str(),
        Some("apps.apps.example.com")
    );
    assert_eq!(crd["spec"]["group"].as_str(), Some(gvk.group.as_str()));
    assert_eq!(
        crd["spec"]["names"]["kind"].as_str(),
        Some(gvk.kind.as_str())
    );
    assert_eq!(crd["spec"]["names"]["plural"].as_str(), Some("apps"));
    assert_eq!(crd["spec"]["scope"].as_str(), Some("Namespaced"));
    let version = &crd["spec"]["versions"][0];
    assert_eq!(version["name"].as_str(), Some(gvk.version.as_str()));
    assert!(
        version["subresources"]["status"].is_mapping(),
        "status subresource"
    );
    let props = &version["schema"]["openAPIV3Schema"]["properties"];
    let spec = &props["spec"]["properties"];
    assert_eq!(spec["message"]["type"].as_str(), Some("string"));
    assert_eq!(spec["replicas"]["type"].as_str(), Some("integer"));
    let status = &props["status"]["properties"];
    assert_eq!(
        status["observedGeneration"]["type"].as_str(),
        Some("integer")
    );
    let conditions = &status["conditions"];
    assert_eq!(conditions["x-kubernetes-list-type"].as_str(), Some("map"));
    let item = &conditions["items"]["properties"];
    for path in condition_paths("status.conditions") {
        let field = path.rsplit('.').next().unwrap_or_default();
        assert!(item[field].is_mapping(), "{path}");
    }
}

#[test]
fn sample_yaml_holds_an_app_its_child_and_shared_settings() {
    let docs: Vec<serde_yaml::Value> =
        serde_yaml::Deserializer::from_str(include_str!("../sample.yaml"))
            .map(|d| serde::Deserialize::deserialize(d).expect("sample.yaml parses"))
            .collect();
    let kinds: Vec<_> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(kinds, ["App", "ConfigMap", "ConfigMap"]);
    let app_uid = docs[0]["metadata"]["uid"].as_str();
    let owner = &docs[1]["metadata"]["ownerReferences"][0];
    assert_eq!(owner["uid"].as_str(), app_uid, "the child is the App's");
    assert_eq!(docs[2]["metadata"]["name"].as_str(), Some(SHARED_SETTINGS));
}

/// The world of two namespaces the relation tests share: Apps `web` and
/// `api` in team-a, `web` in team-b, each with its child; both
/// namespaces' shared settings.
fn relations_world() -> World {
    let apps = [(NS, NAME), (NS, "api"), ("team-b", NAME)];
    let mut world = World::new(&manifest());
    for (ns, name) in apps {
        let app = Obj::new(APP_WATCH, ns, name);
        let child = Obj::new(CHILD_WATCH, ns, name).controlled_by(&app_gvk(), &app);
        world = world.with(app).with(child);
    }
    world
        .with(settings(NS, Some("a")))
        .with(settings("team-b", Some("b")))
}

fn woken(world: &World, object: &Obj) -> Vec<String> {
    let requests = world.wakes(object).expect("the watch is declared");
    requests.into_iter().map(|r| r.key).collect()
}

// ANCHOR: wakes
#[test]
fn a_child_edit_wakes_its_owner() {
    let world = relations_world();
    let owner = Obj::new(APP_WATCH, NS, "api");
    let edited = Obj::new(CHILD_WATCH, NS, "api").controlled_by(&app_gvk(), &owner);
    assert_eq!(woken(&world, &edited), ["team-a/api"]);
    // A ConfigMap nobody controls, or one another kind controls, wakes no App.
    assert!(woken(&world, &Obj::new(CHILD_WATCH, NS, "loose")).is_empty());
    let foreign = Obj::new(CHILD_WATCH, NS, "x").controlled_by(&configmap_gvk(), &owner);
    assert!(woken(&world, &foreign).is_empty());
}
// ANCHOR_END: wakes

#[test]
fn a_shared_settings_change_wakes_every_app_of_its_namespace() {
    let world = relations_world();
    assert_eq!(
        woken(&world, &settings(NS, Some("new"))),
        ["team-a/api", "team-a/web"]
    );
    assert_eq!(woken(&world, &settings("team-b", None)), ["team-b/web"]);
    assert!(woken(&world, &settings("team-c", Some("x"))).is_empty());
}

#[test]
fn an_app_s_snapshot_holds_its_own_child_and_its_namespace_s_settings_only() {
    let world = relations_world();
    let request = Request::object(APP_WATCH, &format!("{NS}/{NAME}"));
    let held: Vec<String> = world
        .objects_for(&request)
        .expect("declared watches")
        .iter()
        .map(|o| format!("{}:{}", o.watch(), o.key()))
        .collect();
    assert_eq!(
        held,
        [
            "apps:team-a/web",
            "children:team-a/web",
            "settings:team-a/shared-settings"
        ]
    );
    // Reconciled over that snapshot: the child exists, the banner is team-a's.
    let data = world.snapshot_for(&request).expect("declared watches");
    let env = Environment::test("wasmctrl").now_ms(NOW);
    let plan = run::reconcile::<AppController>(&env, &request, data).expect("reconciles");
    let (child, status) = child_and_status(&plan);
    assert_eq!(child["data"]["banner"], "a");
    assert_eq!(ready(&status)["status"], "True");
}
