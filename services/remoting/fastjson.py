"""JSON as RocketMQ writes it with fastjson 1.x: a strict reader with one extension, and a matching writer.

The one extension: fastjson writes a map whose keys are not strings with the keys bare, so a
``HashMap<Long, String>`` such as ``BrokerData.brokerAddrs`` comes out as ``{0:"10.0.0.1:10911"}``.
``loads`` accepts a bare (optionally negative) decimal integer as an object key and returns it as an
int; a quoted key stays a string. Nothing else outside RFC 8259 is accepted: no single quotes, no bare
words, no comments, no trailing commas, no NaN/Infinity, no control characters or lone surrogates in
strings, no duplicate keys, no integers outside int64. The reader is written here rather than built
on ``json`` alone because ``json`` accepts NaN, Infinity, duplicate keys and lone surrogates, and cannot be
taught bare keys without a rewriting pass that could be fooled by what strings contain; ``json`` is used
as a fast path for the clean inputs on which both agree.

``dumps`` writes what fastjson writes for our values: compact, object keys sorted (fastjson sorts bean
fields by name; a Java HashMap's order is unspecified, so sorted is as good as any), int keys bare, sets
as sorted arrays, None-valued entries left out (fastjson skips null fields and null map values).
``standard=True`` writes what RocketMQ's name server sends a requester that asked for standard JSON
(``BrowserCompatible``): int keys quoted and non-ASCII characters escaped.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import TypeAlias

from services.remoting.errors import BodyError

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_DEPTH", "JsonValue", "describe", "dumps", "loads"]

JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str | int, "JsonValue"] | None

#: RocketMQ's largest frame (16 MiB): no body can be larger.
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
#: Far deeper than any RocketMQ body (five levels at most) and far below Python's recursion limit.
DEFAULT_MAX_DEPTH = 32

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_MAX_NUMBER_CHARS = 64

_WS = re.compile(r"[ \t\n\r]*")
# The loop is unrolled (plain run, then escape + plain run) so that an unterminated string fails in
# linear time instead of backtracking.
_STRING = re.compile(r'"[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*"')
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_BARE_KEY = re.compile(r"-?(?:0|[1-9][0-9]*)(?![0-9.eE])")
_SURROGATE = re.compile("[\ud800-\udfff]")
_LITERALS: dict[str, JsonValue] = {"true": True, "false": False, "null": None}


def describe(value: object) -> str:
    """A parsed value's JSON type with its article, for error messages ("an integer", "null")."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
             float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def loads(data: bytes | str, *, max_bytes: int = DEFAULT_MAX_BYTES, max_depth: int = DEFAULT_MAX_DEPTH,
          what: str = "body") -> JsonValue:
    """Parse one JSON value (surrounding whitespace allowed). Raises ``BodyError`` naming ``what``."""
    if len(data) > max_bytes:
        raise BodyError(f"{what} is {len(data)} bytes, more than the limit of {max_bytes}")
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BodyError(f"{what} is not UTF-8 (byte {exc.start})") from None
    else:
        text = data
    try:
        return _fast(text, max_depth)
    except _Fallback:
        return _Parser(text, max_depth, what).document()


# ------------------------------------------------------------------------------ the fast path
#
# Python's json module (in C) parses clean standard JSON about ten times faster than the parser below.
# It is only trusted where it agrees with that parser: any input it refuses, and any it would accept
# differently (NaN and Infinity, numbers out of range or too long, escaped surrogates, duplicate keys,
# nesting beyond the limit), falls back to the full parser, which also gives the precise error.


class _Fallback(Exception):
    """The fast path met something only the full parser may judge."""


def _fast(text: str, max_depth: int) -> JsonValue:
    if ("\\u" in text and _ESCAPED_SURROGATE.search(text)) or (not text.isascii() and _RAW_SURROGATE.search(text)):
        raise _Fallback
    try:
        value: JsonValue = _DECODER.decode(text)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        raise _Fallback from None
    # a text with few brackets cannot nest deeply; only one with many needs its depth measured
    if text.count("{") + text.count("[") > max_depth and _depth(value) > max_depth:
        raise _Fallback
    return value


#: An escaped surrogate (its literal prefix makes the search fast), and a surrogate itself (only in a str
#: given to loads; decoded UTF-8 never holds one).
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89abcdefABCDEF]")
_RAW_SURROGATE = re.compile("[\ud800-\udfff]")


def _fast_int(token: str) -> int:
    if len(token) > _MAX_NUMBER_CHARS:
        raise _Fallback
    value = int(token)
    if not INT64_MIN <= value <= INT64_MAX:
        raise _Fallback
    return value


def _fast_float(token: str) -> float:
    value = float(token)
    if len(token) > _MAX_NUMBER_CHARS or math.isinf(value):
        raise _Fallback
    return value


def _no_constant(token: str) -> None:
    raise _Fallback  # NaN, Infinity, -Infinity


def _unique_pairs(pairs: list[tuple[str, JsonValue]]) -> dict[str | int, JsonValue]:
    result: dict[str | int, JsonValue] = dict(pairs)
    if len(result) != len(pairs):
        raise _Fallback
    return result


#: One decoder with the hooks, built once (json.loads with hooks builds a new one on every call).
_DECODER = json.JSONDecoder(parse_int=_fast_int, parse_float=_fast_float, parse_constant=_no_constant,
                            object_pairs_hook=_unique_pairs)


