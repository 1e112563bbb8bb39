"""Logging for guests: :func:`info`, :func:`warn`, ... In a component the
line goes through the contract's ``log`` import (installed by
:func:`wasmctrl.component.export`), which the host routes to its structured
logs with the guest name and request key attached. Natively (pytest) it
goes to the standard :mod:`logging` logger ``wasmctrl.guest``, so pytest's
``caplog`` sees it.
"""

from __future__ import annotations

import logging
from typing import Callable, Optional

LEVELS = ("trace", "debug", "info", "warn", "error")
_native = logging.getLogger("wasmctrl.guest")
_NATIVE_LEVELS = {
    "trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO,
    "warn": logging.WARNING, "error": logging.ERROR,
}

#: Where lines go in a component: ``sink(level_name, message)``.
_sink: Optional[Callable[[str, str], None]] = None


def write(level: str, message: str) -> None:
    """Writes one line at ``level`` (one of :data:`LEVELS`)."""
    if level not in LEVELS:
        raise ValueError(f"unknown log level {level!r} (levels: {', '.join(LEVELS)})")
    if _sink is not None:
        _sink(level, message)
    else:
        _native.log(_NATIVE_LEVELS[level], message)


def trace(message: str) -> None:
    write("trace", message)


def debug(message: str) -> None:
    write("debug", message)


def info(message: str) -> None:
    write("info", message)


def warn(message: str) -> None:
    write("warn", message)


def error(message: str) -> None:
    write("error", message)
