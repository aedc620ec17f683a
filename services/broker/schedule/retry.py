"""Consume failures, pure: what a message a consumer could not consume becomes (RocketMQ's
``consumerSendMsgBack`` for CONSUMER_SEND_MSG_BACK, 36, and ``handleRetryAndDLQ`` for the client's fallback,
a plain send to ``%RETRY%<group>``).

A failed message is stored again for its group's retry topic ``%RETRY%<group>`` (one queue), delayed by level
``3 + reconsumeTimes`` (10 s, 30 s, 1 min, ... with the default levels) unless the consumer asked for a level,
with its ``reconsumeTimes`` one higher, its first topic in ``RETRY_TOPIC`` and its first message id in
``ORIGIN_MESSAGE_ID`` (both kept from the first failure on), its body, tags, keys, flag, born time and
host and UNIQ_KEY unchanged. Once it has been retried ``maxReconsumeTimes`` times (or the consumer asks with a
level below 0), it goes to the group's dead-letter queue ``%DLQ%<group>`` (one queue) instead, at once.

``maxReconsumeTimes`` is the consumer's, from the request header, as RocketMQ takes it from any client since
3.4.9; without one it is the group's ``retryMaxTimes`` (subscription_groups.py; 16, RocketMQ's default, for a
group with no settings), which the caller passes in.
"""

from __future__ import annotations

from services.broker.namesrv_registration import DLQ_PREFIX, RETRY_PREFIX
from services.broker.remoting_messages import WIRE, WireFields
from services.broker.store import Message

__all__ = ["DEFAULT_MAX_RECONSUME_TIMES", "RETRY_BASE_LEVEL", "dead_letter", "send_back"]

#: RocketMQ's SubscriptionGroupConfig.retryMaxTimes default.
DEFAULT_MAX_RECONSUME_TIMES = 16
#: The first retry's delay level (then one more per retry): RocketMQ's ``3 + reconsumeTimes``.
RETRY_BASE_LEVEL = 3
RETRY_TOPIC, ORIGIN_MESSAGE_ID, DELAY = "RETRY_TOPIC", "ORIGIN_MESSAGE_ID", "DELAY"


def send_back(topic: str, keys: str, tags: str, properties: dict[str, str], body: bytes, store_ms: int,
              group: str, delay_level: int, max_reconsume_times: int | None, msg_id: str) -> Message:
    """The message to store for a failed one (the stored record's topic, keys, tags, properties, body and store
    time; ``msg_id`` its offset message id): a delayed retry, or the dead-letter queue's copy."""
    props = dict(properties)
    wire = WireFields.decode(props.get(WIRE), store_ms)
    props.setdefault(RETRY_TOPIC, topic)
    props.setdefault(ORIGIN_MESSAGE_ID, msg_id)
    props[WIRE] = WireFields(wire.flag, wire.sys_flag, wire.born_timestamp, wire.born_host,
                             wire.reconsume_times + 1).encode()
    limit = DEFAULT_MAX_RECONSUME_TIMES if max_reconsume_times is None else max_reconsume_times
    if wire.reconsume_times >= limit or delay_level < 0:
        props.pop(DELAY, None)
        return Message(DLQ_PREFIX + group, body, keys, tags, 0, props)
    props[DELAY] = str(delay_level if delay_level > 0 else RETRY_BASE_LEVEL + wire.reconsume_times)
    return Message(RETRY_PREFIX + group, body, keys, tags, 0, props)


def dead_letter(message: Message, reconsume_times: int, max_reconsume_times: int | None) -> Message:
    """A send to a retry topic (the client's fallback when CONSUMER_SEND_MSG_BACK failed), redirected to the
    group's dead-letter queue once its reconsumeTimes is past the limit; any other send unchanged."""
    if not message.topic.startswith(RETRY_PREFIX):
        return message
    limit = DEFAULT_MAX_RECONSUME_TIMES if max_reconsume_times is None else max_reconsume_times
    if reconsume_times <= limit:
        return message
    props = {k: v for k, v in message.properties.items() if k != DELAY}
    group = message.topic[len(RETRY_PREFIX):]
    return Message(DLQ_PREFIX + group, message.body, message.keys, message.tags, 0, props)
