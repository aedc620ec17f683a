"""Commitlog records: the byte layout, encoding, and the checks every record passes before it is trusted.

Record layout (big-endian)::

    0      4   totalSize        whole record, this field included
    4      4   magic            MESSAGE_MAGIC (LEGACY_MESSAGE_MAGIC in older stores), or BLANK_MAGIC
    8      4   CRC              zlib.crc32 of bytes [0, 8) and [12, totalSize): everything but itself
    12     4   queueId
    16     8   queueOffset
    24     8   physicalOffset   offset of this record in the commitlog
    32     8   storeTimestamp   milliseconds
    40     1   topicLength      T (topic is at most 127 bytes)
    41     T   topic            [%|a-zA-Z0-9_-]+
    41+T   2   propertiesLength P (at most 32767)
    43+T   P   properties       UTF-8, name\\x01value\\x02 pairs (KEYS, TAGS, user properties)
    43+T+P 4   bodyLength       B
    47+T+P B   body

A BLANK record is ``totalSize, BLANK_MAGIC`` followed by zeroes up to the segment end.

A broker with ``rocketmqHaPeers=true`` writes RocketMQ's own record layout instead (its ``MessageDecoder``
version 1, :func:`encode_rocketmq`), so that a RocketMQ broker can replicate it and replicate to it;
every reader here takes both layouts, told apart by their magic codes (``ROCKETMQ_MAGIC``,
``ROCKETMQ_BLANK_MAGIC``). RocketMQ's CRC covers the body alone, and its BLANK padding is not zeroed.

Why the CRC covers the whole record: a CRC of the body alone (the older ``LEGACY_MESSAGE_MAGIC``
records, still read) lets a flipped byte in the topic, the queue fields or the properties go unnoticed,
and a message would silently move to another queue or lose its keys. Every record read back from a file
or received from a peer is checked by :func:`check_record`: framing, position, lengths, CRC, and fields
that later become file names or queue positions (the topic is a path component of its consume queue).
"""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from services.common.errors import MqctlError

MESSAGE_MAGIC = 0xA0B1C2D3
LEGACY_MESSAGE_MAGIC = 0xAABBCCDD  # body-only CRC; written by older builds, read but never written
BLANK_MAGIC = 0xBBCCDDEE
#: RocketMQ's record (MessageDecoder.MESSAGE_MAGIC_CODE, version 1: a one-byte topic length) and BLANK magics.
ROCKETMQ_MAGIC = 0xDAA320A7
ROCKETMQ_MAGIC_V2 = 0xDAA320AB
ROCKETMQ_BLANK_MAGIC = 0xCBD43194
MESSAGE_MAGICS = frozenset({MESSAGE_MAGIC, LEGACY_MESSAGE_MAGIC, ROCKETMQ_MAGIC})
BLANK_MAGICS = frozenset({BLANK_MAGIC, ROCKETMQ_BLANK_MAGIC})
#: RocketMQ's layout up to the body: totalSize, magic, bodyCRC, queueId, flag, queueOffset, physicalOffset,
#: sysFlag, bornTimestamp (then bornHost), storeTimestamp (then storeHost), reconsumeTimes,
#: preparedTransactionOffset, bodyLength; the hosts are 8 bytes (IPv4) or 20 (IPv6, per sysFlag).
_RMQ_A = struct.Struct(">iIIiiqqiq")  # totalSize .. bornTimestamp (48 bytes)
_RMQ_B = struct.Struct(">iqi")  # reconsumeTimes, preparedTransactionOffset, bodyLength
_I64 = struct.Struct(">q")
BORNHOST_V6_FLAG = 0x1 << 4
STOREHOSTADDRESS_V6_FLAG = 0x1 << 5
#: The reserved property a stored record keeps RocketMQ's extra message fields in (remoting_messages.WIRE).
WIRE_PROPERTY = "__MQCTL.WIRE"
_HEAD = struct.Struct(">iIIiqqqB")  # totalSize .. topicLength (41 bytes)
_REST = struct.Struct(">iqqqB")  # queueId .. topicLength: the header after the CRC
_BLANK = struct.Struct(">iI")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
HEAD_SIZE = _HEAD.size
MIN_BLANK = _BLANK.size
MIN_RECORD = _HEAD.size + 1 + 2 + 4  # a one-byte topic, no properties, an empty body
MAX_TOPIC_LENGTH = 127
MAX_PROPERTIES = 32767
TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")


