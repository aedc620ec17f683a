"""RocketMQ's JSON bodies as frozen dataclasses, written and read as fastjson does (see fastjson.py).

Each class mirrors one RocketMQ class; the JSON names are the bean property names fastjson derives from
the getters (``getAlive`` -> ``alive``, ``isEnableActingMaster`` -> ``enableActingMaster``), written in
name order, null ones left out. Two kinds of map key are not strings in Java and so are written bare:
``BrokerData.brokerAddrs`` and ``BrokerMemberGroup.brokerAddrs`` (broker id -> address). Reading, both a
bare and a quoted decimal key are accepted (other clients, and RocketMQ's standard-JSON route answers,
quote them). Every field is type-checked; an absent list, set or map reads as empty, an absent primitive
as its Java default, an absent boxed field as None. Unknown fields are ignored, as fastjson does.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self, TypeVar

from services.remoting import fastjson
from services.remoting.errors import BodyError
from services.remoting.fastjson import JsonValue, describe

T = TypeVar("T")
INT64_MAX = 2**63 - 1
_LIMITS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), INT64_MAX)}
#: A quoted broker id is written as a bare one is: as Java writes the number (not -0, 01 or +1).
_DECIMAL_KEY = re.compile(r"0|-?[1-9][0-9]{0,18}")


class _Obj:
    """A JSON object being read, with the path used in error messages (``replicasInfoTable.a.masterEpoch``)."""

    def __init__(self, value: JsonValue, path: str) -> None:
        if not isinstance(value, dict):
            raise BodyError(f"{path or 'body'} is {describe(value)}, not an object")
        self.data, self.path = value, path

    def at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def string(self, key: str) -> str | None:
        value = self.data.get(key)
        if value is not None and not isinstance(value, str):
            raise BodyError(f"{self.at(key)} is {describe(value)}, not a string")
        return value

    def integer(self, key: str, size: str, default: int | None = None) -> int | None:
        return _integer(self.data.get(key, default), self.at(key), size)

    def boolean(self, key: str, default: bool | None = None) -> bool | None:
        value = self.data.get(key, default)
        if value is not None and not isinstance(value, bool):
            raise BodyError(f"{self.at(key)} is {describe(value)}, not a boolean")
        return value

    def items(self, key: str) -> list[tuple[str, JsonValue]]:
        """The elements of an array (absent: none), each with its path."""
        return _array(self.data.get(key), self.at(key))

    def entries(self, key: str) -> list[tuple[str | int, str, JsonValue]]:
        """The entries of a map (absent: none): key, path, value."""
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, dict):
            raise BodyError(f"{self.at(key)} is {describe(value)}, not an object")
        return [(name, f"{self.at(key)}.{name}", item) for name, item in value.items()]


def _array(value: JsonValue, path: str) -> list[tuple[str, JsonValue]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BodyError(f"{path} is {describe(value)}, not an array")
    return [(f"{path}[{index}]", item) for index, item in enumerate(value)]


def _integer(value: object, path: str, size: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BodyError(f"{path} is {describe(value)}, not an integer")
    low, high = _LIMITS[size]
    if not low <= value <= high:
        raise BodyError(f"{path} = {value} is outside {size}")
    return value


def _long_key(key: str | int, path: str) -> int:
    if isinstance(key, str):
        if _DECIMAL_KEY.fullmatch(key) is None:
            raise BodyError(f"{path}: key {key[:40]!r} is not a broker id")
        key = int(key)
    result = _integer(key, path, "int64")
    assert result is not None
    return result


def _string_item(value: JsonValue, path: str) -> str:
    if not isinstance(value, str):
        raise BodyError(f"{path} is {describe(value)}, not a string")
    return value


def _long_item(value: JsonValue, path: str) -> int:
    result = _integer(value, path, "int64")
    if result is None:
        raise BodyError(f"{path} is null, not an integer")
    return result


def _required(value: T | None, path: str) -> T:
    if value is None:
        raise BodyError(f"{path} is missing")
    return value


def _str_key(key: str | int, path: str) -> str:
    if not isinstance(key, str):
        raise BodyError(f"{path}: key {key} must be quoted (a name, not a number)")
    return key


class Body(ABC):
    """Base of every body: ``encode`` to fastjson bytes, ``decode`` with checks."""

    #: Whether a read keeps parts of the parsed JSON as they are (then a large one is not taken apart).
    keeps_json: ClassVar[bool] = False

    @abstractmethod
    def to_json(self) -> dict[str, Any]: ...

    @classmethod
    @abstractmethod
    def read(cls, obj: _Obj) -> Self: ...

    def encode(self, *, standard: bool = False) -> bytes:
        return fastjson.dumps(self.to_json(), standard=standard).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes, *, max_bytes: int = fastjson.DEFAULT_MAX_BYTES) -> Self:
        value = fastjson.loads(data, max_bytes=max_bytes)
        try:
            return cls.read(_Obj(value, ""))
        finally:
            if len(data) > fastjson.WINDOW and not cls.keeps_json:
                fastjson.release(value)


def _read_all(obj: _Obj, key: str, reader: Callable[[_Obj], T]) -> tuple[T, ...]:
    return tuple(reader(_Obj(item, path)) for path, item in obj.items(key))


def _long_set(obj: _Obj, key: str) -> frozenset[int]:
    return frozenset(_long_item(item, path) for path, item in obj.items(key))


def _broker_addrs(obj: _Obj, key: str) -> dict[int, str]:
    addrs: dict[int, str] = {}
    for name, path, item in obj.entries(key):
        broker_id = _long_key(name, path)
        if broker_id in addrs:  # fastjson.loads refuses {0:"a","0":"b"} already: kept for any other reader
            raise BodyError(f"{obj.at(key)} has broker id {broker_id} twice")
        addrs[broker_id] = _string_item(item, path)
    return addrs


# ------------------------------------------------------------------------------------- controller


@dataclass(frozen=True)
class SyncStateSet(Body):
    """body/SyncStateSet: the in-sync broker ids and the set's epoch (1001 request, 1004 answer, 1008)."""

    sync_state_set: frozenset[int]
    sync_state_set_epoch: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"syncStateSet": self.sync_state_set, "syncStateSetEpoch": self.sync_state_set_epoch}

    @classmethod
    def read(cls, obj: _Obj) -> SyncStateSet:
        return cls(_long_set(obj, "syncStateSet"), obj.integer("syncStateSetEpoch", "int32", 0) or 0)


