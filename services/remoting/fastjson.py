"""JSON as RocketMQ writes it with fastjson 1.x: a strict reader with one extension, and a matching writer.

The one extension: fastjson writes a map whose keys are not strings with the keys bare, so a
``HashMap<Long, String>`` such as ``BrokerData.brokerAddrs`` comes out as ``{0:"10.0.0.1:10911"}``.
``loads`` accepts a bare decimal integer key written as Java writes a number (``0``, ``-12``; not ``-0``,
``01``, ``+1`` or ``1.0``) and returns it as an int; a quoted key stays a string. A bare and a quoted key
that name the same thing (``1`` and ``"1"``: fastjson reads both as "1" into a string map and as 1 into
a number map) are duplicates. Nothing else outside RFC 8259 is accepted: no single quotes, no bare
words, no comments, no trailing commas, no NaN/Infinity, no control characters or lone surrogates in
strings, no duplicate keys, no integers outside int64.

Reading is done by Python's decoder in C wherever it gives the same answer (``jsonscan.py`` holds it to
these rules); the reader here words the errors, and reads what the decoder cannot. A text longer than
``WINDOW`` is never handed to the decoder whole: each object or array is given to it in a window of at
most ``WINDOW`` characters, and only what does not fit is walked here, so the cost stays linear and no
single call into C holds the interpreter for long (what a worker thread beside an event loop needs).

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
from typing import TypeAlias, cast

from services.remoting import jsonscan
from services.remoting.errors import BodyError
from services.remoting.jsonscan import INT64_MAX, INT64_MIN, alias

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_DEPTH", "WINDOW", "JsonValue", "describe", "dumps", "loads", "release"]

JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str | int, "JsonValue"] | None

#: RocketMQ's largest frame (16 MiB): no body can be larger.
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
#: Far deeper than any RocketMQ body (five levels at most) and far below Python's recursion limit.
DEFAULT_MAX_DEPTH = 32

#: The most text the C decoder is given in one call (16 KiB of the densest JSON is about a millisecond).
WINDOW = 16 * 1024
#: A window's first size; it then follows the size of what the reader meets.
_FIRST_WINDOW = 512

_MAX_NUMBER_CHARS = jsonscan.MAX_NUMBER_CHARS

_WS = re.compile(r"[ \t\n\r]*")
# The loop is unrolled (plain run, then escape + plain run) so that an unterminated string fails in
# linear time instead of backtracking.
_STRING = re.compile(r'"[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*"')
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_BARE_KEY = re.compile(r"(?:0|-?[1-9][0-9]*)(?![0-9.eE])")
_NEGATIVE_ZERO = re.compile(r"-0(?![0-9.eE])")
_SURROGATE = re.compile("[\ud800-\udfff]")
_LITERALS: dict[str, JsonValue] = {"true": True, "false": False, "null": None}


def describe(value: object) -> str:
    """A parsed value's JSON type with its article, for error messages ("an integer", "null")."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
             float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def loads(data: bytes | str, *, max_bytes: int = DEFAULT_MAX_BYTES, max_depth: int = DEFAULT_MAX_DEPTH,
          what: str = "body", fallback_limit: int | None = None) -> JsonValue:
    """Parse one JSON value (surrounding whitespace allowed). Raises ``BodyError`` naming ``what``.

    The cost is linear in the text, and no single call into C is given more than ``WINDOW`` characters.
    A text that Python's decoder refuses is read again here for a precise error, unless it is longer
    than ``fallback_limit``: it is then refused with the decoder's own reason (what a caller on an event
    loop passes, so that a malformed text costs no more than the decoder's pass)."""
    if len(data) > max_bytes:
        raise BodyError(f"{what} is {len(data)} bytes, more than the limit of {max_bytes}")
    text = _text(data, what)
    if not text.isascii() and _SURROGATE.search(text):
        return _Parser(text, max_depth, what).document()  # a str given to loads: never text off the wire
    if len(text) > WINDOW:
        return _Windowed(text, max_depth, what).document()
    try:
        return cast(JsonValue, jsonscan.decode(text, max_depth))
    except jsonscan.Refused as refused:
        if fallback_limit is not None and len(text) > fallback_limit:
            raise refused.error(what) from None
    return _Parser(text, max_depth, what).document()


def _text(data: bytes | str, what: str) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyError(f"{what} is not UTF-8 (byte {exc.start})") from None


