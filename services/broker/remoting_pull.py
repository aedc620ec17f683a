"""PULL_MESSAGE over the remoting protocol: reading a queue, the answer's code, and long polling.

A pull answer carries at most ``max_msg_nums`` messages (capped at ``MAX_PULL_MESSAGES``) and about
``MAX_PULL_BYTES`` of them (at least one), read from the store in small chunks so a pull of large messages
never holds more than the answer in memory. Messages whose tag the subscription does not take are
skipped; if every message read was skipped the answer is ``PULL_RETRY_IMMEDIATELY`` with the offset past
them (RocketMQ's NO_MATCHED_MESSAGE), so the consumer moves on.

The answer's code, as RocketMQ's PullMessageProcessor gives it for each store status:

=====================================  ==========================  =========================================
store status (RocketMQ's name)          code                        nextBeginOffset
=====================================  ==========================  =========================================
FOUND                                   SUCCESS                     after the last message in the answer
only unmatched tags (NO_MATCHED_MSG)    PULL_RETRY_IMMEDIATELY      after the last message read
queue unknown (NO_MATCHED_LOGIC_QUEUE)  PULL_NOT_FOUND at offset 0, 0
                                        else PULL_OFFSET_MOVED
at the end (OFFSET_OVERFLOW_ONE)        PULL_NOT_FOUND              the requested offset
beyond the end (OFFSET_OVERFLOW_BADLY)  PULL_OFFSET_MOVED           the queue's max offset
below the start (OFFSET_TOO_SMALL)      PULL_OFFSET_MOVED           the queue's min offset
damaged record (ours: MESSAGE_DAMAGED)  SYSTEM_ERROR, the remark    —
=====================================  ==========================  =========================================

**Long polling.** A ``PULL_NOT_FOUND`` on the master, for a request whose sysFlag allows suspending, is
not answered at once: the request waits until a message is put (the broker tells ``Arrivals``), checking
again at least every ``RECHECK_S``, for at most its ``suspendTimeoutMillis`` (capped at
``MAX_SUSPEND_MS``), then answers what it finds. At most ``MAX_HELD`` pulls wait at a time; beyond that a
pull is answered at once. A slave does not hold pulls: like RocketMQ's it sends the consumer to the master
(``suggestWhichBrokerId`` 0 and ``PULL_RETRY_IMMEDIATELY`` when it has nothing).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from services.broker.remoting_messages import pulled_bytes, raw_tags
from services.broker.store import MESSAGE_DAMAGED, MessageStore
from services.common.codes import ResponseCode
from services.remoting.message import SocketAddress, TagFilter

__all__ = ["MAX_HELD", "MAX_PULL_BYTES", "MAX_PULL_MESSAGES", "MAX_SUSPEND_MS", "RECHECK_S", "Arrivals",
           "PullRead", "hold", "read_queue", "slave_answer"]

MAX_PULL_MESSAGES = 1024
MAX_PULL_BYTES = 1024 * 1024
MAX_SUSPEND_MS = 30_000
MAX_HELD = 10_000
RECHECK_S = 1.0
_CHUNK = 32  # records read from the store at a time
_SCAN_LIMIT = 4096  # records looked at for one answer when tags filter them out

#: Our store's statuses under RocketMQ's GetMessageStatus names (an answer's remark).
_STATUS_NAMES = {"NO_NEW_MSG": "OFFSET_OVERFLOW_ONE"}


@dataclass
class PullRead:
    """What one read of a queue gives: the answer's code, remark, offsets and body."""

    code: int
    remark: str
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[bytes] = field(default_factory=list)

    @property
    def body(self) -> bytes:
        return b"".join(self.messages)


class Arrivals:
    """Wakes the pulls waiting for messages: ``notify`` after every put."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.held = 0

    def current(self) -> asyncio.Event:
        """The event the next ``notify`` sets: take it before reading, so no put is missed in between."""
        return self._event

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()


def read_queue(store: MessageStore, store_host: SocketAddress, topic: str, queue_id: int, offset: int,
               max_nums: int, tags: TagFilter, max_bytes: int = MAX_PULL_BYTES) -> PullRead:
    """Read up to ``max_nums`` matching messages from ``offset``; see the module's table for the codes."""
    max_nums = max(1, min(max_nums, MAX_PULL_MESSAGES))
    found: list[bytes] = []
    size = scanned = 0
    position = offset
    bounds: tuple[int, int] | None = None
    full = False
    while not full and len(found) < max_nums and scanned < _SCAN_LIMIT:
        got = store.get_raw(topic, queue_id, position, min(_CHUNK, max_nums - len(found)))
        if bounds is None:
            bounds = (got.min_offset, got.max_offset)
        if got.status != "FOUND":
            if scanned == 0:
                return _not_found(got.status, got.remark, offset, got.next_begin_offset, *bounds)
            break
        for record in got.records:
            if found and size + record.size > max_bytes:
                full = True
                break
            scanned, position = scanned + 1, record.queue_offset + 1
            if tags.tags is None or tags.matches(raw_tags(record)):
                found.append(pulled_bytes(record, store_host))
                size += len(found[-1])
    assert bounds is not None
    if found:
        return PullRead(ResponseCode.SUCCESS, "FOUND", position, *bounds, found)
    return PullRead(ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE", position, *bounds)


def _not_found(status: str, remark: str, offset: int, next_begin: int, min_offset: int, max_offset: int) -> PullRead:
    name = _STATUS_NAMES.get(status, status)
    if status == MESSAGE_DAMAGED:
        return PullRead(ResponseCode.SYSTEM_ERROR, remark, offset, min_offset, max_offset)
    if status in ("NO_MATCHED_LOGIC_QUEUE", "NO_MESSAGE_IN_QUEUE"):
        code = ResponseCode.PULL_NOT_FOUND if offset == 0 else ResponseCode.PULL_OFFSET_MOVED
    elif status == "NO_NEW_MSG":
        code = ResponseCode.PULL_NOT_FOUND
    else:  # OFFSET_OVERFLOW_BADLY, OFFSET_TOO_SMALL
        code = ResponseCode.PULL_OFFSET_MOVED
    return PullRead(code, name, next_begin, min_offset, max_offset)


def slave_answer(read: PullRead) -> PullRead:
    """A slave serves what it has and otherwise sends the consumer back to the master at once."""
    if read.code in (ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR):
        return read
    return PullRead(ResponseCode.PULL_RETRY_IMMEDIATELY, read.remark, read.next_begin_offset, read.min_offset,
                    read.max_offset)


async def hold(arrivals: Arrivals, event: asyncio.Event, timeout_ms: int,
               again: Callable[[], PullRead]) -> PullRead | None:
    """Wait for messages, at most ``timeout_ms`` (capped); ``again()`` re-reads the queue. Returns the first
    read that is not PULL_NOT_FOUND, or the last read at the deadline; None if too many pulls wait."""
    if arrivals.held >= MAX_HELD:
        return None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(max(timeout_ms, 0), MAX_SUSPEND_MS) / 1000
    arrivals.held += 1
    try:
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return again()
            try:
                await asyncio.wait_for(event.wait(), min(remaining, RECHECK_S))
            except TimeoutError:
                pass
            event = arrivals.current()
            result = again()
            if result.code != ResponseCode.PULL_NOT_FOUND:
                return result
    finally:
        arrivals.held -= 1
