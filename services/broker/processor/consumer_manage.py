"""A consumer group's offsets, members and queue locks: RocketMQ's ConsumerManageProcessor, and the
lock codes its AdminBrokerProcessor serves.

QUERY_CONSUMER_OFFSET (14) and UPDATE_CONSUMER_OFFSET (15) read and write the broker's offset table
(consumer_offsets.py); GET_CONSUMER_LIST_BY_GROUP (38) lists the group's clients, which each client reads
to share out a topic's queues; LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42) lock and release the queues an
orderly consumer takes (rebalance_lock.py). The locks are this broker's alone (RocketMQ's default,
``lockInStrictMode=false``): a request's ``onlyThisBroker`` changes nothing.
"""

from __future__ import annotations

import logging
from typing import TypeVar

from services.broker.config import BrokerConfig
from services.broker.consumer_offsets import GROUP_PATTERN, ConsumerOffsets, TableFull
from services.broker.consumers import ConsumerGroups
from services.broker.processor.common import answer, check_queue, queue_bounds
from services.broker.rebalance_lock import RebalanceLocks
from services.broker.record import valid_topic
from services.broker.store import MessageStore
from services.broker.topics import MAX_QUEUE_NUMS
from services.common.clock import Clock
from services.common.codes import ResponseCode
from services.common.remoting_conn import RemotingConnection
from services.remoting import broker_bodies as bb
from services.remoting import broker_headers as bh
from services.remoting.command import RemotingCommand
from services.remoting.errors import BodyError, HeaderFieldError

__all__ = ["ConsumerManageProcessor", "read_lock_body"]

log = logging.getLogger(__name__)
B = TypeVar("B", bound=bb.LockBatchRequestBody)


class ConsumerManageProcessor:
    """Built with the store (a queue's bounds), the offset table, the consumer groups and the clock (the
    locks' times)."""

    def __init__(self, config: BrokerConfig, store: MessageStore, offsets: ConsumerOffsets,
                 consumers: ConsumerGroups, clock: Clock) -> None:
        self.config = config
        self.store = store
        self.offsets = offsets
        self.consumers = consumers
        self.clock = clock
        self.locks = RebalanceLocks(config.rebalanceLockMaxLiveTime)

    def _check(self, topic: str, queue_id: int, header: str, group: str | None = None) -> None:
        check_queue(topic, queue_id, MAX_QUEUE_NUMS, header, group)

    async def query_offset(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        h = bh.QueryConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        self._check(h.topic, h.queue_id, "QueryConsumerOffsetRequestHeader", h.consumer_group)
        offset = self.offsets.table.query(h.consumer_group, h.topic, h.queue_id)
        if offset is None and h.set_zero_if_not_found is not False:
            # RocketMQ answers 0 for a group with no offset when the queue still starts at 0 and its first
            # message is in memory; every stored message counts as in memory here.
            low, high = queue_bounds(self.store, h.topic, h.queue_id)
            offset = 0 if low <= 0 < high else None
        if offset is None:
            remark = "Not found, do not set to zero, maybe this group boot first" if h.set_zero_if_not_found \
                is False else "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"
            return answer(request, ResponseCode.QUERY_NOT_FOUND, remark)
        return answer(request, ResponseCode.SUCCESS, None,
                      bh.QueryConsumerOffsetResponseHeader(offset=offset).to_ext_fields())

    async def update_offset(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        h = bh.UpdateConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        self._check(h.topic, h.queue_id, "UpdateConsumerOffsetRequestHeader", h.consumer_group)
        if h.commit_offset < 0:
            raise HeaderFieldError("UpdateConsumerOffsetRequestHeader", "commitOffset", "must not be negative")
        if self.offsets.table.reset_pending(h.consumer_group, h.topic, h.queue_id):
            return answer(request, ResponseCode.SUCCESS, "Offset has been previously reset")
        refused = self.commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        return answer(request, ResponseCode.SYSTEM_ERROR, refused) if refused else \
            answer(request, ResponseCode.SUCCESS)

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> str | None:
        """Commit the group's offset of a queue; why not, if the table is full. A queue an administrator has
        reset and the group has not pulled since keeps the reset offset (consumer_offsets.OffsetTable)."""
        if self.offsets.table.reset_pending(group, topic, queue_id):
            log.info("commit of %s@%s queue %d at %d ignored: the queue was reset and the group has not pulled it "
                     "since", topic, group, queue_id, offset)
            return None
        try:
            self.offsets.table.commit(group, topic, queue_id, offset)
        except TableFull as exc:
            log.warning("consumer offset of %s@%s not kept: %s", topic, group, exc)
            return str(exc)
        return None

    async def consumer_list(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        group = bh.GetConsumerListByGroupRequestHeader.from_ext_fields(request.ext_fields).consumer_group
        ids = self.consumers.client_ids(group)
        if not ids:
            return answer(request, ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group[:255]}")
        return answer(request, ResponseCode.SUCCESS, None, None,
                      bb.GetConsumerListByGroupResponseBody(tuple(ids)).encode())

    async def lock_batch(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        body = read_lock_body(request.body, bb.LockBatchRequestBody)
        held = self.locks.try_lock_batch(body.consumer_group or "", body.mq_set, body.client_id or "",
                                         self.clock.now_ms())
        if len(held) < len(body.mq_set):
            log.info("group %s: client %s asked for %d queue locks, holds %d (the rest are another client's)",
                     body.consumer_group, body.client_id, len(body.mq_set), len(held))
        return answer(request, ResponseCode.SUCCESS, None, None, bb.LockBatchResponseBody(held).encode())

    async def unlock_batch(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        body = read_lock_body(request.body, bb.UnlockBatchRequestBody)
        self.locks.unlock_batch(body.consumer_group or "", body.mq_set, body.client_id or "")
        return answer(request, ResponseCode.SUCCESS)


def read_lock_body(data: bytes, kind: type[B]) -> B:
    """A lock or unlock request's body, its group, client id and queues checked. Raises BodyError."""
    body = kind.decode(data)
    if GROUP_PATTERN.fullmatch(body.consumer_group or "") is None:
        raise BodyError(f"consumerGroup {(body.consumer_group or '')[:80]!r} is not a group name")
    if not 0 < len(body.client_id or "") <= 1024:
        raise BodyError("clientId must be 1-1024 characters")
    for queue in body.mq_set:
        if not valid_topic(queue.topic) or not 0 < len(queue.broker_name) <= 255 or queue.queue_id < 0:
            raise BodyError(f"mqSet: {queue.topic[:80]!r}/{queue.broker_name[:80]!r}/{queue.queue_id} is not a "
                            "queue (a topic name, a broker name of 1-255 characters, a queue id from 0)")
    return body
