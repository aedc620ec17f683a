"""MessageStore: append, validation, confirmOffset and dispatch, truncation, reads, recovery, checkpoint."""

from __future__ import annotations

import json
import os
import shutil
import struct
import zlib
from pathlib import Path

import pytest

from services.broker.commitlog import BLANK_MAGIC, InvalidRecord, encode_record, record_size
from services.broker.epoch_file import EpochFileCache
from services.broker.record import encode
from services.broker.store import (
    MESSAGE_DAMAGED,
    AppendResult,
    Message,
    MessageIllegal,
    MessageStore,
    StoreClosed,
    message_id,
)
from services.common import faults

SEG = 4096
TS = 1_700_000_000_000
HOST = "127.0.0.1:10911"


def crash(store: MessageStore) -> None:
    """Stop as a killed process stops: nothing flushed, no checkpoint written."""
    for seg in store.commitlog.segments:
        os.close(seg.fd)
    for cq in store.queues.queues.values():
        os.close(cq.fd)


def make_store(root: Path, **kw: object) -> MessageStore:
    params: dict = {"segment_size": SEG, "queue_nums": 4, "max_message_size": 2000}
    params.update(kw)
    store = MessageStore(root, HOST, **params)
    store.open()
    return store


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def store(root: Path):  # type: ignore[no-untyped-def]
    s = make_store(root)
    yield s
    s.close()


def msg(i: int, queue_id: int | None = 0, topic: str = "TopicTest", size: int = 100) -> Message:
    return Message(topic, f"body-{i}-".encode() + bytes(size), keys=f"key{i}", tags="tagA", queue_id=queue_id)


def bodies(store: MessageStore, topic: str, queue_id: int, start: int = 0, n: int = 1000) -> list[bytes]:
    res = store.get_messages(topic, queue_id, start, n)
    return [r.body for r in res.records]


def visible(store: MessageStore, topic: str = "TopicTest", queue_id: int = 0) -> list[int]:
    """Queue offsets a consumer can read from the start of the queue."""
    res = store.get_messages(topic, queue_id, 0, 1000)
    return [r.queue_offset for r in res.records]


# ------------------------------------------------------------------------------------------ append


class TestAppend:
    def test_append_result(self, store: MessageStore) -> None:
        r0 = store.append(msg(0), TS)
        r1 = store.append(msg(1), TS + 1)
        size = record_size("TopicTest", {"KEYS": "key0", "TAGS": "tagA"}, len(msg(0).body))
        assert r0 == AppendResult(message_id(HOST, 0), 0, 0, 0, size)
        assert (r1.queue_id, r1.queue_offset, r1.commit_log_offset) == (0, 1, size)
        assert r1.next_offset == store.max_offset
        # Offset message id: IPv4 + port + commitlog offset, upper-case hex.
        assert r1.msg_id == "7F000001" + f"{10911:08X}" + f"{size:016X}"

    def test_queue_offsets_are_per_queue(self, store: MessageStore) -> None:
        offsets = [store.append(msg(i, queue_id=i % 2), TS).queue_offset for i in range(6)]
        assert offsets == [0, 0, 1, 1, 2, 2]
        other = store.append(msg(9, topic="Other"), TS)
        assert other.queue_offset == 0

    def test_round_robin_queue_when_unset(self, store: MessageStore) -> None:
        qids = [store.append(msg(i, queue_id=None), TS).queue_id for i in range(6)]
        assert qids == [0, 1, 2, 3, 0, 1]

    def test_keys_tags_and_properties_stored(self, store: MessageStore) -> None:
        m = Message("TopicTest", b"b", keys="k1 k2", tags="TagA", queue_id=1, properties={"p": "v"})
        r = store.append(m, TS)
        store.set_confirm_offset(store.max_offset)
        rec = store.get_messages("TopicTest", 1, 0, 1).records[0]
        assert (rec.keys, rec.tags, rec.properties["p"], rec.body, rec.physical_offset, rec.store_timestamp) == (
            "k1 k2", "TagA", "v", b"b", r.commit_log_offset, TS)


