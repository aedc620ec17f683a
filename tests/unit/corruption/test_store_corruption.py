"""Corrupted or truncated broker store files: each gives a safe recovery or one clear error naming the
file, never a silent loss of data before the damage.

Commitlog (commitlog.py, store.py): recovery scans the newest segments. A torn tail (a bad record with
nothing valid after it, beyond what the checkpoint says was flushed) is cut; everything before it is
kept, the consume queues and confirmOffset follow, and appends continue at the cut. Anything else (a bad
record followed by valid ones, damage in flushed data, a log shorter than what was flushed, a gap
between segments) is refused with an error naming the file and offset, and nothing is deleted. Damage
in older segments is reported when a consumer reads it.
Checkpoint and consume queues are derived data: garbage or loss there is rebuilt from the commitlog.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
from pathlib import Path

import pytest

from services.broker.commitlog import CommitLogCorrupt, CommitLogError
from services.broker.consume_queue import ENTRY_SIZE
from services.broker.store import MESSAGE_DAMAGED, Message, MessageStore

SEG = 4096
TS = 1_700_000_000_000
HOST = "127.0.0.1:10911"


def open_store(root: Path) -> MessageStore:
    store = MessageStore(root, HOST, segment_size=SEG, queue_nums=2, max_message_size=1500)
    store.open()
    return store


def fill(root: Path, n: int, size: int = 300, unflushed: int = 0) -> list[tuple[int, int, bytes]]:
    """n messages, confirmed; all flushed but the last ``unflushed``, which a crash then leaves as the
    page cache had them. Returns (commitLogOffset, nextOffset, body) of each."""
    store = open_store(root)
    out = []
    for i in range(n):
        if i == n - unflushed:
            store.flush()
        body = f"m{i:04d}-".encode() + bytes([i % 251]) * size
        r = store.append(Message("T", body, keys=f"k{i}", queue_id=i % 2), TS + i)
        out.append((r.commit_log_offset, r.next_offset, body))
    store.set_confirm_offset(store.max_offset)
    if unflushed:
        crash(store)
    else:
        store.close()
    return out


def crash(store: MessageStore) -> None:
    """Stop as a killed process stops: no flush, no checkpoint."""
    for seg in store.commitlog.segments:
        os.close(seg.fd)
    for cq in store.queues.queues.values():
        os.close(cq.fd)


def flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def readable(store: MessageStore) -> list[bytes]:
    """Every message a consumer can read, in commitlog order."""
    records = []
    for qid in (0, 1):
        records += store.get_messages("T", qid, 0, 10_000).records
    return [r.body for r in sorted(records, key=lambda r: r.physical_offset)]


def segments(root: Path) -> list[Path]:
    return sorted((root / "commitlog").iterdir())


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "store"


# ---------------------------------------------------------------------------------- commitlog tail
@pytest.mark.parametrize(
    "garbage", [b"\x00" * 700, random.Random(7).randbytes(700), b"\xaa\xbb\xcc\xdd" * 50,
                b"\x00\x00\x01\x00\xbb\xcc\xdd\xee"], ids=["zeros", "noise", "magic-like", "fake-blank"]
)  # the noise is seeded: parallel workers must collect the same tests
def test_garbage_after_the_last_record_is_cut_and_nothing_before_is_lost(
    root: Path, garbage: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    sent = fill(root, 30)
    last = segments(root)[-1]
    end = last.stat().st_size
    with open(last, "ab") as f:
        f.write(garbage)
    with caplog.at_level(logging.WARNING):
        store = open_store(root)
    try:
        assert store.max_offset == sent[-1][1] == int(last.name) + end
        assert readable(store) == [b for _, _, b in sent]
        assert "cutting a torn tail" in caplog.text and str(last) in caplog.text
        # the log goes on from the cut
        r = store.append(Message("T", b"after", queue_id=0), TS)
        assert r.commit_log_offset == sent[-1][1]
        store.set_confirm_offset(store.max_offset)
        assert readable(store)[-1] == b"after"
    finally:
        store.close()
    store = open_store(root)  # and the repair itself survives a restart
    assert (
        readable(store)[-1] == b"after"
        and store.max_offset == sent[-1][1] + r.next_offset - r.commit_log_offset
    )
    store.close()


@pytest.mark.parametrize("cut", [1, 4, 40, 299])
def test_torn_last_record_is_cut_and_earlier_records_survive(root: Path, cut: int) -> None:
    sent = fill(root, 30, unflushed=1)
    last = segments(root)[-1]
    os.truncate(last, last.stat().st_size - cut)
    store = open_store(root)
    try:
        assert store.max_offset == sent[-2][1]
        assert readable(store) == [b for _, _, b in sent[:-1]]
        assert store.confirm_offset <= store.max_offset
        nxt = store.append(Message("T", b"next", queue_id=sent[-1][0] and 1), TS)
        assert nxt.commit_log_offset == sent[-2][1]
        # The consume queue did not keep a pointer to the lost record: queue offsets stay dense.
        q = store.get_messages("T", 1, 0, 10_000).records
        assert [r.queue_offset for r in q] == list(range(len(q)))
    finally:
        store.close()


def test_unflushed_segment_truncated_to_nothing_keeps_the_earlier_segments(root: Path) -> None:
    sent = fill(root, 40, unflushed=8)
    segs = segments(root)
    assert len(segs) >= 3
    os.truncate(segs[-1], 0)
    store = open_store(root)
    try:
        assert store.max_offset <= int(segs[-1].name)
        kept = [b for off, nxt, b in sent if nxt <= store.max_offset]
        assert readable(store) == kept and len(kept) >= len(sent) - 14
    finally:
        store.close()


@pytest.mark.parametrize("cut", ["to nothing", "one byte", "one record"])
def test_flushed_data_cut_from_the_log_is_refused_not_accepted_as_the_new_end(root: Path, cut: str) -> None:
    # Acknowledged (flushed) messages must not vanish without a word.
    sent = fill(root, 40)
    last = segments(root)[-1]
    size = last.stat().st_size
    os.truncate(last, {"to nothing": 0, "one byte": size - 1, "one record": sent[-1][0] - int(last.name)}[cut])
    with pytest.raises(CommitLogCorrupt, match=f"checkpoint says {sent[-1][1]} bytes had been flushed") as err:
        open_store(root)
    assert str(last) in err.value.remark


def test_corrupt_record_inside_the_last_segment_is_refused_and_its_neighbours_stay(
    root: Path,
) -> None:
    # One flipped body byte used to cut the log there and drop the 12 intact messages after it.
    sent = fill(root, 30)
    victim = sent[-13]
    seg = next(p for p in reversed(segments(root)) if int(p.name) <= victim[0])
    flip(seg, victim[1] - int(seg.name) - 10)  # a body byte: the CRC no longer matches
    size = seg.stat().st_size
    with pytest.raises(CommitLogCorrupt) as err:
        open_store(root)
    assert err.value.remark.startswith(f"commitlog file {seg} is damaged at offset {victim[0]}: CRC mismatch")
    assert seg.stat().st_size == size and segments(root)[-1].stat().st_size > 0


def test_corrupt_record_in_the_second_to_last_segment_is_refused_and_the_last_segment_stays(root: Path) -> None:
    # It used to delete the whole last segment.
    sent = fill(root, 40)
    segs = segments(root)
    victim = next(m for m in sent if int(segs[-2].name) <= m[0] < int(segs[-1].name))
    flip(segs[-2], victim[0] - int(segs[-2].name) + 60)
    with pytest.raises(CommitLogCorrupt, match=f"damaged at offset {victim[0]}"):
        open_store(root)
    assert segments(root) == segs


def test_corrupt_record_in_an_old_segment_is_reported_to_the_consumer_not_skipped_or_stalled(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Old segments are not scanned at start; a consumer used to stall at that queue offset forever.
    sent = fill(root, 60)
    segs = segments(root)
    assert len(segs) > 3
    victim = sent[2]
    flip(segs[0], victim[1] - 10)
    store = open_store(root)
    try:
        qid, qoff = 0, 1  # message 2 is queue 0's second message
        got = store.get_messages("T", qid, 0, 100)
        assert got.status == "FOUND" and [r.body for r in got.records] == [sent[0][2]]
        assert got.next_begin_offset == qoff
        with caplog.at_level(logging.ERROR):
            damaged = store.get_messages("T", qid, qoff, 100)
        assert damaged.status == MESSAGE_DAMAGED and damaged.records == [] and damaged.next_begin_offset == qoff
        assert (f"queue offset {qoff} of T/0 is damaged: commitlog/{segs[0].name}, offset {victim[0]}: CRC "
                "mismatch") in damaged.remark
        assert f"{damaged.remark} (store {root})" in caplog.text
        after = store.get_messages("T", qid, qoff + 1, 100)  # skipping it is the consumer's explicit choice
        assert [r.body for r in after.records] == [b for _, _, b in sent[4::2]]
    finally:
        store.close()


def test_missing_middle_segment_is_refused_with_an_error_naming_the_files(root: Path) -> None:
    fill(root, 40)
    segs = segments(root)
    segs[1].unlink()
    store = MessageStore(root, HOST, segment_size=SEG)
    with pytest.raises(CommitLogError) as err:
        store.open()
    assert segs[2].name in str(err.value) and segs[0].name in str(err.value)


def damage_middle_segment(root: Path) -> str:
    segs = segments(root)
    segs[1].unlink()
    return segs[2].name


def damage_a_record(root: Path) -> str:
    last = segments(root)[-1]
    flip(last, 100)
    return f"commitlog file {last} is damaged at offset"


def damage_epoch_file(root: Path) -> str:
    for name in ("epochFileCheckpoint", "epochFileCheckpoint.bak"):
        (root / name).write_text("2\n1\n1-0\n")
    return f"epoch file {root / 'epochFileCheckpoint'} is damaged"


# ---------------------------------------------------------------------------------- derived files
@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"garbage",
        b"\xff\xfe\x00",
        b'{"confirmOffset": "x"}',
        b'{"confirmOffset": -5}',
        b'{"confirmOffset": 99999999999}',
        b"[]",
    ],
)
def test_garbage_checkpoint_loses_no_confirmed_message(root: Path, content: bytes) -> None:
    sent = fill(root, 20)
    (root / "checkpoint").write_bytes(content)
    store = open_store(root)
    try:
        assert 0 <= store.confirm_offset <= store.max_offset
        assert readable(store) == [b for _, _, b in sent]
    finally:
        store.close()


def test_lost_consume_queues_are_rebuilt_from_the_commitlog(root: Path) -> None:
    sent = fill(root, 20)
    shutil.rmtree(root / "consumequeue")
    store = open_store(root)
    try:
        assert readable(store) == [b for _, _, b in sent]
        r = store.append(Message("T", b"new", queue_id=0), TS)
        assert r.queue_offset == 10  # queue offsets continue where they were
    finally:
        store.close()


@pytest.mark.parametrize("damage", ["torn-1", "torn-7", "torn-19", "zeroed"])
def test_damaged_consume_queue_tail_entry_is_rebuilt(root: Path, damage: str) -> None:
    # A crash can leave a partial last entry (torn write), and a power loss a file that kept its new
    # length but not the bytes (a zero-filled entry). Queue 0's last entry is damaged; queue 1 indexes
    # a later record (message 19).
    sent = fill(root, 20)
    q0 = root / "consumequeue" / "T" / "0"
    size = q0.stat().st_size
    if damage == "zeroed":
        with open(q0, "r+b") as f:
            f.seek(size - ENTRY_SIZE)
            f.write(bytes(ENTRY_SIZE))
    else:
        os.truncate(q0, size - int(damage.split("-")[1]))
    store = open_store(root)
    try:
        assert readable(store) == [b for _, _, b in sent], "a message in the commitlog is not readable"
        r = store.append(Message("T", b"later", queue_id=0), TS)
        assert r.queue_offset == 10, "queue offset reused"
    finally:
        store.close()


def test_torn_consume_queue_entry_of_the_newest_record_is_rebuilt(root: Path) -> None:
    """When the damaged queue holds the newest record, recovery re-dispatches it."""
    sent = fill(root, 20)
    q1 = root / "consumequeue" / "T" / "1"
    os.truncate(q1, q1.stat().st_size - 7)
    store = open_store(root)
    try:
        assert readable(store) == [b for _, _, b in sent]
    finally:
        store.close()


def test_confirm_offset_past_a_cut_log_follows_the_cut(root: Path) -> None:
    sent = fill(root, 20, unflushed=1)
    last = segments(root)[-1]
    os.truncate(last, last.stat().st_size - 10)
    json.loads((root / "checkpoint").read_text())
    store = open_store(root)
    try:
        assert store.confirm_offset <= store.max_offset == sent[-2][1]
    finally:
        store.close()
