"""The delivery loop of delayed and timed messages and CONSUMER_SEND_MSG_BACK (36), over a real message store
with the rest of the broker faked (test_broker_remoting.FakeBroker) and a fake clock: nothing is delivered
before it is due, everything when it is, the progress is on disk for a restart, a slave delivers nothing and
copies its master's progress only once its log holds what that progress counts. The real broker processes,
restarts and a master's SIGKILL are tests/integration/test_delayed_messages.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.broker.remoting_messages import WIRE, WireFields
from services.broker.replicas_manager import Role
from services.broker.schedule.delay_offsets import DelayOffsetFile, DelayProgress
from services.broker.schedule.levels import SCHEDULE_TOPIC, TIMER_TOPIC
from services.broker.schedule.service import ScheduleService
from services.common.codes import ResponseCode as C
from services.remoting import broker_headers as bh
from services.remoting.command import RemotingCommand, make_request, make_response
from tests.unit.broker.test_broker_remoting import FakeBroker, send_request, serve


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[FakeBroker]:
    fake = FakeBroker(tmp_path, messageDelayLevel="1s 5s 10s 30s")
    yield fake
    fake.store.close()


def turn(broker: FakeBroker, advance_ms: int = 0) -> None:
    broker.clock.advance(advance_ms)
    asyncio.run(broker.schedule.turn())


def real(broker: FakeBroker, topic: str = "TopicTest", queue_id: int = 1) -> list[str]:
    return [r.properties["UNIQ_KEY"] for r in broker.store.get_messages(topic, queue_id, 0, 100).records]


def test_a_delayed_message_is_held_until_its_level_is_due_then_delivered_once(broker: FakeBroker) -> None:
    assert serve(broker, send_request(DELAY="2", UNIQ_KEY="D1")).code == C.SUCCESS
    assert serve(broker, send_request(UNIQ_KEY="P1")).code == C.SUCCESS
    assert real(broker) == ["P1"] and len(broker.store.get_messages(SCHEDULE_TOPIC, 1, 0, 9).records) == 1
    turn(broker, 4999)
    assert real(broker) == ["P1"]  # not a millisecond early
    turn(broker, 1)
    assert real(broker) == ["P1", "D1"]
    (delivered,) = broker.store.get_messages("TopicTest", 1, 1, 1).records
    assert (delivered.body, delivered.properties["REAL_TOPIC"], "DELAY" in delivered.properties) == (
        b"hello", "TopicTest", False)
    assert WireFields.decode(delivered.properties[WIRE], 0).born_timestamp == 123
    turn(broker, 60_000)
    assert real(broker) == ["P1", "D1"]
    assert DelayOffsetFile(broker.schedule.offsets.path).load() == DelayProgress({2: 1}, 0, broker.store.max_offset)


def test_a_restarted_broker_resumes_from_its_progress_on_disk(broker: FakeBroker, tmp_path: Path) -> None:
    for i in range(3):
        serve(broker, send_request(DELAY="1", UNIQ_KEY=f"D{i}"))
        broker.clock.advance(400)
    turn(broker)  # 1.2 s after the first: it is due (1 s after its store time), not the others
    assert real(broker) == ["D0"]
    restarted = ScheduleService(broker.delay_rules, broker.store, DelayOffsetFile(broker.schedule.offsets.path),
                                broker.put, lambda: True, broker.clock, broker.schedule.client)
    restarted.offsets.load()
    broker.schedule = restarted
    turn(broker, 2000)
    assert real(broker) == ["D0", "D1", "D2"]  # D0 not again


def test_a_timed_message_is_delivered_at_its_time(broker: FakeBroker) -> None:
    at = broker.clock.now_ms() + 1234
    serve(broker, send_request(TIMER_DELIVER_MS=str(at), UNIQ_KEY="T1"))
    serve(broker, send_request(TIMER_DELAY_MS="100", UNIQ_KEY="T2"))
    assert broker.store.get_messages(TIMER_TOPIC, 0, 0, 9).max_offset == 2
    turn(broker, 100)
    assert real(broker) == ["T2"]
    turn(broker, 1133)
    assert real(broker) == ["T2"]
    turn(broker, 1)
    assert real(broker) == ["T2", "T1"]
    assert broker.schedule.progress().timer == 2


def test_a_slave_delivers_nothing_until_it_becomes_master(broker: FakeBroker) -> None:
    serve(broker, send_request(DELAY="1", UNIQ_KEY="D1"))
    broker.role = Role.SLAVE
    turn(broker, 10_000)
    assert real(broker) == [] and broker.schedule.queues is None
    broker.role = Role.MASTER
    turn(broker)
    assert real(broker) == ["D1"]


def test_a_failed_put_leaves_the_message_waiting(broker: FakeBroker) -> None:
    from services.broker.broker import PutOutcome
    serve(broker, send_request(DELAY="1", UNIQ_KEY="D1"))
    broker.forced = PutOutcome("FLUSH_SLAVE_TIMEOUT", [], "no ack")
    turn(broker, 1000)
    assert broker.schedule.progress().level(1) == 0
    broker.forced = None
    turn(broker)
    assert real(broker) == ["D1"] and broker.schedule.progress().level(1) == 1


class StubMaster:
    """The master's answer to GET_ALL_DELAY_OFFSET."""

    def __init__(self, progress: DelayProgress) -> None:
        self.progress = progress

    async def call(self, address: str, request: RemotingCommand) -> RemotingCommand:
        assert request.code == bh.GET_ALL_DELAY_OFFSET
        return make_response(request, C.SUCCESS, body=self.progress.encode())

    async def close(self) -> None:
        pass


