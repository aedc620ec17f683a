"""Between RocketMQ's messages and our store's records, pure: what a send becomes in the store, and what a
stored record becomes in a pull answer.

Our commitlog record keeps topic, queue, timestamps, properties and body (docs/storage.md), not the
fields RocketMQ's own record adds: the producer's ``flag``, the ``sysFlag`` (a compressed body, its
compression type), ``bornTimestamp``, ``bornHost`` and ``reconsumeTimes``. A send over the remoting
protocol keeps them in one reserved property, ``__MQCTL.WIRE``, that a pull answer turns back into the
message's fields and never shows as a property. A record written over HTTP has no such property and reads
with flag 0, sysFlag 0, born when stored, from 0.0.0.0:0. A client may not set a property whose name
starts with ``__MQCTL.``.

Transactional half messages are stored in the half topic (transaction/half.py), delayed and timed messages
in their schedule topics (schedule/levels.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from services.broker.record import WIRE_PROPERTY, MessageRecord, RawRecord
from services.broker.store import Message
from services.common.codes import ResponseCode
from services.remoting.broker_headers import SendMessageRequestHeader
from services.remoting.message import (
    UNKNOWN_HOST,
    PulledMessage,
    SocketAddress,
    decode_batch,
    decode_properties,
    encode_pulled_parts,
    new_uniq_id,
)

__all__ = ["RESERVED_PREFIX", "WIRE", "Refusal", "Stamp", "WireFields", "new_uniq_id", "pulled_bytes", "raw_tags",
           "send_refusal", "to_pulled", "to_store_messages"]

RESERVED_PREFIX = "__MQCTL."
WIRE = WIRE_PROPERTY  # the store's record codec reads it too (RocketMQ's layout)
assert WIRE.startswith(RESERVED_PREFIX)
_WIRE_KEY = WIRE.encode("ascii") + b"\x01"
_TAGS_KEY = b"TAGS\x01"
_WIRE_VALUE = re.compile(r"(-?\d{1,11}),(-?\d{1,11}),(-?\d{1,20}),((?:[0-9a-f]{8}){1,4}),(\d{1,5}),(-?\d{1,11})")


@dataclass(frozen=True)
class Refusal:
    code: int
    remark: str


@dataclass(frozen=True)
class WireFields:
    """The RocketMQ message fields our record has no place for (kept in the ``__MQCTL.WIRE`` property)."""

    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: SocketAddress = UNKNOWN_HOST
    reconsume_times: int = 0

    def encode(self) -> str:
        return (f"{self.flag},{self.sys_flag},{self.born_timestamp},{self.born_host.ip.hex()},"
                f"{self.born_host.port},{self.reconsume_times}")

    @classmethod
    def decode(cls, value: str | None, default_born: int) -> WireFields:
        """The fields of a ``__MQCTL.WIRE`` value; for none, or one not written by ``encode`` (a property
        set over HTTP), the defaults."""
        match = _WIRE_VALUE.fullmatch(value) if value else None
        if match is None or len(match[4]) not in (8, 32) or int(match[5]) > 65535:
            return cls(born_timestamp=default_born)
        numbers = [int(match[i]) for i in (1, 2, 3, 6)]
        if not all(-(2**31) <= n < 2**31 for n in (numbers[0], numbers[1], numbers[3])):
            return cls(born_timestamp=default_born)
        return cls(numbers[0], numbers[1], numbers[2], SocketAddress(bytes.fromhex(match[4]), int(match[5])),
                   numbers[3])


# ------------------------------------------------------------------------------------------------ send


def send_refusal(properties: dict[str, str], sys_flag: int) -> Refusal | None:
    """Why a message with these properties cannot be stored, or None."""
    reserved = next((name for name in properties if name.startswith(RESERVED_PREFIX)), None)
    if reserved is not None:
        return Refusal(ResponseCode.MESSAGE_ILLEGAL, f"property {reserved[:64]!r} is reserved: names starting "
                                                     f"with {RESERVED_PREFIX} are the broker's own")
    return None


@dataclass(frozen=True)
class Stamp:
    """What the broker writes into every message it is sent (as RocketMQ's does): its cluster, its region
    and whether tracing is on (``CLUSTER``, ``MSG_REGION``, ``TRACE_ON``)."""

    cluster: str
    region: str = "DefaultRegion"
    trace_on: bool = True


def to_store_messages(header: SendMessageRequestHeader, body: bytes, born_host: SocketAddress,
                      stamp: Stamp) -> list[Message] | Refusal:
    """The store messages of a send (one, or each message of a batch), or why it is refused. A bad batch
    body raises BodyError."""
    queue_id = header.queue_id if header.queue_id >= 0 else None
    wire = WireFields(header.flag, header.sys_flag, header.born_timestamp, born_host, header.reconsume_times or 0)
    if header.is_batch:
        entries = [(e.body, e.properties, e.flag) for e in decode_batch(body)]
    else:
        entries = [(body, decode_properties(header.properties or ""), header.flag)]
    messages: list[Message] = []
    for entry_body, properties, flag in entries:
        refusal = send_refusal(properties, header.sys_flag)
        if refusal is not None:
            return refusal
        messages.append(_store_message(header.topic, queue_id, entry_body, properties,
                                       WireFields(flag, wire.sys_flag, wire.born_timestamp, born_host,
                                                  wire.reconsume_times), stamp))
    return messages


def _store_message(topic: str, queue_id: int | None, body: bytes, properties: dict[str, str], wire: WireFields,
                   stamp: Stamp) -> Message:
    """The properties are added in the order RocketMQ's broker adds them (it matters where two of them fall
    into one bucket of the client's HashMap: the order a consumer sees them in)."""
    props = dict(properties)
    keys, tags = props.pop("KEYS", ""), props.pop("TAGS", "")
    props["MSG_REGION"] = stamp.region
    props["TRACE_ON"] = "true" if stamp.trace_on else "false"
    if not props.get("UNIQ_KEY"):
        props["UNIQ_KEY"] = new_uniq_id()
    props["CLUSTER"] = stamp.cluster
    props[WIRE] = wire.encode()
    return Message(topic, body, keys, tags, queue_id, props)


# ------------------------------------------------------------------------------------------------ pull


def _pair(props: bytes, key: bytes) -> tuple[int, int] | None:
    """Where the pair named ``key`` (its name and \\x01) starts and ends (after its \\x02) in a record's
    properties, which the store has checked to be whole name\\x01value\\x02 pairs; None without one."""
    at = props.find(key)
    while at > 0 and props[at - 1] != 2:  # inside another pair's name: look further
        at = props.find(key, at + 1)
    if at < 0:
        return None
    return at, props.index(b"\x02", at) + 1


def raw_tags(raw: RawRecord) -> str:
    """The TAGS property of a record as read (what a tag filter matches)."""
    props = raw.buf[raw.parsed.props]
    found = _pair(props, _TAGS_KEY)
    return props[found[0] + len(_TAGS_KEY):found[1] - 1].decode("utf-8") if found else ""


def pulled_bytes(raw: RawRecord, store_host: SocketAddress) -> bytes:
    """A checked record as a pull answer carries it, straight from its bytes: what ``to_pulled`` and
    ``encode_pulled`` give for its decoded message (the properties in their stored order, less the
    ``__MQCTL.WIRE`` pair, whose fields go back in their places)."""
    r = raw.parsed
    props = raw.buf[r.props]
    wire_value = r.wire
    found = _pair(props, _WIRE_KEY)
    if found is not None:  # (a record in RocketMQ's layout has its own fields: a stored pair is only dropped)
        if wire_value is None:
            wire_value = props[found[0] + len(_WIRE_KEY):found[1] - 1].decode("ascii", errors="replace")
        props = props[:found[0]] + props[found[1]:]
    wire = WireFields.decode(wire_value, r.timestamp)
    return encode_pulled_parts(r.topic.encode("ascii"), props, memoryview(raw.buf)[r.body], r.queue_id, wire.flag,
                               r.queue_offset, raw.physical_offset, wire.sys_flag, wire.born_timestamp,
                               wire.born_host, r.timestamp, store_host, wire.reconsume_times)


def to_pulled(record: MessageRecord, store_host: SocketAddress) -> PulledMessage:
    """A stored record as a pull answer carries it: the ``__MQCTL.WIRE`` fields back in their places."""
    props = dict(record.properties)
    wire = WireFields.decode(props.pop(WIRE, None), record.store_timestamp)
    return PulledMessage(record.topic, record.queue_id, record.queue_offset, record.physical_offset, record.body,
                         props, record.store_timestamp, store_host, wire.born_timestamp, wire.born_host, wire.flag,
                         wire.sys_flag, wire.reconsume_times)
