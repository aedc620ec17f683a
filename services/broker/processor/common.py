"""What the broker's processors share: the answer builder, the checks of a queue's name and number, a
queue's bounds, and the type of one dispatch-table entry."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from services.broker.consumer_offsets import GROUP_PATTERN
from services.broker.record import valid_topic
from services.broker.store import MessageStore
from services.broker.time_search import offset_by_time
from services.common.remoting_conn import RemotingConnection
from services.remoting.command import RemotingCommand, make_response
from services.remoting.errors import HeaderFieldError

__all__ = ["MASTER_ID", "Route", "answer", "check_queue", "offset_at_time", "queue_bounds"]

#: One entry of the dispatch table: a processor's method serving one request code.
Route = Callable[[RemotingCommand, RemotingConnection], Awaitable[RemotingCommand | None]]
#: RocketMQ's MixAll.MASTER_ID.
MASTER_ID = 0


def answer(request: RemotingCommand, code: int, remark: str | None = None, ext_fields: dict[str, str] | None = None,
           body: bytes = b"") -> RemotingCommand | None:
    """``make_response``, or None for a oneway request (served, never answered)."""
    return None if request.is_oneway else make_response(request, code, remark, ext_fields, body)


def check_queue(topic: str, queue_id: int, queues: int, header: str, group: str | None = None) -> None:
    """A request's topic, queue id (of ``queues``) and group, or HeaderFieldError naming the bad one."""
    if not valid_topic(topic):
        raise HeaderFieldError(header, "topic", "must be 1-127 of letters, digits, '%', '|', '_' and '-'")
    if not 0 <= queue_id < queues:
        raise HeaderFieldError(header, "queueId", f"must be 0..{queues - 1}")
    if group is not None and GROUP_PATTERN.fullmatch(group) is None:
        raise HeaderFieldError(header, "consumerGroup", "must be 1-255 of letters, digits, '%', '|', '_' and '-'")


def offset_at_time(store: MessageStore, topic: str, queue_id: int, timestamp: int, upper: bool = False) -> int:
    """The queue's offset of the messages stored at ``timestamp`` (time_search.py's table; ``upper``: its UPPER
    boundary)."""
    low, high = queue_bounds(store, topic, queue_id)

    def store_time(offset: int) -> int | None:
        records = store.get_messages(topic, queue_id, offset, 1).records
        return records[0].store_timestamp if records else None
    return offset_by_time(low, high, store_time, timestamp, upper)


def queue_bounds(store: MessageStore, topic: str, queue_id: int) -> tuple[int, int]:
    """The queue's (min offset, max offset); (0, 0) for a queue never written. A read of no message at
    offset 0 gives both without reading a record."""
    got = store.get_messages(topic, queue_id, 0, 0)
    return got.min_offset, got.max_offset
