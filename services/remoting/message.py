"""RocketMQ's message encodings, as pure functions: what a send carries and what a pull answers.

**Properties** travel as one string, ``name \\x01 value \\x02`` per entry (``MessageDecoder``'s
``messageProperties2String``/``string2messageProperties``). Reading follows RocketMQ: an entry shorter than
three characters or without a name or value is skipped, a later entry replaces an earlier one.

**A batch** (``SEND_BATCH_MESSAGE``, or a send whose header says ``batch``) is a body holding messages back
to back, each as ``MessageDecoder.encodeMessage`` writes it (all integers big-endian)::

    0  4  totalSize        the whole entry, this field included
    4  4  magicCode        written 0 by clients, ignored
    8  4  bodyCRC          written 0 by clients, ignored
    12 4  flag
    16 4  bodyLength       B
    20 B  body
    .. 2  propertiesLength P
    .. P  properties

**A pulled message** is what ``MessageDecoder.decode`` reads, one after another in a pull answer's body::

    0  4  storeSize        the whole message, this field included
    4  4  magicCode        MESSAGE_MAGIC_CODE (0xDAA320A7)
    8  4  bodyCRC          CRC32 of the body, masked to 31 bits (UtilAll.crc32)
    12 4  queueId
    16 4  flag
    20 8  queueOffset
    28 8  physicalOffset   the commit log offset
    36 4  sysFlag          bit 0 compressed body, bit 4 IPv6 born host, bit 5 IPv6 store host, ...
    40 8  bornTimestamp
    48 8  bornHost         4 address bytes + 4 port bytes (16 + 4 with BORNHOST_V6_FLAG)
    .. 8  storeTimestamp
    .. 8  storeHost        as bornHost (STOREHOSTADDRESS_V6_FLAG)
    .. 4  reconsumeTimes
    .. 8  preparedTransactionOffset
    .. 4  bodyLength       B, then the body
    .. 1  topicLength      T, then the topic
    .. 2  propertiesLength P, then the properties

Everything read here comes from the network: every length is checked against what is left, and a bad
input raises ``BodyError`` naming the entry and the field, never an index error.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import secrets
import struct
import time
import zlib
from dataclasses import dataclass, field

from services.remoting.errors import BodyError

__all__ = [
    "BORNHOST_V6_FLAG",
    "COMPRESSED_FLAG",
    "MESSAGE_MAGIC_CODE",
    "NAME_VALUE_SEPARATOR",
    "PROPERTY_SEPARATOR",
    "STOREHOSTADDRESS_V6_FLAG",
    "TRANSACTION_PREPARED_TYPE",
    "TRANSACTION_TYPE_MASK",
    "UNIQ_KEY",
    "UNKNOWN_HOST",
    "BatchEntry",
    "PulledMessage",
    "SocketAddress",
    "TagFilter",
    "body_crc",
    "decode_batch",
    "decode_properties",
    "decode_pulled",
    "encode_batch",
    "encode_properties",
    "encode_pulled",
    "encode_pulled_parts",
    "new_uniq_id",
    "offset_msg_id",
]

#: The property holding a message's own id, which its producer gives it (MessageConst.PROPERTY_UNIQ_CLIENT_...).
UNIQ_KEY = "UNIQ_KEY"
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

#: MessageSysFlag bits.
COMPRESSED_FLAG = 0x1
TRANSACTION_TYPE_MASK = 0x3 << 2
TRANSACTION_PREPARED_TYPE = 0x1 << 2
BORNHOST_V6_FLAG = 0x1 << 4
STOREHOSTADDRESS_V6_FLAG = 0x1 << 5

#: MessageDecoder.MESSAGE_MAGIC_CODE (-626843481): the first message version, a one-byte topic length.
MESSAGE_MAGIC_CODE = 0xDAA320A7

_BATCH_HEAD = struct.Struct(">iiiii")  # totalSize, magicCode, bodyCRC, flag, bodyLength
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PULLED_HEAD = struct.Struct(">iIiiiqqiq")  # storeSize .. bornTimestamp (48 bytes)
_STORE_TIME = struct.Struct(">q")
_TAIL = struct.Struct(">iqi")  # reconsumeTimes, preparedTransactionOffset, bodyLength
_MAX_PROPERTIES = 32767  # a short length


# ------------------------------------------------------------------------------------- properties


def encode_properties(properties: dict[str, str]) -> str:
    """``name\\x01value\\x02`` for every entry, in the mapping's order."""
    return "".join(f"{name}{NAME_VALUE_SEPARATOR}{value}{PROPERTY_SEPARATOR}" for name, value in properties.items())


