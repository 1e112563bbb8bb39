"""The App guest in Python: the same controller as ``examples/guest-app``
(Rust), written with the wasmctrl Python SDK.

An ``App`` (``apps.example.com/v1``, see ``examples/guest-app/crd.yaml``)
sets ``spec.message`` and ``spec.replicas``. For each App this guest
applies one child ConfigMap of the same name and namespace, controlled by
the App, whose ``data`` holds ``message``, ``replicas`` and the ``banner``
of the namespace's ``shared-settings`` ConfigMap; and it writes the App's
``status.observedGeneration`` and a ``Ready`` condition. A change to a child
wakes its owner (``owner``), a change to ``shared-settings`` wakes every App
of its namespace (``same-namespace``). The host holds the finalizer
``apps.example.com/cleanup`` on every App; when an App is deleted this
guest deletes its child explicitly and releases the finalizer only once the
child is gone. This file is the glue (manifest, views, plan); the decision
is ``decision.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import decision
from wasmctrl import (
    FINALIZERS, Deleting, Environment, Gone, Guest, GroupVersionKind, Live, Manifest, Plan, Request,
    Resolved, Schema, Snapshot, Unselected, View, Watch, WatchSchema, WriteRule, conditions,
    controller_ref, document, lifecycle, path,
)
from wasmctrl.component import export

GUEST_NAME = "app"
FINALIZER = "apps.example.com/cleanup"
APP_WATCH, CHILD_WATCH, SETTINGS_WATCH = "apps", "children", "settings"
SHARED_SETTINGS = "shared-settings"
APP = GroupVersionKind("apps.example.com", "v1", "App")
CONFIGMAP = GroupVersionKind.core("ConfigMap")


# ANCHOR: views
class App(View):
    """An App, as this guest reads it."""

    message = path("spec.message", str)
    replicas = path("spec.replicas", int)
    conditions = conditions("status.conditions")


class SharedSettings(View):
    """A namespace's ``shared-settings`` ConfigMap."""

    banner = path("data.banner", str)
# ANCHOR_END: views


# ANCHOR: manifest
def manifest() -> Manifest:
    """Apps (per object, finalizer), the ConfigMaps they control, each
    namespace's ``shared-settings``; writes: ConfigMaps and App status."""
    apps = Watch(APP_WATCH, APP).with_fields(App.FIELDS, FINALIZERS).per_object().with_finalizer(FINALIZER)
    # Nothing of a child is read: the host skips a write that changes nothing.
    children = Watch(CHILD_WATCH, CONFIGMAP).owner(APP_WATCH)
    settings = (
        Watch(SETTINGS_WATCH, CONFIGMAP)
        .with_field_selector(f"metadata.name={SHARED_SETTINGS}")
        .with_fields(SharedSettings.FIELDS)
        .same_namespace(APP_WATCH)
    )
    return (
        Manifest(GUEST_NAME).watch(apps).watch(children).watch(settings)
        .write(WriteRule(CONFIGMAP)).write(WriteRule(APP).with_status())
    )
# ANCHOR_END: manifest


@dataclass(frozen=True)
class Fields:
    apps: Resolved[App]
    children: WatchSchema
    settings: Resolved[SharedSettings]


# ANCHOR: guest
class AppController(Guest[Fields]):
    def describe(self, env: Environment) -> Manifest:
        env.settings([])
        return manifest()

    def fields(self, env: Environment, schema: Schema) -> Fields:
        return Fields(
            App.resolve(schema.watch(APP_WATCH)),
            schema.watch(CHILD_WATCH),
            SharedSettings.resolve(schema.watch(SETTINGS_WATCH)),
        )

    def reconcile(self, env: Environment, request: Request, snapshot: Snapshot, f: Fields) -> Plan:
        plan = Plan()
        state = lifecycle(snapshot, request)
        if isinstance(state, (Gone, Unselected)):
            # The snapshot still holds the ConfigMaps it controlled.
            return plan.delete_all(snapshot.objects(f.children))
        if isinstance(state, Deleting):
            return state.delete_then_release(snapshot.objects(f.children), plan)
        assert isinstance(state, Live)
        obj = state.object
        app = f.apps.read(obj)
        namespace, name = obj.namespace, obj.name
        settings = snapshot.get(f.settings.watch, namespace, SHARED_SETTINGS)
        banner = None if settings is None else f.settings.read(settings).banner
        child = CONFIGMAP.object(namespace, name)
        data = decision.child_data(app.message, app.replicas, banner)
        plan.apply(document(child, {"data": data}).owned_by(controller_ref(obj)))
        exists = snapshot.get(f.children, namespace, name) is not None
        status = decision.status(obj.generation, f"{namespace}/{name}", exists, app.conditions, env.now_ms)
        return plan.status(obj.object_ref(), status)
# ANCHOR_END: guest


# ANCHOR: export
def __getattr__(name: str) -> type:
    # componentize-py looks the export class up by name; built lazily so that
    # importing this module on CPython needs no bindings.
    if name == "Reconciler":
        return export(AppController())
    raise AttributeError(name)
# ANCHOR_END: export
