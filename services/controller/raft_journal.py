"""A Raft journal that is on disk before anything counts on it: pysyncobj's journal interface and file format,
written with fsync.

pysyncobj's own ``FileJournal`` writes through an mmap and never syncs it, and writes its meta file and
snapshot with a rename but no fsync, so a power loss (or kernel crash) on a majority can lose entries Raft had
committed: an elected master, an applied broker id. This journal keeps the same files, byte for byte the same
format (``raft_store.py`` describes it), so stores move between the two freely, and adds the rules Raft needs:

* an entry is in the journal on disk before this node tells anyone it has it and before it is applied: the
  transport calls :meth:`DurableJournal.sync` before every message it sends, and the apply before every apply.
  Appends only mark the journal dirty, so one fsync covers every entry added since the last (group commit:
  a leader's batch of new entries, a follower's whole append_entries message);
* the term and vote are on disk before the message that reflects them leaves (``setCurrentTerm`` writes
  the meta file with fsync, rename and directory fsync); the commit index is written the same way about
  once a second;
* compaction never rewrites the journal in place: the entries kept are written to a new file, fsynced and
  renamed over the old one, and only after the snapshot (``raft.dump``) it relies on is fsynced; clearing
  the journal for a snapshot received from the leader does the same.

Records are appended with ``pwrite``, then the header's last-record offset. A power loss between two syncs
can leave a torn record after the last synced one; no node acknowledged it, and ``raft_store`` cuts it at
the next start (a bad record at or below the recorded commit index is damage, and stops the node).

A write that fails (a full disk, an I/O error) never raises into pysyncobj, which would be left half way
through a step: the journal keeps the entry (or the term, or the compacted list) in memory, records a
:class:`JournalFault`, and :meth:`DurableJournal.sync` answers False until :meth:`DurableJournal.repair`
has written the files again from memory (everything since the last successful fsync, since after a failed
fsync the kernel may have dropped those pages). While it answers False the node sends nothing, applies
nothing and takes no part in Raft (``raft.py``): it is as if it were paused, which Raft tolerates, and it
resumes by itself once the disk takes the writes again.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pysyncobj.journal import (  # type: ignore[import-untyped]
    APP_NAME,
    APP_VERSION,
    FIRST_RECORD_OFFSET,
    JOURNAL_FORMAT_VERSION,
    LAST_RECORD_OFFSET_OFFSET,
    NAME_SIZE,
    VERSION_SIZE,
    Journal,
)
from pysyncobj.pickle import dumps, loads  # type: ignore[import-untyped]

from services.common.durable import atomic_write, fsync_dir, fsync_file, write_all

log = logging.getLogger(__name__)

_OFFSET = struct.Struct("<I")
_HEAD = struct.Struct("<QQ")

Entry = tuple[bytes, int, int]  # (command, index, term), as pysyncobj hands them over

#: How often a journal that could not be written tries again (each try may rewrite the whole journal).
REPAIR_INTERVAL_S = 1.0


@dataclass(frozen=True)
class JournalFault:
    """A journal file this node could not write: which, doing what, and the system's reason."""

    path: str
    action: str  # "write", "fsync" or "replace"
    reason: str  # the system's words, e.g. "No space left on device"

    def describe(self) -> str:
        return f"cannot {self.action} the Raft journal file {self.path}: {self.reason}"


def header() -> bytes:
    name = APP_NAME + b"\0" * (NAME_SIZE - len(APP_NAME))
    version = APP_VERSION + b"\0" * (VERSION_SIZE - len(APP_VERSION))
    return bytes(name + version + struct.pack("<II", JOURNAL_FORMAT_VERSION, FIRST_RECORD_OFFSET))


def record(entry: Entry) -> bytes:
    command, index, term = entry
    body = _HEAD.pack(index, term) + bytes(command)
    size = _OFFSET.pack(len(body))
    return size + body + size


def read_records(data: bytes) -> list[Entry]:
    """The entries of a journal file's bytes, up to its header's last-record offset (``raft_store`` has
    checked them before the node opens the file)."""
    last = _OFFSET.unpack_from(data, LAST_RECORD_OFFSET_OFFSET)[0]
    entries: list[Entry] = []
    offset = FIRST_RECORD_OFFSET
    while offset < last:
        size = _OFFSET.unpack_from(data, offset)[0]
        body = data[offset + 4:offset + 4 + size]
        index, term = _HEAD.unpack_from(body)
        entries.append((body[16:], index, term))
        offset += size + 8
    return entries


