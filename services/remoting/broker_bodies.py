"""The JSON bodies of the client calls a broker serves: heartbeats, consumer lists, offsets, queue locks, HA
status.

Written as fastjson writes the RocketMQ classes (see bodies.py: bean properties sorted by name, nulls left
out, Integer map keys bare) and read with the same path-naming checks. Reading also accepts what the C++
client writes for the same classes: enums by their number (``"consumeType":1``) as well as by name, and
``subVersion`` as a decimal string; fastjson reads both forms too.

Every list in a heartbeat is bounded (``MAX_ITEMS``): a heartbeat is the client describing itself, a few
groups and topics, and a body that claims more is refused rather than kept.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from services.remoting.bodies import Body, _array, _integer, _Obj, _string_item
from services.remoting.errors import BodyError
from services.remoting.fastjson import JsonValue, describe

__all__ = [
    "MAX_ITEMS",
    "ConsumerData",
    "ConsumerOffsetSerializeWrapper",
    "GetConsumerListByGroupResponseBody",
    "HAClientRuntimeInfo",
    "HAConnectionRuntimeInfo",
    "HARuntimeInfo",
    "HeartbeatData",
    "LockBatchRequestBody",
    "LockBatchResponseBody",
    "MessageQueue",
    "ProducerData",
    "SubscriptionData",
    "UnlockBatchRequestBody",
]

#: The most elements any list or map of these bodies may hold.
MAX_ITEMS = 1000

_DECIMAL = re.compile(r"-?[0-9]{1,19}")
#: A quoted queue id, written as a bare one is (ASCII digits, no leading zero).
_QUEUE_KEY = re.compile(r"0|[1-9][0-9]{0,9}")

CONSUME_TYPES = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "CONSUME_POP")
MESSAGE_MODELS = ("BROADCASTING", "CLUSTERING")
CONSUME_FROM = ("CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
                "CONSUME_FROM_MIN_OFFSET", "CONSUME_FROM_MAX_OFFSET", "CONSUME_FROM_FIRST_OFFSET",
                "CONSUME_FROM_TIMESTAMP")


def _items(obj: _Obj, key: str, limit: int = MAX_ITEMS) -> list[tuple[str, JsonValue]]:
    items = obj.items(key)
    if len(items) > limit:
        raise BodyError(f"{obj.at(key)} holds {len(items)} elements, more than {limit}")
    return items


def _enum(obj: _Obj, key: str, names: tuple[str, ...]) -> str | None:
    """An enum as fastjson reads one: its name, or its ordinal (what the C++ client writes)."""
    value = obj.data.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        if value not in names:
            raise BodyError(f"{obj.at(key)} is {value[:40]!r}, not one of {', '.join(names)}")
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(names):
        return names[value]
    raise BodyError(f"{obj.at(key)} is {describe(value)}, not one of {', '.join(names)} or its ordinal")


def _long_or_text(obj: _Obj, key: str) -> int:
    """A long that some clients send as a decimal string (the C++ client's ``subVersion``)."""
    value = obj.data.get(key)
    if isinstance(value, str):
        if _DECIMAL.fullmatch(value) is None:
            raise BodyError(f"{obj.at(key)} is {value[:40]!r}, not a number")
        value = int(value)
    return _integer(value, obj.at(key), "int64") or 0


def _strings(obj: _Obj, key: str) -> frozenset[str]:
    return frozenset(_string_item(item, path) for path, item in _items(obj, key))


def _ints(obj: _Obj, key: str) -> frozenset[int]:
    result = set()
    for path, item in _items(obj, key):
        value = _integer(item, path, "int32")
        if value is None:
            raise BodyError(f"{path} is null, not an integer")
        result.add(value)
    return frozenset(result)


# ------------------------------------------------------------------------------------------ heartbeat


@dataclass(frozen=True)
class SubscriptionData(Body):
    """heartbeat/SubscriptionData: one topic a consumer group subscribes to, and its filter expression."""

    topic: str | None
    sub_string: str | None
    tags_set: frozenset[str] = frozenset()
    code_set: frozenset[int] = frozenset()
    sub_version: int = 0
    class_filter_mode: bool = False
    expression_type: str | None = "TAG"

    def to_json(self) -> dict[str, Any]:
        return {"classFilterMode": self.class_filter_mode, "codeSet": self.code_set,
                "expressionType": self.expression_type, "subString": self.sub_string,
                "subVersion": self.sub_version, "tagsSet": self.tags_set, "topic": self.topic}

    @classmethod
    def read(cls, obj: _Obj) -> SubscriptionData:
        return cls(obj.string("topic"), obj.string("subString"), _strings(obj, "tagsSet"), _ints(obj, "codeSet"),
                   _long_or_text(obj, "subVersion"), bool(obj.boolean("classFilterMode", False)),
                   obj.string("expressionType"))


@dataclass(frozen=True)
class ConsumerData(Body):
    """heartbeat/ConsumerData: one consumer group of the client, with its subscriptions."""

    group_name: str | None
    consume_type: str | None = None
    message_model: str | None = None
    consume_from_where: str | None = None
    subscription_data_set: tuple[SubscriptionData, ...] = ()
    unit_mode: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"consumeFromWhere": self.consume_from_where, "consumeType": self.consume_type,
                "groupName": self.group_name, "messageModel": self.message_model,
                "subscriptionDataSet": [s.to_json() for s in self.subscription_data_set],
                "unitMode": self.unit_mode}

    @classmethod
    def read(cls, obj: _Obj) -> ConsumerData:
        subs = tuple(SubscriptionData.read(_Obj(item, path)) for path, item in _items(obj, "subscriptionDataSet"))
        return cls(obj.string("groupName"), _enum(obj, "consumeType", CONSUME_TYPES),
                   _enum(obj, "messageModel", MESSAGE_MODELS), _enum(obj, "consumeFromWhere", CONSUME_FROM),
                   subs, bool(obj.boolean("unitMode", False)))