@dataclass(frozen=True)
class ReplicaIdentity(Body):
    """BrokerReplicasInfo.ReplicaIdentity."""

    broker_name: str | None
    broker_id: int | None
    broker_address: str | None
    alive: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "brokerId": self.broker_id,
                "brokerAddress": self.broker_address, "alive": self.alive}

    @classmethod
    def read(cls, obj: _Obj) -> ReplicaIdentity:
        return cls(obj.string("brokerName"), obj.integer("brokerId", "int64"), obj.string("brokerAddress"),
                   obj.boolean("alive"))


@dataclass(frozen=True)
class ReplicasInfo(Body):
    """BrokerReplicasInfo.ReplicasInfo: one broker group's master and its replicas."""

    master_broker_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set_epoch: int
    in_sync_replicas: tuple[ReplicaIdentity, ...] = ()
    not_in_sync_replicas: tuple[ReplicaIdentity, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"masterBrokerId": self.master_broker_id, "masterAddress": self.master_address,
                "masterEpoch": self.master_epoch, "syncStateSetEpoch": self.sync_state_set_epoch,
                "inSyncReplicas": [r.to_json() for r in self.in_sync_replicas],
                "notInSyncReplicas": [r.to_json() for r in self.not_in_sync_replicas]}

    @classmethod
    def read(cls, obj: _Obj) -> ReplicasInfo:
        return cls(obj.integer("masterBrokerId", "int64"), obj.string("masterAddress"),
                   obj.integer("masterEpoch", "int32", 0) or 0, obj.integer("syncStateSetEpoch", "int32", 0) or 0,
                   _read_all(obj, "inSyncReplicas", ReplicaIdentity.read),
                   _read_all(obj, "notInSyncReplicas", ReplicaIdentity.read))


@dataclass(frozen=True)
class BrokerReplicasInfo(Body):
    """body/BrokerReplicasInfo: the answer to 1006 CONTROLLER_GET_SYNC_STATE_DATA."""

    replicas_info_table: Mapping[str, ReplicasInfo] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"replicasInfoTable": {name: info.to_json() for name, info in self.replicas_info_table.items()}}

    @classmethod
    def read(cls, obj: _Obj) -> BrokerReplicasInfo:
        return cls({_str_key(name, path): ReplicasInfo.read(_Obj(item, path))
                    for name, path, item in obj.entries("replicasInfoTable")})


