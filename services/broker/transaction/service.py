"""END_TRANSACTION's writes and the check-back loop, on the master only: the I/O around half.py and checks.py.

**Ending.** ``end`` finds the half message at the commitlog offset the producer names, checks that it is one
(the half topic, the producer group, the half queue offset), and stores the committed message and the op record
in one put (a rollback: the op record alone), answering SUCCESS once that put is stored. A transaction already
known resolved (its op record read or stored here) is not written again, so a flood of END_TRANSACTION for one
message writes one op record; one for an offset that holds no half message writes nothing.

**Checking.** Every ``transactionCheckInterval`` the loop reads the op records stored since its last turn, then
walks the half queue from its watermark (checks.py): a resolved entry is passed, a young one stops the walk, an
unresolved old one is stored again with its check count and its producer group is asked about that copy
(CHECK_TRANSACTION_STATE, oneway, to one live producer connection of the group from its heartbeats), a message
checked ``transactionCheckMax`` times is discarded to TRANS_CHECK_MAX_TIME_TOPIC. The watermarks move only past
what was read or stored with PUT_OK, and are written to disk (fsync, atomic rename) after each turn that moved
them. A turn does at most ``MAX_CHECKS`` checks and reads at most ``window`` op records ahead, so a flood of half
messages is worked through over several turns in bounded memory.

**At least once.** The committed message and its op record are one put: both are stored or neither (a put
that fails is retried by the producer, or by the check-back). A check-back may be sent twice for one
transaction: by a new master that resumes from progress older than the old master's last turn, or when a
producer's answer is lost; the producer then answers again, and a commit that is already resolved writes
nothing. What can still be stored twice is a commit whose op record a new master has not read (it was in the
part of the old master's log cut at the failover, so its commit was never acknowledged to anyone).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from services.broker.consumers import ConsumerGroups
from services.broker.record import MessageRecord
from services.broker.remoting_messages import WIRE, WireFields, to_pulled
from services.broker.store import MESSAGE_DAMAGED, Message, MessageStore
from services.broker.transaction.checks import DEFAULT_WINDOW, HalfEntry, OpIndex, Step, Verdict, plan
from services.broker.transaction.half import (
    COMMIT,
    HALF_TOPIC,
    OP_TOPIC,
    PGROUP,
    REAL_QID,
    REAL_TOPIC,
    ROLLBACK,
    TRAN_ID,
    CheckRules,
    committed,
    discarded,
    op_half_offsets,
    op_record,
    renewed,
    transaction_id,
)
from services.broker.transaction.progress import TransactionProgress, TransactionProgressFile
from services.common.clock import Clock
from services.common.codes import ResponseCode
from services.common.errors import MqctlError
from services.common.remoting_client import RemotingClient
from services.common.remoting_conn import RemotingConnection
from services.remoting import broker_headers as bh
from services.remoting.command import make_request
from services.remoting.errors import BodyError
from services.remoting.message import SocketAddress, encode_pulled
from services.remoting.mqctl_ext import GET_TRANSACTION_PROGRESS

if TYPE_CHECKING:
    from services.broker.broker import PutOutcome

__all__ = ["MAX_CHECKS", "TICK_S", "TransactionService"]

log = logging.getLogger(__name__)

TICK_S = 0.2
#: The most check-backs and discards of one turn, and the half entries read per batch of the walk.
MAX_CHECKS, READ_BATCH = 1_000, 256
_STORED = frozenset({"PUT_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"})
_CODES = {"SERVICE_NOT_AVAILABLE": ResponseCode.SERVICE_NOT_AVAILABLE, "MESSAGE_ILLEGAL": ResponseCode.MESSAGE_ILLEGAL}


class TransactionService:
    """Built with the check rules, the store, the progress file, the put path, whether the broker is master
    now, the clock, a remoting client (to copy the master's progress), the producer groups from heartbeats and
    the store host and broker name a check-back carries."""

    def __init__(self, rules: CheckRules, store: MessageStore, progress: TransactionProgressFile,
                 put: Callable[[list[Message]], Awaitable[PutOutcome]], is_master: Callable[[], bool],
                 clock: Clock, client: RemotingClient, producers: ConsumerGroups, store_host: SocketAddress,
                 broker_name: str, window: int = DEFAULT_WINDOW) -> None:
        self.rules, self.store, self.file, self.put = rules, store, progress, put
        self.is_master, self.clock, self.client = is_master, clock, client
        self.producers, self.store_host, self.broker_name, self.window = producers, store_host, broker_name, window
        self.index: OpIndex | None = None  # None: not checking (not master)
        self.half_offset = 0
        self.log_offset = 0
        self.checks_sent = 0
        self._next_turn = 0
        self._ending: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._opaque = itertools.count(1)
        self._pick = itertools.count()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="transaction-check")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self.client.close()

    async def _loop(self) -> None:
        while True:
            try:
                await self.tick()
            except Exception:  # a periodic task must survive anything; the next turn tries again
                log.exception("checking transactions failed; trying again")
            await asyncio.sleep(TICK_S)

    async def tick(self) -> None:
        if not self.is_master():
            if self.index is not None:
                log.info("not master any more: transactions are no longer checked here")
                self.index = None
            return
        if self.index is None:
            self._resume()
        now = self.clock.now_ms()
        if now >= self._next_turn:
            self._next_turn = now + self.rules.interval_ms
            await self.turn()

    def _resume(self) -> None:
        progress = self.file.progress
        self.index = OpIndex(progress.op_offset, self.window)
        self.half_offset, self.log_offset = progress.half_offset, progress.log_offset
        self._next_turn = self.clock.now_ms() + self.rules.interval_ms
        log.info("master: checking transactions from half offset %d, op offset %d", progress.half_offset,
                 progress.op_offset)

    def progress(self) -> TransactionProgress:
        assert self.index is not None
        return TransactionProgress(self.half_offset, self.index.watermark, self.log_offset)

    # ------------------------------------------------------------------ one turn
    async def turn(self) -> None:
        index = self.index
        assert index is not None
        half_end = self.store.get_messages(HALF_TOPIC, 0, 0, 0).max_offset
        caught_up = self._read_ops(index, half_end)
        for _ in range(MAX_CHECKS // READ_BATCH + 4):
            if not self.is_master() or not await self._walk(index, half_end, caught_up):
                break
        index.advance(self.half_offset)
        progress = self.progress()
        await asyncio.to_thread(self.file.save, progress)

    def _read_ops(self, index: OpIndex, half_end: int) -> bool:
        """Read the op records stored since the last turn (as many as the window has room for); True if every
        one stored has been read."""
        while index.room():
            got = self.store.get_messages(OP_TOPIC, 0, index.scanned, min(index.room(), READ_BATCH))
            if got.status == "OFFSET_TOO_SMALL":
                index.skip_to(got.next_begin_offset)
                continue
            if got.status == MESSAGE_DAMAGED:
                log.error("an op record cannot be read and is passed: %s", got.remark)
                index.read(index.scanned, "", (), half_end)
                continue
            for record in got.records:
                index.read(record.queue_offset, record.properties.get(TRAN_ID, ""),
                           op_half_offsets(record.tags, record.body), half_end)
                self.log_offset = max(self.log_offset, record.next_offset)
            if not got.records:
                return index.scanned >= got.max_offset
        return index.scanned >= self.store.get_messages(OP_TOPIC, 0, 0, 0).max_offset

    async def _walk(self, index: OpIndex, half_end: int, caught_up: bool) -> bool:
        """One batch of the walk over the half queue; True if it should go on."""
        start = self.half_offset
        if start >= half_end:
            return False
        got = self.store.get_messages(HALF_TOPIC, 0, start, min(READ_BATCH, half_end - start))
        if got.status == "OFFSET_TOO_SMALL":
            self.half_offset = got.next_begin_offset
            return True
        records = {r.queue_offset: r for r in got.records}
        if not records and got.status != MESSAGE_DAMAGED:
            return False
        last = max(records) if records else start
        entries = [_entry(o, records.get(o)) for o in range(start, last + 1)]
        steps = plan(self.rules, entries, self.clock.now_ms(), index, caught_up, MAX_CHECKS)
        if not steps:
            return False
        done = await self._act(steps, records)
        self.half_offset = done
        return done == last + 1

    async def _act(self, steps: list[Step], records: dict[int, MessageRecord]) -> int:
        """Store the check copies and discards of ``steps``, then send the check-backs; the half offset the
        watermark may move to."""
        writes = [s for s in steps if s.verdict in (Verdict.CHECK, Verdict.DISCARD)]
        if not writes:
            return steps[-1].offset + 1
        messages = [_write(s, records[s.offset]) for s in writes]
        outcome = await self.put(messages)
        if outcome.status != "PUT_OK":
            log.warning("storing %d transaction check(s): %s %s; tried again", len(messages), outcome.status,
                        outcome.remark)
            return writes[0].offset
        self.log_offset = max(self.log_offset, outcome.results[-1].next_offset)
        for step, result in zip(writes, outcome.results, strict=True):
            if step.verdict is Verdict.CHECK:
                self._ask(result.commit_log_offset)
            else:
                log.warning("half message at offset %d checked %s times, discarded to %s", step.offset,
                            self.rules.check_max, messages[writes.index(step)].topic)
        return steps[-1].offset + 1

    def _ask(self, commit_log_offset: int) -> None:
        """Send CHECK_TRANSACTION_STATE for the copy at ``commit_log_offset`` to a producer of its group."""
        record = self.store.commitlog.check_at(commit_log_offset)
        if isinstance(record, str):
            log.error("the check copy at %d cannot be read back: %s", commit_log_offset, record)
            return
        group = record.properties.get(PGROUP, "")
        channels = [c for c in self.producers.channels(group) if isinstance(c, RemotingConnection)]
        if not channels:
            log.info("no producer of group %s is connected: transaction %s is checked again later", group[:120],
                     transaction_id(record.properties))
            return
        channel = channels[next(self._pick) % len(channels)]
        tid = transaction_id(record.properties)
        message = to_pulled(record, self.store_host)
        qid = record.properties.get(REAL_QID, "0")
        try:
            body = encode_pulled(replace(message, topic=record.properties[REAL_TOPIC],
                                         queue_id=int(qid) if qid.isdecimal() and len(qid) < 9 else 0))
        except ValueError as exc:
            log.error("transaction %s cannot be sent for a check: %s", tid, exc)
            return
        header = bh.CheckTransactionStateRequestHeader(
            tran_state_table_offset=record.queue_offset, commit_log_offset=record.physical_offset, topic=HALF_TOPIC,
            msg_id=tid, transaction_id=tid, offset_msg_id=message.msg_id, bname=self.broker_name)
        channel.send(make_request(bh.CHECK_TRANSACTION_STATE, self._next_opaque(), header.to_ext_fields(), body,
                                  oneway=True))
        self.checks_sent += 1

    def _next_opaque(self) -> int:
        value = next(self._opaque)
        if value >= 2**31 - 1:
            self._opaque = itertools.count(1)
        return value

    # ------------------------------------------------------------------ END_TRANSACTION
    async def end(self, header: bh.EndTransactionRequestHeader) -> tuple[int, str | None]:
        """Commit or roll back the half message the header names: (response code, remark)."""
        kind = header.commit_or_rollback
        if kind not in (COMMIT, ROLLBACK):
            return ResponseCode.SUCCESS, None  # not known yet: the check-back will ask again
        found = self._half(header)
        if isinstance(found, str):
            return ResponseCode.SYSTEM_ERROR, found
        now = self.clock.now_ms()
        born = WireFields.decode(found.properties.get(WIRE), found.store_timestamp).born_timestamp
        if self.rules.end_refused(found.properties, born, now, bool(header.from_transaction_check)):
            return ResponseCode.ILLEGAL_OPERATION, "the check immunity time has passed: the check-back decides"
        tid = transaction_id(found.properties)
        if self.index is None and self.is_master():
            self._resume()  # an END before the loop's first turn as master: it is known resolved from here on
        if tid in self._ending or (self.index is not None and self.index.resolved(found.queue_offset, tid)):
            return ResponseCode.SUCCESS, None  # already ended (or being ended): written once
        messages = [op_record(found.queue_offset, tid)]
        if kind == COMMIT:
            props = dict(found.properties)
            keys, tags = props.pop("KEYS", ""), props.pop("TAGS", "")
            real = committed(keys, tags, props, found.body, self.store.queue_nums)
            if real is None:
                return ResponseCode.SYSTEM_ERROR, "the half message names no real topic"
            messages.insert(0, real)
        return await self._store_end(tid, messages)

    async def _store_end(self, tid: str, messages: list[Message]) -> tuple[int, str | None]:
        if tid:
            self._ending.add(tid)
        try:
            outcome = await self.put(messages)
        finally:
            self._ending.discard(tid)
        if outcome.status not in _STORED:
            return _CODES.get(outcome.status, ResponseCode.SYSTEM_ERROR), f"{outcome.status} {outcome.remark}".strip()
        if self.index is not None:
            self.index.note(tid)
        return ResponseCode.SUCCESS, None

    def _half(self, header: bh.EndTransactionRequestHeader) -> MessageRecord | str:
        """The half message an END_TRANSACTION names, or why it names none (RocketMQ's remarks)."""
        if header.commit_log_offset < 0:
            return "Find prepared transaction message failed"
        found = self.store.commitlog.check_at(header.commit_log_offset)
        if isinstance(found, str) or found.topic != HALF_TOPIC:
            return "Find prepared transaction message failed"
        if found.properties.get(PGROUP) != header.producer_group:
            return "The producer group wrong"
        if found.queue_offset != header.tran_state_table_offset:
            return "The transaction state table offset wrong"
        return found

    # ------------------------------------------------------------------ replication
    def answer(self) -> bytes:
        """The progress on disk, as GET_TRANSACTION_PROGRESS answers it."""
        return self.file.progress.encode()

    async def sync_from(self, address: str) -> bool:
        """Copy the master's progress once this broker's log is confirmed as far as it counts (progress.py)."""
        if self.index is not None:
            return True  # checking: this broker's own progress is the one
        try:
            reply = await self.client.call(address, make_request(GET_TRANSACTION_PROGRESS, 0))
            if reply.code != ResponseCode.SUCCESS:
                log.warning("transaction progress from master %s: refused (%s)", address, reply.remark)
                return False
            progress = TransactionProgress.decode(reply.body)
        except (MqctlError, BodyError) as exc:
            log.warning("transaction progress from master %s: %s", address, exc)
            return False
        if self.index is not None or progress.log_offset > self.store.confirm_offset:
            return True  # what it counts is not all here yet: taken at a later sync
        await asyncio.to_thread(self.file.save, progress)
        return True


def _entry(offset: int, record: MessageRecord | None) -> HalfEntry:
    if record is None:
        return HalfEntry(offset, "", None, 0)
    born = WireFields.decode(record.properties.get(WIRE), record.store_timestamp).born_timestamp
    return HalfEntry(offset, transaction_id(record.properties), record.properties, born)


def _write(step: Step, record: MessageRecord) -> Message:
    props = dict(record.properties)
    keys, tags = props.pop("KEYS", ""), props.pop("TAGS", "")
    if step.verdict is Verdict.CHECK:
        return renewed(keys, tags, props, record.body, step.check_times)
    return discarded(keys, tags, props, record.body)
