"""The broker's RocketMQ remoting API, on its listenPort beside HTTP: what a RocketMQ producer, consumer or
mqadmin asks a broker, dispatched by request code to one processor per concern, as RocketMQ's broker
registers its processors (services/broker/processor/):

=====================  ================================  ===========================================================
codes                  processor                         served as
=====================  ================================  ===========================================================
10, 310, 320           send.py (SendMessageProcessor)    ``Broker.put`` (every quorum and durability rule), the put
                                                         status as RocketMQ's code; a slave answers
                                                         SERVICE_NOT_AVAILABLE, so clients re-route; delayed and
                                                         timed messages held (schedule/)
36                     send.py                           a consumer's failed message to its retry topic or DLQ
37                     end_transaction.py                a producer's commit or rollback of a half message
                                                         (transaction/); 39 goes to a producer group's client
                                                         for a check-back
11, 361                pull.py (PullMessageProcessor)    remoting_pull.py: RocketMQ's message encoding in the body,
                                                         long polling
14, 15, 38             consumer_manage.py                consumer offsets (consumer_offsets.py) and a group's clients
34, 35                 client_manage.py                  consumer groups from client heartbeats (consumers.py); 40
                                                         goes to a group's clients when it changes
41, 42                 consumer_manage.py                an orderly consumer's queue locks (rebalance_lock.py)
29, 30, 31             query.py                          a queue's offset by store time, max and min offset
12, 33                 query_message.py (QueryMessage-   messages by key or unique key (key_index.py), a message by
                       Processor)                        its commitlog offset
17, 21, 43, 45, 907,   admin.py (AdminBrokerProcessor)   topics, the whole offset tables (how a slave copies them), the
908, 1007, 1008                                          controller mode's epoch entries, HA status, flush offset and
                                                         role hint
28, 202, 203, 204,     stats.py (AdminBrokerProcessor's  runtime info (stats.py, runtime_info.py), a topic's queues, a
208, 300               reads)                            group's progress, connections, who consumes a topic
222                    offset_reset.py (AdminBroker-     an administrator's reset of a group's offsets, told to its
                       Processor's resetOffset)          consumers at their next pull
88002                  admin.py                          the transaction check progress, for a slave (mqctl's own)
other                  —                                 REQUEST_CODE_NOT_SUPPORTED
=====================  ================================  ===========================================================

A malformed custom header or body is answered ``INVALID_PARAMETER`` naming the field, and a oneway
request that cannot be served is dropped. Produce and consume calls are open, as HTTP's are (and
RocketMQ's without ACL); with ``authToken`` set, a 1008 is acted on only when signed with the token
(services/remoting/acl.py), as the controllers sign it.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import socket
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from services.broker.connections import Connections
from services.broker.consumers import ConsumerGroups
from services.broker.processor.admin import MAX_GROUP_BODY, AdminParts, AdminProcessor
from services.broker.processor.client_manage import EXPIRY_SCAN_S, ClientManageProcessor
from services.broker.processor.common import Route, answer
from services.broker.processor.consumer_manage import ConsumerManageProcessor
from services.broker.processor.end_transaction import EndTransactionProcessor
from services.broker.processor.offset_reset import OffsetResetProcessor
from services.broker.processor.pull import PullProcessor
from services.broker.processor.query import QueryProcessor
from services.broker.processor.query_message import QueryMessageProcessor
from services.broker.processor.send import SEND_REQUESTS, SendProcessor
from services.broker.processor.stats import StatsProcessor
from services.broker.put_batcher import PutBatcher
from services.broker.remoting_pull import Arrivals
from services.broker.replicas_manager import Role
from services.broker.schedule.retry import DEFAULT_MAX_RECONSUME_TIMES
from services.broker.store import Message
from services.broker.subscription_groups import SubscriptionGroups
from services.broker.transaction.progress import TransactionProgressFile
from services.broker.transaction.service import TransactionService
from services.common.codes import ResponseCode
from services.common.offload import Busy, Offload
from services.common.remoting_client import RemotingClient
from services.common.remoting_conn import RemotingConnection
from services.remoting import admin_headers as ah
from services.remoting import broker_headers as bh
from services.remoting.command import RemotingCommand, RequestCode
from services.remoting.errors import BodyError, HeaderFieldError
from services.remoting.limits import HEARTBEAT_BODY, SMALL_BODY, BodyLimit, RequestLimits, server_limits
from services.remoting.message import SocketAddress
from services.remoting.mqctl_ext import GET_TRANSACTION_PROGRESS

if TYPE_CHECKING:
    from services.broker.broker import Broker

__all__ = ["BrokerRemoting", "request_limits"]

log = logging.getLogger(__name__)

RC = RequestCode


class BrokerRemoting:
    """The processors, each built with the parts of the broker it reads, and the dispatch table."""

    def __init__(self, broker: Broker) -> None:
        config, store = broker.config, broker.store
        self.clock = broker.clock
        self.consumers = ConsumerGroups()
        self.arrivals = Arrivals()
        self.store_host = _store_host(config.brokerIP1, config.listenPort)
        limits = config.http_limits()
        self._deadlines = (limits.header_timeout_s, limits.body_timeout_s)  # a frame's head, then the rest
        self.puts = PutBatcher(functools.partial(broker.put, validated=True))  # each send is validated alone
        self.offload = Offload(name="broker-decode")
        self._tasks: list[asyncio.Task[None]] = []
        self.send = SendProcessor(config, store.validate, self.puts, self.offload, self.store_host,
                                  broker.delay_rules, broker.clock, store.commitlog.check_at, store.topic_config,
                                  store.created_topics.put, broker.namesrv.note_topics,
                                  lambda group: retry_max_times(broker.subscription_groups, group))
        self.consumer_manage = ConsumerManageProcessor(config, store, broker.consumer_offsets, self.consumers,
                                                       broker.clock)
        offsets = broker.consumer_offsets.table
        self.pull = PullProcessor(config, store, self.consumers, self.arrivals, lambda: broker.role is Role.MASTER,
                                  self.consumer_manage.commit, self.store_host, store.topic_config,
                                  lambda: broker.replicas.state.master_address is not None,
                                  lambda group: consume_enabled(broker.subscription_groups, group),
                                  offsets.take_reset)
        self.connections = Connections()
        self.stats = StatsProcessor(config, store, broker.stats, broker.consumer_offsets.table, self.consumers,
                                    self.connections, broker.clock, broker.runtime_facts)
        self.client_manage = ClientManageProcessor(self.consumers, store.created_topics,
                                                   broker.namesrv.note_topics, broker.clock,
                                                   self.offload, on_heard=self.stats.heard)
        self.query = QueryProcessor(config, store)
        self.query_message = QueryMessageProcessor(store, self.store_host)
        is_master = lambda: broker.role is Role.MASTER  # noqa: E731 - read by three parts
        self.transactions = TransactionService(
            config.check_rules(), store, TransactionProgressFile(config.store_dir / "config" / "transactionProgress.json"),
            broker.put, is_master, broker.clock, RemotingClient(timeout_s=3.0), self.client_manage.producers,
            self.store_host, config.brokerName)
        self.end_transaction = EndTransactionProcessor(is_master, self.transactions.end)
        self.admin = AdminProcessor(config, store, broker.consumer_offsets, broker.clock, AdminParts(
            role=lambda: broker.role, epoch_cache=broker.epoch_cache, ha_status=broker.ha_status,
            role_change_notified=broker.replicas.on_role_change_notified, delay_offsets=broker.schedule.answer,
            transaction_progress=self.transactions.answer,
            topics_changed=broker.namesrv.trigger, io_lock=broker.io_lock, groups=broker.subscription_groups,
            delete_topic=broker.delete_topic))
        self.offset_reset = OffsetResetProcessor(
            config.brokerName, store, broker.consumer_offsets, is_master, store.topic_config,
            lambda group: (broker.subscription_groups.get(group) is not None or bool(self.consumers.client_ids(group))
                           or bool(offsets.topics_of(group))),
            self.arrivals.notify, self.admin.unsigned)
        self._route_table()
        self.limits = request_limits(self._routes, config.maxMessageSize)

    def _route_table(self) -> None:
        """The dispatch table: each code to the processor method that serves it."""
        send, consumer, client, query, admin, stats = (self.send, self.consumer_manage, self.client_manage,
                                                       self.query, self.admin, self.stats)
        pull = stats.counted_pull(self.pull.serve)
        self._routes: dict[int, Route] = {
            RC.SEND_MESSAGE: send.serve, RC.SEND_MESSAGE_V2: send.serve, RC.SEND_BATCH_MESSAGE: send.serve,
            bh.CONSUMER_SEND_MSG_BACK: send.send_back, bh.END_TRANSACTION: self.end_transaction.serve,
            RC.PULL_MESSAGE: pull, bh.LITE_PULL_MESSAGE: pull,
            RC.QUERY_CONSUMER_OFFSET: consumer.query_offset, RC.UPDATE_CONSUMER_OFFSET: consumer.update_offset,
            RC.GET_CONSUMER_LIST_BY_GROUP: consumer.consumer_list, bh.LOCK_BATCH_MQ: consumer.lock_batch,
            bh.UNLOCK_BATCH_MQ: consumer.unlock_batch,
            RC.HEART_BEAT: client.heartbeat, bh.UNREGISTER_CLIENT: self._unregister,
            RC.GET_MAX_OFFSET: query.max_offset, RC.GET_MIN_OFFSET: query.min_offset,
            bh.SEARCH_OFFSET_BY_TIMESTAMP: query.search_offset,
            bh.GET_ALL_CONSUMER_OFFSET: admin.all_offsets, bh.GET_ALL_DELAY_OFFSET: admin.all_delay_offsets,
            GET_TRANSACTION_PROGRESS: admin.transaction_progress, bh.GET_ALL_TOPIC_CONFIG: admin.all_topic_config,
            bh.UPDATE_AND_CREATE_TOPIC: admin.create_topic, RC.GET_BROKER_EPOCH_CACHE: admin.epoch_cache,
            RC.GET_BROKER_HA_STATUS: admin.ha_status, RC.NOTIFY_BROKER_ROLE_CHANGED: admin.role_changed,
            bh.RESET_MASTER_FLUSH_OFFSET: admin.reset_master_flush_offset,
            ah.GET_BROKER_RUNTIME_INFO: stats.runtime_info, ah.GET_TOPIC_STATS_INFO: stats.topic_stats,
            ah.GET_CONSUME_STATS: stats.consume_stats, ah.GET_CONSUMER_CONNECTION_LIST: stats.consumer_connections,
            ah.GET_PRODUCER_CONNECTION_LIST: stats.producer_connections,
            ah.QUERY_TOPIC_CONSUME_BY_WHO: stats.consume_by_who, ah.GET_TOPIC_CONFIG: admin.topic_config,
            ah.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: admin.update_group, ah.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: admin.all_groups,
            ah.DELETE_SUBSCRIPTIONGROUP: admin.delete_group, ah.GET_BROKER_CONFIG: admin.broker_config,
            ah.DELETE_TOPIC_IN_BROKER: admin.delete_topic,
            ah.INVOKE_BROKER_TO_RESET_OFFSET: self.offset_reset.serve,
            bh.QUERY_MESSAGE: self.query_message.query, bh.VIEW_MESSAGE_BY_ID: self.query_message.view,
        }

    # ------------------------------------------------------------------ wiring
    def connection(self, server_state: Any) -> RemotingConnection:
        """A protocol for one remoting connection on the listen port (make_server's ``binary``)."""
        return RemotingConnection(self.handle, on_closed=self.on_closed, server_state=server_state, front=self.front,
                                  head_timeout_s=self._deadlines[0], frame_timeout_s=self._deadlines[1],
                                  limits=self.limits)

    def front(self, request: RemotingCommand, conn: RemotingConnection) -> bool:
        """Sends take the connection's task-free path (SendProcessor.front); the rest goes to ``handle``."""
        return self.send.front(request, conn)

    def on_put(self, messages: list[Message]) -> None:
        self.arrivals.notify()

    async def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._housekeeping(), name="consumer-expiry"))

    async def _housekeeping(self) -> None:
        """Every EXPIRY_SCAN_S: silent clients leave their groups, expired queue locks go."""
        while True:
            await asyncio.sleep(EXPIRY_SCAN_S)
            self.client_manage.expire()
            self.connections.expire(self.clock.now_ms())
            self.consumer_manage.locks.purge(self.clock.now_ms())

    async def stop(self) -> None:
        self.offload.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    async def handle(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        route = self._routes.get(request.code)
        if route is None:
            return answer(
                request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported")
        try:
            result = await route(request, conn)
        except (HeaderFieldError, BodyError) as exc:
            result = answer(request, ResponseCode.INVALID_PARAMETER, str(exc))
        except Busy as exc:
            log.info("request %d from %s refused: %s", request.code, conn.peer, exc)
            result = answer(request, ResponseCode.SYSTEM_BUSY, str(exc))
        return None if request.is_oneway else result

    def on_closed(self, conn: RemotingConnection) -> None:
        """A client's connection closed: its consumers leave their groups (RocketMQ's channel close)."""
        self.client_manage.channel_closed(conn)
        self.connections.channel_closed(conn)

    async def _unregister(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        result = await self.client_manage.unregister(request, conn)
        h = bh.UnregisterClientRequestHeader.from_ext_fields(request.ext_fields)
        self.connections.unregister(h.client_id, h.producer_group, h.consumer_group)
        return result


def retry_max_times(groups: SubscriptionGroups, group: str) -> int:
    """How often a message of ``group`` is retried when its consumer does not say: the group's retryMaxTimes."""
    config = groups.get(group)
    return DEFAULT_MAX_RECONSUME_TIMES if config is None else config.retry_max_times


def consume_enabled(groups: SubscriptionGroups, group: str) -> bool:
    """Whether ``group`` may pull: not when its settings say consumeEnable=false."""
    config = groups.get(group)
    return config is None or config.consume_enable


def request_limits(served: Iterable[int], max_message_size: int) -> RequestLimits:
    """What each request may carry (docs/remoting.md): a send its message (or batch), a heartbeat its
    client's groups, a lock or unlock its queues, a role-change hint its SyncStateSet (never read), a subscription
    group its settings; the rest no body."""
    invalid = ResponseCode.INVALID_PARAMETER
    send = BodyLimit(max_message_size, ResponseCode.MESSAGE_ILLEGAL, "maxMessageSize")
    bodies: dict[int, BodyLimit] = {
        **dict.fromkeys(SEND_REQUESTS, send), RC.HEART_BEAT: BodyLimit(HEARTBEAT_BODY, invalid),
        # a lock body lists a client's queues of the group: at most MAX_ITEMS, a few hundred KB
        bh.LOCK_BATCH_MQ: BodyLimit(HEARTBEAT_BODY, invalid), bh.UNLOCK_BATCH_MQ: BodyLimit(HEARTBEAT_BODY, invalid),
        RC.NOTIFY_BROKER_ROLE_CHANGED: BodyLimit(SMALL_BODY, invalid),
        # a subscription group's settings: well under 1 KB, its optional lists bounded
        ah.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: BodyLimit(MAX_GROUP_BODY, invalid)}
    return server_limits(served, bodies, invalid, ResponseCode.REQUEST_CODE_NOT_SUPPORTED)


def _store_host(host: str, port: int) -> SocketAddress:
    """The broker's address as messages carry it: brokerIP1 as given, or resolved once if it is a name."""
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        try:
            host = socket.gethostbyname(host)
        except OSError:
            log.warning("brokerIP1 %s does not resolve: messages carry 0.0.0.0 as their store host", host)
    return SocketAddress.parse(host, port)
