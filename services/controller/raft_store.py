"""Start-up check of a controller's Raft files, before pysyncobj opens them.

pysyncobj keeps three files under ``<controllerStorePath>/raft``:

* ``raft.journal``: a header (application name, version, format, last-record offset), then records
  ``<u32 length><u64 index><u64 term><command><u32 length>``; a regular command is a type byte and a
  pickle of ``(method id, args, kwargs)`` whose first argument is our JSON entry (with a CRC of its
  events). Created at the node's first start, before anything else.
* ``raft.journal.meta``: a pickled dict of the current term, the vote and the commit index, written
  before every vote and about once a second.
* ``raft.dump``: a gzip'd pickle ``(state, last applied entry, the entry before it, members)`` written
  at each log compaction, after which the journal keeps only the entries from "the entry before it" on.

pysyncobj trusts whatever it finds: a missing journal beside a snapshot makes it start from the
snapshot and forget every later change, a journal that no longer reaches the commit index it recorded
is clamped with a warning, a lost meta file makes it forget the vote it gave. Each of these is refused
here with one error naming the file, as for damaged bytes. What is legitimate:

=====================================  ==========================================================
files                                  verdict
=====================================  ==========================================================
none                                   a new node
journal only (records of term 0)       a new node stopped before its first election
journal + meta                         before the first compaction
journal + meta + dump, journal begins  the usual state after a compaction
  with the dump's last two entries
journal + meta + dump, journal ends    a follower stopped between receiving a leader's snapshot
  before the dump's last entry         and resetting its journal to it: the snapshot is newer
journal + meta + dump, journal still   stopped between writing a snapshot and compacting the
  holds older entries                  journal: the journal is compacted here, so the entries
                                       after the snapshot are kept (pysyncobj would drop them)
journal without meta, records of a     single-node group only: the term is taken from the log, and
  later term                           no other node asks for its vote
=====================================  ==========================================================

Anything else stops the node: dump or meta without journal, a compacted journal without its dump, a
journal that does not reach the commit index the meta file recorded, a dump older than the journal's
first entry, meta lost in a group.
"""

from __future__ import annotations

import gzip
import json
import logging
import stat
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pysyncobj import pickle as sync_pickle  # type: ignore[import-untyped]
from pysyncobj.journal import (  # type: ignore[import-untyped]
    APP_NAME,
    FIRST_RECORD_OFFSET,
    LAST_RECORD_OFFSET_OFFSET,
)

from services.common.durable import atomic_write
from services.common.errors import ConfigError

log = logging.getLogger(__name__)

REGULAR_COMMAND = 0
JOURNAL, META, DUMP = "raft.journal", "raft.journal.meta", "raft.dump"


@dataclass(frozen=True)
class Record:
    offset: int
    index: int
    term: int


def damaged(path: Path, reason: str) -> ConfigError:
    return ConfigError(
        f"the controller's Raft file {path} is damaged ({reason}). This node cannot rebuild its state from "
        f"it. Move the directory {path.parent} aside and start the node again: it copies the state from the "
        "other controllers (on a single-node controller that means starting with no metadata). See "
        "docs/operations.md, 'Controller Raft files refused'.")


def check_raft_store(directory: Path, single_node: bool = True) -> None:
    """Raise a ConfigError naming the file if pysyncobj would start from these files with less than
    they hold (or not start at all); compact a journal left uncompacted by a crash."""
    journal, meta_path, dump_path = directory / JOURNAL, directory / META, directory / DUMP
    meta = _read_meta(meta_path)
    dump = _read_dump(dump_path) if dump_path.exists() else None
    if not journal.exists():
        _check_no_journal(journal, meta, dump)
        return
    data = journal.read_bytes()
    records, torn = _check_journal(journal, data)
    if torn is not None:
        data = _cut_torn_tail(journal, data, records, torn, meta, dump)
    if meta is None and not single_node and any(r.term > 0 for r in records):
        raise damaged(meta_path, "missing while the journal holds entries of term "
                      f"{max(r.term for r in records)}: this node would forget the vote it gave in its last term "
                      "and could vote twice in it")
    end = records[-1].index if records else 0
    if dump is not None:
        end = _reconcile_with_dump(journal, data, records, dump)
    elif records and records[0].index > 1:
        raise damaged(dump_path, f"missing while the journal starts at entry {records[0].index}: the entries "
                      "before it exist only in the snapshot, so this node would start without them")
    committed = int(meta.get("raftCommitIndex", 0)) if meta else 0
    if committed > end:
        raise damaged(journal, f"it ends at entry {end}, but {META} records entries up to {committed} as "
                      "committed: committed entries are missing")


