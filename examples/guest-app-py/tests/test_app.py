"""The App guest end to end, natively on CPython: snapshots built by the
SDK's World, run through the same path as the component's exports, plans
checked as the host would receive them. The same behaviours as the Rust
guest-app's native tests (examples/guest-app/src/tests.rs)."""

import json

import pytest

import app as guest
from app import APP, APP_WATCH, CHILD_WATCH, CONFIGMAP, FINALIZER, SETTINGS_WATCH, SHARED_SETTINGS
from wasmctrl import FINALIZERS, Environment, Presence, Request, WriteKind, condition_paths
from wasmctrl.testing import Obj, World, run

NS, NAME, UID = "team-a", "web", "uid-team-a-web"
NOW = 1_796_096_640_000  # 2026-12-01T03:44:00Z
NOW_TEXT = "2026-12-01T03:44:00Z"
EARLIER = "2026-11-30T00:00:00Z"
CONTROLLER = guest.AppController()


def app(message, replicas):
    """The App team-a/web holding our finalizer."""
    return (Obj(APP_WATCH, NS, NAME).set("spec.message", message).set("spec.replicas", replicas)
            .set_list(FINALIZERS, [FINALIZER]))


def with_ready(obj, status, reason, since, generation):
    t, s, g, l, r, m = condition_paths("status.conditions")
    return (obj.set_list(t, ["Ready"]).set_list(s, [status]).set_list(g, [generation]).set_list(l, [since])
            .set_list(r, [reason]).set_list(m, [f"ConfigMap {NS}/{NAME} is applied"]))


def its_child():
    return Obj(CHILD_WATCH, NS, NAME).with_uid("uid-child")


def settings(namespace, banner):
    return Obj(SETTINGS_WATCH, namespace, SHARED_SETTINGS).set("data.banner", banner)


# ANCHOR: run
def reconcile(objects):
    data = World(guest.manifest(), objects).snapshot()
    env = Environment.test("wasmctrl").at(NOW)
    return run.reconcile(CONTROLLER, env, Request.object(APP_WATCH, f"{NS}/{NAME}"), data)
# ANCHOR_END: run


def child_and_status(plan):
    kinds = [w.kind for w in plan.writes]
    assert kinds == [WriteKind.APPLY, WriteKind.APPLY_STATUS], plan.writes
    child, status = (json.loads(w.document) for w in plan.writes)
    assert status["apiVersion"] == "apps.example.com/v1"
    assert status["kind"] == "App"
    assert status["metadata"] == {"name": NAME, "namespace": NS}
    return child, status["status"]


def ready(status):
    conditions = status["conditions"]
    assert len(conditions) == 1, status
    assert conditions[0]["type"] == "Ready"
    return conditions[0]


def test_a_new_app_gets_a_child_controlled_by_it_and_ready_false_until_it_exists():
    plan = reconcile([app("hello", 2)])
    child, status = child_and_status(plan)
    assert child == {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": NAME, "namespace": NS, "ownerReferences": [{
            "apiVersion": "apps.example.com/v1", "kind": "App", "name": NAME, "uid": UID,
            "controller": True, "blockOwnerDeletion": True}]},
        "data": {"message": "hello", "replicas": "2"},
    }
    # Byte for byte what the Rust guest writes (serde_json's compact form).
    assert plan.writes[0].document.startswith('{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web"')
    assert status["observedGeneration"] == 1
    c = ready(status)
    assert (c["status"], c["reason"], c["observedGeneration"]) == ("False", "ChildMissing", 1)
    assert c["lastTransitionTime"] == NOW_TEXT

    was = with_ready(app("hello", 2), "False", "ChildMissing", EARLIER, 1)
    _, status = child_and_status(reconcile([was, its_child()]))
    c = ready(status)
    assert (c["status"], c["reason"]) == ("True", "ChildReady")
    assert c["lastTransitionTime"] == NOW_TEXT


def test_a_spec_change_is_mirrored_in_the_child_and_observed_in_status():
    edited = with_ready(app("bye", 5).with_generation(4), "True", "ChildReady", EARLIER, 3)
    child, status = child_and_status(reconcile([edited, its_child()]))
    assert child["data"] == {"message": "bye", "replicas": "5"}
    assert status["observedGeneration"] == 4
    c = ready(status)
    assert c["observedGeneration"] == 4
    assert c["lastTransitionTime"] == EARLIER, "Ready did not flip"


def test_an_unchanged_world_plans_exactly_the_state_it_already_has():
    def world():
        return [with_ready(app("hello", 2), "True", "ChildReady", EARLIER, 1), its_child(), settings(NS, "hi")]
    first, again = reconcile(world()), reconcile(world())
    assert first.writes == again.writes
    assert not first.events and first.requeue_after_ms is None
    child, status = child_and_status(first)
    assert child["data"] == {"banner": "hi", "message": "hello", "replicas": "2"}
    assert status == {"observedGeneration": 1, "conditions": [{
        "type": "Ready", "status": "True", "observedGeneration": 1, "lastTransitionTime": EARLIER,
        "reason": "ChildReady", "message": f"ConfigMap {NS}/{NAME} is applied"}]}


@pytest.mark.parametrize("was,reason,exists,want", [
    ("True", "ChildReady", True, EARLIER),  # still ready
    ("False", "ChildMissing", False, EARLIER),  # still missing
    ("False", "ChildMissing", True, NOW_TEXT),  # child appears
    ("True", "ChildReady", False, NOW_TEXT),  # child deleted
])
def test_ready_keeps_its_transition_time_unless_its_status_flips(was, reason, exists, want):
    objects = [with_ready(app("m", 1), was, reason, EARLIER, 1)] + ([its_child()] if exists else [])
    _, status = child_and_status(reconcile(objects))
    assert ready(status)["lastTransitionTime"] == want


