"""What a broker sends a name server: the body of REGISTER_BROKER (103), in its two encodings.

RocketMQ's ``RegisterBrokerBody`` holds the broker's topic configs (``TopicConfigAndMappingSerializeWrapper``:
``topicConfigTable``, ``dataVersion``, and the static-topic mapping, which we carry but do not use) and a
filter-server list. A broker writes it as fastjson JSON, or, with ``compressed=true`` in the request
header, as a zlib stream of length-prefixed parts (``RegisterBrokerBody.encode(true)``)::

    int32 n | n bytes   DataVersion, JSON
    int32 count         then count times: int32 n | n bytes  one TopicConfig in its text form
    int32 n | n bytes   filterServerList, a JSON array of strings
    int32 count         then count times: int32 n | n bytes  one TopicQueueMappingInfo, JSON
                        (only from a broker at V5_0_0 or later)

All integers big-endian. A TopicConfig's text form (``TopicConfig.encode``) is its fields separated by one
space: ``name readQueueNums writeQueueNums perm topicFilterType attributesJson``; it has no topicSysFlag
and no order flag, so a compressed registration carries neither (RocketMQ reads them as 0 and false).

Everything read here is bounded: the inflated stream by ``max_bytes`` (a zlib stream of a few KiB can
inflate to gigabytes), every count and length by what is left of it, the topics by ``MAX_TOPICS`` (counted
before any is read), and a text part must be UTF-8.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from services.remoting import fastjson
from services.remoting.bodies import Body, _Obj
from services.remoting.errors import BodyError
from services.remoting.fastjson import JsonValue, describe

__all__ = ["MAX_TOPICS", "V3_0_11", "V5_0_0", "DataVersion", "RegisterBrokerBody", "TopicConfig",
           "TopicConfigSerializeWrapper", "body_crc32"]

#: MQVersion ordinals that change the body's form: before V3_0_11 the body is the bare wrapper; from
#: V5_0_0 on, a compressed body ends with the static-topic mapping section.
V3_0_11, V5_0_0 = 37, 413
FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")
#: The most topics one registration may list: as many routes as a name server here keeps in all.
MAX_TOPICS = 300_000
_INT32 = struct.Struct(">i")
_TEXT_NUMBER = re.compile(r"[+-]?[0-9]{1,10}")


def body_crc32(body: bytes) -> int:
    """``UtilAll.crc32``: CRC-32 with the top bit cleared (a Java int that is never negative)."""
    return zlib.crc32(body) & 0x7FFFFFFF


@dataclass(frozen=True)
class DataVersion(Body):
    """DataVersion: ``stateVersion`` (a controller-mode broker sets its master epoch there), ``timestamp``
    and ``counter`` (bumped at every change of the broker's topic configs)."""

    state_version: int = 0
    timestamp: int = 0
    counter: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"stateVersion": self.state_version, "timestamp": self.timestamp, "counter": self.counter}

    @classmethod
    def read(cls, obj: _Obj) -> DataVersion:
        return cls(*(obj.integer(k, "int64", 0) or 0 for k in ("stateVersion", "timestamp", "counter")))


@dataclass(frozen=True)
class TopicConfig(Body):
    """common/TopicConfig: one topic on one broker. Defaults are RocketMQ's (16 queues, read + write)."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = 6
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"topicName": self.topic_name, "readQueueNums": self.read_queue_nums,
                "writeQueueNums": self.write_queue_nums, "perm": self.perm,
                "topicFilterType": self.topic_filter_type, "topicSysFlag": self.topic_sys_flag,
                "order": self.order, "attributes": dict(self.attributes)}

    @classmethod
    def read(cls, obj: _Obj) -> TopicConfig:
        name = obj.string("topicName")
        if not name:
            raise BodyError(f"{obj.at('topicName')} is missing")
        read, write, perm, sys_flag = (obj.integer(k, "int32", d) or 0 for k, d in (
            ("readQueueNums", 16), ("writeQueueNums", 16), ("perm", 6), ("topicSysFlag", 0)))
        filter_type = obj.string("topicFilterType") or "SINGLE_TAG"
        _check_filter_type(filter_type, obj.at("topicFilterType"))
        attributes = {_key(k, p): _text(v, p) for k, p, v in obj.entries("attributes")}
        return cls(name, read, write, perm, filter_type, sys_flag, bool(obj.boolean("order", False)), attributes)

    def encode_text(self) -> str:
        """``TopicConfig.encode``: the compressed body's form of one topic config."""
        attributes = fastjson.dumps(dict(self.attributes))
        return (f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} {self.perm} "
                f"{self.topic_filter_type} {attributes}")

    @classmethod
    def decode_text(cls, text: str, where: str) -> TopicConfig:
        """``TopicConfig.decode``: at least five space-separated fields. The attributes are kept when the
        sixth field is a JSON object of strings and, as RocketMQ does, ignored otherwise (a space inside
        them splits the field; nothing here uses them)."""
        parts = text.split(" ")
        if len(parts) < 5 or not parts[0]:
            raise BodyError(f"{where}: topic config {text[:60]!r} has fewer than 5 fields")
        for index, name in ((1, "readQueueNums"), (2, "writeQueueNums"), (3, "perm")):
            if _TEXT_NUMBER.fullmatch(parts[index]) is None or not -(2**31) <= int(parts[index]) < 2**31:
                raise BodyError(f"{where}: {name} {parts[index][:20]!r} is not an int32")
        _check_filter_type(parts[4], f"{where}.topicFilterType")
        return cls(parts[0], int(parts[1]), int(parts[2]), int(parts[3]), parts[4],
                   attributes=_attributes(parts[5]) if len(parts) == 6 else {})


