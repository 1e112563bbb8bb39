"""Snapshot access by name: a :class:`Schema` built from the guest's own
manifest resolves watch and field names into :class:`WatchSchema` and
:class:`Field` handles once (an unknown name is a :class:`SchemaError`,
reported at ``describe``), and a :class:`Snapshot` hands out
:class:`Object` s whose accessors take those handles. The layout is the
contract's (``snapshot`` in ``wit/controller.wit``: columns, one string
table, slots, value kinds); this module reads it and never writes it.
Nothing here raises on a malformed snapshot: out-of-range indices read as
absent.
"""

from __future__ import annotations

import bisect
import json
import struct
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from .manifest import Manifest, ObjectRef, Watch
from .types import Request, split_key

#: Value kinds (the table in ``wit/controller.wit``).
ABSENT, STR, INT, FLOAT, BOOL, JSON = range(6)


class SchemaError(ValueError):
    """A name the guest's code reads that its manifest does not declare."""


@dataclass
class SnapshotData:
    """The contract's ``snapshot`` record, field for field (what the host
    sends; what :class:`wasmctrl.testing.World` builds)."""

    strings: str = ""
    string_ends: list[int] = field(default_factory=list)
    object_watch: list[int] = field(default_factory=list)
    object_namespace: list[int] = field(default_factory=list)
    object_name: list[int] = field(default_factory=list)
    object_uid: list[int] = field(default_factory=list)
    object_generation: list[int] = field(default_factory=list)
    object_deletion_timestamp: list[int] = field(default_factory=list)
    object_first_slot: list[int] = field(default_factory=list)
    slot_ends: list[int] = field(default_factory=list)
    value_kinds: list[int] = field(default_factory=list)
    value_data: list[int] = field(default_factory=list)
    #: ``(watch, name, [(key string, [objects])])`` per declared index.
    indexes: list[tuple[int, str, list[tuple[int, list[int]]]]] = field(default_factory=list)

    @staticmethod
    def from_wit(s: Any) -> "SnapshotData":
        """From the bindings' ``Snapshot`` record (any object with its
        attributes)."""
        return SnapshotData(
            s.strings, s.string_ends, s.object_watch, s.object_namespace, s.object_name,
            s.object_uid, s.object_generation, s.object_deletion_timestamp,
            s.object_first_slot, s.slot_ends, s.value_kinds, s.value_data,
            [(i.watch, i.name, [(b.key, list(b.objects)) for b in i.buckets]) for i in s.indexes],
        )


class Schema:
    """The names a manifest declares, for resolving them into handles."""

    def __init__(self, manifest: Manifest):
        names = [w.name for w in manifest.watches]
        for i, n in enumerate(names):
            if n in names[:i]:
                raise SchemaError(f"two watches are named {n!r}")
        self.manifest = manifest

    def watch(self, name: str) -> "WatchSchema":
        """The watch named ``name``."""
        for i, w in enumerate(self.manifest.watches):
            if w.name == name:
                return WatchSchema(i, w)
        known = ", ".join(repr(w.name) for w in self.manifest.watches) or "none"
        raise SchemaError(f"no watch named {name!r} (watches: {known})")


@dataclass(frozen=True)
class Field:
    """A resolved field: its watch and its slot in the watch's ``fields``."""

    watch: int
    slot: int
    path: str


@dataclass(frozen=True)
class IndexName:
    """A resolved index of one watch."""

    watch: int
    name: str


@dataclass(frozen=True)
class WatchSchema:
    """One watch of the manifest, resolved."""

    id: int
    spec: Watch

    @property
    def name(self) -> str:
        return self.spec.name

    def field(self, path: str) -> Field:
        """The field ``path``, which the watch must project."""
        try:
            return Field(self.id, self.spec.fields.index(path), path)
        except ValueError:
            known = ", ".join(repr(f) for f in self.spec.fields) or "none"
            raise SchemaError(
                f"watch {self.spec.name!r} does not project field {path!r} (its fields: {known})"
            ) from None

    def index(self, name: str) -> IndexName:
        """The index ``name``, which the watch must declare."""
        if any(i.name == name for i in self.spec.indexes):
            return IndexName(self.id, name)
        known = ", ".join(repr(i.name) for i in self.spec.indexes) or "none"
        raise SchemaError(f"watch {self.spec.name!r} has no index named {name!r} (its indexes: {known})")