# ------------------------------------------------------------------------------------------ validation


class TestValidate:
    @pytest.mark.parametrize("topic", ["", "a b", "a/b", "a.b", "topic\x00", "тема", "a*b", "x" * 128])
    def test_bad_topic(self, store: MessageStore, topic: str) -> None:
        with pytest.raises(MessageIllegal):
            store.validate(Message(topic, b"x"))

    @pytest.mark.parametrize("topic", ["TopicTest", "a", "%RETRY%group", "a|b", "A_b-9", "x" * 127])
    def test_good_topic(self, store: MessageStore, topic: str) -> None:
        store.validate(Message(topic, b"x"))

    def test_topic_with_trailing_newline(self, store: MessageStore) -> None:
        with pytest.raises(MessageIllegal):
            store.validate(Message("Topic\n", b"x"))

    def test_empty_body(self, store: MessageStore) -> None:
        with pytest.raises(MessageIllegal):
            store.validate(Message("T", b""))

    def test_body_size_limit(self, store: MessageStore) -> None:
        store.validate(Message("T", b"x" * 2000))
        with pytest.raises(MessageIllegal):
            store.validate(Message("T", b"x" * 2001))

    @pytest.mark.parametrize("qid", [-1, 1024, 5000])
    def test_queue_id_out_of_range(self, store: MessageStore, qid: int) -> None:
        with pytest.raises(MessageIllegal):
            store.validate(Message("T", b"x", queue_id=qid))

    @pytest.mark.parametrize("qid", [None, 0, 3, 1023])  # a topic's own count is the send path's (topic_rules)
    def test_queue_id_in_range(self, store: MessageStore, qid: int | None) -> None:
        store.validate(Message("T", b"x", queue_id=qid))

    @pytest.mark.parametrize("kwargs", [
        {"keys": "a\x01b"}, {"keys": "a\x02"}, {"tags": "t\x01"}, {"tags": "\x02"},
        {"properties": {"k\x01": "v"}}, {"properties": {"k": "v\x02"}},
    ])
    def test_separator_characters_refused(self, store: MessageStore, kwargs: dict) -> None:
        with pytest.raises(MessageIllegal):
            store.validate(Message("T", b"x", **kwargs))

    def test_validation_does_not_write(self, store: MessageStore) -> None:
        with pytest.raises(MessageIllegal):
            store.validate(Message("T", b""))
        assert store.max_offset == 0


# ------------------------------------------------------------------------------------------ confirmOffset


class TestConfirmOffset:
    def test_nothing_visible_before_confirm(self, store: MessageStore) -> None:
        for i in range(3):
            store.append(msg(i), TS)
        assert store.confirm_offset == 0
        assert store.get_messages("TopicTest", 0, 0, 10).status == "NO_MATCHED_LOGIC_QUEUE"

    def test_only_confirmed_records_visible_then_in_order(self, store: MessageStore) -> None:
        results = [store.append(msg(i), TS) for i in range(5)]
        store.set_confirm_offset(results[1].next_offset)
        assert visible(store) == [0, 1]
        # A confirmOffset inside a record exposes nothing of it.
        store.set_confirm_offset(results[3].commit_log_offset + 5)
        assert visible(store) == [0, 1, 2]
        store.set_confirm_offset(store.max_offset)
        assert visible(store) == [0, 1, 2, 3, 4]
        assert bodies(store, "TopicTest", 0) == [msg(i).body for i in range(5)]

    def test_never_backwards_and_never_past_the_log(self, store: MessageStore) -> None:
        results = [store.append(msg(i), TS) for i in range(3)]
        store.set_confirm_offset(results[1].next_offset)
        store.set_confirm_offset(results[0].next_offset)
        assert store.confirm_offset == results[1].next_offset
        store.set_confirm_offset(0)
        assert store.confirm_offset == results[1].next_offset
        store.set_confirm_offset(10**12)
        assert store.confirm_offset == store.max_offset
        store.set_confirm_offset(results[0].next_offset)
        assert store.confirm_offset == store.max_offset
        assert visible(store) == [0, 1, 2]

    def test_dispatch_across_padding_and_segments(self, store: MessageStore) -> None:
        results = [store.append(msg(i, queue_id=i % 2, size=1000), TS) for i in range(8)]
        assert results[3].commit_log_offset == SEG  # the 4th record went to the next segment
        store.set_confirm_offset(results[2].next_offset)
        assert visible(store, queue_id=0) == [0, 1] and visible(store, queue_id=1) == [0]
        store.set_confirm_offset(SEG)  # exactly at the boundary after the padding
        assert visible(store, queue_id=1) == [0]
        store.set_confirm_offset(results[3].next_offset)
        assert visible(store, queue_id=1) == [0, 1]
        store.set_confirm_offset(store.max_offset)
        assert visible(store, queue_id=0) == [0, 1, 2, 3] and visible(store, queue_id=1) == [0, 1, 2, 3]
        assert [r.physical_offset for q in (0, 1) for r in store.get_messages("TopicTest", q, 0, 10).records] \
            == [r.commit_log_offset for r in results[0::2] + results[1::2]]


