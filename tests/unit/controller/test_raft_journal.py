"""The durable Raft journal (services/controller/raft_journal.py): pysyncobj's file format both ways, what is
fsynced when, atomic compaction after the snapshot it relies on, and what a power loss leaves (each file put
back to its last durable content, tests/support/powerloss.py) for the start-up check to open or cut."""

from __future__ import annotations

import gzip
import logging
from pathlib import Path

import pytest
from pysyncobj import pickle as sync_pickle  # type: ignore[import-untyped]
from pysyncobj.journal import FileJournal  # type: ignore[import-untyped]

from services.common import durable
from services.common.errors import ConfigError
from services.controller import raft_journal
from services.controller.raft_journal import DurableJournal, header, record
from services.controller.raft_store import check_raft_store
from tests.support.powerloss import SHADOW_ENV, power_loss

NOOP = b"\x01"  # pysyncobj's no-op command type (no pickle to check)


def entries(first: int, last: int, term: int = 1) -> list[tuple[bytes, int, int]]:
    return [(NOOP + f"entry-{i}".encode(), i, term) for i in range(first, last + 1)]


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of every file fsynced through the journal, in order."""
    seen: list[str] = []
    real = durable.fsync_file

    def record_fsync(fd: int, path: object) -> None:
        seen.append(Path(str(path)).name)
        real(fd, path)  # type: ignore[arg-type]
    monkeypatch.setattr(raft_journal, "fsync_file", record_fsync)
    return seen


def open_journal(directory: Path) -> DurableJournal:
    return DurableJournal(directory / "raft.journal", directory / "raft.dump")


class TestFormat:
    def test_pysyncobj_reads_what_this_journal_writes(self, tmp_path: Path) -> None:
        j = open_journal(tmp_path)
        for e in entries(1, 20):
            j.add(*e)
        j.deleteEntriesFrom(18)  # a follower's conflicting tail
        j.add(*entries(19, 19, term=2)[0])
        j._destroy()
        theirs = FileJournal(str(tmp_path / "raft.journal"))
        assert [theirs[i] for i in range(len(theirs))] == [*entries(1, 18), *entries(19, 19, term=2)]
        theirs._destroy()

    def test_this_journal_reads_what_pysyncobj_wrote(self, tmp_path: Path) -> None:
        theirs = FileJournal(str(tmp_path / "raft.journal"))
        for e in entries(1, 50):
            theirs.add(*e)
        theirs.setCurrentTerm(3, "n1")
        theirs._destroy()
        j = open_journal(tmp_path)
        assert list(j[:]) == entries(1, 50) and (j.getCurrentTerm(), j.getVotedForNodeId()) == (3, "n1")

    def test_the_header_and_records_are_pysyncobjs(self) -> None:
        assert header()[:9] == b"PYSYNCOBJ" and len(header()) == 40
        body = record((b"xy", 7, 2))
        assert body[:4] == body[-4:] == (18).to_bytes(4, "little")


class TestWhatIsFsyncedWhen:
    def test_appends_wait_for_one_sync_that_covers_them_all(self, tmp_path: Path, fsyncs: list[str]) -> None:
        j = open_journal(tmp_path)
        for e in entries(1, 10):
            j.add(*e)
        assert fsyncs == []  # nothing yet: the next message or apply syncs once for all of them
        j.sync()
        j.sync()  # nothing new: no second fsync
        assert fsyncs == ["raft.journal"] and j.syncs == 1

    def test_the_vote_is_durable_before_set_current_term_returns(self, tmp_path: Path) -> None:
        j = open_journal(tmp_path)
        j.setCurrentTerm(5, "n2")
        again = open_journal(tmp_path)
        assert (again.getCurrentTerm(), again.getVotedForNodeId()) == (5, "n2")

    def test_the_commit_index_is_written_after_the_entries_it_covers(self, tmp_path: Path,
                                                                     fsyncs: list[str]) -> None:
        j = open_journal(tmp_path)
        for e in entries(1, 5):
            j.add(*e)
        j.setRaftCommitIndex(5)
        assert open_journal(tmp_path).getRaftCommitIndex() == 1  # not before the one-second timer
        j.onOneSecondTimer()
        assert fsyncs == ["raft.journal"]  # the journal first, then the meta file (atomic_write)
        assert open_journal(tmp_path).getRaftCommitIndex() == 5

    def test_compaction_fsyncs_the_snapshot_then_replaces_the_journal_whole(self, tmp_path: Path,
                                                                            fsyncs: list[str]) -> None:
        j = open_journal(tmp_path)
        for e in entries(1, 30):
            j.add(*e)
        (tmp_path / "raft.dump").write_bytes(gzip.compress(b"snapshot"))
        j.deleteEntriesTo(25)
        assert fsyncs == ["raft.dump"]  # before the journal (which atomic_write replaces with its own fsync)
        assert list(j[:]) == entries(26, 30) == list(open_journal(tmp_path)[:])
        j.add(*entries(31, 31)[0])
        j.sync()
        assert list(open_journal(tmp_path)[:]) == entries(26, 31)


class TestPowerLoss:
    @pytest.fixture(autouse=True)
    def shadow(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv(SHADOW_ENV, "1")

    def test_only_what_was_synced_survives(self, tmp_path: Path) -> None:
        j = open_journal(tmp_path)
        for e in entries(1, 10):
            j.add(*e)
        j.sync()
        for e in entries(11, 15):
            j.add(*e)  # never synced: no node was told about them
        power_loss(tmp_path)
        assert list(open_journal(tmp_path)[:]) == entries(1, 10)

    def test_a_torn_tail_after_the_commit_index_is_cut_at_start(self, tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
        j = open_journal(tmp_path)
        for e in entries(1, 10):
            j.add(*e)
        j.setRaftCommitIndex(8)
        j.onOneSecondTimer()
        j._destroy()
        path = tmp_path / "raft.journal"
        data = bytearray(path.read_bytes())
        data[-3] ^= 0xFF  # the last record's length suffix: torn
        path.write_bytes(bytes(data))
        with caplog.at_level(logging.WARNING):
            check_raft_store(tmp_path)
        assert "cut there, as a power loss leaves it" in caplog.text
        assert list(open_journal(tmp_path)[:]) == entries(1, 9)

    def test_a_bad_record_at_or_below_the_commit_index_is_damage(self, tmp_path: Path) -> None:
        j = open_journal(tmp_path)
        for e in entries(1, 10):
            j.add(*e)
        j.setRaftCommitIndex(10)
        j.onOneSecondTimer()
        j._destroy()
        path = tmp_path / "raft.journal"
        data = bytearray(path.read_bytes())
        data[-3] ^= 0xFF
        path.write_bytes(bytes(data))
        with pytest.raises(ConfigError, match="records entries up to 10 as committed while the journal holds "
                                              "them only up to 9"):
            check_raft_store(tmp_path)

    def test_a_snapshot_never_synced_is_gone_but_the_journal_it_did_not_compact_is_whole(self,
                                                                                       tmp_path: Path) -> None:
        j = open_journal(tmp_path)
        for e in entries(1, 12):
            j.add(*e)
        j.sync()
        snapshot = (None, entries(12, 12)[0], entries(11, 11)[0], None)
        with gzip.open(tmp_path / "raft.dump", "wb") as f:  # pysyncobj's child writes it, without fsync
            sync_pickle.dump(snapshot, f)
        outcome = power_loss(tmp_path)
        assert outcome["raft.dump"] == "lost" and list(open_journal(tmp_path)[:]) == entries(1, 12)
