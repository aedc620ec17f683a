"""The custom headers of the client calls a broker serves (services/remoting/broker_headers.py): wire names from
RocketMQ's header classes, the ``@CFNotNull`` fields, V2's one-letter names, and what the C++ client sends.

Classes followed (RocketMQ 8fc57f1, remoting/src/main/java/org/apache/rocketmq/remoting/protocol/header/):
SendMessageRequestHeader.java (fields at line 38-61), SendMessageRequestHeaderV2.java (a-n at line 38-66,
createSendMessageRequestHeaderV1 at line 68), SendMessageResponseHeader.java, PullMessageRequestHeader.java,
PullMessageResponseHeader.java, QueryConsumerOffsetRequestHeader.java, UpdateConsumerOffsetRequestHeader.java,
GetMaxOffsetRequestHeader.java, GetMinOffsetRequestHeader.java, GetConsumerListByGroupRequestHeader.java.
"""

from __future__ import annotations

import pytest

from services.remoting import broker_headers as bh
from services.remoting.codec import decode_frame
from services.remoting.command import RequestCode
from services.remoting.errors import HeaderFieldError
from services.remoting.headers import CustomHeader

#: What the C++ client (PyPI rocketmq 0.4.4) sends for a send, once the codec has read its JSON numbers
#: as text: SendMessageRequestHeader::Encode writes queueId, sysFlag, flag and defaultTopicQueueNums as
#: numbers, the booleans as 0/1 (UtilAll::to_string), and the ACL fields beside them.
CPP_SEND = (b'{"code":10,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"",'
            b'"batch":"0","bornTimestamp":"1700000000000","defaultTopic":"TBW102","defaultTopicQueueNums":4,'
            b'"flag":0,"producerGroup":"pg","properties":"KEYS\\u0001key-1\\u0002UNIQ_KEY\\u0001AB\\u0002",'
            b'"queueId":2,"reconsumeTimes":"0","sysFlag":0,"topic":"TopicTest","unitMode":"0"},"flag":0,'
            b'"language":"CPP","opaque":3,"remark":"","version":63}\n')