class CommitLogError(MqctlError):
    """A local commitlog problem (files that do not fit together, a write at the wrong place)."""


class CommitLogCorrupt(CommitLogError):
    """Damaged data the broker will not repair by itself, because repairing would drop valid records
    (or data that was already flushed). Names the file and the offset."""

    def __init__(self, remark: str, path: str = "", offset: int = -1) -> None:
        super().__init__(remark)
        self.path = path
        self.offset = offset


class StoreNotWritable(OSError):
    """A write the disk refused (full, or an I/O error). Nothing of it is left in the store: the log, its files
    and what it reports are as they were before the write. Deliberately not a :class:`CommitLogError`: the
    store is whole, and a later write may succeed once there is room."""

    def __init__(self, path: Path | str, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror or str(cause), str(path))
        self.path = str(path)
        self.reason = cause.strerror or str(cause)

    def __str__(self) -> str:
        return f"cannot write {self.path}: {self.reason}"


class InvalidRecord(Exception):
    """Bytes that are not whole, valid records, received from a peer. Deliberately not a
    :class:`CommitLogError`: the local store is fine, the sender is at fault."""

    def __init__(self, reason: str, offset: int) -> None:
        super().__init__(f"invalid record at offset {offset}: {reason}")
        self.reason = reason
        self.offset = offset


def valid_topic(topic: str) -> bool:
    """The topic rule of the send path; a topic names a directory under ``consumequeue/``."""
    return 0 < len(topic) <= MAX_TOPIC_LENGTH and TOPIC_PATTERN.fullmatch(topic) is not None


_TOPICS: dict[bytes, str] = {}  # topics already checked (records of a log share a few)


def _topic(raw: bytes) -> str | None:
    topic = _TOPICS.get(raw)
    if topic is not None:
        return topic
    try:
        topic = raw.decode("ascii")
    except UnicodeDecodeError:
        return None
    if not valid_topic(topic):
        return None
    if len(_TOPICS) >= 4096:
        _TOPICS.clear()
    _TOPICS[raw] = topic
    return topic


@dataclass(slots=True)
class MessageRecord:
    """A message decoded from its record (its properties as a dict, its body copied)."""

    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    store_timestamp: int
    properties: dict[str, str]
    body: bytes
    size: int

    @property
    def keys(self) -> str:
        return self.properties.get("KEYS", "")

    @property
    def tags(self) -> str:
        return self.properties.get("TAGS", "")

    @property
    def next_offset(self) -> int:
        return self.physical_offset + self.size


@dataclass(slots=True)
class NewRecord:
    """A message to append: everything of the record but its physical offset."""
    topic: str
    queue_id: int
    queue_offset: int
    timestamp: int
    properties: dict[str, str]
    body: bytes


class Blank:
    """Marker returned by :func:`decode_record` for end-of-segment padding."""

    def __init__(self, size: int, magic: int = BLANK_MAGIC) -> None:
        self.size = size
        self.magic = magic


def encode_properties(props: dict[str, str]) -> bytes:
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items()).encode("utf-8")


def decode_properties(raw: bytes) -> dict[str, str]:
    result = {}
    for pair in raw.decode("utf-8", errors="replace").split("\x02"):
        if pair:
            key, _, value = pair.partition("\x01")
            result[key] = value
    return result


def _properties_ok(raw: bytes) -> bool:
    """UTF-8 ``name\\x01value\\x02`` pairs, as :func:`encode_properties` writes them."""
    if not raw:
        return True
    if raw[-1] != 2:
        return False
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(pair.count("\x01") == 1 for pair in text[:-1].split("\x02"))


def check_lengths(topic_b: bytes, props_b: bytes) -> None:
    if len(topic_b) > MAX_TOPIC_LENGTH:
        raise CommitLogError(f"topic longer than {MAX_TOPIC_LENGTH} bytes")
    if len(props_b) > MAX_PROPERTIES:
        raise CommitLogError(f"properties longer than {MAX_PROPERTIES} bytes")


