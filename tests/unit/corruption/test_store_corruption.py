"""Corrupted or truncated broker store files: each gives a safe recovery or one clear error naming the
file, never a silent loss of data before the damage.

Commitlog (commitlog.py, store.py): recovery scans the newest segments and cuts at the first torn or
corrupt record; everything before it is kept, the consume queues and confirmOffset follow, and appends
continue at the cut. A gap between segments is refused with an error naming the segment.
Checkpoint and consume queues are derived data: garbage or loss there is rebuilt from the commitlog.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from services.broker.commitlog import CommitLogError
from services.broker.consume_queue import ENTRY_SIZE
from services.broker.store import Message, MessageStore

SEG = 4096
TS = 1_700_000_000_000
HOST = "127.0.0.1:10911"


def open_store(root: Path) -> MessageStore:
    store = MessageStore(root, HOST, segment_size=SEG, queue_nums=2, max_message_size=1500)
    store.open()
    return store


def fill(root: Path, n: int, size: int = 300) -> list[tuple[int, int, bytes]]:
    """n messages, confirmed and flushed; returns (commitLogOffset, nextOffset, body) of each."""
    store = open_store(root)
    out = []
    for i in range(n):
        body = f"m{i:04d}-".encode() + bytes([i % 251]) * size
        r = store.append(Message("T", body, keys=f"k{i}", queue_id=i % 2), TS + i)
        out.append((r.commit_log_offset, r.next_offset, body))
    store.set_confirm_offset(store.max_offset)
    store.close()
    return out


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
    "garbage", [b"\x00" * 700, os.urandom(700), b"\xaa\xbb\xcc\xdd" * 50, b"\x00\x00\x01\x00\xbb\xcc\xdd\xee"]
)  # zeros, noise, magic-like, fake BLANK
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
        assert "cutting a torn or corrupt tail" in caplog.text
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
    sent = fill(root, 30)
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


def test_segment_truncated_to_nothing_keeps_the_earlier_segments(root: Path) -> None:
    sent = fill(root, 40)
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


def test_corrupt_record_inside_the_last_segment_cuts_there(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sent = fill(root, 30)
    victim = sent[-5]
    seg = next(p for p in reversed(segments(root)) if int(p.name) <= victim[0])
    with open(seg, "r+b") as f:  # flip a body byte: the CRC no longer matches
        f.seek(victim[1] - int(seg.name) - 10)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    with caplog.at_level(logging.WARNING):
        store = open_store(root)
    try:
        assert store.max_offset == victim[0]
        assert readable(store) == [b for off, _, b in sent if off < victim[0]]
        assert f"offset {victim[0]}" in caplog.text
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


def test_missing_middle_segment_stops_the_broker_process_with_one_error_line(tmp_path: Path) -> None:
    root = tmp_path / "store"
    fill(root, 40)
    segs = segments(root)
    segs[1].unlink()
    conf = tmp_path / "broker.conf"
    ports = []  # free ports, so that the failure is the store's and not the port check's
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    conf.write_text(
        f"storePathRootDir={root}\nmappedFileSizeCommitLog={SEG}\nmaxMessageSize=1500\n"
        f"controllerAddr=127.0.0.1:1\nlistenPort={ports[0]}\nhaListenPort={ports[1]}\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "services.broker", "-c", str(conf)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode != 0
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and segs[2].name in errors[0], proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


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
    sent = fill(root, 20)
    last = segments(root)[-1]
    os.truncate(last, last.stat().st_size - 10)
    json.loads((root / "checkpoint").read_text())
    store = open_store(root)
    try:
        assert store.confirm_offset <= store.max_offset == sent[-2][1]
    finally:
        store.close()
