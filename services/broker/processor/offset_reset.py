"""INVOKE_BROKER_TO_RESET_OFFSET (222): an administrator moves a consumer group's offsets of a topic back (or
forward) to a time, or one queue to an offset, while the group's consumers run (mqadmin's
``resetOffsetByTime``). Served as RocketMQ's AdminBrokerProcessor serves it with ``useServerSideResetOffset``
(its default since 5.0): the broker computes each queue's offset, commits it, and tells each consumer at its
next pull of the queue (processor/pull.py answers PULL_OFFSET_MOVED with the new offset); the consumers'
own commits of a reset queue are ignored until then (consumer_offsets.OffsetTable).

``plan`` is the pure part: which queues move where, or why not, with RocketMQ's codes and remarks:

========================================  =======================  ==============================================
asked                                     code                     remark
========================================  =======================  ==============================================
of a slave                                SYSTEM_ERROR             Can not reset offset in slave broker
a topic this broker does not hold         TOPIC_NOT_EXIST          Topic T does not exist
a group this broker does not know         SUBSCRIPTION_GROUP_      Group G does not exist
                                          NOT_EXIST
``queueId`` with ``offset`` outside       SYSTEM_ERROR             Target offset O not in consume queue range
[min, max + 1]                                                     [MIN-MAX]
========================================  =======================  ==============================================

A queue's offset for a time is the first message stored at or after it (time_search.py, the LOWER boundary);
a negative time is the end of the queue. Without ``queueId``, every readable queue of the topic moves. A group
is known here when it has settings (subscription_groups.py), a client connected, or committed offsets:
RocketMQ's broker creates a group's settings at its first heartbeat (autoCreateSubscriptionGroup), ours
does not, so those three together stand for what RocketMQ's table would hold. With ``authToken`` set, the
code counts only when signed with it, as the other codes that change state.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from services.broker.consumer_offsets import ConsumerOffsets, TableFull
from services.broker.processor.common import answer, check_queue, offset_at_time, queue_bounds
from services.broker.store import MessageStore
from services.broker.topic_rules import Refusal
from services.broker.topics import MAX_QUEUE_NUMS
from services.common.codes import ResponseCode
from services.common.remoting_conn import RemotingConnection
from services.remoting import admin_headers as ah
from services.remoting.admin_bodies import ResetOffsetBody
from services.remoting.broker_bodies import MessageQueue
from services.remoting.command import RemotingCommand
from services.remoting.errors import HeaderFieldError
from services.remoting.namesrv_bodies import TopicConfig
from services.remoting.subscription_bodies import GROUP_PATTERN

__all__ = ["OffsetResetProcessor", "plan"]

log = logging.getLogger(__name__)


def plan(header: ah.ResetOffsetRequestHeader, config: TopicConfig | None, group_known: bool,
         bounds: Callable[[int], tuple[int, int]], by_time: Callable[[int, int], int]) -> dict[int, int] | Refusal:
    """The new offset of each queue to reset (queue id -> offset), or the refusal (see the module's table).
    ``bounds(queue)`` is a queue's (min, max) offsets, ``by_time(queue, timestamp)`` its offset at a time."""
    if config is None:
        return Refusal(ResponseCode.TOPIC_NOT_EXIST, f"Topic {header.topic} does not exist")
    if not group_known:
        return Refusal(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {header.group} does not exist")

    def at_time(queue_id: int) -> int:
        return bounds(queue_id)[1] if header.timestamp < 0 else by_time(queue_id, header.timestamp)

    if header.queue_id >= 0:
        offset = header.offset
        if offset is None or offset == -1:
            return {header.queue_id: at_time(header.queue_id)}
        low, high = bounds(header.queue_id)
        if (low >= 0 and offset < low) or offset > high + 1:
            return Refusal(ResponseCode.SYSTEM_ERROR, f"Target offset {offset} not in consume queue range [{low}-{high}]")
        return {header.queue_id: offset}
    return {queue_id: at_time(queue_id) for queue_id in range(config.read_queue_nums)}


class OffsetResetProcessor:
    """Built with the store (queue bounds and store times), the offsets, whether the broker is master, each
    topic's config, whether a group is known (see the module's docstring), what to tell the waiting pulls, and
    the admin processor's signature check."""

    def __init__(self, broker_name: str, store: MessageStore, offsets: ConsumerOffsets, is_master: Callable[[], bool],
                 topic_config: Callable[[str], TopicConfig | None], group_known: Callable[[str], bool],
                 on_reset: Callable[[], None], unsigned: Callable[[RemotingCommand], str | None]) -> None:
        self.broker_name = broker_name
        self.store = store
        self.offsets = offsets
        self.is_master = is_master
        self.topic_config = topic_config
        self.group_known = group_known
        self.on_reset = on_reset
        self.unsigned = unsigned

    async def serve(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        h = ah.ResetOffsetRequestHeader.from_ext_fields(request.ext_fields)
        check_queue(h.topic, max(h.queue_id, 0), MAX_QUEUE_NUMS, "ResetOffsetRequestHeader")
        if GROUP_PATTERN.fullmatch(h.group) is None:
            raise HeaderFieldError("ResetOffsetRequestHeader", "group", "must be 1-255 of letters, digits, '%', '|', "
                                   "'_' and '-'")
        refusal = self.unsigned(request)
        if refusal is not None:
            return answer(request, ResponseCode.NO_PERMISSION, refusal)
        log.info("reset of %s@%s to time %d (queue %d, offset %s) asked by %s", h.topic, h.group, h.timestamp,
                 h.queue_id, h.offset, conn.peer)
        if not self.is_master():
            return answer(request, ResponseCode.SYSTEM_ERROR, "Can not reset offset in slave broker")
        offsets = await asyncio.to_thread(plan, h, self.topic_config(h.topic), self.group_known(h.group),
                                          lambda queue_id: queue_bounds(self.store, h.topic, queue_id),
                                          lambda queue_id, at: offset_at_time(self.store, h.topic, queue_id, at))
        if isinstance(offsets, Refusal):
            log.warning("reset of %s@%s refused: %s", h.topic, h.group, offsets.remark)
            return answer(request, offsets.code, offsets.remark)
        if not offsets:
            return answer(request, ResponseCode.SYSTEM_ERROR, "No queues to reset.")
        try:
            self.offsets.table.reset(h.group, h.topic, offsets)
        except TableFull as exc:
            return answer(request, ResponseCode.SYSTEM_ERROR, str(exc))
        self.on_reset()
        log.info("reset %s@%s: %s", h.topic, h.group, ", ".join(f"queue {q} to {o}" for q, o in sorted(offsets.items())))
        body = ResetOffsetBody({MessageQueue(h.topic, self.broker_name, q): o for q, o in offsets.items()})
        return answer(request, ResponseCode.SUCCESS, None, None, body.encode())

