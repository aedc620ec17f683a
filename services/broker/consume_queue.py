"""Consume queues: per (topic, queueId), an index of the commitlog records of that queue.

Entry layout (20 bytes, big-endian, as RocketMQ's)::

    0  8  commitLogOffset
    8  4  size
    12 8  tagsCode (a hash of the tags)

The entry for queue offset ``n`` sits at byte ``20 * n`` of ``consumequeue/<topic>/<queueId>``. Queues are
derived data: they are rebuilt from the commitlog when missing and truncated with it.

The topic is a path component, so only valid topic names become directories (a name like ``../x``
never does), loading skips directories and files whose names are not valid topics and queue ids,
and no symbolic link is followed: nothing is opened, created or truncated outside ``consumequeue/``.

At start-up :meth:`ConsumeQueueStore.verify` checks that the queues, taken together, index the
commitlog exactly: every message record once, in order, without gaps except end-of-segment padding.
From the first place where they do not (a damaged or lost entry), every entry is cut and the store
indexes the commitlog again from there.
"""

from __future__ import annotations

import errno
import heapq
import logging
import os
import shutil
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from services.broker.record import (
    BLANK_MAGICS,
    MESSAGE_MAGICS,
    MIN_BLANK,
    MIN_RECORD,
    CommitLogCorrupt,
    valid_topic,
)
from services.common.durable import fsync_dir, fsync_file, punch_hole, reserve, write_all

log = logging.getLogger(__name__)

ENTRY = struct.Struct(">qiq")
ENTRY_SIZE = ENTRY.size
# Disk blocks are reserved ahead of a queue's end (see durable.reserve): as much again as the queue
# holds, between 64 KiB and 1 MiB (~3k to ~52k entries), so a quiet queue takes little room.
RESERVE_AHEAD = (2**16, 2**20)
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
_READ_ENTRIES = 2**14  # entries read at a time by verify


def queue_file_name_ok(name: str) -> bool:
    """A queue id as the store writes it: a non-negative decimal int32 without leading zeroes."""
    return name.isdigit() and len(name) <= 10 and str(int(name)) == name and int(name) < 2**31


def tags_code(tags: str) -> int:
    return zlib.crc32(tags.encode("utf-8")) if tags else 0


