"""The wasmctrl guest SDK for Python: everything a controller guest for
contract ``wasmctrl:controller@0.3.0`` needs besides its own logic.

- :class:`Guest` (``describe`` / ``fields`` / ``reconcile``) and
  :func:`wasmctrl.component.export`, which makes it the component's
  ``reconciler`` (built with ``componentize-py``).
- :class:`Schema`, :class:`Snapshot`, :class:`Object`: snapshot access by
  watch and field name, resolved once against the guest's own manifest.
- :class:`View` with :func:`path`, :func:`each`, :func:`conditions`: a
  class whose fields name their paths once.
- :class:`Plan`, :func:`document`: apply, update, status, finalizers,
  delete, events; owner references with :func:`controller_ref`.
- :func:`lifecycle`: a primary ``Live``, ``Deleting``, ``Gone`` or
  ``Unselected``; :meth:`Deleting.delete_then_release`.
- :func:`owned_conditions`, :func:`is_condition_true`, :func:`set_condition`.
- :mod:`wasmctrl.log`; :mod:`wasmctrl.testing`: a pure-Python ``World``
  for pytest, key mappings included.

The SDK never does I/O; pure Python, no dependencies.
"""

from importlib import resources as _resources

from .condition import (
    Condition, condition_paths, find_condition, is_condition_true, owned_conditions,
    read_conditions, rfc3339, set_condition,
)
from .guest import DescribeError, Guest
from .lifecycle import FINALIZERS, Deleting, Gone, Live, Unselected, lifecycle
from .manifest import (
    GroupVersionKind, IndexLink, IndexSpec, KeyMapping, Manifest, ObjectRef, Watch, WriteRule,
)
from .owner import OWNER_REFERENCES, OwnerReference, controller_owner, controller_ref, owner_ref
from .plan import Document, Event, Plan, Write, WriteKind, document
from .snapshot import Field, Json, Object, Schema, SchemaError, Snapshot, SnapshotData, WatchSchema
from .types import Environment, Presence, ReconcileError, Request, Retryable, Terminal, split_key
from .view import Resolved, View, conditions, each, path

#: The contract version this SDK speaks.
CONTRACT = "wasmctrl:controller@0.3.0"


def wit_dir() -> str:
    """The directory holding the contract's ``controller.wit`` this SDK was
    written against: ``componentize-py -d $(python -m wasmctrl wit) -w
    controller componentize ...``."""
    return str(_resources.files(__name__) / "wit")


__all__ = [n for n in dir() if not n.startswith("_")]