def _attributes(text: str) -> dict[str, str]:
    try:
        value = fastjson.loads(text, max_depth=2)
    except BodyError:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def _check_filter_type(value: str, path: str) -> None:
    if value not in FILTER_TYPES:
        raise BodyError(f"{path} is {value[:40]!r}, not one of {', '.join(FILTER_TYPES)}")


def _object(value: JsonValue, path: str) -> dict[str | int, JsonValue]:
    if not isinstance(value, dict):
        raise BodyError(f"{path} is {describe(value)}, not an object")
    return value


def _key(key: str | int, path: str) -> str:
    if not isinstance(key, str):
        raise BodyError(f"{path}: key {key} must be quoted")
    return key


def _text(value: JsonValue, path: str) -> str:
    if not isinstance(value, str):
        raise BodyError(f"{path} is {describe(value)}, not a string")
    return value


@dataclass(frozen=True)
class TopicConfigSerializeWrapper(Body):
    """body/TopicConfigAndMappingSerializeWrapper (a TopicConfigSerializeWrapper with the static-topic
    mapping). The mapping maps are written empty and, when read, only type-checked: static topics are
    not served."""

    topic_config_table: Mapping[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_json(self) -> dict[str, Any]:
        return {"topicConfigTable": {name: tc.to_json() for name, tc in self.topic_config_table.items()},
                "dataVersion": self.data_version.to_json(), "mappingDataVersion": DataVersion().to_json(),
                "topicQueueMappingInfoMap": {}, "topicQueueMappingDetailMap": {}}

    @classmethod
    def read(cls, obj: _Obj) -> TopicConfigSerializeWrapper:
        entries = obj.entries("topicConfigTable")
        _check_count(len(entries))
        table = {_key(name, path): TopicConfig.read(_Obj(item, path)) for name, path, item in entries}
        for key in ("topicQueueMappingInfoMap", "topicQueueMappingDetailMap"):
            obj.entries(key)  # present or not, each must be an object
        version = obj.data.get("dataVersion")
        data_version = DataVersion() if version is None else DataVersion.read(_Obj(version, obj.at("dataVersion")))
        return cls(table, data_version)


@dataclass(frozen=True)
class RegisterBrokerBody(Body):
    """body/RegisterBrokerBody: the broker's topic configs and its filter servers."""

    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = field(default_factory=TopicConfigSerializeWrapper)
    filter_server_list: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"topicConfigSerializeWrapper": self.topic_config_serialize_wrapper.to_json(),
                "filterServerList": list(self.filter_server_list)}

    @classmethod
    def read(cls, obj: _Obj) -> RegisterBrokerBody:
        wrapper = obj.data.get("topicConfigSerializeWrapper")
        return cls(TopicConfigSerializeWrapper() if wrapper is None else
                   TopicConfigSerializeWrapper.read(_Obj(wrapper, obj.at("topicConfigSerializeWrapper"))),
                   tuple(_text(v, p) for p, v in obj.items("filterServerList")))

    @classmethod
    def decode_request(cls, data: bytes, *, compressed: bool, version: int,
                       max_bytes: int = fastjson.DEFAULT_MAX_BYTES) -> RegisterBrokerBody:
        """The body of a REGISTER_BROKER request as RocketMQ's name server reads it: the bare wrapper from
        a broker before V3_0_11, the compressed form when the header says so, JSON otherwise. An empty
        body is an empty registration (no topics), as RocketMQ reads a missing one."""
        if not data:
            return cls()
        if version < V3_0_11:
            return cls(TopicConfigSerializeWrapper.decode(data, max_bytes=max_bytes))
        if compressed:
            return _decode_compressed(data, version, max_bytes)
        return cls.decode(data, max_bytes=max_bytes)

    def encode_compressed(self, version: int = V5_0_0) -> bytes:
        """``encode(true)``: what a broker sends with ``compressed=true`` (tests use it to feed the reader)."""
        wrapper = self.topic_config_serialize_wrapper
        parts = [_part(wrapper.data_version.encode()), _INT32.pack(len(wrapper.topic_config_table))]
        parts += [_part(tc.encode_text().encode("utf-8")) for tc in wrapper.topic_config_table.values()]
        parts.append(_part(fastjson.dumps(list(self.filter_server_list)).encode("utf-8")))
        if version >= V5_0_0:
            parts.append(_INT32.pack(0))
        return zlib.compress(b"".join(parts), 9)


