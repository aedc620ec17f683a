"""The custom headers of the broker's administrative codes mqadmin and the Dashboard send (AdminBrokerProcessor's
statistics, connections, subscription groups, configuration and topic deletion), by RocketMQ's field names.
Same rules as headers.py."""

from __future__ import annotations

from dataclasses import MISSING, dataclass

from services.remoting.headers import CustomHeader, _bool, _int, _long, _string

__all__ = [
    "DELETE_SUBSCRIPTIONGROUP", "DELETE_TOPIC_IN_BROKER", "GET_ALL_SUBSCRIPTIONGROUP_CONFIG", "GET_BROKER_CONFIG",
    "GET_BROKER_RUNTIME_INFO", "GET_CONSUMER_CONNECTION_LIST", "GET_CONSUME_STATS", "GET_PRODUCER_CONNECTION_LIST",
    "GET_TOPIC_CONFIG", "GET_TOPIC_STATS_INFO", "INVOKE_BROKER_TO_RESET_OFFSET", "QUERY_TOPIC_CONSUME_BY_WHO", "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP", "UPDATE_BROKER_CONFIG",
    "DeleteSubscriptionGroupRequestHeader", "DeleteTopicRequestHeader", "GetConsumeStatsRequestHeader",
    "GetConsumerConnectionListRequestHeader", "GetProducerConnectionListRequestHeader",
    "GetTopicConfigRequestHeader", "GetTopicStatsInfoRequestHeader", "QueryTopicConsumeByWhoRequestHeader",
    "ResetOffsetRequestHeader",
]

UPDATE_BROKER_CONFIG = 25
GET_BROKER_CONFIG = 26
GET_BROKER_RUNTIME_INFO = 28
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
GET_TOPIC_STATS_INFO = 202
GET_CONSUMER_CONNECTION_LIST = 203
GET_PRODUCER_CONNECTION_LIST = 204
DELETE_SUBSCRIPTIONGROUP = 207
GET_CONSUME_STATS = 208
DELETE_TOPIC_IN_BROKER = 215
INVOKE_BROKER_TO_RESET_OFFSET = 222
QUERY_TOPIC_CONSUME_BY_WHO = 300
GET_TOPIC_CONFIG = 351


@dataclass(frozen=True, kw_only=True)
class GetTopicConfigRequestHeader(CustomHeader):
    """351 GET_TOPIC_CONFIG: one topic's config (mqadmin's topicStatus and consumerProgress ask it for the static
    topic mapping ``lo`` asks for, which no topic of ours has); the answer's body is a TopicConfig."""

    topic: str = _string("topic", required=True, default=MISSING)
    lo: bool | None = _bool("lo")


@dataclass(frozen=True, kw_only=True)
class GetTopicStatsInfoRequestHeader(CustomHeader):
    """202 GET_TOPIC_STATS_INFO; the answer's body is admin_bodies.TopicStatsTable."""

    topic: str = _string("topic", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class GetConsumeStatsRequestHeader(CustomHeader):
    """208 GET_CONSUME_STATS: one group's queues, of ``topic``, of the ``;``-separated ``topicList``, or of every
    topic it has offsets of; the answer's body is admin_bodies.ConsumeStats."""

    consumer_group: str = _string("consumerGroup", required=True, default=MISSING)
    topic: str | None = _string("topic")
    topic_list: str | None = _string("topicList")

    def topics(self) -> list[str]:
        return [t for t in (self.topic_list or "").split(";") if t]


@dataclass(frozen=True, kw_only=True)
class GetConsumerConnectionListRequestHeader(CustomHeader):
    """203 GET_CONSUMER_CONNECTION_LIST; the answer's body is admin_bodies.ConsumerConnection."""

    consumer_group: str = _string("consumerGroup", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class GetProducerConnectionListRequestHeader(CustomHeader):
    """204 GET_PRODUCER_CONNECTION_LIST; the answer's body is admin_bodies.ProducerConnection."""

    producer_group: str = _string("producerGroup", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class QueryTopicConsumeByWhoRequestHeader(CustomHeader):
    """300 QUERY_TOPIC_CONSUME_BY_WHO; the answer's body is admin_bodies.GroupList."""

    topic: str = _string("topic", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class DeleteSubscriptionGroupRequestHeader(CustomHeader):
    """207 DELETE_SUBSCRIPTIONGROUP; ``cleanOffset``: the group's consumer offsets go too."""

    group_name: str = _string("groupName", required=True, default=MISSING)
    clean_offset: bool = _bool("cleanOffset", default=False)


@dataclass(frozen=True, kw_only=True)
class DeleteTopicRequestHeader(CustomHeader):
    """215 DELETE_TOPIC_IN_BROKER (and the name server's 216)."""

    topic: str = _string("topic", required=True, default=MISSING)


@dataclass(frozen=True, kw_only=True)
class ResetOffsetRequestHeader(CustomHeader):
    """222 INVOKE_BROKER_TO_RESET_OFFSET: move ``group``'s offsets of ``topic`` on this broker to the messages
    stored at ``timestamp`` (epoch ms; negative: the end of each queue), of every readable queue or of
    ``queueId`` alone; with ``queueId`` and an ``offset`` other than -1, to that offset. ``isForce`` is
    RocketMQ's old client-side reset's (a reset never moves forward unless forced), which the server-side
    reset ignores. The answer's body is admin_bodies.ResetOffsetBody."""

    topic: str = _string("topic", required=True, default=MISSING)
    group: str = _string("group", required=True, default=MISSING)
    timestamp: int = _long("timestamp", required=True, default=MISSING)
    is_force: bool = _bool("isForce", default=False)
    queue_id: int = _int("queueId", default=-1)
    offset: int | None = _long("offset")
