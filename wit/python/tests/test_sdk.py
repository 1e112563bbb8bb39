"""The SDK on plain CPython: snapshots laid out by the World and read back
by the decoder a component uses, views, the plan's JSON, conditions,
lifecycle, owner references, label selectors, and names checked."""

import json
import math

import pytest

from wasmctrl import (
    FINALIZERS, OWNER_REFERENCES, Condition, Deleting, Environment, Gone, GroupVersionKind, Json, Live,
    Manifest, Plan, Presence, Request, Schema, SchemaError, Snapshot, Terminal, Unselected, View, Watch,
    WriteRule, conditions, controller_owner, controller_ref, document, each, is_condition_true, lifecycle,
    owned_conditions, path, rfc3339, set_condition,
)
from wasmctrl.guest import DescribeError, Guest
from wasmctrl.testing import Obj, World, run

APP = GroupVersionKind("apps.example.com", "v1", "App")
T0 = 1_796_096_640_000  # 2026-12-01T03:44:00Z


def manifest(**watch):
    w = Watch("apps", APP).with_fields(["spec.a", "spec.list[*].x", "data", "metadata.labels['a.b/c']"]).per_object()
    for k, v in watch.items():
        w = getattr(w, k)(*v) if isinstance(v, tuple) else getattr(w, k)(v)
    return Manifest("t").watch(w)


def read(world, key="ns/a"):
    schema = Schema(world.manifest)
    snap = Snapshot(schema, world.snapshot())
    return schema, snap, snap.get(schema.watch("apps"), *key.split("/"))


@pytest.mark.parametrize("value", ["", "plain", "ünïcödé ✓", -1, 0, 2**63 - 1, -(2**63), 1.5, -0.25, True, False,
                                    None, {"k": [1, "x"]}, [1, 2]])
def test_every_value_kind_reads_back_as_it_was_laid_out(value):
    world = World(manifest(), [Obj("apps", "ns", "a").set("spec.a", value).set("spec.list[*].x", None)])
    schema, _, obj = read(world)
    got = obj.value(schema.watch("apps").field("spec.a"))
    if isinstance(value, (dict, list)):
        assert isinstance(got, Json) and got.parse() == value
    else:
        assert got == value and type(got) is type(value)


def test_strings_are_sliced_by_bytes_not_characters():
    objs = [Obj("apps", "ns", f"o{i}").set("spec.a", s) for i, s in enumerate(["é" * 3, "✓x", "", "日本"])]
    world = World(manifest(), objs)
    schema = Schema(world.manifest)
    snap = Snapshot(schema, world.snapshot())
    f = schema.watch("apps").field("spec.a")
    assert [o.value(f) for o in snap.all()] == ["é" * 3, "✓x", "", "日本"]


def test_list_paths_yield_one_value_per_element_and_unset_paths_none_or_nothing():
    world = World(manifest(), [Obj("apps", "ns", "a").set_list("spec.list[*].x", ["p", 2, None])])
    schema, _, obj = read(world)
    w = schema.watch("apps")
    assert obj.values(w.field("spec.list[*].x")) == ["p", 2, None]
    assert obj.values(w.field("spec.a")) == [None]
    _, _, bare = read(World(manifest(), [Obj("apps", "ns", "a")]))
    assert bare.values(w.field("spec.list[*].x")) == []


def test_metadata_paths_are_projected_from_the_object_as_the_host_does():
    world = World(manifest(), [Obj("apps", "ns", "a").label("a.b/c", "v").label("x", "y")])
    schema, _, obj = read(world)
    assert obj.value(schema.watch("apps").field("metadata.labels['a.b/c']")) == "v"
    assert (obj.uid, obj.generation, obj.deletion_timestamp) == ("uid-ns-a", 1, None)


def test_objects_are_sorted_by_watch_namespace_and_name_and_found_by_name():
    m = manifest().watch(Watch("maps", GroupVersionKind.core("ConfigMap")).owner("apps"))
    world = World(m, [Obj("maps", "b", "z"), Obj("apps", "b", "a"), Obj("apps", "a", "b"), Obj("maps", "a", "y")])
    schema = Schema(m)
    snap = Snapshot(schema, world.snapshot())
    assert [(o.watch, o.key) for o in snap.all()] == [(0, "a/b"), (0, "b/a"), (1, "a/y"), (1, "b/z")]
    assert snap.get(schema.watch("maps"), "b", "z").name == "z"
    assert snap.get(schema.watch("maps"), "b", "y") is None
    assert [o.name for o in snap.in_namespace(schema.watch("apps"), "b")] == ["a"]