def _cut_torn_tail(journal: Path, data: bytes, records: list[Record], torn: tuple[int, str],
                   meta: dict[str, Any] | None, dump: tuple[Record, Record] | None) -> bytes:
    """A bad record after which the journal holds nothing this node had committed is what a power loss
    leaves (raft_journal.py: nothing unsynced was ever acknowledged): cut it, durably. One at or below the
    commit index on disk is damage."""
    offset, reason = torn
    kept = max(records[-1].index if records else 0, dump[1].index if dump else 0)
    committed = int(meta.get("raftCommitIndex", 0)) if meta else 0
    if kept < committed:
        raise damaged(journal, f"{reason}, and {META} records entries up to {committed} as committed while the "
                      f"journal holds them only up to {kept}")
    header = bytearray(data[:FIRST_RECORD_OFFSET])
    struct.pack_into("<I", header, LAST_RECORD_OFFSET_OFFSET, offset)
    cut = bytes(header) + data[FIRST_RECORD_OFFSET:offset]
    atomic_write(journal, cut, mode=stat.S_IMODE(journal.stat().st_mode))
    log.warning("%s: %s, after the last entry this node had committed (%d): cut there, as a power loss leaves "
                "it (the entries cut were never acknowledged by this node)", journal, reason, committed)
    return cut


def _check_no_journal(journal: Path, meta: dict[str, Any] | None, dump: tuple[Record, Record] | None) -> None:
    if dump is not None:
        raise damaged(journal, f"missing while {DUMP} exists: this node would start from that snapshot (entry "
                      f"{dump[1].index}) and silently forget every change committed after it")
    if meta and (int(meta.get("currentTerm", 0)) > 0 or int(meta.get("raftCommitIndex", 1)) > 1):
        raise damaged(journal, f"missing while {META} shows term {meta.get('currentTerm', 0)} and commit index "
                      f"{meta.get('raftCommitIndex', 1)}: the log was lost")


def _reconcile_with_dump(journal: Path, data: bytes, records: list[Record], dump: tuple[Record, Record]) -> int:
    """The last entry the node will have once pysyncobj loaded the dump; compacts the journal when
    pysyncobj would otherwise throw away the entries it holds after the snapshot."""
    before, last = dump
    keys = [(r.index, r.term) for r in records]
    if keys[:2] == [(before.index, before.term), (last.index, last.term)]:
        return records[-1].index
    if not records or records[-1].index <= last.index:
        return last.index  # the snapshot is newer than the whole journal: nothing is dropped
    if (before.index, before.term) not in keys or (last.index, last.term) not in keys:
        raise damaged(journal, f"its entries {records[0].index}..{records[-1].index} do not continue {DUMP} "
                      f"(entry {last.index}, term {last.term}): the snapshot and the log are of different histories")
    _compact(journal, data, records[keys.index((before.index, before.term))])
    return records[-1].index


def _compact(journal: Path, data: bytes, first: Record) -> None:
    """What pysyncobj does right after a snapshot is written: keep the entries from ``first`` on."""
    (last_offset,) = struct.unpack_from("<I", data, LAST_RECORD_OFFSET_OFFSET)
    body = data[first.offset:last_offset]
    header = bytearray(data[:FIRST_RECORD_OFFSET])
    struct.pack_into("<I", header, LAST_RECORD_OFFSET_OFFSET, FIRST_RECORD_OFFSET + len(body))
    atomic_write(journal, bytes(header) + body, mode=stat.S_IMODE(journal.stat().st_mode))
    log.warning("%s still held the entries before the last snapshot (the node stopped between writing the "
                "snapshot and compacting the log); compacted it from entry %d so the entries after the "
                "snapshot are kept", journal, first.index)


