"""The message store: commitlog + consume queues + epoch file + confirmOffset, with recovery.

confirmOffset is owned here and only here. Consume queues are dispatched up to it and never beyond, so a
consumer never reads a message that a failover could truncate. It only moves forward, except when the
log itself is truncated. It is persisted in ``checkpoint`` on every flush.

The checkpoint also records ``flushedOffset``, an offset the commitlog had been fsynced to: recovery
never cuts below it, and a log that ends before it lost flushed data (refused). It carries a CRC; a
damaged checkpoint is ignored (everything it holds can be rebuilt from the queues and the log).
"""

from __future__ import annotations

import functools
import json
import logging
import socket
import struct
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from services.broker.commitlog import CommitLog, MessageRecord, NewRecord, RawRecord
from services.broker.consume_queue import ConsumeQueue, ConsumeQueueStore
from services.broker.epoch_file import EpochFileCache
from services.broker.key_index import DEFAULT_CAPACITY, DEFAULT_SLOTS, KeyIndex
from services.broker.record import MAX_TOPIC_LENGTH, CommitLogCorrupt, IndexEntry, queue_bound, valid_topic
from services.broker.retention import SegmentInfo
from services.broker.topics import MAX_QUEUE_NUMS, TopicRegistry, implicit_config
from services.common.durable import atomic_write
from services.common.faults import fault_point
from services.remoting.namesrv_bodies import TopicConfig

log = logging.getLogger(__name__)

_CHECKPOINT_KEYS = ("confirmOffset", "dispatchedOffset", "flushedOffset")
MASTER_FLUSHED = "masterFlushedOffset"
_PENDING_MAX = 200_000  # replicated records indexed from memory; beyond that, dispatch reads the log
#: The commitlog read at most per flush to index message keys (at least two of the largest messages).
KEY_INDEX_WINDOW = 8 * 2**20
#: The system topic of the records that mark a topic's deletion (DELETE_TOPIC_IN_BROKER): one record in queue 0,
#: the deleted topic's name as its tags and body. The mark is in the log, so it is replicated with it, survives
#: a restart and is cut by a truncation like any message; its queue makes every message before it unreadable
#: (``deletion_mark``).
TOPIC_DELETED = "rmq_sys_mqctl_TOPIC_DELETED"


class StoreClosed(Exception):
    """A write reached a store that has been closed (the broker is shutting down)."""


class MessageIllegal(Exception):
    pass


@dataclass(slots=True)
class Message:
    topic: str
    body: bytes
    keys: str = ""
    tags: str = ""
    queue_id: int | None = None
    properties: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class AppendResult:
    msg_id: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    next_offset: int


R = TypeVar("R", MessageRecord, RawRecord)


@dataclass(slots=True)
class GetResult(Generic[R]):
    """A read of a queue: decoded messages (``get_messages``), or checked records as read (``get_raw``)."""

    status: str
    next_begin_offset: int
    min_offset: int
    max_offset: int
    records: list[R]
    remark: str = ""  # why, for MESSAGE_DAMAGED


#: Pull status of a queue entry whose message cannot be served (damaged record, or an entry that does
#: not point at its message). Not a RocketMQ status: RocketMQ would skip it (OFFSET_FOUND_NULL).
MESSAGE_DAMAGED = "MESSAGE_DAMAGED"


def message_id(store_host: str, offset: int) -> str:
    """RocketMQ's offset message id: store IPv4 (4 bytes) + port (4 bytes) + commitlog offset (8 bytes)."""
    return message_id_prefix(store_host) + _OFFSET.pack(offset).hex().upper()


_OFFSET = struct.Struct(">q")


@functools.lru_cache(maxsize=64)
def message_id_prefix(store_host: str) -> str:
    """The host part of an offset message id (resolved once per address)."""
    host, _, port = store_host.rpartition(":")
    try:
        ip = socket.inet_aton(socket.gethostbyname(host))
    except OSError:
        ip = bytes(4)
    return (ip + struct.pack(">i", int(port or 0))).hex().upper()