def encode(topic_b: bytes, props_b: bytes, queue_id: int, queue_offset: int, physical_offset: int,
           timestamp: int, body: bytes) -> bytes:
    total = _HEAD.size + len(topic_b) + 2 + len(props_b) + 4 + len(body)
    prefix = _BLANK.pack(total, MESSAGE_MAGIC)
    parts = (_REST.pack(queue_id, queue_offset, physical_offset, timestamp, len(topic_b)), topic_b,
             _U16.pack(len(props_b)), props_b, _I32.pack(len(body)), body)
    crc = zlib.crc32(prefix)
    for part in parts:
        crc = zlib.crc32(part, crc)
    return b"".join((prefix, _U32.pack(crc), *parts))


def encode_record(topic: str, queue_id: int, queue_offset: int, physical_offset: int, timestamp: int,
                  properties: dict[str, str], body: bytes) -> bytes:
    topic_b = topic.encode("utf-8")
    props_b = encode_properties(properties)
    check_lengths(topic_b, props_b)
    return encode(topic_b, props_b, queue_id, queue_offset, physical_offset, timestamp, body)


def record_size(topic: str, properties: dict[str, str], body_len: int) -> int:
    return _HEAD.size + len(topic.encode("utf-8")) + 2 + len(encode_properties(properties)) + 4 + body_len


def blank_header(size: int, magic: int = BLANK_MAGIC) -> bytes:
    return _BLANK.pack(size, magic)


