"""The contract's request-side records (``wit/controller.wit``) as plain
Python: the environment, the request and where its primary stands, and the
two ways a reconcile fails. Plain data; nothing here talks to the host.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Optional


class Presence(Enum):
    """Where a primary key's object stands, as the server says."""

    PRESENT = "present"
    GONE = "gone"
    UNSELECTED = "unselected"


@dataclass(frozen=True)
class Environment:
    """What the operator configured: the host's namespace, this guest's
    configuration (key order) and the reconcile's clock (``now_ms``)."""

    namespace: str
    config: tuple[tuple[str, str], ...] = ()
    now_ms: int = 0

    @staticmethod
    def test(namespace: str) -> "Environment":
        """An environment for tests: no configuration, clock at 0."""
        return Environment(namespace)

    def with_config(self, key: str, value: str) -> "Environment":
        """With one more configuration entry."""
        return replace(self, config=(*self.config, (key, value)))

    def at(self, now_ms: int) -> "Environment":
        """With the clock at ``now_ms`` milliseconds since the epoch."""
        return replace(self, now_ms=now_ms)

    def settings(self, known: list[str]) -> dict[str, str]:
        """The configuration as a dict; a ``ValueError`` naming the first key
        not in ``known`` (a typo must not be silently ignored)."""
        for key, _ in self.config:
            if key not in known:
                allowed = ", ".join(known) if known else "none"
                raise ValueError(f"unknown configuration key {key!r} (known: {allowed})")
        return dict(self.config)


@dataclass(frozen=True)
class Request:
    """What one reconcile is asked to do: a primary's key (``watch`` names
    its watch, ``presence`` where it stands) or an aggregate key."""

    key: str
    watch: Optional[str] = None
    presence: Optional[Presence] = None

    @staticmethod
    def object(watch: str, key: str, presence: Presence = Presence.PRESENT) -> "Request":
        """The request for the primary object ``key`` of ``watch``."""
        return Request(key, watch, presence)

    @staticmethod
    def aggregate(key: str) -> "Request":
        """The request for an aggregate key."""
        return Request(key)


class ReconcileError(Exception):
    """Why a reconcile failed; raise :class:`Retryable` or :class:`Terminal`."""

    retryable = True


class Retryable(ReconcileError):
    """A transient problem: the host retries the key with backoff."""


class Terminal(ReconcileError):
    """The input can never succeed: the host does not retry until the key
    changes."""

    retryable = False


def split_key(key: str) -> tuple[str, str]:
    """A key's namespace and name (namespace "" for ``name`` alone)."""
    namespace, sep, name = key.partition("/")
    return (namespace, name) if sep else ("", key)