@dataclass(frozen=True)
class ProducerData(Body):
    """heartbeat/ProducerData."""

    group_name: str | None

    def to_json(self) -> dict[str, Any]:
        return {"groupName": self.group_name}

    @classmethod
    def read(cls, obj: _Obj) -> ProducerData:
        return cls(obj.string("groupName"))


@dataclass(frozen=True)
class HeartbeatData(Body):
    """heartbeat/HeartbeatData: the body of 34 HEART_BEAT, what a client says about itself."""

    client_id: str | None
    producer_data_set: tuple[ProducerData, ...] = ()
    consumer_data_set: tuple[ConsumerData, ...] = ()
    heartbeat_fingerprint: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"clientID": self.client_id, "consumerDataSet": [c.to_json() for c in self.consumer_data_set],
                "heartbeatFingerprint": self.heartbeat_fingerprint,
                "producerDataSet": [p.to_json() for p in self.producer_data_set]}

    @classmethod
    def read(cls, obj: _Obj) -> HeartbeatData:
        producers = tuple(ProducerData.read(_Obj(item, path)) for path, item in _items(obj, "producerDataSet"))
        consumers = tuple(ConsumerData.read(_Obj(item, path)) for path, item in _items(obj, "consumerDataSet"))
        return cls(obj.string("clientID"), producers, consumers,
                   obj.integer("heartbeatFingerprint", "int32", 0) or 0)


@dataclass(frozen=True)
class GetConsumerListByGroupResponseBody(Body):
    """header/GetConsumerListByGroupResponseBody: the answer to 38, the group's client ids."""

    consumer_id_list: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"consumerIdList": list(self.consumer_id_list)}

    @classmethod
    def read(cls, obj: _Obj) -> GetConsumerListByGroupResponseBody:
        return cls(tuple(_string_item(item, path) for path, item in obj.items("consumerIdList")))


# -------------------------------------------------------------------------------------------- offsets


