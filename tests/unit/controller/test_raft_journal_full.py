"""The Raft journal on a disk that refuses writes (services/controller/raft_journal.py): a failed write never
raises into pysyncobj, nothing the disk does not hold may be claimed (``sync()`` is False) until the files are
written again from memory, a failed fsync is not trusted (everything since the last good one is written
again), and the files left meanwhile are whole (what a restart would open). The node's side of it (it sits out
of Raft, refuses proposals, names the disk) is tested below against fakes of pysyncobj."""

from __future__ import annotations

import asyncio
import errno
import gzip
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from services.common import durable
from services.common.codes import ResponseCode
from services.common.controller_client import NOT_LEADER_REMARK, no_leader, refusal
from services.common.wire import Envelope
from services.controller import raft_journal
from services.controller.config import ControllerConfig
from services.controller.controller import ControllerManager
from services.controller.raft import JournalNotWritable, RaftNode, _ControllerSyncObj
from services.controller.raft_journal import DurableJournal
from services.controller.raft_store import check_raft_store
from services.controller.raft_transport import GuardedTransport
from services.controller.state_machine import ReplicasInfoManager
from tests.unit.controller.test_raft_journal import entries, open_journal

real_write_all = durable.write_all
real_fsync = durable.fsync_file
FULL = "No space left on device"


