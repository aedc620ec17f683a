"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and CONSUMER_SEND_MSG_BACK (36): RocketMQ's
SendMessageProcessor.

A send is checked alone (header, topic, queue, properties, each message against the store's rules; the topic's
config as RocketMQ's msgCheck reads it: topic_rules.py), then
stored through the broker's put path (``PutBatcher`` over ``Broker.put``: role, SyncStateSet, quorum,
flush and ack waits), and answered with the put status as RocketMQ's response code. Most sends take the
connection's front path (``front``): checked at once, answered from the batcher's callback, no task each;
a large batch is read off the loop (``serve``). A delayed or timed message is stored in its schedule topic,
and a send to a retry topic past its group's maxReconsumeTimes in the group's dead-letter queue (as RocketMQ's
handleRetryAndDLQ), and a transactional one as a half message (transaction/half.py). ``send_back`` serves 36, a consumer's failed message (schedule/retry.py).

A send to a topic this broker does not hold creates it first, as RocketMQ's createTopicInSendMessageMethod
does (with autoCreateTopicEnable; a group's retry topic always): off the loop, since its config is written
to disk before the message is stored; then the send is served as any other.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, overload

from services.broker.config import BrokerConfig
from services.broker.consumer_offsets import GROUP_PATTERN
from services.broker.namesrv_registration import RETRY_PREFIX
from services.broker.processor.common import answer
from services.broker.put_batcher import PutBatcher
from services.broker.record import MessageRecord, valid_topic
from services.broker.remoting_messages import Refusal, Stamp, to_store_messages
from services.broker.schedule.levels import DelayRules, NotSchedulable
from services.broker.schedule.retry import DEFAULT_MAX_RECONSUME_TIMES, dead_letter, send_back
from services.broker.store import Message, MessageIllegal
from services.broker.topic_rules import (
    NOT_ALLOWED_SEND_TOPICS,
    auto_created,
    send_queue_refusal,
    send_refusal,
)
from services.broker.topics import TopicsFull
from services.broker.transaction.half import is_transactional, to_half
from services.common.clock import Clock
from services.common.codes import ResponseCode
from services.common.offload import INLINE_BYTES, Offload
from services.common.remoting_conn import RemotingConnection
from services.remoting import broker_headers as bh
from services.remoting.codec import response_frame
from services.remoting.command import RemotingCommand, RequestCode
from services.remoting.errors import BodyError, HeaderFieldError
from services.remoting.message import SocketAddress
from services.remoting.namesrv_bodies import TopicConfig

if TYPE_CHECKING:
    from services.broker.broker import PutOutcome

__all__ = ["NOT_ALLOWED_SEND_TOPICS", "SEND_REQUESTS", "SendProcessor"]

log = logging.getLogger(__name__)

RC = RequestCode
_SEND_CODES = {
    "PUT_OK": ResponseCode.SUCCESS, "FLUSH_DISK_TIMEOUT": ResponseCode.FLUSH_DISK_TIMEOUT,
    "FLUSH_SLAVE_TIMEOUT": ResponseCode.FLUSH_SLAVE_TIMEOUT, "SLAVE_NOT_AVAILABLE": ResponseCode.SLAVE_NOT_AVAILABLE,
    "SERVICE_NOT_AVAILABLE": ResponseCode.SERVICE_NOT_AVAILABLE, "MESSAGE_ILLEGAL": ResponseCode.MESSAGE_ILLEGAL,
    "IN_SYNC_REPLICAS_NOT_ENOUGH": ResponseCode.SYSTEM_ERROR,
}
SEND_REQUESTS = frozenset({RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE})
#: Statuses whose message is stored: the answer carries its id and offsets (RocketMQ's sendOK).
_STORED = frozenset({"PUT_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"})
_NOT_MASTER = ("service not available now. It may be caused by one of the following reasons: the broker's disk is "
               "full, messages are put to the slave, message store has been shut down, etc.")

#: What ``prepare`` gives: the refusal to answer, the messages to store, or the config of a topic to create first.
Prepared = RemotingCommand | tuple[list[Message], list[str]] | TopicConfig | None


class SendProcessor:
    """Built with what a send reads: the configuration, the store's message check, the put batcher, the
    decoding worker, the store host that message ids carry, the rules of delayed messages and the clock
    (a timed message's due time counts from its arrival), each topic's config and how to create one."""

    def __init__(self, config: BrokerConfig, validate: Callable[[Message], None], puts: PutBatcher,
                 offload: Offload, store_host: SocketAddress, rules: DelayRules, clock: Clock,
                 look: Callable[[int], MessageRecord | str], topics: Callable[[str], TopicConfig | None],
                 create: Callable[[TopicConfig], bool], on_created: Callable[[list[str]], None],
                 retry_max_times: Callable[[str], int] = lambda group: DEFAULT_MAX_RECONSUME_TIMES) -> None:
        self.config = config
        self.topics = topics
        self.create = create
        self.on_created = on_created
        self.retry_max_times = retry_max_times
        self.look = look
        self.rules = rules
        self.clock = clock
        self.validate = validate
        self.puts = puts
        self.offload = offload
        self.store_host = store_host

    def front(self, request: RemotingCommand, conn: RemotingConnection) -> bool:
        """Sends, served without a task each: checked at once, then answered when their batch is stored
        (``PutBatcher.submit``). Everything else goes to the dispatch table, and so does a large batch, whose
        messages are read off the loop."""
        if request.code not in SEND_REQUESTS or _large_batch(request):
            return False
        try:
            prepared = self.prepare(request, born_host(conn), self.clock.now_ms())
        except (HeaderFieldError, BodyError) as exc:
            prepared = answer(request, ResponseCode.INVALID_PARAMETER, str(exc))
        if isinstance(prepared, TopicConfig):
            return False  # a topic to create first: ``serve`` does it off the loop
        if not isinstance(prepared, tuple):
            conn.finish(request, prepared)
            return True
        messages, uniq_keys = prepared

        def done(outcome: PutOutcome | BaseException) -> None:
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, Exception):
                    return  # cancelled: the broker is stopping
                log.error("send from %s failed: %s", conn.peer, outcome, exc_info=outcome)
                conn.finish(request, answer(request, ResponseCode.SYSTEM_ERROR,
                                            "internal error while serving the request"))
                return
            conn.finish(request, self.answer(request, outcome, uniq_keys, frame=True))
        self.puts.submit(messages, done)
        return True

    async def serve(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        host, now = born_host(conn), self.clock.now_ms()
        prepared = await self.offload.run(len(request.body), lambda: self.prepare(request, host, now))
        if isinstance(prepared, TopicConfig):
            refusal = await self.create_topic(prepared, conn)
            if refusal is not None:
                return answer(request, refusal.code, refusal.remark)
            prepared = await self.offload.run(len(request.body), lambda: self.prepare(request, host, now))
        if not isinstance(prepared, tuple):
            return prepared if not isinstance(prepared, TopicConfig) else answer(
                request, ResponseCode.SYSTEM_ERROR, f"topic {prepared.topic_name} could not be created")
        messages, uniq_keys = prepared
        outcome = await self.puts.put(messages)
        return self.answer(request, outcome, uniq_keys)

    def prepare(self, request: RemotingCommand, host: SocketAddress, now_ms: int) -> Prepared:
        """A send's messages and their UNIQ_KEYs, each checked on its own, a delayed or timed one rewritten
        into its schedule topic (schedule/levels.py); or the refusal to answer (None for a oneway send). Pure
        (reads only the configuration), so a large batch is prepared off the loop."""
        header = bh.parse_send_header(request.code, dict(request.ext_fields))
        refusal = self.check(header, request.body)
        if isinstance(refusal, TopicConfig):
            return refusal
        if refusal is not None:
            return answer(request, refusal.code, refusal.remark)
        config = self.config
        messages = to_store_messages(header, request.body, host,
                                     Stamp(config.brokerClusterName, config.regionId, config.traceOn))
        if isinstance(messages, Refusal):
            return answer(request, messages.code, messages.remark)
        if any(is_transactional(m.properties, header.sys_flag) for m in messages):
            return self._half(request, header, messages)
        try:
            for message in messages:  # alone, so that it cannot fail the sends it is stored with
                self.validate(message)
            limit = header.max_reconsume_times
            if limit is None and header.topic.startswith(RETRY_PREFIX):
                limit = self.retry_max_times(header.topic[len(RETRY_PREFIX):])
            messages = [self.rules.schedule(dead_letter(m, header.reconsume_times or 0, limit), now_ms)
                        for m in messages]
        except (MessageIllegal, NotSchedulable) as exc:
            return answer(request, ResponseCode.MESSAGE_ILLEGAL, str(exc))
        return messages, [m.properties.get("UNIQ_KEY", "") for m in messages]

    def _half(self, request: RemotingCommand, header: bh.SendMessageRequestHeader, messages: list[Message]) -> Prepared:
        """A transactional send, stored as a half message (transaction/half.py): never scheduled, never a batch
        (RocketMQ's producer sends none), refused when rejectTransactionMessage is set."""
        if header.is_batch:
            return answer(request, ResponseCode.MESSAGE_ILLEGAL, "a batch cannot hold transactional messages")
        if self.config.rejectTransactionMessage:
            return answer(request, ResponseCode.NO_PERMISSION, f"the broker[{self.config.brokerName}] sending "
                          "transaction message is forbidden")
        try:
            self.validate(messages[0])
        except MessageIllegal as exc:
            return answer(request, ResponseCode.MESSAGE_ILLEGAL, str(exc))
        half = to_half(messages[0])
        return [half], [half.properties.get("UNIQ_KEY", "")]

    def check(self, header: bh.SendMessageRequestHeader, body: bytes) -> Refusal | TopicConfig | None:
        """RocketMQ's msgCheck: why the send is refused, or the config of the topic to create before it."""
        if not valid_topic(header.topic):
            return Refusal(ResponseCode.INVALID_PARAMETER, f"The specified topic: {header.topic[:300]}, contains "
                           "illegal characters or is too long, allowing only ^[%|a-zA-Z0-9_-]+$ up to 127 characters")
        if header.topic in NOT_ALLOWED_SEND_TOPICS:
            return Refusal(ResponseCode.NO_PERMISSION, f"Sending message to topic[{header.topic}] is forbidden.")
        config = self.topics(header.topic)
        if config is None:
            config = auto_created(header.topic, self.config.defaultTopicQueueNums, header.default_topic_queue_nums,
                                  self.config.autoCreateTopicEnable)
            if config is not None:
                return config
        refused = send_refusal(header.topic, config)
        if refused is None and config is not None:
            refused = send_queue_refusal(config, header.queue_id)
        if refused is not None:
            return Refusal(refused.code, refused.remark)
        if header.is_batch and len(body) > self.config.maxMessageSize:
            return Refusal(ResponseCode.MESSAGE_ILLEGAL, f"the batch of {len(body)} bytes exceeds maxMessageSize "
                           f"{self.config.maxMessageSize}")
        return None

    async def create_topic(self, config: TopicConfig, conn: RemotingConnection) -> Refusal | None:
        """Create the topic a send names (its config on disk first), or why it cannot be."""
        try:
            created = await asyncio.to_thread(self.create, config)
        except (TopicsFull, ValueError) as exc:
            return Refusal(ResponseCode.SYSTEM_ERROR, f"topic {config.topic_name} cannot be created: {exc}")
        if created:
            log.info("topic %s created by a send from %s: %d queues, perm %d", config.topic_name, conn.peer,
                     config.write_queue_nums, config.perm)
            self.on_created([config.topic_name])
        return None

    async def send_back(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        """CONSUMER_SEND_MSG_BACK (36): the message at the header's commitlog offset, stored again for a retry of
        its group, or in its dead-letter queue (schedule/retry.py); SUCCESS once stored with PUT_OK, else
        SYSTEM_ERROR (the client then sends it to the retry topic itself)."""
        h = bh.ConsumerSendMsgBackRequestHeader.from_ext_fields(request.ext_fields)
        if GROUP_PATTERN.fullmatch(h.group) is None or not valid_topic("%DLQ%" + h.group):
            raise HeaderFieldError("ConsumerSendMsgBackRequestHeader", "group",
                                   "must be 1-120 of letters, digits, '%', '|', '_' and '-'")
        found = self.look(h.offset) if h.offset >= 0 else "a negative offset"
        if isinstance(found, str):
            return answer(request, ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {h.offset}: {found}")
        props = dict(found.properties)
        keys, tags = props.pop("KEYS", ""), props.pop("TAGS", "")
        message = send_back(found.topic, keys, tags, props, found.body, found.store_timestamp, h.group,
                            h.delay_level, self.retry_max_times(h.group) if h.max_reconsume_times is None
                            else h.max_reconsume_times, self.msg_id(found.physical_offset))
        try:
            self.validate(message)
            message = self.rules.schedule(message, self.clock.now_ms())
        except (MessageIllegal, NotSchedulable) as exc:
            return answer(request, ResponseCode.SYSTEM_ERROR, str(exc))
        outcome = await self.puts.put([message])
        if outcome.status != "PUT_OK":
            return answer(request, ResponseCode.SYSTEM_ERROR, f"{outcome.status} {outcome.remark}".strip())
        return answer(request, ResponseCode.SUCCESS)

    @overload
    def answer(self, request: RemotingCommand, outcome: PutOutcome, uniq_keys: list[str],
               frame: Literal[False] = False) -> RemotingCommand | None: ...

    @overload
    def answer(self, request: RemotingCommand, outcome: PutOutcome, uniq_keys: list[str],
               frame: Literal[True]) -> RemotingCommand | bytes | None: ...

    def answer(self, request: RemotingCommand, outcome: PutOutcome, uniq_keys: list[str],
               frame: bool = False) -> RemotingCommand | bytes | None:
        """The answer to a send; with ``frame``, a stored send's answer comes as its encoded frame."""
        code = _SEND_CODES.get(outcome.status, ResponseCode.SYSTEM_ERROR)
        if outcome.status not in _STORED or not outcome.results:
            remark = outcome.remark
            if outcome.status == "SERVICE_NOT_AVAILABLE":
                remark = f"{_NOT_MASTER} ({outcome.remark})"
            elif outcome.status == "IN_SYNC_REPLICAS_NOT_ENOUGH":
                remark = f"in-sync replicas not enough: {outcome.remark}"
            return answer(request, code, remark or outcome.status)
        first = outcome.results[0]
        ids = ",".join(self.msg_id(r.commit_log_offset) for r in outcome.results)
        # SendMessageResponseHeader's fields, written directly: every value is ours and of its type
        ext = {"msgId": ids, "queueId": str(first.queue_id), "queueOffset": str(first.queue_offset)}
        if len(uniq_keys) == 1 and uniq_keys[0]:
            ext["transactionId"] = uniq_keys[0]
        if frame and not request.is_oneway:
            return response_frame(request, code, ext)
        return answer(request, code, None, ext)

    def msg_id(self, commit_log_offset: int) -> str:
        return (self.store_host.encode() + commit_log_offset.to_bytes(8, "big", signed=True)).hex().upper()


def born_host(conn: RemotingConnection) -> SocketAddress:
    """The connection's peer as a message's born host, parsed once per connection."""
    host = conn.attributes.get("bornHost")
    if host is None:
        name, _, port = conn.peer.rpartition(":")
        host = conn.attributes["bornHost"] = SocketAddress.parse(name, _port(port))
    return host


def _port(text: str) -> int:
    return int(text) if text.isdecimal() and int(text) < 65536 else 0


def _large_batch(request: RemotingCommand) -> bool:
    """A batch whose messages are many enough to be read off the loop (a single message costs little)."""
    if len(request.body) <= INLINE_BYTES:
        return False
    return request.code == RC.SEND_BATCH_MESSAGE or request.ext_fields.get(
        "batch" if request.code == RC.SEND_MESSAGE else "m", "").lower() in ("true", "1")