class MessageStore:
    def __init__(self, root: Path, store_host: str, segment_size: int = 64 * 2**20,
                 epoch_file: Path | None = None, queue_nums: int = 4,
                 max_message_size: int = 4 * 2**20, commitlog_dir: Path | None = None,
                 index_slots: int = DEFAULT_SLOTS, index_capacity: int = DEFAULT_CAPACITY,
                 rocketmq_format: bool = False) -> None:
        self.root = root
        self.store_host = store_host
        self.commitlog = CommitLog(commitlog_dir or root / "commitlog", segment_size,
                                   rocketmq_format=rocketmq_format,
                                   store_host=bytes.fromhex(message_id_prefix(store_host)))
        self.queues = ConsumeQueueStore(root / "consumequeue")
        self.keys = KeyIndex(root / "index", index_slots, index_capacity)
        self.epochs = EpochFileCache(epoch_file or root / "epochFileCheckpoint")
        self.queue_nums = queue_nums
        self.max_message_size = max_message_size
        self.checkpoint_path = root / "checkpoint"
        self.created_topics = TopicRegistry(root / "config" / "topics.json", queue_nums)
        self.next_queue_offsets: dict[tuple[str, int], int] = {}
        self._round_robin: dict[str, int] = {}
        self._confirm_offset = 0
        self._flushed_mark = 0  # the flushedOffset of the checkpoint
        #: What a slave was told is its master's flushed offset (RocketMQ's masterFlushedOffset: set only by
        #: an operator's RESET_MASTER_FLUSH_OFFSET in controller mode); kept in the checkpoint, 0 if never set.
        self.master_flushed_offset = 0
        self._reported: set[int] = set()  # damaged offsets already logged
        self._saved_confirm: object = None
        self._pending: deque[tuple[int, int, str, int, int, str]] = deque()
        #: What the key index needs of the records this broker appended itself (offset, size, store time,
        #: topic, properties), so that it indexes them without reading the log back.
        self._pending_keys: deque[tuple[int, int, int, str, dict[str, str]]] = deque()
        self._queue_offsets_stale = False
        self.reput_offset = 0
        #: Deleted topics: the commitlog offset of each one's latest deletion mark (messages before it are gone),
        #: and per queue of such a topic the first queue offset after the mark (found when first needed).
        self.deleted: dict[str, int] = {}
        self._hidden: dict[tuple[str, int], tuple[int, int]] = {}  # queue -> (mark offset, first offset after)
        self.index_error: str | None = None  # why the consume queues could not be written (None: they can)
        self.checkpoint_error: str | None = None  # why the last flush could not save the queues or the checkpoint
        self.closed = False

    # ------------------------------------------------------------------ lifecycle
    def open(self) -> None:
        """Recover and open; raises CommitLogCorrupt or EpochFileDamaged (one line naming the file)
        for damage it will not repair by itself."""
        self.closed = False
        self.root.mkdir(parents=True, exist_ok=True)
        checkpoint = self._load_checkpoint()
        self.master_flushed_offset = checkpoint.get(MASTER_FLUSHED, 0)
        self.created_topics.load()
        self.commitlog.open(flushed=checkpoint.get("flushedOffset", 0))
        try:
            self._recover(checkpoint)
        except BaseException:
            self.queues.close()
            self.keys.close()
            self.commitlog.close_files()
            raise

    def _recover(self, checkpoint: dict[str, int]) -> None:
        log_min, log_max = self.commitlog.min_offset, self.commitlog.max_offset
        self.epochs.load(log_has_data=log_max > log_min)
        self.epochs.truncate_suffix_by_offset(log_max + 1)
        if log_min > 0:  # retention deleted segments; a crash may have come before their epochs went
            self.epochs.truncate_prefix_by_offset(log_min - 1)
        self.queues.load()
        # The queues themselves say how far the log is indexed (verify checks them against it);
        # re-dispatching from there is idempotent.
        indexed = self.queues.verify(log_min, log_max, self.commitlog.segment_size, self.commitlog.header_at)
        self.reput_offset = indexed
        self.keys.load(log_min, log_max)
        self._flushed_mark = min(checkpoint.get("flushedOffset", 0), log_max)
        self._confirm_offset = min(max(checkpoint.get("confirmOffset", 0), indexed), log_max)
        self._rebuild_queue_offsets()
        self.dispatch()
        self._load_marks()

    def _check_open(self) -> None:
        if self.closed:
            raise StoreClosed("the message store is closed")

    def close(self) -> None:
        self.closed = True  # first: a write arriving now must not recreate segment files at offset 0
        self.flush()
        self.commitlog.close()
        self.queues.close()
        self.keys.close()

    def _load_checkpoint(self) -> dict[str, int]:
        doc, problem = load_checkpoint(self.checkpoint_path)
        if problem:
            log.warning("checkpoint %s: %s; rebuilding what it held from the consume queues and the commitlog",
                        self.checkpoint_path, problem)
        return doc

    def _rebuild_queue_offsets(self) -> None:
        self.next_queue_offsets = {key: cq.count for key, cq in self.queues.queues.items()}
        for rec in self.commitlog.iter_records(self.reput_offset):
            key = (rec.topic, rec.queue_id)
            self.next_queue_offsets[key] = max(self.next_queue_offsets.get(key, 0), rec.queue_offset + 1)

    # ------------------------------------------------------------------ offsets
    @property
    def max_offset(self) -> int:
        return self.commitlog.max_offset

    @property
    def min_offset(self) -> int:
        return self.commitlog.min_offset

    @property
    def confirm_offset(self) -> int:
        return self._confirm_offset

    def set_confirm_offset(self, offset: int) -> None:
        """Advance confirmOffset (never backwards, never past the log) and dispatch up to it."""
        offset = min(offset, self.max_offset)
        if offset > self._confirm_offset:
            self._confirm_offset = offset
            self.dispatch()

    # ------------------------------------------------------------------ writes
    def validate(self, msg: Message) -> None:
        if not valid_topic(msg.topic):
            raise MessageIllegal(f"topic {msg.topic!r} is illegal: use at most {MAX_TOPIC_LENGTH} of "
                                 "letters, digits, '%', '|', '_' and '-'")
        if not msg.body:
            raise MessageIllegal("message body is empty")
        if len(msg.body) > self.max_message_size:
            raise MessageIllegal(f"message body of {len(msg.body)} bytes exceeds maxMessageSize "
                                 f"{self.max_message_size}")
        if msg.queue_id is not None and not 0 <= msg.queue_id < queue_bound(msg.topic, MAX_QUEUE_NUMS):
            raise MessageIllegal(f"queueId {msg.queue_id} is out of range: a topic of this broker has queues "
                                 f"0..{MAX_QUEUE_NUMS - 1} at most")
        # every text at once: one scan for the separators, one encoding for the size
        texts = "".join((msg.keys, msg.tags, *msg.properties, *msg.properties.values()))
        if "\x01" in texts or "\x02" in texts:
            raise MessageIllegal("keys, tags and properties must not contain \\x01 or \\x02")
        props = len(texts.encode()) + 2 * len(msg.properties) + 12
        if props > 32767:
            raise MessageIllegal(f"keys, tags and properties take {props} bytes; at most 32767 are allowed")

    def append(self, msg: Message, timestamp: int) -> AppendResult:
        return self.append_batch([msg], timestamp)[0]

    def append_batch(self, messages: list[Message], timestamp: int) -> list[AppendResult]:
        """Append messages in order with one write to the commitlog; all or nothing."""
        self._check_open()
        if self._queue_offsets_stale:
            self._rebuild_queue_offsets()
            self._queue_offsets_stale = False
        next_offsets: dict[tuple[str, int], int] = {}
        records: list[NewRecord] = []
        for msg in messages:
            queue_id = msg.queue_id if msg.queue_id is not None else self._next_queue(msg.topic)
            key = (msg.topic, queue_id)
            queue_offset = next_offsets.get(key)
            if queue_offset is None:
                queue_offset = self.next_queue_offsets.get(key, 0)
            next_offsets[key] = queue_offset + 1
            props = dict(msg.properties)
            if msg.keys:
                props["KEYS"] = msg.keys
            if msg.tags:
                props["TAGS"] = msg.tags
            records.append(NewRecord(msg.topic, queue_id, queue_offset, timestamp, props, msg.body))
        placed = self.commitlog.append_batch(records)
        self.next_queue_offsets.update(next_offsets)
        host_id = message_id_prefix(self.store_host)
        results = []
        for msg, rec, (offset, size) in zip(messages, records, placed):
            self._pending.append((offset, size, rec.topic, rec.queue_id, rec.queue_offset, msg.tags))
            if len(self._pending_keys) < _PENDING_MAX:
                self._pending_keys.append((offset, size, timestamp, rec.topic, rec.properties))
            results.append(AppendResult(host_id + _OFFSET.pack(offset).hex().upper(), rec.queue_id,
                                        rec.queue_offset, offset, offset + size))
        return results

    def _next_queue(self, topic: str) -> int:
        n = self._round_robin.get(topic, -1) + 1
        self._round_robin[topic] = n
        config = self.created_topics.get(topic)
        return n % max(config.write_queue_nums if config is not None else self.queue_nums, 1)

    def append_raw(self, offset: int, data: bytes) -> None:
        """Replica path: write bytes received from the master at the same offset. Every record is
        checked first (as the send path checks a message, plus framing, position and CRC); anything
        wrong raises InvalidRecord and nothing is written."""
        self.append_checked(offset, data, self.check_raw(offset, data))

    def check_raw(self, offset: int, data: bytes) -> list[IndexEntry]:
        """The checks of ``append_raw`` alone (InvalidRecord if anything is wrong); nothing is written."""
        self._check_open()
        return self.commitlog.check_chunk(offset, data, MAX_QUEUE_NUMS, self.max_message_size)

    def append_checked(self, offset: int, data: bytes, entries: list[IndexEntry]) -> None:
        """Write a chunk ``check_raw`` accepted (its entries are what it returned)."""
        self._check_open()
        self.commitlog.write_at(offset, data)
        if self.reput_offset < self.commitlog.min_offset:  # an empty replica that started mid-log
            self.reput_offset = self._confirm_offset = self.commitlog.min_offset
        if len(self._pending) + len(entries) <= _PENDING_MAX:  # already checked: index without re-reading
            self._pending.extend((e[3], e[4], e[0], e[1], e[2], e[5]) for e in entries)
        # Queue offsets are only needed once this replica becomes master: rebuild them then.
        self._queue_offsets_stale = True

    # ------------------------------------------------------------------ dispatch and truncation
    def dispatch(self) -> None:
        """Index the log into the consume queues up to confirmOffset. A queue write the disk refuses leaves
        the rest for the next call (the store's writes and the flush service's turns call it again), with one
        log line while it fails: the messages are safe in the commitlog, consumers just do not see them yet."""
        try:
            self._dispatch()
        except OSError as exc:
            if self.index_error is None:
                log.error("cannot index the commitlog into the consume queues from offset %d (%s): confirmed "
                          "messages are not readable until it can; tried again at every write and flush",
                          self.reput_offset, exc.strerror or exc)
            self.index_error = f"{exc.strerror or exc}"
            return
        if self.index_error is not None:
            log.warning("the consume queues are written again (indexed up to %d)", self.reput_offset)
            self.index_error = None

    def _dispatch(self) -> None:
        end = min(self._confirm_offset, self.max_offset)
        if self.reput_offset >= end:
            return
        self._dispatch_pending(end)
        if self.reput_offset >= end:
            return
        last = self.reput_offset
        entries = []
        for entry in self.commitlog.iter_index(self.reput_offset, end):
            if entry[3] + entry[4] > end:
                break
            entries.append(entry)
            last = entry[3] + entry[4]
        self.queues.dispatch_many(entries)
        self._note_marks(entries)
        if last == self.reput_offset and end > self.reput_offset:
            last = self._skip_padding(self.reput_offset, end)
        self.reput_offset = last

    def _dispatch_pending(self, end: int) -> None:
        """Dispatch records this broker appended itself from memory (no re-read), in log order; a gap
        can only be end-of-segment padding."""
        pending, size = self._pending, self.commitlog.segment_size
        while pending and pending[0][0] < self.reput_offset:
            pending.popleft()
        entries, reput = [], self.reput_offset
        while pending:
            offset, length, topic, queue_id, queue_offset, tags = pending[0]
            if offset + length > end:
                break
            if offset != reput and not (offset % size == 0 and offset > reput):
                pending.clear()  # not contiguous: let the scanning path take over
                break
            entries.append((topic, queue_id, queue_offset, offset, length, tags))
            reput = offset + length
            pending.popleft()
        self.queues.dispatch_many(entries)
        self._note_marks(entries)
        self.reput_offset = reput

    def _skip_padding(self, offset: int, end: int) -> int:
        size = self.commitlog.segment_size
        boundary = offset - offset % size + size
        return boundary if boundary <= end and self.commitlog.read_record(offset) is None else offset

    def truncate(self, offset: int) -> None:
        """Cut the log, its consume queues and epochs at ``offset``, durably; confirmOffset follows.
        The checkpoint is lowered first: after a crash in the middle, a log shorter than the old
        flushedOffset must not look like lost data."""
        self._pending.clear()
        self._pending_keys.clear()
        self.reput_offset = min(self.reput_offset, offset)
        self._confirm_offset = min(self._confirm_offset, offset)
        self._flushed_mark = min(self._flushed_mark, offset)
        self._save_checkpoint(force=True, dispatched=self.reput_offset)
        self.commitlog.truncate(offset)
        fault_point("during_truncate")
        self.queues.truncate(offset)
        self.keys.truncate(offset)
        self.epochs.truncate_suffix_by_offset(offset + 1)  # epochs starting past the new end
        self._rebuild_queue_offsets()
        if any(at >= offset for at in self.deleted.values()):  # a deletion cut with the log did not happen
            self._load_marks()

    # ------------------------------------------------------------------ retention
    def segment_infos(self) -> list[SegmentInfo]:
        return [SegmentInfo(start, end, modified) for start, end, modified in self.commitlog.segment_spans()]

    def retention_floor(self) -> int:
        """No segment holding a byte at or above this may be deleted: what is not yet confirmed, indexed by
        the consume queues or fsynced."""
        return min(self._confirm_offset, self.reput_offset, self.commitlog.flushed_offset)

    def delete_oldest(self, count: int) -> int:
        """Delete the ``count`` oldest commitlog segments (retention.py decides which), then what pointed
        into them: consume-queue entries (each queue's min offset moves up) and epochs that ended before the
        log's new start (RocketMQ's truncateEpochFilePrefix). Returns the log's new start. A crash in
        between is repaired at the next open, which does the same from the files left."""
        new_min = self.commitlog.delete_head(count)
        self.queues.trim(new_min)
        self.keys.trim(new_min)
        self.epochs.truncate_prefix_by_offset(new_min - 1)
        return new_min

    def start_over(self, offset: int) -> None:
        """Replica path: discard the whole log, its queues and epochs, durably, and begin again empty at
        ``offset`` (the master's oldest data; the next write lands there). For a slave whose log ends before
        anything its master still keeps (ha/protocol.py, step 4)."""
        self._check_open()
        log.warning("store %s: the master no longer holds the data after this log's end (%d; its oldest data "
                    "is at %d): discarding this log and starting over from there", self.root, self.max_offset,
                    offset)
        self.truncate(self.commitlog.min_offset)
        self.epochs.truncate_suffix_by_offset(-1)
        self.queues.destroy()
        self.queues.load()
        self.keys.destroy()
        self.keys.indexed = offset
        self.next_queue_offsets.clear()
        self.deleted.clear()
        self._hidden.clear()

    # ------------------------------------------------------------------ reads
    def get_messages(self, topic: str, queue_id: int, queue_offset: int,
                     max_nums: int) -> GetResult[MessageRecord]:
        return self._get(topic, queue_id, queue_offset, max_nums, self._read_entry)

    def get_raw(self, topic: str, queue_id: int, queue_offset: int, max_nums: int) -> GetResult[RawRecord]:
        """``get_messages`` without decoding the messages: each record checked as it is, read in one go."""
        return self._get(topic, queue_id, queue_offset, max_nums, self._read_raw_entry)

    def _get(self, topic: str, queue_id: int, queue_offset: int, max_nums: int,
             read: Callable[[tuple[int, int, int] | None, str, int, int], R | str]) -> GetResult[R]:
        cq = self.queues.queue(topic, queue_id)
        if cq is None:
            return GetResult("NO_MATCHED_LOGIC_QUEUE", 0, 0, 0, [])
        min_q, max_q = self._first_visible(topic, queue_id, cq), cq.count
        if queue_offset > max_q:
            return GetResult("OFFSET_OVERFLOW_BADLY", max_q, min_q, max_q, [])
        if queue_offset < min_q or queue_offset < 0:  # retention deleted it: go on from the oldest kept
            return GetResult("OFFSET_TOO_SMALL", min_q, min_q, max_q, [])
        if queue_offset == max_q:
            return GetResult("NO_NEW_MSG", queue_offset, min_q, max_q, [])
        records: list[R] = []
        offset = queue_offset
        entries = cq.entries(queue_offset, min(max_nums, max_q - queue_offset))
        while offset < max_q and len(records) < max_nums:
            rec = read(entries[offset - queue_offset] if offset - queue_offset < len(entries) else None, topic,
                       queue_id, offset)
            if isinstance(rec, str):
                if records:
                    break  # the next pull, at the damaged one, gets the error
                return GetResult(MESSAGE_DAMAGED, offset, min_q, max_q, [], rec)
            records.append(rec)
            offset += 1
        return GetResult("FOUND" if records else "NO_MESSAGE_IN_QUEUE", offset, min_q, max_q, records)

    def _read_entry(self, entry: tuple[int, int, int] | None, topic: str, queue_id: int,
                    queue_offset: int) -> MessageRecord | str:
        """The message a queue entry points at, checked (CRC and fields) and matched against the entry;
        or a remark saying why it cannot be served."""
        where = f"the message at queue offset {queue_offset} of {topic}/{queue_id}"
        if entry is None:
            return self._damaged(-1, f"{where} has no consume queue entry (the queue file is damaged); see "
                                     "docs/operations.md, 'Rebuilding consume queues'")
        found = self.commitlog.check_at(entry[0])
        if isinstance(found, str):
            segment = self.commitlog.path_of(entry[0]).name  # relative: clients need not learn store paths
            return self._damaged(entry[0], f"{where} is damaged: commitlog/{segment}, offset "
                                           f"{entry[0]}: {found}. Pull from queue offset {queue_offset + 1} "
                                           "to skip it; see docs/operations.md, 'Damaged commitlog'")
        if (found.topic, found.queue_id, found.queue_offset, found.size) != (topic, queue_id, queue_offset,
                                                                             entry[1]):
            return self._damaged(entry[0], f"{where} cannot be read: its consume queue entry points at "
                                           f"commitlog offset {entry[0]}, which holds another message; see "
                                           "docs/operations.md, 'Rebuilding consume queues'")
        return found

    def _read_raw_entry(self, entry: tuple[int, int, int] | None, topic: str, queue_id: int,
                        queue_offset: int) -> RawRecord | str:
        """``_read_entry`` for ``get_raw``: the same checks and remarks, the record not decoded."""
        found = self.commitlog.check_raw_at(entry[0], entry[1]) if entry is not None else None
        if found is None or isinstance(found, str) or (
                found.parsed.topic, found.parsed.queue_id, found.parsed.queue_offset,
                found.parsed.total) != (topic, queue_id, queue_offset, entry[1] if entry else -1):
            named = self._read_entry(entry, topic, queue_id, queue_offset)  # names the damage as it does
            return named if isinstance(named, str) else \
                f"the message at queue offset {queue_offset} of {topic}/{queue_id} could not be read"
        return found

    def _damaged(self, offset: int, remark: str) -> str:
        if offset not in self._reported and len(self._reported) < 10_000:
            self._reported.add(offset)
            log.error("%s (store %s)", remark, self.root)
        return remark

    def topic_names(self) -> list[str]:
        """Every topic this store holds: written to, indexed, or created (sorted); not one deleted since, nor
        the deletion marks' own topic."""
        held = {t for t, _ in self.next_queue_offsets} | {t for t, _ in self.queues.queues}
        return sorted({t for t in held if self._shown(t)} | self.created_topics.names)

    def has_topic(self, topic: str) -> bool:
        """Whether ``topic`` is one of ``topic_names()``, without listing them."""
        return topic in self.created_topics.names or (self._shown(topic) and any(
            (topic, qid) in self.next_queue_offsets or (topic, qid) in self.queues.queues
            for qid in range(self.queue_nums)))

    def _shown(self, topic: str) -> bool:
        """Whether a topic that has queues is listed: not the marks' topic, and if it was deleted, only once
        it has a message after its deletion (dispatched, or appended and not yet indexed)."""
        if topic == TOPIC_DELETED:
            return False
        if topic not in self.deleted:
            return True
        for (t, qid), cq in list(self.queues.queues.items()):
            if t == topic and cq.count > self._first_visible(t, qid, cq):
                return True
        return any(t == topic and written > (self.queues.queues[(t, q)].count if (t, q) in self.queues.queues
                                             else 0) for (t, q), written in list(self.next_queue_offsets.items()))

    def topic_config(self, topic: str) -> TopicConfig | None:
        """``topic``'s config: as created (topics.py), else the implicit one of a topic that has messages;
        None for a topic this store does not hold."""
        config = self.created_topics.get(topic)
        if config is not None:
            return config
        return implicit_config(topic, self.queue_nums) if self.has_topic(topic) else None

    def topic_configs(self) -> dict[str, TopicConfig]:
        """The config of every topic of ``topic_names()``."""
        created = self.created_topics.configs
        return {t: created.get(t) or implicit_config(t, self.queue_nums) for t in self.topic_names()}

    def queue_ids(self, topic: str, config: TopicConfig) -> list[int]:
        """The queues of ``topic``: those its config counts, and any beyond them that hold messages (a topic
        whose queue count was reduced keeps them, as RocketMQ does)."""
        counted = max(config.read_queue_nums, config.write_queue_nums)
        return list(range(counted)) + [q for q in range(counted, MAX_QUEUE_NUMS) if (topic, q) in
                                       self.next_queue_offsets or (topic, q) in self.queues.queues]

    def topics(self) -> list[dict[str, object]]:
        result: list[dict[str, object]] = []
        for topic, config in sorted(self.topic_configs().items()):
            queue_rows: list[dict[str, object]] = []
            for qid in self.queue_ids(topic, config):
                cq = self.queues.queue(topic, qid)
                queue_rows.append({"queueId": qid, "minOffset": self._first_visible(topic, qid, cq) if cq else 0,
                                   "maxOffset": cq.count if cq else 0,
                                   "writtenOffset": self.next_queue_offsets.get((topic, qid), 0)})
            result.append({"topic": topic, "queues": queue_rows})
        return result

    # ------------------------------------------------------------------ durability
    def flush(self, index: bool = True) -> int:
        """fsync the commitlog and, with ``index``, then the consume queues and the checkpoint (which
        names what they durably index and how far the log is fsynced); returns the commitlog offset now
        durable."""
        dispatched = self.reput_offset  # read before the fsyncs: everything below it is then durable
        flushed = self.commitlog.flush()
        if index:
            try:
                self.index_keys()
                self.keys.flush()
                self.queues.flush()
                self._save_checkpoint(dispatched=min(dispatched, flushed), flushed=flushed)
            except OSError as exc:  # derived data, rebuilt at start: the commitlog's flush stands
                if self.checkpoint_error is None:
                    log.warning("cannot save the consume queues or the checkpoint of %s (%s); tried again at every "
                                "flush", self.root, exc.strerror or exc)
                self.checkpoint_error = str(exc.strerror or exc)
            else:
                if self.checkpoint_error is not None:
                    log.warning("the consume queues and the checkpoint of %s are saved again", self.root)
                    self.checkpoint_error = None
        return flushed

    # ------------------------------------------------------------------ the key index
    def index_keys(self) -> None:
        """Index the keys of the next messages the consume queues index (key_index.py), at most
        KEY_INDEX_WINDOW of the log per call (the flush service calls it while ``keys_behind``)."""
        start, end = self.keys.indexed, min(self.reput_offset, self.max_offset)
        if start >= end:
            return
        if self._index_pending_keys(start, end):
            return
        window = min(end, start + max(KEY_INDEX_WINDOW, 2 * self.max_message_size))
        try:
            records = self.commitlog.iter_records(start, window)
        except CommitLogCorrupt as exc:
            log.error("the key index skips the commitlog from %d to %d: %s", start, end, exc)
            self.keys.add((), end)
            return
        reached = records[-1].next_offset if records else start
        self.keys.add(((r.physical_offset, r.store_timestamp, r.topic, r.properties) for r in records),
                      self._skip_padding(reached, end))

    def _index_pending_keys(self, start: int, end: int) -> bool:
        """Index the records this broker appended itself from memory while they follow on from ``start``
        (a gap can only be end-of-segment padding); False if they do not begin there (the log is read)."""
        pending, size = self._pending_keys, self.commitlog.segment_size
        while pending and pending[0][0] < start:
            pending.popleft()
        taken: list[tuple[int, int, str, dict[str, str]]] = []
        reached = start
        while pending and pending[0][0] + pending[0][1] <= end:
            offset, length, timestamp, topic, properties = pending[0]
            if offset != reached and not (offset % size == 0 and offset > reached):
                break
            taken.append((offset, timestamp, topic, properties))
            reached = offset + length
            pending.popleft()
        if not taken:
            return False
        self.keys.add(taken, self._skip_padding(reached, end))
        return True

    @property
    def keys_behind(self) -> bool:
        return self.keys.indexed < min(self.reput_offset, self.max_offset)

    def query_messages(self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int) -> list[MessageRecord]:
        """The confirmed messages of ``topic`` with ``key`` (one of its KEYS, or its unique key) stored within
        [begin_ts, end_ts]: the newest ``max_num`` of them, in log order (as RocketMQ's store answers)."""
        found = []
        for offset in self.keys.lookup(topic, key, max_num, begin_ts, end_ts):
            record = self.read_message(offset)
            if record is not None and record.topic == topic and offset > self.deleted.get(topic, -1) and (
                    key in record.keys.split(" ") or record.properties.get("UNIQ_KEY") == key):
                found.append(record)
        return sorted(found, key=lambda r: r.physical_offset)

    # ------------------------------------------------------------------ deleted topics
    @staticmethod
    def deletion_mark(topic: str) -> Message:
        """The record that deletes ``topic``'s messages so far once it is confirmed (TOPIC_DELETED)."""
        return Message(TOPIC_DELETED, topic.encode(), tags=topic, queue_id=0)

    def _note_marks(self, entries: list[tuple[str, int, int, int, int, str]]) -> None:
        for topic, _, _, phys, _, tags in entries:
            if topic == TOPIC_DELETED:
                self._mark(tags, phys)

    def _mark(self, topic: str, phys: int) -> None:
        if valid_topic(topic) and phys > self.deleted.get(topic, -1):
            self.deleted[topic] = phys
            log.info("topic %s deleted: its messages before commitlog offset %d are no longer served", topic, phys)

    def _load_marks(self) -> None:
        """The deletions the log holds, from the marks' queue (at open, and after a truncation cut some)."""
        self.deleted.clear()
        self._hidden.clear()
        cq = self.queues.queue(TOPIC_DELETED, 0)
        for phys, _, _ in cq.iter_entries(cq.min_offset) if cq is not None else ():
            record = self.commitlog.check_at(phys)
            if not isinstance(record, str) and record.topic == TOPIC_DELETED:
                self._mark(record.properties.get("TAGS", ""), phys)

    def _first_visible(self, topic: str, queue_id: int, cq: ConsumeQueue) -> int:
        """The queue's first readable offset: past what retention deleted and what a deletion mark hides."""
        at = self.deleted.get(topic)
        if at is None:
            return cq.min_offset
        key = (topic, queue_id)
        cached = self._hidden.get(key)
        if cached is None or cached[0] != at:  # (the mark's offset in the key: a later mark finds no stale value)
            cached = self._hidden[key] = (at, cq.first_at_or_after(at))
        return max(cq.min_offset, cached[1])

    def read_message(self, offset: int) -> MessageRecord | None:
        """The confirmed message at commitlog ``offset``, or None (no message starts there)."""
        if not self.commitlog.min_offset <= offset < self._confirm_offset:
            return None
        record = self.commitlog.read_record(offset)
        return record if record is not None and record.next_offset <= self._confirm_offset else None

    def set_master_flushed_offset(self, offset: int) -> None:
        """Record (durably) what the master's flushed offset is said to be."""
        self.master_flushed_offset = offset
        self._save_checkpoint(force=True)

    def _save_checkpoint(self, force: bool = False, dispatched: int | None = None, flushed: int | None = None) -> None:
        """Write the checkpoint (``flushed``: a new flushedOffset, recorded only once the file is written)."""
        doc = {"confirmOffset": self._confirm_offset,
               "dispatchedOffset": self.reput_offset if dispatched is None else dispatched,
               "flushedOffset": self._flushed_mark if flushed is None else flushed}
        if self.master_flushed_offset:  # written only once set, so the usual file stays as it was
            doc[MASTER_FLUSHED] = self.master_flushed_offset
        marker = tuple(doc.values())
        if force or marker != self._saved_confirm:
            atomic_write(self.checkpoint_path, encode_checkpoint(doc))
            self._saved_confirm = marker
        self._flushed_mark = doc["flushedOffset"]