@pytest.mark.parametrize("extra,want", [
    ([settings(NS, "maintenance at 5")], "maintenance at 5"),
    ([settings(NS, "")], ""),
    ([settings(NS, None)], None),  # settings without a banner
    ([], None),  # no settings
    ([settings("team-b", "x")], None),  # another namespace's
])
def test_the_banner_of_shared_settings_is_copied_and_absent_means_no_key(extra, want):
    child, _ = child_and_status(reconcile([app("m", 1), its_child(), *extra]))
    assert child["data"].get("banner") == want
    assert child["data"]["message"] == "m"


def test_a_deleting_app_with_its_child_deletes_the_child_and_keeps_the_finalizer():
    deleting = app("m", 1).deleting("2026-12-01T03:40:00Z")
    plan = reconcile([deleting, its_child()])
    assert [(w.kind, w.target) for w in plan.writes] == [(WriteKind.DELETE, CONFIGMAP.object(NS, NAME))]
    assert not plan.events
    plan = reconcile([deleting.set_list(FINALIZERS, ["other.io/x"]), its_child()])
    assert [w.kind for w in plan.writes] == [WriteKind.DELETE]


def test_a_deleting_app_without_a_child_releases_the_finalizer_and_nothing_else():
    deleting = app("m", 1).deleting("2026-12-01T03:40:00Z")
    plan = reconcile([deleting, settings(NS, "b")])
    assert [(w.kind, w.target, w.finalizer) for w in plan.writes] == [
        (WriteKind.REMOVE_FINALIZER, APP.object(NS, NAME), FINALIZER)]
    plan = reconcile([deleting.set_list(FINALIZERS, ["other.io/x"])])
    assert plan.writes == []


def test_a_gone_app_plans_nothing_once_its_child_is_gone():
    plan = reconcile([])
    assert plan.writes == [] and plan.events == []


@pytest.mark.parametrize("presence", [Presence.GONE, Presence.UNSELECTED])
def test_a_gone_or_unselected_app_deletes_the_child_it_left_and_writes_nothing_else(presence):
    last = app("hello", 1)
    child = its_child().controlled_by(APP, last)
    world = World(guest.manifest(), [child, settings(NS, None)]).gone(last)
    request = world.request(APP_WATCH, f"{NS}/{NAME}")
    assert request.presence is Presence.GONE
    request = Request.object(APP_WATCH, request.key, presence)
    plan = run.reconcile(CONTROLLER, Environment.test("wasmctrl"), request, world.snapshot_for(request))
    assert [(w.kind, w.target.kind, w.target.name) for w in plan.writes] == [(WriteKind.DELETE, "ConfigMap", NAME)]


def test_manifest_relates_children_to_their_owner_and_settings_to_their_namespace():
    env = Environment.test("wasmctrl")
    m = run.describe(CONTROLLER, env)
    assert m == guest.manifest()
    apps, children, shared = m.watches
    assert apps.keys.kind == "per-object"
    assert apps.finalizer == FINALIZER
    assert (children.keys.kind, children.keys.value, children.gvk) == ("owner", APP_WATCH, CONFIGMAP)
    assert (shared.keys.kind, shared.keys.value) == ("same-namespace", APP_WATCH)
    assert shared.field_selector == "metadata.name=shared-settings"
    assert [(w.gvk, w.status) for w in m.writes] == [(CONFIGMAP, False), (APP, True)]
    with pytest.raises(Exception, match="'banner'"):
        run.describe(CONTROLLER, env.with_config("banner", "x"))


def relations_world():
    world = World(guest.manifest())
    for ns, name in [(NS, NAME), (NS, "api"), ("team-b", NAME)]:
        owner = Obj(APP_WATCH, ns, name)
        world = world.add(owner, Obj(CHILD_WATCH, ns, name).controlled_by(APP, owner))
    return world.add(settings(NS, "a"), settings("team-b", "b"))


def woken(world, obj):
    return [r.key for r in world.wakes(obj)]


# ANCHOR: wakes
def test_a_child_edit_wakes_its_owner():
    world = relations_world()
    owner = Obj(APP_WATCH, NS, "api")
    assert woken(world, Obj(CHILD_WATCH, NS, "api").controlled_by(APP, owner)) == ["team-a/api"]
    assert woken(world, Obj(CHILD_WATCH, NS, "loose")) == []
    assert woken(world, Obj(CHILD_WATCH, NS, "x").controlled_by(CONFIGMAP, owner)) == []
# ANCHOR_END: wakes


def test_a_shared_settings_change_wakes_every_app_of_its_namespace():
    world = relations_world()
    assert woken(world, settings(NS, "new")) == ["team-a/api", "team-a/web"]
    assert woken(world, settings("team-b", None)) == ["team-b/web"]
    assert woken(world, settings("team-c", "x")) == []


def test_an_app_s_snapshot_holds_its_own_child_and_its_namespace_s_settings_only():
    world = relations_world()
    request = Request.object(APP_WATCH, f"{NS}/{NAME}")
    held = [f"{o.watch}:{o.key}" for o in world.objects_for(request)]
    assert held == ["apps:team-a/web", "children:team-a/web", "settings:team-a/shared-settings"]
    env = Environment.test("wasmctrl").at(NOW)
    child, status = child_and_status(run.reconcile(CONTROLLER, env, request, world.snapshot_for(request)))
    assert child["data"]["banner"] == "a"
    assert ready(status)["status"] == "True"
