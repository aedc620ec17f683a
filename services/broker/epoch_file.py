"""The epoch file: which master epoch wrote which range of the commitlog (RocketMQ's EpochFileCache).

File format (RocketMQ's ``CheckpointFile``), ``\\n``-separated lines::

    <number of entries>
    <CRC32 of the entry lines, each followed by \\n, & 0x7FFFFFFF>
    <epoch>-<startOffset>
    ...

Only start offsets are stored; an entry ends where the next begins, and the last one is open-ended
(``MAX_OFFSET``) unless a caller sets its end (e.g. to the log's max offset). Every write keeps the
previous file as ``<path>.bak`` and is durable (temp file, fsync, rename). A main file whose count or
CRC does not match falls back to the ``.bak``.

Differences from RocketMQ: an epoch may start at the same offset as the previous one (a master
re-elected with no new data still records its new epoch, issue #9689); writing an empty list writes an
empty file instead of silently keeping the old one; truncation resets the last end in memory too.
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass, replace
from pathlib import Path

from services.common.durable import atomic_write

log = logging.getLogger(__name__)

MAX_OFFSET = 2**63 - 1


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
    """Parse a file; ``None`` if its count or CRC does not match (or it is unreadable)."""
    lines = text.split("\n")
    if len(lines) < 2:
        return None
    try:
        count, crc = int(lines[0].strip()), int(lines[1].strip())
    except ValueError:
        return None
    pairs, body = [], ""
    for line in lines[2:]:
        parts = line.strip().split("-")
        if len(parts) != 2:
            continue
        try:
            pairs.append((int(parts[0]), int(parts[1])))
        except ValueError:
            continue
        body += f"{parts[0]}-{parts[1]}\n"
    if len(pairs) != count:
        return None
    if crc != 0 and (zlib.crc32(body.encode("utf-8")) & 0x7FFFFFFF) != crc:
        return None
    return pairs


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


class EpochFileCache:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._entries: list[EpochEntry] = []

    # ------------------------------------------------------------------ persistence
    @property
    def backup_path(self) -> Path | None:
        return None if self.path is None else self.path.with_name(self.path.name + ".bak")

    def load(self) -> bool:
        """Load from the file (or its .bak); returns False if neither holds a valid list."""
        if self.path is None:
            return True
        for candidate in (self.path, self.backup_path):
            assert candidate is not None
            pairs = decode_epoch_file(_read_text(candidate)) if candidate.exists() else None
            if pairs is None and candidate.exists():
                log.warning("epoch file %s is damaged (count or CRC mismatch)", candidate)
            if pairs:
                self._set(pairs)
                return True
            if pairs == [] and candidate == self.path:
                self._entries = []
                return True
        self._entries = []
        return not self.path.exists()

    def _flush(self) -> None:
        if self.path is None:
            return
        assert self.backup_path is not None
        if self.path.exists():
            atomic_write(self.backup_path, self.path.read_bytes())
        atomic_write(self.path, encode_epoch_file(self._entries))

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
        if last is not None:
            self._entries[-1] = replace(last, end_offset=start_offset)
        self._entries.append(EpochEntry(epoch, start_offset))
        self._flush()
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
        self._entries = kept
        self._flush()

    def truncate_prefix_by_offset(self, offset: int) -> None:
        kept = [e for e in self._entries if e.end_offset > offset]
        if len(kept) != len(self._entries):
            self._entries = kept
            self._flush()