@dataclass(frozen=True)
class EpochEntry(Body):
    """EpochEntry: the commitlog range [start_offset, end_offset) written in one master epoch."""

    epoch: int
    start_offset: int
    end_offset: int = INT64_MAX  # RocketMQ's default: the current epoch is open-ended

    def to_json(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "startOffset": self.start_offset, "endOffset": self.end_offset}

    @classmethod
    def read(cls, obj: _Obj) -> EpochEntry:
        return cls(obj.integer("epoch", "int32", 0) or 0, obj.integer("startOffset", "int64", 0) or 0,
                   _required(obj.integer("endOffset", "int64", INT64_MAX), obj.at("endOffset")))


@dataclass(frozen=True)
class EpochEntryCache(Body):
    """body/EpochEntryCache: the answer to 1007 GET_BROKER_EPOCH_CACHE."""

    cluster_name: str | None
    broker_name: str | None
    broker_id: int
    epoch_list: tuple[EpochEntry, ...]
    max_offset: int

    def to_json(self) -> dict[str, Any]:
        return {"clusterName": self.cluster_name, "brokerName": self.broker_name, "brokerId": self.broker_id,
                "epochList": [e.to_json() for e in self.epoch_list], "maxOffset": self.max_offset}

    @classmethod
    def read(cls, obj: _Obj) -> EpochEntryCache:
        return cls(obj.string("clusterName"), obj.string("brokerName"), obj.integer("brokerId", "int64", 0) or 0,
                   _read_all(obj, "epochList", EpochEntry.read), obj.integer("maxOffset", "int64", 0) or 0)


@dataclass(frozen=True)
class BrokerMemberGroup(Body):
    """body/BrokerMemberGroup: a broker group's members (broker id -> address; the ids written bare)."""

    cluster: str | None
    broker_name: str | None
    broker_addrs: Mapping[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "brokerName": self.broker_name, "brokerAddrs": dict(self.broker_addrs)}

    @classmethod
    def read(cls, obj: _Obj) -> BrokerMemberGroup:
        return cls(obj.string("cluster"), obj.string("brokerName"), _broker_addrs(obj, "brokerAddrs"))


@dataclass(frozen=True)
class ElectMasterResponseBody(Body):
    """body/ElectMasterResponseBody: the body of the answer to 1002 CONTROLLER_ELECT_MASTER."""

    broker_member_group: BrokerMemberGroup | None
    sync_state_set: frozenset[int] = frozenset()

    def to_json(self) -> dict[str, Any]:
        group = self.broker_member_group.to_json() if self.broker_member_group is not None else None
        return {"brokerMemberGroup": group, "syncStateSet": self.sync_state_set}

    @classmethod
    def read(cls, obj: _Obj) -> ElectMasterResponseBody:
        group = obj.data.get("brokerMemberGroup")
        member_group = None if group is None else BrokerMemberGroup.read(_Obj(group, obj.at("brokerMemberGroup")))
        return cls(member_group, _long_set(obj, "syncStateSet"))


# ---------------------------------------------------------------------------------------- routes


@dataclass(frozen=True)
class BrokerData(Body):
    """route/BrokerData: one broker group's addresses (broker id -> address; the ids written bare)."""

    cluster: str | None
    broker_name: str | None
    broker_addrs: Mapping[int, str] = field(default_factory=dict)
    zone_name: str | None = None
    enable_acting_master: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "brokerName": self.broker_name, "brokerAddrs": dict(self.broker_addrs),
                "zoneName": self.zone_name, "enableActingMaster": self.enable_acting_master}

    @classmethod
    def read(cls, obj: _Obj) -> BrokerData:
        return cls(obj.string("cluster"), obj.string("brokerName"), _broker_addrs(obj, "brokerAddrs"),
                   obj.string("zoneName"), bool(obj.boolean("enableActingMaster", False)))


@dataclass(frozen=True)
class ClusterInfo(Body):
    """body/ClusterInfo: the answer to 106 GET_BROKER_CLUSTER_INFO."""

    broker_addr_table: Mapping[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"brokerAddrTable": {name: data.to_json() for name, data in self.broker_addr_table.items()},
                "clusterAddrTable": dict(self.cluster_addr_table)}

    @classmethod
    def read(cls, obj: _Obj) -> ClusterInfo:
        brokers = {_str_key(name, path): BrokerData.read(_Obj(item, path))
                   for name, path, item in obj.entries("brokerAddrTable")}
        clusters = {_str_key(name, path): frozenset(_string_item(v, p) for p, v in _array(item, path))
                    for name, path, item in obj.entries("clusterAddrTable")}
        return cls(brokers, clusters)