# ------------------------------------------------------------------------------------------ reads


class TestGetMessages:
    def test_statuses(self, store: MessageStore) -> None:
        for i in range(5):
            store.append(msg(i), TS)
        store.set_confirm_offset(store.max_offset)
        assert store.get_messages("Nope", 0, 0, 10).status == "NO_MATCHED_LOGIC_QUEUE"
        assert store.get_messages("TopicTest", 1, 0, 10).status == "NO_MATCHED_LOGIC_QUEUE"
        res = store.get_messages("TopicTest", 0, 1, 2)
        assert (res.status, res.next_begin_offset, res.max_offset) == ("FOUND", 3, 5)
        assert [r.queue_offset for r in res.records] == [1, 2]
        res = store.get_messages("TopicTest", 0, 3, 100)
        assert (res.status, res.next_begin_offset, [r.queue_offset for r in res.records]) == ("FOUND", 5, [3, 4])
        res = store.get_messages("TopicTest", 0, 5, 10)
        assert (res.status, res.next_begin_offset, res.records) == ("NO_NEW_MSG", 5, [])
        res = store.get_messages("TopicTest", 0, 6, 10)
        assert (res.status, res.next_begin_offset, res.records) == ("OFFSET_OVERFLOW_BADLY", 5, [])
        res = store.get_messages("TopicTest", 0, -1, 10)
        assert (res.status, res.next_begin_offset, res.records) == ("OFFSET_TOO_SMALL", 0, [])

    def test_topics(self, store: MessageStore) -> None:
        store.append(msg(0, queue_id=1), TS)
        r = store.append(msg(1, queue_id=1), TS)
        store.set_confirm_offset(r.commit_log_offset)
        rows = store.topics()
        assert [t["topic"] for t in rows] == ["TopicTest"]
        q1 = rows[0]["queues"][1]  # type: ignore[index]
        assert q1 == {"queueId": 1, "minOffset": 0, "maxOffset": 1, "writtenOffset": 2}


# ------------------------------------------------------------------------------------------ truncate


