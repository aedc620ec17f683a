"""The statistics and connection bodies (services/remoting/admin_bodies.py) as fastjson writes them, with the
MessageQueue-keyed maps RocketMQ sends, read back, and a bad field named."""

from __future__ import annotations

import pytest

from services.remoting import admin_bodies as ab
from services.remoting.broker_bodies import MessageQueue, SubscriptionData
from services.remoting.errors import BodyError

Q0, Q1 = MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)


def test_topic_stats_are_written_with_message_queue_keys_as_fastjson_writes_them() -> None:
    table = ab.TopicStatsTable({Q1: ab.TopicOffset(0, 3, 17), Q0: ab.TopicOffset(1, 2, 0)}, 2.5)
    assert table.encode() == (
        b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"lastUpdateTimestamp":0,"maxOffset":2,'
        b'"minOffset":1},{"brokerName":"broker-a","queueId":1,"topic":"T"}:{"lastUpdateTimestamp":17,"maxOffset":3,'
        b'"minOffset":0}},"topicPutTps":2.5}')
    assert ab.TopicStatsTable.decode(table.encode()) == table


def test_consume_stats_round_trip_and_total_diff() -> None:
    stats = ab.ConsumeStats({Q0: ab.OffsetWrapper(10, 4, 4, 99), Q1: ab.OffsetWrapper(3, 3, 3, 0)}, 0.0)
    assert stats.encode().startswith(b'{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":0,')
    assert ab.ConsumeStats.decode(stats.encode()) == stats
    assert stats.total_diff() == 6
    # what RocketMQ's broker may send: whitespace, a key string holding a brace, an integer TPS
    odd = b'{"consumeTps":1, "offsetTable":{ {"brokerName":"b{x","queueId":2,"topic":"T"} : {"brokerOffset":5}}}'
    assert ab.ConsumeStats.decode(odd).offset_table == {MessageQueue("T", "b{x", 2): ab.OffsetWrapper(5, 0, 0, 0)}


@pytest.mark.parametrize(("body", "named"), [
    (b'{"consumeTps":"fast"}', "consumeTps"),
    (b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":"x"}}}', "brokerOffset"),
    (b'{"offsetTable":{"notaqueue":{}}}', "offsetTable"),
])
def test_a_bad_field_is_named(body: bytes, named: str) -> None:
    with pytest.raises(BodyError, match=named):
        ab.ConsumeStats.decode(body)


def test_connections_and_group_lists_round_trip() -> None:
    consumer = ab.ConsumerConnection(
        (ab.Connection("10.0.0.1@1", "10.0.0.1:5000", "JAVA", 479),),
        {"T": SubscriptionData("T", "a||b", frozenset({"a", "b"}), frozenset({97, 98}))},
        "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET")
    assert ab.ConsumerConnection.decode(consumer.encode()) == consumer
    assert consumer.encode().startswith(b'{"connectionSet":[{"clientAddr":"10.0.0.1:5000","clientId":"10.0.0.1@1",'
                                        b'"language":"JAVA","version":479}],"consumeFromWhere":')
    assert consumer.min_version() == 479 and ab.ConsumerConnection().min_version() == 2**31 - 1
    producer = ab.ProducerConnection((ab.Connection("p@1", "10.0.0.2:1", "CPP", 3),))
    assert ab.ProducerConnection.decode(producer.encode()) == producer
    assert ab.GroupList(frozenset({"b", "a"})).encode() == b'{"groupList":["a","b"]}'
