"""Consume queues: per (topic, queueId), an index of the commitlog records of that queue.

Entry layout (20 bytes, big-endian, as RocketMQ's)::

    0  8  commitLogOffset
    8  4  size
    12 8  tagsCode (a hash of the tags)

The entry for queue offset ``n`` sits at byte ``20 * n`` of ``consumequeue/<topic>/<queueId>``. Queues are
derived data: they are rebuilt from the commitlog when missing and truncated with it.
"""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from services.common.durable import fsync_dir, reserve

ENTRY = struct.Struct(">qiq")
ENTRY_SIZE = ENTRY.size
# Disk blocks are reserved ahead of a queue's end (see durable.reserve): as much again as the queue
# holds, between 64 KiB and 1 MiB (~3k to ~52k entries), so a quiet queue takes little room.
RESERVE_AHEAD = (2**16, 2**20)


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

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        size = os.fstat(self.fd).st_size
        self.count = size // ENTRY_SIZE
        while self.count and self.get(self.count - 1) is None:  # zero-filled tail after a power loss
            self.count -= 1
        if self.count * ENTRY_SIZE != size:  # a torn or zeroed tail: cut it; the store re-dispatches it
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
        if end > self.reserved:
            self.reserved = end + min(RESERVE_AHEAD[1], max(RESERVE_AHEAD[0], end))
            reserve(self.fd, self.reserved)
        os.pwrite(self.fd, b"".join(ENTRY.pack(*e) for e in entries), first_offset * ENTRY_SIZE)
        self.count = max(self.count, first_offset + len(entries))
        self.dirty = True

    def get(self, queue_offset: int) -> tuple[int, int, int] | None:
        if not 0 <= queue_offset < self.count:
            return None
        raw = os.pread(self.fd, ENTRY_SIZE, queue_offset * ENTRY_SIZE)
        if len(raw) < ENTRY_SIZE:
            return None
        phys, size, tags = ENTRY.unpack(raw)
        return (phys, size, tags) if size > 0 else None

    def last_end(self) -> int:
        last = self.get(self.count - 1)
        return last[0] + last[1] if last else -1

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
            os.fsync(self.fd)
            self.count = keep
            self.reserved = 0

    def flush(self) -> None:
        if self.dirty:
            self.dirty = False
            os.fsync(self.fd)


class ConsumeQueueStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}

    def load(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for topic_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
            for queue_file in sorted(p for p in topic_dir.iterdir() if p.name.isdigit()):
                self._open(topic_dir.name, int(queue_file.name))

    def _open(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = ConsumeQueue(topic, queue_id, self.root / topic / str(queue_id))
        cq.open()
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
        self.close()
        shutil.rmtree(self.root, ignore_errors=True)