def peek(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """(totalSize, magic) of the record at ``pos`` (the caller checks that 8 bytes are there)."""
    total, magic = _BLANK.unpack_from(buf, pos)
    return int(total), int(magic)


class Parsed(NamedTuple):
    total: int
    queue_id: int
    queue_offset: int
    timestamp: int
    topic: str
    props: slice
    body: slice
    #: RocketMQ's extra fields of a record in its layout, as the WIRE_PROPERTY value; None for ours.
    wire: str | None = None


def check_record(buf: bytes | memoryview, pos: int, physical_offset: int) -> Parsed | Blank | str:
    """Check the record at ``buf[pos:]`` and locate its parts without copying them; a reason (str)
    when it is incomplete, damaged or invalid. Placement within a segment is the caller's check."""
    if len(buf) - pos < MIN_BLANK:
        return "incomplete record header"
    total, magic = _BLANK.unpack_from(buf, pos)
    if magic in (BLANK_MAGIC, ROCKETMQ_BLANK_MAGIC):
        return Blank(total, magic) if total >= MIN_BLANK else f"BLANK record of {total} bytes"
    if magic == ROCKETMQ_MAGIC:
        return _check_rocketmq(buf, pos, total, physical_offset)
    if magic != MESSAGE_MAGIC and magic != LEGACY_MESSAGE_MAGIC:
        return f"unknown magic 0x{magic:08X}" + (" (RocketMQ's version 2 layout, for topics longer than 127 "
                                                  "bytes, is not read)" if magic == ROCKETMQ_MAGIC_V2 else "")
    if total < MIN_RECORD:
        return f"totalSize {total} is smaller than any record"
    if len(buf) - pos < total:
        return f"record of {total} bytes is incomplete ({len(buf) - pos} bytes there)"
    _, _, crc, queue_id, queue_offset, phys, ts, topic_len = _HEAD.unpack_from(buf, pos)
    if phys != physical_offset:
        return f"physicalOffset field {phys} does not match the record's position {physical_offset}"
    framed = _frame(buf, pos, total, topic_len)
    if isinstance(framed, str):
        return framed
    props, body = framed
    view = memoryview(buf)
    if magic == LEGACY_MESSAGE_MAGIC:
        actual = zlib.crc32(view[body])
    else:
        actual = zlib.crc32(view[pos + 12:pos + total], zlib.crc32(view[pos:pos + 8]))
    if actual != crc:
        return "CRC mismatch"
    topic = _topic(bytes(view[pos + _HEAD.size:pos + _HEAD.size + topic_len]))
    if topic is None:
        return "invalid topic " + repr(bytes(view[pos + _HEAD.size:props.start - 2]))[2:-1][:160]
    if queue_id < 0 or queue_offset < 0 or ts < 0:
        return f"negative queueId {queue_id}, queueOffset {queue_offset} or storeTimestamp {ts}"
    if props.stop > props.start and not _properties_ok(bytes(view[props])):
        return "properties are not UTF-8 name\\x01value\\x02 pairs"
    return Parsed(total, queue_id, queue_offset, ts, topic, props, body)


def _frame(buf: bytes | memoryview, pos: int, total: int, topic_len: int) -> tuple[slice, slice] | str:
    """Where the properties and body of a whole record are, if its lengths agree."""
    end = pos + total
    props_at = pos + _HEAD.size + topic_len + 2
    if props_at + 4 > end:
        return f"topicLength {topic_len} overruns the record"
    (props_len,) = _U16.unpack_from(buf, props_at - 2)
    if props_len > MAX_PROPERTIES or props_at + props_len + 4 > end:
        return f"propertiesLength {props_len} overruns the record"
    (body_len,) = _I32.unpack_from(buf, props_at + props_len)
    body_at = props_at + props_len + 4
    if body_len < 0 or body_at + body_len != end:
        return f"bodyLength {body_len} does not match totalSize {total}"
    return slice(props_at, props_at + props_len), slice(body_at, end)


def _host_size(sys_flag: int, bit: int) -> int:
    return 20 if sys_flag & bit else 8


def rocketmq_size(topic_len: int, props_len: int, body_len: int, sys_flag: int = 0) -> int:
    """RocketMQ's ``calMsgLength`` for its version 1 layout."""
    return (_RMQ_A.size + _host_size(sys_flag, BORNHOST_V6_FLAG) + 8 + _host_size(sys_flag, STOREHOSTADDRESS_V6_FLAG)
            + _RMQ_B.size + body_len + 1 + topic_len + 2 + props_len)


def _check_rocketmq(buf: bytes | memoryview, pos: int, total: int, physical_offset: int) -> Parsed | str:
    """A record in RocketMQ's version 1 layout: the same checks as ours (its CRC is the body's alone)."""
    if total < rocketmq_size(1, 0, 0) or len(buf) - pos < total:
        return f"RocketMQ record of {total} bytes is incomplete or too small ({len(buf) - pos} bytes there)"
    _, _, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts = _RMQ_A.unpack_from(buf, pos)
    if phys != physical_offset:
        return f"physicalOffset field {phys} does not match the record's position {physical_offset}"
    at = pos + _RMQ_A.size
    born_size = _host_size(sys_flag, BORNHOST_V6_FLAG)
    born = bytes(buf[at:at + born_size])
    at += born_size
    (store_ts,) = _I64.unpack_from(buf, at)
    at += 8 + _host_size(sys_flag, STOREHOSTADDRESS_V6_FLAG)
    end = pos + total
    if at + _RMQ_B.size > end:
        return "RocketMQ record header overruns the record"
    reconsume, _prepared, body_len = _RMQ_B.unpack_from(buf, at)
    body_at = at + _RMQ_B.size
    if body_len < 0 or body_at + body_len + 3 > end:
        return f"bodyLength {body_len} overruns the record"
    topic_at = body_at + body_len + 1
    topic_len = buf[topic_at - 1]
    props_at = topic_at + topic_len + 2
    if topic_len < 1 or props_at > end:
        return f"topicLength {topic_len} overruns the record"
    (props_len,) = _U16.unpack_from(buf, props_at - 2)
    if props_len > MAX_PROPERTIES or props_at + props_len != end:
        return f"propertiesLength {props_len} does not match totalSize {total}"
    view = memoryview(buf)
    if zlib.crc32(view[body_at:body_at + body_len]) & 0x7FFFFFFF != crc:
        return "CRC mismatch"
    topic = _topic(bytes(view[topic_at:topic_at + topic_len]))
    if topic is None:
        return "invalid topic " + repr(bytes(view[topic_at:topic_at + topic_len]))[2:-1][:160]
    if queue_id < 0 or queue_offset < 0 or store_ts < 0:
        return f"negative queueId {queue_id}, queueOffset {queue_offset} or storeTimestamp {store_ts}"
    props = slice(props_at, end)
    if props_len and not _properties_ok(bytes(view[props])):
        return "properties are not UTF-8 name\\x01value\\x02 pairs"
    ip, port = born[:-4], int.from_bytes(born[-4:], "big")
    if not 0 <= port <= 65535:
        port = 0
    # the store host is whoever serves the message: its flag must not outlive this record's own layout
    wire = f"{flag},{sys_flag & ~STOREHOSTADDRESS_V6_FLAG},{born_ts},{ip.hex()},{port},{reconsume}"
    return Parsed(total, queue_id, queue_offset, store_ts, topic, props, slice(body_at, body_at + body_len), wire)


def _wire_fields(props: dict[str, str], timestamp: int) -> tuple[int, int, int, bytes, int, int]:
    """(flag, sysFlag, bornTimestamp, bornHost ip, bornHost port, reconsumeTimes) of a WIRE_PROPERTY value
    (as remoting_messages.WireFields writes it); the defaults for none or a malformed one."""
    parts = props.get(WIRE_PROPERTY, "").split(",")
    try:
        flag, sys_flag, born, ip_hex, port, reconsume = parts
        ip = bytes.fromhex(ip_hex)
        values = (int(flag), int(sys_flag), int(born), ip, int(port), int(reconsume))
    except ValueError:
        return 0, 0, timestamp, bytes(4), 0, 0
    if len(ip) not in (4, 16) or not 0 <= values[4] <= 65535 or not -(2**63) <= values[2] < 2**63 \
            or not all(-(2**31) <= v < 2**31 for v in (values[0], values[1], values[5])):
        return 0, 0, timestamp, bytes(4), 0, 0
    return values


def encode_rocketmq(topic_b: bytes, properties: dict[str, str], queue_id: int, queue_offset: int,
                    physical_offset: int, timestamp: int, body: bytes, store_host: bytes) -> bytes:
    """A record in RocketMQ's version 1 layout: the WIRE_PROPERTY's fields in their own places (and not among
    the properties), ``store_host`` the 8 bytes (IPv4 and port) of the broker that stored it."""
    flag, sys_flag, born_ts, ip, port, reconsume = _wire_fields(properties, timestamp)
    sys_flag &= ~STOREHOSTADDRESS_V6_FLAG
    sys_flag = sys_flag | BORNHOST_V6_FLAG if len(ip) == 16 else sys_flag & ~BORNHOST_V6_FLAG
    props_b = encode_properties({k: v for k, v in properties.items() if k != WIRE_PROPERTY})
    check_lengths(topic_b, props_b)
    total = rocketmq_size(len(topic_b), len(props_b), len(body), sys_flag)
    return b"".join((
        _RMQ_A.pack(total, ROCKETMQ_MAGIC, zlib.crc32(body) & 0x7FFFFFFF, queue_id, flag, queue_offset,
                    physical_offset, sys_flag, born_ts),
        ip, port.to_bytes(4, "big"), _I64.pack(timestamp), store_host,
        _RMQ_B.pack(reconsume, 0, len(body)), body, bytes((len(topic_b),)), topic_b,
        _U16.pack(len(props_b)), props_b))


def rocketmq_record_size(topic: str, properties: dict[str, str], body_len: int) -> int:
    props = {k: v for k, v in properties.items() if k != WIRE_PROPERTY}
    ip = _wire_fields(properties, 0)[3]
    return rocketmq_size(len(topic.encode("utf-8")), len(encode_properties(props)), body_len,
                         BORNHOST_V6_FLAG if len(ip) == 16 else 0)


def decode_record(buf: bytes | memoryview, pos: int, physical_offset: int) -> MessageRecord | Blank | None:
    """Decode the record at ``buf[pos:]``; ``None`` if it is incomplete, damaged or invalid."""
    r = check_record(buf, pos, physical_offset)
    if not isinstance(r, Parsed):
        return r if isinstance(r, Blank) else None
    return message_of(buf, r, physical_offset)


class RawRecord(NamedTuple):
    """A checked record as read, not decoded: what a pull re-encodes without building a MessageRecord."""

    buf: bytes
    parsed: Parsed
    physical_offset: int

    @property
    def size(self) -> int:
        return self.parsed.total

    @property
    def queue_offset(self) -> int:
        return self.parsed.queue_offset


def message_of(buf: bytes | memoryview, r: Parsed, physical_offset: int) -> MessageRecord:
    """The message of a checked record (RocketMQ's extra fields, for its layout, as the WIRE_PROPERTY)."""
    props = decode_properties(bytes(buf[r.props]))
    if r.wire is not None:
        props[WIRE_PROPERTY] = r.wire
    return MessageRecord(r.topic, r.queue_id, r.queue_offset, physical_offset, r.timestamp, props,
                         bytes(buf[r.body]), r.total)


#: (topic, queueId, queueOffset, physicalOffset, size, tags)
IndexEntry = tuple[str, int, int, int, int, str]
_TAGS_KEY = b"TAGS\x01"


def index_entry(buf: bytes | memoryview, r: Parsed, physical_offset: int) -> IndexEntry:
    """What a consume queue needs of a checked record (the body is not copied)."""
    tags = ""
    if r.props.stop > r.props.start:
        raw = bytes(buf[r.props])
        at = raw.find(_TAGS_KEY)
        if at == 0 or (at > 0 and raw[at - 1] == 2):
            tags = decode_properties(raw).get("TAGS", "")
    return r.topic, r.queue_id, r.queue_offset, physical_offset, r.total, tags


def decode_index(buf: bytes | memoryview, pos: int, physical_offset: int) -> IndexEntry | Blank | None:
    """:func:`decode_record` for indexing: the same checks, without materialising the message."""
    r = check_record(buf, pos, physical_offset)
    if not isinstance(r, Parsed):
        return r if isinstance(r, Blank) else None
    return index_entry(buf, r, physical_offset)


#: The topic that holds delayed messages, one queue per delay level (schedule/levels.py).
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
#: The most delay levels (queues of SCHEDULE_TOPIC) a broker may be configured with.
MAX_DELAY_LEVELS = 64


def queue_bound(topic: str, queue_nums: int) -> int:
    """How many queues ``topic`` may have in the store: ``queue_nums`` (the store's bound, topics.MAX_QUEUE_NUMS), or
    for SCHEDULE_TOPIC_XXXX at least one per delay level, whatever the levels configured."""
    return max(queue_nums, MAX_DELAY_LEVELS) if topic == SCHEDULE_TOPIC else queue_nums


def check_chunk(offset: int, data: bytes, segment_size: int, queue_nums: int, max_body: int) -> list[IndexEntry]:
    """Check bytes a peer sent for ``offset``: whole, valid records (and BLANK padding) placed as a
    commitlog of ``segment_size`` places them, within the send path's limits (MessageStore.validate).
    Returns what the consume queues need of each message; raises :class:`InvalidRecord`."""
    view = memoryview(data)
    entries: list[IndexEntry] = []
    pos = 0
    while pos < len(data):
        at = offset + pos
        r = check_record(view, pos, at)
        if isinstance(r, str):
            raise InvalidRecord(r, at)
        room = segment_size - at % segment_size
        if isinstance(r, Blank):
            _check_blank(data, pos, r, room, at)
            pos += r.size
            continue
        _check_limits(r, room, queue_nums, max_body, at)
        entries.append(index_entry(view, r, at))
        pos += r.total
    return entries


def _check_blank(data: bytes, pos: int, blank: Blank, room: int, at: int) -> None:
    size = blank.size
    if size != room:
        raise InvalidRecord(f"BLANK record of {size} bytes does not end at the segment end ({room} bytes "
                            "left)", at)
    if pos + size > len(data):
        raise InvalidRecord("incomplete BLANK record", at)
    if blank.magic == BLANK_MAGIC and data.count(0, pos + MIN_BLANK, pos + size) != size - MIN_BLANK:
        raise InvalidRecord("BLANK padding is not zeroes", at)  # RocketMQ leaves old bytes in its padding


def _check_limits(r: Parsed, room: int, queue_nums: int, max_body: int, at: int) -> None:
    """The send path's rules (MessageStore.validate) for a record a peer sends."""
    if r.total + MIN_BLANK > room:
        raise InvalidRecord(f"record of {r.total} bytes crosses the segment end ({room} bytes left)", at)
    body = r.body.stop - r.body.start
    if not 0 < body <= max_body:
        raise InvalidRecord(f"body of {body} bytes (this broker accepts 1 to maxMessageSize {max_body})", at)
    if r.queue_id >= queue_bound(r.topic, queue_nums):
        raise InvalidRecord(f"queueId {r.queue_id} is out of range 0..{queue_bound(r.topic, queue_nums) - 1}", at)
