"""The bodies of the broker's statistics and connection codes as mqadmin and the Dashboard read them: 202's
TopicStatsTable, 208's ConsumeStats, 203's ConsumerConnection, 204's ProducerConnection, 300's GroupList.

Written as fastjson writes them (bean properties in name order, enums by name). Two of them are maps keyed
by a MessageQueue, which fastjson writes with the key object itself in the key's place:
``{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"maxOffset":3,...}}}`` — not JSON. The writer
here writes that; the reader turns each such key into a quoted one before the strict reader sees the text
(an unescaped ``{"brokerName":`` can only be structure: inside a string a quote is escaped), and then
reads the key back as a MessageQueue.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from services.remoting import fastjson
from services.remoting.bodies import Body, _Obj, _str_key, _string_item
from services.remoting.broker_bodies import MessageQueue, SubscriptionData
from services.remoting.errors import BodyError

__all__ = ["Connection", "ConsumeStats", "ConsumerConnection", "GroupList", "OffsetWrapper", "ProducerConnection",
           "ResetOffsetBody", "TopicOffset", "TopicStatsTable", "java_double_json"]

#: A MessageQueue written as a map key (fastjson: its properties in name order).
_QUEUE_KEY = re.compile(r'\{("brokerName":"(?:[^"\\]|\\.)*",)?"queueId":-?[0-9]{1,10}(,"topic":"(?:[^"\\]|\\.)*")?\}(?=\s*:)')


def java_double_json(value: float) -> str:
    """A double as fastjson writes one (``0.0``, ``12.5``)."""
    return repr(float(value))


def _queue_table(table: Mapping[MessageQueue, Body]) -> str:
    parts = [f"{fastjson.dumps(q.to_json())}:{fastjson.dumps(v.to_json())}" for q, v in sorted(table.items())]
    return "{" + ",".join(parts) + "}"


def _quote_queue_keys(text: str) -> str:
    return _QUEUE_KEY.sub(lambda m: json.dumps(m.group(0)), text)


def _queue_keys(obj: _Obj, key: str) -> list[tuple[MessageQueue, str, Any]]:
    result = []
    for name, path, item in obj.entries(key):
        text = _str_key(name, path)
        try:
            queue = MessageQueue.read(_Obj(json.loads(text), f"{path} (key)"))
        except ValueError:
            raise BodyError(f"{path}: key is not a message queue") from None
        result.append((queue, path, item))
    return result


def _queue_entries(obj: _Obj, key: str) -> list[tuple[MessageQueue, _Obj]]:
    return [(queue, _Obj(item, path)) for queue, path, item in _queue_keys(obj, key)]


def _number(obj: _Obj, key: str) -> float:
    value = obj.data.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BodyError(f"{obj.at(key)} is {fastjson.describe(value)}, not a number")
    return float(value)


class _QueueTableBody(Body):
    """A body holding an ``offsetTable`` keyed by MessageQueue (see the module's docstring)."""

    @classmethod
    def decode(cls, data: bytes, *, max_bytes: int = fastjson.DEFAULT_MAX_BYTES) -> Self:
        if len(data) > max_bytes:
            raise BodyError(f"body is {len(data)} bytes, more than the limit of {max_bytes}")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise BodyError("body is not UTF-8") from None
        return cls.read(_Obj(fastjson.loads(_quote_queue_keys(text), max_bytes=2 * max_bytes), ""))


@dataclass(frozen=True)
class TopicOffset(Body):
    """admin/TopicOffset: one queue's bounds and when it was last written."""

    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"lastUpdateTimestamp": self.last_update_timestamp, "maxOffset": self.max_offset,
                "minOffset": self.min_offset}

    @classmethod
    def read(cls, obj: _Obj) -> TopicOffset:
        return cls(*(obj.integer(k, "int64", 0) or 0 for k in ("minOffset", "maxOffset", "lastUpdateTimestamp")))


@dataclass(frozen=True)
class TopicStatsTable(_QueueTableBody):
    """admin/TopicStatsTable: the answer to 202 GET_TOPIC_STATS_INFO."""

    offset_table: Mapping[MessageQueue, TopicOffset] = field(default_factory=dict)
    topic_put_tps: float = 0.0

    def to_json(self) -> dict[str, Any]:  # the queue-keyed table is written by encode
        return {"topicPutTps": self.topic_put_tps}

    def encode(self, *, standard: bool = False) -> bytes:
        return (f'{{"offsetTable":{_queue_table(self.offset_table)},'
                f'"topicPutTps":{java_double_json(self.topic_put_tps)}}}').encode()

    @classmethod
    def read(cls, obj: _Obj) -> TopicStatsTable:
        return cls({q: TopicOffset.read(o) for q, o in _queue_entries(obj, "offsetTable")}, _number(obj, "topicPutTps"))


