"""Making text from users and servers safe to print on a terminal.

A broker name, an address, a remark or a message body can hold anything. Printed raw, an ESC sequence
would drive the operator's terminal (move the cursor, rewrite earlier lines, set the window title) and a
newline or tab would forge lines of the mqadmin layout. So every value printed in the ``table`` and
``mqadmin`` formats and in error lines goes through :func:`printable`, which writes each control
character (C0, DEL, C1) and each bidirectional-text override as a visible escape (``\\x1b``, ``\\n``,
``\\u202e``). Rich markup and ``:emoji:`` codes are not interpreted at all: the consoles are built with
markup and emoji off (see :class:`mqctl.app.App`). ``--format json`` prints values unchanged, because
JSON escapes control characters itself.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from services.common.text import printable, printable_layout

__all__ = ["clean", "printable", "printable_layout", "terminal_safe"]

F = TypeVar("F", bound=Callable[..., None])


def clean(value: Any) -> Any:
    """``value`` with :func:`printable` applied to every string in it (dict keys, lists, tuples)."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {clean(k): clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v) for v in value]
    if isinstance(value, tuple):
        return tuple(clean(v) for v in value)
    return value


def terminal_safe(show: F) -> F:
    """For ``show(app, fmt, *values)`` renderers: the values are cleaned unless the format is json."""

    @functools.wraps(show)
    def wrapper(app: Any, fmt: str, *values: Any, **named: Any) -> None:
        if fmt != "json":
            values = clean(values)
            named = clean(named)
        show(app, fmt, *values, **named)

    wrapper.terminal_safe = True  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]