def decode_properties(text: str) -> dict[str, str]:
    """RocketMQ's reading of a properties string: entries of fewer than three characters, or whose
    separator is missing, first or last, are skipped; a name seen twice keeps its last value."""
    result: dict[str, str] = {}
    for entry in text.split(PROPERTY_SEPARATOR):
        if len(entry) < 3:
            continue
        split = entry.find(NAME_VALUE_SEPARATOR)
        if 0 < split < len(entry) - 1:
            result[entry[:split]] = entry[split + 1:]
    return result


def _utf8(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyError(f"{what} is not UTF-8 (byte {exc.start})") from None


# ------------------------------------------------------------------------------------------ batches


@dataclass(frozen=True)
class BatchEntry:
    """One message of a batch: RocketMQ's batch encoding carries only these three fields."""

    body: bytes
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0


def encode_batch(entries: list[BatchEntry]) -> bytes:
    """The body of a batch send (``MessageDecoder.encodeMessages``)."""
    parts = []
    for entry in entries:
        props = encode_properties(entry.properties).encode("utf-8")
        if len(props) > _MAX_PROPERTIES:
            raise ValueError(f"properties of {len(props)} bytes do not fit a short length")
        size = _BATCH_HEAD.size + len(entry.body) + 2 + len(props)
        parts += [_BATCH_HEAD.pack(size, 0, 0, entry.flag, len(entry.body)), entry.body, _I16.pack(len(props)), props]
    return b"".join(parts)


def decode_batch(data: bytes, max_entries: int = 100_000) -> list[BatchEntry]:
    """The messages of a batch body. ``BodyError`` if the body is not whole entries whose sizes agree."""
    entries: list[BatchEntry] = []
    pos = 0
    while pos < len(data):
        if len(entries) >= max_entries:
            raise BodyError(f"batch holds more than {max_entries} messages")
        entry, pos = _batch_entry(data, pos, len(entries))
        entries.append(entry)
    if not entries:
        raise BodyError("batch body is empty")
    return entries


def _batch_entry(data: bytes, pos: int, index: int) -> tuple[BatchEntry, int]:
    where = f"batch message {index} (at byte {pos})"
    if len(data) - pos < _BATCH_HEAD.size + 2:
        raise BodyError(f"{where} is truncated: {len(data) - pos} bytes left")
    size, _, _, flag, body_length = _BATCH_HEAD.unpack_from(data, pos)
    if size < _BATCH_HEAD.size + 2 or size > len(data) - pos:
        raise BodyError(f"{where}: totalSize {size} does not fit the {len(data) - pos} bytes left")
    end = pos + size
    body_start = pos + _BATCH_HEAD.size
    if body_length < 0 or body_length > end - body_start - 2:
        raise BodyError(f"{where}: bodyLength {body_length} does not fit its totalSize {size}")
    props_at = body_start + body_length
    (props_length,) = _I16.unpack_from(data, props_at)
    if props_length < 0 or props_at + 2 + props_length != end:
        raise BodyError(f"{where}: propertiesLength {props_length} does not end at its totalSize {size}")
    text = _utf8(data[props_at + 2:end], f"{where}: properties")
    return BatchEntry(data[body_start:props_at], decode_properties(text), flag), end


# -------------------------------------------------------------------------------- pulled messages


@dataclass(frozen=True)
class SocketAddress:
    """A host as the message encoding holds it: 4 (IPv4) or 16 (IPv6) address bytes and a port."""

    ip: bytes
    port: int

    @classmethod
    def parse(cls, host: str, port: int) -> SocketAddress:
        """From a literal address (``10.0.0.1``, ``::1``, ``[::1]``); anything else reads as 0.0.0.0."""
        try:
            return cls(ipaddress.ip_address(host.strip("[]")).packed, port)
        except ValueError:
            return cls(bytes(4), port)

    @property
    def v6(self) -> bool:
        return len(self.ip) == 16

    def encode(self) -> bytes:
        return self.ip + _I32.pack(self.port)


#: The host of a message whose origin is not known (0.0.0.0:0).
UNKNOWN_HOST = SocketAddress(bytes(4), 0)


@dataclass(frozen=True)
class PulledMessage:
    """A stored message as a pull answer carries it (``MessageExt``)."""

    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    body: bytes
    properties: dict[str, str]
    store_timestamp: int
    store_host: SocketAddress
    born_timestamp: int = 0
    born_host: SocketAddress = UNKNOWN_HOST
    flag: int = 0
    sys_flag: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    #: The message's size in the answer it came in (0 for one built here); not part of its identity.
    store_size: int = field(default=0, compare=False)

    @property
    def msg_id(self) -> str:
        return offset_msg_id(self.store_host, self.commit_log_offset)

    @property
    def tags(self) -> str:
        return self.properties.get("TAGS", "")

    @property
    def keys(self) -> str:
        return self.properties.get("KEYS", "")


_UNIQ_COUNTER = itertools.count()
_UNIQ_PREFIX = os.getpid().to_bytes(4, "big")[-2:] + secrets.token_bytes(4)


def new_uniq_id() -> str:
    """A message id of the UNIQ_KEY kind, as a producer gives each message (and a broker one sent without):
    16 bytes in upper-case hex, unique in this process (pid, random, time, counter)."""
    stamp = int(time.time() * 1000) & 0xFFFFFFFF
    counter = next(_UNIQ_COUNTER) & 0xFFFF
    return (bytes(4) + _UNIQ_PREFIX + stamp.to_bytes(4, "big") + counter.to_bytes(2, "big")).hex().upper()


def body_crc(body: bytes | memoryview) -> int:
    """``UtilAll.crc32``: java.util.zip.CRC32 of the body, masked to a non-negative int."""
    return zlib.crc32(body) & 0x7FFFFFFF


def offset_msg_id(store_host: SocketAddress, commit_log_offset: int) -> str:
    """RocketMQ's offset message id: store address, port and commit log offset, in upper-case hex."""
    return (store_host.encode() + struct.pack(">q", commit_log_offset)).hex().upper()


def encode_pulled(message: PulledMessage) -> bytes:
    """One message as ``MessageDecoder.encode`` writes it; the IPv6 flags follow the addresses given."""
    return encode_pulled_parts(message.topic.encode("utf-8"), encode_properties(message.properties).encode("utf-8"),
                               message.body, message.queue_id, message.flag, message.queue_offset,
                               message.commit_log_offset, message.sys_flag, message.born_timestamp,
                               message.born_host, message.store_timestamp, message.store_host,
                               message.reconsume_times, message.prepared_transaction_offset)


def encode_pulled_parts(topic: bytes, props: bytes, body: bytes | memoryview, queue_id: int, flag: int,
                        queue_offset: int, commit_log_offset: int, sys_flag: int, born_timestamp: int,
                        born_host: SocketAddress, store_timestamp: int, store_host: SocketAddress,
                        reconsume_times: int = 0, prepared_transaction_offset: int = 0) -> bytes:
    """:func:`encode_pulled` from the message's parts, its topic and properties already encoded (a stored
    record's bytes, which the pull path need not decode)."""
    if len(topic) > 127 or len(props) > _MAX_PROPERTIES:
        raise ValueError("a topic longer than 127 bytes or properties beyond 32767 bytes cannot be encoded")
    sys_flag &= ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
    sys_flag |= (BORNHOST_V6_FLAG if born_host.v6 else 0)
    sys_flag |= (STOREHOSTADDRESS_V6_FLAG if store_host.v6 else 0)
    born, store = born_host.encode(), store_host.encode()
    size = (_PULLED_HEAD.size + len(born) + _STORE_TIME.size + len(store) + _TAIL.size + len(body)
            + 1 + len(topic) + 2 + len(props))
    return b"".join((
        _PULLED_HEAD.pack(size, MESSAGE_MAGIC_CODE, body_crc(body), queue_id, flag, queue_offset, commit_log_offset,
                          sys_flag, born_timestamp),
        born, _STORE_TIME.pack(store_timestamp), store,
        _TAIL.pack(reconsume_times, prepared_transaction_offset, len(body)), body,
        bytes([len(topic)]), topic, _I16.pack(len(props)), props))


def decode_pulled(data: bytes) -> list[PulledMessage]:
    """The messages of a pull answer's body (for our own consumers and the tests), strictly: sizes must
    agree, the magic code must be the first version's, the body CRC must match."""
    messages: list[PulledMessage] = []
    pos = 0
    while pos < len(data):
        message, pos = _pulled(data, pos, len(messages))
        messages.append(message)
    return messages


class _Reader:
    def __init__(self, data: bytes, start: int, end: int, where: str) -> None:
        self.data, self.pos, self.end, self.where = data, start, end, where

    def take(self, count: int, what: str) -> bytes:
        if count < 0 or count > self.end - self.pos:
            raise BodyError(f"{self.where}: {what} of {count} bytes runs past the message's end")
        chunk = self.data[self.pos:self.pos + count]
        self.pos += count
        return chunk

    def unpack(self, layout: struct.Struct, what: str) -> tuple[int, ...]:
        return layout.unpack(self.take(layout.size, what))

    def host(self, v6: bool, what: str) -> SocketAddress:
        ip = self.take(16 if v6 else 4, what)
        (port,) = self.unpack(_I32, what)
        return SocketAddress(ip, port)


def _pulled(data: bytes, pos: int, index: int) -> tuple[PulledMessage, int]:
    where = f"message {index} (at byte {pos})"
    if len(data) - pos < _PULLED_HEAD.size:
        raise BodyError(f"{where} is truncated: {len(data) - pos} bytes left")
    size = _I32.unpack_from(data, pos)[0]
    if size < _PULLED_HEAD.size or size > len(data) - pos:
        raise BodyError(f"{where}: storeSize {size} does not fit the {len(data) - pos} bytes left")
    r = _Reader(data, pos, pos + size, where)
    _, magic, crc, queue_id, flag, queue_offset, physical, sys_flag, born_ts = r.unpack(_PULLED_HEAD, "header")
    if magic != MESSAGE_MAGIC_CODE:
        raise BodyError(f"{where}: magic code {magic:#x} is not {MESSAGE_MAGIC_CODE:#x}")
    born = r.host(bool(sys_flag & BORNHOST_V6_FLAG), "bornHost")
    (store_ts,) = r.unpack(_STORE_TIME, "storeTimestamp")
    store = r.host(bool(sys_flag & STOREHOSTADDRESS_V6_FLAG), "storeHost")
    reconsume, prepared, body_length = r.unpack(_TAIL, "reconsumeTimes")
    body = r.take(body_length, "body")
    if body_crc(body) != crc:
        raise BodyError(f"{where}: body CRC {crc} does not match the body ({body_crc(body)})")
    topic = _utf8(r.take(r.take(1, "topicLength")[0], "topic"), f"{where}: topic")
    (props_length,) = r.unpack(_I16, "propertiesLength")
    props = decode_properties(_utf8(r.take(props_length, "properties"), f"{where}: properties"))
    if r.pos != r.end:
        raise BodyError(f"{where}: {r.end - r.pos} bytes left over inside its storeSize {size}")
    return PulledMessage(topic, queue_id, queue_offset, physical, body, props, store_ts, store, born_ts, born, flag,
                         sys_flag, reconsume, prepared, size), r.end


# ------------------------------------------------------------------------------------------ filters


@dataclass(frozen=True)
class TagFilter:
    """A TAG subscription expression (``FilterAPI.buildSubscriptionData``): ``*`` (or empty) takes every
    message; otherwise the expression is tags joined by ``||``, and a message matches when its tag is
    one of them."""

    tags: frozenset[str] | None  # None: every message

    @classmethod
    def parse(cls, expression: str | None) -> TagFilter:
        if not expression or expression.strip() == "*":
            return cls(None)
        return cls(frozenset(tag.strip() for tag in expression.split("||") if tag.strip()))

    def matches(self, tags: str) -> bool:
        return self.tags is None or tags in self.tags
