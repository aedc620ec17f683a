"""The rules of a topic's config as RocketMQ's broker applies them (topic_rules.py): what updateTopic
accepts, what a send to a topic may do and what a pull may."""

from __future__ import annotations

from typing import Any

import pytest

from services.broker import topic_rules as r
from services.common.codes import ResponseCode as C
from services.remoting.broker_headers import CreateTopicRequestHeader
from services.remoting.namesrv_bodies import TopicConfig


def create(topic: str = "Orders", **fields: Any) -> CreateTopicRequestHeader:
    values: dict[str, Any] = {"topic": topic, "default_topic": "TBW102", "read_queue_nums": 8,
                              "write_queue_nums": 8, "perm": 6, "topic_filter_type": "SINGLE_TAG", "order": False}
    return CreateTopicRequestHeader(**{**values, **fields})


def test_update_topic_takes_any_queue_counts_and_perm_as_asked() -> None:
    """mqadmin's default updateTopic (-r 8 -w 8), and a read-only topic with more readable queues than writable."""
    assert r.topic_from_request(create(), None) == TopicConfig("Orders", 8, 8, 6)
    assert r.topic_from_request(create(read_queue_nums=16, write_queue_nums=4, perm=4, order=True,
                                       topic_sys_flag=0), None) == TopicConfig("Orders", 16, 4, 4, order=True)


@pytest.mark.parametrize(("header", "code", "remark"), [
    (create(topic=" "), C.INVALID_PARAMETER, "The specified topic is blank."),
    (create(topic="a/b"), C.INVALID_PARAMETER,
     "The specified topic: a/b, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
    (create(topic="t" * 128), C.INVALID_PARAMETER, "is longer than topic max length: 127"),
    (create(topic="TBW102"), C.INVALID_PARAMETER, "The topic[TBW102] is conflict with system topic."),
    (create(topic="rmq_sys_x"), C.INVALID_PARAMETER, "The topic[rmq_sys_x] is conflict with system topic."),
    (create(attributes="+message.type=MIXED"), C.INVALID_PARAMETER, "MIXED message type is not supported."),
    (create(attributes="+colour=red"), C.SYSTEM_ERROR, "unsupported key: colour"),
    (create(attributes="-message.type"), C.SYSTEM_ERROR,
     "only add attribute is supported while creating topic. key: message.type"),
    (create(attributes="message.type=FIFO"), C.SYSTEM_ERROR, "add/alter attribute format is wrong: message.type"),
    (create(read_queue_nums=1025), C.INVALID_PARAMETER, "readQueueNums 1025 is out of range"),
    (create(perm=8), C.INVALID_PARAMETER, "perm 8"),
])
def test_update_topic_refusals_carry_rocketmqs_code_and_remark(header: CreateTopicRequestHeader, code: int,
                                                               remark: str) -> None:
    refusal = r.topic_from_request(header, None)
    assert isinstance(refusal, r.Refusal) and refusal.code == code and remark in refusal.remark


def test_attributes_are_added_altered_and_deleted_on_an_existing_topic() -> None:
    current = TopicConfig("Orders", 8, 8, 6, attributes={"message.type": "FIFO"})
    updated = r.topic_from_request(create(attributes="+message.type=NORMAL,+queue.type=BatchCQ"), current)
    assert isinstance(updated, TopicConfig) and updated.attributes == {"message.type": "NORMAL", "queue.type": "BatchCQ"}
    assert r.alter_attributes(False, updated.attributes, "-queue.type") == {"message.type": "NORMAL"}
    with pytest.raises(ValueError, match="attempt to delete a nonexistent key: cleanup.policy"):
        r.alter_attributes(False, {}, "-cleanup.policy")


def test_a_send_to_an_unknown_topic_creates_it_from_tbw102_only_with_auto_create() -> None:
    """createTopicInSendMessageMethod: the producer's queue count when smaller than TBW102's, perm 6; none
    without autoCreateTopicEnable, except a group's retry topic (one queue)."""
    assert r.auto_created("New", 8, 4, True) == TopicConfig("New", 4, 4, 6)
    assert r.auto_created("New", 4, 16, True) == TopicConfig("New", 4, 4, 6)
    assert r.auto_created("New", 4, 4, False) is None
    assert r.auto_created("%RETRY%cg", 4, 4, False) == TopicConfig("%RETRY%cg", 1, 1, 6)
    refusal = r.send_refusal("New", None)
    assert refusal is not None and refusal.code == C.TOPIC_NOT_EXIST
    assert refusal.remark.startswith("topic[New] not exist, apply first please!\nSee https://rocketmq.apache.org/")


def test_send_perm_and_queue_rules() -> None:
    read_only = TopicConfig("T", 8, 8, 4)
    assert r.send_refusal("T", read_only) == r.Refusal(C.NO_PERMISSION, "the topic[T] sending message is forbidden")
    assert r.send_refusal("T", TopicConfig("T", 8, 8, 2)) is None
    shrunk = TopicConfig("T", 8, 4, 6)  # writable queues reduced first, the readable ones still 8
    assert r.send_queue_refusal(shrunk, 7) is None  # RocketMQ takes an id below the larger count
    refusal = r.send_queue_refusal(shrunk, 8)
    assert refusal is not None and refusal.code == C.INVALID_PARAMETER
    assert refusal.remark == ("request queueId[8] is illegal, TopicConfig [topicName=T, readQueueNums=8, "
                              "writeQueueNums=4, perm=RW-, topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false, "
                              "attributes={}]")


def test_pull_rules() -> None:
    assert r.pull_refusal("T", TopicConfig("T", 2, 8, 6), 1) is None
    write_only = r.pull_refusal("T", TopicConfig("T", 8, 8, 2), 0)
    assert write_only == r.Refusal(C.NO_PERMISSION, "the topic[T] pulling message is forbidden")
    beyond = r.pull_refusal("T", TopicConfig("T", 2, 8, 6), 2)
    assert beyond is not None and beyond.code == C.INVALID_PARAMETER
    assert beyond.remark == "queueId[2] is illegal, topic:[T] topicConfig.readQueueNums:[2]"
    missing = r.pull_refusal("T", None, 0)
    assert missing is not None and missing.code == C.TOPIC_NOT_EXIST
