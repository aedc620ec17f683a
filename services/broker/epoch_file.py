"""The epoch file: which master epoch wrote which range of the commitlog (RocketMQ's EpochFileCache).

File format (RocketMQ's ``CheckpointFile``), ``\\n``-separated lines::

    <number of entries>
    <CRC32 of the entry lines, each followed by \\n, & 0x7FFFFFFF>
    <epoch>-<startOffset>
    ...

Only start offsets are stored; an entry ends where the next begins, and the last one is open-ended
(``MAX_OFFSET``) unless a caller sets its end (e.g. to the log's max offset). Every write keeps the
previous version as ``<path>.bak`` and is durable (temp file, fsync, rename).

Reading is strict: the count and the CRC must match, every line must be an entry, epochs must increase
and start offsets must not go back. Writes are atomic, so a main file that fails this was damaged
after it was written, and the ``.bak`` (one change older) is used only when that provably loses
nothing: every entry still readable in the damaged file is in the ``.bak``, the damaged file's count
(if readable) is not larger, and the ``.bak`` has an entry if the commitlog holds data. Otherwise the
store refuses to open (:class:`EpochFileDamaged`) instead of guessing.

Differences from RocketMQ: an epoch may start at the same offset as the previous one (a master
re-elected with no new data still records its new epoch, issue #9689); writing an empty list writes an
empty file instead of silently keeping the old one; truncation resets the last end in memory too;
RocketMQ skips the CRC check when the file says 0 (its ``NOT_CHECK_CRC_MAGIC_CODE``), here the CRC is
always checked: both write the real CRC, and 0 is the real CRC of an empty list only, so a 0 on entries
means damage or forgery (a forged ``999999`` epoch would fence the broker for good).
"""

from __future__ import annotations

import itertools
import logging
import re
import zlib
from dataclasses import dataclass, replace
from pathlib import Path

from services.common.durable import atomic_write
from services.common.errors import MqctlError

log = logging.getLogger(__name__)

MAX_OFFSET = 2**63 - 1
MAX_EPOCH = 2**31 - 1
_LINE = re.compile(r"(\d{1,19})-(\d{1,19})")


class EpochFileDamaged(MqctlError):
    """The epoch file is damaged and its ``.bak`` cannot replace it without losing an entry."""


@dataclass(frozen=True)
class EpochEntry:
    epoch: int
    start_offset: int
    end_offset: int = MAX_OFFSET

    def __str__(self) -> str:
        return f"EpochEntry{{epoch={self.epoch}, startOffset={self.start_offset}, endOffset={self.end_offset}}}"


def encode_epoch_file(entries: list[EpochEntry]) -> str:
    lines = "".join(f"{e.epoch}-{e.start_offset}\n" for e in entries)
    crc = zlib.crc32(lines.encode("utf-8")) & 0x7FFFFFFF
    return f"{len(entries)}\n{crc}\n{lines}"


def decode_epoch_file(text: str) -> list[tuple[int, int]] | None:
    """Parse a file; ``None`` unless its count, CRC and every entry are valid."""
    lines = text.split("\n")
    if len(lines) < 3 or lines[-1] != "":
        return None
    try:
        count, crc = int(lines[0]), int(lines[1])
    except ValueError:
        return None
    entries = lines[2:-1]
    pairs = _readable_entries(entries)
    if len(pairs) != len(entries) or len(pairs) != count:
        return None
    body = "".join(line + "\n" for line in entries)
    if (zlib.crc32(body.encode("utf-8")) & 0x7FFFFFFF) != crc or not _ordered(pairs):
        return None
    return pairs


def _readable_entries(lines: list[str]) -> list[tuple[int, int]]:
    pairs = []
    for line in lines:
        match = _LINE.fullmatch(line)
        if match:
            pairs.append((int(match[1]), int(match[2])))
    return pairs


def _ordered(pairs: list[tuple[int, int]]) -> bool:
    if any(not (0 <= e <= MAX_EPOCH and 0 <= s <= MAX_OFFSET) for e, s in pairs):
        return False
    return all(a[0] < b[0] and a[1] <= b[1] for a, b in itertools.pairwise(pairs))


