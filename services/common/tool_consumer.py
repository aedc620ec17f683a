"""How mqadmin's consumeMessage reads a topic, step by step, so that the command line can print what it
prints (``--format mqadmin``), over the same requests: 31 GET_MIN_OFFSET and 30 GET_MAX_OFFSET of each
queue, then 11 PULL_MESSAGE from the first offset to the last.

* The whole topic: its queues in the order of a ``HashSet<MessageQueue>`` (javaorder.message_queue_order),
  each read from its min offset to its max, until the count runs out. A queue holding more than what is
  left is cut (``The older N message of the Q queue will be provided``); what is left is the count less
  the queue's span less one, as mqadmin counts it, so a count can run below zero and is then never used up.
* One queue: from the given offset (at least its min) to its max, at most ``count`` messages.
* Each pull asks for the rest of the range. A pull that finds messages is followed by the next one from
  where it ended; one that finds no new message (or an illegal offset) ends the queue, and says so.

The reading is separated from the requests (``Source``), so that it is tested without a broker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from services.common.codes import ResponseCode
from services.common.errors import RemoteError
from services.common.remoting_admin import Call, queue_bounds
from services.remoting import broker_headers as bh
from services.remoting.command import RequestCode, make_request
from services.remoting.message import PulledMessage, decode_pulled

__all__ = ["Found", "Older", "PastEnd", "Pulled", "QueueEnd", "RemotingSource", "Source", "TOOLS_GROUP",
           "ToolConsumer"]

#: The consumer group mqadmin pulls with when none is given (MixAll.TOOLS_CONSUMER_GROUP).
TOOLS_GROUP = "TOOLS_CONSUMER"
#: PullSysFlag with only the subscription bit: no offset committed, no long polling.
_SUBSCRIPTION_ONLY = 0x4
_JAVA_INT_MAX = 2**31 - 1
#: A pull answer's code, as the Java client names its PullStatus.
PULL_STATUS: dict[int, str] = {ResponseCode.SUCCESS: "FOUND", ResponseCode.PULL_NOT_FOUND: "NO_NEW_MSG",
               ResponseCode.PULL_RETRY_IMMEDIATELY: "NO_MATCHED_MSG", ResponseCode.PULL_OFFSET_MOVED: "OFFSET_ILLEGAL"}


@dataclass(frozen=True)
class Pulled:
    status: str
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[PulledMessage] = field(default_factory=list)


class Source(Protocol):
    def bounds(self, queue_id: int) -> tuple[int, int]:
        """The queue's min and max offsets."""

    def pull(self, queue_id: int, offset: int, max_nums: int) -> Pulled:
        """Up to ``max_nums`` messages of the queue from ``offset``."""


# What a reading shows, in order (mqctl/render_consume.py prints each as mqadmin does).
@dataclass(frozen=True)
class Older:
    """A cut: ``count`` messages of ``queue_id`` (of the one queue asked for, when None) are shown."""

    count: int
    queue_id: int | None


@dataclass(frozen=True)
class Found:
    queue_id: int
    pulled: Pulled


@dataclass(frozen=True)
class QueueEnd:
    """A pull that found nothing: ``finished`` ends the queue (no new message, illegal offset)."""

    queue_id: int
    status: str
    offset: int
    finished: bool


@dataclass(frozen=True)
class PastEnd:
    """The offset asked for is beyond the queue's max offset."""

    queue_id: int
    offset: int


Event = Older | Found | QueueEnd | PastEnd


class ToolConsumer:
    """One reading: ``events`` in order, and ``ends`` the offset each queue was read up to."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.events: list[Event] = []
        self.ends: dict[int, int] = {}

    def read_topic(self, queue_ids: list[int], count: int, starts: Callable[[int, int], int]) -> None:
        """Every queue of ``queue_ids`` (already in mqadmin's order), each from ``starts(queue_id, min)``."""
        left = count
        for queue_id in queue_ids:
            if left == 0:
                return
            low, high = self.source.bounds(queue_id)
            low = starts(queue_id, low)
            if high - low > left:
                self.events.append(Older(left, queue_id))
                high, left = low + left - 1, 0
            else:
                left = left - (high - low) - 1
            self._read_range(queue_id, low, high)

    def read_queue(self, queue_id: int, offset: int, count: int) -> None:
        """One queue from ``offset`` (at least its min offset), at most ``count`` messages."""
        low, high = self.source.bounds(queue_id)
        if offset > high:
            self.events.append(PastEnd(queue_id, offset))
            return
        low = max(low, offset)
        if high - low > count:
            self.events.append(Older(count, None))
            high = low + count - 1
        self._read_range(queue_id, low, high)

    def _read_range(self, queue_id: int, low: int, high: int) -> None:
        offset = low
        while offset <= high:
            pulled = self.source.pull(queue_id, offset, min(high - offset + 1, _JAVA_INT_MAX))
            moved, offset = pulled.next_begin_offset != offset, pulled.next_begin_offset
            self.ends[queue_id] = offset
            if pulled.status == "FOUND":
                self.events.append(Found(queue_id, pulled))
            elif pulled.status == "NO_MATCHED_MSG":
                self.events.append(QueueEnd(queue_id, pulled.status, offset, finished=False))
            else:
                self.events.append(QueueEnd(queue_id, pulled.status, offset, finished=True))
                return
            if not moved:
                return  # a broker that does not move the offset on would be asked for ever


class RemotingSource:
    """A ``Source`` over RocketMQ's requests to one broker (ours serve them too)."""

    def __init__(self, call: Call, topic: str, group: str) -> None:
        self.call = call
        self.topic = topic
        self.group = group

    def bounds(self, queue_id: int) -> tuple[int, int]:
        return queue_bounds(self.call, self.topic, queue_id)

    def pull(self, queue_id: int, offset: int, max_nums: int) -> Pulled:
        header = bh.PullMessageRequestHeader(
            consumer_group=self.group, topic=self.topic, queue_id=queue_id, queue_offset=offset,
            max_msg_nums=max_nums, sys_flag=_SUBSCRIPTION_ONLY, commit_offset=0, suspend_timeout_millis=0,
            subscription="*", sub_version=0, expression_type="TAG")
        answer = self.call(make_request(RequestCode.PULL_MESSAGE, 0, header.to_ext_fields()))
        status = PULL_STATUS.get(answer.code)
        if status is None:
            raise RemoteError(answer.code, f"PULL_MESSAGE: {answer.remark or answer.code}")
        result = bh.PullMessageResponseHeader.from_ext_fields(answer.ext_fields)
        messages = decode_pulled(answer.body) if status == "FOUND" else []
        return Pulled(status, result.next_begin_offset, result.min_offset, result.max_offset, messages)