class Disk:
    """The journal's writes as a full filesystem takes them: part of the bytes, then ENOSPC (a short write);
    fsyncs that fail with EIO when told to."""

    def __init__(self) -> None:
        self.full = False
        self.fsync_fails = False
        self.writes = 0

    def write_all(self, fd: int, data: bytes | memoryview, offset: int) -> None:
        self.writes += 1
        if self.full:
            os.pwrite(fd, bytes(data)[:len(data) // 2], offset)
            raise OSError(errno.ENOSPC, FULL)
        real_write_all(fd, data, offset)

    def fsync(self, fd: int, path: Any) -> None:
        if self.fsync_fails:
            raise OSError(errno.EIO, "Input/output error")
        real_fsync(fd, path)


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Disk:
    fake = Disk()
    monkeypatch.setattr(raft_journal, "write_all", fake.write_all)
    monkeypatch.setattr(durable, "write_all", fake.write_all)  # atomic_write's (the meta file, compaction)
    monkeypatch.setattr(raft_journal, "fsync_file", fake.fsync)
    monkeypatch.setattr(raft_journal, "REPAIR_INTERVAL_S", 0.0)
    return fake


def synced_journal(directory: Path, last: int) -> DurableJournal:
    j = open_journal(directory)
    for e in entries(1, last):
        j.add(*e)
    assert j.sync()
    return j


class TestAFullDisk:
    def test_an_entry_the_disk_refuses_stays_in_memory_and_nothing_may_claim_it(self, tmp_path: Path, disk: Disk,
                                                                                 caplog: pytest.LogCaptureFixture) -> None:
        j = synced_journal(tmp_path, 5)
        disk.full = True
        with caplog.at_level(logging.ERROR):
            for e in entries(6, 8):
                j.add(*e)  # no exception reaches pysyncobj
        assert j.fault is not None and j.fault.reason == FULL and j.fault.action == "write"
        assert f"cannot write the Raft journal file {tmp_path / 'raft.journal'}: {FULL}" in caplog.text
        assert caplog.text.count("takes no part in Raft") == 1  # logged when it starts, not per write
        assert j.sync() is False and list(j[:]) == entries(1, 8)
        check_raft_store(tmp_path)  # the file left behind is whole: the half record lies past its header
        assert list(open_journal(tmp_path)[:]) == entries(1, 5)
        disk.full = False
        assert j.sync() is True and j.fault is None
        assert list(open_journal(tmp_path)[:]) == entries(1, 8)

    def test_after_a_failed_fsync_everything_since_the_last_good_one_is_written_again(self, tmp_path: Path,
                                                                                       disk: Disk) -> None:
        j = synced_journal(tmp_path, 5)
        path = tmp_path / "raft.journal"
        durable_end = path.stat().st_size
        for e in entries(6, 8):
            j.add(*e)
        disk.fsync_fails = True
        assert j.sync() is False and j.fault is not None and j.fault.action == "fsync"
        with open(path, "r+b") as f:  # what the kernel may drop after a failed fsync: the pages it had
            f.seek(durable_end)
            f.write(bytes(path.stat().st_size - durable_end))
        disk.fsync_fails = False
        assert j.sync() is True
        assert list(open_journal(tmp_path)[:]) == entries(1, 8)

    def test_a_vote_the_disk_refuses_keeps_every_message_in_until_it_is_written(self, tmp_path: Path,
                                                                                disk: Disk) -> None:
        j = synced_journal(tmp_path, 2)
        disk.full = True
        j.setCurrentTerm(7, "n1")
        assert j.sync() is False  # no message reflecting term 7 or the vote may leave
        assert open_journal(tmp_path).getCurrentTerm() == 0
        assert not (tmp_path / "raft.journal.meta.tmp").exists()  # a failed atomic write gives its space back
        disk.full = False
        assert j.sync() is True
        again = open_journal(tmp_path)
        assert (again.getCurrentTerm(), again.getVotedForNodeId()) == (7, "n1")

    def test_a_compaction_the_disk_refuses_leaves_the_old_journal_whole_and_is_done_once_it_can(
            self, tmp_path: Path, disk: Disk) -> None:
        j = synced_journal(tmp_path, 30)
        (tmp_path / "raft.dump").write_bytes(gzip.compress(b"snapshot"))
        disk.full = True
        j.deleteEntriesTo(25)
        j.add(*entries(31, 31)[0])
        assert list(j[:]) == entries(26, 31) and j.sync() is False
        assert list(open_journal(tmp_path)[:]) == entries(1, 30)
        assert not (tmp_path / "raft.journal.tmp").exists()
        disk.full = False
        assert j.sync() is True
        assert list(open_journal(tmp_path)[:]) == entries(26, 31)

    def test_a_tail_dropped_while_the_disk_is_full_is_dropped_on_disk_once_it_can(self, tmp_path: Path,
                                                                                 disk: Disk) -> None:
        j = synced_journal(tmp_path, 10)
        disk.full = True
        j.deleteEntriesFrom(7)  # a follower's conflicting tail
        j.add(*entries(8, 8, term=2)[0])
        disk.full = False
        assert j.sync() is True
        assert list(open_journal(tmp_path)[:]) == [*entries(1, 7), *entries(8, 8, term=2)]

    def test_a_refused_journal_tries_again_at_most_once_a_repair_interval(self, tmp_path: Path, disk: Disk,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(raft_journal, "REPAIR_INTERVAL_S", 3600.0)
        j = synced_journal(tmp_path, 2)
        disk.full = True
        j.add(*entries(3, 3)[0])
        assert j.sync() is False  # the first try comes at once
        tries = disk.writes
        for _ in range(50):
            assert j.sync() is False  # a sync before every message: no write until the interval has passed
        assert disk.writes == tries


# ---------------------------------------------------------------------------------- the node around it
def faulted_journal(directory: Path, disk: Disk) -> DurableJournal:
    j = synced_journal(directory, 2)
    disk.full = True
    j.add(*entries(3, 3)[0])
    assert j.sync() is False
    return j


class FakeSyncObj:
    def __init__(self, journal: DurableJournal | None) -> None:
        self._journal = journal
        self.proposed: list[str] = []

    def journal(self) -> DurableJournal | None:
        return self._journal

    def journal_sync(self) -> bool:
        return self._journal is None or self._journal.sync()

    def apply_entry(self, entry: str, callback: Any) -> None:
        self.proposed.append(entry)


def test_a_node_whose_journal_cannot_be_written_does_not_step_raft(tmp_path: Path, disk: Disk) -> None:
    obj = _ControllerSyncObj.__new__(_ControllerSyncObj)
    obj._SyncObj__raftLog = faulted_journal(tmp_path, disk)  # type: ignore[attr-defined]
    obj._onTick(0.0)  # pysyncobj's step would need a transport: it is never reached


def test_no_message_leaves_a_node_whose_journal_cannot_be_written(tmp_path: Path, disk: Disk) -> None:
    transport = GuardedTransport.__new__(GuardedTransport)
    transport._syncObj = FakeSyncObj(faulted_journal(tmp_path, disk))
    assert GuardedTransport.send(transport, object(), {"type": "append_entries"}) is False


def test_a_proposal_on_a_node_whose_journal_cannot_be_written_is_refused_at_once(tmp_path: Path,
                                                                                 disk: Disk) -> None:
    obj = FakeSyncObj(faulted_journal(tmp_path, disk))
    raft = RaftNode.__new__(RaftNode)
    raft._obj = obj  # type: ignore[assignment]
    raft._pending = []
    with pytest.raises(JournalNotWritable, match=FULL):
        asyncio.run(raft.propose_events([], 5.0))
    assert obj.proposed == []


class SittingOutRaft:
    """A RaftNode whose journal cannot be written: pysyncobj still thinks it leads."""

    def __init__(self) -> None:
        self.machine = ReplicasInfoManager()

    def is_leader(self) -> bool:
        return True

    def leader_address(self) -> str | None:
        return "127.0.0.1:9879"

    def journal_fault(self) -> str | None:
        return f"cannot write the Raft journal file /data/raft/raft.journal: {FULL}"

    def read(self, fn: Any) -> Any:
        return fn(self.machine)


def test_a_controller_sitting_out_answers_not_leader_with_the_reason_and_no_stale_leader() -> None:
    manager = ControllerManager(ControllerConfig())
    manager.attach_raft(SittingOutRaft())  # type: ignore[arg-type]
    manager._serving = True  # it was serving when its disk filled
    assert manager.serving is False
    result = asyncio.run(manager.write("g", lambda m: m.get_next_broker_id("c", "g")))
    assert result.code == ResponseCode.CONTROLLER_NOT_LEADER
    assert result.remark is not None and result.remark.startswith("this controller cannot write the Raft journal")
    assert FULL in result.remark and "ask another controller" in result.remark
    assert result.data == {"controllerLeaderId": None, "controllerLeaderAddress": None}


def test_a_client_that_finds_no_leader_says_why_a_node_refused() -> None:
    plain = Envelope(int(ResponseCode.CONTROLLER_NOT_LEADER), NOT_LEADER_REMARK, {}, "a:1")
    reason = Envelope(int(ResponseCode.CONTROLLER_NOT_LEADER), f"this controller cannot write …: {FULL}", {}, "a:1")
    assert refusal("a:1", plain) == ""
    assert refusal("a:1", reason) == f"a:1: this controller cannot write …: {FULL}"
    error = no_leader(["a:1"], [], True, "", refusal("a:1", reason))
    assert error.remark.endswith(f"may have lost its majority (a:1: this controller cannot write …: {FULL})")
    assert no_leader(["a:1"], [], True).remark.endswith("may have lost its majority")
