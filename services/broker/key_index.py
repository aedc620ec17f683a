"""The message key index: where in the commitlog the messages of a topic with a given key are (RocketMQ's
IndexService), for QUERY_MESSAGE (12): mqadmin's queryMsgByKey and queryMsgByUniqueKey.

Every confirmed message is indexed under each of its keys (``KEYS``, split at spaces) and its unique key
(``UNIQ_KEY``, the client's message id), as ``topic#key``. A lookup gives candidate offsets, newest first;
the store reads each candidate back and keeps only a message of that topic that carries the key, so a hash
collision, an entry left by a truncated log or one written twice never shows.

Files: ``<store>/index/<first offset, 20 digits>``, each a fixed table (our layout, big-endian):

* a header (64 bytes): magic ``MQIX``, version, flags (1: closed cleanly), slot count, capacity, entry count,
  the first and the end commitlog offset indexed, the first and last store time, and a CRC of the rest;
* ``maxHashSlotNum`` slots of 4 bytes: 1 + the index of the newest entry whose key hashes there (0: none);
* ``maxIndexNum`` entries of 24 bytes: key hash, commitlog offset, store time, 1 + the index of the entry
  before it in the same slot (0: none).

A file fills, is closed cleanly (header written, fsynced) and the next begins at the next message. The index
is derived data: it is fsynced with the consume queues, and a file that does not read back (a bad header, a
size that does not match), or the last file after a crash (not closed cleanly: its slots may point at
entries the crash lost), is deleted and indexed again from the commitlog at start, from its first offset.
``maxIndexNum`` bounds that work; ours is smaller than RocketMQ's default for that reason.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from services.common.durable import fsync_dir, fsync_file, write_all

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_CAPACITY", "DEFAULT_SLOTS", "KeyIndex", "MAX_KEYS_PER_MESSAGE", "index_keys", "key_hash"]

MAGIC = b"MQIX"
VERSION = 1
CLEAN = 1
_HEADER = struct.Struct(">4sHHIIIqqqq")  # magic .. last store time (60 bytes), then the CRC
HEADER_SIZE = 64
_CRC = struct.Struct(">I")
_SLOT = struct.Struct(">I")
_ENTRY = struct.Struct(">Iqqi")
DEFAULT_SLOTS = 100_000
DEFAULT_CAPACITY = 400_000
#: Keys of one message beyond these are not indexed (a message may name many; a lookup of one of them finds
#: the message only while they stay within these bounds).
MAX_KEYS_PER_MESSAGE = 64
MAX_KEY_BYTES = 1024


class IndexFileDamaged(Exception):
    pass


def key_hash(topic: str, key: str) -> int:
    return zlib.crc32(f"{topic}#{key}".encode("utf-8", "surrogatepass"))


def index_keys(properties: dict[str, str]) -> list[str]:
    """The keys a message is found by: its unique key, then each of its KEYS (distinct, bounded)."""
    found: list[str] = []
    for key in (properties.get("UNIQ_KEY", ""), *properties.get("KEYS", "").split(" ")):
        if key and key not in found and len(key.encode("utf-8", "surrogatepass")) <= MAX_KEY_BYTES:
            found.append(key)
        if len(found) == MAX_KEYS_PER_MESSAGE:
            break
    return found


@dataclass
class _Header:
    flags: int
    slots: int
    capacity: int
    count: int
    begin_phy: int
    end_phy: int
    begin_ts: int
    end_ts: int

    def encode(self) -> bytes:
        raw = _HEADER.pack(MAGIC, VERSION, self.flags, self.slots, self.capacity, self.count, self.begin_phy,
                           self.end_phy, self.begin_ts, self.end_ts)
        return raw + _CRC.pack(zlib.crc32(raw))

    @classmethod
    def decode(cls, raw: bytes) -> _Header | None:
        if len(raw) < HEADER_SIZE or zlib.crc32(raw[:_HEADER.size]) != _CRC.unpack_from(raw, _HEADER.size)[0]:
            return None
        magic, version, flags, slots, capacity, count, begin_phy, end_phy, begin_ts, end_ts = _HEADER.unpack_from(raw)
        if magic != MAGIC or version != VERSION or not 0 <= count <= capacity or begin_phy < 0 or end_phy < begin_phy:
            return None
        return cls(flags, slots, capacity, count, begin_phy, end_phy, begin_ts, end_ts)


class IndexFile:
    """One table (see the module's docstring): appended to, looked up, closed."""

    def __init__(self, path: Path, header: _Header, fd: int) -> None:
        self.path = path
        self.header = header
        self.fd = fd

    @property
    def size(self) -> int:
        return HEADER_SIZE + 4 * self.header.slots + _ENTRY.size * self.header.capacity

    @classmethod
    def create(cls, path: Path, begin_phy: int, slots: int, capacity: int) -> IndexFile:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        made = cls(path, _Header(0, slots, capacity, 0, begin_phy, begin_phy, 0, 0), fd)
        os.ftruncate(fd, made.size)  # sparse: the table costs disk as it fills
        made.write_header()
        fsync_dir(path.parent)
        return made

    @classmethod
    def open(cls, path: Path) -> IndexFile:
        """The file, checked: IndexFileDamaged if its header or size is wrong."""
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)  # a symbolic link is refused (ELOOP), as in consumequeue/
        try:
            header = _Header.decode(os.pread(fd, HEADER_SIZE, 0))
            if header is None or not 0 < header.slots <= 2**26 or not 0 < header.capacity <= 2**28:
                raise IndexFileDamaged(f"index file {path} has no valid header")
            opened = cls(path, header, fd)
            if os.fstat(fd).st_size != opened.size:
                raise IndexFileDamaged(f"index file {path} is {os.fstat(fd).st_size} bytes, not {opened.size}")
            return opened
        except BaseException:
            os.close(fd)
            raise

    @property
    def full(self) -> bool:
        return self.header.count >= self.header.capacity

    def add(self, hashed: int, phy: int, timestamp: int) -> None:
        h = self.header
        slot_at = HEADER_SIZE + 4 * (hashed % h.slots)
        previous = _SLOT.unpack(os.pread(self.fd, 4, slot_at))[0]
        entry_at = HEADER_SIZE + 4 * h.slots + _ENTRY.size * h.count
        write_all(self.fd, _ENTRY.pack(hashed, phy, timestamp, previous), entry_at)
        h.count += 1
        write_all(self.fd, _SLOT.pack(h.count), slot_at)
        h.begin_ts = timestamp if h.count == 1 else min(h.begin_ts, timestamp)
        h.end_ts = max(h.end_ts, timestamp)

    def write_header(self, clean: bool = False) -> None:
        self.header.flags = CLEAN if clean else 0
        write_all(self.fd, self.header.encode(), 0)

    def lookup(self, hashed: int, begin_ts: int, end_ts: int, limit: int) -> list[int]:
        """Offsets of entries with this hash stored within [begin_ts, end_ts], newest first, at most ``limit``.
        A chain that does not go strictly back (damage) ends there."""
        h = self.header
        found: list[int] = []
        number = _SLOT.unpack(os.pread(self.fd, 4, HEADER_SIZE + 4 * (hashed % h.slots)))[0]
        while 0 < number <= h.count and len(found) < limit:
            raw = os.pread(self.fd, _ENTRY.size, HEADER_SIZE + 4 * h.slots + _ENTRY.size * (number - 1))
            if len(raw) < _ENTRY.size:
                break
            entry_hash, phy, timestamp, previous = _ENTRY.unpack(raw)
            if entry_hash == hashed and begin_ts <= timestamp <= end_ts:
                found.append(phy)
            if not 0 <= previous < number:
                break
            number = previous
        return found

    def flush(self) -> None:
        self.write_header()
        fsync_file(self.fd, self.path)

    def close(self, clean: bool) -> None:
        if clean:
            self.write_header(clean=True)
            fsync_file(self.fd, self.path)
        os.close(self.fd)


