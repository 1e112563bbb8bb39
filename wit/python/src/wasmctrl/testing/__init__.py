"""Native test helpers: objects described by watch and field *name*
(:class:`Obj`), a :class:`World` that lays them out as the host's snapshot
layout does (``wit/controller.wit``) and reads them back through the same
decoder a component uses, evaluates each watch's label selector as the API
server does, and applies the manifest's key mappings as the host does:
which requests a change wakes (:meth:`World.wakes`) and which objects a
request's snapshot holds (:meth:`World.objects_for`). The relation
agreement table (``wit/agreement/relations.json``) holds this model to the
host's (:mod:`wasmctrl.testing.agreement`). For tests only: unknown names
are errors, never silently absent. Field selectors are not evaluated: add
only objects they would admit.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace
from typing import Any, Iterable, Optional

from ..guest import Guest, describe, reconcile
from ..manifest import GroupVersionKind, Manifest
from ..owner import OwnerReference
from ..plan import Plan, to_json
from ..snapshot import ABSENT, BOOL, FLOAT, INT, JSON, STR, Json, Schema, SchemaError, SnapshotData
from ..types import Environment, Presence, Request
from .selector import LabelSelector, SelectorError

__all__ = ["Obj", "World", "run"]


def _steps(rest: str) -> Optional[list[Optional[str]]]:
    """A path tail's steps: a key for ``.key`` or ``['key']``, None for
    ``[*]``; None when it does not parse."""
    out: list[Optional[str]] = []
    while rest:
        if rest.startswith("[*]"):
            out.append(None)
            rest = rest[3:]
        elif rest.startswith("['") or rest.startswith('["'):
            tail = rest[2:]
            ends = [i for i in (tail.find("'"), tail.find('"')) if i >= 0]
            if not ends:
                return None
            end = min(ends)
            out.append(tail[:end])
            if not tail[end + 1 :].startswith("]"):
                return None
            rest = tail[end + 2 :]
        elif rest.startswith("."):
            tail = rest[1:]
            ends = [i for i in (tail.find("."), tail.find("[")) if i >= 0]
            end = min(ends) if ends else len(tail)
            out.append(tail[:end])
            rest = tail[end:]
        else:
            return None
    return out


def _value_of(node: Any) -> Any:
    if node is None or isinstance(node, (str, bool, int, float)):
        return node
    return Json(to_json(node))


def project(node: Any, rest: str) -> list[Any]:
    """The values the path tail ``rest`` yields in ``node``, as the host's
    projection extracts them (one for a path without ``[*]``, one per
    element reached with it)."""
    steps = _steps(rest)
    if steps is None:
        return [None]
    nodes: list[Any] = [node]
    for step in steps:
        if step is None:
            nodes = [e for n in nodes if isinstance(n, list) for e in n]
        else:
            nodes = [n.get(step) if isinstance(n, dict) else None for n in nodes]
    return [_value_of(n) for n in nodes]


@dataclass(frozen=True)
class Obj:
    """One object of a :class:`World`: the object ``namespace/name`` of the
    watch named ``watch``, uid ``uid-<namespace>-<name>``, generation 1, not
    being deleted, every projected field absent unless set."""

    watch: str
    namespace: str
    name: str
    uid: str = ""
    generation: int = 1
    deletion_timestamp: str = ""
    fields: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    owner_references: tuple[OwnerReference, ...] = ()

    def __post_init__(self) -> None:
        if not self.uid:
            object.__setattr__(self, "uid", f"uid-{self.namespace}-{self.name}")

    @property
    def key(self) -> str:
        """``namespace/name`` (``name`` when cluster-scoped)."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def with_uid(self, uid: str) -> "Obj":
        return replace(self, uid=uid)

    def with_generation(self, generation: int) -> "Obj":
        return replace(self, generation=generation)

    def deleting(self, timestamp: str) -> "Obj":
        """Being deleted since ``timestamp`` (RFC 3339)."""
        return replace(self, deletion_timestamp=timestamp)

    def set(self, path: str, value: Any) -> "Obj":
        """The field ``path`` (as the watch's ``fields`` write it) yields
        ``value`` (None for absent; a dict or list is an object or list)."""
        return self.set_list(path, [value])

    def set_list(self, path: str, values: Iterable[Any]) -> "Obj":
        """The field ``path`` (a ``[*]`` path) yields ``values``."""
        vs = tuple(_value_of(v) for v in values)
        rest = tuple((p, v) for p, v in self.fields if p != path)
        return replace(self, fields=(*rest, (path, vs)))

    def label(self, key: str, value: str) -> "Obj":
        """With the label ``key`` = ``value``."""
        rest = tuple((k, v) for k, v in self.labels if k != key)
        return replace(self, labels=(*rest, (key, value)))

    def owner_reference(self, reference: OwnerReference) -> "Obj":
        """With one more owner reference."""
        return replace(self, owner_references=(*self.owner_references, reference))

    def controlled_by(self, gvk: GroupVersionKind, owner: "Obj") -> "Obj":
        """Controlled by ``owner``, an object of type ``gvk``: the reference
        :func:`~wasmctrl.controller_ref` puts on a child."""
        return self.owner_reference(OwnerReference(gvk.api_version, gvk.kind, owner.name, owner.uid, True, True))

    def metadata(self) -> dict[str, Any]:
        """``metadata`` as the API server sends it."""
        meta: dict[str, Any] = {"name": self.name}
        if self.namespace:
            meta["namespace"] = self.namespace
        meta["uid"] = self.uid
        if self.generation:
            meta["generation"] = self.generation
        if self.deletion_timestamp:
            meta["deletionTimestamp"] = self.deletion_timestamp
        if self.labels:
            meta["labels"] = dict(sorted(self.labels))
        if self.owner_references:
            meta["ownerReferences"] = [r.to_json() for r in self.owner_references]
        return meta

    def values(self, path: str) -> Optional[list[Any]]:
        """The values ``path`` yields: as set, else for a ``metadata.`` path
        what the host projects from the metadata; None otherwise."""
        for p, vs in self.fields:
            if p == path:
                return list(vs)
        if path.startswith("metadata"):
            return project(self.metadata(), path[len("metadata"):])
        return None

    def strings(self, path: str) -> list[str]:
        """The distinct string values ``path`` yields, sorted."""
        return sorted({v for v in self.values(path) or [] if isinstance(v, str)})

    def controller(self) -> Optional[OwnerReference]:
        return next((r for r in self.owner_references if r.controller is True), None)


