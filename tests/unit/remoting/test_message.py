"""RocketMQ's message encodings (services/remoting/message.py): golden bytes laid out by hand from RocketMQ's
source, RocketMQ's reading of properties, and hostile batch and pull bodies.

Source references are RocketMQ 8fc57f1, common/src/main/java/org/apache/rocketmq/common/message/
MessageDecoder.java: encode (the 17 fields of a stored message, line 186), encodeMessage/decodeMessage (a
batch entry: totalSize, magic, bodyCRC, flag, body, properties, line 628), messageProperties2String and
string2messageProperties (line 572); UtilAll.crc32 masks to 31 bits (line 298); createMessageId (store
address, port, commit log offset).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.remoting.errors import BodyError
from services.remoting.message import (
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    STOREHOSTADDRESS_V6_FLAG,
    BatchEntry,
    PulledMessage,
    SocketAddress,
    TagFilter,
    body_crc,
    decode_batch,
    decode_properties,
    decode_pulled,
    encode_batch,
    encode_properties,
    encode_pulled,
    offset_msg_id,
)
from tests.support.examples import examples

STORE = SocketAddress(bytes([10, 0, 0, 7]), 10911)
BORN = SocketAddress(bytes([192, 168, 1, 20]), 53412)


def golden_pulled(body: bytes, topic: bytes, props: bytes, sys_flag: int = 0, born: bytes = b"", store: bytes = b"") -> bytes:
    """The bytes MessageDecoder.encode writes, field by field."""
    born = born or bytes([192, 168, 1, 20]) + struct.pack(">i", 53412)
    store = store or bytes([10, 0, 0, 7]) + struct.pack(">i", 10911)
    rest = b"".join([
        struct.pack(">I", 0xDAA320A7),                     # 2 MAGICCODE (-626843481)
        struct.pack(">i", zlib.crc32(body) & 0x7FFFFFFF),  # 3 BODYCRC
        struct.pack(">i", 3),                              # 4 QUEUEID
        struct.pack(">i", 5),                              # 5 FLAG
        struct.pack(">q", 42),                             # 6 QUEUEOFFSET
        struct.pack(">q", 4096),                           # 7 PHYSICALOFFSET
        struct.pack(">i", sys_flag),                       # 8 SYSFLAG
        struct.pack(">q", 1_700_000_000_000),              # 9 BORNTIMESTAMP
        born,                                              # 10 BORNHOST
        struct.pack(">q", 1_700_000_000_123),              # 11 STORETIMESTAMP
        store,                                             # 12 STOREHOST
        struct.pack(">i", 2),                              # 13 RECONSUMETIMES
        struct.pack(">q", 0),                              # 14 PREPARED TRANSACTION OFFSET
        struct.pack(">i", len(body)), body,                # 15 BODY
        bytes([len(topic)]), topic,                        # 16 TOPIC
        struct.pack(">h", len(props)), props,              # 17 PROPERTIES
    ])
    return struct.pack(">i", 4 + len(rest)) + rest         # 1 TOTALSIZE


BASE = PulledMessage(topic="TopicTest", queue_id=3, queue_offset=42, commit_log_offset=4096, body=b"hello",
                     properties={"KEYS": "k1", "TAGS": "tagA"}, store_timestamp=1_700_000_000_123, store_host=STORE,
                     born_timestamp=1_700_000_000_000, born_host=BORN, flag=5, sys_flag=0, reconsume_times=2)


def message(**changes: Any) -> PulledMessage:
    return replace(BASE, **changes)


def test_pulled_message_golden() -> None:
    raw = golden_pulled(b"hello", b"TopicTest", b"KEYS\x01k1\x02TAGS\x01tagA\x02")
    assert encode_pulled(message()) == raw
    assert decode_pulled(raw) == [message()]
    assert len(raw) == 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + 5 + 1 + 9 + 2 + 18


def test_ipv6_hosts_set_their_sys_flag_bits_and_take_16_bytes() -> None:
    born6, store6 = SocketAddress.parse("::1", 7), SocketAddress.parse("[fe80::2]", 8)
    raw = encode_pulled(message(born_host=born6, store_host=store6, sys_flag=COMPRESSED_FLAG))
    assert raw == golden_pulled(b"hello", b"TopicTest", b"KEYS\x01k1\x02TAGS\x01tagA\x02",
                                COMPRESSED_FLAG | BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG,
                                born6.ip + struct.pack(">i", 7), store6.ip + struct.pack(">i", 8))
    (back,) = decode_pulled(raw)
    assert (back.born_host, back.store_host) == (born6, store6)
    # the flags follow the addresses: a stale v6 bit on IPv4 hosts is cleared
    assert decode_pulled(encode_pulled(message(sys_flag=BORNHOST_V6_FLAG)))[0].sys_flag == 0


def test_offset_msg_id_is_store_host_port_and_offset_in_hex() -> None:
    assert offset_msg_id(STORE, 4096) == "0A00000700002A9F0000000000001000"
    assert message().msg_id == offset_msg_id(STORE, 4096)
    assert len(offset_msg_id(SocketAddress.parse("::1", 1), 0)) == 56  # 16 + 4 + 8 bytes for IPv6


def test_body_crc_is_java_crc32_masked_to_31_bits() -> None:
    assert body_crc(b"") == 0
    assert body_crc(b"hello") == zlib.crc32(b"hello") & 0x7FFFFFFF
    assert all(body_crc(bytes([i])) < 2**31 for i in range(256))


def test_several_pulled_messages_read_back_in_order() -> None:
    many = [message(queue_offset=i, body=bytes([i]) * i) for i in range(5)]
    assert decode_pulled(b"".join(encode_pulled(m) for m in many)) == many


@pytest.mark.parametrize(("mutate", "match"), [
    (lambda raw: raw[:-1], "runs past|storeSize"),
    (lambda raw: raw + b"\x00", "truncated"),
    (lambda raw: raw[:4] + b"\x00\x00\x00\x01" + raw[8:], "magic code"),
    (lambda raw: raw[:8] + b"\x00\x00\x00\x00" + raw[12:], "body CRC"),
    (lambda raw: struct.pack(">i", 12) + raw[4:], "storeSize 12"),
    (lambda raw: struct.pack(">i", len(raw) + 10) + raw[4:], "does not fit"),
])
def test_malformed_pulled_messages_are_refused(mutate: object, match: str) -> None:
    assert callable(mutate)
    with pytest.raises(BodyError, match=match):
        decode_pulled(mutate(encode_pulled(message())))


# ----------------------------------------------------------------------------------- properties


def test_properties_round_trip_and_rocketmqs_separators() -> None:
    props = {"KEYS": "order-1 order-2", "TAGS": "tagA", "UNIQ_KEY": "AC1100"}
    text = encode_properties(props)
    assert text == "KEYS\x01order-1 order-2\x02TAGS\x01tagA\x02UNIQ_KEY\x01AC1100\x02"
    assert decode_properties(text) == props


@pytest.mark.parametrize(("text", "expected"), [
    ("", {}),
    ("a\x01b", {"a": "b"}),                  # the last separator may be missing
    ("ab\x02", {}),                          # shorter than 3 characters
    ("\x01ab\x02", {}),                      # no name
    ("ab\x01\x02", {}),                      # no value
    ("a\x01b\x02a\x01c\x02", {"a": "c"}),    # the later one wins
    ("a\x01b\x01c\x02", {"a": "b\x01c"}),    # split at the first separator
    ("\x02\x02k\x01v", {"k": "v"}),
])
def test_properties_read_as_rocketmq_reads_them(text: str, expected: dict[str, str]) -> None:
    assert decode_properties(text) == expected


# --------------------------------------------------------------------------------------- batches


def golden_batch_entry(body: bytes, props: bytes, flag: int) -> bytes:
    """MessageDecoder.encodeMessage: totalSize, magic 0, bodyCRC 0, flag, bodyLength, body, props."""
    size = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(props)
    return struct.pack(">iiiii", size, 0, 0, flag, len(body)) + body + struct.pack(">h", len(props)) + props


def test_batch_golden_and_round_trip() -> None:
    entries = [BatchEntry(b"one", {"TAGS": "a"}, 1), BatchEntry(b"", {}, 0), BatchEntry(b"three", {"KEYS": "k"})]
    raw = golden_batch_entry(b"one", b"TAGS\x01a\x02", 1) + golden_batch_entry(b"", b"", 0) + \
        golden_batch_entry(b"three", b"KEYS\x01k\x02", 0)
    assert encode_batch(entries) == raw
    assert decode_batch(raw) == entries


@pytest.mark.parametrize(("raw", "match"), [
    (b"", "empty"),
    (b"\x00" * 10, "truncated"),
    (struct.pack(">iiiii", 5, 0, 0, 0, 0) + b"\x00\x00", "totalSize 5"),
    (struct.pack(">iiiii", 1000, 0, 0, 0, 0) + b"\x00\x00", "totalSize 1000"),
    (struct.pack(">iiiii", 22, 0, 0, 0, 7) + b"\x00\x00", "bodyLength 7"),
    (struct.pack(">iiiii", 22, 0, 0, 0, -1) + b"\x00\x00", "bodyLength -1"),
    (struct.pack(">iiiii", 22, 0, 0, 0, 0) + b"\x00\x05", "propertiesLength 5"),
    (struct.pack(">iiiii", 22, 0, 0, 0, 0) + b"\xff\xff", "propertiesLength -1"),
    (struct.pack(">iiiii", 24, 0, 0, 0, 0) + b"\x00\x02\xff\xfe", "not UTF-8"),
    (golden_batch_entry(b"x", b"", 0) + b"\x00", "truncated"),
])
def test_malformed_batches_are_refused_naming_the_entry(raw: bytes, match: str) -> None:
    with pytest.raises(BodyError, match=match):
        decode_batch(raw)


def test_a_batch_of_too_many_entries_is_refused() -> None:
    with pytest.raises(BodyError, match="more than 3 messages"):
        decode_batch(golden_batch_entry(b"x", b"", 0) * 4, max_entries=3)


@settings(deadline=None, max_examples=examples(400))
@given(st.binary(max_size=200))
def test_any_bytes_are_a_batch_or_a_body_error(raw: bytes) -> None:
    try:
        entries = decode_batch(raw)
    except BodyError:
        return
    assert sum(20 + len(e.body) + 2 + len(encode_properties(e.properties).encode()) for e in entries) <= len(raw)


@settings(deadline=None, max_examples=examples(400))
@given(st.binary(max_size=300))
def test_any_bytes_are_pulled_messages_or_a_body_error(raw: bytes) -> None:
    try:
        decode_pulled(raw)
    except BodyError:
        pass


@settings(deadline=None, max_examples=examples(200))
@given(st.lists(st.tuples(st.binary(max_size=40), st.integers(-(2**31), 2**31 - 1)), max_size=5),
       st.integers(0, 300))
def test_flipping_bytes_of_a_valid_batch_never_crashes(parts: list[tuple[bytes, int]], where: int) -> None:
    raw = bytearray(encode_batch([BatchEntry(body, {"k": "v"}, flag) for body, flag in parts]))
    if raw:
        raw[where % len(raw)] ^= 0xFF
    try:
        decode_batch(bytes(raw))
    except BodyError:
        pass


# --------------------------------------------------------------------------------------- filters


@pytest.mark.parametrize(("expression", "tags", "expected"), [
    ("*", "", True), (None, "x", True), ("", "x", True),
    ("tagA", "tagA", True), ("tagA", "tagB", False), ("tagA", "", False),
    ("tagA || tagB", "tagB", True), (" tagA||tagC ", "tagC", True), ("tagA || tagB", "tagA || tagB", False),
    ("||", "", False),
])
def test_tag_filter_follows_filter_api(expression: str | None, tags: str, expected: bool) -> None:
    assert TagFilter.parse(expression).matches(tags) is expected


def test_socket_address_parse() -> None:
    assert SocketAddress.parse("10.0.0.7", 10911) == STORE
    assert SocketAddress.parse("broker.example", 1).ip == bytes(4)
    assert SocketAddress.parse("::1", 1).v6
