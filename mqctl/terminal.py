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
import re
from collections.abc import Callable
from typing import Any, TypeVar

#: C0 controls, DEL, C1 controls, and the invisible marks that reorder text (bidi overrides/isolates).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
#: What our own layouts put between values; kept by :func:`printable_layout`.
_LAYOUT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")

F = TypeVar("F", bound=Callable[..., None])


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def printable(text: str) -> str:
    """``text`` with every control character (newlines and tabs too) written as a visible escape."""
    return _CONTROL.sub(_escape, text)


def printable_layout(text: str) -> str:
    """Like :func:`printable`, but keeps newlines and tabs: for a whole layout whose values are already
    clean (a last guard at the output boundary)."""
    return _LAYOUT.sub(_escape, text)


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
