"""PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361): RocketMQ's PullMessageProcessor, which serves both alike.

The reading of a queue, the answer's codes and long polling are remoting_pull.py's; this processor reads
the header, checks the topic's config (it exists, is readable, the queue is one of its readable ones:
topic_rules.pull_refusal), finds the subscription (the request's, or the group's last heartbeat's), commits
the offset a pull carries (on the master) and holds a pull that found nothing. The first pull of a queue
after an administrator reset the group's offset of it (222, processor/offset_reset.py) is answered
PULL_OFFSET_MOVED with the reset offset as nextBeginOffset (RocketMQ's OFFSET_RESET status): the consumer
moves there; a held pull is answered so at once.

A slave that knows its group's master answers as RocketMQ's PullMessageProcessor does when the smallest
broker id of its group is the master's: what it has, else PULL_RETRY_IMMEDIATELY at once, suggesting the
master (``suggestWhichBrokerId`` 0). A slave that knows no master (the master is gone and none is elected
yet) serves a pull as the master would, holding it until a message comes or its suspend timeout.
"""

from __future__ import annotations

from collections.abc import Callable

from services.broker.config import BrokerConfig
from services.broker.consumers import ConsumerGroups
from services.broker.processor.common import MASTER_ID, answer, check_queue, queue_bounds
from services.broker.remoting_pull import MAX_PULL_BYTES, Arrivals, PullRead, hold, read_queue, slave_answer
from services.broker.store import MessageStore
from services.broker.topic_rules import pull_refusal
from services.broker.topics import MAX_QUEUE_NUMS
from services.common.codes import ResponseCode
from services.common.remoting_conn import RemotingConnection
from services.remoting import broker_headers as bh
from services.remoting.command import RemotingCommand
from services.remoting.message import SocketAddress, TagFilter
from services.remoting.namesrv_bodies import TopicConfig

__all__ = ["PULL_COMMIT_OFFSET", "PULL_SUBSCRIPTION", "PULL_SUSPEND", "PullProcessor"]

#: PullSysFlag bits.
PULL_COMMIT_OFFSET, PULL_SUSPEND, PULL_SUBSCRIPTION = 0x1, 0x2, 0x4


#: ForbiddenType.GROUP_FORBIDDEN, in the refusal's header: the group may not consume.
GROUP_FORBIDDEN = "2"


class PullProcessor:
    """Built with the store, the groups' subscriptions, the put notifications, whether the broker is master
    now and whether it knows a master, how to commit a consumer offset, and each topic's config (None for a
    topic it does not hold)."""

    def __init__(self, config: BrokerConfig, store: MessageStore, consumers: ConsumerGroups, arrivals: Arrivals,
                 is_master: Callable[[], bool], commit: Callable[[str, str, int, int], str | None],
                 store_host: SocketAddress, topic_config: Callable[[str], TopicConfig | None],
                 master_known: Callable[[], bool], consume_enabled: Callable[[str], bool] = lambda group: True,
                 take_reset: Callable[[str, str, int], int | None] = lambda group, topic, queue_id: None) -> None:
        self.config = config
        self.take_reset = take_reset
        self.consume_enabled = consume_enabled
        self.store = store
        self.consumers = consumers
        self.arrivals = arrivals
        self.is_master = is_master
        self.commit = commit
        self.store_host = store_host
        self.topic_config = topic_config
        self.master_known = master_known

    async def serve(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        h = bh.PullMessageRequestHeader.from_ext_fields(request.ext_fields)
        check_queue(h.topic, h.queue_id, MAX_QUEUE_NUMS, "PullMessageRequestHeader", h.consumer_group)
        if not self.consume_enabled(h.consumer_group):  # the group's consumeEnable=false (updateSubGroup -s false)
            return answer(request, ResponseCode.NO_PERMISSION, f"subscription group no permission, {h.consumer_group}",
                          {"forbiddenType": GROUP_FORBIDDEN})
        if h.expression_type not in (None, "", "TAG"):
            return answer(request, ResponseCode.SYSTEM_ERROR,
                          f"The broker does not support consumer to filter message by {h.expression_type[:40]}")
        refusal = pull_refusal(h.topic, self.topic_config(h.topic), h.queue_id)
        if refusal is not None:
            return answer(request, refusal.code, refusal.remark)
        expression = h.subscription if h.sys_flag & PULL_SUBSCRIPTION else \
            self.consumers.subscription(h.consumer_group, h.topic)
        if expression is None:
            return answer(request, ResponseCode.SUBSCRIPTION_NOT_EXIST,
                          f"the consumer's subscription not exist, group: {h.consumer_group}, topic: {h.topic}")
        master = self.is_master()
        redirect = not master and self.master_known()  # else served as the master serves it
        if master and h.sys_flag & PULL_COMMIT_OFFSET and h.commit_offset >= 0:
            self.commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        tags = TagFilter.parse(expression)
        max_bytes = min(h.max_msg_bytes, MAX_PULL_BYTES) if h.max_msg_bytes and h.max_msg_bytes > 0 \
            else MAX_PULL_BYTES

        def read() -> PullRead:
            reset = self.take_reset(h.consumer_group, h.topic, h.queue_id) if master else None
            if reset is not None:
                low, high = queue_bounds(self.store, h.topic, h.queue_id)
                return PullRead(ResponseCode.PULL_OFFSET_MOVED, "OFFSET_RESET", reset, low, high)
            found = read_queue(self.store, self.store_host, h.topic, h.queue_id, h.queue_offset, h.max_msg_nums,
                               tags, max_bytes)
            return slave_answer(found) if redirect else found

        event = self.arrivals.current()
        result = read()
        if result.code == ResponseCode.PULL_NOT_FOUND and not redirect and h.sys_flag & PULL_SUSPEND \
                and not request.is_oneway:
            result = await hold(self.arrivals, event, h.suspend_timeout_millis, read) or result
        header = bh.PullMessageResponseHeader(
            suggest_which_broker_id=MASTER_ID, next_begin_offset=result.next_begin_offset,
            min_offset=result.min_offset, max_offset=result.max_offset)
        return answer(request, result.code, result.remark, header.to_ext_fields(), result.body)