class TestTruncate:
    def test_truncate_cuts_log_queues_epochs_and_confirm(self, root: Path) -> None:
        store = make_store(root)
        store.epochs.append(1, 0)
        results = [store.append(msg(i, queue_id=i % 2, size=1000), TS) for i in range(8)]
        store.epochs.append(2, results[5].commit_log_offset)
        store.set_confirm_offset(store.max_offset)
        cut = results[4].commit_log_offset  # inside segment 1
        store.truncate(cut)
        assert store.max_offset == cut
        assert store.confirm_offset == cut
        assert visible(store, queue_id=0) == [0, 1] and visible(store, queue_id=1) == [0, 1]
        assert [e.epoch for e in store.epochs.entries()] == [1]
        assert json.loads((root / "checkpoint").read_text())["confirmOffset"] == cut
        # Writing continues with the right queue offsets, hidden until confirmed.
        r = store.append(msg(100, queue_id=0, size=1000), TS)
        assert (r.commit_log_offset, r.queue_offset) == (cut, 2)
        assert visible(store, queue_id=0) == [0, 1]
        store.set_confirm_offset(store.max_offset)
        assert bodies(store, "TopicTest", 0) == [msg(i, size=1000).body for i in (0, 2, 100)]
        store.close()

        store = make_store(root)
        assert store.max_offset == r.next_offset
        assert store.confirm_offset == r.next_offset
        assert visible(store, queue_id=0) == [0, 1, 2]
        assert [e.epoch for e in store.epochs.entries()] == [1]
        store.close()

    def test_truncate_below_confirm_then_confirm_advances_again(self, store: MessageStore) -> None:
        results = [store.append(msg(i), TS) for i in range(4)]
        store.set_confirm_offset(store.max_offset)
        store.truncate(results[2].commit_log_offset)
        assert store.confirm_offset == results[2].commit_log_offset
        a = store.append(msg(7), TS)
        assert a.queue_offset == 2
        store.set_confirm_offset(a.next_offset)
        assert store.confirm_offset == a.next_offset
        assert bodies(store, "TopicTest", 0) == [msg(0).body, msg(1).body, msg(7).body]

    def test_truncate_keeps_epoch_starting_at_new_end(self, store: MessageStore) -> None:
        results = [store.append(msg(i), TS) for i in range(3)]
        store.epochs.append(1, 0)
        store.epochs.append(2, results[1].commit_log_offset)
        store.epochs.append(3, results[2].commit_log_offset)
        store.truncate(results[1].commit_log_offset)
        assert [(e.epoch, e.start_offset) for e in store.epochs.entries()] == [
            (1, 0), (2, results[1].commit_log_offset)]


# ------------------------------------------------------------------------------------------ recovery


