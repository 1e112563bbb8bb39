"""The plan builder: what a reconcile returns, written as calls
(``plan.status(ref, status)``, ``plan.remove_finalizer(..)``) instead of
contract records, with documents serialised as compact JSON exactly as the
Rust SDK writes them. It only records intent; the host carries the writes
out in order, and every write aimed at an object the guest saw is pinned to
its uid, so nothing here can resurrect a deleted object (only
:meth:`Plan.apply` ever creates).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Iterable, Optional

from .manifest import ObjectRef
from .owner import OwnerReference
from .snapshot import Object


def to_json(value: Any) -> str:
    """Compact JSON, as serde_json writes it (no spaces; non-ASCII kept)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@dataclass
class Document:
    """A complete object document: ``apiVersion``, ``kind``, ``metadata``
    (``name``, ``namespace``, then any labels, annotations and owner
    references), then the fields of ``body``, in that order. Build one with
    :func:`document`."""

    target: ObjectRef
    body: dict[str, Any]
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    owner_references: list[OwnerReference] = field(default_factory=list)

    def label(self, key: str, value: str) -> "Document":
        """With the label ``key: value``."""
        self.labels[key] = value
        return self

    def annotation(self, key: str, value: str) -> "Document":
        """With the annotation ``key: value``."""
        self.annotations[key] = value
        return self

    def owned_by(self, owner: OwnerReference) -> "Document":
        """With the owner reference ``owner`` (see :func:`controller_ref`)."""
        self.owner_references.append(owner)
        return self

    def to_json(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self.target.name}
        if self.target.namespace is not None:
            meta["namespace"] = self.target.namespace
        if self.labels:
            meta["labels"] = dict(sorted(self.labels.items()))
        if self.annotations:
            meta["annotations"] = dict(sorted(self.annotations.items()))
        if self.owner_references:
            meta["ownerReferences"] = [r.to_json() for r in self.owner_references]
        return {"apiVersion": self.target.api_version, "kind": self.target.kind, "metadata": meta, **self.body}


def document(target: ObjectRef, body: Optional[dict[str, Any]] = None) -> Document:
    """``target``'s identity plus ``body``'s fields, as one document."""
    return Document(target, dict(body or {}))


class WriteKind(Enum):
    """The contract's ``write`` cases."""

    APPLY = "apply"
    UPDATE = "update"
    APPLY_STATUS = "apply-status"
    DELETE = "delete"
    ADD_FINALIZER = "add-finalizer"
    REMOVE_FINALIZER = "remove-finalizer"


@dataclass(frozen=True)
class Write:
    """One write: a JSON document (apply, update, apply-status), an object
    (delete) or an object and a finalizer."""

    kind: WriteKind
    document: Optional[str] = None
    target: Optional[ObjectRef] = None
    finalizer: Optional[str] = None


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event the host records on the guest's behalf."""

    regarding: ObjectRef
    warning: bool
    reason: str
    message: str
    action: str = "Reconcile"
    related: Optional[ObjectRef] = None

    @staticmethod
    def normal(regarding: ObjectRef, reason: str, message: str) -> "Event":
        return Event(regarding, False, reason, message)

    @staticmethod
    def warn(regarding: ObjectRef, reason: str, message: str) -> "Event":
        return Event(regarding, True, reason, message)


@dataclass
class Plan:
    """The desired state one reconcile computed; empty by default."""

    writes: list[Write] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    requeue_after_ms: Optional[int] = None

    def _doc(self, kind: WriteKind, doc: Document | dict[str, Any]) -> "Plan":
        body = doc.to_json() if isinstance(doc, Document) else doc
        self.writes.append(Write(kind, document=to_json(body)))
        return self

    def apply(self, doc: Document | dict[str, Any]) -> "Plan":
        """Create or update ``doc`` by server-side apply (the only write that
        creates)."""
        return self._doc(WriteKind.APPLY, doc)

    def update(self, doc: Document | dict[str, Any]) -> "Plan":
        """Update ``doc`` only if the object exists as the snapshot saw it."""
        return self._doc(WriteKind.UPDATE, doc)

    def apply_status(self, doc: Document | dict[str, Any]) -> "Plan":
        """Server-side apply ``doc``'s ``status`` to the status subresource."""
        return self._doc(WriteKind.APPLY_STATUS, doc)

    def status(self, target: ObjectRef, status: Any) -> "Plan":
        """:meth:`apply_status` of ``{"status": status}`` on ``target``."""
        return self.apply_status(document(target, {"status": status}))

    def delete(self, target: ObjectRef) -> "Plan":
        """Delete ``target`` (pinned to the uid the snapshot saw)."""
        self.writes.append(Write(WriteKind.DELETE, target=target))
        return self

    def delete_all(self, objects: Iterable[Object]) -> "Plan":
        """Delete each of ``objects``."""
        for o in objects:
            self.delete(o.object_ref())
        return self

    def add_finalizer(self, target: ObjectRef, finalizer: str) -> "Plan":
        """Add ``finalizer`` to ``target``."""
        self.writes.append(Write(WriteKind.ADD_FINALIZER, target=target, finalizer=finalizer))
        return self

    def remove_finalizer(self, target: ObjectRef, finalizer: str) -> "Plan":
        """Remove ``finalizer`` from ``target``."""
        self.writes.append(Write(WriteKind.REMOVE_FINALIZER, target=target, finalizer=finalizer))
        return self

    def event(self, event: Event) -> "Plan":
        """Record ``event``."""
        self.events.append(event)
        return self

    def requeue_after(self, ms: int) -> "Plan":
        """Reconcile this key again after ``ms`` milliseconds."""
        self.requeue_after_ms = ms
        return self
