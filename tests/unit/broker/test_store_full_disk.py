"""The store on a disk that refuses writes: a write to the commitlog is all or nothing (a new segment is made only
if the disk can hold all of it, a short write is cut back, nothing shows until everything is written), the
consume queues, the checkpoint and the epoch file fail without losing their place, and the broker and the slave
turn a refused write into SERVICE_NOT_AVAILABLE and a pause instead of an internal error or a crash."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from services.broker import broker as broker_module
from services.broker import commitlog as commitlog_module
from services.broker.broker import Broker
from services.broker.commitlog import CommitLog, StoreNotWritable
from services.broker.epoch_file import EpochFileCache
from services.broker.flush import FlushService
from services.broker.ha.slave import STORE_ERROR, HAClient
from services.broker.store import Message, MessageStore
from services.common import durable

SEG = 4096
TS = 1_700_000_000_000
FULL = "No space left on device"
real_write_all = durable.write_all


def enospc(*args: Any) -> None:
    raise OSError(errno.ENOSPC, FULL)


def half_then_enospc(fd: int, data: Any, offset: int) -> None:
    """A full disk: the first half of the bytes lands, then the write fails (os.pwrite's short write)."""
    os.pwrite(fd, bytes(data)[:len(data) // 2], offset)
    enospc()


def log_files(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(directory.iterdir())}


@pytest.fixture
def log(tmp_path: Path) -> CommitLog:
    cl = CommitLog(tmp_path / "commitlog", SEG)
    cl.open()
    return cl


def append(cl: CommitLog, queue_offset: int, size: int = 1000) -> tuple[int, int]:
    return cl.append_message("T", 0, queue_offset, TS, {}, bytes(size))


class TestCommitLog:
    def test_a_segment_the_disk_cannot_hold_is_never_started(self, log: CommitLog,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
        for i in range(3):
            append(log, i)
        before, files = log.max_offset, log_files(log.directory)
        monkeypatch.setattr(commitlog_module, "allocate", enospc)
        with pytest.raises(StoreNotWritable, match=f"cannot write .*{SEG:020d}: {FULL}"):
            append(log, 3, 2000)  # does not fit: padding here, the record in a new segment
        assert (log.max_offset, log_files(log.directory)) == (before, files)  # not even the padding
        monkeypatch.undo()
        assert append(log, 3, 2000)[0] == SEG

    def test_a_short_write_is_cut_back_and_the_next_write_lands_in_its_place(self, log: CommitLog,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
        first = append(log, 0)
        monkeypatch.setattr(commitlog_module, "write_all", half_then_enospc)
        with pytest.raises(StoreNotWritable, match=FULL):
            append(log, 1)
        assert log.max_offset == sum(first) and (log.directory / f"{0:020d}").stat().st_size == sum(first)
        monkeypatch.undo()
        assert append(log, 1)[0] == sum(first)
        assert [r.queue_offset for r in log.iter_records(0)] == [0, 1]

    def test_a_write_across_two_segments_shows_nothing_until_both_parts_are_written(
            self, log: CommitLog, monkeypatch: pytest.MonkeyPatch) -> None:
        for i in range(3):
            append(log, i)
        before = log.max_offset
        calls: list[int] = []

        def second_fails(fd: int, data: Any, offset: int) -> None:
            calls.append(offset)
            if len(calls) == 2:
                enospc()
            real_write_all(fd, data, offset)
        monkeypatch.setattr(commitlog_module, "write_all", second_fails)
        with pytest.raises(StoreNotWritable):
            log.append_batch([commitlog_module.NewRecord("T", 0, 3, TS, {}, bytes(2000))])
        assert log.max_offset == before and [s.start for s in log.segments] == [0]
        assert log_files(log.directory) == {f"{0:020d}": before}


class TestStore:
    @pytest.fixture
    def store(self, tmp_path: Path) -> MessageStore:
        s = MessageStore(tmp_path / "store", "127.0.0.1:10911", segment_size=SEG)
        s.open()
        return s

    def test_a_refused_batch_takes_no_queue_offset(self, store: MessageStore, monkeypatch: pytest.MonkeyPatch) -> None:
        store.append_batch([Message("T", b"a", queue_id=0)], TS)
        monkeypatch.setattr(commitlog_module, "write_all", enospc)
        with pytest.raises(StoreNotWritable):
            store.append_batch([Message("T", b"b", queue_id=0)], TS)
        monkeypatch.undo()
        assert store.append_batch([Message("T", b"c", queue_id=0)], TS)[0].queue_offset == 1

    def test_indexing_the_disk_refuses_waits_for_the_next_try(self, store: MessageStore,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
        store.append_batch([Message("T", b"a", queue_id=0)], TS)
        monkeypatch.setattr(store.queues, "dispatch_many", enospc)
        with caplog.at_level(logging.ERROR):
            store.set_confirm_offset(store.max_offset)  # no exception reaches the ack path
            store.dispatch()
        assert store.index_error == FULL and store.reput_offset == 0
        assert caplog.text.count("cannot index the commitlog") == 1
        monkeypatch.undo()
        store.dispatch()
        assert store.index_error is None and store.get_messages("T", 0, 0, 10).status == "FOUND"

    def test_a_queue_file_the_disk_cannot_create_is_a_full_disk_not_damage(self, store: MessageStore,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
        store.append_batch([Message("New", b"a", queue_id=1)], TS)
        real_open = os.open

        def no_inode(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
            if dir_fd is not None and flags & os.O_CREAT:
                raise OSError(errno.ENOSPC, FULL)
            return real_open(path, flags, mode, dir_fd=dir_fd)
        monkeypatch.setattr(os, "open", no_inode)
        store.set_confirm_offset(store.max_offset)
        monkeypatch.undo()
        assert store.index_error == FULL
        store.dispatch()
        assert store.get_messages("New", 1, 0, 10).status == "FOUND"

    def test_a_checkpoint_the_disk_refuses_does_not_fail_the_flush(self, store: MessageStore,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
        store.append_batch([Message("T", b"a", queue_id=0)], TS)
        store.set_confirm_offset(store.max_offset)
        monkeypatch.setattr(durable, "write_all", enospc)  # atomic_write's
        assert store.flush() == store.max_offset  # the commitlog is fsynced: its waiters may go
        assert store.checkpoint_error == FULL
        monkeypatch.undo()
        store.flush()
        assert store.checkpoint_error is None


def test_an_epoch_the_disk_refuses_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    epochs = EpochFileCache(tmp_path / "epochFileCheckpoint")
    epochs.load(log_has_data=False)
    assert epochs.append(1, 0)
    monkeypatch.setattr(durable, "write_all", enospc)
    with pytest.raises(OSError, match=FULL):
        epochs.append(2, 100)
    assert [e.epoch for e in epochs.entries()] == [1]


# ---------------------------------------------------------------------------------- broker, slave, flush
def test_the_broker_answers_a_refused_write_with_service_not_available_and_rests_a_second(
        monkeypatch: pytest.MonkeyPatch) -> None:
    broker = Broker.__new__(Broker)
    broker.write_error, broker._write_retry_at = None, 0.0
    now = [100.0]
    monkeypatch.setattr(broker_module.time, "monotonic", lambda: now[0])
    refused = broker._write_refused(StoreNotWritable("/s/commitlog/00000000000000004096", OSError(errno.ENOSPC, FULL)))
    assert refused.status == "SERVICE_NOT_AVAILABLE" and refused.results == []
    assert refused.remark.startswith(f"the message store is not writable: cannot write /s/commitlog/00000000000000004096:"
                                     f" {FULL}; nothing was stored")
    assert broker._not_writable() is not None  # within the second: refused without trying
    now[0] += broker_module.WRITE_RETRY_S
    assert broker._not_writable() is None  # then the next send tries the disk again
    broker._written()
    assert broker.write_error is None


def test_a_slave_whose_disk_refuses_a_frame_pauses_and_says_why(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    client = HAClient.__new__(HAClient)
    client.error, client.master_address = None, "127.0.0.1:10911"
    client.store = MessageStore(tmp_path, "127.0.0.1:10912")

    class Session:
        def starts_over(self, frames: Any) -> bool:
            return False

        def apply(self, frames: Any) -> int:
            raise OSError(errno.ENOSPC, FULL, str(tmp_path / "epochFileCheckpoint.tmp"))
    with pytest.raises(StoreNotWritable) as refused:
        client._write_locally(Session(), ())  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR):
        client._store_refused(refused.value)
        client._store_refused(refused.value)
    assert client.error == f"{STORE_ERROR}cannot write {tmp_path / 'epochFileCheckpoint.tmp'}: {FULL}"
    assert caplog.text.count("replication from 127.0.0.1:10911 paused") == 1


def test_failed_flushes_are_logged_once_then_at_most_every_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    flush = FlushService.__new__(FlushService)
    flush._failing, flush._unlogged, flush._next_failure_log = False, 0, 0.0
    now = [0.0]
    monkeypatch.setattr("services.broker.flush.time.monotonic", lambda: now[0])
    assert flush._failure() == ""
    assert [flush._failure() for _ in range(3)] == [None, None, None]
    now[0] = 10.0
    assert flush._failure() == " (3 more failed since the last line)"
