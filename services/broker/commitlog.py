"""The commitlog: append-only segment files addressed by a global physical offset.

Segment files are named by their 20-digit start offset (as RocketMQ's ``00000000000000000000``) and
hold ``segment_size`` bytes at most. A record never spans two segments: when the next record does not
fit, the rest of the segment is filled with a BLANK record and the record goes to the next segment.
Replicas write the same bytes at the same offsets, so their files are byte-identical.

Record layout (big-endian)::

    0      4   totalSize        whole record, this field included
    4      4   magic            MESSAGE_MAGIC, or BLANK_MAGIC for end-of-segment padding
    8      4   bodyCRC          zlib.crc32(body)
    12     4   queueId
    16     8   queueOffset
    24     8   physicalOffset   offset of this record in the commitlog
    32     8   storeTimestamp   milliseconds
    40     1   topicLength      T (topic is at most 127 bytes)
    41     T   topic            UTF-8
    41+T   2   propertiesLength P
    43+T   P   properties       UTF-8, name\\x01value\\x02 pairs (KEYS, TAGS, user properties)
    43+T+P 4   bodyLength       B
    47+T+P B   body

A BLANK record is ``totalSize, BLANK_MAGIC`` followed by zeroes up to the segment end.

On start, recovery scans the newest segments and cuts the log at the first torn or corrupt record;
everything before it is kept.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from services.common.durable import fsync_dir, reserve

log = logging.getLogger(__name__)

MESSAGE_MAGIC = 0xAABBCCDD
BLANK_MAGIC = 0xBBCCDDEE
_HEAD = struct.Struct(">iIIiqqqB")  # totalSize .. topicLength (41 bytes)
_BLANK = struct.Struct(">iI")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
MIN_BLANK = _BLANK.size
RECOVER_SEGMENTS = 3


class CommitLogError(Exception):
    pass


@dataclass(slots=True)
class MessageRecord:
    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    store_timestamp: int
    properties: dict[str, str]
    body: bytes
    size: int

    @property
    def keys(self) -> str:
        return self.properties.get("KEYS", "")

    @property
    def tags(self) -> str:
        return self.properties.get("TAGS", "")

    @property
    def next_offset(self) -> int:
        return self.physical_offset + self.size


def encode_properties(props: dict[str, str]) -> bytes:
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items()).encode("utf-8")


def decode_properties(raw: bytes) -> dict[str, str]:
    result = {}
    for pair in raw.decode("utf-8", errors="replace").split("\x02"):
        if pair:
            key, _, value = pair.partition("\x01")
            result[key] = value
    return result


def encode_record(topic: str, queue_id: int, queue_offset: int, physical_offset: int, timestamp: int,
                  properties: dict[str, str], body: bytes) -> bytes:
    topic_b = topic.encode("utf-8")
    props_b = encode_properties(properties)
    _check_lengths(topic_b, props_b)
    return _encode(topic_b, props_b, queue_id, queue_offset, physical_offset, timestamp, body)


def _check_lengths(topic_b: bytes, props_b: bytes) -> None:
    if len(topic_b) > 127:
        raise CommitLogError("topic longer than 127 bytes")
    if len(props_b) > 32767:
        raise CommitLogError("properties longer than 32767 bytes")


def _encode(topic_b: bytes, props_b: bytes, queue_id: int, queue_offset: int, physical_offset: int,
            timestamp: int, body: bytes) -> bytes:
    total = _HEAD.size + len(topic_b) + 2 + len(props_b) + 4 + len(body)
    return b"".join((
        _HEAD.pack(total, MESSAGE_MAGIC, zlib.crc32(body), queue_id, queue_offset, physical_offset,
                   timestamp, len(topic_b)),
        topic_b, _U16.pack(len(props_b)), props_b, _I32.pack(len(body)), body))


def record_size(topic: str, properties: dict[str, str], body_len: int) -> int:
    return _HEAD.size + len(topic.encode("utf-8")) + 2 + len(encode_properties(properties)) + 4 + body_len


@dataclass(slots=True)
class NewRecord:
    """A message to append: everything of the record but its physical offset."""
    topic: str
    queue_id: int
    queue_offset: int
    timestamp: int
    properties: dict[str, str]
    body: bytes


class Blank:
    """Marker returned by :func:`decode_record` for end-of-segment padding."""

    def __init__(self, size: int) -> None:
        self.size = size


class _Parsed(NamedTuple):
    total: int
    queue_id: int
    queue_offset: int
    timestamp: int
    topic: str
    props: slice
    body: slice


def _parse(buf: bytes | memoryview, pos: int, physical_offset: int) -> _Parsed | Blank | None:
    """Check the record at ``buf[pos:]`` (framing, physical offset, lengths, body CRC) and locate its
    parts without copying them; ``None`` if it is incomplete or corrupt."""
    if len(buf) - pos < MIN_BLANK:
        return None
    total, magic = _BLANK.unpack_from(buf, pos)
    if magic == BLANK_MAGIC:
        return Blank(total) if total >= MIN_BLANK else None
    if magic != MESSAGE_MAGIC or total < _HEAD.size + 6 or len(buf) - pos < total:
        return None
    try:
        _, _, crc, queue_id, queue_offset, phys, ts, topic_len = _HEAD.unpack_from(buf, pos)
        if phys != physical_offset or _HEAD.size + topic_len + 2 + 4 > total:
            return None
        p = pos + _HEAD.size
        topic = bytes(buf[p:p + topic_len]).decode("utf-8", errors="replace")
        p += topic_len
        (props_len,) = _U16.unpack_from(buf, p)
        p += 2
        if p + props_len + 4 > pos + total:
            return None
        props = slice(p, p + props_len)
        p += props_len
        (body_len,) = _I32.unpack_from(buf, p)
        p += 4
    except (struct.error, UnicodeDecodeError):
        return None
    if body_len < 0 or p + body_len != pos + total or zlib.crc32(memoryview(buf)[p:p + body_len]) != crc:
        return None
    return _Parsed(total, queue_id, queue_offset, ts, topic, props, slice(p, p + body_len))


def decode_record(buf: bytes | memoryview, pos: int, physical_offset: int) -> MessageRecord | Blank | None:
    """Decode the record at ``buf[pos:]``; ``None`` if it is incomplete or corrupt."""
    r = _parse(buf, pos, physical_offset)
    if not isinstance(r, _Parsed):
        return r
    return MessageRecord(r.topic, r.queue_id, r.queue_offset, physical_offset, r.timestamp,
                         decode_properties(bytes(buf[r.props])), bytes(buf[r.body]), r.total)


#: (topic, queueId, queueOffset, physicalOffset, size, tags)
IndexEntry = tuple[str, int, int, int, int, str]
_TAGS_KEY = b"TAGS\x01"


def decode_index(buf: bytes | memoryview, pos: int, physical_offset: int) -> IndexEntry | Blank | None:
    """:func:`decode_record` for indexing: the same checks, without materialising the message."""
    r = _parse(buf, pos, physical_offset)
    if not isinstance(r, _Parsed):
        return r
    tags = ""
    if r.props.stop > r.props.start:
        raw = bytes(buf[r.props])
        at = raw.find(_TAGS_KEY)
        if at == 0 or (at > 0 and raw[at - 1] == 2):
            tags = decode_properties(raw).get("TAGS", "")
    return r.topic, r.queue_id, r.queue_offset, physical_offset, r.total, tags


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

    # ------------------------------------------------------------------ lifecycle
    def open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        names = sorted(p for p in self.directory.iterdir() if p.name.isdigit() and len(p.name) == 20)
        for path in names:
            fd = os.open(path, os.O_RDWR)
            self.segments.append(_Segment(int(path.name), path, fd, os.fstat(fd).st_size))
        for prev, nxt in zip(self.segments, self.segments[1:]):
            if nxt.start != prev.start + self.segment_size:
                raise CommitLogError(f"commitlog segment {nxt.path.name} does not follow {prev.path.name} "
                                     f"(segment size {self.segment_size}); was mappedFileSizeCommitLog changed?")
        self._recover()
        if self.segments:
            self._reserve(self.segments[-1].fd)
        self.flushed_offset = self.max_offset

    def close(self) -> None:
        self.flush()
        for seg in self.segments:
            os.close(seg.fd)
        self.segments.clear()

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
            _check_lengths(topic_b, props_b)
            size = _HEAD.size + len(topic_b) + 2 + len(props_b) + 4 + len(r.body)
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
                parts.append(_BLANK.pack(pad, BLANK_MAGIC) + bytes(pad - MIN_BLANK))
                offset += pad
            parts.append(_encode(topic_b, props_b, r.queue_id, r.queue_offset, offset, r.timestamp, r.body))
            placed.append((offset, size))
            offset += size
        self.write_at(start, b"".join(parts))
        return placed

    def write_at(self, offset: int, data: bytes) -> None:
        """Write raw bytes at the end of the log (offset must equal max_offset); used by replicas too."""
        if offset != self.max_offset:
            if self.max_offset == self.min_offset and offset % self.segment_size == 0:
                self._reset_empty(offset)  # an empty replica starting at the master's oldest data
            else:
                raise CommitLogError(f"write at {offset} but the commitlog ends at {self.max_offset}")
        view = memoryview(data)
        while view:
            seg = self._segment_for_append(offset)
            room = seg.start + self.segment_size - offset
            chunk = view[:room]
            written = 0
            while written < len(chunk):
                written += os.pwrite(seg.fd, chunk[written:], offset - seg.start + written)
            seg.length += len(chunk)
            seg.dirty = True
            offset += len(chunk)
            view = view[len(chunk):]

    def _reset_empty(self, offset: int) -> None:
        for seg in self.segments:
            os.close(seg.fd)
            seg.path.unlink()
        self.segments.clear()
        self._segment_for_append(offset)
        self.flushed_offset = offset

    def _segment_for_append(self, offset: int) -> _Segment:
        if self.segments:
            last = self.segments[-1]
            if last.start + last.length == offset and last.length < self.segment_size:
                return last
        start = offset - offset % self.segment_size
        if offset != start:
            raise CommitLogError(f"no segment holds offset {offset}")
        path = self.directory / f"{start:020d}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self._reserve(fd)
        fsync_dir(self.directory)
        seg = _Segment(start, path, fd)
        self.segments.append(seg)
        return seg

    def _reserve(self, fd: int) -> None:
        if self.reserve_blocks:
            reserve(fd, self.segment_size)

    def flush(self) -> int:
        """fsync every segment written since the last flush; returns the offset now durable."""
        target = self.max_offset
        for seg in list(self.segments):
            if seg.dirty:
                seg.dirty = False
                os.fsync(seg.fd)
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

    def read_record(self, offset: int) -> MessageRecord | None:
        """The message at ``offset`` (skipping nothing); ``None`` if there is none."""
        head = self.read(offset, _HEAD.size)
        if len(head) < MIN_BLANK:
            return None
        total, magic = _BLANK.unpack_from(head, 0)
        if magic != MESSAGE_MAGIC:
            return None
        rec = decode_record(self.read(offset, total), 0, offset)
        return rec if isinstance(rec, MessageRecord) else None

    def iter_records(self, start: int, end: int | None = None) -> list[MessageRecord]:
        """Every message with start <= offset < end (blank padding skipped)."""
        return self._walk(start, end, decode_record)

    def iter_index(self, start: int, end: int | None = None) -> list[IndexEntry]:
        """Like :meth:`iter_records`, but only what a consume queue needs (the body is checked against
        its CRC, not copied): (topic, queueId, queueOffset, physicalOffset, size, tags)."""
        return self._walk(start, end, decode_index)

    def _walk(self, start: int, end: int | None, decode: Callable[[memoryview, int, int], Any]) -> list[Any]:
        end = self.max_offset if end is None else min(end, self.max_offset)
        result: list[Any] = []
        offset = start
        while offset < end:
            seg = self._segment_containing(offset)
            if seg is None:
                break
            buf = memoryview(self.read(offset, min(seg.start + seg.length, end) - offset))
            pos = 0
            while pos < len(buf):
                rec = decode(buf, pos, offset + pos)
                if rec is None:
                    break
                if isinstance(rec, Blank):
                    pos = len(buf) if offset + pos + rec.size >= seg.start + seg.length else pos + rec.size
                    continue
                result.append(rec)
                pos += rec.size if isinstance(rec, MessageRecord) else rec[4]
            if pos == 0:
                break
            offset += pos
        return result

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
            total, magic = _BLANK.unpack_from(buf, pos) if len(buf) - pos >= MIN_BLANK else (0, 0)
            if total <= 0 or pos + total > len(buf) or magic not in (MESSAGE_MAGIC, BLANK_MAGIC):
                break
            if pos > 0 and pos + total > max_bytes:
                break
            pos += total
        return buf[:pos]

    # ------------------------------------------------------------------ truncation and recovery
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
            os.fsync(seg.fd)
            seg.length = new_length
            self._reserve(seg.fd)
        fsync_dir(self.directory)
        self.flushed_offset = min(self.flushed_offset, offset)

    def _recover(self) -> None:
        if not self.segments:
            return
        first = max(0, len(self.segments) - RECOVER_SEGMENTS)
        valid_end = self.segments[first].start
        for seg in self.segments[first:]:
            if valid_end != seg.start:
                break
            valid_end = seg.start + self._scan_valid(seg)
            if valid_end < seg.start + self.segment_size:
                break
        if valid_end < self.max_offset:
            log.warning("commitlog recovery: cutting a torn or corrupt tail at offset %d (log ended at %d)",
                        valid_end, self.max_offset)
            self.truncate(valid_end)

    def _scan_valid(self, seg: _Segment) -> int:
        data = os.pread(seg.fd, seg.length, 0)
        pos = 0
        while pos < len(data):
            rec = decode_record(data, pos, seg.start + pos)
            if rec is None:
                break
            if isinstance(rec, Blank):
                if seg.start + pos + rec.size != seg.start + self.segment_size:
                    break
                return self.segment_size if seg.length >= self.segment_size else pos
            pos += rec.size
        return pos
