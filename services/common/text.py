"""Text from users and servers made safe to print: every control character (C0, DEL, C1) and every
bidirectional-text override written as a visible escape (``\\x1b``, ``\\n``, ``\\u202e``), so a value can
neither drive a terminal nor forge lines of a layout. The command line (mqctl/terminal.py) and the
services' own entry points print through these."""

from __future__ import annotations

import re

__all__ = ["java_text", "printable", "printable_layout"]

#: C0 controls, DEL, C1 controls, and the invisible marks that reorder text (bidi overrides/isolates).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
#: What our own layouts put between values; kept by :func:`printable_layout`.
_LAYOUT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")

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


def java_text(value: object) -> str:
    """``value`` as Java's String.format %s writes it: null for None, true/false for booleans."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