class TestRecovery:
    def test_queue_offsets_continue_after_reopen_for_unconfirmed(self, root: Path) -> None:
        store = make_store(root)
        results = [store.append(msg(i, queue_id=i % 2), TS) for i in range(6)]
        store.set_confirm_offset(results[1].next_offset)  # only queue offset 0 of each queue visible
        store.close()

        store = make_store(root)
        assert store.confirm_offset == results[1].next_offset
        assert visible(store, queue_id=0) == [0] and visible(store, queue_id=1) == [0]
        r0 = store.append(msg(10, queue_id=0), TS)
        r1 = store.append(msg(11, queue_id=1), TS)
        assert (r0.queue_offset, r1.queue_offset) == (3, 3)
        store.set_confirm_offset(store.max_offset)
        assert bodies(store, "TopicTest", 0) == [msg(i).body for i in (0, 2, 4, 10)]
        assert bodies(store, "TopicTest", 1) == [msg(i).body for i in (1, 3, 5, 11)]
        store.close()

    def test_queue_offsets_continue_after_reopen_with_nothing_confirmed(self, root: Path) -> None:
        store = make_store(root)
        for i in range(3):
            store.append(msg(i), TS)
        store.close()
        store = make_store(root)
        assert store.append(msg(3), TS).queue_offset == 3
        store.set_confirm_offset(store.max_offset)
        assert visible(store) == [0, 1, 2, 3]
        store.close()

    def test_checkpoint_written_by_flush(self, root: Path) -> None:
        store = make_store(root)
        results = [store.append(msg(i), TS) for i in range(3)]
        store.set_confirm_offset(results[1].next_offset)
        store.flush()
        doc = json.loads((root / "checkpoint").read_text())
        crc = doc.pop("crc")
        assert doc == {"confirmOffset": results[1].next_offset, "dispatchedOffset": results[1].next_offset,
                       "flushedOffset": store.max_offset}
        assert crc == zlib.crc32(json.dumps(doc, separators=(",", ":")).encode())
        store.close()

    def test_flush_without_index_leaves_queues_and_checkpoint_for_later(self, root: Path) -> None:
        store = make_store(root)
        results = [store.append(msg(i), TS) for i in range(3)]
        store.set_confirm_offset(results[2].next_offset)
        assert store.flush(index=False) == store.max_offset
        assert not (root / "checkpoint").exists()
        assert any(cq.dirty for cq in store.queues.queues.values())
        store.flush()
        assert json.loads((root / "checkpoint").read_text())["dispatchedOffset"] == results[2].next_offset
        assert not any(cq.dirty for cq in store.queues.queues.values())
        store.close()

    def test_rebuild_consume_queues_up_to_persisted_confirm(self, root: Path) -> None:
        store = make_store(root)
        results = [store.append(msg(i, queue_id=i % 3, size=700), TS) for i in range(12)]
        confirm = results[7].next_offset
        store.set_confirm_offset(confirm)
        store.flush()
        expected = {q: bodies(store, "TopicTest", q) for q in range(3)}
        store.close()
        shutil.rmtree(root / "consumequeue")

        store = make_store(root)
        assert store.confirm_offset == confirm
        assert {q: bodies(store, "TopicTest", q) for q in range(3)} == expected
        assert [visible(store, queue_id=q) for q in range(3)] == [[0, 1, 2], [0, 1, 2], [0, 1]]
        assert (root / "consumequeue" / "TopicTest").is_dir()
        # Unconfirmed records stay hidden, but their queue offsets are reserved.
        assert store.append(msg(50, queue_id=0, size=700), TS).queue_offset == 4
        store.set_confirm_offset(store.max_offset)
        assert visible(store, queue_id=0) == [0, 1, 2, 3, 4]
        store.close()

    def test_torn_tail_clamps_confirm_and_queues(self, root: Path) -> None:
        store = make_store(root)
        results = [store.append(msg(i), TS) for i in range(4)]
        store.set_confirm_offset(store.max_offset)
        crash(store)  # no flush: the last record was never known to be on disk
        seg = root / "commitlog" / f"{0:020d}"
        with open(seg, "r+b") as f:
            f.truncate(results[3].commit_log_offset + 10)
        store = make_store(root)
        assert store.max_offset == results[3].commit_log_offset
        assert store.confirm_offset == results[3].commit_log_offset
        assert visible(store) == [0, 1, 2]
        assert store.append(msg(9), TS).queue_offset == 3
        store.close()

    def test_corrupt_checkpoint_falls_back_to_dispatched_end(self, root: Path) -> None:
        store = make_store(root)
        results = [store.append(msg(i), TS) for i in range(3)]
        store.set_confirm_offset(results[1].next_offset)
        store.close()
        (root / "checkpoint").write_text("not json")
        store = make_store(root)
        assert store.confirm_offset == results[1].next_offset
        assert visible(store) == [0, 1]
        store.close()

    def test_open_drops_epochs_beyond_the_log(self, root: Path) -> None:
        store = make_store(root)
        store.append(msg(0), TS)
        end = store.max_offset
        store.close()
        cache = EpochFileCache(root / "epochFileCheckpoint")
        assert cache.append(1, 0) and cache.append(2, end) and cache.append(3, end + 100)
        store = make_store(root)
        assert [(e.epoch, e.start_offset) for e in store.epochs.entries()] == [(1, 0), (2, end)]
        store.close()


# ------------------------------------------------------------------------------------------ replica path