class Snapshot:
    """The world as the host's caches saw it, read through a :class:`Schema`."""

    def __init__(self, schema: Schema, data: SnapshotData):
        self.schema = schema
        self.data = data
        self._bytes = data.strings.encode()
        self._strings: dict[int, str] = {}
        self._by_name: Optional[dict[tuple[int, str, str], int]] = None

    def string(self, i: int) -> str:
        """String ``i`` of the table ("" when out of range)."""
        s = self._strings.get(i)
        if s is None:
            ends = self.data.string_ends
            if not 0 <= i < len(ends):
                return ""
            start = ends[i - 1] if i > 0 else 0
            s = self._bytes[start : ends[i]].decode(errors="replace")
            self._strings[i] = s
        return s

    def __len__(self) -> int:
        return len(self.data.object_watch)

    def _range(self, watch: int) -> range:
        column = self.data.object_watch
        return range(bisect.bisect_left(column, watch), bisect.bisect_right(column, watch))

    def all(self) -> Iterator["Object"]:
        """Every object, in snapshot order (watch, namespace, name)."""
        return (Object(self, o) for o in range(len(self)))

    def objects(self, watch: int | WatchSchema) -> list["Object"]:
        """Every object of ``watch``, in namespace/name order."""
        w = watch.id if isinstance(watch, WatchSchema) else watch
        return [Object(self, o) for o in self._range(w)]

    def in_namespace(self, watch: int | WatchSchema, namespace: str) -> list["Object"]:
        """The objects of ``watch`` in ``namespace``."""
        return [o for o in self.objects(watch) if o.namespace == namespace]

    def get(self, watch: int | WatchSchema, namespace: str, name: str) -> Optional["Object"]:
        """The object ``namespace/name`` of ``watch``."""
        if self._by_name is None:
            d = self.data
            self._by_name = {
                (d.object_watch[o], self.string(d.object_namespace[o]), self.string(d.object_name[o])): o
                for o in range(len(self))
            }
        w = watch.id if isinstance(watch, WatchSchema) else watch
        o = self._by_name.get((w, namespace, name))
        return None if o is None else Object(self, o)

    def primary(self, request: Request) -> Optional["Object"]:
        """The primary object a per-object request is about; ``None`` for an
        aggregate request or an object the snapshot does not hold."""
        if request.watch is None:
            return None
        try:
            watch = self.schema.watch(request.watch)
        except SchemaError:
            return None
        return self.get(watch, *split_key(request.key))

    def indexed(self, index: IndexName, key: str) -> list["Object"]:
        """The objects of ``index``'s bucket ``key``."""
        for watch, name, buckets in self.data.indexes:
            if (watch, name) == (index.watch, index.name):
                for k, objects in buckets:
                    if self.string(k) == key:
                        return [Object(self, o) for o in objects if 0 <= o < len(self)]
        return []


class Object:
    """One object of a :class:`Snapshot`."""

    __slots__ = ("snap", "index")

    def __init__(self, snap: Snapshot, index: int):
        self.snap = snap
        self.index = index

    def _column(self, name: str, default: int = 0) -> int:
        column = getattr(self.snap.data, name)
        return column[self.index] if self.index < len(column) else default

    @property
    def watch(self) -> int:
        return self._column("object_watch")

    @property
    def namespace(self) -> str:
        return self.snap.string(self._column("object_namespace"))

    @property
    def name(self) -> str:
        return self.snap.string(self._column("object_name"))

    @property
    def key(self) -> str:
        """``namespace/name`` (``name`` when cluster-scoped)."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def uid(self) -> str:
        return self.snap.string(self._column("object_uid"))

    @property
    def generation(self) -> int:
        return self._column("object_generation")

    @property
    def deletion_timestamp(self) -> Optional[str]:
        return self.snap.string(self._column("object_deletion_timestamp")) or None

    @property
    def is_deleting(self) -> bool:
        return self.deletion_timestamp is not None

    def object_ref(self) -> ObjectRef:
        """A reference to this object, of its watch's type."""
        watches = self.snap.schema.manifest.watches
        gvk = watches[self.watch].gvk if self.watch < len(watches) else None
        if gvk is None:
            return ObjectRef("", "", self.namespace or None, self.name)
        return gvk.object(self.namespace, self.name)

    def field(self, path: str) -> Field:
        """The field ``path`` of this object's watch."""
        watches = self.snap.schema.manifest.watches
        return WatchSchema(self.watch, watches[self.watch]).field(path)

    def _values(self, f: Field) -> range:
        d = self.snap.data
        slot = self._column("object_first_slot", -1) + f.slot
        if f.watch != self.watch or not 0 <= slot < len(d.slot_ends):
            return range(0)
        start = d.slot_ends[slot - 1] if slot > 0 else 0
        return range(start, min(d.slot_ends[slot], len(d.value_kinds)))

    def count(self, f: Field) -> int:
        """How many values ``f`` yields (a ``[*]`` path: one per element)."""
        return len(self._values(f))

    def values(self, f: Field) -> list[Any]:
        """Every value ``f`` yields: None (absent), str, int, float, bool, or
        :class:`Json` (an object or list)."""
        return [self._value(v) for v in self._values(f)]

    def value(self, f: Field) -> Any:
        """The first value ``f`` yields (None when absent or none)."""
        values = self._values(f)
        return self._value(values[0]) if values else None

    def _value(self, v: int) -> Any:
        d = self.snap.data
        kind, data = d.value_kinds[v], d.value_data[v] if v < len(d.value_data) else 0
        if kind == STR:
            return self.snap.string(data)
        if kind == INT:
            return data - (1 << 64) if data >= 1 << 63 else data
        if kind == FLOAT:
            return struct.unpack("<d", struct.pack("<Q", data))[0]
        if kind == BOOL:
            return data != 0
        if kind == JSON:
            return Json(self.snap.string(data))
        return None

    def text(self, f: Field) -> Optional[str]:
        """The first value if it is a string (the JSON text of an object or
        list too)."""
        v = self.value(f)
        return v.text if isinstance(v, Json) else v if isinstance(v, str) else None

    def int(self, f: Field) -> Optional[int]:
        """The first value if it is an integer."""
        v = self.value(f)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    def bool(self, f: Field) -> Optional[bool]:
        """The first value if it is a boolean."""
        v = self.value(f)
        return v if isinstance(v, bool) else None


@dataclass(frozen=True)
class Json:
    """An object or list, as the compact JSON text the host projected."""

    text: str

    def parse(self) -> Any:
        return json.loads(self.text)