def _read_meta(path: Path) -> dict[str, Any] | None:
    if not path.exists() or not path.stat().st_size:
        return None
    try:
        meta = sync_pickle.loads(path.read_bytes())
    except Exception as exc:  # noqa: BLE001 - unpickling garbage raises anything
        raise damaged(path, f"unreadable: {type(exc).__name__}") from None
    if not isinstance(meta, dict) or not all(isinstance(meta.get(k, 0), int) for k in
                                             ("currentTerm", "raftCommitIndex")):
        raise damaged(path, "not a pysyncobj meta record")
    return meta


def _read_dump(path: Path) -> tuple[Record, Record]:
    """The snapshot's last applied entry and the one before it."""
    try:
        with gzip.open(path, "rb") as f:
            data = sync_pickle.load(f)
        entries = (data[2], data[1])
        return Record(-1, int(entries[0][1]), int(entries[0][2])), Record(-1, int(entries[1][1]), int(entries[1][2]))
    except Exception as exc:  # noqa: BLE001 - gzip, unpickling and indexing garbage raise anything
        raise damaged(path, f"unreadable snapshot: {type(exc).__name__}") from None


def _check_journal(path: Path, data: bytes) -> tuple[list[Record], tuple[int, str] | None]:
    """The journal's good records, and where and why the first bad one starts (None: none is bad)."""
    if len(data) < FIRST_RECORD_OFFSET or not data.startswith(APP_NAME):
        raise damaged(path, "no valid header")
    (last,) = struct.unpack_from("<I", data, LAST_RECORD_OFFSET_OFFSET)
    if last < FIRST_RECORD_OFFSET:
        raise damaged(path, f"the header points at offset {last}, before the first record")
    records: list[Record] = []
    offset = FIRST_RECORD_OFFSET
    while offset < last:
        problem = _record_problem(data, offset, last, records)
        if problem is not None:
            return records, (offset, problem)
        (size,) = struct.unpack_from("<I", data, offset)
        records.append(Record(offset, *struct.unpack_from("<QQ", data, offset + 4)))
        offset += size + 8
    return records, None


def _record_problem(data: bytes, offset: int, last: int, records: list[Record]) -> str | None:
    if offset + 4 > min(last, len(data)):
        return f"the record at offset {offset} is cut short"
    (size,) = struct.unpack_from("<I", data, offset)
    end = offset + 4 + size
    if size < 16 or end + 4 > min(last, len(data)) or struct.unpack_from("<I", data, end)[0] != size:
        return f"the record at offset {offset} is torn or corrupt"
    index = struct.unpack_from("<Q", data, offset + 4)[0]
    if records and index != records[-1].index + 1:
        return f"the record at offset {offset} has index {index} after {records[-1].index}"
    return _command_problem(offset, data[offset + 4 + 16:end])


def _command_problem(offset: int, command: bytes) -> str | None:
    if not command or command[0] != REGULAR_COMMAND:
        return None
    try:
        decoded = sync_pickle.loads(command[1:])
        args = decoded[1] if isinstance(decoded, tuple) and len(decoded) >= 2 else ()
        entry = json.loads(args[0]) if args and isinstance(args[0], str) else {}
    except Exception:  # noqa: BLE001 - unpickling garbage raises anything
        return f"the command at offset {offset} cannot be decoded"
    if not isinstance(entry, dict):
        return None
    items = entry.get("items") if entry.get("kind") == "batch" else [entry]
    for item in items if isinstance(items, list) else []:
        crc = item.get("crc") if isinstance(item, dict) else None
        if crc is None:
            continue
        events = json.dumps(item.get("events", []), separators=(",", ":"))
        if zlib.crc32(events.encode("utf-8")) != crc:
            return f"the entry at offset {offset} fails its checksum"
    return None