@dataclass(frozen=True)
class ConsumerOffsetSerializeWrapper(Body):
    """body/ConsumerOffsetSerializeWrapper: ``topic@group`` -> queue id -> offset, the answer to 43
    GET_ALL_CONSUMER_OFFSET (and the content of RocketMQ's consumerOffset.json). The queue ids are
    Integer map keys, so fastjson writes them bare."""

    offset_table: Mapping[str, Mapping[int, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"offsetTable": {key: dict(queues) for key, queues in self.offset_table.items()}}

    @classmethod
    def read(cls, obj: _Obj) -> ConsumerOffsetSerializeWrapper:
        table: dict[str, dict[int, int]] = {}
        for key, path, item in obj.entries("offsetTable"):
            if not isinstance(key, str):
                raise BodyError(f"{path}: key {key} must be quoted (topic@group)")
            table[key] = _queue_offsets(item, path)
        return cls(table)


def _queue_offsets(value: JsonValue, path: str) -> dict[int, int]:
    if not isinstance(value, dict):
        raise BodyError(f"{path} is {describe(value)}, not an object")
    offsets: dict[int, int] = {}
    for key, item in value.items():
        queue_id = int(key) if isinstance(key, str) and _QUEUE_KEY.fullmatch(key) else key
        if not isinstance(queue_id, int) or not 0 <= queue_id < 2**31:
            raise BodyError(f"{path}: key {str(key)[:40]!r} is not a queue id")
        if queue_id in offsets:
            raise BodyError(f"{path} has queue {queue_id} twice")
        offset = _integer(item, f"{path}.{queue_id}", "int64")
        if offset is None or offset < 0:
            raise BodyError(f"{path}.{queue_id} is {describe(item)}, not an offset")
        offsets[queue_id] = offset
    return offsets


# ------------------------------------------------------------------------------------------ HA status


@dataclass(frozen=True)
class HAConnectionRuntimeInfo(Body):
    """HARuntimeInfo.HAConnectionRuntimeInfo: one slave as its master sees it."""

    addr: str | None
    slave_ack_offset: int = 0
    diff: int = 0
    in_sync: bool = False
    transferred_byte_in_second: int = 0
    transfer_from_where: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"addr": self.addr, "diff": self.diff, "inSync": self.in_sync,
                "slaveAckOffset": self.slave_ack_offset, "transferFromWhere": self.transfer_from_where,
                "transferredByteInSecond": self.transferred_byte_in_second}

    @classmethod
    def read(cls, obj: _Obj) -> HAConnectionRuntimeInfo:
        return cls(obj.string("addr"), obj.integer("slaveAckOffset", "int64", 0) or 0,
                   obj.integer("diff", "int64", 0) or 0, bool(obj.boolean("inSync", False)),
                   obj.integer("transferredByteInSecond", "int64", 0) or 0,
                   obj.integer("transferFromWhere", "int64", 0) or 0)


@dataclass(frozen=True)
class HAClientRuntimeInfo(Body):
    """HARuntimeInfo.HAClientRuntimeInfo: a slave's view of its master. (Its ``isActivated`` field has no
    getter, so fastjson never writes it.)"""

    master_addr: str | None = None
    transferred_byte_in_second: int = 0
    max_offset: int = 0
    last_read_timestamp: int = 0
    last_write_timestamp: int = 0
    master_flush_offset: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"lastReadTimestamp": self.last_read_timestamp, "lastWriteTimestamp": self.last_write_timestamp,
                "masterAddr": self.master_addr, "masterFlushOffset": self.master_flush_offset,
                "maxOffset": self.max_offset, "transferredByteInSecond": self.transferred_byte_in_second}

    @classmethod
    def read(cls, obj: _Obj) -> HAClientRuntimeInfo:
        numbers = [obj.integer(k, "int64", 0) or 0 for k in ("transferredByteInSecond", "maxOffset",
                                                              "lastReadTimestamp", "lastWriteTimestamp",
                                                              "masterFlushOffset")]
        return cls(obj.string("masterAddr"), *numbers)