@dataclass(frozen=True)
class OffsetWrapper(Body):
    """admin/OffsetWrapper: one queue as a consumer group sees it."""

    broker_offset: int = 0
    consumer_offset: int = 0
    pull_offset: int = 0
    last_timestamp: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"brokerOffset": self.broker_offset, "consumerOffset": self.consumer_offset,
                "lastTimestamp": self.last_timestamp, "pullOffset": self.pull_offset}

    @classmethod
    def read(cls, obj: _Obj) -> OffsetWrapper:
        return cls(*(obj.integer(k, "int64", 0) or 0
                     for k in ("brokerOffset", "consumerOffset", "pullOffset", "lastTimestamp")))


@dataclass(frozen=True)
class ConsumeStats(_QueueTableBody):
    """admin/ConsumeStats: the answer to 208 GET_CONSUME_STATS."""

    offset_table: Mapping[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"consumeTps": self.consume_tps}

    def encode(self, *, standard: bool = False) -> bytes:
        return (f'{{"consumeTps":{java_double_json(self.consume_tps)},'
                f'"offsetTable":{_queue_table(self.offset_table)}}}').encode()

    @classmethod
    def read(cls, obj: _Obj) -> ConsumeStats:
        return cls({q: OffsetWrapper.read(o) for q, o in _queue_entries(obj, "offsetTable")}, _number(obj, "consumeTps"))

    def total_diff(self) -> int:
        """ConsumeStats.computeTotalDiff."""
        return sum(w.broker_offset - w.consumer_offset for w in self.offset_table.values())


@dataclass(frozen=True)
class ResetOffsetBody(_QueueTableBody):
    """body/ResetOffsetBody: the answer to 222 INVOKE_BROKER_TO_RESET_OFFSET, each queue reset and its new offset."""

    offset_table: Mapping[MessageQueue, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:  # the queue-keyed table is written by encode
        return {}

    def encode(self, *, standard: bool = False) -> bytes:
        parts = [f"{fastjson.dumps(q.to_json())}:{int(v)}" for q, v in sorted(self.offset_table.items())]
        return ('{"offsetTable":{' + ",".join(parts) + "}}").encode()

    @classmethod
    def read(cls, obj: _Obj) -> ResetOffsetBody:
        table: dict[MessageQueue, int] = {}
        for queue, path, number in _queue_keys(obj, "offsetTable"):
            if isinstance(number, bool) or not isinstance(number, int) or not -(2**63) <= number < 2**63:
                raise BodyError(f"{path} is {fastjson.describe(number)}, not an offset")
            table[queue] = number
        return cls(table)


@dataclass(frozen=True, order=True)
class Connection(Body):
    """body/Connection: one client on one connection."""

    client_id: str | None
    client_addr: str | None
    language: str | None = "JAVA"
    version: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"clientAddr": self.client_addr, "clientId": self.client_id, "language": self.language,
                "version": self.version}

    @classmethod
    def read(cls, obj: _Obj) -> Connection:
        return cls(obj.string("clientId"), obj.string("clientAddr"), obj.string("language"),
                   obj.integer("version", "int32", 0) or 0)


def _connections(obj: _Obj) -> tuple[Connection, ...]:
    return tuple(Connection.read(_Obj(item, path)) for path, item in obj.items("connectionSet"))


@dataclass(frozen=True)
class ConsumerConnection(Body):
    """body/ConsumerConnection: the answer to 203 GET_CONSUMER_CONNECTION_LIST."""

    connection_set: tuple[Connection, ...] = ()
    subscription_table: Mapping[str, SubscriptionData] = field(default_factory=dict)
    consume_type: str | None = None
    message_model: str | None = None
    consume_from_where: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"connectionSet": [c.to_json() for c in self.connection_set],
                "consumeFromWhere": self.consume_from_where, "consumeType": self.consume_type,
                "messageModel": self.message_model,
                "subscriptionTable": {t: s.to_json() for t, s in self.subscription_table.items()}}

    @classmethod
    def read(cls, obj: _Obj) -> ConsumerConnection:
        subs = {_str_key(name, path): SubscriptionData.read(_Obj(item, path))
                for name, path, item in obj.entries("subscriptionTable")}
        return cls(_connections(obj), subs, obj.string("consumeType"), obj.string("messageModel"),
                   obj.string("consumeFromWhere"))

    def min_version(self) -> int:
        """ConsumerConnection.computeMinVersion (Integer.MAX_VALUE with no connection)."""
        return min((c.version for c in self.connection_set), default=2**31 - 1)


@dataclass(frozen=True)
class ProducerConnection(Body):
    """body/ProducerConnection: the answer to 204 GET_PRODUCER_CONNECTION_LIST."""

    connection_set: tuple[Connection, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"connectionSet": [c.to_json() for c in self.connection_set]}

    @classmethod
    def read(cls, obj: _Obj) -> ProducerConnection:
        return cls(_connections(obj))


@dataclass(frozen=True)
class GroupList(Body):
    """body/GroupList: the answer to 300 QUERY_TOPIC_CONSUME_BY_WHO."""

    group_list: frozenset[str] = frozenset()

    def to_json(self) -> dict[str, Any]:
        return {"groupList": self.group_list}

    @classmethod
    def read(cls, obj: _Obj) -> GroupList:
        return cls(frozenset(_string_item(item, path) for path, item in obj.items("groupList")))