def _file_name(offset: int) -> str:
    return f"{offset:020d}"


class KeyIndex:
    """The index files of one store. ``add`` and ``lookup`` may be called from different threads."""

    def __init__(self, root: Path, slots: int = DEFAULT_SLOTS, capacity: int = DEFAULT_CAPACITY) -> None:
        self.root = root
        self.slots = slots
        self.capacity = capacity
        self.files: list[IndexFile] = []
        self.indexed = 0  # every confirmed message below this commitlog offset is indexed
        self._lock = threading.Lock()

    def load(self, log_min: int, log_max: int) -> None:
        """Open the files; drop what cannot be trusted (see the module's docstring) and what indexes nothing
        the log still holds. ``indexed`` is then where indexing resumes."""
        self.root.mkdir(parents=True, exist_ok=True)
        names = sorted(p for p in self.root.iterdir() if len(p.name) == 20 and p.name.isdigit()
                       and (p.is_symlink() or p.is_file()))
        for path in names:
            try:
                opened = IndexFile.open(path)
            except (IndexFileDamaged, OSError) as exc:
                log.warning("%s; it is indexed again from the commitlog", exc)
                self._delete(path)
                continue
            self.files.append(opened)
        if self.files and not self.files[-1].header.flags & CLEAN:
            last = self.files.pop()
            log.info("index file %s was not closed cleanly: it is indexed again from commitlog offset %d", last.path,
                     last.header.begin_phy)
            last.close(clean=False)
            self._delete(last.path)
        while self.files and self.files[-1].header.begin_phy >= log_max > 0:
            self._drop(self.files.pop())
        self.indexed = max(self.files[-1].header.end_phy if self.files else log_min, log_min)
        self.indexed = min(self.indexed, log_max)
        self.trim(log_min)

    def add(self, records: Iterable[tuple[int, int, str, dict[str, str]]], end: int) -> None:
        """Index (offset, store time, topic, properties) of each message, in log order, then mark every
        message below ``end`` indexed."""
        with self._lock:
            for phy, timestamp, topic, properties in records:
                for key in index_keys(properties):
                    self._writable(phy).add(key_hash(topic, key), phy, timestamp)
            if self.files:
                self.files[-1].header.end_phy = max(self.files[-1].header.end_phy, end)
            self.indexed = max(self.indexed, end)

    def _writable(self, phy: int) -> IndexFile:
        if self.files and not self.files[-1].full:
            return self.files[-1]
        if self.files:  # full: it indexes every message before this one (this one's keys may start there)
            self.files[-1].header.end_phy = max(self.files[-1].header.begin_phy, phy)
            self.files[-1].write_header(clean=True)
            fsync_file(self.files[-1].fd, self.files[-1].path)
        created = IndexFile.create(self.root / _file_name(phy), phy, self.slots, self.capacity)
        self.files.append(created)
        return created

    def lookup(self, topic: str, key: str, limit: int, begin_ts: int, end_ts: int) -> list[int]:
        """Candidate offsets of messages of ``topic`` with ``key`` stored within [begin_ts, end_ts], newest
        first, distinct, at most ``limit`` (each still to be read and checked)."""
        hashed = key_hash(topic, key)
        found: list[int] = []
        with self._lock:
            for file in reversed(self.files):
                h = file.header
                if h.count == 0 or h.end_ts < begin_ts or h.begin_ts > end_ts:
                    continue
                for phy in file.lookup(hashed, begin_ts, end_ts, limit):
                    if phy not in found:
                        found.append(phy)
                if len(found) >= limit:
                    break
        return found[:limit]

    @property
    def last_update(self) -> tuple[int, int]:
        """(store time of the newest entry, offset indexed to): QUERY_MESSAGE's answer header."""
        if not self.files:
            return 0, self.indexed
        return self.files[-1].header.end_ts, self.indexed

    def flush(self) -> None:
        with self._lock:
            if self.files:
                self.files[-1].flush()

    def truncate(self, offset: int) -> None:
        """The log was cut at ``offset``: files that begin at or after it go; what is indexed ends there
        (entries past it stay, and are filtered when read back)."""
        with self._lock:
            while self.files and self.files[-1].header.begin_phy >= offset:
                self._drop(self.files.pop())
            if self.files:
                self.files[-1].header.end_phy = min(self.files[-1].header.end_phy, offset)
            self.indexed = min(self.indexed, offset)

    def trim(self, log_min: int) -> None:
        """Retention deleted the log below ``log_min``: files whose entries all point below it go."""
        with self._lock:
            while len(self.files) > 1 and self.files[1].header.begin_phy <= log_min:
                self._drop(self.files.pop(0))

    def destroy(self) -> None:
        with self._lock:
            while self.files:
                self._drop(self.files.pop())
            self.indexed = 0

    def close(self) -> None:
        with self._lock:
            for file in self.files:
                file.close(clean=True)
            self.files = []

    def _drop(self, file: IndexFile) -> None:
        file.close(clean=False)
        self._delete(file.path)

    def _delete(self, path: Path) -> None:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        fsync_dir(self.root)