def release(value: JsonValue) -> None:
    """Take a parsed value apart one item at a time. Freed at once, a value of a million items holds the
    interpreter for tens of milliseconds (and a thread's event loop beside it); freed here, the interpreter
    can pass to another thread between any two items. What other references hold (a string, an object
    a reader kept) lives on; only the containers of ``value`` are emptied."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            while item:
                child = item.pop()
                if isinstance(child, (list, dict)) and child:
                    stack.append(child)
        elif isinstance(item, dict):
            while item:
                child = item.popitem()[1]
                if isinstance(child, (list, dict)) and child:
                    stack.append(child)


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
            release(value)
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
        try:
            while True:
                self.more_entries(result, depth)
                self.entry(result, depth)
                if self.peek() == ",":
                    self.pos += 1
                    continue
                self.expect("}")
                return result
        except BodyError:
            release(result)  # what was read so far may be large: not freed in one go
            raise

    def entry(self, result: dict[str | int, JsonValue], depth: int) -> None:
        key_at = self.pos
        key = self.key()
        if key in result or alias(key) in result:
            self.pos = key_at
            same = "" if key in result else f" (the same name as {alias(key)!r})"
            raise self.fail(f"duplicate key {key!r}{same}")
        self.expect(":")
        result[key] = self.value(depth)

    def more_entries(self, result: dict[str | int, JsonValue], depth: int) -> None:
        """Take several entries of the object being read at once, if there is a quicker way (see _Windowed)."""

    def more_items(self, result: list[JsonValue], depth: int) -> None:
        """Take several items of the array being read at once, if there is a quicker way (see _Windowed)."""

    def key(self) -> str | int:
        if self.peek() == '"':
            return self.string()
        match = _BARE_KEY.match(self.text, self.pos)
        if match is None:
            if _NEGATIVE_ZERO.match(self.text, self.pos):
                raise self.fail("bare key -0: a number key is written as Java writes it (0)")
            raise self.fail("expected a string or an integer key")
        self.pos = match.end()
        return self.integer(match.group())

    def array(self, depth: int) -> list[JsonValue]:
        self.pos += 1
        result: list[JsonValue] = []
        if self.peek() == "]":
            self.pos += 1
            return result
        try:
            while True:
                self.more_items(result, depth)
                result.append(self.value(depth))
                if self.peek() == ",":
                    self.pos += 1
                    continue
                self.expect("]")
                return result
        except BodyError:
            release(result)
            raise

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


class _Missing:
    """What the windowed reader gets where the C decoder could not read a value."""


_MISSING = _Missing()


class _Windowed(_Parser):
    """The reader for a text longer than ``WINDOW``. The C decoder reads for it in windows of at most
    ``WINDOW`` characters: each object or array it meets goes to the decoder whole if it fits a window;
    one that does not is read here, the decoder taking its members a window at a time (the text up to
    the last comma of the window, closed as an array or an object of its own, read back only if it reads
    to the end). What the decoder refuses is read here, so the errors are the reader's own, at the same
    offsets."""

    def __init__(self, text: str, max_depth: int, what: str, widest: int = WINDOW,
                 first: int = _FIRST_WINDOW) -> None:
        super().__init__(text, max_depth, what)
        self.widest, self.first = widest, first
        self.window = first  # for one whole value
        self.run = first  # for a run of members

    def value(self, depth: int) -> JsonValue:
        if self.peek() in ("{", "[") and depth < self.max_depth:
            got = self.whole(depth)
            if not isinstance(got, _Missing):
                return got
        return super().value(depth)

    def whole(self, depth: int) -> JsonValue | _Missing:
        start = self.pos
        while True:
            end = start + self.window
            try:
                value, size = jsonscan.scan(self.text[start:end], self.max_depth - depth)
            except jsonscan.Refused:
                if end < len(self.text) and self.window < self.widest:  # cut short: a wider one may hold it
                    self.window = min(self.widest, self.window * 4)
                    continue
                self.window = self.first  # read here: its members are smaller
                return _MISSING
            self.pos = start + size
            self.window = max(self.first, min(self.widest, size * 4))
            return cast(JsonValue, value)

    def members(self, opener: str, closer: str, depth: int) -> JsonValue | _Missing:
        start = self.pos
        chunk = self.text[start:start + self.run]
        cut = chunk.rfind(",")
        text = opener + chunk[:cut] + closer
        try:
            value, size = jsonscan.scan(text, self.max_depth - depth + 1) if cut > 0 else (None, -1)
        except jsonscan.Refused:
            value, size = None, -1
        if size != len(text) or not value:  # not read to its end, or empty (a lone comma is no member)
            self.run = max(self.first // 4, self.run // 2)
            return _MISSING
        self.pos = start + cut + 1
        self.run = min(self.widest, self.run * 2)
        return cast(JsonValue, value)

    def more_items(self, result: list[JsonValue], depth: int) -> None:
        items = self.members("[", "]", depth)
        if isinstance(items, list):
            result.extend(items)

    def more_entries(self, result: dict[str | int, JsonValue], depth: int) -> None:
        start = self.pos
        entries = self.members("{", "}", depth)
        if not isinstance(entries, dict):
            return
        if any(key in result or alias(key) in result for key in entries):
            self.pos = start  # a repeated key: read one by one, to be refused where it is
            return
        result.update(entries)


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
