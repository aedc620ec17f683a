"""What mqadmin's status commands and the Dashboard ask a broker: the rest of RocketMQ's AdminBrokerProcessor
that reads, served here apart from admin.py's writes.

=====  ==============================  =================================================================
code   name                            answer
=====  ==============================  =================================================================
28     GET_BROKER_RUNTIME_INFO         KVTable of runtime_info.py's keys (stats.py's counters)
202    GET_TOPIC_STATS_INFO            per queue: min and max offset, the last message's store time;
                                       the topic's put TPS over the last minute
203    GET_CONSUMER_CONNECTION_LIST    the group's clients and how it consumes (CONSUMER_NOT_ONLINE if
                                       none is connected)
204    GET_PRODUCER_CONNECTION_LIST    the group's producers (SYSTEM_ERROR if none, RocketMQ's remark)
208    GET_CONSUME_STATS               per queue of each topic the group consumes: the broker's max offset,
                                       the group's offset, the store time of its last consumed message;
                                       the group's get TPS over the last minute
300    QUERY_TOPIC_CONSUME_BY_WHO      the groups subscribed to the topic or holding offsets of it
=====  ==============================  =================================================================

Reads only: open like the produce and consume calls (RocketMQ's without ACL). Every answer is bounded by
the tables it reads (topics, groups, clients: each bounded where it is kept).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from services.broker.config import BrokerConfig
from services.broker.connections import ClientInfo, Connections, ConsumerMode
from services.broker.consumer_offsets import GROUP_PATTERN, OffsetTable
from services.broker.consumers import ConsumerGroups
from services.broker.processor.common import Route, answer, queue_bounds
from services.broker.record import valid_topic
from services.broker.runtime_info import RuntimeFacts, runtime_table
from services.broker.stats import BrokerStats
from services.broker.store import MessageStore
from services.common.clock import Clock
from services.common.codes import ResponseCode
from services.common.remoting_conn import RemotingConnection
from services.remoting import admin_bodies as ab
from services.remoting import admin_headers as ah
from services.remoting import bodies
from services.remoting.broker_bodies import HeartbeatData, MessageQueue, SubscriptionData
from services.remoting.command import RemotingCommand
from services.remoting.errors import HeaderFieldError
from services.remoting.javaorder import java_string_hash
from services.remoting.message import TagFilter

__all__ = ["StatsProcessor", "count_messages"]

def count_messages(body: bytes) -> int:
    """How many messages a pull answer's body holds: each starts with its total size (int32)."""
    count, pos = 0, 0
    while pos + 4 <= len(body):
        size = int.from_bytes(body[pos:pos + 4], "big")
        if size <= 0:
            break
        pos += size
        count += 1
    return count


