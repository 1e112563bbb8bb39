"""The relation agreement table (``wit/agreement/relations.json``, described
in ``wit/agreement/README.md``) read into this SDK's test types, and the
answers this SDK's :class:`~wasmctrl.testing.World` gives to its questions:
which keys each change wakes, which objects each key's snapshot holds, and
what a departed primary's snapshot holds. The host, the Rust SDK and the
TypeScript SDK answer the same table; each asserts its answers equal the
table's. Reading only; nothing here knows the file's location.
"""

from __future__ import annotations

from typing import Any, Optional

from ..manifest import GroupVersionKind, IndexLink, IndexSpec, KeyMapping, Manifest, Watch
from ..owner import OwnerReference
from ..types import Presence, Request
from . import Obj, World


def manifest(table: dict[str, Any]) -> Manifest:
    """The manifest the table's objects are watched through."""
    m = Manifest(table["manifest"]["name"])
    for w in table["manifest"]["watches"]:
        keys = w["keys"]
        if isinstance(keys, str):
            mapping = KeyMapping(keys)
        else:
            (kind, value), = keys.items()
            mapping = KeyMapping(kind, IndexLink(**value) if kind == "by-index" else value)
        watch = Watch(w["name"], GroupVersionKind(**w["gvk"]), fields=list(w.get("fields", [])),
                      indexes=[IndexSpec(**i) for i in w.get("indexes", [])], keys=mapping)
        m = m.watch(watch)
    return m


def obj(case: dict[str, Any]) -> Obj:
    """A table object as this SDK's test object."""
    uid = case.get("uid") or f"uid-{case['watch']}-{case['namespace']}-{case['name']}"
    o = Obj(case["watch"], case["namespace"], case["name"]).with_uid(uid)
    for path, value in case.get("fields", {}).items():
        o = o.set(path, value)
    for k, v in case.get("labels", {}).items():
        o = o.label(k, v)
    c = case.get("controller")
    if c is not None:
        o = o.owner_reference(OwnerReference(c["apiVersion"], c["kind"], c["name"], c["uid"], True))
    return o


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all(a[k] == b[k] for k in ("watch", "namespace", "name"))


def _key(o: Obj) -> str:
    return f"{o.watch}:{o.namespace}/{o.name}"


def _request(key: str) -> Request:
    watch, _, k = key.partition(":")
    return Request.aggregate(k) if watch == "*" else Request.object(watch, k)


def world(table: dict[str, Any], without: Optional[dict[str, Any]] = None) -> World:
    """The table's world, but for ``without``."""
    objects = [obj(c) for c in table["world"] if without is None or not _same(c, without)]
    return World(manifest(table), objects)


def wakes(table: dict[str, Any], change: dict[str, Any]) -> list[str]:
    """The keys ``change`` wakes in this SDK's world, as the table writes them."""
    old = next((c for c in table["world"] if _same(c, change["object"])), None)
    requests = world(table).wakes_edit(None if old is None else obj(old), obj(change["object"]))
    return sorted(f"{r.watch or '*'}:{r.key}" for r in requests)


def holds(table: dict[str, Any], entry: dict[str, Any]) -> list[str]:
    """What ``entry``'s key's snapshot holds over the table's world."""
    return sorted(_key(o) for o in world(table).objects_for(_request(entry["key"])))


def departed(table: dict[str, Any], entry: dict[str, Any]) -> tuple[Optional[Presence], list[str]]:
    """The presence of ``entry``'s key once its primary is deleted, and what
    its snapshot holds then."""
    r = _request(entry["key"])
    gone = next(c for c in table["world"] if c["watch"] == r.watch and obj(c).key == r.key)
    w = world(table, without=gone).gone(obj(gone))
    request = w.request(r.watch or "", r.key)
    return request.presence, sorted(_key(o) for o in w.objects_for(request))