def test_indexes_bucket_objects_by_each_distinct_string_value():
    m = Manifest("t").watch(Watch("pods", GroupVersionKind.core("Pod")).with_fields(["spec.node"]).index("node", "spec.node"))
    world = World(m, [Obj("pods", "a", "p").set("spec.node", "n1"), Obj("pods", "a", "q").set("spec.node", "n1"),
                      Obj("pods", "b", "r").set("spec.node", "n2"), Obj("pods", "b", "s").set("spec.node", 3)])
    schema = Schema(m)
    snap = Snapshot(schema, world.snapshot())
    index = schema.watch("pods").index("node")
    assert [o.name for o in snap.indexed(index, "n1")] == ["p", "q"]
    assert [o.name for o in snap.indexed(index, "n2")] == ["r"]
    assert snap.indexed(index, "3") == []


def test_unknown_watches_fields_and_indexes_are_errors_naming_them():
    schema = Schema(manifest())
    with pytest.raises(SchemaError, match="no watch named 'pod'"):
        schema.watch("pod")
    with pytest.raises(SchemaError, match="does not project field 'spec.b'"):
        schema.watch("apps").field("spec.b")
    with pytest.raises(SchemaError, match="no index named 'x'"):
        schema.watch("apps").index("x")
    with pytest.raises(SchemaError, match="'spec.nope'"):
        World(manifest(), [Obj("apps", "ns", "a").set("spec.nope", 1)]).snapshot()


class Typed(View):
    text = path("spec.a", str)
    number = path("spec.a", int)
    flag = path("spec.a", bool)
    data = path("data", dict)
    xs = each("spec.list[*].x", str)
    conds = conditions("status.conditions")


def test_a_view_names_its_paths_once_and_reads_other_types_as_none():
    assert Typed.FIELDS[:4] == ["spec.a", "spec.a", "spec.a", "data"]
    m = Manifest("t").watch(Watch("apps", APP).with_fields(Typed.FIELDS).per_object())
    assert m.watches[0].fields.count("spec.a") == 1, "listed once in the manifest"
    world = World(m, [Obj("apps", "ns", "a").set("spec.a", 7).set("data", {"k": "v"})
                      .set_list("spec.list[*].x", ["a", 1, "b"])])
    schema, _, obj = read(world)
    v = Typed.resolve(schema.watch("apps")).read(obj)
    assert (v.text, v.number, v.flag, v.data, v.xs, v.conds) == (None, 7, None, {"k": "v"}, ["a", "b"], [])
    with pytest.raises(SchemaError):
        Typed.resolve(Schema(manifest()).watch("apps"))


def test_documents_serialise_as_the_rust_sdk_does():
    target = GroupVersionKind.core("ConfigMap").object("ns", "c")
    doc = document(target, {"data": {"b": "2", "a": "ü"}}).label("z", "1").label("a", "2")
    plan = Plan().apply(doc).status(APP.object("ns", "a"), {"observedGeneration": 1})
    assert plan.writes[0].document == (
        '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ns",'
        '"labels":{"a":"2","z":"1"}},"data":{"b":"2","a":"ü"}}')
    assert plan.writes[1].document == (
        '{"apiVersion":"apps.example.com/v1","kind":"App","metadata":{"name":"a","namespace":"ns"},'
        '"status":{"observedGeneration":1}}')
    cluster = GroupVersionKind.core("Namespace").object("", "n")
    assert json.loads(Plan().apply(document(cluster)).writes[0].document)["metadata"] == {"name": "n"}
    with pytest.raises(ValueError):
        Plan().apply(document(target, {"x": math.nan}))


def test_transition_time_changes_only_with_status():
    assert rfc3339(T0 + 999) == "2026-12-01T03:44:00Z" and rfc3339(0) == "1970-01-01T00:00:00Z"
    cs = []
    assert set_condition(cs, Condition.of("Ready", False, "Wait"), T0)
    assert not set_condition(cs, Condition.of("Ready", False, "Wait"), T0 + 60_000)
    assert cs[0].last_transition_time == "2026-12-01T03:44:00Z"
    assert set_condition(cs, Condition.of("Ready", True, "Ok"), T0 + 60_000)
    assert cs[0].last_transition_time == "2026-12-01T03:45:00Z"
    assert set_condition(cs, Condition.of("Ready", True, "Ok", "new message"), T0 + 120_000)
    assert cs[0].last_transition_time == "2026-12-01T03:45:00Z"
    assert is_condition_true(cs, "Ready") and not is_condition_true(cs, "Synced")
    other = Condition.of("Synced", True, "Ok")
    owned = owned_conditions([other, *cs], Condition.of("Ready", True, "Ok").at_generation(3), T0)
    assert [(c.type, c.observed_generation) for c in owned] == [("Ready", 3)]
    assert list(owned[0].to_json()) == ["type", "status", "observedGeneration", "lastTransitionTime", "reason", "message"]
    assert "observedGeneration" not in cs[0].to_json()


def finalized():
    return manifest(with_fields=[FINALIZERS, OWNER_REFERENCES], with_finalizer="x.io/f")


