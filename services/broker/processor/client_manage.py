"""Clients joining and leaving consumer groups: RocketMQ's ClientManageProcessor.

HEART_BEAT (34) registers the client's groups and subscriptions (consumers.py) and creates each group's
retry topic, and registers its producer groups (the connections a transaction check-back is sent on, RocketMQ's
ProducerManager); UNREGISTER_CLIENT (35) and a closed connection take a client out; clients not heard for two
minutes expire. Every change tells the group's clients to rebalance now (NOTIFY_CONSUMER_IDS_CHANGED, 40,
oneway on their connections).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Iterable

from services.broker.consumer_offsets import GROUP_PATTERN
from services.broker.consumers import ConsumerGroups, RegistryFull
from services.broker.processor.common import answer
from services.broker.record import valid_topic
from services.broker.topics import TopicRegistry, TopicsFull
from services.common.clock import Clock
from services.common.codes import ResponseCode
from services.common.offload import Offload
from services.common.remoting_conn import RemotingConnection
from services.remoting import broker_bodies as bb
from services.remoting import broker_headers as bh
from services.remoting.command import RemotingCommand, make_request
from services.remoting.errors import BodyError

__all__ = ["EXPIRY_SCAN_S", "MAX_EXPRESSION", "RETRY_PREFIX", "ClientManageProcessor", "read_heartbeat",
           "read_heartbeat_data"]

log = logging.getLogger(__name__)

#: RocketMQ's MixAll.RETRY_GROUP_TOPIC_PREFIX.
RETRY_PREFIX = "%RETRY%"
EXPIRY_SCAN_S = 10.0
#: The longest subscription expression kept from a heartbeat (a TAG expression is a few tags).
MAX_EXPRESSION = 4096


class ClientManageProcessor:
    """Built with the consumer groups, the created topics and how to announce new ones, the clock and the
    decoding worker."""

    def __init__(self, consumers: ConsumerGroups, topics: TopicRegistry, note_topics: Callable[[list[str]], None],
                 clock: Clock, offload: Offload, producers: ConsumerGroups | None = None,
                 on_heard: Callable[[RemotingCommand, RemotingConnection, bb.HeartbeatData], None] | None = None) \
            -> None:
        self.consumers = consumers
        self.producers = producers if producers is not None else ConsumerGroups()
        self.on_heard = on_heard
        self.topics = topics
        self.note_topics = note_topics
        self.clock = clock
        self.offload = offload
        self._opaque = itertools.count(1)

    async def heartbeat(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        data, client, groups, producer_groups = await self.offload.run(len(request.body),
                                                                       lambda: read_heartbeat_data(request.body))
        for group in producer_groups:
            try:
                self.producers.register(group, client, conn, {}, self.clock.now_ms())
            except RegistryFull as exc:
                return answer(request, ResponseCode.SYSTEM_ERROR, str(exc))
        changed = []
        for group, subs in groups:
            try:
                if self.consumers.register(group, client, conn, subs, self.clock.now_ms()):
                    changed.append(group)
            except RegistryFull as exc:
                return answer(request, ResponseCode.SYSTEM_ERROR, str(exc))
        self.notify_groups(changed)
        if self.on_heard is not None:
            self.on_heard(request, conn, data)
        await self._retry_topics(group for group, _ in groups)
        return answer(request, ResponseCode.SUCCESS)

    async def _retry_topics(self, groups: Iterable[str]) -> None:
        """Each consumer group's retry topic (``%RETRY%<group>``), created when the group first heartbeats,
        as RocketMQ's broker does: its consumers subscribe to it and look its route up."""
        known = self.topics.names
        missing = sorted({t for t in (RETRY_PREFIX + g for g in groups) if t not in known and valid_topic(t)})
        if not missing:
            return
        try:
            created = await asyncio.to_thread(lambda: [t for t in missing if self.topics.create(t)])
        except TopicsFull as exc:
            log.warning("retry topics %s not created: %s", ", ".join(missing), exc)
            return
        if created:
            log.info("retry topic(s) %s created for their consumer groups", ", ".join(created))
            self.note_topics(created)

    async def unregister(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        h = bh.UnregisterClientRequestHeader.from_ext_fields(request.ext_fields)
        if h.consumer_group and self.consumers.unregister(h.consumer_group, h.client_id):
            self.notify_groups([h.consumer_group])
        if h.producer_group:
            self.producers.unregister(h.producer_group, h.client_id)
        return answer(request, ResponseCode.SUCCESS)

    def channel_closed(self, conn: RemotingConnection) -> None:
        """A client's connection closed: its consumers leave their groups (RocketMQ's channel close)."""
        self.notify_groups(self.consumers.channel_closed(conn))
        self.producers.channel_closed(conn)

    def notify_groups(self, groups: list[str]) -> None:
        """Tell every client of each group to rebalance now (NOTIFY_CONSUMER_IDS_CHANGED, oneway)."""
        for group in groups:
            for channel in self.consumers.channels(group):
                if isinstance(channel, RemotingConnection):
                    header = bh.NotifyConsumerIdsChangedRequestHeader(consumer_group=group)
                    channel.send(make_request(bh.NOTIFY_CONSUMER_IDS_CHANGED, self._next_opaque(),
                                              header.to_ext_fields(), oneway=True))

    def _next_opaque(self) -> int:
        value = next(self._opaque)
        if value >= 2**31 - 1:
            self._opaque = itertools.count(1)
        return value

    def expire(self) -> None:
        """Clients not heard for two minutes leave their groups (run every EXPIRY_SCAN_S)."""
        self.notify_groups(self.consumers.expire(self.clock.now_ms()))
        self.producers.expire(self.clock.now_ms())


def read_heartbeat(body: bytes) -> tuple[str, list[tuple[str, dict[str, str]]], list[str]]:
    """A heartbeat's client id, per consumer group its subscriptions (topic -> expression), and its producer
    groups, every name and expression checked; pure, so a large one is read off the loop. Raises BodyError."""
    return read_heartbeat_data(body)[1:]


def read_heartbeat_data(body: bytes) -> tuple[bb.HeartbeatData, str, list[tuple[str, dict[str, str]]], list[str]]:
    """``read_heartbeat``, with the heartbeat itself."""
    data = bb.HeartbeatData.decode(body)
    client = data.client_id or ""
    if not 0 < len(client) <= 1024:
        raise BodyError("clientID must be 1-1024 characters")
    groups = []
    for consumer in data.consumer_data_set:
        group = consumer.group_name or ""
        if GROUP_PATTERN.fullmatch(group) is None:
            raise BodyError(f"consumerDataSet: groupName {group[:80]!r} is not a group name")
        groups.append((group, _subscriptions(consumer)))
    producers = []
    for producer in data.producer_data_set:
        group = producer.group_name or ""
        if GROUP_PATTERN.fullmatch(group) is None:
            raise BodyError(f"producerDataSet: groupName {group[:80]!r} is not a group name")
        producers.append(group)
    return data, client, groups, producers


def _subscriptions(consumer: bb.ConsumerData) -> dict[str, str]:
    """A heartbeat's subscriptions of one group, topic -> expression, checked: what is kept must be bounded."""
    subs = {}
    for sub in consumer.subscription_data_set:
        topic, expression = sub.topic or "", sub.sub_string or "*"
        if not valid_topic(topic):
            raise BodyError(f"subscriptionDataSet: topic {topic[:80]!r} is not a topic name")
        if len(expression) > MAX_EXPRESSION:
            raise BodyError(f"subscriptionDataSet: the expression for {topic} is longer than {MAX_EXPRESSION}")
        subs[topic] = expression
    return subs
