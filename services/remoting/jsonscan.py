"""Python's JSON decoder (in C) held to the rules of fastjson.py, for the reader there to use wherever the
decoder can give the same answer: about ten times faster than reading in Python, and linear.

The decoder accepts more than those rules allow (NaN, duplicate keys, numbers of any size, lone
surrogates, any depth) and less (fastjson's bare integer keys). Each difference is closed here:

* hooks refuse what the rules refuse while the decoder builds the value: a repeated key (also a bare and
  a quoted key that name the same thing), an integer outside int64, a number longer than 64 characters,
  NaN and the infinities;
* bare keys: a text the decoder refuses at a bare integer key is rewritten with each such key quoted and
  marked (``{0:"a"}`` becomes ``{"\\udfff0":"a"}``; the mark is an escaped lone surrogate, which no text
  the rules accept can hold) and decoded again, the hook turning marked keys back into ints. The rewrite
  is one regular-expression pass that takes each string whole, so text inside a string is never taken for
  a key;
* after decoding, the text is checked for a lone surrogate escape and for nesting beyond the limit, both
  with a few passes over the text in C, never a walk over the value.

Whatever this refuses raises :class:`Refused` with the reason; the caller decides whether to read the text
again in Python for a precise error. No call here is given more text than its caller chose to (see
``WINDOW`` in fastjson.py), so none holds the interpreter long.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable

from services.remoting.errors import BodyError

__all__ = ["INT64_MAX", "INT64_MIN", "MAX_NUMBER_CHARS", "Refused", "alias", "decode", "scan"]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_NUMBER_CHARS = 64


class Refused(Exception):
    """The decoder cannot give the rules' answer for this text (why, and where if known)."""

    def __init__(self, reason: str, offset: int | None = None) -> None:
        super().__init__(reason)
        self.reason, self.offset = reason, offset

    def error(self, what: str) -> BodyError:
        where = f" at offset {self.offset}" if self.offset is not None else ""
        return BodyError(f"{what} is not valid JSON{where}: {self.reason}")


#: The text of an integer as Java writes it (a bare key must be written so; -0 and 01 are not).
_CANONICAL_INT = re.compile(r"0|-?[1-9][0-9]{0,18}")


def alias(key: str | int) -> str | int | None:
    """The other spelling of a key's name: a bare key 1 and a quoted key "1" name the same thing
    (fastjson reads both into a string map as "1", and into a number map as 1)."""
    if isinstance(key, int):
        return str(key)
    if _CANONICAL_INT.fullmatch(key) is None:
        return None
    value = int(key)
    return value if INT64_MIN <= value <= INT64_MAX else None


# ------------------------------------------------------------------------------------------ hooks


def _int(token: str) -> int:
    if len(token) > MAX_NUMBER_CHARS:
        raise Refused(f"number longer than {MAX_NUMBER_CHARS} characters")
    value = int(token)
    if not INT64_MIN <= value <= INT64_MAX:
        raise Refused(f"integer {token} is outside int64")
    return value


def _float(token: str) -> float:
    if len(token) > MAX_NUMBER_CHARS:
        raise Refused(f"number longer than {MAX_NUMBER_CHARS} characters")
    value = float(token)
    if math.isinf(value):
        raise Refused(f"number {token} is out of range")
    return value


def _constant(token: str) -> None:
    raise Refused(f"{token} is not JSON")


def _unique(pairs: list[tuple[str, object]]) -> dict[str | int, object]:
    result: dict[str | int, object] = dict(pairs)
    if len(result) != len(pairs):
        raise Refused(f"duplicate key {_first_repeated(key for key, _ in pairs)!r}")
    return result


def _first_repeated(keys: Iterable[str]) -> str:
    seen: set[str] = set()
    for key in keys:
        if key in seen:
            return key
        seen.add(key)
    raise AssertionError("no key is repeated")


#: A bare key, quoted by the rewrite: the mark (an escaped lone surrogate), then the key's digits.
_MARK = "\udfff"
_MARK_TEXT = '"\\udfff'


def _marked(pairs: list[tuple[str, object]]) -> dict[str | int, object]:
    """``_unique`` for a text that had bare keys: marked keys become ints, and no two keys may share a name."""
    result: dict[str | int, object] = {}
    for key, value in pairs:
        name: str | int = _int(key[1:]) if key[:1] == _MARK else key
        if name in result or alias(name) in result:
            raise Refused(f"duplicate key {name!r}")
        result[name] = value
    return result


_PLAIN = json.JSONDecoder(parse_int=_int, parse_float=_float, parse_constant=_constant, object_pairs_hook=_unique)
_BARE = json.JSONDecoder(parse_int=_int, parse_float=_float, parse_constant=_constant, object_pairs_hook=_marked)


