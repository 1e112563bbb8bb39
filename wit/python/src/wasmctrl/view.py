"""Typed views: a class whose fields name their paths once. The class
gives the projection list (``App.FIELDS``, for the manifest), resolves
against the watch once (``App.resolve(schema.watch("apps"))``, an unknown
path is an error at ``describe``) and reads each object into an instance::

    class App(View):
        message = path("spec.message", str)
        replicas = path("spec.replicas", int)
        conditions = conditions("status.conditions")

A value of another type than declared reads as None (an empty list for
:func:`each`), never as an exception.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Generic, Optional, TypeVar

from .condition import condition_paths, read_conditions
from .snapshot import Field, Json, Object, WatchSchema

V = TypeVar("V", bound="View")


def _typed(kind: type, v: Any) -> Any:
    if kind is Json:
        return v if isinstance(v, Json) else None
    if kind is dict:
        try:
            d = json.loads(v.text) if isinstance(v, Json) else None
        except ValueError:
            return None
        return d if isinstance(d, dict) else None
    if kind is int and isinstance(v, bool):
        return None
    if kind is float and isinstance(v, int) and not isinstance(v, bool):
        return float(v)
    return v if isinstance(v, kind) else None


@dataclass(frozen=True)
class _Path:
    paths: tuple[str, ...]
    read: Callable[[WatchSchema, list[Field], Object], Any]
    default: Callable[[], Any]


def path(p: str, kind: type = str) -> Any:
    """The first value of ``p``, if of ``kind`` (str, int, float, bool,
    :class:`Json`, or dict for a JSON object such as ``data``)."""
    return _Path((p,), lambda _w, f, o: _typed(kind, o.value(f[0])), lambda: None)


def each(p: str, kind: type = str) -> Any:
    """Every value of ``p`` (a ``[*]`` path) that is of ``kind``."""
    def read(_w: WatchSchema, f: list[Field], o: Object) -> list[Any]:
        return [x for x in (_typed(kind, v) for v in o.values(f[0])) if x is not None]
    return _Path((p,), read, list)


def conditions(prefix: str = "status.conditions") -> Any:
    """The object's status conditions at ``prefix`` (to keep their
    transition times)."""
    return _Path(tuple(condition_paths(prefix)), lambda w, _f, o: read_conditions(w, o, prefix), list)


class View:
    """Base of a typed view; subclasses declare fields with :func:`path`,
    :func:`each` and :func:`conditions`."""

    FIELDS: ClassVar[list[str]] = []
    _paths: ClassVar[dict[str, _Path]] = {}

    def __init_subclass__(cls) -> None:
        cls._paths = {k: v for k, v in vars(cls).items() if isinstance(v, _Path)}
        cls.FIELDS = [p for d in cls._paths.values() for p in d.paths]
        for k in cls._paths:
            delattr(cls, k)

    def __init__(self, **values: Any):
        for name, d in self._paths.items():
            setattr(self, name, values.pop(name) if name in values else d.default())
        if values:
            raise TypeError(f"{type(self).__name__} has no field {next(iter(values))!r}")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({inner})"

    @classmethod
    def resolve(cls: type[V], watch: WatchSchema) -> "Resolved[V]":
        """This view's fields in ``watch``; a :class:`SchemaError` names the
        first path the watch does not project."""
        fields = {name: [watch.field(p) for p in d.paths] for name, d in cls._paths.items()}
        return Resolved(cls, watch, fields)


class Resolved(Generic[V]):
    """A view resolved against one watch: reads its objects."""

    def __init__(self, view: type[V], watch: WatchSchema, fields: dict[str, list[Field]]):
        self.view = view
        self.watch = watch
        self._fields = fields

    def read(self, obj: Object) -> V:
        """``obj`` (an object of this watch) through the view."""
        out = self.view.__new__(self.view)
        for name, d in self.view._paths.items():
            setattr(out, name, d.read(self.watch, self._fields[name], obj))
        return out


