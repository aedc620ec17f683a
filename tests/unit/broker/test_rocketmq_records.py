"""RocketMQ's own record layout (record.py, ``rocketmqHaPeers``): what a RocketMQ broker replicating from us
reads, and what we read from one. The layout here is written out field by field from RocketMQ's
MessageDecoder (version 1), apart from our encoder, so the two are checked against each other; the
integration test with a real RocketMQ slave (tests/interop/test_mixed_group.py) is the proof."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from services.broker.commitlog import CommitLog, InvalidRecord
from services.broker.record import (
    BORNHOST_V6_FLAG,
    ROCKETMQ_BLANK_MAGIC,
    ROCKETMQ_MAGIC,
    ROCKETMQ_MAGIC_V2,
    WIRE_PROPERTY,
    Blank,
    MessageRecord,
    check_chunk,
    check_record,
    decode_record,
    encode_rocketmq,
)

STORE_HOST = bytes([10, 0, 0, 7]) + (10911).to_bytes(4, "big")


def by_the_layout(topic: bytes, props: bytes, body: bytes, *, queue_id: int = 2, flag: int = 5,
                  queue_offset: int = 9, phys: int = 0, sys_flag: int = 0, born: int = 1700000000000,
                  born_host: bytes = bytes([192, 0, 2, 1]) + (4242).to_bytes(4, "big"),
                  stored: int = 1700000000123, reconsume: int = 3) -> bytes:
    """MessageDecoder's version 1 record, field by field."""
    fields = [
        struct.pack(">I", ROCKETMQ_MAGIC),
        struct.pack(">i", zlib.crc32(body) & 0x7FFFFFFF),
        struct.pack(">i", queue_id), struct.pack(">i", flag), struct.pack(">q", queue_offset),
        struct.pack(">q", phys), struct.pack(">i", sys_flag), struct.pack(">q", born), born_host,
        struct.pack(">q", stored), STORE_HOST, struct.pack(">i", reconsume), struct.pack(">q", 0),
        struct.pack(">i", len(body)), body, bytes([len(topic)]), topic, struct.pack(">h", len(props)), props,
    ]
    rest = b"".join(fields)
    return struct.pack(">i", 4 + len(rest)) + rest


PROPS = b"KEYS\x01k1\x02TAGS\x01tagA\x02UNIQ_KEY\x01ABC\x02"


def test_a_record_in_rocketmqs_layout_reads_with_its_fields_in_the_wire_property() -> None:
    raw = by_the_layout(b"TopicA", PROPS, b"hello")
    rec = decode_record(raw, 0, 0)
    assert isinstance(rec, MessageRecord)
    assert (rec.topic, rec.queue_id, rec.queue_offset, rec.store_timestamp, rec.body) == \
        ("TopicA", 2, 9, 1700000000123, b"hello")
    assert (rec.keys, rec.tags, rec.size) == ("k1", "tagA", len(raw))
    assert rec.properties[WIRE_PROPERTY] == "5,0,1700000000000,c0000201,4242,3"


def test_our_encoder_writes_that_layout_byte_for_byte() -> None:
    props = {"KEYS": "k1", "TAGS": "tagA", "UNIQ_KEY": "ABC", WIRE_PROPERTY: "5,0,1700000000000,c0000201,4242,3"}
    ours = encode_rocketmq(b"TopicA", props, 2, 9, 0, 1700000000123, b"hello", STORE_HOST)
    assert ours == by_the_layout(b"TopicA", PROPS, b"hello")


def test_an_ipv6_born_host_takes_twenty_bytes_and_its_flag() -> None:
    host = bytes(range(16)) + (7).to_bytes(4, "big")
    raw = by_the_layout(b"T", b"", b"x", sys_flag=BORNHOST_V6_FLAG, born_host=host)
    rec = decode_record(raw, 0, 0)
    assert isinstance(rec, MessageRecord)
    assert rec.properties[WIRE_PROPERTY] == f"5,{BORNHOST_V6_FLAG},1700000000000,{bytes(range(16)).hex()},7,3"
    props = {WIRE_PROPERTY: rec.properties[WIRE_PROPERTY]}
    assert encode_rocketmq(b"T", props, 2, 9, 0, 1700000000123, b"x", STORE_HOST) == raw


@pytest.mark.parametrize("damage, reason", [
    (lambda r: r[:-1] + b"\x00", "not UTF-8"),  # the last property byte: the pairs no longer end
    (lambda r: r[:90] + bytes([r[90] ^ 1]) + r[91:], "CRC mismatch"),  # a body byte
    (lambda r: r[:28] + struct.pack(">q", 64) + r[36:], "physicalOffset"),
    (lambda r: struct.pack(">i", len(r) + 4) + r[4:] + bytes(4), "propertiesLength"),
    (lambda r: r[:4] + struct.pack(">I", ROCKETMQ_MAGIC_V2) + r[8:], "version 2"),
])
def test_damage_and_lies_in_that_layout_are_named(damage, reason: str) -> None:  # type: ignore[no-untyped-def]
    raw = damage(by_the_layout(b"TopicA", PROPS, b"hello body!"))
    result = check_record(raw, 0, 0)
    assert isinstance(result, str) and reason in result, result


def test_rocketmqs_crc_covers_the_body_alone() -> None:
    """Why our own layout's CRC covers the whole record (docs/storage.md): in RocketMQ's, a flipped topic
    byte still reads, as another topic."""
    raw = by_the_layout(b"TopicA", PROPS, b"hello body!")
    flipped = raw[:100] + bytes([raw[100] ^ 1]) + raw[101:]
    rec = decode_record(flipped, 0, 0)
    assert isinstance(rec, MessageRecord) and rec.topic == "UopicA"


def test_a_commitlog_in_rocketmqs_layout_pads_with_its_blank_and_reads_back_after_a_restart(tmp_path: Path) -> None:
    seg = 4096
    log = CommitLog(tmp_path / "commitlog", seg, rocketmq_format=True, store_host=STORE_HOST)
    log.open()
    placed = [log.append_message("TopicA", 0, i, 1000 + i, {"KEYS": f"k{i}"}, bytes(700)) for i in range(8)]
    assert [offset // seg for offset, _ in placed] == [0, 0, 0, 0, 0, 1, 1, 1]
    end_of_first = placed[4][0] + placed[4][1]
    assert struct.unpack(">iI", log.read(end_of_first, 8)) == (seg - end_of_first, ROCKETMQ_BLANK_MAGIC)
    log.close()
    again = CommitLog(tmp_path / "commitlog", seg)
    again.open()
    assert [(r.queue_offset, r.keys) for r in again.iter_records(0)] == [(i, f"k{i}") for i in range(8)]
    assert again.max_offset == placed[-1][0] + placed[-1][1]
    again.close()


def test_a_peers_rocketmq_blank_may_hold_old_bytes_but_ours_must_be_zeroes() -> None:
    seg = 1024
    record = by_the_layout(b"T", b"", b"x" * 10)
    pad = seg - len(record)
    theirs = record + struct.pack(">iI", pad, ROCKETMQ_BLANK_MAGIC) + b"\xff" * (pad - 8)
    assert len(check_chunk(0, theirs, seg, 8, 1024)) == 1
    assert isinstance(check_record(theirs, len(record), len(record)), Blank)
    ours = record + struct.pack(">iI", pad, 0xBBCCDDEE) + b"\xff" * (pad - 8)
    with pytest.raises(InvalidRecord, match="not zeroes"):
        check_chunk(0, ours, seg, 8, 1024)