def _read_text(path: Path) -> str | None:
    """The file's text (bytes that are not UTF-8 become U+FFFD); None if it does not exist."""
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None
    except OSError:
        return ""


def _damaged_view(text: str) -> tuple[int | None, list[tuple[int, int]]]:
    """What can still be read from a damaged file: its count (if that line is a number) and every line
    that parses as an entry."""
    lines = text.split("\n")
    try:
        count: int | None = int(lines[0])
    except ValueError:
        count = None
    return count, _readable_entries(lines)  # the count and CRC lines never look like entries


class EpochFileCache:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._entries: list[EpochEntry] = []
        self._on_disk: str | None = None  # what the main file holds, as read or last written

    # ------------------------------------------------------------------ persistence
    @property
    def backup_path(self) -> Path | None:
        return None if self.path is None else self.path.with_name(self.path.name + ".bak")

    def diagnose(self, log_has_data: bool) -> tuple[bool, str] | None:
        """What :meth:`load` would make of the files, without writing: None if they read cleanly,
        (False, why) if the ``.bak`` would replace the main file or no epochs would be used, (True,
        why) if the store would refuse to open."""
        if self.path is None:
            return None
        text = _read_text(self.path)
        if text is not None and decode_epoch_file(text) is not None:
            return None
        backup_text = _read_text(self.backup_path) if self.backup_path else None
        if text is None and backup_text is None:
            return None
        backup = decode_epoch_file(backup_text) if backup_text is not None else None
        problem = self._fallback_problem(text, backup, log_has_data)
        state = "is missing" if text is None else "is damaged"
        if problem is None:
            return False, f"{state}; its .bak holds every entry still readable in it and replaces it at start"
        if backup is None and not log_has_data:
            return False, f"{state} and {problem}; the commitlog is empty, so the broker starts with no epochs"
        return True, f"{state} and {problem}; the broker refuses to start"

    def load(self, log_has_data: bool = False) -> bool:
        """Load the file. A damaged or missing main file is replaced by its ``.bak`` only when that
        loses nothing (module docstring), and is then rewritten from it. False when both are unreadable
        and the log is empty (the cache starts with no epochs); :class:`EpochFileDamaged` when both are
        unreadable and the log holds data, or when the ``.bak`` would lose an entry."""
        if self.path is None:
            return True
        text = _read_text(self.path)
        pairs = decode_epoch_file(text) if text is not None else None
        if pairs is not None:
            self._set(pairs)
            self._on_disk = text
            return True
        assert self.backup_path is not None
        backup_text = _read_text(self.backup_path)
        if text is None and backup_text is None:
            self._entries = []
            return True
        backup = decode_epoch_file(backup_text) if backup_text is not None else None
        problem = self._fallback_problem(text, backup, log_has_data)
        if problem is not None and backup is None and not log_has_data:
            log.error("epoch file %s and its .bak are both unreadable; the commitlog is empty, so starting "
                      "with no epochs", self.path)
            self._entries = []
            return False
        if problem is not None:
            state = "is missing" if text is None else "is damaged"
            raise EpochFileDamaged(
                f"epoch file {self.path} {state} and {problem}; refusing to guess the epoch history. See "
                "docs/operations.md, 'Damaged epoch file'")
        assert backup is not None
        self._set(backup)
        what = "is missing" if text is None else "is damaged (count, CRC or an entry does not match)"
        log.error("epoch file %s %s; using %s, which holds every entry still readable in it: %s", self.path,
                  what, self.backup_path, self.entries())
        self._write_main()
        return True

    @staticmethod
    def _fallback_problem(text: str | None, backup: list[tuple[int, int]] | None,
                          log_has_data: bool) -> str | None:
        """Why the .bak cannot stand in for the damaged main file (None: it can)."""
        if backup is None:
            return "its .bak is missing or damaged too"
        if log_has_data and not backup:
            return "its .bak holds no epoch, but the commitlog holds data"
        if text is None:
            return None
        count, readable = _damaged_view(text)
        missing = [p for p in readable if p not in backup]
        if missing:
            return f"it still shows entries its .bak lacks: {', '.join(f'{e}-{s}' for e, s in missing[:5])}"
        if count is not None and count > len(backup):
            return f"it held {count} entries and its .bak only {len(backup)}"
        return None

    def _write_main(self) -> None:
        assert self.path is not None
        text = encode_epoch_file(self._entries)
        atomic_write(self.path, text)
        self._on_disk = text

    def _commit(self, entries: list[EpochEntry]) -> None:
        """Make ``entries`` the list, on disk first: if the disk refuses the write (OSError), the list stays
        what it was, so the cache never holds an epoch its file lacks."""
        before, self._entries = self._entries, entries
        try:
            self._flush()
        except OSError:
            self._entries = before
            raise

    def _flush(self) -> None:
        if self.path is None:
            return
        assert self.backup_path is not None
        previous = self._on_disk
        if previous is None and self.path.exists():  # a cache that never read the file
            previous = self.path.read_bytes().decode("utf-8", errors="replace")
        if previous is not None:
            atomic_write(self.backup_path, previous)
        self._write_main()

    def _set(self, pairs: list[tuple[int, int]]) -> None:
        entries = []
        for i, (epoch, start) in enumerate(pairs):
            end = pairs[i + 1][1] if i + 1 < len(pairs) else MAX_OFFSET
            entries.append(EpochEntry(epoch, start, end))
        self._entries = entries

    def init_from_entries(self, entries: list[EpochEntry]) -> None:
        self._set([(e.epoch, e.start_offset) for e in entries])
        if entries and entries[-1].end_offset != MAX_OFFSET:
            self.set_last_end(entries[-1].end_offset)
        self._flush()

    # ------------------------------------------------------------------ queries
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def last_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else -1

    def last_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    def first_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def get(self, epoch: int) -> EpochEntry | None:
        return next((e for e in self._entries if e.epoch == epoch), None)

    def next_entry(self, epoch: int) -> EpochEntry | None:
        return next((e for e in self._entries if e.epoch > epoch), None)

    def find_by_offset(self, offset: int) -> EpochEntry | None:
        """The entry with start <= offset < end (empty epochs never match)."""
        return next((e for e in self._entries if e.start_offset <= offset < e.end_offset), None)

    def find_consistent_point(self, other: EpochFileCache) -> int:
        """Walk this cache's epochs newest first; at the first epoch the other cache has with the same
        start offset, the logs agree up to the smaller of the two ends. -1 if there is none."""
        theirs = {e.epoch: e for e in other.entries()}
        for mine in reversed(self._entries):
            match = theirs.get(mine.epoch)
            if match is not None and match.start_offset == mine.start_offset:
                return min(mine.end_offset, match.end_offset)
        return -1

    # ------------------------------------------------------------------ updates
    def append(self, epoch: int, start_offset: int) -> bool:
        """Append a new epoch; epochs must strictly increase and start offsets must not go back."""
        last = self.last_entry()
        if last is not None and (epoch <= last.epoch or start_offset < last.start_offset):
            return False
        entries = self.entries()
        if last is not None:
            entries[-1] = replace(last, end_offset=start_offset)
        self._commit([*entries, EpochEntry(epoch, start_offset)])
        return True

    def set_last_end(self, end_offset: int) -> None:
        last = self.last_entry()
        if last is not None and last.start_offset <= end_offset:
            self._entries[-1] = replace(last, end_offset=end_offset)

    def truncate_suffix_by_epoch(self, epoch: int) -> None:
        self._truncate_suffix(lambda e: e.epoch >= epoch)

    def truncate_suffix_by_offset(self, offset: int) -> None:
        self._truncate_suffix(lambda e: e.start_offset >= offset)

    def _truncate_suffix(self, drop: object) -> None:
        kept = [e for e in self._entries if not drop(e)]  # type: ignore[operator]
        if len(kept) == len(self._entries):
            return
        if kept:
            kept[-1] = replace(kept[-1], end_offset=MAX_OFFSET)
        self._commit(kept)

    def truncate_prefix_by_offset(self, offset: int) -> None:
        kept = [e for e in self._entries if e.end_offset > offset]
        if len(kept) != len(self._entries):
            self._commit(kept)