def frame(header: bytes) -> bytes:
    return (4 + len(header)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header


def test_the_cpp_clients_send_header_reads() -> None:
    command = decode_frame(frame(CPP_SEND))
    header = bh.parse_send_header(command.code, dict(command.ext_fields))
    assert (header.producer_group, header.topic, header.default_topic, header.default_topic_queue_nums) == (
        "pg", "TopicTest", "TBW102", 4)
    assert (header.queue_id, header.sys_flag, header.born_timestamp, header.flag) == (2, 0, 1_700_000_000_000, 0)
    assert header.properties == "KEYS\x01key-1\x02UNIQ_KEY\x01AB\x02"
    assert header.reconsume_times == 0 and not header.is_batch


@pytest.mark.parametrize(("text", "expected"), [("true", True), ("TRUE", True), ("1", True), ("false", False),
                                                 ("0", False), (None, False)])
def test_batch_reads_java_and_cpp_booleans(text: str | None, expected: bool) -> None:
    header = bh.SendMessageRequestHeader(producer_group="p", topic="t", default_topic="d", default_topic_queue_nums=4,
                                         queue_id=0, sys_flag=0, born_timestamp=0, flag=0, batch=text)
    assert header.is_batch is expected


def test_a_batch_flag_that_is_no_boolean_is_refused() -> None:
    ext = {"producerGroup": "p", "topic": "t", "defaultTopic": "d", "defaultTopicQueueNums": "4", "queueId": "0",
           "sysFlag": "0", "bornTimestamp": "0", "flag": "0", "batch": "yes"}
    with pytest.raises(HeaderFieldError, match="field 'batch' must be true, false, 1 or 0"):
        bh.SendMessageRequestHeader.from_ext_fields(ext)


@pytest.mark.parametrize("missing", ["producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId",
                                     "sysFlag", "bornTimestamp", "flag"])
def test_send_header_cf_not_null_fields(missing: str) -> None:
    ext = {"producerGroup": "p", "topic": "t", "defaultTopic": "d", "defaultTopicQueueNums": "4", "queueId": "0",
           "sysFlag": "0", "bornTimestamp": "0", "flag": "0"}
    del ext[missing]
    with pytest.raises(HeaderFieldError, match=f"field '{missing}' is missing"):
        bh.SendMessageRequestHeader.from_ext_fields(ext)


V2 = {"a": "pg", "b": "TopicTest", "c": "TBW102", "d": "8", "e": "-1", "f": "1", "g": "17", "h": "9",
      "i": "TAGS\x01x\x02", "j": "2", "k": "false", "l": "16", "m": "false", "n": "broker-a"}


def test_v2_short_names_map_onto_the_long_header() -> None:
    header = bh.parse_send_header(RequestCode.SEND_MESSAGE_V2, V2)
    assert header == bh.SendMessageRequestHeader(
        producer_group="pg", topic="TopicTest", default_topic="TBW102", default_topic_queue_nums=8, queue_id=-1,
        sys_flag=1, born_timestamp=17, flag=9, properties="TAGS\x01x\x02", reconsume_times=2, unit_mode="false",
        batch="false", max_reconsume_times=16)
    assert bh.SendMessageRequestHeaderV2.from_ext_fields(V2).to_ext_fields() == V2


def test_send_batch_message_is_a_batch_whatever_its_flag_says() -> None:
    assert bh.parse_send_header(RequestCode.SEND_BATCH_MESSAGE, V2).is_batch
    assert bh.parse_send_header(RequestCode.SEND_BATCH_MESSAGE, {**V2, "m": "true"}).is_batch


def test_send_response_header_wire_names() -> None:
    header = bh.SendMessageResponseHeader(msg_id="0A00", queue_id=1, queue_offset=7, transaction_id="U")
    assert header.to_ext_fields() == {"msgId": "0A00", "queueId": "1", "queueOffset": "7", "transactionId": "U"}


PULL = {"consumerGroup": "cg", "topic": "TopicTest", "queueId": "1", "queueOffset": "12", "maxMsgNums": "32",
        "sysFlag": "6", "commitOffset": "0", "suspendTimeoutMillis": "15000", "subscription": "tagA || tagB",
        "subVersion": "1700000000000", "expressionType": "TAG", "maxMsgBytes": "65536"}


def test_pull_header_round_trip_and_required_fields() -> None:
    header = bh.PullMessageRequestHeader.from_ext_fields(PULL)
    assert (header.queue_offset, header.sys_flag, header.suspend_timeout_millis, header.max_msg_bytes) == (
        12, 6, 15000, 65536)
    assert header.to_ext_fields() == PULL
    for required in ("consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset",
                     "suspendTimeoutMillis", "subVersion"):
        with pytest.raises(HeaderFieldError, match=f"'{required}' is missing"):
            bh.PullMessageRequestHeader.from_ext_fields({k: v for k, v in PULL.items() if k != required})


def test_pull_response_header_wire_names() -> None:
    header = bh.PullMessageResponseHeader(suggest_which_broker_id=0, next_begin_offset=13, min_offset=0, max_offset=20)
    assert header.to_ext_fields() == {"suggestWhichBrokerId": "0", "nextBeginOffset": "13", "minOffset": "0",
                                      "maxOffset": "20"}


@pytest.mark.parametrize(("cls", "ext"), [
    (bh.QueryConsumerOffsetRequestHeader, {"consumerGroup": "g", "topic": "t", "queueId": "0",
                                           "setZeroIfNotFound": "false"}),
    (bh.UpdateConsumerOffsetRequestHeader, {"consumerGroup": "g", "topic": "t", "queueId": "0", "commitOffset": "9"}),
    (bh.GetMaxOffsetRequestHeader, {"topic": "t", "queueId": "3", "committed": "true"}),
    (bh.GetMinOffsetRequestHeader, {"topic": "t", "queueId": "3"}),
    (bh.GetConsumerListByGroupRequestHeader, {"consumerGroup": "g"}),
    (bh.UnregisterClientRequestHeader, {"clientID": "127.0.0.1@1", "consumerGroup": "g"}),
    (bh.NotifyConsumerIdsChangedRequestHeader, {"consumerGroup": "g"}),
    # as mqadmin's updateTopic sends it (MQClientAPIImpl.createTopic; attributes absent when not given)
    (bh.CreateTopicRequestHeader, {"topic": "TopicTest", "defaultTopic": "TBW102", "readQueueNums": "8",
                                   "writeQueueNums": "8", "perm": "6", "topicFilterType": "SINGLE_TAG",
                                   "topicSysFlag": "0", "order": "false", "force": "false"}),
    (bh.QueryConsumerOffsetResponseHeader, {"offset": "5"}),
    (bh.GetMaxOffsetResponseHeader, {"offset": "5"}),
    (bh.GetMinOffsetResponseHeader, {"offset": "0"}),
])
def test_offset_and_consumer_headers_round_trip(cls: type[CustomHeader], ext: dict[str, str]) -> None:
    assert cls.from_ext_fields(ext).to_ext_fields() == ext


def test_numbers_are_checked_and_named() -> None:
    with pytest.raises(HeaderFieldError, match="UpdateConsumerOffsetRequestHeader: field 'commitOffset'"):
        bh.UpdateConsumerOffsetRequestHeader.from_ext_fields(
            {"consumerGroup": "g", "topic": "t", "queueId": "0", "commitOffset": "9x"})
    with pytest.raises(HeaderFieldError, match="'queueId' 2147483648 is outside an int32"):
        bh.GetMaxOffsetRequestHeader.from_ext_fields({"topic": "t", "queueId": "2147483648"})


def test_every_header_class_is_mapped_and_the_codes_are_rocketmqs() -> None:
    assert (bh.UNREGISTER_CLIENT, bh.NOTIFY_CONSUMER_IDS_CHANGED, bh.GET_ALL_CONSUMER_OFFSET) == (35, 40, 43)
    assert (bh.UPDATE_AND_CREATE_TOPIC, bh.LITE_PULL_MESSAGE) == (17, 361)
    assert (bh.CONSUMER_SEND_MSG_BACK, bh.GET_ALL_DELAY_OFFSET) == (36, 45)
    assert set(bh.BROKER_REQUEST_HEADERS) == {10, 310, 320, 11, 361, 14, 15, 17, 30, 31, 36, 37, 38, 35, 39, 40}
    assert set(bh.BROKER_RESPONSE_HEADERS) == {10, 310, 320, 11, 361, 14, 30, 31}