class TestAppendRaw:
    def test_replica_store_matches_master(self, tmp_path: Path) -> None:
        master = make_store(tmp_path / "m")
        for i in range(10):
            master.append(msg(i, queue_id=i % 2, size=900), TS + i)
        slave = make_store(tmp_path / "s")
        off = 0
        while off < master.max_offset:
            chunk = master.commitlog.aligned_chunk(off, 1500)
            slave.append_raw(off, chunk)
            off += len(chunk)
        assert slave.max_offset == master.max_offset
        assert visible(slave, queue_id=0) == []  # not confirmed yet
        master.set_confirm_offset(master.max_offset)
        slave.set_confirm_offset(master.confirm_offset)
        for q in (0, 1):
            assert bodies(slave, "TopicTest", q) == bodies(master, "TopicTest", q)
        # Promoted, the slave continues the queue offsets.
        assert slave.append(msg(99, queue_id=0), TS).queue_offset == 5
        master.close()
        slave.close()


    def test_replicated_records_are_indexed_without_reading_them_back(self, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
        master = make_store(tmp_path / "m")
        master.append_batch([msg(i, queue_id=i % 2, size=900) for i in range(10)], TS)
        slave = make_store(tmp_path / "s")
        slave.append_raw(0, master.commitlog.read(0, SEG) + master.commitlog.read(SEG, SEG) +
                         master.commitlog.read(2 * SEG, SEG))
        monkeypatch.setattr(slave.commitlog, "iter_index", None)  # append_raw checked them already
        slave.set_confirm_offset(master.max_offset)
        assert [visible(slave, queue_id=q) for q in (0, 1)] == [[0, 1, 2, 3, 4]] * 2
        master.close()
        slave.close()


def chunk(topic: bytes = b"TopicTest", queue_id: int = 0, phys: int = 0, body: bytes = b"x",
          props: bytes = b"") -> bytes:
    return encode(topic, props, queue_id, 0, phys, TS, body)


def blank(size: int) -> bytes:
    return struct.pack(">iI", size, BLANK_MAGIC) + bytes(size - 8)


def invalid_chunks(at: int) -> dict[str, tuple[bytes, str]]:
    """Bytes a peer could send for offset ``at``, and what append_raw must say about them."""
    good = chunk(phys=at)
    return {
        "traversal topic": (chunk(b"../../../../tmp/x", phys=at), "invalid topic"),
        "slash in topic": (chunk(b"a/b", phys=at), "invalid topic"),
        "dot topic": (chunk(b"..", phys=at), "invalid topic"),
        "crc": (good[:-1] + bytes([good[-1] ^ 0xFF]), "CRC mismatch"),
        "physical offset": (chunk(phys=at + 64), f"physicalOffset field {at + 64}"),
        "partial record": (good[:-1], "incomplete"),
        "trailing bytes": (good + bytes(3), "incomplete record header"),
        "queue id": (chunk(queue_id=1024, phys=at), "queueId 1024 is out of range 0..1023"),
        "negative queue id": (chunk(queue_id=-1, phys=at), "negative queueId"),
        "body too large": (chunk(body=bytes(2001), phys=at), "body of 2001 bytes"),
        "empty body": (chunk(body=b"", phys=at), "body of 0 bytes"),
        "properties": (chunk(props=b"KEYS\x01\xff\x02", phys=at), "properties"),
        "record crossing the segment end": (chunk(body=bytes(SEG - at - 60), phys=at), "crosses the segment end"),
        "short BLANK": (blank(100), "does not end at the segment end"),
        "BLANK with data": (blank(SEG - at)[:-1] + b"\x01", "BLANK padding is not zeroes"),
        "unknown magic": (struct.pack(">iI", 64, 0x12345678) + bytes(56), "unknown magic"),
    }


@pytest.mark.parametrize("name", invalid_chunks(0))
def test_append_raw_checks_every_record_before_writing_anything(tmp_path: Path, name: str) -> None:
    store = make_store(tmp_path / "store")
    good = chunk()
    store.append_raw(0, good)
    at = len(good)
    data, reason = invalid_chunks(at)[name]
    before = {p: p.stat().st_size for p in tmp_path.rglob("*")}
    with pytest.raises(InvalidRecord) as err:
        store.append_raw(at, data)
    assert reason in str(err.value) and err.value.offset >= at
    assert store.max_offset == at
    assert {p: p.stat().st_size for p in tmp_path.rglob("*")} == before
    store.close()


def test_append_raw_refuses_data_that_does_not_continue_the_log(tmp_path: Path) -> None:
    store = make_store(tmp_path / "store")
    with pytest.raises(InvalidRecord, match="data for offset 100, but this log ends at 0"):
        store.append_raw(100, chunk(phys=100))  # an empty replica may only start at a segment start
    store.append_raw(SEG, chunk(phys=SEG))  # ... which it may
    with pytest.raises(InvalidRecord, match="but this log ends at"):
        store.append_raw(0, chunk())
    store.close()


def test_append_raw_accepts_padding_and_records_of_older_builds(tmp_path: Path) -> None:
    store = make_store(tmp_path / "store")
    old = bytearray(encode_record("TopicTest", 1, 0, 0, TS, {"KEYS": "k"}, b"old"))
    old[4:12] = struct.pack(">II", 0xAABBCCDD, zlib.crc32(b"old"))
    store.append_raw(0, bytes(old) + blank(SEG - len(old)) + chunk(phys=SEG))
    store.set_confirm_offset(store.max_offset)
    assert bodies(store, "TopicTest", 1) == [b"old"] and bodies(store, "TopicTest", 0) == [b"x"]
    store.close()


def test_an_entry_that_points_at_another_message_is_reported_not_served(root: Path) -> None:
    store = make_store(root)
    results = [store.append(msg(i, queue_id=i % 2), TS) for i in range(4)]
    store.set_confirm_offset(store.max_offset)
    cq = store.queues.queue("TopicTest", 0)
    assert cq is not None
    os.pwrite(cq.fd, struct.pack(">qiq", results[1].commit_log_offset, results[1].next_offset
                                 - results[1].commit_log_offset, 0), 20)  # queue 0's entry 1 -> message 1 (queue 1)
    got = store.get_messages("TopicTest", 0, 0, 10)
    assert got.status == "FOUND" and [r.queue_offset for r in got.records] == [0] and got.next_begin_offset == 1
    got = store.get_messages("TopicTest", 0, 1, 10)
    assert got.status == MESSAGE_DAMAGED and "holds another message" in got.remark and got.records == []
    store.close()
    store = make_store(root)  # the start-up check repairs the queue from the commitlog
    assert visible(store) == [0, 1]
    store.close()


def test_a_crash_in_the_middle_of_a_truncation_is_not_taken_for_lost_data(root: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_store(root)
    results = [store.append(msg(i), TS) for i in range(6)]
    store.set_confirm_offset(store.max_offset)
    store.flush()  # the checkpoint says everything was flushed
    cut = results[2].next_offset

    def crash_here(name: str) -> None:
        if name == "during_truncate":
            raise SystemExit("killed")

    monkeypatch.setattr("services.broker.store.fault_point", crash_here)
    with pytest.raises(SystemExit):
        store.truncate(cut)  # the log is cut; queues and epochs not yet
    crash(store)
    assert faults.FAULT_ENV  # the real fault point SIGKILLs there (tests/integration/test_rocketmq_bugs.py)
    store = make_store(root)
    assert store.max_offset == cut and visible(store) == [0, 1, 2]
    store.close()


def test_a_closed_store_refuses_writes_and_keeps_its_log(root: Path) -> None:
    """A write that reaches a store after close() (a request racing the broker's shutdown) must not
    recreate segment files and overwrite the log from offset 0."""
    store = make_store(root)
    store.append_batch([msg(i) for i in range(3)], TS)
    end = store.max_offset
    store.close()
    with pytest.raises(StoreClosed):
        store.append(msg(9), TS)
    with pytest.raises(StoreClosed):
        store.append_raw(0, b"x" * 64)
    reopened = make_store(root)
    assert reopened.max_offset == end
    assert [r.queue_offset for r in reopened.commitlog.iter_records(0)] == [0, 1, 2]
    reopened.close()


def test_the_master_flushed_offset_is_kept_in_the_checkpoint_only_once_set(tmp_path: Path) -> None:
    from services.broker.store import encode_checkpoint, load_checkpoint

    plain = {"confirmOffset": 1, "dispatchedOffset": 2, "flushedOffset": 3}
    path = tmp_path / "checkpoint"
    path.write_text(encode_checkpoint(plain))
    assert load_checkpoint(path) == (plain, "")  # the usual three fields, as before
    path.write_text(encode_checkpoint({**plain, "masterFlushedOffset": 9}))
    assert load_checkpoint(path) == ({**plain, "masterFlushedOffset": 9}, "")
    path.write_text(path.read_text().replace('"masterFlushedOffset": 9', '"masterFlushedOffset": 8'))
    assert load_checkpoint(path)[1].startswith("damaged")  # covered by the CRC
