"""The App decision, as plain functions: the data of the child ConfigMap an
App should have, and the status the App should show. No snapshot, no plan,
no I/O: the glue in ``app.py`` reads the snapshot (the view ``App``), calls
these and writes the results."""

from __future__ import annotations

from typing import Any, Optional

from wasmctrl import Condition, is_condition_true, owned_conditions

#: The condition type this controller owns.
READY = "Ready"
#: The reason of ``Ready=True``: the child exists.
CHILD_READY = "ChildReady"
#: The reason of ``Ready=False``: the child is not there (yet).
CHILD_MISSING = "ChildMissing"

MESSAGE_KEY, REPLICAS_KEY, BANNER_KEY = "message", "replicas", "banner"


def child_data(message: Optional[str], replicas: Optional[int], banner: Optional[str]) -> dict[str, str]:
    """The child's ``data``: ``message`` and ``replicas`` (a decimal string)
    from the App's spec, ``banner`` from the namespace's
    ``shared-settings``; an absent value has no key (keys sorted, as the
    Rust guest writes them)."""
    data = {BANNER_KEY: banner, MESSAGE_KEY: message, REPLICAS_KEY: None if replicas is None else str(replicas)}
    return {k: v for k, v in sorted(data.items()) if v is not None}


def status(generation: int, child: str, child_exists: bool, existing: list[Condition], now_ms: int) -> dict[str, Any]:
    """The App's ``status`` (CRD field names) at ``generation``, whose child
    ``child`` (``namespace/name``) does or does not exist yet, keeping
    ``Ready``'s ``lastTransitionTime`` unless its status flips."""
    if child_exists:
        ready = Condition.of(READY, True, CHILD_READY, f"ConfigMap {child} is applied")
    else:
        ready = Condition.of(READY, False, CHILD_MISSING, f"ConfigMap {child} does not exist yet")
    conditions = owned_conditions(existing, ready.at_generation(generation), now_ms)
    return {"observedGeneration": generation, "conditions": [c.to_json() for c in conditions]}


def is_ready(conditions: list[Condition]) -> bool:
    """Whether ``Ready`` is ``True``."""
    return is_condition_true(conditions, READY)
