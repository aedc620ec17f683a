"""A pull answer built straight from a stored record's bytes (``pulled_bytes``) is byte for byte what decoding
the record and encoding its message gives (``encode_pulled(to_pulled(...))``), for records in our layout and
in RocketMQ's, whatever their properties; and ``raw_tags`` finds the tags a decoded message has."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.broker.commitlog import RawRecord
from services.broker.record import message_of
from services.broker.remoting_messages import WIRE, WireFields, pulled_bytes, raw_tags, to_pulled
from services.broker.store import Message, MessageStore
from services.remoting.message import SocketAddress, encode_pulled

STORE_HOST = SocketAddress.parse("127.0.0.1", 10911)
V6_HOST = SocketAddress(bytes(range(16)), 40000)

names = st.text(st.characters(codec="utf-8", exclude_characters="\x00\x01\x02"), min_size=1,
                max_size=12).filter(lambda n: not n.startswith("__MQCTL."))
values = st.text(st.characters(codec="utf-8", exclude_characters="\x00\x01\x02"), max_size=40)


def stored(tmp: Path, messages: list[Message], rocketmq_format: bool = False) -> list[RawRecord]:
    store = MessageStore(tmp, "127.0.0.1:10911", 1 << 20, rocketmq_format=rocketmq_format)
    store.open()
    try:
        store.append_batch(messages, 1_700_000_000_000)
        store.set_confirm_offset(store.max_offset)
        raws = []
        for queue_id in sorted({m.queue_id or 0 for m in messages}):
            got = store.get_raw(messages[0].topic, queue_id, 0, 32)
            assert got.status == "FOUND", got
            raws += got.records
        return raws
    finally:
        store.close()


def old_path(raw: RawRecord) -> bytes:
    return encode_pulled(to_pulled(message_of(raw.buf, raw.parsed, raw.physical_offset), STORE_HOST))


def test_a_plain_message_and_one_with_the_wire_fields(tmp_path: Path) -> None:
    wire = WireFields(flag=3, sys_flag=0, born_timestamp=1_699_999_999_000, born_host=V6_HOST, reconsume_times=2)
    messages = [Message("T", b"plain", queue_id=0),
                Message("T", b"body \x00\x01\x02 bytes", keys="k1 k2", tags="TagA", queue_id=0,
                        properties={"UNIQ_KEY": "ABC", "a": "", WIRE: wire.encode(), "z": "last"})]
    for raw in stored(tmp_path, messages):
        assert pulled_bytes(raw, STORE_HOST) == old_path(raw)
    assert [raw_tags(raw) for raw in stored(tmp_path / "again", messages)] == ["", "TagA"]


def test_records_in_rocketmqs_layout(tmp_path: Path) -> None:
    wire = WireFields(flag=7, sys_flag=0, born_timestamp=5, born_host=STORE_HOST, reconsume_times=1)
    messages = [Message("T", b"a" * 50, tags="TagB", queue_id=1, properties={WIRE: wire.encode(), "k": "v"}),
                Message("T", b"", queue_id=1)]
    raws = stored(tmp_path, messages, rocketmq_format=True)
    assert [raw.parsed.wire is not None for raw in raws] == [True, True]
    for raw in raws:
        assert pulled_bytes(raw, STORE_HOST) == old_path(raw)
    assert raw_tags(raws[0]) == "TagB"


def test_a_name_that_ends_like_the_wire_pair_is_not_taken_for_it(tmp_path: Path) -> None:
    message = Message("T", b"x", queue_id=0, properties={"X__MQCTL.WIRE": "not it", "XTAGS": "no", "TAGS": "yes"})
    (raw,) = stored(tmp_path, [message])
    assert pulled_bytes(raw, STORE_HOST) == old_path(raw)
    assert raw_tags(raw) == "yes"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(props=st.dictionaries(names, values, max_size=6), body=st.binary(max_size=300),
       tags=values, keys=values, wire=st.booleans())
def test_any_properties(tmp_path_factory: pytest.TempPathFactory, props: dict[str, str], body: bytes, tags: str,
                        keys: str, wire: bool) -> None:
    if wire:
        props = {**props, WIRE: WireFields(1, 0, 42, STORE_HOST, 1).encode()}
    (raw,) = stored(tmp_path_factory.mktemp("s"), [Message("Topic_1", body, keys, tags, 0, props)])
    assert pulled_bytes(raw, STORE_HOST) == old_path(raw)
    assert raw_tags(raw) == message_of(raw.buf, raw.parsed, raw.physical_offset).tags
