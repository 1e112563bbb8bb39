"""The component boundary: :func:`export` turns a :class:`Guest` into the
``Reconciler`` class componentize-py exports, converting the contract's
records (the bindings componentize-py generates from ``wit/``, module
``wit_world``) to this SDK's types and back, and routes :mod:`wasmctrl.log`
to the ``log`` import. It imports the bindings only when called, so the
rest of the SDK runs on plain CPython; it never catches a guest's own
exception (the host reports its traceback).

In the guest's app module (``componentize-py ... componentize app``)::

    Reconciler = wasmctrl.component.export(MyGuest())
"""

from __future__ import annotations

import importlib
from typing import Any

from . import guest as run
from . import log
from .guest import DescribeError, Guest
from .manifest import KeyMapping, Manifest, ObjectRef
from .plan import Plan, WriteKind
from .snapshot import SnapshotData
from .types import Environment, Presence, ReconcileError, Request

_KEYS = {
    "per-object": "KeyMapping_PerObject", "aggregate": "KeyMapping_Aggregate",
    "none": "KeyMapping_None_", "owner": "KeyMapping_Owner",
    "same-namespace": "KeyMapping_SameNamespace", "by-index": "KeyMapping_ByIndex",
    "all": "KeyMapping_All",
}
_WRITES = {
    WriteKind.APPLY: "Write_Apply", WriteKind.UPDATE: "Write_Update",
    WriteKind.APPLY_STATUS: "Write_ApplyStatus", WriteKind.DELETE: "Write_Delete",
    WriteKind.ADD_FINALIZER: "Write_AddFinalizer", WriteKind.REMOVE_FINALIZER: "Write_RemoveFinalizer",
}


class Bindings:
    """The generated bindings' modules, looked up by name."""

    def __init__(self, package: str = "wit_world"):
        self.types = importlib.import_module(f"{package}.imports.types")
        self.log = importlib.import_module(f"{package}.imports.log")
        self.exports = importlib.import_module(f"{package}.exports")
        self.err = importlib.import_module("componentize_py_types").Err

    def environment(self, env: Any) -> Environment:
        return Environment(env.namespace, tuple((k, v) for k, v in env.config), env.now_ms)

    def request(self, r: Any) -> Request:
        presence = None if r.presence is None else Presence(r.presence.name.lower())
        return Request(r.key, r.watch, presence)

    def gvk(self, g: Any) -> Any:
        return self.types.GroupVersionKind(g.group, g.version, g.kind)

    def keys(self, k: KeyMapping) -> Any:
        cls = getattr(self.types, _KEYS[k.kind])
        if k.kind == "by-index":
            link = k.value
            return cls(self.types.IndexLink(link.primary, link.index, link.field))
        return cls() if k.value is None and k.kind in ("per-object", "none") else cls(k.value)

    def manifest(self, m: Manifest) -> Any:
        t = self.types
        watches = [
            t.Watch(w.name, self.gvk(w.gvk), w.plural, w.namespace, w.label_selector, w.field_selector,
                    list(w.fields), [t.IndexSpec(i.name, i.field) for i in w.indexes], self.keys(w.keys),
                    w.finalizer)
            for w in m.watches
        ]
        writes = [t.WriteRule(self.gvk(r.gvk), r.namespace, list(r.names), r.status) for r in m.writes]
        return t.Manifest(m.name, watches, writes, m.resync_seconds)

    def object_ref(self, r: ObjectRef) -> Any:
        return self.types.ObjectRef(r.api_version, r.kind, r.namespace, r.name)

    def plan(self, p: Plan) -> Any:
        t = self.types
        writes = []
        for w in p.writes:
            cls = getattr(t, _WRITES[w.kind])
            if w.document is not None:
                writes.append(cls(w.document))
            elif w.finalizer is not None and w.target is not None:
                writes.append(cls(t.FinalizerRef(self.object_ref(w.target), w.finalizer)))
            elif w.target is not None:
                writes.append(cls(self.object_ref(w.target)))
        events = [
            t.Event(self.object_ref(e.regarding), None if e.related is None else self.object_ref(e.related),
                    t.EventType.WARNING if e.warning else t.EventType.NORMAL, e.reason, e.action, e.message)
            for e in p.events
        ]
        return t.Plan(writes, events, p.requeue_after_ms)

    def error(self, e: ReconcileError) -> Any:
        cls = self.types.ReconcileError_Retryable if e.retryable else self.types.ReconcileError_Terminal
        return self.err(cls(str(e)))

    def write_log(self, level: str, message: str) -> None:
        self.log.log(getattr(self.log.Level, level.upper()), message)


def export(guest: Guest[Any], package: str = "wit_world") -> type:
    """The ``Reconciler`` class for the component's exports, running
    ``guest`` through the same path native tests take."""
    b = Bindings(package)
    log._sink = b.write_log

    class Reconciler(b.exports.Reconciler):  # type: ignore[name-defined,misc]
        def describe(self, env: Any) -> Any:
            try:
                return b.manifest(run.describe(guest, b.environment(env)))
            except DescribeError as e:
                raise b.err(str(e)) from e

        def reconcile(self, env: Any, request: Any, snapshot: Any) -> Any:
            try:
                plan = run.reconcile(guest, b.environment(env), b.request(request), SnapshotData.from_wit(snapshot))
            except ReconcileError as e:
                raise b.error(e) from e
            return b.plan(plan)

    return Reconciler