@dataclass(frozen=True)
class QueueData(Body):
    """route/QueueData: a topic's queues on one broker group."""

    broker_name: str | None
    read_queue_nums: int = 0
    write_queue_nums: int = 0
    perm: int = 0
    topic_sys_flag: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "readQueueNums": self.read_queue_nums,
                "writeQueueNums": self.write_queue_nums, "perm": self.perm, "topicSysFlag": self.topic_sys_flag}

    @classmethod
    def read(cls, obj: _Obj) -> QueueData:
        numbers = [obj.integer(k, "int32", 0) or 0 for k in ("readQueueNums", "writeQueueNums", "perm",
                                                               "topicSysFlag")]
        return cls(obj.string("brokerName"), *numbers)


@dataclass(frozen=True)
class TopicRouteData(Body):
    """route/TopicRouteData: the answer to 105 GET_ROUTEINFO_BY_TOPIC. ``topic_queue_mapping_by_broker``
    (static topics) is kept as read, not interpreted."""

    keeps_json: ClassVar[bool] = True

    queue_datas: tuple[QueueData, ...] = ()
    broker_datas: tuple[BrokerData, ...] = ()
    filter_server_table: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    order_topic_conf: str | None = None
    topic_queue_mapping_by_broker: Mapping[str | int, JsonValue] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"queueDatas": [q.to_json() for q in self.queue_datas],
                "brokerDatas": [b.to_json() for b in self.broker_datas],
                "filterServerTable": {k: list(v) for k, v in self.filter_server_table.items()},
                "orderTopicConf": self.order_topic_conf,
                "topicQueueMappingByBroker": self.topic_queue_mapping_by_broker}

    @classmethod
    def read(cls, obj: _Obj) -> TopicRouteData:
        filters = {_str_key(name, path): tuple(_string_item(v, p) for p, v in _array(item, path))
                   for name, path, item in obj.entries("filterServerTable")}
        mapping = obj.data.get("topicQueueMappingByBroker")
        if mapping is not None and not isinstance(mapping, dict):
            raise BodyError(f"topicQueueMappingByBroker is {describe(mapping)}, not an object")
        return cls(_read_all(obj, "queueDatas", QueueData.read), _read_all(obj, "brokerDatas", BrokerData.read),
                   filters, obj.string("orderTopicConf"), mapping)


# ------------------------------------------------------------------------------ name-server admin


@dataclass(frozen=True)
class TopicList(Body):
    """body/TopicList: the answer to 206 GET_ALL_TOPIC_LIST_FROM_NAMESERVER (``broker_addr`` is set only by
    the broker-side codes that share the class)."""

    topic_list: tuple[str, ...] = ()
    broker_addr: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"topicList": list(self.topic_list), "brokerAddr": self.broker_addr}

    @classmethod
    def read(cls, obj: _Obj) -> TopicList:
        topics = tuple(dict.fromkeys(_string_item(item, path) for path, item in obj.items("topicList")))
        return cls(topics, obj.string("brokerAddr"))


@dataclass(frozen=True)
class KVTable(Body):
    """body/KVTable: one namespace of the name server's KV config (219's answer)."""

    table: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"table": dict(self.table)}

    @classmethod
    def read(cls, obj: _Obj) -> KVTable:
        return cls({_str_key(name, path): _string_item(item, path) for name, path, item in obj.entries("table")})


@dataclass(frozen=True)
class GetBrokerMemberGroupResponseBody(Body):
    """body/GetBrokerMemberGroupResponseBody: the answer to 901 GET_BROKER_MEMBER_GROUP."""

    broker_member_group: BrokerMemberGroup | None = None

    def to_json(self) -> dict[str, Any]:
        group = self.broker_member_group
        return {"brokerMemberGroup": None if group is None else group.to_json()}

    @classmethod
    def read(cls, obj: _Obj) -> GetBrokerMemberGroupResponseBody:
        group = obj.data.get("brokerMemberGroup")
        return cls(None if group is None else BrokerMemberGroup.read(_Obj(group, obj.at("brokerMemberGroup"))))


# ------------------------------------------------------------------------------------- plain lists


def encode_broker_names(names: list[str] | tuple[str, ...]) -> bytes:
    """The request body of 1006 CONTROLLER_GET_SYNC_STATE_DATA: a JSON array of broker names."""
    return fastjson.dumps(list(names)).encode("utf-8")


def decode_broker_names(data: bytes) -> tuple[str, ...]:
    """1006's list, each name once, in the order first given (RocketMQ answers a map by name)."""
    value = fastjson.loads(data)
    if not isinstance(value, list):
        raise BodyError(f"body is {describe(value)}, not an array of broker names")
    try:
        return tuple(dict.fromkeys(_string_item(item, f"[{index}]") for index, item in enumerate(value)))
    finally:
        fastjson.release(value)