@dataclass
class ConsumeQueue:
    topic: str
    queue_id: int
    path: Path
    fd: int = -1
    count: int = 0
    dirty: bool = False
    repaired: bool = False
    reserved: int = 0  # bytes from the start with disk blocks reserved (see durable.reserve)
    min_offset: int = 0  # the first entry that points into the commitlog (those below were deleted with it)
    punched: int = 0  # bytes from the start whose disk blocks were given back (see trim)

    def open(self, readonly: bool = False) -> None:
        self.fd = _open_queue_file(self.path, readonly)
        size = os.fstat(self.fd).st_size
        self.count = size // ENTRY_SIZE
        while self.count and self.get(self.count - 1) is None:  # zero-filled tail after a power loss
            self.count -= 1
        if self.count * ENTRY_SIZE != size and not readonly:  # a torn or zeroed tail: the store re-dispatches it
            os.ftruncate(self.fd, self.count * ENTRY_SIZE)
            self.repaired = True

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def put(self, queue_offset: int, phys_offset: int, size: int, tags: int) -> None:
        self.put_run(queue_offset, [(phys_offset, size, tags)])

    def put_run(self, first_offset: int, entries: list[tuple[int, int, int]]) -> None:
        """Entries for queue offsets ``first_offset``, ``first_offset + 1``, ... in one write."""
        end = (first_offset + len(entries)) * ENTRY_SIZE
        # A queue first written mid-log (a replica that started from its master's oldest data) starts there;
        # an entry re-indexed below min_offset (after damage) points into the log after all.
        if self.count == 0 or first_offset < self.min_offset:
            self.min_offset = first_offset
        if end > self.reserved:
            self.reserved = end + min(RESERVE_AHEAD[1], max(RESERVE_AHEAD[0], end))
            reserve(self.fd, self.reserved)
        write_all(self.fd, b"".join(ENTRY.pack(*e) for e in entries), first_offset * ENTRY_SIZE)
        self.count = max(self.count, first_offset + len(entries))  # only once whole: a short write counts nothing
        self.dirty = True

    def get(self, queue_offset: int) -> tuple[int, int, int] | None:
        if not 0 <= queue_offset < self.count:
            return None
        raw = os.pread(self.fd, ENTRY_SIZE, queue_offset * ENTRY_SIZE)
        if len(raw) < ENTRY_SIZE:
            return None
        phys, size, tags = ENTRY.unpack(raw)
        return (phys, size, tags) if size > 0 else None

    def entries(self, queue_offset: int, count: int) -> list[tuple[int, int, int] | None]:
        """``get`` for ``count`` queue offsets from ``queue_offset`` on (fewer past the end), in one read."""
        count = max(0, min(count, self.count - queue_offset))
        if queue_offset < 0 or count == 0:
            return []
        raw = os.pread(self.fd, count * ENTRY_SIZE, queue_offset * ENTRY_SIZE)
        found: list[tuple[int, int, int] | None] = [e if e[1] > 0 else None
                                                    for e in ENTRY.iter_unpack(raw[:len(raw) - len(raw) % ENTRY_SIZE])]
        return found + [None] * (count - len(found))  # a short read: what is missing reads as damaged

    def last_end(self) -> int:
        last = self.get(self.count - 1)
        return last[0] + last[1] if last else -1

    def truncate_to(self, count: int) -> None:
        """Keep the first ``count`` entries, durably."""
        if count < self.count:
            os.ftruncate(self.fd, count * ENTRY_SIZE)
            fsync_file(self.fd, self.path)
            self.count = count
            self.reserved = 0
            self.min_offset = min(self.min_offset, count)

    def iter_entries(self, start: int = 0) -> Iterator[tuple[int, int, int]]:
        """(commitLogOffset, size, tagsCode) of every entry from ``start``, read in blocks."""
        for first in range(start, self.count, _READ_ENTRIES):
            n = min(_READ_ENTRIES, self.count - first)
            raw = os.pread(self.fd, n * ENTRY_SIZE, first * ENTRY_SIZE)
            yield from ENTRY.iter_unpack(raw[:len(raw) - len(raw) % ENTRY_SIZE])

    def first_at_or_after(self, phys_offset: int) -> int:
        """The first queue offset whose entry points at or after ``phys_offset`` (``count`` if none): entries
        are in commitlog order, and those below the log's start read as empty once trimmed."""
        low, high = 0, self.count
        while low < high:
            mid = (low + high) // 2
            entry = self.get(mid)
            if entry is None or entry[0] < phys_offset:
                low = mid + 1
            else:
                high = mid
        return low

    def trim(self, log_min: int) -> None:
        """The commitlog now starts at ``log_min``: entries below it point at nothing. Move ``min_offset``
        past them and give their disk blocks back (the file keeps its size, so entry ``n`` stays at byte
        ``20 * n``; the last entry is kept whole, as it tells a restart how long the queue is)."""
        self.min_offset = max(self.min_offset, self.first_at_or_after(log_min))
        end = min(self.min_offset, self.count - 1) * ENTRY_SIZE
        if end > self.punched:
            punch_hole(self.fd, self.punched, end - self.punched)
            self.punched = end

    def truncate_by_phys(self, phys_offset: int) -> None:
        """Drop every entry that points at or after ``phys_offset``."""
        keep = self.count
        while keep > 0:
            entry = self.get(keep - 1)
            if entry is not None and entry[0] < phys_offset:
                break
            keep -= 1
        if keep != self.count:
            os.ftruncate(self.fd, keep * ENTRY_SIZE)  # frees the reserved blocks as well
            fsync_file(self.fd, self.path)
            self.count = keep
            self.reserved = 0
            self.min_offset = min(self.min_offset, keep)

    def flush(self) -> None:
        if self.dirty:
            self.dirty = False
            fsync_file(self.fd, self.path)


