"""Disk flushing: periodic fsync (ASYNC_FLUSH) or group commit (SYNC_FLUSH).

Group commit: writers register the offset they need durable and wait; one fsync, run in a worker
thread, releases every writer whose offset it covers. Writers arriving during an fsync are served by
the next one.

The consume queues and the checkpoint are derived data (rebuilt from the commitlog after a crash), so
they are fsynced less often, at most every ``flushIntervalConsumeQueue`` ms, as RocketMQ does: a flush
that releases writers then costs one fsync instead of one per queue plus two for the checkpoint.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time

from services.broker.store import MessageStore

log = logging.getLogger(__name__)

#: While flushes keep failing, one log line at most this often (each says how many it stands for).
FAILURE_LOG_S = 10.0


class FlushService:
    def __init__(self, store: MessageStore, sync_flush: bool, interval_ms: int, io_lock: threading.Lock,
                 index_interval_ms: int = 1000) -> None:
        self.store = store
        self.sync_flush = sync_flush
        self.interval = interval_ms / 1000
        self.index_interval = index_interval_ms / 1000
        self.io_lock = io_lock
        self._index_due = 0.0  # monotonic time from which the next flush includes queues and checkpoint
        self._indexed: tuple[int, int] | None = None  # (confirmOffset, reput offset) at that flush
        self.flushed_offset = 0  # set from the store when started (it is opened after construction)
        self._waiters: list[tuple[int, asyncio.Future[bool]]] = []
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.fsyncs = 0
        self._failing = False
        self._unlogged = 0  # failed flushes since the last line that said so
        self._next_failure_log = 0.0

    def start(self) -> None:
        self.flushed_offset = self.store.max_offset
        self._task = asyncio.create_task(self._run(), name="flush")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        await self.flush_now()

    async def wait_flushed(self, offset: int, timeout_ms: int) -> bool:
        """True once ``offset`` is durable; False after ``timeout_ms``."""
        if offset <= self.flushed_offset:
            return True
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiters.append((offset, future))
        self._wakeup.set()
        try:
            return await asyncio.wait_for(future, timeout_ms / 1000)
        except TimeoutError:
            return False

    async def flush_now(self, index: bool = True) -> int:
        """fsync the commitlog and, with ``index``, the consume queues and the checkpoint."""
        flushed = await asyncio.to_thread(self._flush, index)
        self.fsyncs += 1
        self.flushed_offset = max(self.flushed_offset, flushed)
        ready = [w for w in self._waiters if w[0] <= self.flushed_offset]
        self._waiters = [w for w in self._waiters if w[0] > self.flushed_offset]
        for _, future in ready:
            if not future.done():
                future.set_result(True)
        return flushed

    def _flush(self, index: bool) -> int:
        with self.io_lock:
            if index:
                self._indexed = (self.store.confirm_offset, self.store.reput_offset)
                self._index_due = time.monotonic() + self.index_interval
            return self.store.flush(index)

    def note_truncated(self, offset: int) -> None:
        self.flushed_offset = min(self.flushed_offset, offset)

    async def _run(self) -> None:
        while True:
            try:
                if self.sync_flush:
                    try:
                        await asyncio.wait_for(self._wakeup.wait(), self.interval)
                    except TimeoutError:
                        pass
                    self._wakeup.clear()
                else:
                    await asyncio.sleep(self.interval)
                index = time.monotonic() >= self._index_due
                if self.store.index_error is not None:
                    self.store.dispatch()  # the queues' disk refused a write: try again (on the loop, as always)
                if self.store.max_offset > self.flushed_offset or self._waiters or (index and (
                        (self.store.confirm_offset, self.store.reput_offset) != self._indexed or self.store.keys_behind)):
                    await self.flush_now(index)
                    self._recovered()
            except asyncio.CancelledError:
                raise
            except Exception:
                more = self._failure()
                if more is not None:  # the first failure, then one line every FAILURE_LOG_S while they go on
                    log.exception("flush failed; retrying%s", more)
                await asyncio.sleep(self.interval)

    def _failure(self) -> str | None:
        """Count a failed flush; what to add to its log line, or None if it is not logged."""
        now = time.monotonic()
        self._failing = True
        if now < self._next_failure_log:
            self._unlogged += 1
            return None
        more = f" ({self._unlogged} more failed since the last line)" if self._unlogged else ""
        self._unlogged, self._next_failure_log = 0, now + FAILURE_LOG_S
        return more

    def _recovered(self) -> None:
        if self._failing:
            log.warning("flush succeeds again")
            self._failing, self._unlogged, self._next_failure_log = False, 0, 0.0
