"""The commitlog: append-only segment files addressed by a global physical offset.

Segment files are named by their 20-digit start offset (as RocketMQ's ``00000000000000000000``) and
hold ``segment_size`` bytes at most. A record never spans two segments: when the next record does not
fit, the rest of the segment is filled with a BLANK record and the record goes to the next segment.
Replicas write the same bytes at the same offsets, so their files are byte-identical. The record
layout and its checks are in :mod:`services.broker.record`.

Recovery tells a torn tail from damage. A torn tail is what a crash leaves: the last write incomplete,
or (after a power loss with ASYNC_FLUSH) zeroes or garbage where unflushed bytes were. It is a bad
record after which nothing valid follows, in its segment or any later one, and that lies beyond what
the checkpoint says was flushed; it is cut. Anything else (a bad record followed by valid ones, a bad
record in flushed data, a log shorter than what was flushed) is damage: opening stops with
:class:`CommitLogCorrupt` naming the file and offset, and nothing is deleted. Older segments are not
scanned at start; their records are checked when read (and by ``mqctl checkStore``).
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.broker.record import (
    BLANK_MAGIC,
    BLANK_MAGICS,
    HEAD_SIZE,
    LEGACY_MESSAGE_MAGIC,
    MESSAGE_MAGIC,
    MESSAGE_MAGICS,
    MIN_BLANK,
    ROCKETMQ_BLANK_MAGIC,
    Blank,
    CommitLogCorrupt,
    CommitLogError,
    IndexEntry,
    InvalidRecord,
    MessageRecord,
    NewRecord,
    Parsed,
    RawRecord,
    StoreNotWritable,
    blank_header,
    check_chunk,
    check_lengths,
    check_record,
    decode_index,
    decode_properties,
    decode_record,
    encode,
    encode_properties,
    encode_record,
    encode_rocketmq,
    index_entry,
    message_of,
    peek,
    record_size,
    rocketmq_record_size,
)
from services.common.durable import allocate, fsync_dir, fsync_file, reserve, write_all

__all__ = [  # the record names are re-exported: callers import them from here
    "BLANK_MAGIC", "LEGACY_MESSAGE_MAGIC", "MESSAGE_MAGIC", "MIN_BLANK", "Blank", "CommitLog",
    "CommitLogCorrupt", "CommitLogError", "Damage", "IndexEntry", "InvalidRecord", "MessageRecord",
    "NewRecord", "RawRecord", "StoreNotWritable", "decode_index", "decode_properties", "decode_record", "encode_properties",
    "encode_record", "record_size",
]

log = logging.getLogger(__name__)

RECOVER_SEGMENTS = 3
_ANY_MAGIC = re.compile(b"(?=" + b"|".join(re.escape(m.to_bytes(4, "big")) for m in
                                           sorted(MESSAGE_MAGICS | BLANK_MAGICS)) + b")")


@dataclass(frozen=True)
class Damage:
    """A place where the log is not what it should be (``mqctl checkStore`` lists them). ``torn``: a torn
    tail, which recovery cuts at the next start; anything else stops the broker or a consumer."""
    path: Path
    offset: int
    reason: str
    torn: bool = False

    def __str__(self) -> str:
        return f"{self.path}: offset {self.offset}: {self.reason}"


@dataclass
class _Segment:
    start: int
    path: Path
    fd: int
    length: int = 0
    dirty: bool = False


@dataclass
class CommitLog:
    directory: Path
    segment_size: int = 64 * 2**20
    segments: list[_Segment] = field(default_factory=list)
    flushed_offset: int = 0
    reserve_blocks: bool = True  # reserve each segment's disk blocks (durable.reserve); off only to measure it
    #: Write RocketMQ's record layout (``rocketmqHaPeers``), with this broker's IPv4 address and port as
    #: every record's storeHost; reading takes both layouts whatever this says.
    rocketmq_format: bool = False
    store_host: bytes = bytes(8)

    # ------------------------------------------------------------------ lifecycle
    def open(self, flushed: int = 0, recover: bool = True) -> None:
        """Open the segments and recover the tail. ``flushed``: an offset known to have been fsynced
        (from the checkpoint), below which nothing may be cut. ``recover=False`` opens as it is (for
        read-only inspection)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        names = sorted(p for p in self.directory.iterdir() if p.name.isdigit() and len(p.name) == 20)
        for path in names:
            fd = os.open(path, (os.O_RDWR if recover else os.O_RDONLY) | os.O_NOFOLLOW)
            self.segments.append(_Segment(int(path.name), path, fd, os.fstat(fd).st_size))
        for prev, nxt in zip(self.segments, self.segments[1:]):
            if nxt.start != prev.start + self.segment_size:
                raise CommitLogError(f"commitlog segment {nxt.path.name} does not follow {prev.path.name} "
                                     f"(segment size {self.segment_size}); was mappedFileSizeCommitLog changed?")
        if not recover:
            return
        try:
            self._recover(flushed)
        except BaseException:
            self.close_files()
            raise
        if self.segments:
            self._reserve(self.segments[-1].fd)
        self.flushed_offset = self.max_offset

    def close_files(self) -> None:
        """Close every segment without flushing (also after a failed open)."""
        for seg in self.segments:
            os.close(seg.fd)
        self.segments.clear()

    def close(self) -> None:
        self.flush()
        self.close_files()

    # ------------------------------------------------------------------ offsets
    @property
    def min_offset(self) -> int:
        return self.segments[0].start if self.segments else 0

    @property
    def max_offset(self) -> int:
        if not self.segments:
            return 0
        last = self.segments[-1]
        return last.start + last.length

    # ------------------------------------------------------------------ writing
    def append_message(self, topic: str, queue_id: int, queue_offset: int, timestamp: int,
                       properties: dict[str, str], body: bytes) -> tuple[int, int]:
        """Append one record (padding the segment first if needed); returns (offset, size)."""
        return self.append_batch([NewRecord(topic, queue_id, queue_offset, timestamp, properties, body)])[0]

    def append_batch(self, records: list[NewRecord]) -> list[tuple[int, int]]:
        """Append records in order with one write per segment touched (padding segment ends as
        needed); returns each record's (offset, size). Every record is checked before anything is
        written, so a bad one leaves the log unchanged."""
        encoded = []
        for r in records:
            topic_b, props_b = r.topic.encode("utf-8"), encode_properties(r.properties)
            check_lengths(topic_b, props_b)
            size = (rocketmq_record_size(r.topic, r.properties, len(r.body)) if self.rocketmq_format
                    else HEAD_SIZE + len(topic_b) + 2 + len(props_b) + 4 + len(r.body))
            if size + MIN_BLANK > self.segment_size:
                raise CommitLogError(f"record of {size} bytes does not fit in a {self.segment_size}-byte segment")
            encoded.append((topic_b, props_b, size))
        start = offset = self.max_offset
        parts: list[bytes] = []
        placed: list[tuple[int, int]] = []
        for r, (topic_b, props_b, size) in zip(records, encoded):
            used = offset % self.segment_size
            if used + size + MIN_BLANK > self.segment_size:
                pad = self.segment_size - used
                parts.append(blank_header(pad, ROCKETMQ_BLANK_MAGIC if self.rocketmq_format else BLANK_MAGIC)
                             + bytes(pad - MIN_BLANK))
                offset += pad
            if self.rocketmq_format:
                parts.append(encode_rocketmq(topic_b, r.properties, r.queue_id, r.queue_offset, offset, r.timestamp,
                                             r.body, self.store_host))
            else:
                parts.append(encode(topic_b, props_b, r.queue_id, r.queue_offset, offset, r.timestamp, r.body))
            placed.append((offset, size))
            offset += size
        self.write_at(start, b"".join(parts))
        return placed

    def check_chunk(self, offset: int, data: bytes, queue_nums: int, max_body: int) -> list[IndexEntry]:
        """Check bytes received from a peer before any is written (:func:`record.check_chunk`), and that
        they continue this log; raises :class:`InvalidRecord`."""
        if offset != self.max_offset and not (self.max_offset == self.min_offset
                                              and offset % self.segment_size == 0):
            raise InvalidRecord(f"data for offset {offset}, but this log ends at {self.max_offset}", offset)
        return check_chunk(offset, data, self.segment_size, queue_nums, max_body)

    def write_at(self, offset: int, data: bytes) -> None:
        """Write raw bytes at the end of the log (offset must equal max_offset); used by replicas too.

        All or nothing, and nothing shows until all of it is written: every new segment the write needs is
        created first with the disk blocks of its full size reserved, the bytes are written while the log's
        lengths still say what they said, and only then do the lengths move (so a flush, a read or a replica
        never sees part of a write). A write the disk refuses (StoreNotWritable) leaves the log as it was,
        the bytes it put down past the log's end cut off and the new segments removed: no torn record."""
        if offset != self.max_offset:
            if self.max_offset == self.min_offset and offset % self.segment_size == 0:
                self._reset_empty(offset)  # an empty replica starting at the master's oldest data
            else:
                raise CommitLogError(f"write at {offset} but the commitlog ends at {self.max_offset}")
        fresh = self._new_segments(offset, len(data))
        plan = self._plan(offset, len(data), fresh)
        view = memoryview(data)
        for seg, at, lo, hi in plan:
            try:
                write_all(seg.fd, view[lo:hi], at)
            except OSError as exc:
                self._undo(fresh)
                raise StoreNotWritable(seg.path, exc) from exc
        for seg, _, lo, hi in plan:
            seg.dirty = True  # before the length: a flush that sees the new end must also fsync it
            seg.length += hi - lo
        self.segments.extend(fresh)

    def _plan(self, offset: int, size: int, fresh: list[_Segment]) -> list[tuple[_Segment, int, int, int]]:
        """Where each part of a write goes: (segment, offset in its file, start and end in the data)."""
        last = self.segments[-1] if self.segments else None
        targets = ([last] if last is not None and last.start + last.length == offset
                   and last.length < self.segment_size else []) + fresh
        plan, pos = [], 0
        for seg in targets:
            at = offset + pos - seg.start
            if at != (seg.length if seg is last else 0):
                raise CommitLogError(f"no segment holds offset {offset + pos}")
            end = min(size, pos + self.segment_size - at)
            plan.append((seg, at, pos, end))
            pos = end
        if pos != size:
            raise CommitLogError(f"no segment holds offset {offset + pos}")
        return plan

    def _new_segments(self, offset: int, size: int) -> list[_Segment]:
        """Create the segments a write of ``size`` bytes at ``offset`` needs beyond the last one, each with the
        disk blocks of its full size reserved; if the disk cannot hold one, none is left (StoreNotWritable)."""
        fresh: list[_Segment] = []
        at = offset
        while at < offset + size:
            start = at - at % self.segment_size
            last = self.segments[-1] if self.segments else None
            if last is None or start != last.start:
                path = self.directory / f"{start:020d}"
                try:
                    fresh.append(self._create(path, start))
                except OSError as exc:
                    self._discard(fresh)
                    raise StoreNotWritable(path, exc) from exc
            at = start + self.segment_size
        return fresh

    def _create(self, path: Path, start: int) -> _Segment:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        try:
            if self.reserve_blocks:
                allocate(fd, self.segment_size)
            fsync_dir(self.directory)
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        return _Segment(start, path, fd)

    def _discard(self, segments: list[_Segment]) -> None:
        """Remove segments created for a write that did not happen (a crash meanwhile leaves only empty files
        after the log's end, which recovery cuts)."""
        for seg in segments:
            with contextlib.suppress(OSError):  # a leftover empty file past the log's end is harmless
                os.close(seg.fd)
                seg.path.unlink(missing_ok=True)
        if segments:
            with contextlib.suppress(OSError):
                fsync_dir(self.directory)
        segments.clear()

    def _undo(self, fresh: list[_Segment]) -> None:
        """After a write the disk refused: cut what it put down past the last segment's end, and remove the
        segments it created (the log itself never showed any of it)."""
        self._discard(fresh)
        if not self.segments:
            return
        last = self.segments[-1]
        try:
            if os.fstat(last.fd).st_size > last.length:
                os.ftruncate(last.fd, last.length)
                self._reserve(last.fd)
        except OSError as exc:
            log.warning("could not cut %s back to %d bytes after a failed write (%s); the next start cuts it",
                        last.path, last.length, exc.strerror or exc)

    def _reset_empty(self, offset: int) -> None:
        for seg in self.segments:
            os.close(seg.fd)
            seg.path.unlink()
        self.segments.clear()
        self.flushed_offset = offset

    def _reserve(self, fd: int) -> None:
        if self.reserve_blocks:
            reserve(fd, self.segment_size)

    def flush(self) -> int:
        """fsync every segment written since the last flush; returns the offset now durable."""
        target = self.max_offset
        for seg in list(self.segments):
            if seg.dirty:
                seg.dirty = False
                fsync_file(seg.fd, seg.path)
        self.flushed_offset = max(self.flushed_offset, target)
        return target

    # ------------------------------------------------------------------ reading
    def read(self, offset: int, size: int) -> bytes:
        """Bytes [offset, offset+size) clipped to the log's end; never crosses a segment."""
        seg = self._segment_containing(offset)
        if seg is None:
            return b""
        size = min(size, seg.start + seg.length - offset)
        return os.pread(seg.fd, size, offset - seg.start) if size > 0 else b""

    def _segment_containing(self, offset: int) -> _Segment | None:
        index = bisect.bisect_right([seg.start for seg in self.segments], offset) - 1
        if index < 0:
            return None
        seg = self.segments[index]
        return seg if offset < seg.start + seg.length else None

    def path_of(self, offset: int) -> Path:
        """The segment file that holds (or would hold) ``offset``."""
        return self.directory / f"{offset - offset % self.segment_size:020d}"

    def header_at(self, offset: int) -> tuple[int, int]:
        """(totalSize, magic) of the record at ``offset``; (0, 0) beyond the end."""
        head = self.read(offset, MIN_BLANK)
        return peek(head, 0) if len(head) == MIN_BLANK else (0, 0)

    def read_record(self, offset: int) -> MessageRecord | None:
        """The message at ``offset`` (skipping nothing); ``None`` if there is none."""
        rec = self.check_at(offset)
        return rec if isinstance(rec, MessageRecord) else None

    def check_at(self, offset: int) -> MessageRecord | str:
        """The message at ``offset``, or why there is none (damage is named, not hidden)."""
        found = self.check_raw_at(offset)
        return found if isinstance(found, str) else message_of(found.buf, found.parsed, offset)

    def check_raw_at(self, offset: int, size: int = HEAD_SIZE) -> RawRecord | str:
        """The checked record at ``offset``, not decoded, or why there is none. ``size`` is what to read first:
        a consume queue entry's size reads a record in one go; when the record says another size (or
        ``size`` is only its header's), it is read again at the size it says."""
        buf = self.read(offset, max(size, MIN_BLANK))
        if len(buf) < MIN_BLANK:
            return "no record there (beyond the end of the log)"
        total, magic = peek(buf, 0)
        if magic in BLANK_MAGICS:
            return "end-of-segment padding, not a message"
        if total != len(buf):
            room = self.segment_size - offset % self.segment_size
            buf = self.read(offset, min(max(total, MIN_BLANK), room))
        r = check_record(buf, 0, offset)
        if isinstance(r, Parsed):
            return RawRecord(buf, r, offset)
        return r if isinstance(r, str) else "not a message"

    def iter_records(self, start: int, end: int | None = None) -> list[MessageRecord]:
        """Every message with start <= offset < end (blank padding skipped). A damaged record on the
        way raises :class:`CommitLogCorrupt`."""
        return self._walk(start, end, message_of)

    def iter_index(self, start: int, end: int | None = None) -> list[IndexEntry]:
        """Like :meth:`iter_records`, but only what a consume queue needs (the body is checked against
        the CRC, not copied): (topic, queueId, queueOffset, physicalOffset, size, tags)."""
        return self._walk(start, end, index_entry)

    def _walk(self, start: int, end: int | None, make: Callable[[memoryview, Parsed, int], Any]) -> list[Any]:
        end = self.max_offset if end is None else min(end, self.max_offset)
        result: list[Any] = []
        offset = start
        while offset < end:
            seg = self._segment_containing(offset)
            if seg is None:
                break
            stop = min(seg.start + seg.length, end)
            buf = memoryview(self.read(offset, stop - offset))
            pos = 0
            while pos < len(buf):
                at = offset + pos
                r = check_record(buf, pos, at)
                if isinstance(r, Blank):
                    if at + r.size != seg.start + self.segment_size:
                        raise self._corrupt(at, "BLANK record does not end at the segment end")
                    pos = len(buf)
                elif isinstance(r, Parsed):
                    result.append(make(buf, r, at))
                    pos += r.total
                elif stop < seg.start + seg.length and self._straddles(at, stop):
                    return result  # a whole record that ends past ``end``
                else:
                    raise self._corrupt(at, r)
            offset += pos
        return result

    def _straddles(self, at: int, stop: int) -> bool:
        total = self.header_at(at)[0]
        return at + total > stop and isinstance(check_record(self.read(at, max(total, 0)), 0, at), Parsed)

    def _corrupt(self, offset: int, reason: str) -> CommitLogCorrupt:
        path = self.path_of(offset)
        return CommitLogCorrupt(
            f"commitlog file {path} is damaged at offset {offset}: {reason}. Nothing was removed; see "
            f"docs/operations.md, 'Damaged commitlog' (mqctl checkStore --store-dir lists all damage)",
            str(path), offset)

    def aligned_chunk(self, offset: int, max_bytes: int, limit: int | None = None) -> bytes:
        """Whole records (or padding) starting at ``offset``, at most ``max_bytes`` unless a single
        record is larger, stopping at ``limit`` and at the segment end."""
        end = self.max_offset if limit is None else min(limit, self.max_offset)
        seg = self._segment_containing(offset)
        if seg is None or offset >= end:
            return b""
        buf = self.read(offset, min(seg.start + seg.length, end) - offset)
        pos = 0
        while pos < len(buf):
            total, magic = peek(buf, pos) if len(buf) - pos >= MIN_BLANK else (0, 0)
            if total <= 0 or pos + total > len(buf) or (magic not in MESSAGE_MAGICS and magic not in BLANK_MAGICS):
                break
            if pos > 0 and pos + total > max_bytes:
                break
            pos += total
        return buf[:pos]

    # ------------------------------------------------------------------ retention
    def segment_spans(self) -> list[tuple[int, int, int]]:
        """(start, end, last-modified ms) of every segment, oldest first."""
        return [(seg.start, seg.start + seg.length, os.fstat(seg.fd).st_mtime_ns // 1_000_000)
                for seg in self.segments]

    def delete_head(self, count: int) -> int:
        """Delete the ``count`` oldest segments, oldest first (so the rest stay contiguous whatever a crash
        interrupts), durably; never the last segment, nor one not yet fsynced. Returns the new min offset."""
        for _ in range(min(count, len(self.segments) - 1)):
            seg = self.segments[0]
            if seg.dirty:
                break
            self.segments.pop(0)
            os.close(seg.fd)
            seg.path.unlink()
        fsync_dir(self.directory)
        return self.min_offset

    # ------------------------------------------------------------------ truncation
    def truncate(self, offset: int) -> None:
        """Durably cut the log at ``offset``: later segments are deleted, the containing one is
        truncated and fsynced (RocketMQ issue #10666: a truncation must survive a crash)."""
        if offset >= self.max_offset:
            return
        if offset < self.min_offset:
            raise CommitLogError(f"cannot truncate to {offset}: below the oldest data ({self.min_offset})")
        while len(self.segments) > 1 and self.segments[-1].start >= offset:
            seg = self.segments.pop()
            os.close(seg.fd)
            seg.path.unlink()
        seg = self.segments[-1]
        new_length = offset - seg.start
        if new_length < seg.length:
            os.ftruncate(seg.fd, new_length)  # frees the reserved blocks past new_length too
            fsync_file(seg.fd, seg.path)
            seg.length = new_length
            self._reserve(seg.fd)
        fsync_dir(self.directory)
        self.flushed_offset = min(self.flushed_offset, offset)

    # ------------------------------------------------------------------ recovery and checking
    def _recover(self, flushed: int) -> None:
        if not self.segments:
            return
        if self.max_offset < flushed:
            last = self.segments[-1]
            raise CommitLogCorrupt(
                f"the commitlog ends at offset {self.max_offset}, but the checkpoint says {flushed} bytes had "
                f"been flushed to disk: {last.path} (or a later segment) lost data. Nothing was removed; see "
                "docs/operations.md, 'Damaged commitlog'", str(last.path), self.max_offset)
        first = max(0, len(self.segments) - RECOVER_SEGMENTS)
        for seg in self.segments[:first]:
            if seg.length != self.segment_size:
                raise self._corrupt(seg.start + min(seg.length, self.segment_size),
                                    f"the file holds {seg.length} bytes instead of {self.segment_size}")
        for i in range(first, len(self.segments)):
            seg = self.segments[i]
            data = os.pread(seg.fd, seg.length, 0)
            end, reason = self._scan(seg, data)
            if reason is None and (end == self.segment_size or i == len(self.segments) - 1):
                continue
            self._repair_tail(i, data, end, reason or "the segment ends early but later segments exist",
                              flushed)
            return

    def _scan(self, seg: _Segment, data: bytes, pos: int = 0) -> tuple[int, str | None]:
        """Where the segment's valid records (from ``pos``) end, and why they end there (None: a
        clean end)."""
        if len(data) > self.segment_size:
            return self.segment_size, f"the file is longer than mappedFileSizeCommitLog {self.segment_size}"
        while pos < len(data):
            r = check_record(data, pos, seg.start + pos)
            if isinstance(r, str):
                return pos, r
            if isinstance(r, Blank):
                if pos + r.size != self.segment_size:
                    return pos, "BLANK record does not end at the segment end"
                if len(data) < self.segment_size:
                    return pos, "incomplete BLANK record"
                return self.segment_size, None
            if pos + r.total + MIN_BLANK > self.segment_size:
                return pos, "record crosses the segment end"
            pos += r.total
        return pos, None

    def _repair_tail(self, index: int, data: bytes, end: int, reason: str, flushed: int) -> None:
        """Cut a torn tail at ``end`` of segment ``index``, or refuse if it is damage (see module doc)."""
        seg = self.segments[index]
        bad = seg.start + end
        if bad < flushed:
            raise self._corrupt(bad, f"{reason}, in data that had been flushed to disk (up to {flushed})")
        after = self._valid_after(index, data, end)
        if after is not None:
            raise self._corrupt(bad, f"{reason}; valid records follow at offset {after}, so this is not an "
                                     "incomplete last write")
        log.warning("commitlog recovery: cutting a torn tail at offset %d in %s (%s; the log ended at %d)",
                    bad, seg.path, reason, self.max_offset)
        self.truncate(bad)

    def _valid_after(self, index: int, data: bytes, end: int) -> int | None:
        seg = self.segments[index]
        found = self._resync(data, seg.start, end + 1)
        if found is not None:
            return seg.start + found
        for later in self.segments[index + 1:]:
            found = self._resync(os.pread(later.fd, later.length, 0), later.start, 0)
            if found is not None:
                return later.start + found
        return None

    def _resync(self, data: bytes, start: int, frm: int) -> int | None:
        """The first position >= ``frm`` where a valid record (or a BLANK that ends the full segment)
        starts: evidence that the bytes before it are not simply the end of the log."""
        for match in _ANY_MAGIC.finditer(data, max(frm + 4, 4)):
            pos = match.start() - 4
            r = check_record(data, pos, start + pos)
            if isinstance(r, Parsed) or (isinstance(r, Blank) and pos + r.size == self.segment_size
                                         and len(data) == self.segment_size):
                return pos
        return None

    def scrub(self, flushed: int = 0) -> Iterator[Damage]:
        """Every damaged place of every segment (reads the whole log; for ``mqctl checkStore``).
        ``flushed`` as for :meth:`open`."""
        first = max(0, len(self.segments) - RECOVER_SEGMENTS)
        for i, seg in enumerate(self.segments):
            data = os.pread(seg.fd, seg.length, 0)
            pos = 0
            while True:
                end, reason = self._scan(seg, data, pos)
                if reason is None and (end == self.segment_size or i == len(self.segments) - 1):
                    break
                torn = i >= first and seg.start + end >= flushed and self._valid_after(i, data, end) is None
                yield Damage(seg.path, seg.start + end, reason or "the segment ends before its end", torn)
                found = self._resync(data, seg.start, end + 1)
                if found is None:
                    break
                pos = found
