"""Consumer offsets: how far each consumer group has consumed each queue of this broker (RocketMQ's
ConsumerOffsetManager and its ``consumerOffset.json``).

``OffsetTable`` is the pure part: ``topic@group`` -> queue id -> the offset of the next message to
consume, committed by clients (UPDATE_CONSUMER_OFFSET, or a pull carrying a commit) and read back
(QUERY_CONSUMER_OFFSET). Its ``version`` moves with every change, so the I/O shell knows when to write.

``ConsumerOffsets`` is the I/O shell, owned by the broker:

* **Durability.** The table is written to ``<store>/config/consumerOffset.json`` through
  ``durable.atomic_write`` (temp file, fsync, rename, fsync of the directory) within a second of a change
  (``FLUSH_INTERVAL_S``) and when the broker stops; the previous content is kept as ``.bak`` first. A crash
  loses at most the last second of commits: consumers then get some messages again, never fewer. The
  file carries a CRC of its table; a file that fails to parse or to match it stops the broker with an
  error naming the file (docs/operations.md, "Damaged consumerOffset.json").
* **Replication.** A slave asks its master for the whole table every ``SYNC_INTERVAL_S``
  (GET_ALL_CONSUMER_OFFSET, as RocketMQ's SlaveSynchronize does) and merges it: the master's entries
  replace its own. After a failover the new master serves what it last copied, so a consumer group
  resumes where it was at most one sync interval (plus the flush interval) before the old master died,
  consuming those messages again.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path

from services.broker.record import valid_topic
from services.common.codes import ResponseCode
from services.common.durable import atomic_write
from services.common.errors import MqctlError
from services.common.remoting_client import RemotingClient
from services.remoting import fastjson
from services.remoting.broker_bodies import ConsumerOffsetSerializeWrapper
from services.remoting.broker_headers import GET_ALL_CONSUMER_OFFSET
from services.remoting.command import make_request
from services.remoting.errors import BodyError

log = logging.getLogger(__name__)

__all__ = ["FLUSH_INTERVAL_S", "GROUP_PATTERN", "MAX_KEYS", "MAX_QUEUES", "SYNC_INTERVAL_S", "ConsumerOffsets",
           "ConsumerOffsetsDamaged", "OffsetTable", "TableFull", "decode_file", "encode_file", "valid_key"]

#: RocketMQ's group name rule (Validators.checkGroup): the name becomes part of a table key.
GROUP_PATTERN = re.compile(r"[%|a-zA-Z0-9_-]{1,255}")
#: At most this many topic@group entries: a client cannot grow the table (and its file) without bound.
MAX_KEYS = 100_000
#: At most this many queues in one entry copied from a master (a topic has defaultTopicQueueNums).
MAX_QUEUES = 1024
FLUSH_INTERVAL_S = 1.0
SYNC_INTERVAL_S = 3.0
FILE_NAME = "consumerOffset.json"


class ConsumerOffsetsDamaged(MqctlError):
    """consumerOffset.json cannot be read back as written; the broker does not start."""


class TableFull(Exception):
    """A commit would add a topic@group entry beyond MAX_KEYS."""


def valid_key(key: str) -> bool:
    """``topic@group`` with a valid topic and group (a topic holds no ``@``)."""
    topic, at, group = key.partition("@")
    return bool(at) and valid_topic(topic) and GROUP_PATTERN.fullmatch(group) is not None


class OffsetTable:
    """The offsets, and the resets an administrator made that the group's consumers have not yet been told of.

    **Resets** (INVOKE_BROKER_TO_RESET_OFFSET, RocketMQ's server-side reset): ``reset`` commits the new offsets
    and marks each queue until the group's next pull of it, which ``take_reset`` answers with the new offset
    (the consumer then moves to it). While a queue is marked, the group's own commits of it are ignored
    (``reset_pending``): a consumer that has not yet pulled since the reset still holds its old position and
    commits it every few seconds, which would undo the reset. The marks are this broker's memory only, as
    RocketMQ's are: a broker that restarts, or a new master, has the reset offsets (committed, and copied
    to the slaves) but not the marks.
    """

    def __init__(self, entries: Mapping[str, Mapping[int, int]] | None = None) -> None:
        self._table: dict[str, dict[int, int]] = {k: dict(v) for k, v in (entries or {}).items()}
        self._resets: dict[tuple[str, int], int] = {}
        self.version = 0

    @staticmethod
    def key(group: str, topic: str) -> str:
        return f"{topic}@{group}"

    def __len__(self) -> int:
        return len(self._table)

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = self.key(group, topic)
        queues = self._table.get(key)
        if queues is None:
            if len(self._table) >= MAX_KEYS:
                raise TableFull(f"the consumer offset table already holds {MAX_KEYS} topic@group entries")
            queues = self._table[key] = {}
        if queues.get(queue_id) != offset:
            queues[queue_id] = offset
            self.version += 1

    def reset(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        """Commit ``offsets`` (queue id -> offset) for the group and mark each queue reset (see the class).
        Raises TableFull, before anything changes, when the group has no entry and the table is full."""
        key = self.key(group, topic)
        if key not in self._table and len(self._table) >= MAX_KEYS:
            raise TableFull(f"the consumer offset table already holds {MAX_KEYS} topic@group entries")
        for queue_id, offset in offsets.items():
            self.commit(group, topic, queue_id, offset)
            self._resets[(key, queue_id)] = offset

    def reset_pending(self, group: str, topic: str, queue_id: int) -> bool:
        return (self.key(group, topic), queue_id) in self._resets

    def take_reset(self, group: str, topic: str, queue_id: int) -> int | None:
        """The offset a reset moved the queue to, if the group has not pulled the queue since; the mark goes."""
        return self._resets.pop((self.key(group, topic), queue_id), None)

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        queues = self._table.get(self.key(group, topic))
        return None if queues is None else queues.get(queue_id)

    def topics_of(self, group: str) -> set[str]:
        """The topics ``group`` has committed offsets of (RocketMQ's whichTopicByConsumer)."""
        return {k.partition("@")[0] for k in self._table if k.partition("@")[2] == group}

    def remove_group(self, group: str) -> int:
        """Forget every offset of ``group`` (DELETE_SUBSCRIPTIONGROUP with cleanOffset); how many entries went."""
        return self._remove([k for k in self._table if k.partition("@")[2] == group])

    def remove_topic(self, topic: str) -> int:
        """Forget every group's offsets of ``topic`` (DELETE_TOPIC_IN_BROKER, RocketMQ's cleanOffsetByTopic); how
        many entries went."""
        return self._remove([k for k in self._table if k.partition("@")[0] == topic])

    def _remove(self, gone: list[str]) -> int:
        for key in gone:
            del self._table[key]
        self._resets = {mark: offset for mark, offset in self._resets.items() if mark[0] not in gone}
        if gone:
            self.version += 1
        return len(gone)

    def groups_of(self, topic: str) -> set[str]:
        """The groups that committed offsets of ``topic`` (RocketMQ's whichGroupByTopic)."""
        return {k.partition("@")[2] for k in self._table if k.partition("@")[0] == topic}

    def merge(self, other: ConsumerOffsetSerializeWrapper) -> int:
        """Take every entry of ``other`` (a master's table); returns how many offsets changed. Entries
        beyond MAX_KEYS are left out. A table holding an entry that is not topic@group, or one with more
        than MAX_QUEUES queues, is refused whole (BodyError) before anything is taken."""
        for key, queues in other.offset_table.items():
            if not valid_key(key) or len(queues) > MAX_QUEUES:
                raise BodyError(f"offsetTable entry {key[:80]!r} is not topic@group with at most {MAX_QUEUES} queues")
        changed = 0
        for key, queues in other.offset_table.items():
            if key not in self._table and len(self._table) >= MAX_KEYS:
                continue
            mine = self._table.setdefault(key, {})
            for queue_id, offset in queues.items():
                if mine.get(queue_id) != offset:
                    mine[queue_id] = offset
                    changed += 1
        if changed:
            self.version += 1
        return changed

    def snapshot(self) -> ConsumerOffsetSerializeWrapper:
        return ConsumerOffsetSerializeWrapper({k: dict(v) for k, v in self._table.items()})


# ------------------------------------------------------------------------------------------ the file


def _table_text(wrapper: ConsumerOffsetSerializeWrapper) -> str:
    return fastjson.dumps(wrapper.to_json()["offsetTable"])


def encode_file(wrapper: ConsumerOffsetSerializeWrapper) -> bytes:
    """``{"crc":C,"offsetTable":{"topic@group":{0:12,...}}}``: RocketMQ's content (queue ids bare, as
    fastjson writes them) plus the CRC32 of the offsetTable text exactly as written."""
    table = _table_text(wrapper)
    return f'{{"crc":{zlib.crc32(table.encode())},"offsetTable":{table}}}'.encode()


def decode_file(raw: bytes, path: Path) -> ConsumerOffsetSerializeWrapper:
    """The table of a file ``encode_file`` wrote; ConsumerOffsetsDamaged naming the file otherwise."""
    try:
        doc = fastjson.loads(raw)
        if not isinstance(doc, dict) or set(doc) != {"crc", "offsetTable"} or type(doc["crc"]) is not int:
            raise BodyError("not a table with its crc")
        wrapper = ConsumerOffsetSerializeWrapper.decode(raw)
    except BodyError as exc:
        raise ConsumerOffsetsDamaged(f"{path} is damaged ({exc}); see docs/operations.md, "
                                     "'Damaged consumerOffset.json'") from None
    if zlib.crc32(_table_text(wrapper).encode()) != doc["crc"]:
        raise ConsumerOffsetsDamaged(f"{path} is damaged (its offsets do not match its crc); see "
                                     "docs/operations.md, 'Damaged consumerOffset.json'")
    for key in wrapper.offset_table:
        if not valid_key(key):
            raise ConsumerOffsetsDamaged(f"{path} is damaged (entry {key[:80]!r} is not topic@group); see "
                                         "docs/operations.md, 'Damaged consumerOffset.json'")
    return wrapper


# -------------------------------------------------------------------------------------- the I/O shell


class ConsumerOffsets:
    """The broker's table with its file and, on a slave, the copy from the master."""

    def __init__(self, store_dir: Path, timeout_s: float = 3.0) -> None:
        self.path = store_dir / "config" / FILE_NAME
        self.table = OffsetTable()
        self._saved_version = 0
        self._saved_bytes: bytes | None = None
        self._client = RemotingClient(timeout_s)
        self._tasks: list[asyncio.Task[None]] = []
        # one write at a time: a write cancelled at shutdown goes on in its thread while stop() writes again,
        # and both use the same temporary file
        self._write_lock = threading.Lock()

    def load(self) -> None:
        """Read the file (none yet: an empty table). Raises ConsumerOffsetsDamaged."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise ConsumerOffsetsDamaged(f"{self.path} cannot be read ({exc.strerror})") from None
        self.table = OffsetTable(decode_file(raw, self.path).offset_table)
        self._saved_bytes = raw
        log.info("consumer offsets: %d topic@group entries from %s", len(self.table), self.path)

    def save(self) -> None:
        """Write the table now if it changed since the last write (the previous file kept as .bak). Only
        where nothing else changes the table (start-up, tests); the running broker uses ``flush``."""
        if self._dirty():
            version, data = self.table.version, encode_file(self.table.snapshot())
            self._write(self._saved_bytes, data)
            self._saved_version, self._saved_bytes = version, data

    async def flush(self) -> None:
        """``save`` for the running broker: the table is encoded on the event loop (where it changes), the
        file written in a thread."""
        if self._dirty():
            version, data = self.table.version, encode_file(self.table.snapshot())
            await asyncio.to_thread(self._write, self._saved_bytes, data)
            self._saved_version, self._saved_bytes = version, data

    def _dirty(self) -> bool:
        return self.table.version != self._saved_version or self._saved_bytes is None

    def _write(self, previous: bytes | None, data: bytes) -> None:
        with self._write_lock:
            if previous is not None:
                atomic_write(self.path.with_name(FILE_NAME + ".bak"), previous)
            atomic_write(self.path, data)

    def start(self, master_address: Callable[[], str | None] | None = None) -> None:
        """``master_address()`` is the master to copy from while this broker is a slave, else None; without
        it (the broker's slave_sync.py copies) only the flushing runs."""
        self._tasks = [asyncio.create_task(self._flush_loop(), name="consumer-offsets-flush")]
        if master_address is not None:
            self._tasks.append(asyncio.create_task(self._sync_loop(master_address), name="consumer-offsets-sync"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        await self._client.close()
        await self.flush()

    async def _flush_loop(self) -> None:
        failing = False
        while True:
            await asyncio.sleep(FLUSH_INTERVAL_S)
            if self.table.version != self._saved_version:
                try:
                    await self.flush()
                except OSError as exc:
                    if not failing:  # once, not every second of a full disk
                        log.error("cannot write %s: %s; retrying every %.0f s", self.path, exc, FLUSH_INTERVAL_S)
                    failing = True
                    continue
                if failing:
                    log.warning("%s is written again", self.path)
                    failing = False

    async def _sync_loop(self, master_address: Callable[[], str | None]) -> None:
        while True:
            await asyncio.sleep(SYNC_INTERVAL_S)
            address = master_address()
            if address:
                await self.sync_from(address)

    async def sync_from(self, address: str) -> bool:
        """Copy the master's table once; False (and a warning) when it could not be had."""
        try:
            answer = await self._client.call(address, make_request(GET_ALL_CONSUMER_OFFSET, 0))
            if answer.code != ResponseCode.SUCCESS:
                log.warning("consumer offsets from master %s: refused (%s)", address, answer.remark)
                return False
            changed = self.table.merge(ConsumerOffsetSerializeWrapper.decode(answer.body))
        except (MqctlError, BodyError) as exc:
            log.warning("consumer offsets from master %s: %s", address, exc)
            return False
        if changed:
            log.debug("consumer offsets: %d copied from master %s", changed, address)
        return True
