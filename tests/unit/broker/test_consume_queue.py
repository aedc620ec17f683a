"""Consume queues: 20-byte entries at 20 * queueOffset, truncation by physical offset, reload; paths
that stay inside the store; the check of the queues against the commitlog at start-up."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import pytest

from services.broker.commitlog import BLANK_MAGIC, MESSAGE_MAGIC, CommitLogCorrupt
from services.broker.consume_queue import (
    ENTRY_SIZE,
    RESERVE_AHEAD,
    ConsumeQueue,
    ConsumeQueueStore,
    tags_code,
)
from services.common import durable


def test_entry_layout(tmp_path: Path) -> None:
    store = ConsumeQueueStore(tmp_path / "cq")
    store.load()
    store.dispatch("TopicA", 2, 0, 1000, 120, "tagA")
    store.dispatch("TopicA", 2, 1, 1120, 130, "")
    store.flush()
    raw = (tmp_path / "cq" / "TopicA" / "2").read_bytes()
    assert ENTRY_SIZE == 20
    assert raw == struct.pack(">qiq", 1000, 120, zlib.crc32(b"tagA")) + struct.pack(">qiq", 1120, 130, 0)
    assert tags_code("") == 0
    store.close()


def test_get_count_and_last_end(tmp_path: Path) -> None:
    store = ConsumeQueueStore(tmp_path / "cq")
    store.load()
    assert store.dispatched_end() == -1
    store.dispatch("A", 0, 0, 0, 100, "")
    store.dispatch("A", 0, 1, 100, 50, "")
    store.dispatch("B", 1, 0, 150, 70, "t")
    cq = store.queue("A", 0)
    assert cq is not None and cq.count == 2
    assert cq.get(0) == (0, 100, 0)
    assert cq.get(1) == (100, 50, 0)
    assert cq.get(2) is None and cq.get(-1) is None
    assert cq.last_end() == 150
    assert store.dispatched_end() == 220
    assert store.queue("A", 3) is None
    store.close()


def test_reload(tmp_path: Path) -> None:
    store = ConsumeQueueStore(tmp_path / "cq")
    store.load()
    for i in range(5):
        store.dispatch("A", 1, i, i * 10, 10, "")
    store.close()
    again = ConsumeQueueStore(tmp_path / "cq")
    again.load()
    cq = again.queue("A", 1)
    assert cq is not None and cq.count == 5 and cq.get(4) == (40, 10, 0)
    again.close()


def test_partial_trailing_entry_dropped_on_open(tmp_path: Path) -> None:
    path = tmp_path / "cq" / "A" / "0"
    path.parent.mkdir(parents=True)
    path.write_bytes(struct.pack(">qiq", 0, 10, 0) + b"\x00" * 7)
    cq = ConsumeQueue("A", 0, path)
    cq.open()
    assert cq.count == 1
    assert path.stat().st_size == ENTRY_SIZE
    cq.close()


def test_truncate_by_phys(tmp_path: Path) -> None:
    store = ConsumeQueueStore(tmp_path / "cq")
    store.load()
    for i in range(5):
        store.dispatch("A", 0, i, i * 100, 100, "")
    store.dispatch("B", 0, 0, 50, 50, "")
    store.truncate(300)
    a, b = store.queue("A", 0), store.queue("B", 0)
    assert a is not None and b is not None
    assert a.count == 3 and a.last_end() == 300
    assert (tmp_path / "cq" / "A" / "0").stat().st_size == 3 * ENTRY_SIZE
    assert b.count == 1
    store.truncate(0)
    assert a.count == 0 and b.count == 0
    assert store.dispatched_end() == -1
    store.close()


def test_destroy(tmp_path: Path) -> None:
    store = ConsumeQueueStore(tmp_path / "cq")
    store.load()
    store.dispatch("A", 0, 0, 0, 10, "")
    store.destroy()
    assert not (tmp_path / "cq").exists()
    assert store.queues == {}


def test_dispatch_many_writes_the_same_files_as_one_by_one(tmp_path: Path) -> None:
    """Runs of consecutive queue offsets are written at once; a gap (re-dispatch after a repair)
    starts a new run; the files are the same as dispatching entry by entry."""
    entries = [("A", i % 2, i // 2, 100 * i, 100, "t" if i % 3 else "") for i in range(10)]
    entries += [("A", 0, 2, 9999, 10, "again"), ("A", 0, 3, 10009, 10, "")]  # rewrite offsets 2 and 3
    entries += [("B", 0, 0, 5000, 10, "")]
    one = ConsumeQueueStore(tmp_path / "one")
    one.load()
    for e in entries:
        one.dispatch(*e)
    many = ConsumeQueueStore(tmp_path / "many")
    many.load()
    many.dispatch_many(entries[:4])
    many.dispatch_many(entries[4:])
    many.dispatch_many([])
    for topic, qid in (("A", 0), ("A", 1), ("B", 0)):
        a, b = one.queue(topic, qid), many.queue(topic, qid)
        assert a is not None and b is not None and a.count == b.count
        assert (tmp_path / "one" / topic / str(qid)).read_bytes() == (tmp_path / "many" / topic / str(qid)).read_bytes()
    one.close()
    many.close()


def reserved_at_least(fd: int, length: int) -> bool:
    """True if ``fd`` has ``length`` bytes of disk blocks; where the platform cannot reserve blocks
    (durable.reserve is a no-op there) only the sizes are checked."""
    return durable._fallocate is None or os.fstat(fd).st_blocks * 512 >= length


def test_blocks_are_reserved_ahead_without_changing_the_size(tmp_path: Path) -> None:
    cq = ConsumeQueue("T", 0, tmp_path / "T" / "0")
    cq.open()
    cq.put_run(0, [(i * 100, 100, 0) for i in range(10)])
    assert os.fstat(cq.fd).st_size == 10 * ENTRY_SIZE and cq.count == 10  # the size still says how many entries
    assert reserved_at_least(cq.fd, 10 * ENTRY_SIZE + RESERVE_AHEAD[0])
    cq.truncate_by_phys(500)
    assert os.fstat(cq.fd).st_size == 5 * ENTRY_SIZE and cq.reserved == 0
    cq.put(5, 500, 100, 0)
    assert reserved_at_least(cq.fd, RESERVE_AHEAD[0])
    big = RESERVE_AHEAD[1] // ENTRY_SIZE * 2  # a busy queue reserves the most
    cq.put_run(6, [(600 + i, 1, 0) for i in range(big)])
    assert cq.reserved == (6 + big) * ENTRY_SIZE + RESERVE_AHEAD[1]
    cq.close()
    cq.open()
    assert cq.count == 6 + big
    cq.close()


# ---------------------------------------------------------------------------------- paths from data
def files_under(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*"))


@pytest.mark.parametrize("topic", ["../../x", "..", ".", "a/b", "", "t" * 128, "tópico", "a b"])
def test_a_topic_that_is_not_valid_never_becomes_a_path(tmp_path: Path, topic: str) -> None:
    store = ConsumeQueueStore(tmp_path / "store" / "cq")
    store.load()
    with pytest.raises(CommitLogCorrupt, match="refusing to index"):
        store.dispatch(topic, 0, 0, 0, 100, "")
    assert files_under(tmp_path) == [tmp_path / "store", tmp_path / "store" / "cq"]
    store.close()


def test_load_skips_names_that_are_not_topics_or_queue_ids(tmp_path: Path) -> None:
    root = tmp_path / "cq"
    for name in ("bad name", "a.b", "T"):
        (root / name).mkdir(parents=True)
        for qid in ("0", "01", "-1", "x", "99999999999"):
            (root / name / qid).write_bytes(b"")
    store = ConsumeQueueStore(root)
    store.load()
    assert sorted(store.queues) == [("T", 0)]
    store.close()


def test_symbolic_links_are_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "0").write_bytes(ENTRY.pack(0, 100, 0) * 3)
    root = tmp_path / "cq"
    root.mkdir()
    (root / "T").symlink_to(outside)  # a topic directory that leads out of the store
    (root / "U").mkdir()
    (root / "U" / "0").symlink_to(outside / "0")  # a queue file that does
    store = ConsumeQueueStore(root)
    store.load()
    assert store.queues == {}
    for topic in ("T", "U"):
        with pytest.raises(CommitLogCorrupt, match="symbolic link"):
            store.dispatch(topic, 0, 0, 0, 100, "")
    assert files_under(outside) == [outside / "0"] and (outside / "0").stat().st_size == 3 * ENTRY_SIZE
    store.close()


# ---------------------------------------------------------------------------------- verify
SEG = 1000


class FakeLog:
    """Records of 100 bytes back to back from 0; a BLANK pads each 1000-byte segment's last 100 bytes."""

    def __init__(self, end: int) -> None:
        self.end = end

    def header_at(self, offset: int) -> tuple[int, int]:
        if offset >= self.end or offset % 100:
            return (0, 0)
        return (100, BLANK_MAGIC) if offset % SEG == 900 else (100, MESSAGE_MAGIC)

    def records(self) -> list[int]:
        return [o for o in range(0, self.end, 100) if o % SEG != 900]


