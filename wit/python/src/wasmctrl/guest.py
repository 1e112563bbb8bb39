"""The :class:`Guest` base class and the two entry points that run it:
what the component's exports do (:mod:`wasmctrl.component`) and what
native tests call, so both take the same path — describe, resolve the
fields against the manifest, check the request, reconcile. Every failure of
the guest's own making is an exception the caller sees; every failure of
the input is a :class:`Terminal` naming the guest.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from .manifest import Manifest
from .plan import Plan
from .snapshot import Schema, SchemaError, Snapshot, SnapshotData
from .types import Environment, Request, Terminal

F = TypeVar("F")


class Guest(Generic[F]):
    """A controller guest. ``describe`` declares what it reads and writes;
    ``fields`` resolves, by name, what ``reconcile`` reads (an unknown
    watch, field or index fails ``describe``); ``reconcile`` computes a
    :class:`Plan` (or raises :class:`Retryable` / :class:`Terminal`). All
    three must be pure functions of their arguments: nothing kept between
    calls may change a result."""

    def describe(self, env: Environment) -> Manifest:
        raise NotImplementedError

    def fields(self, env: Environment, schema: Schema) -> F:
        return None  # type: ignore[return-value]

    def reconcile(self, env: Environment, request: Request, snapshot: Snapshot, fields: F) -> Plan:
        raise NotImplementedError


class DescribeError(Exception):
    """``describe`` failed: the message rejects the guest."""


def resolve(guest: Guest[Any], env: Environment, manifest: Manifest) -> tuple[Schema, Any]:
    """The schema of ``manifest`` and ``guest``'s resolved fields; a
    :class:`DescribeError` naming the guest on an unknown name."""
    try:
        schema = Schema(manifest)
        return schema, guest.fields(env, schema)
    except (SchemaError, ValueError, KeyError) as e:
        raise DescribeError(f"guest {manifest.name}: {e}") from e


def describe(guest: Guest[Any], env: Environment) -> Manifest:
    """``describe`` as the component exports it: the manifest, checked by
    resolving the guest's fields."""
    try:
        manifest = guest.describe(env)
    except ValueError as e:
        raise DescribeError(str(e)) from e
    resolve(guest, env, manifest)
    return manifest


#: ``(guest, env)`` → its manifest, schema and fields: ``describe`` and
#: ``fields`` are pure functions of the environment, so an instance that
#: serves many reconciles resolves once per environment, not per call.
_RESOLVED: dict[tuple[int, Environment], tuple[Guest[Any], Manifest, Schema, Any]] = {}
_RESOLVED_MAX = 8


def _resolved(guest: Guest[Any], env: Environment) -> tuple[Manifest, Schema, Any]:
    hit = _RESOLVED.get((id(guest), env))
    if hit is not None and hit[0] is guest:
        return hit[1], hit[2], hit[3]
    try:
        manifest = guest.describe(env)
        schema, fields = resolve(guest, env, manifest)
    except (DescribeError, ValueError) as e:
        raise Terminal(str(e)) from e
    if len(_RESOLVED) >= _RESOLVED_MAX:
        _RESOLVED.clear()
    _RESOLVED[(id(guest), env)] = (guest, manifest, schema, fields)
    return manifest, schema, fields


def reconcile(guest: Guest[Any], env: Environment, request: Request, data: SnapshotData) -> Plan:
    """``reconcile`` as the component exports it. A request for a watch the
    manifest lacks, or a guest whose ``describe`` fails now, is a
    :class:`Terminal` naming the guest."""
    manifest, schema, fields = _resolved(guest, env)
    if request.watch is not None:
        try:
            schema.watch(request.watch)
        except SchemaError as e:
            raise Terminal(f"guest {manifest.name}: request {request.key!r}: {e}") from e
    return guest.reconcile(env, request, Snapshot(schema, data), fields)
