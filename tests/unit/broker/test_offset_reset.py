"""An administrator's reset of a consumer group's offsets (INVOKE_BROKER_TO_RESET_OFFSET, 222;
services/broker/processor/offset_reset.py): which queues move where, RocketMQ's refusals, and what the
group's consumers see next (their commits ignored until their next pull of a reset queue, which answers
PULL_OFFSET_MOVED with the new offset). Over a real message store, the rest of the broker faked as in
test_broker_remoting.py; tests/interop/test_java_lifecycle.py resets a running Java consumer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from services.broker.consumer_offsets import OffsetTable
from services.broker.processor.offset_reset import plan
from services.broker.remoting import BrokerRemoting
from services.broker.replicas_manager import Role
from services.broker.topic_rules import Refusal
from services.broker.topics import implicit_config
from services.common.codes import ResponseCode as C
from services.remoting import admin_headers as ah
from services.remoting import broker_headers as bh
from services.remoting.acl import sign
from services.remoting.admin_bodies import ResetOffsetBody
from services.remoting.broker_bodies import MessageQueue
from services.remoting.command import RemotingCommand, RequestCode, make_request
from services.remoting.errors import BodyError
from tests.unit.broker.test_broker_remoting import FakeBroker, FakeConn, broker, fill, pull_request, serve

__all__ = ["broker"]  # the fixture, shared

RC = RequestCode
BOUNDS = {0: (0, 5), 1: (2, 9), 2: (0, 0), 3: (0, 1)}


def header(**fields: object) -> ah.ResetOffsetRequestHeader:
    return ah.ResetOffsetRequestHeader(**{"topic": "T", "group": "g", "timestamp": 1000, **fields})  # type: ignore[arg-type]


def planned(h: ah.ResetOffsetRequestHeader, known: bool = True, queues: int = 4) -> dict[int, int] | Refusal:
    return plan(h, implicit_config("T", queues), known, lambda q: BOUNDS[q], lambda q, t: BOUNDS[q][0] + 1)


def test_every_readable_queue_moves_to_its_offset_at_the_time_or_to_its_end_for_a_negative_time() -> None:
    assert planned(header()) == {0: 1, 1: 3, 2: 1, 3: 1}
    assert planned(header(timestamp=-1)) == {0: 5, 1: 9, 2: 0, 3: 1}
    assert planned(header(), queues=2) == {0: 1, 1: 3}


def test_one_queue_moves_to_the_offset_given_within_the_queue_or_to_its_offset_at_the_time() -> None:
    assert planned(header(queue_id=1, offset=4)) == {1: 4}
    assert planned(header(queue_id=1, offset=10)) == {1: 10}  # RocketMQ accepts one past the end
    assert planned(header(queue_id=1)) == planned(header(queue_id=1, offset=-1)) == {1: 3}
    assert planned(header(queue_id=1, offset=1)) == Refusal(C.SYSTEM_ERROR,
                                                            "Target offset 1 not in consume queue range [2-9]")
    assert planned(header(queue_id=1, offset=11)) == Refusal(C.SYSTEM_ERROR,
                                                             "Target offset 11 not in consume queue range [2-9]")


def test_an_unknown_topic_or_group_is_refused_with_rocketmqs_codes_and_remarks() -> None:
    assert plan(header(), None, True, lambda q: (0, 0), lambda q, t: 0) == Refusal(C.TOPIC_NOT_EXIST,
                                                                                   "Topic T does not exist")
    assert planned(header(), known=False) == Refusal(C.SUBSCRIPTION_GROUP_NOT_EXIST, "Group g does not exist")


def test_a_reset_queue_keeps_its_offset_against_the_groups_commits_until_its_next_pull_takes_it() -> None:
    table = OffsetTable()
    table.commit("g", "T", 0, 7)
    table.reset("g", "T", {0: 2, 1: 0})
    assert table.query("g", "T", 0) == 2 and table.reset_pending("g", "T", 0)
    assert not table.reset_pending("other", "T", 0)
    assert table.take_reset("g", "T", 0) == 2 and table.take_reset("g", "T", 0) is None
    table.remove_group("g")
    assert not table.reset_pending("g", "T", 1) and table.query("g", "T", 1) is None


def test_the_answer_body_reads_as_rocketmq_writes_it_and_hostile_values_are_refused() -> None:
    written = (b'{"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"T"}:5,'
               b'{"brokerName":"broker-a","queueId":0,"topic":"T"}:0}}')
    body = ResetOffsetBody.decode(written)
    assert body.offset_table == {MessageQueue("T", "broker-a", 1): 5, MessageQueue("T", "broker-a", 0): 0}
    assert ResetOffsetBody.decode(body.encode()) == body
    for bad in (b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:"5"}}',
                b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:true}}',
                b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:99999999999999999999}}',
                b'{"offsetTable":{"x":1}}', b'{"offsetTable":[1]}', b"\xff"):
        with pytest.raises(BodyError):
            ResetOffsetBody.decode(bad)


# ------------------------------------------------------------------------------------------- over the broker


def reset_request(timestamp: int = 0, topic: str = "TopicTest", group: str = "cg", **fields: str) -> RemotingCommand:
    return make_request(ah.INVOKE_BROKER_TO_RESET_OFFSET, 1, {"topic": topic, "group": group,
                                                              "timestamp": str(timestamp), "isForce": "true", **fields})


def commit_request(offset: int, queue_id: int = 1) -> RemotingCommand:
    return make_request(RC.UPDATE_CONSUMER_OFFSET, 1, bh.UpdateConsumerOffsetRequestHeader(
        consumer_group="cg", topic="TopicTest", queue_id=queue_id, commit_offset=offset).to_ext_fields())


def test_a_reset_moves_the_group_and_its_consumer_learns_it_at_its_next_pull(broker: FakeBroker) -> None:
    fill(broker, "a", "b", "c")
    assert serve(broker, commit_request(3)).code == C.SUCCESS
    answer = serve(broker, reset_request(timestamp=0))
    assert answer.code == C.SUCCESS, answer.remark
    offsets = ResetOffsetBody.decode(answer.body).offset_table
    assert offsets == {MessageQueue("TopicTest", broker.config.brokerName, q): 0 for q in range(4)}
    table = broker.consumer_offsets.table
    assert table.query("cg", "TopicTest", 1) == 0
    late = serve(broker, commit_request(3))  # the consumer has not heard of the reset yet
    assert (late.code, late.remark) == (C.SUCCESS, "Offset has been previously reset")
    serve(broker, pull_request(offset=3, sys_flag=4 | 1, commit=3))  # nor does a pull's carried commit count
    assert table.query("cg", "TopicTest", 1) == 0
    assert table.take_reset("cg", "TopicTest", 1) is None  # that pull was the queue's next: it took the reset


def test_the_next_pull_after_a_reset_is_told_the_new_offset(broker: FakeBroker) -> None:
    fill(broker, "a", "b", "c")
    serve(broker, commit_request(3))
    assert serve(broker, reset_request(timestamp=-1, queueId="1", offset="1")).code == C.SUCCESS
    moved = serve(broker, pull_request(offset=3))
    assert (moved.code, moved.remark) == (C.PULL_OFFSET_MOVED, "OFFSET_RESET")
    assert moved.ext_fields["nextBeginOffset"] == "1" and moved.ext_fields["maxOffset"] == "3"
    assert serve(broker, pull_request(offset=1)).code == C.SUCCESS  # told once
    assert serve(broker, commit_request(2)).code == C.SUCCESS
    assert broker.consumer_offsets.table.query("cg", "TopicTest", 1) == 2


def test_a_pull_held_for_messages_is_answered_when_its_queue_is_reset(broker: FakeBroker) -> None:
    fill(broker, "a")
    serve(broker, commit_request(1))
    remoting = BrokerRemoting(broker)  # type: ignore[arg-type]

    async def scenario() -> RemotingCommand:
        pull = asyncio.create_task(remoting.handle(pull_request(offset=1, sys_flag=4 | 2, suspend_ms=30_000),
                                                   FakeConn()))
        while remoting.arrivals.held == 0:  # noqa: ASYNC110  polls the code under test, which has no event
            await asyncio.sleep(0.01)
        await remoting.handle(reset_request(timestamp=0), FakeConn())
        return await asyncio.wait_for(pull, 5.0)

    answer = asyncio.run(scenario())
    assert (answer.code, answer.ext_fields["nextBeginOffset"]) == (C.PULL_OFFSET_MOVED, "0")


def test_a_reset_is_refused_by_a_slave_and_for_an_unknown_topic_or_group(broker: FakeBroker) -> None:
    fill(broker, "a")
    unknown_group = serve(broker, reset_request(group="nobody"))
    assert (unknown_group.code, unknown_group.remark) == (C.SUBSCRIPTION_GROUP_NOT_EXIST, "Group nobody does not exist")
    serve(broker, commit_request(1))
    unknown_topic = serve(broker, reset_request(topic="Nowhere"))
    assert (unknown_topic.code, unknown_topic.remark) == (C.TOPIC_NOT_EXIST, "Topic Nowhere does not exist")
    beyond = serve(broker, reset_request(queueId="1", offset="5"))
    assert (beyond.code, beyond.remark) == (C.SYSTEM_ERROR, "Target offset 5 not in consume queue range [0-1]")
    broker.role = Role.SLAVE
    slave = serve(broker, reset_request())
    assert (slave.code, slave.remark) == (C.SYSTEM_ERROR, "Can not reset offset in slave broker")
    for bad in ({"topic": "a b"}, {"group": "a b"}, {"timestamp": "x"}, {"queueId": "1024"}):
        assert serve(broker, make_request(ah.INVOKE_BROKER_TO_RESET_OFFSET, 1, {
            "topic": "TopicTest", "group": "cg", "timestamp": "0", **bad})).code == C.INVALID_PARAMETER


def test_with_an_auth_token_only_a_signed_reset_counts(tmp_path: Path) -> None:
    guarded = FakeBroker(tmp_path, authToken="secret")
    try:
        fill(guarded, "a")
        serve(guarded, commit_request(1))
        assert serve(guarded, reset_request()).code == C.NO_PERMISSION
        assert guarded.consumer_offsets.table.query("cg", "TopicTest", 1) == 1
        assert serve(guarded, sign(reset_request(), "secret", guarded.clock.now_ms())).code == C.SUCCESS
        assert guarded.consumer_offsets.table.query("cg", "TopicTest", 1) == 0
    finally:
        guarded.store.close()