@dataclass(frozen=True)
class HARuntimeInfo(Body):
    """body/HARuntimeInfo: the answer to 907 GET_BROKER_HA_STATUS."""

    master: bool
    master_commit_log_max_offset: int = 0
    in_sync_slave_nums: int = 0
    ha_connection_info: tuple[HAConnectionRuntimeInfo, ...] = ()
    ha_client_runtime_info: HAClientRuntimeInfo = HAClientRuntimeInfo()

    def to_json(self) -> dict[str, Any]:
        return {"haClientRuntimeInfo": self.ha_client_runtime_info.to_json(),
                "haConnectionInfo": [c.to_json() for c in self.ha_connection_info],
                "inSyncSlaveNums": self.in_sync_slave_nums, "master": self.master,
                "masterCommitLogMaxOffset": self.master_commit_log_max_offset}

    @classmethod
    def read(cls, obj: _Obj) -> HARuntimeInfo:
        client = obj.data.get("haClientRuntimeInfo")
        connections = tuple(HAConnectionRuntimeInfo.read(_Obj(item, path))
                            for path, item in _array(obj.data.get("haConnectionInfo"), obj.at("haConnectionInfo")))
        return cls(bool(obj.boolean("master", False)), obj.integer("masterCommitLogMaxOffset", "int64", 0) or 0,
                   obj.integer("inSyncSlaveNums", "int32", 0) or 0, connections,
                   HAClientRuntimeInfo() if client is None
                   else HAClientRuntimeInfo.read(_Obj(client, obj.at("haClientRuntimeInfo"))))


# ------------------------------------------------------------------------------------------ queue locks


@dataclass(frozen=True, order=True)
class MessageQueue(Body):
    """message/MessageQueue: one queue of a topic on one broker group (a Set element of the lock bodies)."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def read(cls, obj: _Obj) -> MessageQueue:
        topic, broker, queue = obj.string("topic"), obj.string("brokerName"), obj.integer("queueId", "int32", 0)
        if topic is None or broker is None:
            raise BodyError(f"{obj.at('topic' if topic is None else 'brokerName')} is missing")
        return cls(topic, broker, queue or 0)


def _queues(obj: _Obj, key: str) -> frozenset[MessageQueue]:
    return frozenset(MessageQueue.read(_Obj(item, path)) for path, item in _items(obj, key))


@dataclass(frozen=True)
class LockBatchRequestBody(Body):
    """body/LockBatchRequestBody: the request of 41 LOCK_BATCH_MQ, a client locking the queues it consumes in
    order (at most MAX_ITEMS queues)."""

    consumer_group: str | None
    client_id: str | None
    mq_set: frozenset[MessageQueue] = frozenset()
    only_this_broker: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"clientId": self.client_id, "consumerGroup": self.consumer_group,
                "mqSet": [q.to_json() for q in sorted(self.mq_set)], "onlyThisBroker": self.only_this_broker}

    @classmethod
    def read(cls, obj: _Obj) -> LockBatchRequestBody:
        return cls(obj.string("consumerGroup"), obj.string("clientId"), _queues(obj, "mqSet"),
                   bool(obj.boolean("onlyThisBroker", False)))


@dataclass(frozen=True)
class UnlockBatchRequestBody(LockBatchRequestBody):
    """body/UnlockBatchRequestBody: the request of 42 UNLOCK_BATCH_MQ (the same fields as a lock's)."""


@dataclass(frozen=True)
class LockBatchResponseBody(Body):
    """body/LockBatchResponseBody: the answer to 41, the queues now locked by the requesting client."""

    lock_ok_mq_set: frozenset[MessageQueue] = frozenset()

    def to_json(self) -> dict[str, Any]:
        return {"lockOKMQSet": [q.to_json() for q in sorted(self.lock_ok_mq_set)]}

    @classmethod
    def read(cls, obj: _Obj) -> LockBatchResponseBody:
        return cls(_queues(obj, "lockOKMQSet"))