def _check_count(topics: int) -> int:
    if topics > MAX_TOPICS:
        raise BodyError(f"the registration lists {topics} topics, more than the {MAX_TOPICS} a name server keeps")
    return topics


def _part(data: bytes) -> bytes:
    return _INT32.pack(len(data)) + data


class _Inflated:
    """A reader over the inflated stream that never reads past its end."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def int32(self, what: str) -> int:
        if len(self.data) - self.pos < 4:
            raise BodyError(f"compressed body ends inside {what}")
        (value,) = _INT32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(value)

    def count(self, what: str) -> int:
        """A count of parts, each at least 4 bytes long: more than what is left cannot be right."""
        value = self.int32(what)
        if value < 0 or value * 4 > len(self.data) - self.pos:
            raise BodyError(f"compressed body: {what} {value} does not fit in the {len(self.data) - self.pos} "
                            "bytes left")
        return value

    def part(self, what: str) -> bytes:
        length = self.int32(f"the length of {what}")
        if length < 0 or length > len(self.data) - self.pos:
            raise BodyError(f"compressed body: {what} of {length} bytes runs past the end")
        self.pos += length
        return self.data[self.pos - length:self.pos]

    def text(self, what: str) -> str:
        raw = self.part(what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BodyError(f"compressed body: {what} is not UTF-8 (byte {exc.start})") from None


def _inflate(data: bytes, max_bytes: int) -> bytes:
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, max_bytes + 1)
    except zlib.error as exc:
        raise BodyError(f"compressed body is not a zlib stream: {exc}") from None
    if len(out) > max_bytes:
        raise BodyError(f"compressed body inflates to more than the limit of {max_bytes} bytes")
    if not inflater.eof:
        raise BodyError("compressed body: the zlib stream is truncated")
    if inflater.unused_data:
        raise BodyError(f"compressed body: {len(inflater.unused_data)} bytes follow the zlib stream")
    return out


def _decode_compressed(data: bytes, version: int, max_bytes: int) -> RegisterBrokerBody:
    reader = _Inflated(_inflate(data, max_bytes))
    data_version = DataVersion.decode(reader.part("the data version"))
    table: dict[str, TopicConfig] = {}
    for index in range(_check_count(reader.count("the topic count"))):
        where = f"topic config {index}"
        config = TopicConfig.decode_text(reader.text(where), where)
        table[config.topic_name] = config  # RocketMQ puts each by its name: a repeated name replaces
    filters = fastjson.loads(reader.text("the filter server list"), what="filterServerList")
    if not isinstance(filters, list):
        raise BodyError(f"filterServerList is {describe(filters)}, not an array")
    filter_list = tuple(_text(v, f"filterServerList[{i}]") for i, v in enumerate(filters))
    if version >= V5_0_0:
        for index in range(reader.count("the mapping count")):
            _object(fastjson.loads(reader.part(f"mapping {index}"), what=f"mapping {index}"), f"mapping {index}")
    if reader.pos != len(reader.data):
        raise BodyError(f"compressed body: {len(reader.data) - reader.pos} bytes follow its last part")
    return RegisterBrokerBody(TopicConfigSerializeWrapper(table, data_version), filter_list)