def _depth(value: JsonValue) -> int:
    """How many arrays and objects deep ``value`` nests (0 for a scalar), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in children)
    return deepest


class _Parser:
    def __init__(self, text: str, max_depth: int, what: str) -> None:
        self.text, self.pos, self.max_depth, self.what = text, 0, max_depth, what

    def fail(self, problem: str) -> BodyError:
        return BodyError(f"{self.what} is not valid JSON at offset {self.pos}: {problem}")

    def skip_ws(self) -> None:
        blank = _WS.match(self.text, self.pos)
        if blank is not None:  # always, the pattern matches the empty string
            self.pos = blank.end()

    def peek(self) -> str:
        self.skip_ws()
        return self.text[self.pos:self.pos + 1]

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise self.fail(f"expected '{char}'")
        self.pos += 1

    def document(self) -> JsonValue:
        value = self.value(0)
        if self.peek():
            raise self.fail("unexpected data after the value")
        return value

    def value(self, depth: int) -> JsonValue:
        char = self.peek()
        if char == "{" or char == "[":
            if depth >= self.max_depth:
                raise self.fail(f"nested deeper than {self.max_depth} levels")
            return self.object(depth + 1) if char == "{" else self.array(depth + 1)
        if char == '"':
            return self.string()
        if char and char in "-0123456789":
            return self.number()
        for word, literal in _LITERALS.items():
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return literal
        raise self.fail("expected a value" if char else "unexpected end of data")

    def object(self, depth: int) -> dict[str | int, JsonValue]:
        self.pos += 1
        result: dict[str | int, JsonValue] = {}
        if self.peek() == "}":
            self.pos += 1
            return result
        while True:
            key_at = self.pos
            key = self.key()
            if key in result:
                self.pos = key_at
                raise self.fail(f"duplicate key {key!r}")
            self.expect(":")
            result[key] = self.value(depth)
            if self.peek() == ",":
                self.pos += 1
                continue
            self.expect("}")
            return result

    def key(self) -> str | int:
        if self.peek() == '"':
            return self.string()
        match = _BARE_KEY.match(self.text, self.pos)
        if match is None:
            raise self.fail("expected a string or an integer key")
        self.pos = match.end()
        return self.integer(match.group())

    def array(self, depth: int) -> list[JsonValue]:
        self.pos += 1
        result: list[JsonValue] = []
        if self.peek() == "]":
            self.pos += 1
            return result
        while True:
            result.append(self.value(depth))
            if self.peek() == ",":
                self.pos += 1
                continue
            self.expect("]")
            return result

    def string(self) -> str:
        match = _STRING.match(self.text, self.pos)
        if match is None:
            raise self.fail("unterminated string, or a control character or bad escape in it")
        token = match.group()
        value: str = json.loads(token) if "\\" in token else token[1:-1]
        if _SURROGATE.search(value):
            raise self.fail("a string holds a lone UTF-16 surrogate")
        self.pos = match.end()
        return value

    def number(self) -> int | float:
        match = _NUMBER.match(self.text, self.pos)
        if match is None:
            raise self.fail("malformed number")
        token = match.group()
        if len(token) > _MAX_NUMBER_CHARS:
            raise self.fail(f"number longer than {_MAX_NUMBER_CHARS} characters")
        if match.group(1) is None and match.group(2) is None:
            value: int | float = self.integer(token)
        else:
            value = float(token)
            if math.isinf(value):
                raise self.fail(f"number {token} is out of range")
        self.pos = match.end()
        return value

    def integer(self, token: str) -> int:
        if len(token) > _MAX_NUMBER_CHARS:
            raise self.fail(f"number longer than {_MAX_NUMBER_CHARS} characters")
        value = int(token)
        if not INT64_MIN <= value <= INT64_MAX:
            raise self.fail(f"integer {token} is outside int64")
        return value


# ------------------------------------------------------------------------------------------ writing


def dumps(value: object, *, standard: bool = False) -> str:
    """Compact JSON of ``value`` (None, bool, int, finite float, str, list/tuple, set/frozenset, or a
    mapping with str or int keys), written as fastjson writes it. ``TypeError`` for any other type,
    ``ValueError`` for a value JSON cannot hold (NaN, infinity, a lone surrogate)."""
    parts: list[str] = []
    _write(value, parts, standard)
    return "".join(parts)


def _write(value: object, out: list[str], standard: bool) -> None:
    if value is None or isinstance(value, bool):
        out.append({None: "null", True: "true", False: "false"}[value])
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} has no JSON form")
        out.append(repr(value))
    elif isinstance(value, str):
        out.append(_quote(value, standard))
    elif isinstance(value, Mapping):
        _write_object(value, out, standard)
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        out.append("[")
        for index, item in enumerate(items):
            if index:
                out.append(",")
            _write(item, out, standard)
        out.append("]")
    else:
        raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _write_object(value: Mapping[object, object], out: list[str], standard: bool) -> None:
    keys: list[str | int] = []
    for key in value:
        if isinstance(key, bool) or not isinstance(key, (str, int)):
            raise TypeError(f"object keys must be str or int, got {key!r}")
        keys.append(key)
    out.append("{")
    first = True
    for key in sorted(keys, key=lambda k: (isinstance(k, str), k)):
        item = value[key]
        if item is None:
            continue
        if not first:
            out.append(",")
        first = False
        out.append(_quote(key, standard) if isinstance(key, str) or standard else str(key))
        out.append(":")
        _write(item, out, standard)
    out.append("}")


def _quote(text: str | int, standard: bool) -> str:
    if _SURROGATE.search(str(text)):
        raise ValueError("a string holds a lone UTF-16 surrogate, which has no UTF-8 form")
    return json.dumps(str(text), ensure_ascii=standard)
