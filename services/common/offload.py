"""Work on one request that can take long, such as decoding a large body, done on a worker thread so that
the event loop goes on serving everything else meanwhile.

Work on up to ``INLINE_BYTES`` of input is done where it is asked: that costs less than the hop to a
thread. Larger work goes to one worker thread, in the order it comes; at most ``max_pending`` pieces wait
or run at once, and a request beyond that is refused (``Busy``: the server answers SYSTEM_BUSY, as
RocketMQ does when its request queue is full) rather than held in memory. A worker thread shares the
interpreter with the loop (and, in a controller, with Raft's thread), so the work must hand it back often:
the decoders (fastjson.py) never call into C for long and take large values apart a little at a time, and
while the worker has work the interpreter switches threads every ``SWITCH_INTERVAL_S`` instead of every
5 ms (its default), so a thread that wants it waits about that long. The cyclic garbage collector is paused
while the worker runs: a large body builds hundreds of thousands of objects, and every full collection
meanwhile would walk them all in one go, holding the interpreter for hundreds of milliseconds.
"""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["INLINE_BYTES", "MAX_PENDING", "SWITCH_INTERVAL_S", "Busy", "Offload"]

T = TypeVar("T")

#: The most input decoded on the event loop itself (a few milliseconds at the worst).
INLINE_BYTES = 8 * 1024
#: The most large pieces of work waiting or running at once.
MAX_PENDING = 8
#: How often the interpreter switches threads while the worker has work.
SWITCH_INTERVAL_S = 0.001


class Busy(Exception):
    """Too much large work is already waiting."""


class Offload:
    def __init__(self, inline_bytes: int = INLINE_BYTES, max_pending: int = MAX_PENDING,
                 name: str = "offload") -> None:
        self.inline_bytes, self.max_pending, self.name = inline_bytes, max_pending, name
        self.pending = 0
        self._executor: ThreadPoolExecutor | None = None
        self._interval = sys.getswitchinterval()  # the interpreter's, put back when the worker is idle

    async def run(self, size: int, work: Callable[[], T]) -> T:
        """``work()``, on the worker thread if ``size`` (its input's bytes) is over ``inline_bytes``."""
        if size <= self.inline_bytes:
            return work()
        if self.pending >= self.max_pending:
            raise Busy(f"{self.pending} large requests are already being read here; try again shortly")
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self.name)
        if not self.pending:
            self._interval = sys.getswitchinterval()
            sys.setswitchinterval(min(self._interval, SWITCH_INTERVAL_S))
        self.pending += 1
        done = asyncio.wrap_future(self._executor.submit(_collector_paused, work))
        done.add_done_callback(self._finished)  # on the loop, when the thread is done (not when the asker is)
        return await asyncio.shield(done)

    def _finished(self, done: asyncio.Future[T]) -> None:
        self.pending -= 1
        if not self.pending:
            sys.setswitchinterval(self._interval)

    def close(self) -> None:
        """Drop the work not started; the piece running finishes on its own."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


def _collector_paused(work: Callable[[], T]) -> T:
    """``work()`` with automatic garbage collection off (only this worker turns it off and on)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        return work()
    finally:
        if was_on:
            gc.enable()
