"""Consumer offsets (services/broker/consumer_offsets.py): the table, its durable file (CRC, .bak, refusal of a
damaged file), the bound on entries, and a slave's copy of its master's table over the remoting protocol."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest

from services.broker import consumer_offsets as co
from services.broker.consumer_offsets import (
    ConsumerOffsets,
    ConsumerOffsetsDamaged,
    OffsetTable,
    TableFull,
    decode_file,
    encode_file,
)
from services.common.codes import ResponseCode
from services.remoting.broker_bodies import ConsumerOffsetSerializeWrapper
from services.remoting.codec import FrameDecoder, encode
from services.remoting.command import make_response
from services.remoting.errors import BodyError


def test_commit_query_and_version() -> None:
    table = OffsetTable()
    assert table.query("cg", "TopicTest", 0) is None
    table.commit("cg", "TopicTest", 0, 12)
    table.commit("cg", "TopicTest", 1, 3)
    assert (table.query("cg", "TopicTest", 0), table.query("cg", "TopicTest", 1), table.version) == (12, 3, 2)
    table.commit("cg", "TopicTest", 0, 12)  # no change: no new version to write
    assert table.version == 2
    table.commit("cg", "TopicTest", 0, 5)  # a consumer may move back (a reset)
    assert table.query("cg", "TopicTest", 0) == 5
    assert table.snapshot().offset_table == {"TopicTest@cg": {0: 5, 1: 3}}


def test_the_table_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(co, "MAX_KEYS", 2)
    table = OffsetTable()
    table.commit("g1", "t", 0, 1)
    table.commit("g2", "t", 0, 1)
    table.commit("g2", "t", 3, 1)  # a known entry still takes new queues
    with pytest.raises(TableFull, match="already holds 2"):
        table.commit("g3", "t", 0, 1)
    assert table.merge(ConsumerOffsetSerializeWrapper({"t@g4": {0: 1}, "t@g1": {0: 9}})) == 1
    assert table.snapshot().offset_table == {"t@g1": {0: 9}, "t@g2": {0: 1, 3: 1}}


@pytest.mark.parametrize("entries", [
    {"no-at-sign": {0: 1}}, {"bad/topic@g": {0: 1}}, {"t@bad group": {0: 1}},
    {"t@g": dict.fromkeys(range(1025), 0)},
])
def test_a_masters_table_with_a_bad_entry_is_refused_whole(entries: dict[str, dict[int, int]]) -> None:
    table = OffsetTable({"t@mine": {0: 1}})
    with pytest.raises(BodyError, match="is not topic@group with at most 1024 queues"):
        table.merge(ConsumerOffsetSerializeWrapper({"t@ok": {0: 5}, **entries}))
    assert table.snapshot().offset_table == {"t@mine": {0: 1}} and table.version == 0


def test_merge_takes_the_masters_entries_and_keeps_its_own() -> None:
    table = OffsetTable({"t@a": {0: 1, 1: 1}, "t@b": {0: 4}})
    changed = table.merge(ConsumerOffsetSerializeWrapper({"t@a": {0: 7}, "t@c": {2: 2}}))
    assert changed == 2 and table.version == 1
    assert table.snapshot().offset_table == {"t@a": {0: 7, 1: 1}, "t@b": {0: 4}, "t@c": {2: 2}}
    assert table.merge(ConsumerOffsetSerializeWrapper({"t@a": {0: 7}})) == 0 and table.version == 1


def test_file_round_trip_keeps_rocketmqs_layout_with_a_crc(tmp_path: Path) -> None:
    wrapper = ConsumerOffsetSerializeWrapper({"TopicTest@cg": {0: 7, 1: 12}})
    raw = encode_file(wrapper)
    assert raw.startswith(b'{"crc":') and raw.endswith(b',"offsetTable":{"TopicTest@cg":{0:7,1:12}}}')
    assert decode_file(raw, tmp_path / "f") == wrapper


@pytest.mark.parametrize("damage", [
    lambda raw: raw.replace(b"{0:7", b"{0:8"),          # an offset changed: the CRC no longer matches
    lambda raw: raw[:-3],                                # cut
    lambda raw: b"",                                     # emptied
    lambda raw: raw.replace(b'"crc"', b'"crd"'),         # no crc
    lambda raw: b'{"offsetTable":{}}',                   # RocketMQ's own file, without our crc
    lambda raw: raw.replace(b"TopicTest@cg", b"TopicTestcg"),  # not topic@group (and a CRC mismatch)
])
def test_a_damaged_file_stops_the_broker_naming_it(tmp_path: Path, damage: object) -> None:
    assert callable(damage)
    offsets = ConsumerOffsets(tmp_path)
    offsets.table.commit("cg", "TopicTest", 0, 7)
    offsets.save()
    offsets.path.write_bytes(damage(offsets.path.read_bytes()))
    with pytest.raises(ConsumerOffsetsDamaged, match=r"consumerOffset.json is damaged .*'Damaged consumerOffset.json'"):
        ConsumerOffsets(tmp_path).load()


def test_a_crc_valid_entry_that_is_not_topic_at_group_is_refused(tmp_path: Path) -> None:
    raw = encode_file(ConsumerOffsetSerializeWrapper({"no-separator": {0: 1}}))
    with pytest.raises(ConsumerOffsetsDamaged, match="entry 'no-separator' is not topic@group"):
        decode_file(raw, tmp_path / "f")


def test_save_keeps_the_previous_file_as_bak_and_load_reads_it_back(tmp_path: Path) -> None:
    offsets = ConsumerOffsets(tmp_path)
    offsets.load()  # no file yet: an empty table
    offsets.table.commit("cg", "t", 0, 1)
    offsets.save()
    first = offsets.path.read_bytes()
    offsets.save()  # nothing changed: nothing written
    assert not offsets.path.with_name("consumerOffset.json.bak").exists()
    offsets.table.commit("cg", "t", 0, 2)
    offsets.save()
    assert offsets.path.with_name("consumerOffset.json.bak").read_bytes() == first
    again = ConsumerOffsets(tmp_path)
    again.load()
    assert again.table.query("cg", "t", 0) == 2
    assert offsets.path == tmp_path / "config" / "consumerOffset.json"


def test_flush_writes_from_the_event_loop(tmp_path: Path) -> None:
    offsets = ConsumerOffsets(tmp_path)
    offsets.table.commit("cg", "t", 3, 9)
    asyncio.run(offsets.flush())
    assert json.loads(offsets.path.read_bytes().replace(b"{3:", b'{"3":'))["offsetTable"] == {"t@cg": {"3": 9}}


async def _fake_master(answer: bytes, requests: list[int]) -> asyncio.Server:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder()
        while data := await reader.read(65536):
            for request in decoder.feed(data):
                requests.append(request.code)
                writer.write(encode(make_response(request, ResponseCode.SUCCESS, None, None, answer)))
        writer.close()
    return await asyncio.start_server(serve, "127.0.0.1", 0)


def test_a_slave_copies_its_masters_table(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[int], bool, bool]:
        requests: list[int] = []
        body = ConsumerOffsetSerializeWrapper({"t@cg": {0: 41}}).encode()
        server = await _fake_master(body, requests)
        address = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        offsets = ConsumerOffsets(tmp_path)
        offsets.table.commit("other", "t", 1, 1)
        ok = await offsets.sync_from(address)
        garbage = await _fake_master(b'{"offsetTable":{"t@cg":{0:"x"}},"../x@g":{0:1}}', requests)
        bad = await offsets.sync_from(f"127.0.0.1:{garbage.sockets[0].getsockname()[1]}")
        await offsets.stop()
        for s in (server, garbage):
            s.close()
            await s.wait_closed()
        assert offsets.table.snapshot().offset_table == {"t@other": {1: 1}, "t@cg": {0: 41}}
        return requests, ok, bad

    requests, ok, bad = asyncio.run(scenario())
    assert requests == [43, 43] and ok and not bad  # GET_ALL_CONSUMER_OFFSET; a malformed table changes nothing
    assert ConsumerOffsets(tmp_path).path.exists()  # stop() wrote the copy


def test_an_unreachable_master_is_a_warning_not_an_error(tmp_path: Path) -> None:
    async def scenario() -> bool:
        offsets = ConsumerOffsets(tmp_path, timeout_s=0.5)
        try:
            return await offsets.sync_from("127.0.0.1:1")
        finally:
            await offsets.stop()

    assert asyncio.run(scenario()) is False


def test_writes_from_two_threads_take_turns(tmp_path: Path) -> None:
    """A flush cancelled at shutdown goes on writing in its thread while stop() writes again: both use the
    same temporary file, so without turns one rename finds it gone (or renames the other's half)."""
    offsets = ConsumerOffsets(tmp_path)
    tables = [encode_file(ConsumerOffsetSerializeWrapper({f"t@g{i}": {q: q for q in range(500)}})) for i in (1, 2)]
    errors: list[BaseException] = []

    def write(data: bytes) -> None:
        for _ in range(30):
            try:
                offsets._write(None, data)
            except OSError as exc:
                errors.append(exc)

    threads = [threading.Thread(target=write, args=(data,)) for data in tables]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == [] and offsets.path.read_bytes() in tables
