"""The loop that delivers delayed and timed messages, on the master only: the I/O around due_queue.py.

Every ``TICK_S`` it asks whether the broker is master. When it becomes master it takes the delivery
progress it has on disk (its own, or the last copied from the old master: delay_offsets.py) and reads each
schedule queue from its watermark; then, each turn, reads what was stored since, stores what is due in its
real topic through the broker's put path (``Broker.put``: the role, quorum and durability rules of any send)
and, once that put answers PUT_OK, moves the watermarks and writes them to disk. A put that fails leaves the
messages waiting for the next turn: they are delivered again, never skipped. When the broker stops being
master the loop stops delivering at once (a slave's put is refused anyway) and forgets what it had read.

While the broker is a slave, ``sync_from`` copies the master's progress (GET_ALL_DELAY_OFFSET, 45).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from services.broker.schedule.delay_offsets import DelayOffsetFile, DelayProgress
from services.broker.schedule.due_queue import DEFAULT_WINDOW, DueQueue
from services.broker.schedule.levels import SCHEDULE_TOPIC, TIMER_TOPIC, DelayRules, real_message
from services.broker.store import MESSAGE_DAMAGED, Message, MessageIllegal, MessageStore
from services.common.clock import Clock
from services.common.codes import ResponseCode
from services.common.errors import MqctlError
from services.common.remoting_client import RemotingClient
from services.remoting.broker_headers import GET_ALL_DELAY_OFFSET
from services.remoting.command import make_request
from services.remoting.errors import BodyError

if TYPE_CHECKING:
    from services.broker.broker import PutOutcome

__all__ = ["DELIVER_BATCH", "TICK_S", "ScheduleService"]

log = logging.getLogger(__name__)

#: How often the loop looks for due messages (so a message is delivered at most about this late).
TICK_S = 0.1
#: The most entries read, and messages delivered with one put, per queue and turn.
READ_BATCH, DELIVER_BATCH = 512, 32
Key = tuple[str, int]


class ScheduleService:
    """Built with the rules, the store it reads, the progress file, the put path, whether the broker is master
    now, the clock and a remoting client (for copying the master's progress)."""

    def __init__(self, rules: DelayRules, store: MessageStore, offsets: DelayOffsetFile,
                 put: Callable[[list[Message]], Awaitable[PutOutcome]], is_master: Callable[[], bool],
                 clock: Clock, client: RemotingClient, window: int = DEFAULT_WINDOW) -> None:
        self.rules, self.store, self.offsets, self.put = rules, store, offsets, put
        self.is_master, self.clock, self.client, self.window = is_master, clock, client, window
        self.queues: dict[Key, DueQueue] | None = None  # None: not delivering (not master)
        self.log_offset = 0
        self.delivered = 0
        self._task: asyncio.Task[None] | None = None
        self._failing: str | None = None

    def keys(self) -> list[Key]:
        return [(SCHEDULE_TOPIC, level - 1) for level in range(1, len(self.rules.levels) + 1)] + [(TIMER_TOPIC, 0)]

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="schedule")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self.client.close()

    async def _loop(self) -> None:
        while True:
            try:
                await self.turn()
            except Exception:  # a periodic task must survive anything; the next turn tries again
                log.exception("delivering delayed messages failed; trying again")
            await asyncio.sleep(TICK_S)

    # ------------------------------------------------------------------ one turn
    async def turn(self) -> None:
        if not self.is_master():
            if self.queues is not None:
                log.info("not master any more: delayed and timed messages are no longer delivered here")
                self.queues = None
            return
        if self.queues is None:
            self.queues = self._resume()
        now = self.clock.now_ms()
        moved = False
        for key, queue in self.queues.items():
            self._read(key, queue, now)
            moved |= await self._deliver(key, queue, now)
            if not self.is_master():
                break
        if moved:
            progress = self.progress()
            await asyncio.to_thread(self.offsets.save, progress)

    def _resume(self) -> dict[Key, DueQueue]:
        progress = self.offsets.progress
        self.log_offset = progress.log_offset
        queues = {key: DueQueue(progress.timer if key[0] == TIMER_TOPIC else progress.level(key[1] + 1),
                                self.window) for key in self.keys()}
        log.info("master: delivering delayed and timed messages from %s (timer queue from %d)",
                 {k[1] + 1: q.watermark for k, q in queues.items() if k[0] == SCHEDULE_TOPIC and q.watermark},
                 progress.timer)
        return queues

    def progress(self) -> DelayProgress:
        assert self.queues is not None
        levels = {k[1] + 1: q.watermark for k, q in self.queues.items() if k[0] == SCHEDULE_TOPIC and q.watermark}
        return DelayProgress(levels, self.queues[(TIMER_TOPIC, 0)].watermark, self.log_offset)

    def _read(self, key: Key, queue: DueQueue, now: int) -> None:
        """Note the due time of each entry stored since the last turn (as many as the window has room for)."""
        room = min(queue.room(), READ_BATCH)
        if room == 0:
            return
        got = self.store.get_messages(key[0], key[1], queue.scanned, room)
        if got.status == "OFFSET_TOO_SMALL":
            queue.skip_to(got.next_begin_offset)
            got = self.store.get_messages(key[0], key[1], queue.scanned, room)
        if got.status == MESSAGE_DAMAGED:
            log.error("a held message cannot be read and is skipped: %s", got.remark)
            queue.read(queue.scanned, None)
            return
        for record in got.records:
            queue.read(record.queue_offset,
                       self.rules.due_ms(key[0], key[1], record.store_timestamp, record.properties, now))

    async def _deliver(self, key: Key, queue: DueQueue, now: int) -> bool:
        """Store what is due in its real topic; True if the watermark moved."""
        offsets = queue.due(now, DELIVER_BATCH)
        if not offsets:
            return False
        messages, done = [], []
        for offset in offsets:
            message = self._real(key, offset)
            if message is None:
                done.append(offset)  # nothing to deliver: skipped, as RocketMQ skips what it cannot rebuild
                continue
            messages.append(message)
        stored = True
        if messages:
            outcome = await self.put(messages)
            stored = outcome.status == "PUT_OK"
            if stored:
                self.log_offset = max(self.log_offset, outcome.results[-1].next_offset)
                self.delivered += len(messages)
                self._failing = None
            elif outcome.status != self._failing:
                self._failing = outcome.status
                log.warning("delivering %d due message(s) of %s/%d: %s %s; tried again", len(messages), *key,
                            outcome.status, outcome.remark)
        return queue.delivered(done + (offsets if stored else []))

    def _real(self, key: Key, offset: int) -> Message | None:
        got = self.store.get_messages(key[0], key[1], offset, 1)
        if not got.records:
            log.error("the held message at %s/%d offset %d cannot be read (%s %s): skipped", *key, offset,
                      got.status, got.remark)
            return None
        record = got.records[0]
        props = dict(record.properties)
        keys, tags = props.pop("KEYS", ""), props.pop("TAGS", "")
        message = real_message(key[0], keys, tags, props, record.body, self.store.queue_nums)
        if message is None:
            log.error("the held message at %s/%d offset %d names no real topic: skipped", *key, offset)
            return None
        try:
            self.store.validate(message)
        except MessageIllegal as exc:
            log.error("the held message at %s/%d offset %d cannot be delivered (%s): skipped", *key, offset, exc)
            return None
        return message

    # ------------------------------------------------------------------ replication
    def answer(self) -> bytes:
        """The progress on disk, as GET_ALL_DELAY_OFFSET answers it."""
        return self.offsets.progress.encode()

    async def sync_from(self, address: str) -> bool:
        """Copy the master's progress, once this broker's log is confirmed as far as the deliveries it
        counts (delay_offsets.py); False (and a warning) when it could not be had."""
        if self.queues is not None:
            return True  # delivering: this broker's own progress is the one
        try:
            answer = await self.client.call(address, make_request(GET_ALL_DELAY_OFFSET, 0))
            if answer.code != ResponseCode.SUCCESS:
                log.warning("delay offsets from master %s: refused (%s)", address, answer.remark)
                return False
            progress = DelayProgress.decode(answer.body)
        except (MqctlError, BodyError) as exc:
            log.warning("delay offsets from master %s: %s", address, exc)
            return False
        if self.queues is not None or progress.log_offset > self.store.confirm_offset:
            return True  # the deliveries it counts are not all here yet: taken at a later sync
        await asyncio.to_thread(self.offsets.save, progress)
        return True