class ConsumeQueueStore:
    def __init__(self, root: Path, readonly: bool = False) -> None:
        self.root = root
        self.readonly = readonly  # for inspection (mqctl checkStore): nothing is created or changed
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.ignored: list[Path] = []  # names under root that are not topics or queue ids
        self.cut: dict[tuple[str, int], int] = {}  # by verify: queue -> entries kept

    def load(self) -> None:
        if not self.readonly:
            self.root.mkdir(parents=True, exist_ok=True)
        elif not self.root.is_dir():
            return
        for topic_dir in sorted(self.root.iterdir()):
            if topic_dir.is_symlink() or not topic_dir.is_dir() or not valid_topic(topic_dir.name):
                self._ignore(topic_dir)
                continue
            for queue_file in sorted(topic_dir.iterdir()):
                if queue_file_name_ok(queue_file.name) and not queue_file.is_symlink():
                    self._open(topic_dir.name, int(queue_file.name))
                else:
                    self._ignore(queue_file)

    def _ignore(self, path: Path) -> None:
        self.ignored.append(path)
        if not self.readonly:  # an inspection reports it instead
            log.warning("ignoring %s: not a topic directory or queue file", path)

    def _open(self, topic: str, queue_id: int) -> ConsumeQueue:
        if not valid_topic(topic) or not 0 <= queue_id < 2**31:  # never a path outside the store
            raise CommitLogCorrupt(f"refusing to index a record of topic {topic!r} queue {queue_id}")
        cq = ConsumeQueue(topic, queue_id, self.root / topic / str(queue_id))
        cq.open(self.readonly)
        self.queues[(topic, queue_id)] = cq
        return cq

    def queue(self, topic: str, queue_id: int, create: bool = False) -> ConsumeQueue | None:
        cq = self.queues.get((topic, queue_id))
        if cq is None and create:
            cq = self._open(topic, queue_id)
            fsync_dir(cq.path.parent)
            fsync_dir(self.root)
        return cq

    def dispatch(self, topic: str, queue_id: int, queue_offset: int, phys: int, size: int, tags: str) -> None:
        cq = self.queue(topic, queue_id, create=True)
        assert cq is not None
        cq.put(queue_offset, phys, size, tags_code(tags))

    def dispatch_many(self, entries: list[tuple[str, int, int, int, int, str]]) -> None:
        """Index (topic, queueId, queueOffset, phys, size, tags) entries in order, writing each run of
        consecutive queue offsets of one queue at once."""
        runs: dict[tuple[str, int], tuple[int, list[tuple[int, int, int]]]] = {}
        for topic, queue_id, queue_offset, phys, size, tags in entries:
            key = (topic, queue_id)
            run = runs.get(key)
            if run is not None and run[0] + len(run[1]) != queue_offset:
                self._write_run(key, run)
                run = None
            if run is None:
                run = runs[key] = (queue_offset, [])
            run[1].append((phys, size, tags_code(tags)))
        for key, run in runs.items():
            self._write_run(key, run)

    def _write_run(self, key: tuple[str, int], run: tuple[int, list[tuple[int, int, int]]]) -> None:
        cq = self.queue(key[0], key[1], create=True)
        assert cq is not None
        cq.put_run(run[0], run[1])
        run[1].clear()

    def verify(self, log_min: int, log_max: int, segment_size: int,
               header_at: Callable[[int], tuple[int, int]]) -> int:
        """Check that the queues index the commitlog from ``log_min`` exactly (module docstring), cut
        every entry from the first fault on, and return the offset up to which the log is indexed.
        ``header_at(offset)`` gives the (totalSize, magic) of the record there."""
        for cq in self.queues.values():  # entries below the log's start were deleted with it
            cq.min_offset = cq.first_at_or_after(log_min) if log_min > 0 else 0
        kept, indexed = _tile(self.queues, log_min, log_max, segment_size, header_at)
        self.cut = {key: kept[key] for key, cq in self.queues.items() if kept[key] < cq.count}
        if not self.readonly:  # an inspection reports the cuts instead
            for key, count in self.cut.items():
                cq = self.queues[key]
                log.warning("consume queue %s: entries from %d on do not match the commitlog (offset %d on); "
                            "indexing them again", cq.path, count, indexed)
                cq.truncate_to(count)
                cq.repaired = True
        return indexed

    def trim(self, log_min: int) -> None:
        """Every queue after the commitlog's oldest segments were deleted (ConsumeQueue.trim)."""
        for cq in self.queues.values():
            cq.trim(log_min)

    def dispatched_end(self) -> int:
        """The commitlog offset just after the last record any queue indexes (-1 if none)."""
        return max((cq.last_end() for cq in self.queues.values()), default=-1)

    def truncate(self, phys_offset: int) -> None:
        for cq in self.queues.values():
            cq.truncate_by_phys(phys_offset)

    def flush(self) -> None:
        for cq in list(self.queues.values()):  # runs on the flush thread while dispatch may add a queue
            cq.flush()

    def close(self) -> None:
        for cq in self.queues.values():
            cq.close()
        self.queues.clear()

    def destroy(self) -> None:
        """Close and delete every queue (``load`` starts afresh)."""
        self.close()
        shutil.rmtree(self.root, ignore_errors=True)
        self.ignored.clear()
        self.cut.clear()


