"""The component boundary: export() against the bindings componentize-py
generates from the contract (its `bindings` command, into a temporary
directory), converting records both ways. Without componentize-py the tests
are skipped, but under CI=1 a missing tool fails them."""

import importlib
import os
import shutil
import subprocess
import sys

import pytest

import wasmctrl
from wasmctrl import Environment, GroupVersionKind, Manifest, Plan, Retryable, Watch, WriteRule, document, log
from wasmctrl.component import export
from wasmctrl.guest import Guest
from wasmctrl.testing import Obj, World

APP = GroupVersionKind("apps.example.com", "v1", "App")


@pytest.fixture(scope="module")
def bindings(tmp_path_factory):
    tool = shutil.which("componentize-py")
    if tool is None:
        if os.environ.get("CI"):
            pytest.fail("componentize-py is not on PATH (make toolchains installs it)")
        pytest.skip("componentize-py is not on PATH (make toolchains installs it)")
    out = tmp_path_factory.mktemp("bindings")
    subprocess.run([tool, "-d", wasmctrl.wit_dir(), "-w", "controller", "bindings", str(out)], check=True)
    sys.path.insert(0, str(out))
    yield importlib.import_module("wit_world.imports.types")
    sys.path.remove(str(out))


class Toy(Guest):
    def describe(self, env):
        env.settings(["fail"])
        apps = Watch("apps", APP).with_fields(["spec.a"]).index("a", "spec.a").per_object().with_finalizer("x.io/f")
        maps = Watch("maps", GroupVersionKind.core("ConfigMap")).by_index_same_namespace("apps", "a", "metadata.name")
        return Manifest("toy").watch(apps).watch(maps).write(WriteRule(APP).with_status()).resync(30)

    def fields(self, env, schema):
        return schema.watch("apps").field("spec.a")

    def reconcile(self, env, request, snapshot, field):
        if dict(env.config).get("fail"):
            raise Retryable("not yet")
        log.info(f"reconciling {request.key}")
        obj = snapshot.primary(request)
        return (Plan().apply(document(APP.object(obj.namespace, obj.name), {"spec": {"a": obj.value(field)}}))
                .delete(obj.object_ref()).remove_finalizer(obj.object_ref(), "x.io/f").requeue_after(5))


def wit_snapshot(t, data):
    fields = {k: v for k, v in vars(data).items() if k != "indexes"}
    indexes = [t.Index(w, name, [t.Bucket(k, objs) for k, objs in buckets]) for w, name, buckets in data.indexes]
    return t.Snapshot(**fields, indexes=indexes)


def test_describe_converts_the_manifest_to_the_contract_s_records(bindings):
    t = bindings
    r = export(Toy())()
    m = r.describe(t.Environment("ops", [], 0))
    assert m.name == "toy" and m.resync_seconds == 30
    apps, maps = m.watches
    assert apps.keys == t.KeyMapping_PerObject() and apps.finalizer == "x.io/f"
    assert apps.indexes == [t.IndexSpec("a", "spec.a")]
    assert maps.keys == t.KeyMapping_ByIndex(t.IndexLink("same-namespace:apps", "a", "metadata.name"))
    assert m.writes == [t.WriteRule(t.GroupVersionKind("apps.example.com", "v1", "App"), None, [], True)]
    err = importlib.import_module("componentize_py_types").Err
    with pytest.raises(err, match="unknown configuration key"):
        r.describe(t.Environment("ops", [("bad", "1")], 0))


def test_reconcile_reads_the_contract_s_snapshot_and_returns_its_plan(bindings, monkeypatch):
    t = bindings
    lines = []
    monkeypatch.setattr(log, "_sink", lambda level, message: lines.append((level, message)))
    r = export(Toy())()
    monkeypatch.setattr(log, "_sink", lambda level, message: lines.append((level, message)))
    m = Toy().describe(Environment.test("ops"))
    data = World(m, [Obj("apps", "ns", "a").set("spec.a", "v")]).snapshot()
    request = t.Request("ns/a", "apps", t.Presence.PRESENT)
    plan = r.reconcile(t.Environment("ops", [], 0), request, wit_snapshot(t, data))
    ref = t.ObjectRef("apps.example.com/v1", "App", "ns", "a")
    assert plan == t.Plan(
        [t.Write_Apply('{"apiVersion":"apps.example.com/v1","kind":"App","metadata":{"name":"a","namespace":"ns"},'
                       '"spec":{"a":"v"}}'),
         t.Write_Delete(ref), t.Write_RemoveFinalizer(t.FinalizerRef(ref, "x.io/f"))], [], 5)
    assert lines == [("info", "reconciling ns/a")]
    err = importlib.import_module("componentize_py_types").Err
    with pytest.raises(err) as failed:
        r.reconcile(t.Environment("ops", [("fail", "1")], 0), request, wit_snapshot(t, data))
    assert failed.value.value == t.ReconcileError_Retryable("not yet")
    with pytest.raises(err) as failed:
        r.reconcile(t.Environment("ops", [], 0), t.Request("ns/a", "nope", t.Presence.GONE), wit_snapshot(t, data))
    assert isinstance(failed.value.value, t.ReconcileError_Terminal)
    assert "no watch named 'nope'" in failed.value.value.value