class StatsProcessor:
    """Built with the store, the counters, the offsets, the groups' subscriptions and connections, and how
    to read the runtime facts of the broker."""

    def __init__(self, config: BrokerConfig, store: MessageStore, stats: BrokerStats, offsets: OffsetTable,
                 consumers: ConsumerGroups, connections: Connections, clock: Clock,
                 facts: Callable[[], RuntimeFacts]) -> None:
        self.config = config
        self.store = store
        self.stats = stats
        self.offsets = offsets
        self.consumers = consumers
        self.connections = connections
        self.clock = clock
        self.facts = facts

    # ------------------------------------------------------------------ counting what others serve
    def counted_pull(self, serve: Route) -> Route:
        """The pull route, counting what each pull found (for getFoundTps, getTransferredTps, consumeTps)."""
        async def route(request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
            started = time.perf_counter()
            result = await serve(request, conn)
            if result is not None:
                found = count_messages(result.body) if result.code == ResponseCode.SUCCESS else 0
                self.stats.on_get(self.clock.now_ms(), request.ext_fields.get("consumerGroup", ""),
                                  request.ext_fields.get("topic", ""), found,
                                  int((time.perf_counter() - started) * 1000))
            return result
        return route

    def heard(self, request: RemotingCommand, conn: RemotingConnection, data: HeartbeatData) -> None:
        """A heartbeat that was served: its client's groups, for 203 and 204."""
        client = ClientInfo(data.client_id or "", conn.peer, request.language.name, request.version, conn,
                            self.clock.now_ms())
        producers = [p.group_name for p in data.producer_data_set
                     if p.group_name and GROUP_PATTERN.fullmatch(p.group_name)]
        consumers = [(c.group_name, ConsumerMode(c.consume_type, c.message_model, c.consume_from_where))
                     for c in data.consumer_data_set if c.group_name]
        self.connections.heard(client, producers, consumers)

    # ------------------------------------------------------------------ 28
    async def runtime_info(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        table = runtime_table(self.stats, self.facts())
        return answer(request, ResponseCode.SUCCESS, None, None, bodies.KVTable(table).encode())

    # ------------------------------------------------------------------ 202
    async def topic_stats(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        topic = ah.GetTopicStatsInfoRequestHeader.from_ext_fields(request.ext_fields).topic
        config = self.store.topic_config(topic) if valid_topic(topic) else None
        if config is None:
            return answer(request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic[:255]}] not exist")
        table = {}
        for queue_id in range(config.write_queue_nums):  # as RocketMQ: the writable queues
            low, high = queue_bounds(self.store, topic, queue_id)
            stamp = self._store_time(topic, queue_id, high - 1) if high > 0 else 0
            table[self._queue(topic, queue_id)] = ab.TopicOffset(low, high, stamp)
        stats = ab.TopicStatsTable(table, self.stats.topic_puts.rate(topic, self.clock.now_ms()))
        return answer(request, ResponseCode.SUCCESS, None, None, stats.encode())

    def _queue(self, topic: str, queue_id: int) -> MessageQueue:
        return MessageQueue(topic, self.config.brokerName, queue_id)

    def _store_time(self, topic: str, queue_id: int, offset: int) -> int:
        records = self.store.get_messages(topic, queue_id, offset, 1).records
        return records[0].store_timestamp if records else 0

    # ------------------------------------------------------------------ 208
    async def consume_stats(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        header = ah.GetConsumeStatsRequestHeader.from_ext_fields(request.ext_fields)
        group = header.consumer_group
        if GROUP_PATTERN.fullmatch(group) is None:
            raise HeaderFieldError("GetConsumeStatsRequestHeader", "consumerGroup",
                                   "must be 1-255 of letters, digits, '%', '|', '_' and '-'")
        now = self.clock.now_ms()
        table: dict[MessageQueue, ab.OffsetWrapper] = {}
        tps = 0.0
        for topic in sorted(self._consumed_topics(header)):
            config = self.store.topic_config(topic) if valid_topic(topic) else None
            if config is None:
                continue
            for queue_id in range(config.read_queue_nums):  # as RocketMQ: the readable queues
                table[self._queue(topic, queue_id)] = self._offset_wrapper(group, topic, queue_id)
            tps += self.stats.group_gets.rate(f"{topic}@{group}", now)
        return answer(request, ResponseCode.SUCCESS, None, None, ab.ConsumeStats(table, tps).encode())

    def _consumed_topics(self, header: ah.GetConsumeStatsRequestHeader) -> set[str]:
        """AdminBrokerProcessor's choice: the listed topics as given; else the one named, or every topic the
        group has offsets of, less those its clients do not subscribe to (while it has subscriptions)."""
        listed = header.topics()
        if listed:
            return set(listed[:1000])
        group = header.consumer_group
        topics = {header.topic} if header.topic else self.offsets.topics_of(group)
        subscribed = self.consumers.topics(group)
        return {t for t in topics if t in subscribed} if subscribed else topics

    def _offset_wrapper(self, group: str, topic: str, queue_id: int) -> ab.OffsetWrapper:
        _, high = queue_bounds(self.store, topic, queue_id)
        consumer = max(self.offsets.query(group, topic, queue_id) or 0, 0)
        stamp = self._store_time(topic, queue_id, consumer - 1) if consumer > 0 else 0
        return ab.OffsetWrapper(high, consumer, consumer, stamp)

    # ------------------------------------------------------------------ 203, 204, 300
    async def consumer_connections(self, request: RemotingCommand,
                                   conn: RemotingConnection) -> RemotingCommand | None:
        group = ah.GetConsumerConnectionListRequestHeader.from_ext_fields(request.ext_fields).consumer_group
        found = self.connections.consumers(group)
        if found is None:
            return answer(request, ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group[:255]}] not online")
        clients, mode = found
        subs = {t: _subscription(t, self.consumers.subscription(group, t) or "*")
                for t in sorted(self.consumers.topics(group))}
        body = ab.ConsumerConnection(_connections(clients), subs, mode.consume_type, mode.message_model,
                                     mode.consume_from_where)
        return answer(request, ResponseCode.SUCCESS, None, None, body.encode())

    async def producer_connections(self, request: RemotingCommand,
                                   conn: RemotingConnection) -> RemotingCommand | None:
        group = ah.GetProducerConnectionListRequestHeader.from_ext_fields(request.ext_fields).producer_group
        clients = self.connections.producers(group)
        if clients is None:
            return answer(request, ResponseCode.SYSTEM_ERROR, f"the producer group[{group[:255]}] not exist")
        return answer(request, ResponseCode.SUCCESS, None, None, ab.ProducerConnection(_connections(clients)).encode())

    async def consume_by_who(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        topic = ah.QueryTopicConsumeByWhoRequestHeader.from_ext_fields(request.ext_fields).topic
        groups = {g for g in self.consumers.groups() if self.consumers.subscription(g, topic) is not None}
        groups |= self.offsets.groups_of(topic)
        return answer(request, ResponseCode.SUCCESS, None, None, ab.GroupList(frozenset(groups)).encode())


def _connections(clients: list[ClientInfo]) -> tuple[ab.Connection, ...]:
    return tuple(ab.Connection(c.client_id, c.address, c.language, c.version) for c in clients)


def _subscription(topic: str, expression: str) -> SubscriptionData:
    """A group's subscription as the broker keeps it (FilterAPI.buildSubscriptionData: its tags and their
    hash codes)."""
    tags = TagFilter.parse(expression).tags
    return SubscriptionData(topic, expression, frozenset(tags or ()),
                            frozenset(_hash(t) for t in tags or ()), 0)


def _hash(text: str) -> int:
    """String.hashCode as a signed int."""
    value = java_string_hash(text)
    return value - 2**32 if value >= 2**31 else value
