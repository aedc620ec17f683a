"""The rules of a topic's config, pure: what ``UPDATE_AND_CREATE_TOPIC`` accepts (RocketMQ's
AdminBrokerProcessor.updateAndCreateTopic, TopicValidator and AttributeUtil), what a send may do to a topic
(AbstractSendMessageProcessor.msgCheck, TopicConfigManager.createTopicInSendMessageMethod) and what a pull
may (PullMessageProcessor). Each check returns a :class:`Refusal` (a response code and RocketMQ's remark)
or None; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from services.broker.record import MAX_TOPIC_LENGTH, TOPIC_PATTERN
from services.broker.topics import (
    MAX_QUEUE_NUMS,
    PERM_INHERIT,
    PERM_READ,
    PERM_READ_WRITE,
    PERM_WRITE,
    config_problem,
)
from services.common.codes import ResponseCode
from services.remoting.broker_headers import CreateTopicRequestHeader
from services.remoting.namesrv_bodies import TopicConfig

__all__ = ["AUTO_CREATE_TOPIC", "NOT_ALLOWED_SEND_TOPICS", "SYSTEM_TOPICS", "TOPIC_ATTRIBUTES", "Refusal",
           "alter_attributes", "auto_created", "is_system_topic", "pull_refusal", "send_queue_refusal",
           "send_refusal", "topic_from_request", "validate_topic"]

AUTO_CREATE_TOPIC = "TBW102"
#: RocketMQ's TopicValidator.SYSTEM_TOPIC_SET (and every topic starting ``rmq_sys_``).
SYSTEM_TOPICS = frozenset({AUTO_CREATE_TOPIC, "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC",
                           "RMQ_SYS_TRACE_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC",
                           "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "CHECKPOINT_TOPIC"})
#: RocketMQ's TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET: system topics no client may send to.
NOT_ALLOWED_SEND_TOPICS = frozenset({"SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
                                     "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT"})
#: RocketMQ's TopicAttributes.ALL: the attribute keys a topic may carry.
TOPIC_ATTRIBUTES = frozenset({"queue.type", "cleanup.policy", "message.type", "topic.reserve.time"})
_FAQ = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."


@dataclass(frozen=True)
class Refusal:
    code: int
    remark: str


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith("rmq_sys_")


def validate_topic(topic: str) -> str | None:
    """TopicValidator.validateTopic's remark for a topic it refuses (our length bound is 127 for every
    topic: a topic names a directory), or None."""
    if not topic.strip():
        return "The specified topic is blank."
    if TOPIC_PATTERN.fullmatch(topic) is None:
        return f"The specified topic: {topic[:300]}, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > MAX_TOPIC_LENGTH:
        return f"The specified topic: {topic[:300]}, is longer than topic max length: {MAX_TOPIC_LENGTH}"
    return None


def _parse_attributes(text: str | None) -> dict[str, str]:
    """AttributeParser.parseToMap: ``+key=value`` adds or alters, ``-key`` deletes; ValueError with RocketMQ's
    message otherwise."""
    parsed: dict[str, str] = {}
    for item in (text or "").split(",") if text else ():
        if "=" in item:
            key, _, value = item.partition("=")
            value = value.split("=")[0]
            if "+" not in key:
                raise ValueError(f"add/alter attribute format is wrong: {key[:80]}")
        else:
            key, value = item, ""
            if "-" not in key:
                raise ValueError(f"delete attribute format is wrong: {key[:80]}")
        if key in parsed:
            raise ValueError(f"key duplication: {key[:80]}")
        parsed[key] = value
    return parsed


def alter_attributes(create: bool, current: Mapping[str, str], modification: str | None) -> dict[str, str]:
    """AttributeUtil.alterCurrentAttributes over our keys: the attributes after ``modification``; ValueError
    with RocketMQ's message for an unknown key, a delete on create, a delete of a missing key."""
    result = dict(current)
    seen: set[str] = set()
    for key, value in _parse_attributes(modification).items():
        real = key[1:] if key[:1] in "+-" else key
        if not real:
            raise ValueError("kv string format wrong.")
        if real in seen:
            raise ValueError(f"alter duplication key. key: {real[:80]}")
        seen.add(real)
        if real not in TOPIC_ATTRIBUTES:
            raise ValueError(f"unsupported key: {real[:80]}")
        if key.startswith("+"):
            result[real] = value
        elif create:
            raise ValueError(f"only add attribute is supported while creating topic. key: {real[:80]}")
        elif key.startswith("-"):
            if real not in result:
                raise ValueError(f"attempt to delete a nonexistent key: {real[:80]}")
            del result[real]
        else:
            raise ValueError(f"wrong format key: {real[:80]}")
    return result


