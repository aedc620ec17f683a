"""JSON laid out as mqadmin prints an object with ``toJson(true)``: fastjson's pretty format, which differs
between RocketMQ 5.3 (fastjson 1.x) and 5.4 on (fastjson2).

What is written is a tree of :class:`Bean` (a Java object: its non-null fields, sorted by name), ``dict``
(a Java map, its entries in the order given), lists and scalars. Both libraries indent with one tab per
level, write ``"key":value`` without spaces and leave out null fields. They differ in maps: fastjson 1.x
writes a map's entries on the line of its opening brace and closes it on a line of its own
(``{0:"a",1:"b"`` then ``}``); fastjson2 puts each entry on a line of its own, as for a bean. An empty
map or list is ``{}`` or ``[]`` in both. A map's integer keys are bare, as both write a ``Map<Long, …>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.remoting import fastjson

__all__ = ["FASTJSON2_FROM_VERSION", "Bean", "pretty"]

#: The first RemotingCommand version ordinal (MQVersion V5_4_0_SNAPSHOT) whose tools write with fastjson2.
FASTJSON2_FROM_VERSION = 492


@dataclass(frozen=True)
class Bean:
    """A Java object's fields by name (None: a null field, not written)."""

    fields: Mapping[str, Any]


def pretty(value: Any, fastjson2: bool) -> str:
    """``value`` as ``JSON.toJSONString(value, prettyFormat)`` lays it out (no final newline)."""
    out: list[str] = []
    _write(value, 0, fastjson2, out)
    return "".join(out)


def _write(value: Any, depth: int, fastjson2: bool, out: list[str]) -> None:
    if isinstance(value, Bean):
        entries = [(name, value.fields[name]) for name in sorted(value.fields) if value.fields[name] is not None]
        _block("{", "}", [(f"{fastjson.dumps(name)}:", item) for name, item in entries], depth, fastjson2, out,
               inline=False)
    elif isinstance(value, Mapping):
        entries = [(f"{key if isinstance(key, int) else fastjson.dumps(key)}:", item)
                   for key, item in value.items() if item is not None]
        _block("{", "}", entries, depth, fastjson2, out, inline=not fastjson2)
    elif isinstance(value, (list, tuple)):
        _block("[", "]", [("", item) for item in value], depth, fastjson2, out, inline=False)
    else:
        out.append(fastjson.dumps(value))


def _block(opening: str, closing: str, entries: list[tuple[str, Any]], depth: int, fastjson2: bool,
           out: list[str], inline: bool) -> None:
    out.append(opening)
    if not entries:
        out.append(closing)
        return
    for index, (prefix, item) in enumerate(entries):
        if index:
            out.append(",")
        if not inline:
            out.append("\n" + "\t" * (depth + 1))
        out.append(prefix)
        _write(item, depth + 1, fastjson2, out)
    out.append("\n" + "\t" * depth + closing)
