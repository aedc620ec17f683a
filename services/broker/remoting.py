"""The broker's RocketMQ remoting API, on its listenPort beside HTTP: what a RocketMQ producer, consumer or
mqadmin asks a broker.

=====================  ======================================================================================
codes                  served as
=====================  ======================================================================================
10, 310, 320           a send: ``Broker.put`` (every quorum and durability rule), the put status as
                       RocketMQ's response code; a slave answers SERVICE_NOT_AVAILABLE, so clients re-route
11, 361                a pull (361: a lite pull consumer's, served alike): remoting_pull.py (RocketMQ's message
                       encoding in the body; long polling)
14, 15, 43             consumer offsets: consumer_offsets.py (43 is how a slave copies its master's table)
30, 31                 a queue's max and min offset
34, 35, 38             consumer groups from client heartbeats: consumers.py; 40 goes to a group's clients
                       when it changes
17                     create a topic (mqadmin/mqctl updateTopic): topics.py keeps it on disk
21                     every topic's config (TopicConfigSerializeWrapper): what mqadmin's topic listing and
                       mqctl's consumeMessage ask
1007, 907              the epoch entries (EpochEntryCache) and replication status (HARuntimeInfo)
1008                   a hint only: the broker re-reads its role from the controller, never from the body
other                  REQUEST_CODE_NOT_SUPPORTED
=====================  ======================================================================================

A malformed custom header or body is answered ``INVALID_PARAMETER`` naming the field, and a oneway
request that cannot be served is dropped. Produce and consume calls are open, as HTTP's are (and
RocketMQ's without ACL); with ``authToken`` set, a 1008 is acted on only when signed with the token
(services/remoting/acl.py), as the controllers sign it.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import itertools
import logging
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal, overload

from services.broker.consumer_offsets import GROUP_PATTERN, TableFull
from services.broker.consumers import ConsumerGroups, RegistryFull
from services.broker.namesrv_registration import AUTO_CREATE_TOPIC, PERM_READ_WRITE, topic_table
from services.broker.put_batcher import PutBatcher
from services.broker.record import valid_topic
from services.broker.remoting_messages import Refusal, to_store_messages
from services.broker.remoting_pull import MAX_PULL_BYTES, Arrivals, PullRead, hold, read_queue, slave_answer
from services.broker.replicas_manager import Role
from services.broker.store import Message, MessageIllegal
from services.broker.topics import TopicsFull
from services.common.codes import ResponseCode
from services.common.offload import INLINE_BYTES, Busy, Offload
from services.common.remoting_conn import RemotingConnection
from services.remoting import bodies
from services.remoting import broker_bodies as bb
from services.remoting import broker_headers as bh
from services.remoting.acl import Verifier
from services.remoting.codec import response_frame
from services.remoting.command import RemotingCommand, RequestCode, make_request, make_response
from services.remoting.errors import BodyError, HeaderFieldError
from services.remoting.headers import NotifyBrokerRoleChangedRequestHeader
from services.remoting.limits import HEARTBEAT_BODY, SMALL_BODY, BodyLimit, RequestLimits, server_limits
from services.remoting.message import SocketAddress, TagFilter
from services.remoting.namesrv_bodies import TopicConfigSerializeWrapper

if TYPE_CHECKING:
    from services.broker.broker import Broker, PutOutcome

log = logging.getLogger(__name__)

RC = RequestCode
Route = Callable[[RemotingCommand, RemotingConnection], Awaitable[RemotingCommand | None]]

#: RocketMQ's MixAll.RETRY_GROUP_TOPIC_PREFIX.
RETRY_PREFIX = "%RETRY%"
#: PullSysFlag bits.
PULL_COMMIT_OFFSET, PULL_SUSPEND, PULL_SUBSCRIPTION = 0x1, 0x2, 0x4
#: RocketMQ's MixAll.MASTER_ID: a pull answer always sends the consumer to the master.
MASTER_ID = 0
EXPIRY_SCAN_S = 10.0
#: The longest subscription expression kept from a heartbeat (a TAG expression is a few tags).
MAX_EXPRESSION = 4096

_SEND_CODES = {
    "PUT_OK": ResponseCode.SUCCESS, "FLUSH_DISK_TIMEOUT": ResponseCode.FLUSH_DISK_TIMEOUT,
    "FLUSH_SLAVE_TIMEOUT": ResponseCode.FLUSH_SLAVE_TIMEOUT, "SLAVE_NOT_AVAILABLE": ResponseCode.SLAVE_NOT_AVAILABLE,
    "SERVICE_NOT_AVAILABLE": ResponseCode.SERVICE_NOT_AVAILABLE, "MESSAGE_ILLEGAL": ResponseCode.MESSAGE_ILLEGAL,
    "IN_SYNC_REPLICAS_NOT_ENOUGH": ResponseCode.SYSTEM_ERROR,
}
_SEND_REQUESTS = frozenset({RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE})
#: Statuses whose message is stored: the answer carries its id and offsets (RocketMQ's sendOK).
_STORED = frozenset({"PUT_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"})
_NOT_MASTER = ("service not available now. It may be caused by one of the following reasons: the broker's disk is "
               "full, messages are put to the slave, message store has been shut down, etc.")


class BrokerRemoting:
    def __init__(self, broker: Broker) -> None:
        self.b = broker
        self.consumers = ConsumerGroups()
        self.arrivals = Arrivals()
        self.store_host = _store_host(broker.config.brokerIP1, broker.config.listenPort)
        self._opaque = itertools.count(1)
        limits = broker.config.http_limits()
        self._deadlines = (limits.header_timeout_s, limits.body_timeout_s)  # a frame's head, then the rest
        self.puts = PutBatcher(functools.partial(broker.put, validated=True))  # _send validates each alone
        self.offload = Offload(name="broker-decode")
        self._tasks: list[asyncio.Task[None]] = []
        self._verifier: Verifier | None = None
        self._routes: dict[int, Route] = {
            RC.SEND_MESSAGE: self._send, RC.SEND_MESSAGE_V2: self._send, RC.SEND_BATCH_MESSAGE: self._send,
            RC.PULL_MESSAGE: self._pull, RC.QUERY_CONSUMER_OFFSET: self._query_offset,
            RC.UPDATE_CONSUMER_OFFSET: self._update_offset, bh.GET_ALL_CONSUMER_OFFSET: self._all_offsets,
            bh.LITE_PULL_MESSAGE: self._pull,
            RC.GET_MAX_OFFSET: self._max_offset, RC.GET_MIN_OFFSET: self._min_offset,
            RC.HEART_BEAT: self._heartbeat, bh.UNREGISTER_CLIENT: self._unregister,
            RC.GET_CONSUMER_LIST_BY_GROUP: self._consumer_list, RC.GET_BROKER_EPOCH_CACHE: self._epoch_cache,
            RC.GET_BROKER_HA_STATUS: self._ha_status, RC.NOTIFY_BROKER_ROLE_CHANGED: self._role_changed,
            bh.GET_ALL_TOPIC_CONFIG: self._all_topic_config, bh.UPDATE_AND_CREATE_TOPIC: self._create_topic,
            bh.RESET_MASTER_FLUSH_OFFSET: self._reset_master_flush_offset,
        }
        self.limits = request_limits(self._routes, broker.config.maxMessageSize)

    # ------------------------------------------------------------------ wiring
    def connection(self, server_state: Any) -> RemotingConnection:
        """A protocol for one remoting connection on the listen port (make_server's ``binary``)."""
        return RemotingConnection(self.handle, on_closed=self.on_closed, server_state=server_state, front=self.front,
                                  head_timeout_s=self._deadlines[0], frame_timeout_s=self._deadlines[1],
                                  limits=self.limits)

    def front(self, request: RemotingCommand, conn: RemotingConnection) -> bool:
        """Sends, served without a task each: checked at once, then answered when their batch is stored
        (``PutBatcher.submit``). Everything else goes to ``handle``, and so does a large batch, whose
        messages are read off the loop."""
        if request.code not in _SEND_REQUESTS or _large_batch(request):
            return False
        try:
            prepared = self._prepare_send(request, self._born_host(conn))
        except (HeaderFieldError, BodyError) as exc:
            prepared = _answer(request, ResponseCode.INVALID_PARAMETER, str(exc))
        if not isinstance(prepared, tuple):
            conn.finish(request, prepared)
            return True
        messages, uniq_keys = prepared

        def done(outcome: PutOutcome | BaseException) -> None:
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, Exception):
                    return  # cancelled: the broker is stopping
                log.error("send from %s failed: %s", conn.peer, outcome, exc_info=outcome)
                conn.finish(request, _answer(request, ResponseCode.SYSTEM_ERROR,
                                             "internal error while serving the request"))
                return
            conn.finish(request, self._send_answer(request, outcome, uniq_keys, frame=True))
        self.puts.submit(messages, done)
        return True

    def on_put(self, messages: list[Message]) -> None:
        self.arrivals.notify()

    async def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._expire_loop(), name="consumer-expiry"))

    async def stop(self) -> None:
        self.offload.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    async def handle(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        route = self._routes.get(request.code)
        if route is None:
            return _answer(
                request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported")
        try:
            answer = await route(request, conn)
        except (HeaderFieldError, BodyError) as exc:
            answer = _answer(request, ResponseCode.INVALID_PARAMETER, str(exc))
        except Busy as exc:
            log.info("request %d from %s refused: %s", request.code, conn.peer, exc)
            answer = _answer(request, ResponseCode.SYSTEM_BUSY, str(exc))
        return None if request.is_oneway else answer

    def on_closed(self, conn: RemotingConnection) -> None:
        """A client's connection closed: its consumers leave their groups (RocketMQ's channel close)."""
        self._notify_groups(self.consumers.channel_closed(conn))

    # ------------------------------------------------------------------ send
    async def _send(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        born_host = self._born_host(conn)
        prepared = await self.offload.run(len(request.body), lambda: self._prepare_send(request, born_host))
        if not isinstance(prepared, tuple):
            return prepared
        messages, uniq_keys = prepared
        outcome = await self.puts.put(messages)
        return self._send_answer(request, outcome, uniq_keys)

    @staticmethod
    def _born_host(conn: RemotingConnection) -> SocketAddress:
        born_host = conn.attributes.get("bornHost")
        if born_host is None:  # parsed once per connection
            host, _, port = conn.peer.rpartition(":")
            born_host = conn.attributes["bornHost"] = SocketAddress.parse(host, _port(port))
        return born_host

    def _prepare_send(self, request: RemotingCommand,
                      born_host: SocketAddress) -> RemotingCommand | tuple[list[Message], list[str]] | None:
        """A send's messages and their UNIQ_KEYs, each checked on its own; or the refusal to answer (None for
        a oneway send). Pure (reads only the configuration), so a large batch is prepared off the loop."""
        header = bh.parse_send_header(request.code, dict(request.ext_fields))
        refusal = self._send_check(header, request.body)
        if refusal is not None:
            return _answer(request, refusal.code, refusal.remark)
        messages = to_store_messages(header, request.body, born_host, self.b.config.brokerClusterName)
        if isinstance(messages, Refusal):
            return _answer(request, messages.code, messages.remark)
        try:
            for message in messages:  # alone, so that it cannot fail the sends it is stored with
                self.b.store.validate(message)
        except MessageIllegal as exc:
            return _answer(request, ResponseCode.MESSAGE_ILLEGAL, str(exc))
        return messages, [m.properties.get("UNIQ_KEY", "") for m in messages]

    def _send_check(self, header: bh.SendMessageRequestHeader, body: bytes) -> Refusal | None:
        if not valid_topic(header.topic):
            return Refusal(ResponseCode.INVALID_PARAMETER, f"The specified topic: {header.topic[:300]}, contains "
                           "illegal characters or is too long, allowing only ^[%|a-zA-Z0-9_-]+$ up to 127 characters")
        queues = self.b.config.defaultTopicQueueNums
        if header.queue_id >= queues:
            return Refusal(ResponseCode.INVALID_PARAMETER, f"request queueId[{header.queue_id}] is illegal, topic "
                           f"{header.topic} has queues 0..{queues - 1}")
        if header.is_batch and len(body) > self.b.config.maxMessageSize:
            return Refusal(ResponseCode.MESSAGE_ILLEGAL, f"the batch of {len(body)} bytes exceeds maxMessageSize "
                           f"{self.b.config.maxMessageSize}")
        return None

    @overload
    def _send_answer(self, request: RemotingCommand, outcome: PutOutcome, uniq_keys: list[str],
                     frame: Literal[False] = False) -> RemotingCommand | None: ...

    @overload
    def _send_answer(self, request: RemotingCommand, outcome: PutOutcome, uniq_keys: list[str],
                     frame: Literal[True]) -> RemotingCommand | bytes | None: ...

    def _send_answer(self, request: RemotingCommand, outcome: PutOutcome, uniq_keys: list[str],
                     frame: bool = False) -> RemotingCommand | bytes | None:
        """The answer to a send; with ``frame``, a stored send's answer comes as its encoded frame."""
        code = _SEND_CODES.get(outcome.status, ResponseCode.SYSTEM_ERROR)
        if outcome.status not in _STORED or not outcome.results:
            remark = outcome.remark
            if outcome.status == "SERVICE_NOT_AVAILABLE":
                remark = f"{_NOT_MASTER} ({outcome.remark})"
            elif outcome.status == "IN_SYNC_REPLICAS_NOT_ENOUGH":
                remark = f"in-sync replicas not enough: {outcome.remark}"
            return _answer(request, code, remark or outcome.status)
        first = outcome.results[0]
        ids = ",".join(self._msg_id(r.commit_log_offset) for r in outcome.results)
        # SendMessageResponseHeader's fields, written directly: every value is ours and of its type
        ext = {"msgId": ids, "queueId": str(first.queue_id), "queueOffset": str(first.queue_offset)}
        if len(uniq_keys) == 1 and uniq_keys[0]:
            ext["transactionId"] = uniq_keys[0]
        if frame and not request.is_oneway:
            return response_frame(request, code, ext)
        return _answer(request, code, None, ext)

    def _msg_id(self, commit_log_offset: int) -> str:
        return (self.store_host.encode() + commit_log_offset.to_bytes(8, "big", signed=True)).hex().upper()

    # ------------------------------------------------------------------ pull
    async def _pull(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        h = bh.PullMessageRequestHeader.from_ext_fields(request.ext_fields)
        self._check_queue(h.topic, h.queue_id, "PullMessageRequestHeader", h.consumer_group)
        if h.expression_type not in (None, "", "TAG"):
            return _answer(request, ResponseCode.SYSTEM_ERROR,
                          f"The broker does not support consumer to filter message by {h.expression_type[:40]}")
        expression = h.subscription if h.sys_flag & PULL_SUBSCRIPTION else \
            self.consumers.subscription(h.consumer_group, h.topic)
        if expression is None:
            return _answer(request, ResponseCode.SUBSCRIPTION_NOT_EXIST,
                          f"the consumer's subscription not exist, group: {h.consumer_group}, topic: {h.topic}")
        master = self.b.role is Role.MASTER
        if master and h.sys_flag & PULL_COMMIT_OFFSET and h.commit_offset >= 0:
            self._commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        tags = TagFilter.parse(expression)
        max_bytes = min(h.max_msg_bytes, MAX_PULL_BYTES) if h.max_msg_bytes and h.max_msg_bytes > 0 \
            else MAX_PULL_BYTES

        def read() -> PullRead:
            found = read_queue(self.b.store, self.store_host, h.topic, h.queue_id, h.queue_offset, h.max_msg_nums,
                               tags, max_bytes)
            return found if self.b.role is Role.MASTER else slave_answer(found)

        event = self.arrivals.current()
        result = read()
        if result.code == ResponseCode.PULL_NOT_FOUND and master and h.sys_flag & PULL_SUSPEND \
                and not request.is_oneway:
            result = await hold(self.arrivals, event, h.suspend_timeout_millis, read) or result
        header = bh.PullMessageResponseHeader(
            suggest_which_broker_id=MASTER_ID, next_begin_offset=result.next_begin_offset,
            min_offset=result.min_offset, max_offset=result.max_offset)
        return _answer(request, result.code, result.remark, header.to_ext_fields(), result.body)

    # ------------------------------------------------------------------ consumer offsets
    async def _query_offset(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        h = bh.QueryConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        self._check_queue(h.topic, h.queue_id, "QueryConsumerOffsetRequestHeader", h.consumer_group)
        offset = self.b.consumer_offsets.table.query(h.consumer_group, h.topic, h.queue_id)
        if offset is None and h.set_zero_if_not_found is not False:
            # RocketMQ answers 0 for a group with no offset when the queue still starts at 0 and its first
            # message is in memory; every stored message counts as in memory here.
            low, high = self._bounds(h.topic, h.queue_id)
            offset = 0 if low <= 0 < high else None
        if offset is None:
            remark = "Not found, do not set to zero, maybe this group boot first" if h.set_zero_if_not_found \
                is False else "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"
            return _answer(request, ResponseCode.QUERY_NOT_FOUND, remark)
        return _answer(request, ResponseCode.SUCCESS, None,
                             bh.QueryConsumerOffsetResponseHeader(offset=offset).to_ext_fields())

    async def _update_offset(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        h = bh.UpdateConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
        self._check_queue(h.topic, h.queue_id, "UpdateConsumerOffsetRequestHeader", h.consumer_group)
        if h.commit_offset < 0:
            raise HeaderFieldError("UpdateConsumerOffsetRequestHeader", "commitOffset", "must not be negative")
        refused = self._commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        return _answer(request, ResponseCode.SYSTEM_ERROR, refused) if refused else \
            _answer(request, ResponseCode.SUCCESS)

    def _commit(self, group: str, topic: str, queue_id: int, offset: int) -> str | None:
        try:
            self.b.consumer_offsets.table.commit(group, topic, queue_id, offset)
        except TableFull as exc:
            log.warning("consumer offset of %s@%s not kept: %s", topic, group, exc)
            return str(exc)
        return None

    async def _all_offsets(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        return _answer(request, ResponseCode.SUCCESS, None, None,
                             self.b.consumer_offsets.table.snapshot().encode())

    async def _max_offset(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        h = bh.GetMaxOffsetRequestHeader.from_ext_fields(request.ext_fields)
        self._check_queue(h.topic, h.queue_id, "GetMaxOffsetRequestHeader")
        offset = self._bounds(h.topic, h.queue_id)[1]
        return _answer(request, ResponseCode.SUCCESS, None,
                             bh.GetMaxOffsetResponseHeader(offset=offset).to_ext_fields())

    async def _min_offset(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        h = bh.GetMinOffsetRequestHeader.from_ext_fields(request.ext_fields)
        self._check_queue(h.topic, h.queue_id, "GetMinOffsetRequestHeader")
        offset = self._bounds(h.topic, h.queue_id)[0]
        return _answer(request, ResponseCode.SUCCESS, None,
                             bh.GetMinOffsetResponseHeader(offset=offset).to_ext_fields())

    def _bounds(self, topic: str, queue_id: int) -> tuple[int, int]:
        """The queue's (min offset, max offset); (0, 0) for a queue never written. A read of no message
        at offset 0 gives both without reading a record."""
        got = self.b.store.get_messages(topic, queue_id, 0, 0)
        return got.min_offset, got.max_offset

    def _check_queue(self, topic: str, queue_id: int, header: str, group: str | None = None) -> None:
        if not valid_topic(topic):
            raise HeaderFieldError(header, "topic", "must be 1-127 of letters, digits, '%', '|', '_' and '-'")
        if not 0 <= queue_id < self.b.config.defaultTopicQueueNums:
            raise HeaderFieldError(header, "queueId", f"must be 0..{self.b.config.defaultTopicQueueNums - 1}")
        if group is not None and GROUP_PATTERN.fullmatch(group) is None:
            raise HeaderFieldError(header, "consumerGroup", "must be 1-255 of letters, digits, '%', '|', '_' and '-'")

    # ------------------------------------------------------------------ consumer groups
    async def _heartbeat(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        client, groups = await self.offload.run(len(request.body), lambda: read_heartbeat(request.body))
        changed = []
        for group, subs in groups:
            try:
                if self.consumers.register(group, client, conn, subs, self.b.clock.now_ms()):
                    changed.append(group)
            except RegistryFull as exc:
                return _answer(request, ResponseCode.SYSTEM_ERROR, str(exc))
        self._notify_groups(changed)
        await self._retry_topics(group for group, _ in groups)
        return _answer(request, ResponseCode.SUCCESS)

    async def _retry_topics(self, groups: Iterable[str]) -> None:
        """Each consumer group's retry topic (``%RETRY%<group>``), created when the group first heartbeats,
        as RocketMQ's broker does: its consumers subscribe to it and look its route up."""
        known = self.b.store.created_topics.names
        missing = sorted({t for t in (RETRY_PREFIX + g for g in groups) if t not in known and valid_topic(t)})
        if not missing:
            return
        try:
            created = await asyncio.to_thread(lambda: [t for t in missing if self.b.store.created_topics.create(t)])
        except TopicsFull as exc:
            log.warning("retry topics %s not created: %s", ", ".join(missing), exc)
            return
        if created:
            log.info("retry topic(s) %s created for their consumer groups", ", ".join(created))
            self.b.namesrv.note_topics(created)

    async def _unregister(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        h = bh.UnregisterClientRequestHeader.from_ext_fields(request.ext_fields)
        if h.consumer_group and self.consumers.unregister(h.consumer_group, h.client_id):
            self._notify_groups([h.consumer_group])
        return _answer(request, ResponseCode.SUCCESS)

    async def _consumer_list(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        group = bh.GetConsumerListByGroupRequestHeader.from_ext_fields(request.ext_fields).consumer_group
        ids = self.consumers.client_ids(group)
        if not ids:
            return _answer(request, ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group[:255]}")
        return _answer(request, ResponseCode.SUCCESS, None, None,
                             bb.GetConsumerListByGroupResponseBody(tuple(ids)).encode())

    def _notify_groups(self, groups: list[str]) -> None:
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

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(EXPIRY_SCAN_S)
            self._notify_groups(self.consumers.expire(self.b.clock.now_ms()))

    # ------------------------------------------------------------------ controller mode
    async def _epoch_cache(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        data = self.b.epoch_cache()
        entries = tuple(bodies.EpochEntry(e["epoch"], e["startOffset"], e["endOffset"]) for e in data["epochEntries"])
        # RocketMQ's broker reports id 0 while it is master (its brokerId then means its role)
        broker_id = MASTER_ID if self.b.role is Role.MASTER else (data["brokerId"] or 0)
        cache = bodies.EpochEntryCache(data["clusterName"], data["brokerName"], broker_id, entries, data["maxOffset"])
        return _answer(request, ResponseCode.SUCCESS, None, None, cache.encode())

    async def _create_topic(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        header = bh.CreateTopicRequestHeader.from_ext_fields(request.ext_fields)
        refusal = self._topic_refusal(header, request)
        if refusal is not None:
            return _answer(request, *refusal)
        try:
            created = await asyncio.to_thread(self.b.store.created_topics.create, header.topic)
        except TopicsFull as exc:
            return _answer(request, ResponseCode.SYSTEM_ERROR, str(exc))
        if created:
            log.info("topic %s created by %s", header.topic, conn.peer)
            self.b.namesrv.note_topics([header.topic])
        return _answer(request, ResponseCode.SUCCESS)

    def _topic_refusal(self, header: bh.CreateTopicRequestHeader, request: RemotingCommand) -> tuple[int, str] | None:
        """Why this broker will not create the topic as asked (code, remark), or None."""
        queues = self.b.config.defaultTopicQueueNums
        unsigned = self.unsigned(request)
        if unsigned is not None:
            return ResponseCode.NO_PERMISSION, unsigned
        if not valid_topic(header.topic) or header.topic == AUTO_CREATE_TOPIC:
            return (ResponseCode.INVALID_PARAMETER, (f"topic {header.topic[:80]!r} is illegal or a system topic: "
                                                    f"use at most 127 of letters, digits, '%', '|', '_' and '-'"))
        if header.read_queue_nums != queues or header.write_queue_nums != queues:
            return (ResponseCode.INVALID_PARAMETER, (f"every topic of this broker has {queues} read and {queues} write "
                                                    f"queues (defaultTopicQueueNums); ask for -r {queues} -w {queues}"))
        if header.perm != PERM_READ_WRITE:
            return (ResponseCode.INVALID_PARAMETER, f"only perm {PERM_READ_WRITE} (read and write) is supported")
        return None

    async def _all_topic_config(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        names = [str(t["topic"]) for t in self.b.store.topics()]
        wrapper = TopicConfigSerializeWrapper(topic_table(names, self.b.config.defaultTopicQueueNums))
        return _answer(request, ResponseCode.SUCCESS, None, None, wrapper.encode())

    async def _ha_status(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        return _answer(request, ResponseCode.SUCCESS, None, None, ha_runtime_info(self.b.ha_status()).encode())

    async def _reset_master_flush_offset(self, request: RemotingCommand,
                                         conn: RemotingConnection) -> RemotingCommand | None:
        """As RocketMQ's AdminBrokerProcessor: a broker that is not master records the offset (in its
        checkpoint); a master ignores it; both answer SUCCESS. With ``authToken`` set, only when signed."""
        header = bh.ResetMasterFlushOffsetHeader.from_ext_fields(request.ext_fields)
        refusal = self.unsigned(request)
        if refusal is not None:
            return _answer(request, ResponseCode.NO_PERMISSION, refusal)
        offset = header.master_flush_offset
        if offset is not None and offset < 0:
            raise HeaderFieldError(type(header).__name__, "masterFlushOffset", f"must not be negative, got {offset}")
        if offset is not None and self.b.role is not Role.MASTER:
            def record() -> None:
                with self.b.io_lock:
                    self.b.store.set_master_flushed_offset(offset)
            await asyncio.to_thread(record)
            log.info("master flush offset reset to %d by %s", offset, conn.peer)
        return _answer(request, ResponseCode.SUCCESS)

    async def _role_changed(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        NotifyBrokerRoleChangedRequestHeader.from_ext_fields(request.ext_fields)  # well formed, never applied
        refusal = self.unsigned(request)
        if refusal is not None:
            log.info("ignored a role-change notification over remoting from %s: %s", conn.peer, refusal)
            return _answer(request, ResponseCode.NO_PERMISSION, refusal)
        await self.b.replicas.on_role_change_notified()
        return _answer(request, ResponseCode.SUCCESS)

    def unsigned(self, request: RemotingCommand) -> str | None:
        """With ``authToken`` set: why ``request`` is not signed with it (None if it is, or if no token)."""
        token = self.b.config.authToken
        if not token:
            return None
        if self._verifier is None or self._verifier.secret != token:
            self._verifier = Verifier(token)
        return self._verifier.check(request, self.b.clock.now_ms())


def request_limits(served: Iterable[int], max_message_size: int) -> RequestLimits:
    """What each request may carry (docs/remoting.md): a send its message (or batch), a heartbeat its
    client's groups, a role-change hint its SyncStateSet (never read); the rest no body."""
    invalid = ResponseCode.INVALID_PARAMETER
    send = BodyLimit(max_message_size, ResponseCode.MESSAGE_ILLEGAL, "maxMessageSize")
    bodies: dict[int, BodyLimit] = {**dict.fromkeys(_SEND_REQUESTS, send), RC.HEART_BEAT: BodyLimit(HEARTBEAT_BODY, invalid),
                                    RC.NOTIFY_BROKER_ROLE_CHANGED: BodyLimit(SMALL_BODY, invalid)}
    return server_limits(served, bodies, invalid, ResponseCode.REQUEST_CODE_NOT_SUPPORTED)


def read_heartbeat(body: bytes) -> tuple[str, list[tuple[str, dict[str, str]]]]:
    """A heartbeat's client id and, per consumer group, its subscriptions (topic -> expression), every name
    and expression checked; pure, so a large one is read off the loop. Raises BodyError."""
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
    return client, groups


def _large_batch(request: RemotingCommand) -> bool:
    """A batch whose messages are many enough to be read off the loop (a single message costs little)."""
    if len(request.body) <= INLINE_BYTES:
        return False
    return request.code == RC.SEND_BATCH_MESSAGE or request.ext_fields.get(
        "batch" if request.code == RC.SEND_MESSAGE else "m", "").lower() in ("true", "1")


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


def ha_runtime_info(status: dict[str, Any]) -> bb.HARuntimeInfo:
    """Our haStatus view as RocketMQ's HARuntimeInfo."""
    if status.get("role") == "MASTER":
        slaves = tuple(bb.HAConnectionRuntimeInfo(
            s.get("slaveAddress"), int(s.get("ackOffset") or 0), int(s.get("lag") or 0), bool(s.get("inSync")),
            int(float(s.get("transferSpeedKBps") or 0) * 1024), int(s.get("transferOffset") or 0))
            for s in status.get("slaves") or [])
        return bb.HARuntimeInfo(True, int(status.get("maxOffset") or 0), int(status.get("inSyncSlaveNums") or 0),
                                slaves)
    client = bb.HAClientRuntimeInfo(status.get("masterHaAddress") or status.get("masterAddress"),
                                    int(float(status.get("transferSpeedKBps") or 0) * 1024),
                                    int(status.get("maxOffset") or 0), int(status.get("lastReadTimestamp") or 0),
                                    int(status.get("lastWriteTimestamp") or 0), int(status.get("masterFlushOffset") or 0))
    return bb.HARuntimeInfo(False, 0, 0, (), client)


def _answer(request: RemotingCommand, code: int, remark: str | None = None, ext_fields: dict[str, str] | None = None,
            body: bytes = b"") -> RemotingCommand | None:
    """``make_response``, or None for a oneway request (served, never answered)."""
    return None if request.is_oneway else make_response(request, code, remark, ext_fields, body)


def _port(text: str) -> int:
    return int(text) if text.isdecimal() and int(text) < 65536 else 0


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