def _ends(entries: list[Entry]) -> list[int]:
    ends, end = [], FIRST_RECORD_OFFSET
    for e in entries:
        end += len(e[0]) + 24
        ends.append(end)
    return ends


class DurableJournal(Journal):  # type: ignore[misc]
    """pysyncobj's journal interface over ``path`` (and ``path.meta``), durable as the module says;
    ``dump`` is the snapshot file compaction relies on."""

    def __init__(self, path: str | os.PathLike[str], dump: str | os.PathLike[str]) -> None:
        self.path, self.dump = Path(path), Path(dump)
        self.meta_path = self.path.with_name(self.path.name + ".meta")
        if not self.path.exists():
            atomic_write(self.path, header())
        self._fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        data = os.pread(self._fd, os.fstat(self._fd).st_size, 0)
        self._entries = read_records(data)
        self._ends = _ends(self._entries)  # where each entry's record ends: a tail is cut without a scan
        self._end = _OFFSET.unpack_from(data, LAST_RECORD_OFFSET_OFFSET)[0]
        self._meta: dict[str, Any] = self._read_meta()
        self._meta_saved = True
        self._dirty = False
        self._durable_end = self._end  # the file is what memory says up to here, fsynced
        self.fault: JournalFault | None = None
        self._replace_pending = False  # a whole-journal replacement (compaction, clear) still to be written
        self._next_repair = 0.0
        self.syncs = 0

    def _read_meta(self) -> dict[str, Any]:
        try:
            meta = loads(self.meta_path.read_bytes())
        except FileNotFoundError:
            return {}
        return meta if isinstance(meta, dict) else {}

    # ------------------------------------------------------------------ durability
    def sync(self) -> bool:
        """Make every entry added so far durable (one fsync, only if anything changed). False while the
        journal cannot be written: then nothing it holds may be claimed or applied."""
        if self.fault is not None:
            return self.repair()
        if self._dirty:
            if not self._attempt("fsync", self.path, lambda: fsync_file(self._fd, self.path)):
                return False
            self._durable_end, self._dirty = self._end, False
            self.syncs += 1
        return True

    def repair(self) -> bool:
        """After a failed write, write the files again from memory (at most once every REPAIR_INTERVAL_S);
        True once they hold everything memory does, durably (and at once if nothing failed)."""
        if self.fault is None:
            return True
        now = time.monotonic()
        if now < self._next_repair:
            return False
        self._next_repair = now + REPAIR_INTERVAL_S
        if not self._attempt(self.fault.action, Path(self.fault.path), self._write_again):
            return False
        log.warning("the Raft journal %s is written again: this controller takes part in Raft again", self.path)
        return True

    def _write_again(self) -> None:
        if self._replace_pending:
            self._replace_file()
        else:
            start = self._durable_end
            first = bisect.bisect_right(self._ends, start)  # the first entry not known to be on disk
            write_all(self._fd, b"".join(record(e) for e in self._entries[first:]), start)
            write_all(self._fd, _OFFSET.pack(self._end), LAST_RECORD_OFFSET_OFFSET)
            fsync_file(self._fd, self.path)
            self._durable_end, self._dirty = self._end, False
        if not self._meta_saved:
            self._store_meta()
        self.fault = None

    def _attempt(self, action: str, path: Path, write: Callable[[], None]) -> bool:
        """Run ``write``; an OSError becomes the journal's fault (logged when it starts) instead of an exception."""
        try:
            write()
        except OSError as exc:
            first = self.fault is None
            self.fault = JournalFault(str(path), action, exc.strerror or str(exc))
            if first:
                log.error("%s; this controller takes no part in Raft until it can, and tries again every %.0f s "
                          "(free space on that filesystem: see docs/operations.md, 'Full disk')",
                          self.fault.describe(), REPAIR_INTERVAL_S)
            return False
        return True

    def _rewrite(self, entries: list[Entry]) -> None:
        """Replace the journal with ``entries`` atomically (new file, fsync, rename, directory fsync), after
        making the snapshot that covers what is dropped durable. Memory holds ``entries`` from now on; if the
        files cannot be written, the replacement waits for :meth:`repair`."""
        self._entries, self._ends = list(entries), _ends(entries)
        self._end = self._ends[-1] if self._ends else FIRST_RECORD_OFFSET
        self._replace_pending = True
        if self.fault is None:
            self._attempt("replace", self.path, self._replace_file)

    def _replace_file(self) -> None:
        if self.dump.exists():
            fd = os.open(self.dump, os.O_RDONLY)
            try:
                fsync_file(fd, self.dump)
            finally:
                os.close(fd)
            fsync_dir(self.dump.parent)
        data = bytearray(header() + b"".join(record(e) for e in self._entries))
        _OFFSET.pack_into(data, LAST_RECORD_OFFSET_OFFSET, len(data))
        atomic_write(self.path, bytes(data))
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        self._durable_end, self._dirty, self._replace_pending = len(data), False, False

    # ------------------------------------------------------------------ pysyncobj's Journal interface
    def add(self, command: bytes, idx: int, term: int) -> None:
        data = record((command, idx, term))
        offset = self._end
        self._end += len(data)
        self._entries.append((command, idx, term))
        self._ends.append(self._end)
        self._dirty = True
        if self.fault is None and not self._replace_pending:
            self._attempt("write", self.path, lambda: self._append(offset, data))

    def _append(self, offset: int, data: bytes) -> None:
        write_all(self._fd, data, offset)
        write_all(self._fd, _OFFSET.pack(self._end), LAST_RECORD_OFFSET_OFFSET)

    def clear(self) -> None:
        self._rewrite([])

    def deleteEntriesFrom(self, entryFrom: int) -> None:
        """Drop the entries from position ``entryFrom`` on (a follower's conflicting or resent tail): the header
        is moved back (the bytes after it are ignored, then overwritten). Like an append, this is on disk before
        any message leaves; until then a restart may bring the old tail back, which Raft allows (it is what this
        node had last said it holds)."""
        if entryFrom >= len(self._entries):
            return
        del self._entries[entryFrom:]
        del self._ends[entryFrom:]
        self._end = self._ends[-1] if self._ends else FIRST_RECORD_OFFSET
        self._durable_end = min(self._durable_end, self._end)
        self._dirty = True
        if self.fault is None and not self._replace_pending:
            self._attempt("write", self.path,
                          lambda: write_all(self._fd, _OFFSET.pack(self._end), LAST_RECORD_OFFSET_OFFSET))

    def deleteEntriesTo(self, entryTo: int) -> None:
        self._rewrite(self._entries[entryTo:])

    def __getitem__(self, item: Any) -> Any:
        return self._entries[item]

    def __len__(self) -> int:
        return len(self._entries)

    def _destroy(self) -> None:
        if self.sync():
            self._attempt("write", self.meta_path, self._store_meta)
        os.close(self._fd)

    def flush(self) -> None:
        self.sync()

    def setRaftCommitIndex(self, raftCommitIndex: int) -> None:
        self._meta["raftCommitIndex"] = raftCommitIndex
        self._meta_saved = False

    def getRaftCommitIndex(self) -> int:
        return int(self._meta.get("raftCommitIndex", 1))

    def setCurrentTerm(self, term: int, votedForNodeId: Any) -> None:
        self._meta["currentTerm"] = term
        self._meta["votedForNodeId"] = votedForNodeId
        self._meta_saved = False
        # Durable before any message reflecting the term or the vote leaves this node: if it cannot be
        # written, the fault keeps every message in (sync() is False) until repair() has written it.
        if self.fault is None:
            self._attempt("write", self.meta_path, self._store_meta)

    def getCurrentTerm(self) -> int:
        return int(self._meta.get("currentTerm", 0))

    def getVotedForNodeId(self) -> Any:
        return self._meta.get("votedForNodeId")

    def onOneSecondTimer(self) -> None:
        if not self._meta_saved and self.sync():  # a commit index on disk never points past the journal on disk
            self._attempt("write", self.meta_path, self._store_meta)

    def _store_meta(self) -> None:
        atomic_write(self.meta_path, dumps(self._meta))
        self._meta_saved = True