def indexed(tmp_path: Path, end: int = 2500, queues: int = 3) -> tuple[ConsumeQueueStore, FakeLog]:
    log = FakeLog(end)
    store = ConsumeQueueStore(tmp_path / "cq")
    store.load()
    per_queue: dict[int, int] = {}
    for phys in log.records():
        qid = phys // 100 % queues
        store.dispatch("T", qid, per_queue.get(qid, 0), phys, 100, "")
        per_queue[qid] = per_queue.get(qid, 0) + 1
    return store, log


def counts(store: ConsumeQueueStore) -> dict[int, int]:
    return {qid: cq.count for (_, qid), cq in store.queues.items()}


def test_verify_accepts_queues_that_index_the_log_exactly(tmp_path: Path) -> None:
    store, log = indexed(tmp_path)
    before = counts(store)
    assert store.verify(0, log.end, SEG, log.header_at) == 2500
    assert counts(store) == before and not any(cq.repaired for cq in store.queues.values())
    store.close()


@pytest.mark.parametrize("field,at,value", [
    ("phys", 4, 450), ("phys", 4, 2**40), ("size", 4, 99), ("size", 4, 150), ("size", 4, 0), ("phys", 0, 200),
])
def test_verify_cuts_every_queue_from_a_damaged_entry_on(tmp_path: Path, field: str, at: int, value: int) -> None:
    store, log = indexed(tmp_path)
    cq = store.queue("T", 1)
    assert cq is not None
    phys, size, tags = cq.get(at)  # type: ignore[misc]
    os.pwrite(cq.fd, ENTRY.pack(value if field == "phys" else phys, value if field == "size" else size, tags),
              at * ENTRY_SIZE)
    indexed_to = store.verify(0, log.end, SEG, log.header_at)
    assert indexed_to <= phys  # everything from the damaged entry on is indexed again
    for cq in store.queues.values():
        assert all(cq.get(i)[0] < indexed_to for i in range(cq.count))  # type: ignore[index]
    assert store.queue("T", 1).count == at  # type: ignore[union-attr]
    store.close()


def test_verify_checks_the_last_entry_against_its_record(tmp_path: Path) -> None:
    store, log = indexed(tmp_path)
    last = max(store.queues.values(), key=lambda q: q.get(q.count - 1)[0])  # type: ignore[index]
    phys, _, tags = last.get(last.count - 1)  # type: ignore[misc]
    os.pwrite(last.fd, ENTRY.pack(phys, 60, tags), (last.count - 1) * ENTRY_SIZE)  # nothing follows it
    assert store.verify(0, log.end, SEG, log.header_at) == phys
    store.close()


def test_verify_with_no_queues_indexes_from_the_start_of_the_log(tmp_path: Path) -> None:
    store = ConsumeQueueStore(tmp_path / "cq")
    store.load()
    assert store.verify(4000, 9000, SEG, FakeLog(0).header_at) == 4000
    store.close()


ENTRY = struct.Struct(">qiq")