def test_a_slave_takes_its_masters_progress_only_once_its_log_holds_what_it_counts(broker: FakeBroker) -> None:
    serve(broker, send_request(UNIQ_KEY="P1"))
    broker.role = Role.SLAVE
    turn(broker)
    ahead = DelayProgress({1: 4}, 2, broker.store.confirm_offset + 1)
    broker.schedule.client = StubMaster(ahead)  # type: ignore[assignment]
    assert asyncio.run(broker.schedule.sync_from("master:1"))
    assert broker.schedule.offsets.progress == DelayProgress()  # its log does not hold those deliveries yet
    held = DelayProgress({1: 4}, 2, broker.store.confirm_offset)
    broker.schedule.client = StubMaster(held)  # type: ignore[assignment]
    asyncio.run(broker.schedule.sync_from("master:1"))
    assert DelayOffsetFile(broker.schedule.offsets.path).load() == held
    answer = serve(broker, make_request(bh.GET_ALL_DELAY_OFFSET, 1))
    assert DelayProgress.decode(answer.body) == held


# ------------------------------------------------------------------------------------------- send back


def send_back(broker: FakeBroker, offset: int, max_times: int | None = None, level: int = 0) -> RemotingCommand:
    header = bh.ConsumerSendMsgBackRequestHeader(offset=offset, group="cg", delay_level=level,
                                                 origin_msg_id="X", origin_topic="TopicTest",
                                                 max_reconsume_times=max_times)
    return serve(broker, make_request(bh.CONSUMER_SEND_MSG_BACK, 3, header.to_ext_fields()))


def test_a_failed_message_is_retried_with_backoff_then_dead_lettered(broker: FakeBroker) -> None:
    serve(broker, send_request(UNIQ_KEY="F1", KEYS="k"))
    assert send_back(broker, 0, max_times=2).code == C.SUCCESS
    held = broker.store.get_messages(SCHEDULE_TOPIC, 2, 0, 9).records  # level 3: 10 s with these levels
    assert [r.properties["REAL_TOPIC"] for r in held] == ["%RETRY%cg"]
    turn(broker, 9999)
    assert real(broker, "%RETRY%cg", 0) == []
    turn(broker, 1)
    (retry,) = broker.store.get_messages("%RETRY%cg", 0, 0, 9).records
    assert (retry.keys, retry.properties["RETRY_TOPIC"], retry.properties["UNIQ_KEY"]) == ("k", "TopicTest", "F1")
    assert WireFields.decode(retry.properties[WIRE], 0).reconsume_times == 1
    assert retry.properties["ORIGIN_MESSAGE_ID"].endswith("0000000000000000")
    assert send_back(broker, retry.physical_offset, max_times=2).code == C.SUCCESS  # level 4: 30 s
    turn(broker, 29_999)
    assert real(broker, "%RETRY%cg", 0) == ["F1"]
    turn(broker, 1)
    second = broker.store.get_messages("%RETRY%cg", 0, 1, 9).records[0]
    assert send_back(broker, second.physical_offset, max_times=2).code == C.SUCCESS
    (dead,) = broker.store.get_messages("%DLQ%cg", 0, 0, 9).records
    assert (dead.properties["RETRY_TOPIC"], WireFields.decode(dead.properties[WIRE], 0).reconsume_times) == (
        "TopicTest", 3)


def test_a_send_back_of_no_message_or_on_a_slave_is_a_system_error(broker: FakeBroker) -> None:
    answer = send_back(broker, 12345)
    assert answer.code == C.SYSTEM_ERROR and "look message by offset failed, 12345" in (answer.remark or "")
    serve(broker, send_request())
    broker.role = Role.SLAVE
    from services.broker.broker import PutOutcome
    broker.forced = PutOutcome("SERVICE_NOT_AVAILABLE", remark="this broker is a slave")
    assert send_back(broker, 0).code == C.SYSTEM_ERROR
    header = {"offset": "0", "group": "bad/group", "delayLevel": "0"}
    assert serve(broker, make_request(bh.CONSUMER_SEND_MSG_BACK, 3, header)).code == C.INVALID_PARAMETER
