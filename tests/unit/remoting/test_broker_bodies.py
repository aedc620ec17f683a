"""The JSON bodies of the client calls a broker serves (services/remoting/broker_bodies.py): golden text as
fastjson writes each RocketMQ class, what the Java and the C++ clients send, and refusals naming the path.

Classes followed (RocketMQ 8fc57f1, remoting/src/main/java/org/apache/rocketmq/remoting/protocol/):
heartbeat/HeartbeatData.java (clientID, producerDataSet, consumerDataSet, heartbeatFingerprint),
heartbeat/ConsumerData.java, heartbeat/SubscriptionData.java, heartbeat/ProducerData.java,
header/GetConsumerListByGroupResponseBody.java, body/ConsumerOffsetSerializeWrapper.java (Integer keys,
written bare), body/HARuntimeInfo.java (HAClientRuntimeInfo's isActivated has no getter, so is never written).
The C++ form follows rocketmq-client-cpp 1.2.3, src/protocol/HeartbeatData.h and SubscriptionData.cpp.
"""

from __future__ import annotations

import pytest

from services.remoting import broker_bodies as bb
from services.remoting.errors import BodyError

JAVA_HEARTBEAT = (
    b'{"clientID":"10.0.0.9@4242#1","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",'
    b'"consumeType":"CONSUME_PASSIVELY","groupName":"cg","messageModel":"CLUSTERING","subscriptionDataSet":'
    b'[{"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG","subString":"tagA","subVersion":'
    b'1700000000000,"tagsSet":["tagA"],"topic":"TopicTest"}],"unitMode":false}],"heartbeatFingerprint":0,'
    b'"producerDataSet":[{"groupName":"pg"},{"groupName":"CLIENT_INNER_PRODUCER"}]}')

#: jsoncpp's FastWriter output of the C++ client's HeartbeatData::Encode: enums as numbers, subVersion as a
#: string, a trailing newline.
CPP_HEARTBEAT = (
    b'{"clientID":"127.0.0.1@1234#987","consumerDataSet":[{"consumeFromWhere":0,"consumeType":1,"groupName":"cg",'
    b'"messageModel":1,"subscriptionDataSet":[{"subString":"*","subVersion":"1700000000000","topic":"TopicTest"}]}],'
    b'"producerDataSet":[{"groupName":"pg"}]}\n')


def test_java_heartbeat_reads_and_writes_back_byte_for_byte() -> None:
    data = bb.HeartbeatData.decode(JAVA_HEARTBEAT)
    (consumer,) = data.consumer_data_set
    (sub,) = consumer.subscription_data_set
    assert (data.client_id, consumer.group_name, consumer.consume_type, consumer.message_model) == (
        "10.0.0.9@4242#1", "cg", "CONSUME_PASSIVELY", "CLUSTERING")
    assert (sub.topic, sub.sub_string, sub.tags_set, sub.code_set, sub.sub_version) == (
        "TopicTest", "tagA", frozenset({"tagA"}), frozenset({2598919}), 1_700_000_000_000)
    assert [p.group_name for p in data.producer_data_set] == ["pg", "CLIENT_INNER_PRODUCER"]
    assert data.encode() == JAVA_HEARTBEAT


def test_cpp_heartbeat_reads_enums_by_number_and_sub_version_as_text() -> None:
    data = bb.HeartbeatData.decode(CPP_HEARTBEAT)
    (consumer,) = data.consumer_data_set
    assert (consumer.consume_type, consumer.message_model, consumer.consume_from_where) == (
        "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET")
    assert consumer.subscription_data_set[0].sub_version == 1_700_000_000_000
    assert consumer.subscription_data_set[0].tags_set == frozenset()