def topic_from_request(header: CreateTopicRequestHeader, current: TopicConfig | None) -> TopicConfig | Refusal:
    """The config ``UPDATE_AND_CREATE_TOPIC`` asks for, or RocketMQ's refusal (plus ours for what this broker
    cannot keep: more than MAX_QUEUE_NUMS queues, a perm that is no combination of 4, 2 and 1)."""
    topic = header.topic
    invalid = validate_topic(topic)
    if invalid is not None:
        return Refusal(ResponseCode.INVALID_PARAMETER, invalid)
    if is_system_topic(topic):
        return Refusal(ResponseCode.INVALID_PARAMETER, f"The topic[{topic}] is conflict with system topic.")
    if header.attributes and "+message.type=MIXED" in header.attributes.split(","):
        return Refusal(ResponseCode.INVALID_PARAMETER, "MIXED message type is not supported.")
    try:
        attributes = alter_attributes(current is None, current.attributes if current else {}, header.attributes)
    except ValueError as exc:  # RocketMQ's broker answers its RuntimeException's message
        return Refusal(ResponseCode.SYSTEM_ERROR, str(exc))
    config = TopicConfig(topic, header.read_queue_nums, header.write_queue_nums, header.perm,
                         header.topic_filter_type, header.topic_sys_flag or 0, header.order, attributes)
    problem = config_problem(config)
    if problem is not None:
        return Refusal(ResponseCode.INVALID_PARAMETER, problem)
    return config


def auto_created(topic: str, queue_nums: int, client_queue_nums: int, enabled: bool) -> TopicConfig | None:
    """createTopicInSendMessageMethod: the config a send to an unknown topic creates from TBW102 (``queue_nums``
    queues, read, write and inherit), with the producer's queue count when smaller; None when
    autoCreateTopicEnable is off (RocketMQ then has no TBW102). A group's retry topic is created either way,
    with one queue (createTopicInSendMessageBackMethod)."""
    if topic.startswith("%RETRY%"):
        return TopicConfig(topic, 1, 1, PERM_READ_WRITE)
    if not enabled:
        return None
    queues = max(0, min(client_queue_nums, queue_nums, MAX_QUEUE_NUMS))
    return TopicConfig(topic, queues, queues, PERM_READ_WRITE)  # TBW102's perm without inherit


def send_refusal(topic: str, config: TopicConfig | None) -> Refusal | None:
    """A send to ``topic`` (its config, None if it has none and none is created): TOPIC_NOT_EXIST with
    RocketMQ's remark, or NO_PERMISSION for a topic without write perm."""
    if config is None:
        return Refusal(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!{_FAQ}")
    if not config.perm & PERM_WRITE:
        return Refusal(ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
    return None


def send_queue_refusal(config: TopicConfig, queue_id: int) -> Refusal | None:
    """msgCheck: a queue id below both counts' larger (a reduced topic's readable queues stay writable to a
    client that still has the old route, as on RocketMQ)."""
    valid = max(config.write_queue_nums, config.read_queue_nums)
    if queue_id >= valid:
        return Refusal(ResponseCode.INVALID_PARAMETER, f"request queueId[{queue_id}] is illegal, {_describe(config)}")
    return None


def pull_refusal(topic: str, config: TopicConfig | None, queue_id: int) -> Refusal | None:
    """PullMessageProcessor's checks of the topic: it exists, is readable, and the queue id is a readable one."""
    if config is None:
        return Refusal(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please! {_FAQ}")
    if not config.perm & PERM_READ:
        return Refusal(ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden")
    if not 0 <= queue_id < config.read_queue_nums:
        return Refusal(ResponseCode.INVALID_PARAMETER, f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                       f"topicConfig.readQueueNums:[{config.read_queue_nums}]")
    return None


def _describe(config: TopicConfig) -> str:
    """TopicConfig.toString, as RocketMQ's remark carries it."""
    return (f"TopicConfig [topicName={config.topic_name}, readQueueNums={config.read_queue_nums}, "
            f"writeQueueNums={config.write_queue_nums}, perm={_perm(config.perm)}, "
            f"topicFilterType={config.topic_filter_type}, topicSysFlag={config.topic_sys_flag}, "
            f"order={str(config.order).lower()}, attributes={_java_map(config.attributes)}]")


def _java_map(values: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{k}={v}" for k, v in values.items()) + "}"


def _perm(perm: int) -> str:
    """PermName.perm2String."""
    return "".join(c if perm & bit else "-" for c, bit in (("R", PERM_READ), ("W", PERM_WRITE), ("X", PERM_INHERIT)))