class World:
    """A set of objects for one manifest (see the module's doc)."""

    def __init__(self, manifest: Manifest, objects: Iterable[Obj] = (), gone: Iterable[Obj] = ()):
        self.manifest = manifest
        self.objects = list(objects)
        self.departed = list(gone)
        self._selectors: list[Any] = []
        for w in manifest.watches:
            try:
                self._selectors.append(LabelSelector.parse(w.label_selector) if w.label_selector else None)
            except SelectorError as e:
                self._selectors.append(e)

    def add(self, *objects: Obj) -> "World":
        """This world with ``objects`` too."""
        return World(self.manifest, [*self.objects, *objects], self.departed)

    def gone(self, obj: Obj) -> "World":
        """This world with ``obj`` deleted (as the host last saw it)."""
        return World(self.manifest, self.objects, [*self.departed, obj])

    # --- watches and selectors ---

    def _watch(self, name: str) -> int:
        return Schema(self.manifest).watch(name).id

    def _check_selectors(self) -> None:
        for w, s in zip(self.manifest.watches, self._selectors):
            if isinstance(s, SelectorError):
                raise SchemaError(f"watch {w.name!r} has an invalid label selector: {s}")

    def _selected(self, w: int, o: Obj) -> bool:
        s = self._selectors[w]
        return s is None or (not isinstance(s, SelectorError) and s.matches(dict(o.labels)))

    def _on_server_of(self, w: int) -> list[Obj]:
        name = self.manifest.watches[w].name
        return [o for o in self.objects if o.watch == name]

    def _of(self, w: int) -> list[Obj]:
        return [o for o in self._on_server_of(w) if self._selected(w, o)]

    def _cluster_scoped(self, w: int) -> bool:
        name = self.manifest.watches[w].name
        spaces = [o.namespace for o in [*self.objects, *self.departed] if o.watch == name]
        return bool(spaces) and all(not s for s in spaces)

    def _namespace_of(self, p: int, q: Obj) -> Optional[str]:
        gvk = self.manifest.watches[p].gvk
        if not self._cluster_scoped(p):
            return q.namespace
        if gvk.group == "" and gvk.kind == "Namespace":
            return q.name
        return None

    def _watched(self) -> list[Obj]:
        self._check_selectors()
        return [o for o in self.objects if self._selected(self._watch(o.watch), o)]

    def request(self, watch: str, key: str) -> Request:
        """The request for ``key`` of the primary watch ``watch``, present,
        unselected (on the server, not admitted by the selector) or gone."""
        p = self._watch(watch)
        if any(o.key == key for o in self._of(p)):
            presence = Presence.PRESENT
        elif any(o.key == key for o in self._on_server_of(p)):
            presence = Presence.UNSELECTED
        else:
            presence = Presence.GONE
        return Request.object(watch, key, presence)

    # --- relations, as the host's key mappings ---

    def wakes(self, obj: Obj) -> list[Request]:
        """The requests a change to ``obj`` wakes, sorted, no duplicates."""
        return self.wakes_edit(None, obj)

    def wakes_edit(self, old: Optional[Obj], new: Obj) -> list[Request]:
        """The requests an edit from ``old`` to ``new`` wakes: both versions'."""
        self._check_selectors()
        w = self._watch(new.watch)
        spec = self.manifest.watches[w]
        versions = [v for v in (old, new) if v is not None]
        keys: list[tuple[int, Request]] = []
        k = spec.keys
        if k.kind == "per-object":
            keys.append((w, Request.object(spec.name, new.key)))
        elif k.kind == "aggregate":
            keys.append((len(self.manifest.watches), Request.aggregate(str(k.value))))
        elif k.kind == "owner":
            p = self._watch(str(k.value))
            gvk = self.manifest.watches[p].gvk
            for o in versions:
                ref = o.controller()
                if ref is not None and ref.kind == gvk.kind and ref.api_version.rpartition("/")[0] == gvk.group:
                    ns = "" if self._cluster_scoped(p) else o.namespace
                    keys.append((p, Request.object(str(k.value), Obj(str(k.value), ns, ref.name).key)))
        elif k.kind == "same-namespace":
            p = self._watch(str(k.value))
            for o in versions:
                for q in self._of(p):
                    if self._namespace_of(p, q) == o.namespace:
                        keys.append((p, Request.object(str(k.value), q.key)))
        elif k.kind == "all":
            p = self._watch(str(k.value))
            keys.extend((p, Request.object(str(k.value), q.key)) for q in self._of(p))
        elif k.kind == "by-index":
            link = k.value
            p = self._watch(link.primary_watch)
            index = next((i for i in self.manifest.watches[p].indexes if i.name == link.index), None)
            if index is None:
                return []
            for o in versions:
                for value in o.strings(link.field):
                    for q in self._of(p):
                        if value in q.strings(index.field) and (
                            not link.same_namespace or self._namespace_of(p, q) == o.namespace
                        ):
                            keys.append((p, Request.object(link.primary_watch, q.key)))
        out: list[Request] = []
        for _, r in sorted(keys, key=lambda t: (t[0], t[1].key)):
            if r not in out:
                out.append(r)
        return out

    def objects_for(self, request: Request) -> list[Obj]:
        """The objects ``request``'s snapshot holds, in snapshot order (see
        ``reconcile`` in ``wit/controller.wit``); the request's presence is
        not read (:meth:`request` tells it)."""
        if request.watch is None:
            return self._sorted(self._watched())
        self._check_selectors()
        watch = request.watch
        p = self._watch(watch)
        held = next((o for o in self._of(p) if o.key == request.key), None)
        basis = held or next((o for o in self._on_server_of(p) if o.key == request.key), None)
        if basis is None:
            basis = next((o for o in reversed(self.departed) if o.watch == watch and o.key == request.key), None)
        out = [held] if held else []
        primary_gvk = self.manifest.watches[p].gvk
        for w, spec in enumerate(self.manifest.watches):
            k = spec.keys
            if k.kind == "all" and k.value == watch:
                out += self._of(w)
            elif basis is None:
                continue
            elif k.kind == "owner" and k.value == watch:
                for o in self._of(w):
                    ref = o.controller()
                    if (basis.uid and ref is not None and ref.uid == basis.uid and ref.kind == primary_gvk.kind
                            and ref.api_version.rpartition("/")[0] == primary_gvk.group):
                        out.append(o)
            elif k.kind == "same-namespace" and k.value == watch:
                out += [o for o in self._of(w) if self._namespace_of(p, basis) == o.namespace]
            elif k.kind == "by-index" and k.value.primary_watch == watch:
                link = k.value
                index = next((i for i in self.manifest.watches[p].indexes if i.name == link.index), None)
                values = basis.strings(index.field) if index else []
                for o in self._of(w):
                    if link.same_namespace and self._namespace_of(p, basis) != o.namespace:
                        continue
                    if any(v in values for v in o.strings(link.field)):
                        out.append(o)
        return self._sorted(out)

    def _sorted(self, objects: list[Obj]) -> list[Obj]:
        seen, out = set(), []
        for o in sorted(objects, key=lambda o: (self._watch(o.watch), o.namespace, o.name)):
            if (o.watch, o.namespace, o.name) not in seen:
                seen.add((o.watch, o.namespace, o.name))
                out.append(o)
        return out

    # --- snapshots ---

    def snapshot(self) -> SnapshotData:
        """The snapshot the host would send for an aggregate key: every
        object the watches hold, sorted by watch, namespace and name."""
        return self._build(self._watched())

    def snapshot_for(self, request: Request) -> SnapshotData:
        """The snapshot the host would send for ``request``."""
        return self._build(self.objects_for(request))

    def _build(self, objects: list[Obj]) -> SnapshotData:
        schema = Schema(self.manifest)
        rows = []
        for o in objects:
            watch = schema.watch(o.watch)
            indexed = {i.field for i in watch.spec.indexes}
            for path, _ in o.fields:
                if path not in indexed:
                    watch.field(path)
            rows.append((watch.id, o))
        rows.sort(key=lambda r: (r[0], r[1].namespace, r[1].name))
        b = _Builder()
        d = b.data
        for w, o in rows:
            d.object_watch.append(w)
            d.object_namespace.append(b.string(o.namespace))
            d.object_name.append(b.string(o.name))
            d.object_uid.append(b.string(o.uid))
            d.object_generation.append(o.generation)
            d.object_deletion_timestamp.append(b.string(o.deletion_timestamp))
            d.object_first_slot.append(len(d.slot_ends))
            for path in self.manifest.watches[w].fields:
                values = o.values(path)
                if values is None:
                    values = [] if "[*]" in path else [None]
                for v in values:
                    b.push(v)
                d.slot_ends.append(len(d.value_kinds))
        for w, spec in enumerate(self.manifest.watches):
            for index in spec.indexes:
                buckets: dict[str, list[int]] = {}
                for at, (rw, o) in enumerate(rows):
                    if rw == w:
                        for key in o.strings(index.field):
                            buckets.setdefault(key, []).append(at)
                d.indexes.append((w, index.name, [(b.string(k), buckets[k]) for k in sorted(buckets)]))
        d.strings = "".join(b.parts)
        return d


