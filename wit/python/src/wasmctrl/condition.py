"""Status conditions (``metav1.Condition``) the way controller-runtime's
``meta.SetStatusCondition`` keeps them: ``lastTransitionTime`` changes only
when a condition's ``status`` changes, so a guest that recomputes the same
conditions writes the same status and the host skips the write. Reading the
conditions an object has from a snapshot: :func:`condition_paths` and
:func:`read_conditions` (the ``[*]`` paths line up element by element).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, replace
from typing import Any, Optional

from .snapshot import Object, WatchSchema

_FIELDS = ("type", "status", "observedGeneration", "lastTransitionTime", "reason", "message")


def rfc3339(ms: int) -> str:
    """``ms`` since the epoch as ``metav1.Time`` writes it (UTC, seconds)."""
    try:
        t = datetime.datetime.fromtimestamp(ms // 1000, tz=datetime.timezone.utc)
    except (OverflowError, OSError, ValueError):
        t = datetime.datetime.max.replace(tzinfo=datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Condition:
    """One status condition; serialised in ``metav1.Condition``'s field
    order, ``observedGeneration`` omitted when 0."""

    type: str
    status: str
    reason: str
    message: str = ""
    observed_generation: int = 0
    last_transition_time: str = ""

    @staticmethod
    def of(type: str, status: bool, reason: str, message: str = "") -> "Condition":
        """A condition whose status is ``True`` or ``False``, with no
        transition time yet (:func:`set_condition` stamps it)."""
        return Condition(type, "True" if status else "False", reason, message)

    def at_generation(self, generation: int) -> "Condition":
        """Computed from ``generation`` of the object."""
        return replace(self, observed_generation=generation)

    @property
    def is_true(self) -> bool:
        return self.status == "True"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "status": self.status}
        if self.observed_generation:
            out["observedGeneration"] = self.observed_generation
        out.update(lastTransitionTime=self.last_transition_time, reason=self.reason, message=self.message)
        return out


def find_condition(conditions: list[Condition], type: str) -> Optional[Condition]:
    """The condition of ``type``, if present."""
    return next((c for c in conditions if c.type == type), None)


def is_condition_true(conditions: list[Condition], type: str) -> bool:
    """Whether the condition of ``type`` is present and ``True``."""
    c = find_condition(conditions, type)
    return c is not None and c.is_true


def set_condition(conditions: list[Condition], new: Condition, now_ms: int) -> bool:
    """Sets ``new`` in ``conditions`` (by type) as ``meta.SetStatusCondition``
    does; returns whether anything changed."""
    stamp = new.last_transition_time or rfc3339(now_ms)
    for i, old in enumerate(conditions):
        if old.type != new.type:
            continue
        time = old.last_transition_time
        if old.status != new.status or not time:
            time = stamp
        updated = replace(new, last_transition_time=time)
        conditions[i] = updated
        return updated != old
    conditions.append(replace(new, last_transition_time=stamp))
    return True


def owned_conditions(existing: list[Condition], new: Condition, now_ms: int) -> list[Condition]:
    """The conditions of a controller that owns one condition type: ``new``
    set over ``existing``'s entry of its type, and no other entry (applying
    another controller's conditions would make this guest co-own them)."""
    conditions = [c for c in existing if c.type == new.type]
    set_condition(conditions, new, now_ms)
    return conditions


def condition_paths(prefix: str = "status.conditions") -> list[str]:
    """The projection paths of a conditions list at ``prefix``: add them to
    the watch's fields."""
    return [f"{prefix}[*].{f}" for f in _FIELDS]


def read_conditions(watch: WatchSchema, obj: Object, prefix: str = "status.conditions") -> list[Condition]:
    """The object's conditions, in list order; entries without a type are
    dropped, missing fields read as empty."""
    t, s, g, l, r, m = (watch.field(p) for p in condition_paths(prefix))
    types = obj.values(t)
    at = lambda f, i: (obj.values(f)[i:i + 1] or [None])[0]  # noqa: E731
    text = lambda f, i: v if isinstance(v := at(f, i), str) else ""  # noqa: E731
    out = []
    for i, typ in enumerate(types):
        if isinstance(typ, str) and typ:
            gen = at(g, i)
            out.append(Condition(
                typ, text(s, i), text(r, i), text(m, i),
                gen if isinstance(gen, int) and not isinstance(gen, bool) else 0, text(l, i),
            ))
    return out
