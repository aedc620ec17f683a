"""What a queue holds: GET_MAX_OFFSET (30), GET_MIN_OFFSET (31) and SEARCH_OFFSET_BY_TIMESTAMP (29, the
offset of the messages stored at a time: time_search.py). RocketMQ's AdminBrokerProcessor serves these; they are kept apart here because every consumer asks them, and no administrator's right is
involved."""

from __future__ import annotations

from services.broker.config import BrokerConfig
from services.broker.processor.common import answer, check_queue, offset_at_time, queue_bounds
from services.broker.store import MessageStore
from services.broker.topics import MAX_QUEUE_NUMS
from services.common.codes import ResponseCode
from services.common.remoting_conn import RemotingConnection
from services.remoting import broker_headers as bh
from services.remoting.command import RemotingCommand

__all__ = ["QueryProcessor"]


class QueryProcessor:
    """Built with the store and the configuration (the queues of a topic)."""

    def __init__(self, config: BrokerConfig, store: MessageStore) -> None:
        self.config = config
        self.store = store

    async def max_offset(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        h = bh.GetMaxOffsetRequestHeader.from_ext_fields(request.ext_fields)
        check_queue(h.topic, h.queue_id, MAX_QUEUE_NUMS, "GetMaxOffsetRequestHeader")
        offset = queue_bounds(self.store, h.topic, h.queue_id)[1]
        return answer(request, ResponseCode.SUCCESS, None, bh.GetMaxOffsetResponseHeader(offset=offset).to_ext_fields())

    async def min_offset(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        h = bh.GetMinOffsetRequestHeader.from_ext_fields(request.ext_fields)
        check_queue(h.topic, h.queue_id, MAX_QUEUE_NUMS, "GetMinOffsetRequestHeader")
        offset = queue_bounds(self.store, h.topic, h.queue_id)[0]
        return answer(request, ResponseCode.SUCCESS, None, bh.GetMinOffsetResponseHeader(offset=offset).to_ext_fields())

    async def search_offset(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        h = bh.SearchOffsetRequestHeader.from_ext_fields(request.ext_fields)
        check_queue(h.topic, h.queue_id, MAX_QUEUE_NUMS, "SearchOffsetRequestHeader")
        offset = offset_at_time(self.store, h.topic, h.queue_id, h.timestamp, h.upper)
        return answer(request, ResponseCode.SUCCESS, None, bh.SearchOffsetResponseHeader(offset=offset).to_ext_fields())
