"""The custom headers of the message path a client uses with a broker: send, pull, offsets, consumers.

Same rules as headers.py (whose base class and field helpers these use): wire names are RocketMQ's Java
field names, ``@CFNotNull`` fields are required, numbers are checked decimal int32/int64. The request
headers inherit ``RpcRequestHeader``'s optional fields in RocketMQ (``ns``, ``nsd``, ``bname``, ``oway``,
``lo``); we read none of them, so they are ignored like any unknown field.

Two booleans are read more widely than headers.py reads booleans: ``unitMode`` and ``batch`` of a send.
The C++ client writes them as ``0``/``1`` (``UtilAll::to_string(bool)``); Java reads anything but
``true`` as false, so a C++ batch would be stored as one message holding the encoded batch. Here
``1`` means true, which is what the C++ client means, and anything other than true/false/1/0 is refused.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, replace

from services.remoting.command import RequestCode
from services.remoting.errors import HeaderFieldError
from services.remoting.headers import CustomHeader, _bool, _int, _long, _string

__all__ = [
    "BROKER_REQUEST_HEADERS",
    "UPDATE_AND_CREATE_TOPIC",
    "CreateTopicRequestHeader",
    "BROKER_RESPONSE_HEADERS",
    "CHECK_TRANSACTION_STATE",
    "CONSUMER_SEND_MSG_BACK",
    "END_TRANSACTION",
    "CheckTransactionStateRequestHeader",
    "EndTransactionRequestHeader",
    "ConsumerSendMsgBackRequestHeader",
    "GET_ALL_CONSUMER_OFFSET",
    "GET_ALL_DELAY_OFFSET",
    "GET_ALL_TOPIC_CONFIG",
    "RESET_MASTER_FLUSH_OFFSET",
    "ResetMasterFlushOffsetHeader",
    "NOTIFY_CONSUMER_IDS_CHANGED",
    "UNREGISTER_CLIENT",
    "GetConsumerListByGroupRequestHeader",
    "GetMaxOffsetRequestHeader",
    "GetMaxOffsetResponseHeader",
    "GetMinOffsetRequestHeader",
    "GetMinOffsetResponseHeader",
    "NotifyConsumerIdsChangedRequestHeader",
    "PullMessageRequestHeader",
    "PullMessageResponseHeader",
    "QUERY_MESSAGE",
    "QueryConsumerOffsetRequestHeader",
    "QueryConsumerOffsetResponseHeader",
    "QueryMessageRequestHeader",
    "QueryMessageResponseHeader",
    "VIEW_MESSAGE_BY_ID",
    "ViewMessageRequestHeader",
    "SearchOffsetRequestHeader",
    "SearchOffsetResponseHeader",
    "SendMessageRequestHeader",
    "SendMessageRequestHeaderV2",
    "SendMessageResponseHeader",
    "UnregisterClientRequestHeader",
    "UpdateConsumerOffsetRequestHeader",
    "parse_send_header",
]

#: RocketMQ's request codes for the client calls served here that command.RequestCode does not name.
QUERY_MESSAGE = 12
UPDATE_AND_CREATE_TOPIC = 17
VIEW_MESSAGE_BY_ID = 33
SEARCH_OFFSET_BY_TIMESTAMP = 29
GET_ALL_TOPIC_CONFIG = 21
UNREGISTER_CLIENT = 35
NOTIFY_CONSUMER_IDS_CHANGED = 40
LOCK_BATCH_MQ = 41
UNLOCK_BATCH_MQ = 42
CONSUMER_SEND_MSG_BACK = 36
GET_ALL_CONSUMER_OFFSET = 43
GET_ALL_DELAY_OFFSET = 45
#: A DefaultLitePullConsumer's pull (its sysFlag carries PullSysFlag's lite-pull bit, 0x10): the same header and
#: answer as 11, served by the same processor in RocketMQ's broker.
LITE_PULL_MESSAGE = 361
RESET_MASTER_FLUSH_OFFSET = 908
#: A producer ends a transaction (oneway), and the broker asks a producer of the group how one ended (oneway).
END_TRANSACTION = 37
CHECK_TRANSACTION_STATE = 39


def _flag_text(header: str, wire: str, value: str | None) -> bool:
    if value is None:
        return False
    lowered = value.lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise HeaderFieldError(header, wire, f"must be true, false, 1 or 0, got {value[:40]!r}")


# ------------------------------------------------------------------------------------------- queries


@dataclass(frozen=True, kw_only=True)
class QueryMessageRequestHeader(CustomHeader):
    """12 QUERY_MESSAGE: the messages of ``topic`` with ``key`` stored within [beginTimestamp, endTimestamp], at
    most ``maxNum``; the request's ext field ``_UNIQUE_KEY_QUERY`` = ``true`` asks by unique key (message id)."""

    topic: str = _string("topic", required=True, default=MISSING)
    key: str = _string("key", required=True, default=MISSING)
    max_num: int = _int("maxNum", required=True, default=MISSING)
    begin_timestamp: int = _long("beginTimestamp", required=True, default=MISSING)
    end_timestamp: int = _long("endTimestamp", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class QueryMessageResponseHeader(CustomHeader):
    index_last_update_timestamp: int = _long("indexLastUpdateTimestamp", required=True, default=MISSING)
    index_last_update_phyoffset: int = _long("indexLastUpdatePhyoffset", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class ViewMessageRequestHeader(CustomHeader):
    """33 VIEW_MESSAGE_BY_ID: the message at commitlog ``offset`` (what an offset message id names)."""

    offset: int = _long("offset", required=True, default=MISSING)
    topic: str | None = _string("topic")


# ------------------------------------------------------------------------------------------- send


@dataclass(frozen=True, kw_only=True)
class SendMessageRequestHeader(CustomHeader):
    """10 SEND_MESSAGE (header/SendMessageRequestHeader). ``queue_id`` below 0 lets the broker choose."""

    producer_group: str = _string("producerGroup", required=True, default=MISSING)
    topic: str = _string("topic", required=True, default=MISSING)
    default_topic: str = _string("defaultTopic", required=True, default=MISSING)
    default_topic_queue_nums: int = _int("defaultTopicQueueNums", required=True, default=MISSING)
    queue_id: int = _int("queueId", required=True, default=MISSING)
    sys_flag: int = _int("sysFlag", required=True, default=MISSING)
    born_timestamp: int = _long("bornTimestamp", required=True, default=MISSING)
    flag: int = _int("flag", required=True, default=MISSING)
    properties: str | None = _string("properties")
    reconsume_times: int | None = _int("reconsumeTimes")
    unit_mode: str | None = _string("unitMode")
    batch: str | None = _string("batch")
    max_reconsume_times: int | None = _int("maxReconsumeTimes")

    def _check(self) -> None:
        _flag_text(type(self).__name__, "unitMode", self.unit_mode)
        _flag_text(type(self).__name__, "batch", self.batch)

    @property
    def is_batch(self) -> bool:
        return _flag_text(type(self).__name__, "batch", self.batch)


@dataclass(frozen=True, kw_only=True)
class SendMessageRequestHeaderV2(CustomHeader):
    """310 SEND_MESSAGE_V2 and 320 SEND_BATCH_MESSAGE: SendMessageRequestHeader's fields under one-letter
    wire names, a to n (header/SendMessageRequestHeaderV2); ``to_v1`` gives the long form."""

    producer_group: str = _string("a", required=True, default=MISSING)
    topic: str = _string("b", required=True, default=MISSING)
    default_topic: str = _string("c", required=True, default=MISSING)
    default_topic_queue_nums: int = _int("d", required=True, default=MISSING)
    queue_id: int = _int("e", required=True, default=MISSING)
    sys_flag: int = _int("f", required=True, default=MISSING)
    born_timestamp: int = _long("g", required=True, default=MISSING)
    flag: int = _int("h", required=True, default=MISSING)
    properties: str | None = _string("i")
    reconsume_times: int | None = _int("j")
    unit_mode: str | None = _string("k")
    max_reconsume_times: int | None = _int("l")
    batch: str | None = _string("m")
    broker_name: str | None = _string("n")

    def to_v1(self) -> SendMessageRequestHeader:
        return SendMessageRequestHeader._checked_values({
            "producer_group": self.producer_group, "topic": self.topic, "default_topic": self.default_topic,
            "default_topic_queue_nums": self.default_topic_queue_nums, "queue_id": self.queue_id, "sys_flag": self.sys_flag,
            "born_timestamp": self.born_timestamp, "flag": self.flag, "properties": self.properties,
            "reconsume_times": self.reconsume_times, "unit_mode": self.unit_mode,
            "max_reconsume_times": self.max_reconsume_times, "batch": self.batch})


def parse_send_header(code: int, ext: dict[str, str]) -> SendMessageRequestHeader:
    """The send header of a 10, 310 or 320 request, as ``SendMessageRequestHeader.parseRequestHeader``
    reads it; a 320 is a batch whatever its ``batch`` field says."""
    if code == RequestCode.SEND_MESSAGE:
        return SendMessageRequestHeader.from_ext_fields(ext)
    header = SendMessageRequestHeader.from_ext_fields(ext, wire_of=SendMessageRequestHeaderV2)
    if code == RequestCode.SEND_BATCH_MESSAGE and not header.is_batch:
        return replace(header, batch="true")
    return header


@dataclass(frozen=True, kw_only=True)
class SendMessageResponseHeader(CustomHeader):
    """The answer to a send (header/SendMessageResponseHeader); a batch's ``msgId`` lists every
    message's id, comma-separated, as RocketMQ's batch answer does."""

    msg_id: str = _string("msgId", required=True, default=MISSING)
    queue_id: int = _int("queueId", required=True, default=MISSING)
    queue_offset: int = _long("queueOffset", required=True, default=MISSING)
    transaction_id: str | None = _string("transactionId")
    batch_uniq_id: str | None = _string("batchUniqId")


# ------------------------------------------------------------------------------------------- pull


@dataclass(frozen=True, kw_only=True)
class PullMessageRequestHeader(CustomHeader):
    """11 PULL_MESSAGE and 361 LITE_PULL_MESSAGE (header/PullMessageRequestHeader). ``sys_flag`` holds
    PullSysFlag's bits: 1 commit the ``commit_offset`` given, 2 the broker may hold the request (long polling),
    4 ``subscription`` is given, 8 class filter, 16 a lite pull consumer's (sent as 361)."""

    consumer_group: str = _string("consumerGroup", required=True, default=MISSING)
    topic: str = _string("topic", required=True, default=MISSING)
    queue_id: int = _int("queueId", required=True, default=MISSING)
    queue_offset: int = _long("queueOffset", required=True, default=MISSING)
    max_msg_nums: int = _int("maxMsgNums", required=True, default=MISSING)
    sys_flag: int = _int("sysFlag", required=True, default=MISSING)
    commit_offset: int = _long("commitOffset", required=True, default=MISSING)
    suspend_timeout_millis: int = _long("suspendTimeoutMillis", required=True, default=MISSING)
    subscription: str | None = _string("subscription")
    sub_version: int = _long("subVersion", required=True, default=MISSING)
    expression_type: str | None = _string("expressionType")
    max_msg_bytes: int | None = _int("maxMsgBytes")


@dataclass(frozen=True, kw_only=True)
class PullMessageResponseHeader(CustomHeader):
    """The answer to 11 (header/PullMessageResponseHeader); the body holds the messages found."""

    suggest_which_broker_id: int = _long("suggestWhichBrokerId", required=True, default=MISSING)
    next_begin_offset: int = _long("nextBeginOffset", required=True, default=MISSING)
    min_offset: int = _long("minOffset", required=True, default=MISSING)
    max_offset: int = _long("maxOffset", required=True, default=MISSING)
    offset_delta: int | None = _long("offsetDelta")
    topic_sys_flag: int | None = _int("topicSysFlag")
    group_sys_flag: int | None = _int("groupSysFlag")


# ---------------------------------------------------------------------------------------- offsets


@dataclass(frozen=True, kw_only=True)
class QueryConsumerOffsetRequestHeader(CustomHeader):
    """14 QUERY_CONSUMER_OFFSET."""

    consumer_group: str = _string("consumerGroup", required=True, default=MISSING)
    topic: str = _string("topic", required=True, default=MISSING)
    queue_id: int = _int("queueId", required=True, default=MISSING)
    set_zero_if_not_found: bool | None = _bool("setZeroIfNotFound")


@dataclass(frozen=True, kw_only=True)
class QueryConsumerOffsetResponseHeader(CustomHeader):
    offset: int = _long("offset", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class UpdateConsumerOffsetRequestHeader(CustomHeader):
    """15 UPDATE_CONSUMER_OFFSET (often oneway)."""

    consumer_group: str = _string("consumerGroup", required=True, default=MISSING)
    topic: str = _string("topic", required=True, default=MISSING)
    queue_id: int = _int("queueId", required=True, default=MISSING)
    commit_offset: int = _long("commitOffset", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class GetMaxOffsetRequestHeader(CustomHeader):
    """30 GET_MAX_OFFSET: the offset the queue's next message will get."""

    topic: str = _string("topic", required=True, default=MISSING)
    queue_id: int = _int("queueId", required=True, default=MISSING)
    committed: bool = _bool("committed", default=True)


@dataclass(frozen=True, kw_only=True)
class GetMaxOffsetResponseHeader(CustomHeader):
    offset: int = _long("offset", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class GetMinOffsetRequestHeader(CustomHeader):
    """31 GET_MIN_OFFSET: the queue's oldest offset still stored."""

    topic: str = _string("topic", required=True, default=MISSING)
    queue_id: int = _int("queueId", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class GetMinOffsetResponseHeader(CustomHeader):
    offset: int = _long("offset", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class SearchOffsetRequestHeader(CustomHeader):
    """29 SEARCH_OFFSET_BY_TIMESTAMP: the queue offset of the messages stored at ``timestamp`` (epoch ms).
    ``boundaryType`` is RocketMQ's BoundaryType, sent by its name: ``LOWER`` (absent: the default) or
    ``UPPER``, in any case; RocketMQ reads any other text as LOWER, ``boundary`` refuses it."""

    topic: str = _string("topic", required=True, default=MISSING)
    queue_id: int = _int("queueId", required=True, default=MISSING)
    timestamp: int = _long("timestamp", required=True, default=MISSING)
    boundary_type: str | None = _string("boundaryType")

    @property
    def upper(self) -> bool:
        """True for UPPER, False for LOWER; HeaderFieldError for anything else."""
        kind = (self.boundary_type or "lower").lower()
        if kind not in ("lower", "upper"):
            raise HeaderFieldError("SearchOffsetRequestHeader", "boundaryType", "must be LOWER or UPPER")
        return kind == "upper"


@dataclass(frozen=True, kw_only=True)
class SearchOffsetResponseHeader(CustomHeader):
    offset: int = _long("offset", required=True, default=MISSING)


# -------------------------------------------------------------------------------------- consumers


@dataclass(frozen=True, kw_only=True)
class GetConsumerListByGroupRequestHeader(CustomHeader):
    """38 GET_CONSUMER_LIST_BY_GROUP; the answer's body is broker_bodies.GetConsumerListByGroupResponseBody."""

    consumer_group: str = _string("consumerGroup", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class UnregisterClientRequestHeader(CustomHeader):
    """35 UNREGISTER_CLIENT: a client shutting down leaves its groups."""

    client_id: str = _string("clientID", required=True, default=MISSING)
    producer_group: str | None = _string("producerGroup")
    consumer_group: str | None = _string("consumerGroup")


@dataclass(frozen=True, kw_only=True)
class ConsumerSendMsgBackRequestHeader(CustomHeader):
    """36 CONSUMER_SEND_MSG_BACK (header/ConsumerSendMsgBackRequestHeader): a message the consumer could not
    consume, named by its commitlog ``offset``, to be retried (``delayLevel`` 0: the broker's backoff) or, below
    0, sent to the dead-letter queue at once."""

    offset: int = _long("offset", required=True, default=MISSING)
    group: str = _string("group", required=True, default=MISSING)
    delay_level: int = _int("delayLevel", required=True, default=MISSING)
    origin_msg_id: str | None = _string("originMsgId")
    origin_topic: str | None = _string("originTopic")
    unit_mode: bool | None = _bool("unitMode")
    max_reconsume_times: int | None = _int("maxReconsumeTimes")


@dataclass(frozen=True, kw_only=True)
class NotifyConsumerIdsChangedRequestHeader(CustomHeader):
    """40 NOTIFY_CONSUMER_IDS_CHANGED (oneway, broker -> client): rebalance this group now."""

    consumer_group: str = _string("consumerGroup", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class CreateTopicRequestHeader(CustomHeader):
    """17 UPDATE_AND_CREATE_TOPIC (header/CreateTopicRequestHeader): an administrator creates or updates a
    topic on one broker. ``attributes`` is AttributeParser's ``+a=b,+c=d`` text."""

    topic: str = _string("topic", required=True, default=MISSING)
    default_topic: str = _string("defaultTopic", required=True, default=MISSING)
    read_queue_nums: int = _int("readQueueNums", required=True, default=MISSING)
    write_queue_nums: int = _int("writeQueueNums", required=True, default=MISSING)
    perm: int = _int("perm", required=True, default=MISSING)
    topic_filter_type: str = _string("topicFilterType", required=True, default=MISSING)
    topic_sys_flag: int | None = _int("topicSysFlag")
    order: bool = _bool("order", required=True, default=False)
    attributes: str | None = _string("attributes")
    force: bool = _bool("force", default=False)


# ------------------------------------------------------------------------------------------- transactions


@dataclass(frozen=True, kw_only=True)
class EndTransactionRequestHeader(CustomHeader):
    """37 END_TRANSACTION (header/EndTransactionRequestHeader): the producer's verdict on the half message at
    ``commitLogOffset`` (queue offset ``tranStateTableOffset`` of RMQ_SYS_TRANS_HALF_TOPIC); ``commitOrRollback``
    is MessageSysFlag's 0 (not known), 8 (commit) or 12 (rollback)."""

    producer_group: str = _string("producerGroup", required=True, default=MISSING)
    tran_state_table_offset: int = _long("tranStateTableOffset", required=True, default=MISSING)
    commit_log_offset: int = _long("commitLogOffset", required=True, default=MISSING)
    commit_or_rollback: int = _int("commitOrRollback", required=True, default=MISSING)
    msg_id: str = _string("msgId", required=True, default=MISSING)
    from_transaction_check: bool | None = _bool("fromTransactionCheck")
    transaction_id: str | None = _string("transactionId")
    topic: str | None = _string("topic")


@dataclass(frozen=True, kw_only=True)
class CheckTransactionStateRequestHeader(CustomHeader):
    """39 CHECK_TRANSACTION_STATE (header/CheckTransactionStateRequestHeader, broker -> producer, oneway): how
    did the transaction of the half message in the body end? The producer answers with 37, these offsets in it."""

    tran_state_table_offset: int = _long("tranStateTableOffset", required=True, default=MISSING)
    commit_log_offset: int = _long("commitLogOffset", required=True, default=MISSING)
    topic: str | None = _string("topic")
    msg_id: str | None = _string("msgId")
    transaction_id: str | None = _string("transactionId")
    offset_msg_id: str | None = _string("offsetMsgId")
    bname: str | None = _string("bname")


#: The request header class of each broker request code that has one.
BROKER_REQUEST_HEADERS: dict[int, type[CustomHeader]] = {
    RequestCode.SEND_MESSAGE: SendMessageRequestHeader,
    RequestCode.SEND_MESSAGE_V2: SendMessageRequestHeaderV2,
    RequestCode.SEND_BATCH_MESSAGE: SendMessageRequestHeaderV2,
    RequestCode.PULL_MESSAGE: PullMessageRequestHeader,
    LITE_PULL_MESSAGE: PullMessageRequestHeader,
    RequestCode.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetRequestHeader,
    RequestCode.UPDATE_CONSUMER_OFFSET: UpdateConsumerOffsetRequestHeader,
    RequestCode.GET_MAX_OFFSET: GetMaxOffsetRequestHeader,
    RequestCode.GET_MIN_OFFSET: GetMinOffsetRequestHeader,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: GetConsumerListByGroupRequestHeader,
    UNREGISTER_CLIENT: UnregisterClientRequestHeader,
    CONSUMER_SEND_MSG_BACK: ConsumerSendMsgBackRequestHeader,
    END_TRANSACTION: EndTransactionRequestHeader,
    CHECK_TRANSACTION_STATE: CheckTransactionStateRequestHeader,
    UPDATE_AND_CREATE_TOPIC: CreateTopicRequestHeader,
    NOTIFY_CONSUMER_IDS_CHANGED: NotifyConsumerIdsChangedRequestHeader,
}

#: The response header class of each broker request code whose answer has one.
BROKER_RESPONSE_HEADERS: dict[int, type[CustomHeader]] = {
    RequestCode.SEND_MESSAGE: SendMessageResponseHeader,
    RequestCode.SEND_MESSAGE_V2: SendMessageResponseHeader,
    RequestCode.SEND_BATCH_MESSAGE: SendMessageResponseHeader,
    RequestCode.PULL_MESSAGE: PullMessageResponseHeader,
    LITE_PULL_MESSAGE: PullMessageResponseHeader,
    RequestCode.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetResponseHeader,
    RequestCode.GET_MAX_OFFSET: GetMaxOffsetResponseHeader,
    RequestCode.GET_MIN_OFFSET: GetMinOffsetResponseHeader,
}


@dataclass(frozen=True, kw_only=True)
class ResetMasterFlushOffsetHeader(CustomHeader):
    """908 RESET_MASTER_FLUSH_OFFSET (header/ResetMasterFlushOffsetHeader): what a slave takes as its master's
    flushed offset; RocketMQ's broker ignores it while it is master."""

    master_flush_offset: int | None = _long("masterFlushOffset")