def load_checkpoint(path: Path) -> tuple[dict[str, int], str]:
    """The checkpoint's fields ({} if there is none), and what is wrong with it ("" if nothing)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}, ""
    except OSError as exc:
        return {}, f"unreadable ({exc.strerror})"
    doc = _decode_checkpoint(raw)
    return ({}, "damaged (or written by an older version, without a CRC)") if doc is None else (doc, "")


def _keys(doc: dict[str, int]) -> tuple[str, ...]:
    return (*_CHECKPOINT_KEYS, MASTER_FLUSHED) if MASTER_FLUSHED in doc else _CHECKPOINT_KEYS


def _canonical(doc: dict[str, int]) -> bytes:
    return json.dumps({k: doc[k] for k in _keys(doc)}, separators=(",", ":")).encode()


def encode_checkpoint(doc: dict[str, int]) -> str:
    """``{"confirmOffset": .., "dispatchedOffset": .., "flushedOffset": .., "crc": ..}`` (and
    ``masterFlushedOffset`` before the CRC once it was set); the CRC is of the other fields written
    compactly in this order."""
    return json.dumps({**{k: doc[k] for k in _keys(doc)}, "crc": zlib.crc32(_canonical(doc))})


def _decode_checkpoint(raw: bytes) -> dict[str, int] | None:
    try:
        doc: Any = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(doc, dict) or set(doc) - {MASTER_FLUSHED} != {*_CHECKPOINT_KEYS, "crc"}:
        return None
    if any(type(v) is not int or v < 0 for v in doc.values()):
        return None
    fields = {k: int(doc[k]) for k in _keys(doc)}
    return fields if zlib.crc32(_canonical(fields)) == doc["crc"] else None