def test_lifecycle_follows_presence_and_the_finalizer_it_holds():
    m = finalized()
    schema = Schema(m)
    live = Obj("apps", "ns", "a")
    snap = Snapshot(schema, World(m, [live]).snapshot())
    assert isinstance(lifecycle(snap, Request.object("apps", "ns/a")), Live)
    assert isinstance(lifecycle(snap, Request.object("apps", "ns/a", Presence.GONE)), Gone)
    assert isinstance(lifecycle(snap, Request.object("apps", "ns/a", Presence.UNSELECTED)), Unselected)
    assert isinstance(lifecycle(snap, Request.object("apps", "ns/b")), Gone)
    for finalizers, released in [(["x.io/f"], True), (["other"], False)]:
        dying = live.deleting("2026-12-01T00:00:00Z").set_list(FINALIZERS, finalizers)
        snap = Snapshot(schema, World(m, [dying]).snapshot())
        state = lifecycle(snap, Request.object("apps", "ns/a"))
        assert isinstance(state, Deleting) and state.holds_finalizer is released
        writes = state.delete_then_release([], Plan()).writes
        assert [(w.finalizer, w.target.name) for w in writes] == ([("x.io/f", "a")] if released else [])
        child = Snapshot(schema, World(m, [dying, Obj("apps", "ns", "b")]).snapshot()).get(0, "ns", "b")
        assert [w.target.name for w in state.delete_then_release([child], Plan()).writes] == ["b"]


def test_owner_references_round_trip_through_the_projection():
    m = finalized()
    schema = Schema(m)
    owner = Obj("apps", "ns", "a").with_uid("u1")
    snap = Snapshot(schema, World(m, [owner]).snapshot())
    ref = controller_ref(snap.get(0, "ns", "a"))
    assert (ref.api_version, ref.kind, ref.name, ref.uid, ref.controller, ref.block_owner_deletion) == (
        "apps.example.com/v1", "App", "a", "u1", True, True)
    child = Obj("apps", "ns", "c").controlled_by(APP, owner)
    got = controller_owner(Snapshot(schema, World(m, [child]).snapshot()).get(0, "ns", "c"))
    assert got == ref
    assert controller_owner(snap.get(0, "ns", "a")) is None
    with pytest.raises(SchemaError):
        controller_owner(Snapshot(Schema(manifest()), World(manifest(), [owner]).snapshot()).get(0, "ns", "a"))


def test_a_watch_holds_only_what_its_label_selector_admits():
    m = manifest(with_label_selector="tier in (web),!legacy")
    world = World(m, [Obj("apps", "ns", "a").label("tier", "web"), Obj("apps", "ns", "b").label("tier", "db"),
                      Obj("apps", "ns", "c").label("tier", "web").label("legacy", "")])
    assert [o.name for o in world.objects_for(Request.aggregate("all"))] == ["a"]
    assert world.request("apps", "ns/b").presence is Presence.UNSELECTED
    assert world.request("apps", "ns/z").presence is Presence.GONE
    with pytest.raises(SchemaError, match="invalid label selector"):
        World(manifest(with_label_selector="a in (")).snapshot()


class Echo(Guest):
    def describe(self, env):
        env.settings(["mode"])
        return manifest()

    def fields(self, env, schema):
        return schema.watch("apps").field(env.settings(["mode"]).get("mode", "spec.a"))

    def reconcile(self, env, request, snapshot, field):
        obj = snapshot.primary(request)
        return Plan().apply(document(APP.object(obj.namespace, obj.name), {"spec": {"a": obj.value(field)}}))


def test_run_resolves_names_at_describe_and_names_the_guest_on_bad_input():
    env = Environment.test("ops")
    assert run.describe(Echo(), env).name == "t"
    with pytest.raises(DescribeError, match="unknown configuration key 'x'"):
        run.describe(Echo(), env.with_config("x", "1"))
    with pytest.raises(DescribeError, match="guest t: .*'spec.b'"):
        run.describe(Echo(), env.with_config("mode", "spec.b"))
    data = World(manifest(), [Obj("apps", "ns", "a").set("spec.a", "v")]).snapshot()
    plan = run.reconcile(Echo(), env, Request.object("apps", "ns/a"), data)
    assert json.loads(plan.writes[0].document)["spec"] == {"a": "v"}
    with pytest.raises(Terminal, match="guest t: request 'ns/a'.*no watch named 'nope'"):
        run.reconcile(Echo(), env, Request.object("nope", "ns/a"), data)


def test_write_rules_and_manifests_build_without_mutating():
    base = Manifest("t")
    m = base.watch(Watch("a", APP)).write(WriteRule(APP).with_status().with_name("x")).resync(60)
    assert base.watches == [] and base.writes == []
    assert (m.writes[0].status, m.writes[0].names, m.resync_seconds) == (True, ("x",), 60)
    assert Watch("a", APP).by_index_same_namespace("p", "i", "f").keys.value.primary == "same-namespace:p"
