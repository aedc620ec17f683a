"""The broker's statistics codes (services/broker/processor/stats.py) over a real store, the rest of the broker
faked as tests/unit/broker/test_broker_remoting.py fakes it: runtime info, a topic's queues, a group's
progress, connections and who consumes a topic, each answered with RocketMQ's body or remark."""

from __future__ import annotations

import asyncio
import dataclasses

from services.broker.remoting import BrokerRemoting
from services.common.codes import ResponseCode as C
from services.remoting import admin_bodies as ab
from services.remoting import admin_headers as ah
from services.remoting import broker_bodies as bb
from services.remoting.bodies import KVTable
from services.remoting.broker_bodies import MessageQueue
from services.remoting.command import LanguageCode, RemotingCommand, RequestCode, make_request
from tests.unit.broker.test_broker_remoting import FakeBroker, FakeConn, broker, fill, pull_request, serve

__all__ = ["broker"]  # the fixture, used by name

RC = RequestCode


def heartbeat(client: str, producer: str | None = None, consumer: str | None = None) -> RemotingCommand:
    subs = (bb.SubscriptionData("TopicTest", "tagA||tagB"),)
    data = bb.HeartbeatData(
        client, tuple(bb.ProducerData(g) for g in [producer] if g),
        tuple(bb.ConsumerData(g, "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_FIRST_OFFSET", subs)
              for g in [consumer] if g))
    return dataclasses.replace(make_request(RC.HEART_BEAT, 1, {}, data.encode()), language=LanguageCode.JAVA,
                               version=401)


def test_runtime_info_is_a_kv_table_with_the_stores_offsets(broker: FakeBroker) -> None:
    fill(broker, "tagA", "tagB")
    answer = serve(broker, make_request(ah.GET_BROKER_RUNTIME_INFO, 1))
    table = KVTable.decode(answer.body).table
    assert answer.code == C.SUCCESS
    assert table["commitLogMaxOffset"] == str(broker.store.max_offset) and table["commitLogMinOffset"] == "0"
    assert table["brokerActive"] == "true" and table["brokerVersionDesc"] == "V5_3_3"
    assert table["earliestMessageTimeStamp"] == str(broker.clock.now_ms())


def test_topic_stats_give_each_queue_its_bounds_and_last_store_time(broker: FakeBroker) -> None:
    fill(broker, "tagA", "tagB")  # both to queue 1
    answer = serve(broker, make_request(ah.GET_TOPIC_STATS_INFO, 1, {"topic": "TopicTest"}))
    table = ab.TopicStatsTable.decode(answer.body).offset_table
    assert len(table) == broker.config.defaultTopicQueueNums
    assert table[MessageQueue("TopicTest", broker.config.brokerName, 1)] == ab.TopicOffset(0, 2, broker.clock.now_ms())
    assert table[MessageQueue("TopicTest", broker.config.brokerName, 0)] == ab.TopicOffset(0, 0, 0)
    missing = serve(broker, make_request(ah.GET_TOPIC_STATS_INFO, 1, {"topic": "Nope"}))
    assert (missing.code, missing.remark) == (C.TOPIC_NOT_EXIST, "topic[Nope] not exist")


def test_consume_stats_give_the_lag_of_each_queue_a_group_consumes(broker: FakeBroker) -> None:
    fill(broker, "tagA", "tagB", "tagA")
    serve(broker, pull_request())  # group cg pulls from queue 1 and commits nothing yet
    serve(broker, make_request(RC.UPDATE_CONSUMER_OFFSET, 1, {"consumerGroup": "cg", "topic": "TopicTest",
                                                              "queueId": "1", "commitOffset": "2"}))
    answer = serve(broker, make_request(ah.GET_CONSUME_STATS, 1, {"consumerGroup": "cg"}))
    stats = ab.ConsumeStats.decode(answer.body)
    queue = stats.offset_table[MessageQueue("TopicTest", broker.config.brokerName, 1)]
    assert queue == ab.OffsetWrapper(3, 2, 2, broker.clock.now_ms())
    assert stats.total_diff() == 1
    none = ab.ConsumeStats.decode(serve(broker, make_request(ah.GET_CONSUME_STATS, 1, {"consumerGroup": "other"})).body)
    assert none.offset_table == {}
    bad = serve(broker, make_request(ah.GET_CONSUME_STATS, 1, {"consumerGroup": "a b"}))
    assert bad.code == C.INVALID_PARAMETER and "consumerGroup" in (bad.remark or "")


def test_connections_follow_heartbeats_and_closed_connections(broker: FakeBroker) -> None:
    remoting = BrokerRemoting(broker)  # type: ignore[arg-type]
    conn = FakeConn("10.1.1.1:4000")

    async def scenario() -> list[RemotingCommand | None]:
        await remoting.handle(heartbeat("c1", producer="pg", consumer="cg"), conn)
        answers = [await remoting.handle(make_request(code, 1, fields), conn) for code, fields in (
            (ah.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "cg"}),
            (ah.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "pg"}),
            (ah.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "TopicTest"}))]
        remoting.on_closed(conn)
        answers += [await remoting.handle(make_request(code, 1, fields), conn) for code, fields in (
            (ah.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "cg"}),
            (ah.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "pg"}))]
        return answers

    consumer, producer, who, gone_c, gone_p = asyncio.run(scenario())
    assert consumer is not None and producer is not None and who is not None
    connection = ab.Connection("c1", "10.1.1.1:4000", "JAVA", 401)
    cc = ab.ConsumerConnection.decode(consumer.body)
    assert (cc.connection_set, cc.consume_type, cc.message_model, cc.consume_from_where) == (
        (connection,), "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_FIRST_OFFSET")
    assert cc.subscription_table["TopicTest"].tags_set == {"tagA", "tagB"}
    assert ab.ProducerConnection.decode(producer.body).connection_set == (connection,)
    assert ab.GroupList.decode(who.body).group_list == {"cg"}
    assert gone_c is not None and (gone_c.code, gone_c.remark) == (206, "the consumer group[cg] not online")
    assert gone_p is not None and (gone_p.code, gone_p.remark) == (C.SYSTEM_ERROR, "the producer group[pg] not exist")