def _tile(queues: dict[tuple[str, int], ConsumeQueue], log_min: int, log_max: int, segment_size: int,
          header_at: Callable[[int], tuple[int, int]]) -> tuple[dict[tuple[str, int], int], int]:
    """Walk every queue's entries in commitlog order while they tile the log: each starts where the
    previous one ended (or at the next segment after BLANK padding). Returns how many entries of each
    queue to keep, and the offset up to which the log is indexed."""
    kept = {key: cq.min_offset for key, cq in queues.items()}
    merged = heapq.merge(*(_checked(key, cq, log_min, log_max, segment_size) for key, cq in queues.items()))
    expected, last = log_min, None
    for phys, size, key in merged:
        if phys != expected and not _padding(expected, phys, segment_size, header_at):
            break
        kept[key] += 1
        expected, last = phys + size, (phys, size, key)
    else:  # nothing follows the last entry to check its size against: its record does
        if last is None:
            return kept, expected
        size, magic = header_at(last[0])
        if size == last[1] and magic in MESSAGE_MAGICS:
            return kept, expected
    if last is not None:  # the entry before a fault may be the wrong one (its size): redo it too
        kept[last[2]] -= 1
        expected = last[0]
    return kept, expected


def _checked(key: tuple[str, int], cq: ConsumeQueue, log_min: int, log_max: int,
             segment_size: int) -> Iterator[tuple[int, int, tuple[str, int]]]:
    """A queue's entries in order, up to the first that cannot be right on its own (not after the
    previous one, outside the log, or not placed as a record can be)."""
    prev_end = log_min
    for phys, size, _ in cq.iter_entries(cq.min_offset):
        if size < MIN_RECORD or phys < prev_end or phys + size > log_max or \
                phys % segment_size + size + MIN_BLANK > segment_size:
            return
        yield phys, size, key
        prev_end = phys + size


def _padding(expected: int, phys: int, segment_size: int, header_at: Callable[[int], tuple[int, int]]) -> bool:
    """Whether the log from ``expected`` to ``phys`` (the next segment's start) is a BLANK record."""
    if phys % segment_size or not 0 < phys - expected < segment_size:
        return False
    size, magic = header_at(expected)
    return size == phys - expected and magic in BLANK_MAGICS


def _open_queue_file(path: Path, readonly: bool = False) -> int:
    """Open (or create) ``<root>/<topic>/<queueId>`` without following a symbolic link at either level."""
    if not readonly:
        path.parent.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(path.parent, 0o755)
        except FileExistsError:
            pass
    flags = os.O_RDONLY if readonly else os.O_RDWR | os.O_CREAT
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW)
        try:
            return os.open(path.name, flags | _NOFOLLOW, 0o644, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise  # a full disk, not a damaged store: the caller tries again later
        raise CommitLogCorrupt(f"cannot open consume queue {path}: {exc.strerror} (a symbolic link is never "
                               "followed)") from exc
