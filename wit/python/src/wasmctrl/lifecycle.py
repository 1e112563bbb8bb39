"""Where a per-object request's primary is in its life: :class:`Live`
(reconcile it), :class:`Deleting` (clean up, then release the host-managed
finalizer), :class:`Gone` (deleted: delete what it controlled, if anything
is left) or :class:`Unselected` (still exists, but left the watch's
selectors). The request's ``presence`` tells the last two apart, never
guessed from the snapshot. This module only reads the snapshot and plans
the finalizer's removal; it never decides what clean-up is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional, Union

from .plan import Plan
from .snapshot import Object, SchemaError, Snapshot
from .types import Presence, Request

#: The path whose projection tells whether an object still holds the
#: watch's finalizer.
FINALIZERS = "metadata.finalizers[*]"


@dataclass(frozen=True)
class Live:
    """Present and not being deleted."""

    object: Object


@dataclass(frozen=True)
class Gone:
    """Deleted: the snapshot still holds what related to it."""

    key: str


@dataclass(frozen=True)
class Unselected:
    """Left the watch's selectors: the snapshot still holds what related to
    it; the host releases its finalizer after this reconcile succeeds."""

    key: str


@dataclass(frozen=True)
class Deleting:
    """Being deleted (finalizers hold it): clean up, then release."""

    object: Object
    finalizer: Optional[str]
    holds_finalizer: bool

    def release(self, plan: Plan) -> Plan:
        """Plans the removal of the watch's finalizer (nothing when the
        object no longer holds it or the watch declares none)."""
        if self.finalizer is not None and self.holds_finalizer:
            plan.remove_finalizer(self.object.object_ref(), self.finalizer)
        return plan

    def delete_then_release(self, owned: Iterable[Object], plan: Plan) -> Plan:
        """Deletes ``owned`` and releases the finalizer only once none is
        left: their deletions wake the object again, and that reconcile
        releases it."""
        owned = list(owned)
        return plan.delete_all(owned) if owned else self.release(plan)


Lifecycle = Union[Live, Deleting, Gone, Unselected]


def lifecycle(snapshot: Snapshot, request: Request) -> Lifecycle:
    """Where ``request``'s primary is in its life (``Gone`` too when a
    present primary is not in the snapshot, as for an aggregate request)."""
    if request.presence is Presence.GONE:
        return Gone(request.key)
    if request.presence is Presence.UNSELECTED:
        return Unselected(request.key)
    obj = snapshot.primary(request)
    if obj is None:
        return Gone(request.key)
    if not obj.is_deleting:
        return Live(obj)
    spec = snapshot.schema.manifest.watches[obj.watch]
    holds = spec.finalizer is not None
    if holds:
        try:
            holds = spec.finalizer in obj.values(obj.field(FINALIZERS))
        except SchemaError:
            holds = True
    return Deleting(obj, spec.finalizer, holds)
