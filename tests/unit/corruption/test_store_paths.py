"""Paths built from data never leave the store (issue 19 item 4).

A slave used to index replicated records under ``consumequeue/<topic>/<queueId>`` without checking the
topic: a CRC-valid record with topic ``../../../../tmp/x`` created a file outside the store, and reopening
an existing file there could truncate it. Every record from a peer is now checked before anything is
written (``append_raw`` raises ``InvalidRecord``), a record with such a topic found on disk is damage,
and the queue loader skips names that are not topics.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from services.broker.commitlog import CommitLog, CommitLogCorrupt, InvalidRecord
from services.broker.record import encode
from services.broker.store import Message, MessageStore, encode_checkpoint

SEG = 4096
TS = 1_700_000_000_000


def open_store(root: Path) -> MessageStore:
    store = MessageStore(root, "127.0.0.1:10911", segment_size=SEG, queue_nums=4, max_message_size=1500)
    store.open()
    return store


def tree(path: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() if p.is_file() else b"<dir>" for p in sorted(path.rglob("*"))}


def victim(tmp_path: Path) -> Path:
    """A queue file outside the store that a traversal topic would reach: <tmp>/victim/0."""
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "0").write_bytes(b"precious data" * 10)
    return tmp_path / "victim" / "0"


# From <tmp>/store/consumequeue, "../../victim" is <tmp>/victim; the other one leaves <tmp> altogether.
TRAVERSALS = ["../../victim", "../../../../tmp/x", "../x", "..", "victim/../../.."]


@pytest.mark.parametrize("topic", TRAVERSALS)
def test_a_crc_valid_record_with_a_traversal_topic_through_append_raw_writes_nothing(
    tmp_path: Path, topic: str
) -> None:
    target = victim(tmp_path)
    store = open_store(tmp_path / "store")
    outside = (tmp_path / "store" / "consumequeue" / topic).resolve()
    before = tree(tmp_path)
    record = encode(topic.encode(), b"", 0, 0, 0, TS, b"payload")
    with pytest.raises(InvalidRecord, match="invalid topic"):
        store.append_raw(0, record)
    store.set_confirm_offset(len(record))  # the confirmOffset a master would send with it
    store.close()
    store = open_store(tmp_path / "store")
    store.close()
    assert store.max_offset == 0
    after = tree(tmp_path)
    after.pop(str(tmp_path / "store" / "checkpoint"), None)
    before.pop(str(tmp_path / "store" / "checkpoint"), None)
    assert after == before and target.read_bytes() == b"precious data" * 10
    if not outside.is_relative_to(tmp_path):  # inside tmp_path, the tree comparison above covers it
        assert not outside.exists()


def test_invalid_record_is_not_a_commitlog_error() -> None:
    # A slave treats CommitLogError as a local disk problem and stops; an invalid record is the peer's fault.
    from services.broker.commitlog import CommitLogError

    assert not issubclass(InvalidRecord, CommitLogError)


def _store_with_a_traversal_record_on_disk(tmp_path: Path, followed: bool) -> tuple[Path, int]:
    """A store whose log holds a CRC-valid record with topic ../../victim (as one written by a build
    without the check would), followed by valid records or not."""
    root = tmp_path / "store"
    store = open_store(root)
    for i in range(3):
        store.append(Message("T", f"m{i}".encode(), queue_id=0), TS)
    at = store.max_offset
    store.commitlog.write_at(at, encode(b"../../victim", b"", 0, 0, at, TS, b"evil"))
    if followed:
        store.append(Message("T", b"after", queue_id=1), TS)
    store.set_confirm_offset(at)  # the bad record itself not yet dispatched
    store.close()
    return root, at


@pytest.mark.parametrize("followed", [True, False])
def test_a_traversal_topic_on_disk_never_becomes_a_path(tmp_path: Path, followed: bool) -> None:
    target = victim(tmp_path)
    root, at = _store_with_a_traversal_record_on_disk(tmp_path, followed)
    (root / "checkpoint").unlink()  # no flushed offset: the structural rule decides
    before = tree(tmp_path / "victim")
    if followed:  # damage in the middle of the log: refused, nothing removed
        with pytest.raises(CommitLogCorrupt, match=f"offset {at}: invalid topic"):
            open_store(root)
    else:  # a bad last record is cut like any torn tail
        store = open_store(root)
        assert store.max_offset == at
        store.close()
    assert tree(tmp_path / "victim") == before and target.read_bytes() == b"precious data" * 10


def test_a_traversal_topic_in_an_old_segment_is_refused_when_queues_are_rebuilt(tmp_path: Path) -> None:
    target = victim(tmp_path)
    root = tmp_path / "store"
    log = CommitLog(root / "commitlog", SEG)
    log.open()
    log.append_message("T", 0, 0, TS, {}, b"first")
    at = log.max_offset
    log.write_at(at, encode(b"../../victim", b"", 0, 0, at, TS, b"evil"))
    for i in range(60):  # push the bad record out of the segments recovery scans
        log.append_message("T", 1, i, TS, {}, bytes(300))
    end = log.max_offset
    log.close()
    assert len(log.segments) == 0 and end > 4 * SEG
    # No consume queues (deleted to be rebuilt), everything confirmed: dispatch reads the old segment.
    (root / "checkpoint").write_text(encode_checkpoint({"confirmOffset": end, "dispatchedOffset": 0,
                                                        "flushedOffset": end}))
    with pytest.raises(CommitLogCorrupt, match=f"offset {at}: invalid topic"):
        open_store(root)
    assert target.read_bytes() == b"precious data" * 10 and sorted((tmp_path / "victim").iterdir()) == [target]