@pytest.mark.parametrize(("raw", "match"), [
    (b'{"clientID":5}', "clientID is an integer, not a string"),
    (b'{"consumerDataSet":{}}', "consumerDataSet is an object, not an array"),
    (b'{"consumerDataSet":[{"consumeType":"CONSUME_EVERYTHING"}]}', r"consumerDataSet\[0\].consumeType"),
    (b'{"consumerDataSet":[{"messageModel":7}]}', r"consumerDataSet\[0\].messageModel is an integer"),
    (b'{"consumerDataSet":[{"subscriptionDataSet":[{"subVersion":"12x"}]}]}', "subVersion is '12x', not a number"),
    (b'{"consumerDataSet":[{"subscriptionDataSet":[{"tagsSet":[1]}]}]}', r"tagsSet\[0\] is an integer"),
    (b'{"consumerDataSet":[{"subscriptionDataSet":[{"codeSet":[null]}]}]}', r"codeSet\[0\] is null"),
    (b'{"producerDataSet":' + b"[" + b",".join([b"{}"] * 1001) + b"]}", "1001 elements, more than 1000"),
])
def test_malformed_heartbeats_name_the_path(raw: bytes, match: str) -> None:
    with pytest.raises(BodyError, match=match):
        bb.HeartbeatData.decode(raw)


def test_consumer_list_golden() -> None:
    body = bb.GetConsumerListByGroupResponseBody(("127.0.0.1@1#1", "127.0.0.1@2#2"))
    assert body.encode() == b'{"consumerIdList":["127.0.0.1@1#1","127.0.0.1@2#2"]}'
    assert bb.GetConsumerListByGroupResponseBody.decode(body.encode()) == body


def test_consumer_offsets_golden_with_bare_queue_ids() -> None:
    body = bb.ConsumerOffsetSerializeWrapper({"TopicTest@cg": {1: 12, 0: 7}, "Other@cg2": {}})
    assert body.encode() == b'{"offsetTable":{"Other@cg2":{},"TopicTest@cg":{0:7,1:12}}}'
    assert bb.ConsumerOffsetSerializeWrapper.decode(body.encode()) == body
    # RocketMQ adds a dataVersion; standard JSON quotes the keys: both read the same
    quoted = b'{"dataVersion":{"counter":3,"timestamp":1},"offsetTable":{"TopicTest@cg":{"0":7,"1":12}}}'
    assert bb.ConsumerOffsetSerializeWrapper.decode(quoted).offset_table == {"TopicTest@cg": {0: 7, 1: 12}}


@pytest.mark.parametrize(("raw", "match"), [
    (b'{"offsetTable":{"t@g":{0:-1}}}', "not an offset"),
    (b'{"offsetTable":{"t@g":{0:"7"}}}', "is a string, not an integer"),
    (b'{"offsetTable":{"t@g":{-1:7}}}', "not a queue id"),
    (b'{"offsetTable":{"t@g":{"x":7}}}', "not a queue id"),
    (b'{"offsetTable":{"t@g":{0:1,"0":2}}}', "duplicate key '0' \\(the same name as 0\\)"),
    (b'{"offsetTable":{"t@g":{"01":7}}}', "not a queue id"),
    (b'{"offsetTable":{"t@g":{"\\u0661":7}}}', "not a queue id"),
    (b'{"offsetTable":{"t@g":[]}}', "is an array, not an object"),
    (b'{"offsetTable":{5:{}}}', "must be quoted"),
])
def test_malformed_offset_tables_are_refused(raw: bytes, match: str) -> None:
    with pytest.raises(BodyError, match=match):
        bb.ConsumerOffsetSerializeWrapper.decode(raw)


def test_ha_runtime_info_golden() -> None:
    master = bb.HARuntimeInfo(True, 2048, 1, (bb.HAConnectionRuntimeInfo("127.0.0.1:40000", 2048, 0, True, 512, 1024),))
    assert master.encode() == (
        b'{"haClientRuntimeInfo":{"lastReadTimestamp":0,"lastWriteTimestamp":0,"masterFlushOffset":0,"maxOffset":0,'
        b'"transferredByteInSecond":0},"haConnectionInfo":[{"addr":"127.0.0.1:40000","diff":0,"inSync":true,'
        b'"slaveAckOffset":2048,"transferFromWhere":1024,"transferredByteInSecond":512}],"inSyncSlaveNums":1,'
        b'"master":true,"masterCommitLogMaxOffset":2048}')
    assert bb.HARuntimeInfo.decode(master.encode()) == master
    slave = bb.HARuntimeInfo(False, ha_client_runtime_info=bb.HAClientRuntimeInfo("127.0.0.1:10912", 0, 99, 5, 6))
    assert bb.HARuntimeInfo.decode(slave.encode()) == slave