class _Builder:
    """The snapshot's string table and value columns, as the host fills them."""

    def __init__(self) -> None:
        self.data = SnapshotData()
        self.parts: list[str] = []
        self.ids: dict[str, int] = {}
        self._size = 0
        self.string("")

    def string(self, s: str) -> int:
        if s in self.ids:
            return self.ids[s]
        self.parts.append(s)
        self._size += len(s.encode())
        self.data.string_ends.append(self._size)
        self.ids[s] = len(self.data.string_ends) - 1
        return self.ids[s]

    def push(self, v: Any) -> None:
        if v is None:
            kind, data = ABSENT, 0
        elif isinstance(v, bool):
            kind, data = BOOL, int(v)
        elif isinstance(v, int):
            kind, data = INT, v & ((1 << 64) - 1)
        elif isinstance(v, float):
            kind, data = FLOAT, struct.unpack("<Q", struct.pack("<d", v))[0]
        elif isinstance(v, Json):
            kind, data = JSON, self.string(v.text)
        else:
            kind, data = STR, self.string(str(v))
        self.data.value_kinds.append(kind)
        self.data.value_data.append(data)


class run:
    """Runs a guest as its component exports would (describe, resolve,
    reconcile), natively."""

    @staticmethod
    def describe(guest: Guest[Any], env: Environment) -> Manifest:
        return describe(guest, env)

    @staticmethod
    def reconcile(guest: Guest[Any], env: Environment, request: Request, data: SnapshotData) -> Plan:
        return reconcile(guest, env, request, data)


