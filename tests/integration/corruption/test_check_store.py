"""``mqctl checkStore``: an offline, read-only check of every file of a stopped broker's store
(services/broker/store_check.py, mqctl/commands/store.py).

Recovery scans only the newest segments, so damage in an old one shows only when a consumer reaches it;
checkStore reads every record. Exit 0 when nothing needs the operator (also when only what the broker
repairs by itself was found), 1 with one ``Error:`` line when something does, 2 for usage errors. It
never changes a byte.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from services.broker.store import Message, MessageStore

pytestmark = pytest.mark.component

SEG = 4096
TS = 1_700_000_000_000


def build(root: Path, n: int = 60) -> list[tuple[int, int]]:
    store = MessageStore(root, "127.0.0.1:10911", segment_size=SEG, queue_nums=2, max_message_size=1500)
    store.open()
    store.epochs.append(1, 0)
    placed = []
    for i in range(n):
        r = store.append(Message("T", f"m{i}-".encode() + bytes(300), queue_id=i % 2), TS)
        placed.append((r.commit_log_offset, r.next_offset))
    store.set_confirm_offset(store.max_offset)
    store.close()
    return placed


def flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x20
    path.write_bytes(bytes(data))


def check(root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mqctl.cli", "checkStore", "--store-dir", str(root), "--segment-size", str(SEG),
         *extra], check=False, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def state(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*")) if p.is_file()}


def errors(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("Error:")]


def test_a_clean_store_passes(tmp_path: Path) -> None:
    root = tmp_path / "store"
    end = build(root)[-1][1]
    segments = len(list((root / "commitlog").iterdir()))
    proc = check(root)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"store {root}: commitlog [0, {end}) in {segments} segment(s), 2 consume queue(s), epochs 1-0",
        "no damage found"]


def test_damage_anywhere_is_listed_with_its_file_and_offset_and_nothing_changes(tmp_path: Path) -> None:
    root = tmp_path / "store"
    placed = build(root)
    segs = sorted((root / "commitlog").iterdir())
    assert len(segs) > 4
    old, recent = placed[1], placed[-3]  # one where recovery never looks, one where it does
    flip(segs[0], old[1] - 3)
    flip(segs[-1], recent[1] - 3 - int(segs[-1].name))
    (root / "checkpoint").write_text("garbage")
    before = state(root)
    proc = check(root)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert (f"repaired at start: {root / 'checkpoint'}: damaged (or written by an older version, without a CRC); "
            "rebuilt from the queues and the commitlog at start") in lines
    assert f"DAMAGED: {segs[0]} offset {old[0]}: CRC mismatch (valid records follow or it was flushed)" in lines
    assert f"DAMAGED: {segs[-1]} offset {recent[0]}: CRC mismatch (valid records follow or it was flushed)" in lines
    assert errors(proc) == [(f"Error: 2 damaged place(s) in {root} need the operator; see docs/operations.md "
                             "('Damaged commitlog', 'Damaged epoch file')")]
    assert state(root) == before


def test_a_torn_tail_is_reported_as_repaired_at_start(tmp_path: Path) -> None:
    root = tmp_path / "store"
    placed = build(root)
    (root / "checkpoint").unlink()  # as if the last flush had not happened: the tail is not known flushed
    last = max((root / "commitlog").iterdir())
    os.truncate(last, placed[-1][0] + 20 - int(last.name))
    proc = check(root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"repaired at start: {last} offset {placed[-1][0]}: record of" in proc.stdout
    assert "(a torn last write, cut at start)" in proc.stdout


def test_a_damaged_epoch_file_and_identity_file_are_listed(tmp_path: Path) -> None:
    root = tmp_path / "store"
    build(root)
    (root / "epochFileCheckpoint").write_text("2\n0\n1-0\n999999-100\n")  # a forged epoch behind a CRC of 0
    (root / "brokerIdentity").write_text("DefaultCluster#broker-a")
    proc = check(root, "--format", "json")
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    found = {f["path"]: f for f in doc["findings"]}
    assert not found[str(root / "epochFileCheckpoint")]["repaired_at_start"]
    assert "refuses to start" in found[str(root / "epochFileCheckpoint")]["problem"]
    assert not found[str(root / "brokerIdentity")]["repaired_at_start"]
    assert doc["epochs"] == []


@pytest.mark.parametrize("args", [[], ["--store-dir", "/nonexistent/store"]])
def test_usage_errors_exit_2(args: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "mqctl.cli", "checkStore", *args], check=False,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and len(errors(proc)) == 1
