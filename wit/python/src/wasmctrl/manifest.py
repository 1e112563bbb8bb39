"""The manifest a guest returns from ``describe``: the contract's records
(``wit/controller.wit``) as plain dataclasses with builder methods, so a
manifest reads like a sentence and every field not mentioned keeps the
contract's default. No validation happens here: names are checked when the
guest resolves its fields (:class:`wasmctrl.snapshot.Schema`) and the host
checks the rest at ``describe``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Optional, Union

#: The prefix of an index link's primary that keeps it to one namespace.
SAME_NAMESPACE_PREFIX = "same-namespace:"


@dataclass(frozen=True)
class GroupVersionKind:
    """A Kubernetes API type; ``group`` is "" for the core group."""

    group: str
    version: str
    kind: str

    @staticmethod
    def core(kind: str) -> "GroupVersionKind":
        """A core-group type, version v1 (``GroupVersionKind.core("Pod")``)."""
        return GroupVersionKind("", "v1", kind)

    @property
    def api_version(self) -> str:
        """The ``apiVersion`` of its objects: ``v1``, ``example.com/v1``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def object(self, namespace: str, name: str) -> "ObjectRef":
        """A reference to the object ``namespace/name`` of this type
        (``namespace`` "" for a cluster-scoped object)."""
        return ObjectRef(self.api_version, self.kind, namespace or None, name)


@dataclass(frozen=True)
class ObjectRef:
    """Names one object a plan talks about."""

    api_version: str
    kind: str
    namespace: Optional[str]
    name: str


@dataclass(frozen=True)
class IndexLink:
    """Relates a secondary watch's objects to a primary through an index."""

    primary: str
    index: str
    field: str

    @property
    def primary_watch(self) -> str:
        """The primary watch's name, without the same-namespace prefix."""
        return self.primary.removeprefix(SAME_NAMESPACE_PREFIX)

    @property
    def same_namespace(self) -> bool:
        """Whether the link is kept to one namespace."""
        return self.primary.startswith(SAME_NAMESPACE_PREFIX)


@dataclass(frozen=True)
class KeyMapping:
    """How changes to a watched object turn into reconcile requests: ``kind``
    is the contract's case name (``per-object``, ``aggregate``, ``none``,
    ``owner``, ``same-namespace``, ``by-index``, ``all``), ``value`` its
    payload (a key, a primary watch's name, an :class:`IndexLink`)."""

    kind: str
    value: Union[None, str, IndexLink] = None


@dataclass(frozen=True)
class IndexSpec:
    """An index the host maintains over one watch."""

    name: str
    field: str


@dataclass
class Watch:
    """One set of objects the guest needs to see (see ``watch`` in the WIT)."""

    name: str
    gvk: GroupVersionKind
    plural: Optional[str] = None
    namespace: Optional[str] = None
    label_selector: Optional[str] = None
    field_selector: Optional[str] = None
    fields: list[str] = field(default_factory=list)
    indexes: list[IndexSpec] = field(default_factory=list)
    keys: KeyMapping = KeyMapping("none")
    finalizer: Optional[str] = None

    def with_fields(self, *paths: Union[str, Iterable[str]]) -> "Watch":
        """With these paths appended to the projection (strings or lists of
        strings, such as a view's ``FIELDS``), each listed once."""
        out = list(self.fields)
        for p in paths:
            for path in [p] if isinstance(p, str) else p:
                if path not in out:
                    out.append(path)
        return replace(self, fields=out)

    def index(self, name: str, path: str) -> "Watch":
        """With an index ``name`` over ``path``."""
        return replace(self, indexes=[*self.indexes, IndexSpec(name, path)])

    def with_namespace(self, namespace: str) -> "Watch":
        """Only objects of ``namespace``."""
        return replace(self, namespace=namespace)

    def with_label_selector(self, selector: str) -> "Watch":
        """Only objects whose labels match ``selector``."""
        return replace(self, label_selector=selector)

    def with_field_selector(self, selector: str) -> "Watch":
        """Only objects whose fields match ``selector``."""
        return replace(self, field_selector=selector)

    def with_keys(self, keys: KeyMapping) -> "Watch":
        """With this key mapping."""
        return replace(self, keys=keys)

    def per_object(self) -> "Watch":
        """A primary: each object is its own request."""
        return self.with_keys(KeyMapping("per-object"))

    def aggregate(self, key: str) -> "Watch":
        """Every change enqueues the one key ``key``."""
        return self.with_keys(KeyMapping("aggregate", key))

    def owner(self, primary: str) -> "Watch":
        """Owned objects: a change wakes the controller owner in ``primary``."""
        return self.with_keys(KeyMapping("owner", primary))

    def same_namespace(self, primary: str) -> "Watch":
        """A change wakes every object of ``primary`` in its namespace."""
        return self.with_keys(KeyMapping("same-namespace", primary))

    def all(self, primary: str) -> "Watch":
        """A shared input: a change wakes every object of ``primary``."""
        return self.with_keys(KeyMapping("all", primary))

    def by_index(self, primary: str, index: str, path: str) -> "Watch":
        """A change wakes the objects of ``primary`` whose index ``index``
        holds a value of this watch's ``path``."""
        return self.with_keys(KeyMapping("by-index", IndexLink(primary, index, path)))

    def by_index_same_namespace(self, primary: str, index: str, path: str) -> "Watch":
        """Like :meth:`by_index`, kept to this object's namespace."""
        return self.by_index(SAME_NAMESPACE_PREFIX + primary, index, path)

    def with_finalizer(self, finalizer: str) -> "Watch":
        """A finalizer the host manages on this (per-object) watch's objects."""
        return replace(self, finalizer=finalizer)


@dataclass(frozen=True)
class WriteRule:
    """Objects the guest may write."""

    gvk: GroupVersionKind
    namespace: Optional[str] = None
    names: tuple[str, ...] = ()
    status: bool = False

    def with_status(self, status: bool = True) -> "WriteRule":
        """Whether the guest may write the status subresource."""
        return replace(self, status=status)

    def with_namespace(self, namespace: str) -> "WriteRule":
        """Only in ``namespace``."""
        return replace(self, namespace=namespace)

    def with_name(self, name: str) -> "WriteRule":
        """Only this name (more with more calls)."""
        return replace(self, names=(*self.names, name))


@dataclass
class Manifest:
    """What the guest declares about itself."""

    name: str
    watches: list[Watch] = field(default_factory=list)
    writes: list[WriteRule] = field(default_factory=list)
    resync_seconds: Optional[int] = None

    def watch(self, watch: Watch) -> "Manifest":
        """With one more watch."""
        return replace(self, watches=[*self.watches, watch])

    def write(self, rule: WriteRule) -> "Manifest":
        """With one more write rule."""
        return replace(self, writes=[*self.writes, rule])

    def resync(self, seconds: int) -> "Manifest":
        """Re-enqueue every key this often."""
        return replace(self, resync_seconds=seconds)

    def watch_index(self, name: str) -> int:
        """The position of the watch ``name``; ``KeyError`` naming it."""
        for i, w in enumerate(self.watches):
            if w.name == name:
                return i
        raise KeyError(f"the manifest has no watch {name!r}")
