"""Owner references: ``metav1.OwnerReference`` built from an object of the
snapshot (:func:`owner_ref`, :func:`controller_ref`), so a child document
names exactly the owner incarnation the guest saw (its uid), and read back
from a projected object (:func:`controller_owner`). Never checks the
Kubernetes rule that an owner is cluster-scoped or in the child's
namespace: the API server's garbage collector enforces it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Optional

from .snapshot import Object

#: The path :func:`controller_owner` reads: add it to the watch's fields.
OWNER_REFERENCES = "metadata.ownerReferences"


@dataclass(frozen=True)
class OwnerReference:
    """``metav1.OwnerReference``; ``controller`` and ``block_owner_deletion``
    are left out of the JSON when None."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: Optional[bool] = None
    block_owner_deletion: Optional[bool] = None

    def to_json(self) -> dict[str, Any]:
        """As the API server writes it, in its field order."""
        out: dict[str, Any] = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
        }
        if self.controller is not None:
            out["controller"] = self.controller
        if self.block_owner_deletion is not None:
            out["blockOwnerDeletion"] = self.block_owner_deletion
        return out

    @staticmethod
    def from_json(d: dict[str, Any]) -> "OwnerReference":
        return OwnerReference(
            str(d.get("apiVersion", "")), str(d.get("kind", "")), str(d.get("name", "")),
            str(d.get("uid", "")), d.get("controller"), d.get("blockOwnerDeletion"),
        )


def owner_ref(owner: Object) -> OwnerReference:
    """A plain owner reference to ``owner`` (its watch's apiVersion and kind,
    its name and uid): not its controller."""
    target = owner.object_ref()
    return OwnerReference(target.api_version, target.kind, target.name, owner.uid)


def controller_ref(owner: Object) -> OwnerReference:
    """The controller reference to ``owner``, as apimachinery's
    ``NewControllerRef`` makes it: ``controller`` and ``blockOwnerDeletion``
    true. Changes to a child carrying it wake ``owner`` through a watch with
    the ``owner`` key mapping."""
    return replace(owner_ref(owner), controller=True, block_owner_deletion=True)


def controller_owner(obj: Object) -> Optional[OwnerReference]:
    """The object's controller owner (the reference with ``controller:
    true``); a :class:`SchemaError` when its watch does not project
    :data:`OWNER_REFERENCES`."""
    text = obj.text(obj.field(OWNER_REFERENCES))
    try:
        refs = json.loads(text) if text else []
    except ValueError:
        refs = []
    for r in refs if isinstance(refs, list) else []:
        if isinstance(r, dict) and r.get("controller") is True:
            return OwnerReference.from_json(r)
    return None
