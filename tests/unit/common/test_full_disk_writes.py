"""Writes on a full disk (services/common/durable.py, services/common/logsetup.py): a short write is finished or
fails, a failed atomic write leaves nothing behind, a file is only started if the disk can hold it, and the log
file says once that it cannot be written instead of printing a traceback for every line."""

from __future__ import annotations

import errno
import io
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from services.common import durable, logsetup
from services.common.durable import allocate, atomic_write, write_all

FULL = OSError(errno.ENOSPC, "No space left on device")
real_pwrite = os.pwrite


class ShortWrites:
    """os.pwrite on a disk with ``room`` bytes left: part of a write, then ENOSPC."""

    def __init__(self, room: int) -> None:
        self.room = room
        self.calls = 0

    def __call__(self, fd: int, data: Any, offset: int) -> int:
        self.calls += 1
        if self.room == 0:
            raise FULL
        n = min(self.room, len(data))
        self.room -= n
        return real_pwrite(fd, bytes(data)[:n], offset)


def test_a_short_write_is_finished_when_the_disk_has_room(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    calls = []

    def two_at_a_time(fd: int, data: Any, offset: int) -> int:
        calls.append(offset)
        return real_pwrite(fd, bytes(data)[:2], offset)
    monkeypatch.setattr(os, "pwrite", two_at_a_time)
    write_all(fd, b"abcdefg", 3)
    monkeypatch.undo()
    assert os.pread(fd, 10, 0) == b"\0\0\0abcdefg" and calls == [3, 5, 7, 9]
    os.close(fd)


def test_a_short_write_on_a_full_disk_raises_instead_of_passing_for_whole(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    monkeypatch.setattr(os, "pwrite", ShortWrites(room=4))
    with pytest.raises(OSError, match="No space left on device"):
        write_all(fd, b"0123456789", 0)
    os.close(fd)


def test_a_failed_atomic_write_leaves_the_old_file_and_no_temp_file(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "checkpoint"
    atomic_write(target, "old")

    def full(fd: int, data: Any, offset: int) -> None:
        raise FULL
    monkeypatch.setattr(durable, "write_all", full)
    with pytest.raises(OSError, match="No space left on device"):
        atomic_write(target, "new")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]


def test_allocate_refuses_a_file_the_disk_cannot_hold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, int]] = []

    def fallocate(fd: int, mode: int, offset: int, length: int) -> int:
        seen.append((mode, length))
        return -1
    monkeypatch.setattr(durable, "_fallocate", fallocate)
    monkeypatch.setattr(durable.ctypes, "get_errno", lambda: errno.ENOSPC)
    with pytest.raises(OSError, match="No space left on device"):
        allocate(3, 1 << 20)
    monkeypatch.setattr(durable.ctypes, "get_errno", lambda: errno.EOPNOTSUPP)
    allocate(3, 1 << 20)  # a filesystem without the call: the writes find out instead
    assert seen == [(1, 1 << 20), (1, 1 << 20)]


def test_the_log_file_says_once_that_it_cannot_be_written_and_once_that_it_can(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    stderr = io.StringIO()
    monkeypatch.setattr(logsetup.sys, "stderr", stderr)
    handler = logsetup.LogFileHandler(tmp_path / "x.log")
    failing = [True]
    real_emit = logging.FileHandler.emit

    def emit(self: logging.FileHandler, record: logging.LogRecord) -> None:
        if failing[0]:
            try:
                raise FULL
            except OSError:
                self.handleError(record)
            return
        real_emit(self, record)
    monkeypatch.setattr(logging.FileHandler, "emit", emit)
    for i in range(5):
        handler.handle(logging.makeLogRecord({"msg": f"line {i}"}))
    failing[0] = False
    handler.handle(logging.makeLogRecord({"msg": "back"}))
    handler.close()
    lines = stderr.getvalue().splitlines()
    log_file = tmp_path / "x.log"
    refused = f"cannot write the log file {log_file} (No space left on device); its lines go to stderr only until it can"
    assert lines == [refused, f"the log file {log_file} is written again"]
    assert (tmp_path / "x.log").read_text() == "back\n"
