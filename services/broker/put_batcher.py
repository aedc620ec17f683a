"""Group commit for sends that arrive together: the messages of every send request that reaches the broker
in one turn of the event loop go to the store as one put, and each request gets its own part of the result.

A producer with many single-message sends in flight (RocketMQ's clients pipeline them on one connection)
would otherwise cost one commitlog write, one consume-queue write and one round of ack bookkeeping per
message. One put of many messages costs about as much as one put of one, and waits for the same acks:
a message is acknowledged when the replicas hold the batch's end, which is at or after its own.

What is shared is only what a put decides for all its messages anyway: the role check, the quorum checks
and the durability wait. A message that is not valid on its own is refused before it joins a batch
(``validate``), so it cannot fail its neighbours. A batch holds at most ``max_messages`` messages and
``max_bytes`` of bodies; more waits for the next turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from services.broker.broker import PutOutcome
    from services.broker.store import Message

__all__ = ["PutBatcher"]

log = logging.getLogger(__name__)

Put = Callable[[list["Message"]], Awaitable["PutOutcome"]]


#: Called once with a request's share of the outcome, or with the exception the put raised.
Done = Callable[["PutOutcome | BaseException"], None]


class PutBatcher:
    def __init__(self, put: Put, max_messages: int = 1024, max_bytes: int = 4 * 2**20) -> None:
        self._put = put
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self._waiting: list[tuple[list[Message], Done]] = []
        self._scheduled = False
        self._running: set[asyncio.Task[None]] = set()

    async def put(self, messages: list[Message]) -> PutOutcome:
        """``messages`` stored with whatever else arrives in this turn; this request's share of the outcome
        (its own results, in order)."""
        future: asyncio.Future[PutOutcome] = asyncio.get_running_loop().create_future()

        def done(outcome: PutOutcome | BaseException) -> None:
            if future.done():
                return
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
        self.submit(messages, done)
        return await future

    def submit(self, messages: list[Message], done: Done) -> None:
        """As ``put``, without a coroutine: ``done`` gets the share (a server answering many sends in one
        turn saves a task per send)."""
        self._waiting.append((messages, done))
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._start)

    def _start(self) -> None:
        self._scheduled = False
        while self._waiting:
            batch = self._take()
            task = asyncio.get_running_loop().create_task(self._run(batch))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    def _take(self) -> list[tuple[list[Message], Done]]:
        count = size = 0
        taken = 0
        for messages, _ in self._waiting:
            count += len(messages)
            size += sum(len(m.body) for m in messages)
            if taken and (count > self.max_messages or size > self.max_bytes):
                break
            taken += 1
        batch, self._waiting = self._waiting[:taken], self._waiting[taken:]
        return batch

    async def _run(self, batch: list[tuple[list[Message], Done]]) -> None:
        try:
            outcome = await self._put([m for messages, _ in batch for m in messages])
        except BaseException as exc:
            for _, done in batch:
                _call(done, exc)
            if not isinstance(exc, Exception):
                raise
            return
        if len(batch) == 1:
            _call(batch[0][1], outcome)
            return
        start = 0
        for messages, done in batch:
            share = outcome.results[start:start + len(messages)] if outcome.results else []
            start += len(messages)
            _call(done, type(outcome)(outcome.status, share, outcome.remark, outcome.master_address))


def _call(done: Done, outcome: PutOutcome | BaseException) -> None:
    """One request's callback; one that fails must not keep the others of its batch from their answers."""
    try:
        done(outcome)
    except Exception:
        log.exception("answering a send failed")
