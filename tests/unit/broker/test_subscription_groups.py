"""Subscription groups on the broker (services/broker/subscription_groups.py, the admin codes 200, 201 and 207):
RocketMQ's bodies and defaults, the table on disk before the answer and back after a restart, a slave taking its
master's table whole, writes signed when authToken is set, hostile bodies refused with a code, and what a group's
settings change: its retries before the dead-letter queue and whether it may pull."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.broker.processor.common import queue_bounds
from services.broker.subscription_groups import GroupsDamaged, SubscriptionGroups
from services.common.codes import ResponseCode as C
from services.remoting import admin_headers as ah
from services.remoting import broker_headers as bh
from services.remoting.acl import sign
from services.remoting.command import RemotingCommand, make_request
from services.remoting.namesrv_bodies import DataVersion
from services.remoting.subscription_bodies import (
    GroupRetryPolicy,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
)
from tests.unit.broker.test_broker_remoting import (
    FakeBroker,
    FakeClock,
    broker,
    pull_request,
    send_request,
    serve,
)

__all__ = ["broker"]  # the fixture, used by name


def update(config: SubscriptionGroupConfig) -> RemotingCommand:
    return make_request(ah.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, 1, {}, config.encode())


def groups(broker: FakeBroker) -> SubscriptionGroupWrapper:
    answer = serve(broker, make_request(ah.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, 1))
    assert answer.code == C.SUCCESS
    return SubscriptionGroupWrapper.decode(answer.body)


def test_a_group_with_rocketmqs_defaults_round_trips_as_fastjson_writes_it() -> None:
    config = SubscriptionGroupConfig("cg")
    text = config.encode().decode()
    assert text == ('{"attributes":{},"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,'
                    '"consumeFromMinEnable":true,"consumeMessageOrderly":false,"consumeTimeoutMinute":15,'
                    '"groupName":"cg","groupRetryPolicy":{"type":"CUSTOMIZED"},"groupSysFlag":0,'
                    '"notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,"retryQueueNums":1,'
                    '"whichBrokerWhenConsumeSlowly":1}')
    assert SubscriptionGroupConfig.decode(config.encode()) == config
    custom = SubscriptionGroupConfig("cg", group_retry_policy=GroupRetryPolicy("CUSTOMIZED", None, (1000, 5000)))
    assert SubscriptionGroupConfig.decode(custom.encode()) == custom


def test_create_list_and_delete_a_group_on_disk_before_the_answer(broker: FakeBroker, tmp_path: Path) -> None:
    assert groups(broker).table == {}
    assert serve(broker, update(SubscriptionGroupConfig("cg", retry_max_times=3))).code == C.SUCCESS
    listed = groups(broker)
    assert listed.table["cg"].retry_max_times == 3 and listed.data_version.counter == 1
    again = SubscriptionGroups(broker.subscription_groups.path, FakeClock())
    again.load()
    assert again.wrapper() == listed
    delete = make_request(ah.DELETE_SUBSCRIPTIONGROUP, 1, {"groupName": "cg", "cleanOffset": "false"})
    assert serve(broker, delete).code == C.SUCCESS
    assert groups(broker).table == {} and groups(broker).data_version.counter == 2
    assert serve(broker, delete).code == C.SUCCESS  # as RocketMQ: deleting an absent group succeeds


def test_delete_with_clean_offset_forgets_the_groups_offsets(broker: FakeBroker) -> None:
    broker.consumer_offsets.table.commit("cg", "TopicTest", 1, 5)
    broker.consumer_offsets.table.commit("other", "TopicTest", 1, 2)
    serve(broker, make_request(ah.DELETE_SUBSCRIPTIONGROUP, 1, {"groupName": "cg", "cleanOffset": "true"}))
    assert broker.consumer_offsets.table.query("cg", "TopicTest", 1) is None
    assert broker.consumer_offsets.table.query("other", "TopicTest", 1) == 2


def test_an_absent_file_is_an_empty_table_and_a_damaged_one_is_refused(tmp_path: Path) -> None:
    registry = SubscriptionGroups(tmp_path / "subscriptionGroup.json", FakeClock())
    registry.load()
    assert registry.wrapper().table == {}
    registry.path.write_bytes(b'{"subscriptionGroupTable":{"cg":{"groupName":"other"}}}')
    with pytest.raises(GroupsDamaged, match="subscriptionGroup.json is damaged"):
        registry.load()
    registry.path.write_bytes(b"\x00garbage")
    with pytest.raises(GroupsDamaged):
        registry.load()


def test_a_slave_takes_its_masters_table_whole_when_the_version_differs(tmp_path: Path) -> None:
    slave = SubscriptionGroups(tmp_path / "slave.json", FakeClock())
    slave.update(SubscriptionGroupConfig("gone"))
    master = SubscriptionGroupWrapper({"cg": SubscriptionGroupConfig("cg", consume_enable=False)}, DataVersion(0, 9, 4))
    assert slave.copy(master) and slave.wrapper() == master
    assert not slave.copy(master)
    reloaded = SubscriptionGroups(slave.path, FakeClock())
    reloaded.load()
    assert reloaded.wrapper() == master


@pytest.mark.parametrize("body", [
    b'{"groupName":"a b"}', b'{"groupName":"cg","retryMaxTimes":"x"}', b"[1,2]", b"",
    b'{"groupName":"cg","groupRetryPolicy":{"type":"EVIL"}}',
    b'{"groupName":"cg","groupRetryPolicy":{"customizedRetryPolicy":{"next":[' + b"1," * 300 + b"1]}}}",
], ids=["bad name", "text number", "array", "empty", "unknown policy", "long policy"])
def test_a_hostile_body_is_refused_with_a_code(broker: FakeBroker, body: bytes) -> None:
    answer = serve(broker, make_request(ah.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, 1, {}, body))
    assert answer.code != C.SUCCESS and answer.remark
    assert groups(broker).table == {}


def test_with_an_auth_token_only_signed_writes_count(tmp_path: Path) -> None:
    guarded = FakeBroker(tmp_path / "token", authToken="secret")
    try:
        request = update(SubscriptionGroupConfig("cg"))
        assert serve(guarded, request).code == C.NO_PERMISSION
        delete = make_request(ah.DELETE_SUBSCRIPTIONGROUP, 1, {"groupName": "cg"})
        assert serve(guarded, delete).code == C.NO_PERMISSION
        assert serve(guarded, sign(request, "secret", guarded.clock.now_ms())).code == C.SUCCESS
        assert groups(guarded).table.keys() == {"cg"}
    finally:
        guarded.store.close()


def test_a_group_that_may_not_consume_is_refused_its_pulls(broker: FakeBroker) -> None:
    serve(broker, send_request())
    serve(broker, update(SubscriptionGroupConfig("cg", consume_enable=False)))
    answer = serve(broker, pull_request())
    assert (answer.code, answer.remark) == (C.NO_PERMISSION, "subscription group no permission, cg")
    assert answer.ext_fields["forbiddenType"] == "2"
    serve(broker, update(SubscriptionGroupConfig("cg")))
    assert serve(broker, pull_request()).code == C.SUCCESS


def test_a_sent_back_message_goes_to_the_dead_letter_queue_after_the_groups_retry_max_times(
        broker: FakeBroker) -> None:
    sent = serve(broker, send_request())
    offset = str(broker.store.min_offset)
    assert sent.code == C.SUCCESS
    back = {"offset": offset, "group": "cg", "delayLevel": "0"}
    serve(broker, update(SubscriptionGroupConfig("cg", retry_max_times=0)))
    assert serve(broker, make_request(bh.CONSUMER_SEND_MSG_BACK, 1, back)).code == C.SUCCESS
    assert queue_bounds(broker.store, "%DLQ%cg", 0) == (0, 1)
    asked = serve(broker, make_request(bh.CONSUMER_SEND_MSG_BACK, 1, {**back, "maxReconsumeTimes": "5"}))
    assert asked.code == C.SUCCESS and queue_bounds(broker.store, "%DLQ%cg", 0) == (0, 1)  # the consumer's limit wins