# ------------------------------------------------------------------------------------- bare keys

#: Either a run of anything but a bare key (strings taken whole, to their end even if unterminated), or a
#: bare key in its place: after '{' or ',', before ':'.
_KEYS = re.compile(r"""
    (?P<run>(?: [^"{,]+
              | "[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)
              | [{,](?![ \t\n\r]*(?:0|-?[1-9][0-9]*)[ \t\n\r]*:) )+)
  | (?P<at>[{,][ \t\n\r]*)(?P<key>0|-?[1-9][0-9]*)(?=[ \t\n\r]*:)""", re.DOTALL | re.VERBOSE)
#: Where a bare key may be (also inside strings: only a hint that a rewrite may help).
_KEY_SITE = re.compile(r"[{,][ \t\n\r]*-?[0-9]")
#: An escape that would read as the mark.
_MARK_LIKE = re.compile(r"\\u[dD][fF][fF][fF]")


def _quote_key(match: re.Match[str]) -> str:
    run = match[1]
    return run if run is not None else f'{match[2]}{_MARK_TEXT}{match[3]}"'


def _decoded(text: str, start: int) -> tuple[object, int]:
    """The value at ``start`` in ``text`` and where it ends, bare keys and all; raises Refused."""
    try:
        return _PLAIN.raw_decode(text, start)
    except json.JSONDecodeError as exc:
        if not _KEY_SITE.search(text) or _MARK_LIKE.search(text):
            raise Refused(exc.msg, exc.pos) from None
    except RecursionError:
        raise Refused("nested too deeply") from None
    rewritten = _KEYS.sub(_quote_key, text)
    try:
        value, end = _BARE.raw_decode(rewritten, start)
    except json.JSONDecodeError as exc:
        raise Refused(exc.msg, exc.pos - 8 * rewritten.count(_MARK_TEXT, 0, exc.pos)) from None
    except RecursionError:
        raise Refused("nested too deeply") from None
    return value, end - 8 * rewritten.count(_MARK_TEXT, 0, end)


# ------------------------------------------------------------------------------------- the checks

_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_INNERMOST = re.compile(r"\[\]|\{\}")
#: An escape of a UTF-16 surrogate: the backslashes before it are pairs (escaped backslashes), so it is one.
_SURROGATE_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*(\\u[dD][89a-fA-F][0-9a-fA-F]{2})")
_ANY_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _too_deep(text: str, limit: int) -> bool:
    """Whether ``text`` (JSON the decoder read) nests more than ``limit`` arrays and objects: its brackets
    outside strings, with the innermost pairs taken away once per level."""
    if text.count("{") + text.count("[") <= limit:
        return False
    brackets = _NOT_BRACKETS.sub("", _STRINGS.sub("", text))
    for _ in range(limit):
        if not brackets:
            return False
        brackets = _INNERMOST.sub("", brackets)
    return bool(brackets)


def _lone_surrogate(text: str) -> bool:
    """Whether ``text`` escapes a UTF-16 surrogate that is not half of a pair (a high one followed at once
    by a low one; the decoder joins those into one character)."""
    if "\\u" not in text or not _ANY_SURROGATE_ESCAPE.search(text):
        return False
    low_due = -1  # where the low half of the last high surrogate must start
    for match in _SURROGATE_ESCAPE.finditer(text):
        start, end = match.span(1)
        high = match.group(1)[3] in "89abAB"
        if low_due >= 0:
            if start != low_due or high:
                return True
            low_due = -1
        elif high:
            low_due = end
        else:
            return True
    return low_due >= 0


def _check(text: str, depth_limit: int) -> None:
    if _too_deep(text, depth_limit):
        raise Refused(f"nested deeper than the limit ({depth_limit} more levels)")
    if _lone_surrogate(text):
        raise Refused("a string holds a lone UTF-16 surrogate")


# ------------------------------------------------------------------------------------------- entry


_BLANK = re.compile(r"[ \t\n\r]*")


def decode(text: str, max_depth: int) -> object:
    """The one JSON value ``text`` holds (surrounding whitespace allowed); raises Refused."""
    value, end = _decoded(text, _blank_end(text, 0))
    after = _blank_end(text, end)
    if after != len(text):
        raise Refused("unexpected data after the value", after)
    _check(text, max_depth)
    return value


def _blank_end(text: str, pos: int) -> int:
    blank = _BLANK.match(text, pos)
    return blank.end() if blank is not None else pos


def scan(text: str, depth_limit: int) -> tuple[object, int]:
    """The value at the start of ``text`` (no whitespace before it) and where it ends, nesting at most
    ``depth_limit`` levels; raises Refused. What follows the value is not looked at."""
    value, end = _decoded(text, 0)
    _check(text[:end], depth_limit)
    return value, end
