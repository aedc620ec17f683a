"""The broker's remoting dispatch table and its processors (services/broker/remoting.py, services/broker/processor/)
over a real message store, with the rest of the broker faked: the put statuses as RocketMQ's send codes, the pull
statuses as its pull codes, long polling, offsets, consumer groups and their notifications, and the controller-mode
codes. The real broker process is covered by tests/integration/test_broker_remoting.py."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.broker import remoting_pull
from services.broker.broker import PutOutcome
from services.broker.config import BrokerConfig
from services.broker.consumer_offsets import ConsumerOffsets
from services.broker.remoting import BrokerRemoting
from services.broker.remoting_messages import WIRE
from services.broker.replicas_manager import Role, RoleState
from services.broker.runtime_info import RuntimeFacts, runtime_facts
from services.broker.schedule.delay_offsets import DelayOffsetFile
from services.broker.schedule.service import ScheduleService
from services.broker.stats import BrokerStats
from services.broker.store import AppendResult, Message, MessageIllegal, MessageStore
from services.broker.subscription_groups import SubscriptionGroups
from services.common.clock import FakeClock
from services.common.codes import ResponseCode as C
from services.common.remoting_client import RemotingClient
from services.common.remoting_conn import RemotingConnection
from services.remoting import broker_bodies as bb
from services.remoting import broker_headers as bh
from services.remoting.acl import sign
from services.remoting.bodies import EpochEntryCache
from services.remoting.codec import decode_frame
from services.remoting.command import RemotingCommand, RequestCode, make_request
from services.remoting.message import BatchEntry, decode_pulled, encode_batch, encode_properties
from services.remoting.namesrv_bodies import TopicConfig, TopicConfigSerializeWrapper

RC = RequestCode
STORE_HOST = "0A000007" + "00002A9F"  # 10.0.0.7:10911


class FakeReplicas:
    def __init__(self) -> None:
        self.hints = 0
        self.broker_id = 2
        self.state = RoleState(Role.MASTER, 1, 0, "10.0.0.7:10911")

    async def on_role_change_notified(self) -> None:
        self.hints += 1


class FakeNamesrv:
    def __init__(self) -> None:
        self.noted: list[str] = []
        self.triggers = 0

    def note_topics(self, topics: list[str]) -> None:
        self.noted += topics

    def trigger(self) -> None:
        self.triggers += 1


class FakeBroker:
    """What BrokerRemoting uses of a Broker; puts go straight into a real store."""

    def __init__(self, root: Path, **config: Any) -> None:
        self.config = BrokerConfig(brokerIP1="10.0.0.7", listenPort=10911, storePathRootDir=str(root),
                                   maxMessageSize=4096, **config)
        self.store = MessageStore(root / "store", self.config.address, 1 << 20)
        self.store.open()
        self.clock = FakeClock()
        self.role = Role.MASTER
        self.replicas = FakeReplicas()
        self.consumer_offsets = ConsumerOffsets(root)
        self.forced: PutOutcome | None = None
        self.put_listeners: list[Any] = []
        self.namesrv = FakeNamesrv()
        self.io_lock = threading.Lock()
        self.delay_rules = self.config.delay_rules()
        self.schedule = ScheduleService(self.delay_rules, self.store, DelayOffsetFile(root / "delayOffset.json"),
                                        self.put, lambda: self.role is Role.MASTER, self.clock,
                                        RemotingClient(timeout_s=1.0))
        self.stats = BrokerStats(self.clock.now_ms())
        self.subscription_groups = SubscriptionGroups(root / "subscriptionGroup.json", self.clock)

    def runtime_facts(self) -> RuntimeFacts:
        return runtime_facts(self.config, self.store, self.store.max_offset, self.role is Role.MASTER,
                             self.clock.now_ms())


    async def put(self, messages: list[Message], validated: bool = False) -> PutOutcome:
        if self.forced is not None:
            return self.forced
        try:
            for message in () if validated else messages:
                self.store.validate(message)
        except MessageIllegal as exc:  # as Broker._put checks
            return PutOutcome("MESSAGE_ILLEGAL", remark=str(exc))
        results = self.store.append_batch(messages, self.clock.now_ms())
        self.store.set_confirm_offset(self.store.max_offset)
        for listener in self.put_listeners:
            listener(messages)
        return PutOutcome("PUT_OK", results)

    async def delete_topic(self, topic: str) -> str | None:
        outcome = await self.put([self.store.deletion_mark(topic)])
        return None if outcome.status == "PUT_OK" else f"{outcome.status}: {outcome.remark}"

    def epoch_cache(self) -> dict[str, Any]:
        return {"clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": 2,
                "epochEntries": [{"epoch": 1, "startOffset": 0, "endOffset": 10}, {"epoch": 3, "startOffset": 10,
                                                                                    "endOffset": 30}],
                "maxOffset": 30}

    def ha_status(self) -> dict[str, Any]:
        return {"role": "MASTER", "maxOffset": 30, "inSyncSlaveNums": 1, "slaves": [
            {"slaveAddress": "127.0.0.1:5", "ackOffset": 30, "lag": 0, "inSync": True, "transferOffset": 30,
             "transferSpeedKBps": 2.0}]}


class FakeConn(RemotingConnection):
    def __init__(self, peer: str = "192.168.1.20:53412") -> None:
        super().__init__(lambda request, conn: asyncio.sleep(0))  # type: ignore[arg-type, return-value]
        self.peer = peer
        self.sent: list[RemotingCommand] = []

    def send(self, command: RemotingCommand) -> None:
        self.sent.append(command)

    def send_frame(self, frame: bytes) -> None:
        self.sent.append(decode_frame(frame))


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[FakeBroker]:
    fake = FakeBroker(tmp_path)
    yield fake
    fake.store.close()


def serve(broker: FakeBroker, request: RemotingCommand, conn: RemotingConnection | None = None) -> RemotingCommand:
    remoting = BrokerRemoting(broker)  # type: ignore[arg-type]
    return asyncio.run(_call(remoting, request, conn or FakeConn()))


async def _call(remoting: BrokerRemoting, request: RemotingCommand, conn: RemotingConnection) -> Any:
    return await remoting.handle(request, conn)


def send_request(topic: str = "TopicTest", body: bytes = b"hello", queue_id: int = 1, code: int = RC.SEND_MESSAGE,
                 default_queues: int = 4, **props: str) -> RemotingCommand:
    header = bh.SendMessageRequestHeader(
        producer_group="pg", topic=topic, default_topic="TBW102", default_topic_queue_nums=default_queues,
        queue_id=queue_id,
        sys_flag=0, born_timestamp=123, flag=7, properties=encode_properties(props) if props else None)
    ext = header.to_ext_fields()
    if code != RC.SEND_MESSAGE:
        ext = bh.SendMessageRequestHeaderV2(
            producer_group="pg", topic=topic, default_topic="TBW102", default_topic_queue_nums=4, queue_id=queue_id,
            sys_flag=0, born_timestamp=123, flag=7, properties=header.properties).to_ext_fields()
    return make_request(code, 1, ext, body)


def pull_request(offset: int = 0, queue_id: int = 1, expression: str | None = "*", sys_flag: int = 4,
                 suspend_ms: int = 0, commit: int = 0, group: str = "cg", **extra: str) -> RemotingCommand:
    header = bh.PullMessageRequestHeader(
        consumer_group=group, topic="TopicTest", queue_id=queue_id, queue_offset=offset, max_msg_nums=32,
        sys_flag=sys_flag, commit_offset=commit, suspend_timeout_millis=suspend_ms, subscription=expression,
        sub_version=0)
    return make_request(RC.PULL_MESSAGE, 2, {**header.to_ext_fields(), **extra})


# ------------------------------------------------------------------------------------------- send


def test_a_send_is_stored_with_rocketmqs_fields_and_answered_with_its_offset_msg_id(broker: FakeBroker) -> None:
    answer = serve(broker, send_request(KEYS="k1", TAGS="tagA", UNIQ_KEY="U1", color="red"))
    assert (answer.code, answer.remark) == (C.SUCCESS, None)
    assert dict(answer.ext_fields) == {"msgId": STORE_HOST + "0000000000000000", "queueId": "1", "queueOffset": "0",
                                       "transactionId": "U1"}
    (record,) = broker.store.get_messages("TopicTest", 1, 0, 10).records
    assert (record.keys, record.tags, record.body) == ("k1", "tagA", b"hello")
    assert record.properties["CLUSTER"] == "DefaultCluster" and record.properties["color"] == "red"
    assert record.properties[WIRE] == "7,0,123,c0a80114,53412,0"  # flag, sysFlag, born at, born host, reconsumes


def test_a_send_without_uniq_key_gets_one_and_a_negative_queue_lets_the_broker_choose(broker: FakeBroker) -> None:
    answers = [serve(broker, send_request(queue_id=-1)) for _ in range(2)]
    assert [a.ext_fields["queueId"] for a in answers] == ["0", "1"]
    assert len(broker.store.get_messages("TopicTest", 0, 0, 1).records[0].properties["UNIQ_KEY"]) == 32


def test_a_batch_stores_each_message_and_lists_every_id(broker: FakeBroker) -> None:
    body = encode_batch([BatchEntry(b"one", {"TAGS": "a", "UNIQ_KEY": "u1"}, 1), BatchEntry(b"two", {"KEYS": "k"}, 2)])
    answer = serve(broker, make_request(RC.SEND_BATCH_MESSAGE, 1, send_request(code=RC.SEND_BATCH_MESSAGE).ext_fields,
                                        body))
    assert answer.code == C.SUCCESS
    ids = answer.ext_fields["msgId"].split(",")
    assert len(ids) == 2 and all(i.startswith(STORE_HOST) for i in ids) and "transactionId" not in answer.ext_fields
    records = broker.store.get_messages("TopicTest", 1, 0, 10).records
    assert [(r.body, r.tags, r.keys, r.properties[WIRE].split(",")[0]) for r in records] == [
        (b"one", "a", "", "1"), (b"two", "", "k", "2")]


@pytest.mark.parametrize(("status", "code", "remark"), [
    ("FLUSH_SLAVE_TIMEOUT", C.FLUSH_SLAVE_TIMEOUT, None),
    ("FLUSH_DISK_TIMEOUT", C.FLUSH_DISK_TIMEOUT, None),
    ("SERVICE_NOT_AVAILABLE", C.SERVICE_NOT_AVAILABLE, "messages are put to the slave"),
    ("IN_SYNC_REPLICAS_NOT_ENOUGH", C.SYSTEM_ERROR, "in-sync replicas not enough: 1 of 2"),
    ("MESSAGE_ILLEGAL", C.MESSAGE_ILLEGAL, "1 of 2"),
])
def test_put_statuses_become_rocketmqs_send_codes(broker: FakeBroker, status: str, code: int,
                                                  remark: str | None) -> None:
    stored = status.startswith("FLUSH")
    results = [AppendResult("x", 2, 9, 512, 600)] if stored else []
    broker.forced = PutOutcome(status, results, "1 of 2", "127.0.0.1:1" if not stored else None)
    answer = serve(broker, send_request())
    assert answer.code == code
    if stored:  # stored, but not as durably as asked: the answer still says where
        assert answer.remark is None and answer.ext_fields["queueOffset"] == "9"
        assert answer.ext_fields["msgId"] == STORE_HOST + "0000000000000200"
    else:
        assert remark in (answer.remark or "") and "msgId" not in answer.ext_fields


@pytest.mark.parametrize(("request_", "code", "remark"), [
    (send_request(topic="bad/topic"), C.INVALID_PARAMETER, "The specified topic: bad/topic"),
    (send_request(queue_id=4), C.INVALID_PARAMETER, "queueId[4] is illegal"),
    (send_request(**{"__MQCTL.WIRE": "1"}), C.MESSAGE_ILLEGAL, "is reserved"),
    (send_request(DELAY="three"), C.MESSAGE_ILLEGAL, "is not a delay level"),
    (send_request(TIMER_DELAY_SEC="x"), C.MESSAGE_ILLEGAL, "TIMER_DELAY_SEC='x' is not a number"),
    (send_request(TIMER_DELAY_SEC=str(3 * 86400 + 1)), C.MESSAGE_ILLEGAL, "more than timerMaxDelaySec"),
    (send_request(topic="%RETRY%cg", queue_id=1), C.INVALID_PARAMETER,
     "request queueId[1] is illegal, TopicConfig [topicName=%RETRY%cg, readQueueNums=1, writeQueueNums=1, perm=RW-"),
    (send_request(body=b""), C.MESSAGE_ILLEGAL, "body is empty"),
    (make_request(RC.SEND_MESSAGE, 1, {"topic": "T"}, b"x"), C.INVALID_PARAMETER, "'producerGroup' is missing"),
    (make_request(RC.SEND_BATCH_MESSAGE, 1, send_request(code=RC.SEND_BATCH_MESSAGE).ext_fields, b"\x00\x00\x00\x07"),
     C.INVALID_PARAMETER, "batch message 0"),
    (make_request(RC.SEND_BATCH_MESSAGE, 1, send_request(code=RC.SEND_BATCH_MESSAGE).ext_fields, b"\x00" * 5000),
     C.MESSAGE_ILLEGAL, "exceeds maxMessageSize"),
])
def test_sends_that_cannot_be_stored_are_refused(broker: FakeBroker, request_: RemotingCommand, code: int,
                                                remark: str) -> None:
    answer = serve(broker, request_)
    assert answer.code == code and remark in (answer.remark or "")
    assert broker.store.max_offset == 0


def test_a_transactional_send_is_held_in_the_half_topic(broker: FakeBroker) -> None:
    answer = serve(broker, send_request(TRAN_MSG="true", PGROUP="pg", UNIQ_KEY="TX1"))
    assert answer.code == C.SUCCESS and answer.ext_fields["transactionId"] == "TX1"
    assert broker.store.get_messages("TopicTest", 1, 0, 1).records == []  # invisible in its real topic
    (half,) = broker.store.get_messages("RMQ_SYS_TRANS_HALF_TOPIC", 0, 0, 1).records
    assert half.properties["REAL_TOPIC"] == "TopicTest" and half.properties["TRAN_MSG"] == "true"


def test_a_oneway_send_is_stored_and_not_answered(broker: FakeBroker) -> None:
    request = send_request()
    assert serve(broker, make_request(RC.SEND_MESSAGE, 1, request.ext_fields, b"x", oneway=True)) is None
    assert broker.store.max_offset > 0
    assert serve(broker, make_request(RC.SEND_MESSAGE, 1, {}, b"x", oneway=True)) is None  # malformed: dropped


def front(broker: FakeBroker, *requests: RemotingCommand) -> list[RemotingCommand]:
    """The task-free path a connection takes for sends: every request taken, the answers once stored."""
    async def run() -> list[RemotingCommand]:
        remoting = BrokerRemoting(broker)  # type: ignore[arg-type]
        conn = FakeConn()
        conn.front = remoting.front
        assert all(conn._front(r) for r in requests)  # as data_received hands them over
        assert not conn._front(make_request(RC.GET_MAX_OFFSET, 9))  # not a send: declined
        for _ in range(100):
            if conn.in_flight == 0:
                break
            await asyncio.sleep(0.01)
        assert conn.in_flight == 0
        return conn.sent
    return asyncio.run(run())


def test_sends_taken_by_the_front_path_are_answered_as_by_the_handler(broker: FakeBroker, tmp_path: Path) -> None:
    broker.store.created_topics.create("TopicTest")  # a topic to create first is declined (see below)
    good = send_request(KEYS="k1", UNIQ_KEY="U1")
    oneway = make_request(RC.SEND_MESSAGE, 2, good.ext_fields, b"x", oneway=True)
    bad_topic = send_request(topic="bad topic!")
    malformed = make_request(RC.SEND_MESSAGE_V2, 4, {"a": "b"}, b"x")
    answers = front(broker, good, oneway, bad_topic, malformed)
    by_opaque = {a.opaque: a for a in answers}
    assert len(answers) == 3 and sorted(by_opaque) == [1, 4]  # bad_topic reuses opaque 1: see below
    assert [a.code for a in answers if a.opaque == 4] == [C.INVALID_PARAMETER]
    assert sorted(a.code for a in answers if a.opaque == 1) == sorted([C.SUCCESS, C.INVALID_PARAMETER])
    stored = next(a for a in answers if a.code == C.SUCCESS)
    same = serve(FakeBroker(tmp_path / "other"), send_request(KEYS="k1", UNIQ_KEY="U1"))
    assert dict(stored.ext_fields) == dict(same.ext_fields)  # the same answer as the task path's
    assert len(broker.store.get_messages("TopicTest", 1, 0, 10).records) == 2  # the oneway one too


# ------------------------------------------------------------------------------------------- pull


def fill(broker: FakeBroker, *tags: str) -> None:
    for index, tag in enumerate(tags):
        assert serve(broker, send_request(body=f"m{index}".encode(), TAGS=tag)).code == C.SUCCESS


def test_pull_answers_rocketmqs_message_encoding(broker: FakeBroker) -> None:
    fill(broker, "tagA", "tagB")
    answer = serve(broker, pull_request())
    assert (answer.code, answer.remark) == (C.SUCCESS, "FOUND")
    assert dict(answer.ext_fields) == {"suggestWhichBrokerId": "0", "nextBeginOffset": "2", "minOffset": "0",
                                       "maxOffset": "2"}
    messages = decode_pulled(answer.body)
    assert [(m.body, m.tags, m.flag, m.born_timestamp, m.queue_offset) for m in messages] == [
        (b"m0", "tagA", 7, 123, 0), (b"m1", "tagB", 7, 123, 1)]
    assert WIRE not in messages[0].properties and messages[0].msg_id == STORE_HOST + "0000000000000000"
    assert messages[0].born_host.ip == bytes([192, 168, 1, 20])


def test_pull_filters_by_tag_and_moves_past_what_it_skips(broker: FakeBroker) -> None:
    fill(broker, "tagB", "tagA", "tagB")
    answer = serve(broker, pull_request(expression="tagA"))
    assert [m.body for m in decode_pulled(answer.body)] == [b"m1"] and answer.ext_fields["nextBeginOffset"] == "3"
    skipped = serve(broker, pull_request(expression="tagC"))
    assert (skipped.code, skipped.remark, skipped.ext_fields["nextBeginOffset"]) == (
        C.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE", "3")


@pytest.mark.parametrize(("offset", "queue_id", "code", "remark", "next_begin"), [
    (2, 1, C.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE", "2"),
    (9, 1, C.PULL_OFFSET_MOVED, "OFFSET_OVERFLOW_BADLY", "2"),
    (-3, 1, C.PULL_OFFSET_MOVED, "OFFSET_TOO_SMALL", "0"),
    (0, 2, C.PULL_NOT_FOUND, "NO_MATCHED_LOGIC_QUEUE", "0"),
    (5, 2, C.PULL_OFFSET_MOVED, "NO_MATCHED_LOGIC_QUEUE", "0"),
])
def test_pull_codes_follow_rocketmqs_table(broker: FakeBroker, offset: int, queue_id: int, code: int, remark: str,
                                           next_begin: str) -> None:
    fill(broker, "a", "b")
    answer = serve(broker, pull_request(offset=offset, queue_id=queue_id))
    assert (answer.code, answer.remark, answer.ext_fields["nextBeginOffset"], answer.body) == (
        code, remark, next_begin, b"")


def test_a_slave_sends_the_consumer_to_the_master(broker: FakeBroker) -> None:
    """As RocketMQ's slave whose group's smallest broker id is the master's: what it has, else
    PULL_RETRY_IMMEDIATELY at once, suggesting the master."""
    fill(broker, "a")
    broker.role = Role.SLAVE
    broker.replicas.state = RoleState(Role.SLAVE, 1, 1, "10.0.0.8:10911")
    assert serve(broker, pull_request()).code == C.SUCCESS  # what it has, it serves
    answer = serve(broker, pull_request(offset=1, sys_flag=4 | 2, suspend_ms=60_000))  # never held on a slave
    assert (answer.code, answer.ext_fields["suggestWhichBrokerId"]) == (C.PULL_RETRY_IMMEDIATELY, "0")


def test_pull_subscription_comes_from_the_request_or_the_groups_heartbeat(broker: FakeBroker) -> None:
    fill(broker, "tagA", "tagB")
    missing = serve(broker, pull_request(sys_flag=0))
    assert missing.code == C.SUBSCRIPTION_NOT_EXIST
    remoting = BrokerRemoting(broker)  # type: ignore[arg-type]
    heartbeat = bb.HeartbeatData("c1", (), (bb.ConsumerData("cg", subscription_data_set=(
        bb.SubscriptionData("TopicTest", "tagB"),)),))

    async def scenario() -> RemotingCommand:
        await remoting.handle(make_request(RC.HEART_BEAT, 1, {}, heartbeat.encode()), FakeConn())
        return await remoting.handle(pull_request(sys_flag=0), FakeConn())

    assert [m.body for m in decode_pulled(asyncio.run(scenario()).body)] == [b"m1"]
    sql = serve(broker, pull_request(expressionType="SQL92"))
    assert (sql.code, sql.remark) == (C.SYSTEM_ERROR, "The broker does not support consumer to filter message by SQL92")


def test_a_pull_commits_the_offset_it_carries_on_the_master_only(broker: FakeBroker) -> None:
    fill(broker, "a")
    serve(broker, pull_request(sys_flag=4 | 1, commit=1))
    assert broker.consumer_offsets.table.query("cg", "TopicTest", 1) == 1
    broker.role = Role.SLAVE
    serve(broker, pull_request(sys_flag=4 | 1, commit=5))
    assert broker.consumer_offsets.table.query("cg", "TopicTest", 1) == 1


@pytest.mark.parametrize("role", [Role.MASTER, Role.FENCED], ids=["master", "no-master-known"])
def test_a_suspended_pull_is_answered_when_a_message_arrives(broker: FakeBroker, role: Role) -> None:
    """On the master, and on a broker that knows no master (RocketMQ's slave then serves as a master does)."""
    broker.store.created_topics.create("TopicTest")  # created, never written
    if role is Role.FENCED:
        broker.role, broker.replicas.state = role, RoleState()
        broker.forced = None
    remoting = BrokerRemoting(broker)  # type: ignore[arg-type]
    broker.put_listeners.append(remoting.on_put)

    async def scenario() -> tuple[RemotingCommand, int]:
        pull = asyncio.create_task(remoting.handle(pull_request(sys_flag=4 | 2, suspend_ms=30_000), FakeConn()))
        while remoting.arrivals.held == 0:  # noqa: ASYNC110  polls the code under test, which has no event
            await asyncio.sleep(0.01)
        held = remoting.arrivals.held
        if role is Role.FENCED:  # it takes no sends: the message comes as replication brings it
            await broker.put([Message("TopicTest", b"late", queue_id=1)])
        else:
            await remoting.handle(send_request(body=b"late"), FakeConn())
        return await pull, held

    answer, held = asyncio.run(scenario())
    assert held == 1 and answer.code == C.SUCCESS
    assert [m.body for m in decode_pulled(answer.body)] == [b"late"]


def test_a_suspended_pull_ends_at_its_deadline_and_the_number_held_is_bounded(
        broker: FakeBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    broker.store.created_topics.create("TopicTest")
    answer = serve(broker, pull_request(sys_flag=4 | 2, suspend_ms=20))
    assert (answer.code, answer.remark) == (C.PULL_NOT_FOUND, "NO_MATCHED_LOGIC_QUEUE")
    monkeypatch.setattr(remoting_pull, "MAX_HELD", 0)
    assert serve(broker, pull_request(sys_flag=4 | 2, suspend_ms=600_000)).code == C.PULL_NOT_FOUND


def test_a_pull_answer_is_bounded_in_bytes_whatever_the_request_asks(broker: FakeBroker,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for index in range(4):
        serve(broker, send_request(body=bytes([65 + index]) * 1500))
    monkeypatch.setattr("services.broker.processor.pull.MAX_PULL_BYTES", 3500)
    answer = serve(broker, pull_request(maxMsgBytes=str(2**31 - 1)))
    assert [len(m.body) for m in decode_pulled(answer.body)] == [1500, 1500]
    assert answer.ext_fields["nextBeginOffset"] == "2"
    one = serve(broker, pull_request(maxMsgBytes="10"))  # at least one message, whatever the bound
    assert len(decode_pulled(one.body)) == 1 and one.ext_fields["nextBeginOffset"] == "1"


def test_pull_header_checks(broker: FakeBroker) -> None:
    broker.store.created_topics.create("TopicTest")
    remark = "queueId[4] is illegal, topic:[TopicTest] topicConfig.readQueueNums:[4]"
    assert serve(broker, pull_request(queue_id=4)).remark == remark
    assert "queueId" in (serve(broker, pull_request(queue_id=1024)).remark or "")
    assert "consumerGroup" in (serve(broker, pull_request(group="a b")).remark or "")


def as_lite_pull(pull: RemotingCommand) -> RemotingCommand:
    """The same pull as a DefaultLitePullConsumer sends it: LITE_PULL_MESSAGE, PullSysFlag's lite bit (16) set."""
    ext = {**pull.ext_fields, "sysFlag": str(int(pull.ext_fields["sysFlag"]) | 16)}
    return make_request(bh.LITE_PULL_MESSAGE, pull.opaque, ext)


@pytest.mark.parametrize("pull", [
    pull_request(), pull_request(expression="tagB"), pull_request(expression="tagC"), pull_request(offset=9),
    pull_request(offset=2, sys_flag=4 | 2, suspend_ms=20), pull_request(queue_id=4)],
    ids=["found", "by-tag", "none-matched", "moved", "suspended-to-its-deadline", "bad-queue"])
def test_a_lite_pull_is_answered_as_a_pull(broker: FakeBroker, pull: RemotingCommand) -> None:
    """RocketMQ's broker serves 361 with the processor of 11 (suspended alike): the same answer, byte for byte."""
    fill(broker, "tagA", "tagB")
    assert serve(broker, as_lite_pull(pull)) == serve(broker, pull)


def test_a_lite_pull_commits_as_a_pull_does(broker: FakeBroker) -> None:
    """A lite pull consumer commits with UPDATE_CONSUMER_OFFSET (its pulls carry no commit flag); one that did
    would commit as 11 does."""
    fill(broker, "a")
    assert serve(broker, as_lite_pull(pull_request(sys_flag=4 | 1, commit=1))).code == C.SUCCESS
    assert broker.consumer_offsets.table.query("cg", "TopicTest", 1) == 1


# ---------------------------------------------------------------------------------------- offsets


def offset_request(code: int, **fields: str) -> RemotingCommand:
    return make_request(code, 3, {"consumerGroup": "cg", "topic": "TopicTest", "queueId": "1", **fields})


def test_query_offset_follows_rocketmqs_rules(broker: FakeBroker) -> None:
    empty = serve(broker, offset_request(RC.QUERY_CONSUMER_OFFSET))
    assert (empty.code, empty.remark) == (
        C.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
    fill(broker, "a")
    assert serve(broker, offset_request(RC.QUERY_CONSUMER_OFFSET)).ext_fields["offset"] == "0"
    assert serve(broker, offset_request(RC.QUERY_CONSUMER_OFFSET, setZeroIfNotFound="false")).code == C.QUERY_NOT_FOUND
    assert serve(broker, offset_request(RC.UPDATE_CONSUMER_OFFSET, commitOffset="1")).code == C.SUCCESS
    assert serve(broker, offset_request(RC.QUERY_CONSUMER_OFFSET)).ext_fields == {"offset": "1"}
    refused = serve(broker, offset_request(RC.UPDATE_CONSUMER_OFFSET, commitOffset="-1"))
    assert refused.code == C.INVALID_PARAMETER and "commitOffset" in (refused.remark or "")


def test_max_min_and_all_offsets(broker: FakeBroker) -> None:
    fill(broker, "a", "b", "c")
    assert serve(broker, make_request(RC.GET_MAX_OFFSET, 1, {"topic": "TopicTest", "queueId": "1"})).ext_fields == {
        "offset": "3"}
    assert serve(broker, make_request(RC.GET_MAX_OFFSET, 1, {"topic": "TopicTest", "queueId": "0"})).ext_fields == {
        "offset": "0"}
    assert serve(broker, make_request(RC.GET_MIN_OFFSET, 1, {"topic": "TopicTest", "queueId": "1"})).ext_fields == {
        "offset": "0"}
    serve(broker, offset_request(RC.UPDATE_CONSUMER_OFFSET, commitOffset="2"))
    table = serve(broker, make_request(bh.GET_ALL_CONSUMER_OFFSET, 1))
    assert table.body == b'{"offsetTable":{"TopicTest@cg":{1:2}}}'


# -------------------------------------------------------------------------------- consumer groups


def test_heartbeats_build_the_consumer_list_and_changes_are_announced(broker: FakeBroker) -> None:
    remoting = BrokerRemoting(broker)  # type: ignore[arg-type]
    first, second = FakeConn("127.0.0.1:1"), FakeConn("127.0.0.1:2")

    def heartbeat(client: str) -> RemotingCommand:
        return make_request(RC.HEART_BEAT, 1, {}, bb.HeartbeatData(client, (), (bb.ConsumerData("cg"),)).encode())

    def listing() -> RemotingCommand:
        return make_request(RC.GET_CONSUMER_LIST_BY_GROUP, 1, {"consumerGroup": "cg"})

    async def scenario() -> list[Any]:
        none = await remoting.handle(listing(), first)
        await remoting.handle(heartbeat("c1"), first)
        await remoting.handle(heartbeat("c2"), second)
        await remoting.handle(heartbeat("c2"), second)  # nothing new: no announcement
        both = await remoting.handle(listing(), first)
        remoting.on_closed(second)
        one = await remoting.handle(listing(), first)
        await remoting.handle(make_request(bh.UNREGISTER_CLIENT, 1, {"clientID": "c1", "consumerGroup": "cg"}), first)
        gone = await remoting.handle(listing(), first)
        return [none, both, one, gone]

    none, both, one, gone = asyncio.run(scenario())
    assert (none.code, none.remark) == (C.SYSTEM_ERROR, "no consumer for this group, cg")
    assert bb.GetConsumerListByGroupResponseBody.decode(both.body).consumer_id_list == ("c1", "c2")
    assert bb.GetConsumerListByGroupResponseBody.decode(one.body).consumer_id_list == ("c1",)
    # the group's retry topic was created once, kept, and announced to the name servers
    assert broker.store.created_topics.names == {"%RETRY%cg"} and broker.namesrv.noted == ["%RETRY%cg"]
    assert gone.code == C.SYSTEM_ERROR
    # c1 heard of every change: c1 itself joining, c2 joining, c2's connection closing (c1 then left)
    notes = [(c.code, dict(c.ext_fields), c.is_oneway) for c in first.sent]
    assert notes == [(40, {"consumerGroup": "cg"}, True)] * 3


@pytest.mark.parametrize(("consumer", "remark"), [
    (bb.ConsumerData("no spaces"), "groupName 'no spaces'"),
    (bb.ConsumerData("cg", subscription_data_set=(bb.SubscriptionData("../etc", "*"),)), "topic '../etc'"),
    (bb.ConsumerData("cg", subscription_data_set=(bb.SubscriptionData("T", "a" * 5000),)), "longer than 4096"),
])
def test_a_malformed_heartbeat_is_refused_naming_the_field(broker: FakeBroker, consumer: bb.ConsumerData,
                                                           remark: str) -> None:
    answer = serve(broker, make_request(RC.HEART_BEAT, 1, {}, bb.HeartbeatData("c", (), (consumer,)).encode()))
    assert answer.code == C.INVALID_PARAMETER and remark in (answer.remark or "")
    assert serve(broker, make_request(RC.HEART_BEAT, 1, {}, b"{")).code == C.INVALID_PARAMETER
    assert serve(broker, make_request(RC.HEART_BEAT, 1, {}, b'{"clientID":""}')).code == C.INVALID_PARAMETER


# ---------------------------------------------------------------------------------- controller mode


def test_epoch_cache_reports_id_0_for_a_master_as_rocketmq_does(broker: FakeBroker) -> None:
    cache = EpochEntryCache.decode(serve(broker, make_request(RC.GET_BROKER_EPOCH_CACHE, 1)).body)
    assert (cache.broker_id, [e.epoch for e in cache.epoch_list], cache.max_offset) == (0, [1, 3], 30)
    broker.role = Role.SLAVE
    assert EpochEntryCache.decode(serve(broker, make_request(RC.GET_BROKER_EPOCH_CACHE, 1)).body).broker_id == 2


def test_ha_status_is_rocketmqs_ha_runtime_info(broker: FakeBroker) -> None:
    info = bb.HARuntimeInfo.decode(serve(broker, make_request(RC.GET_BROKER_HA_STATUS, 1)).body)
    assert (info.master, info.master_commit_log_max_offset, info.in_sync_slave_nums) == (True, 30, 1)
    assert info.ha_connection_info[0] == bb.HAConnectionRuntimeInfo("127.0.0.1:5", 30, 0, True, 2048, 30)


def test_ha_status_shows_the_transfer_from_where_of_the_master(broker: FakeBroker,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """-1 while the master holds nothing, as RocketMQ's master shows it (real mqadmin saw 0 from ours)."""
    status = {"role": "MASTER", "maxOffset": 0, "inSyncSlaveNums": 1, "slaves": [
        {"slaveAddress": "127.0.0.1:5", "ackOffset": 0, "lag": 0, "inSync": True, "transferOffset": 0,
         "transferFromWhere": -1, "transferSpeedKBps": 0.0}]}
    monkeypatch.setattr(broker, "ha_status", lambda: status)
    info = bb.HARuntimeInfo.decode(serve(broker, make_request(RC.GET_BROKER_HA_STATUS, 1)).body)
    assert info.ha_connection_info[0].transfer_from_where == -1


def test_a_role_change_notification_is_only_a_hint(broker: FakeBroker, tmp_path: Path) -> None:
    forged = make_request(RC.NOTIFY_BROKER_ROLE_CHANGED, 1, {"masterAddress": "6.6.6.6:1", "masterEpoch": "99",
                                                            "masterBrokerId": "9"}, b'{"syncStateSet":[9]}', oneway=True)
    assert serve(broker, forged) is None
    assert broker.replicas.hints == 1 and broker.role is Role.MASTER
    guarded = FakeBroker(tmp_path / "token", authToken="secret")
    assert serve(guarded, forged) is None and guarded.replicas.hints == 0  # not signed with the token: ignored
    assert serve(guarded, sign(forged, "other", guarded.clock.now_ms())) is None and guarded.replicas.hints == 0
    signed = sign(forged, "secret", guarded.clock.now_ms())
    remoting = BrokerRemoting(guarded)  # type: ignore[arg-type]
    assert asyncio.run(_call(remoting, signed, FakeConn())) is None
    assert guarded.replicas.hints == 1  # the controllers' signed hint
    assert asyncio.run(_call(remoting, signed, FakeConn())) is None
    assert guarded.replicas.hints == 1  # a replay of it is not
    guarded.store.close()


def test_other_codes_are_not_supported(broker: FakeBroker) -> None:
    answer = serve(broker, make_request(46, 1))
    assert (answer.code, answer.remark) == (C.REQUEST_CODE_NOT_SUPPORTED, " request type 46 not supported")
    assert serve(broker, make_request(46, 1, oneway=True)) is None


def test_the_http_api_does_not_show_the_reserved_wire_property() -> None:
    """What only the remoting protocol needs back (flag, sysFlag, born host) stays out of the HTTP view."""
    from services.broker.api import record_json
    from services.broker.record import MessageRecord

    rec = MessageRecord("T", 0, 0, 0, 1, {"KEYS": "k", "TAGS": "t", "__MQCTL.WIRE": "1", "a": "b"}, b"x", 100)
    shown = record_json(rec, "127.0.0.1:10911")
    assert shown["properties"] == {"a": "b"} and shown["keys"] == "k" and shown["tags"] == "t"


def test_reset_master_flush_offset_is_recorded_by_a_slave_and_ignored_by_a_master(broker: FakeBroker,
                                                                                  tmp_path: Path) -> None:
    def reset(target: FakeBroker, offset: str) -> RemotingCommand:
        return serve(target, make_request(bh.RESET_MASTER_FLUSH_OFFSET, 1, {"masterFlushOffset": offset}))

    assert reset(broker, "4096").code == C.SUCCESS  # the master answers success and changes nothing
    assert broker.store.master_flushed_offset == 0
    broker.role = Role.SLAVE
    assert reset(broker, "4096").code == C.SUCCESS
    assert broker.store.master_flushed_offset == 4096
    broker.store.close()
    broker.store.open()  # kept in the checkpoint
    assert broker.store.master_flushed_offset == 4096
    assert reset(broker, "-1").code == C.INVALID_PARAMETER
    assert reset(broker, "x").code == C.INVALID_PARAMETER
    guarded = FakeBroker(tmp_path / "token", authToken="secret")
    guarded.role = Role.SLAVE
    assert reset(guarded, "7").code == C.NO_PERMISSION
    signed = sign(make_request(bh.RESET_MASTER_FLUSH_OFFSET, 1, {"masterFlushOffset": "7"}), "secret",
                  guarded.clock.now_ms())
    assert serve(guarded, signed).code == C.SUCCESS and guarded.store.master_flushed_offset == 7
    guarded.store.close()


# ------------------------------------------------------------------------------------------- queue locks

LOCK_BODY = (b'{"clientId":"10.0.0.9@123","consumerGroup":"og","mqSet":[{"brokerName":"broker-a","queueId":0,'
             b'"topic":"TopicTest"},{"brokerName":"broker-a","queueId":1,"topic":"TopicTest"}],"onlyThisBroker":true}')


def test_lock_bodies_read_and_write_as_fastjson_writes_them() -> None:
    body = bb.LockBatchRequestBody.decode(LOCK_BODY)
    assert (body.consumer_group, body.client_id, body.only_this_broker) == ("og", "10.0.0.9@123", True)
    assert body.encode() == LOCK_BODY
    assert bb.LockBatchResponseBody.decode(bb.LockBatchResponseBody(body.mq_set).encode()).lock_ok_mq_set == body.mq_set


def test_orderly_consumers_lock_renew_and_release_their_queues(broker: FakeBroker) -> None:
    async def run() -> list[RemotingCommand]:
        remoting = BrokerRemoting(broker)  # type: ignore[arg-type]
        other = LOCK_BODY.replace(b"10.0.0.9@123", b"10.0.0.8@7")
        steps = [make_request(bh.LOCK_BATCH_MQ, 1, {}, LOCK_BODY), make_request(bh.LOCK_BATCH_MQ, 2, {}, other),
                 make_request(bh.UNLOCK_BATCH_MQ, 3, {}, other)]  # not its lock: nothing released
        broker.clock.advance(61_000)  # past the live time, but renewed below
        steps += [make_request(bh.LOCK_BATCH_MQ, 4, {}, LOCK_BODY), make_request(bh.LOCK_BATCH_MQ, 5, {}, other),
                  make_request(bh.UNLOCK_BATCH_MQ, 6, {}, LOCK_BODY), make_request(bh.LOCK_BATCH_MQ, 7, {}, other)]
        return [await remoting.handle(step, FakeConn()) for step in steps]
    answers = asyncio.run(run())
    assert all(a.code == C.SUCCESS for a in answers)
    held = [len(bb.LockBatchResponseBody.decode(a.body).lock_ok_mq_set) if a.body else None for a in answers]
    assert held == [2, 0, None, 2, 0, None, 2]


@pytest.mark.parametrize(("body", "remark"), [
    (b'{"clientId":"c","consumerGroup":"bad group","mqSet":[]}', "consumerGroup 'bad group'"),
    (b'{"consumerGroup":"og","mqSet":[]}', "clientId must be"),
    (b'{"clientId":"c","consumerGroup":"og","mqSet":[{"brokerName":"b","queueId":-1,"topic":"T"}]}', "mqSet"),
    (b'{"clientId":"c","consumerGroup":"og","mqSet":[{"queueId":1,"topic":"T"}]}', "brokerName is missing"),
    (b'{"clientId":"c","consumerGroup":"og","mqSet":{}}', "not an array"),
    (b"[", "not valid JSON"),
])
def test_a_malformed_lock_body_is_refused_naming_the_field(broker: FakeBroker, body: bytes, remark: str) -> None:
    for code in (bh.LOCK_BATCH_MQ, bh.UNLOCK_BATCH_MQ):
        answer = serve(broker, make_request(code, 1, {}, body))
        assert answer.code == C.INVALID_PARAMETER and remark in (answer.remark or ""), answer.remark


# ------------------------------------------------------------------------------------- offset by time


def test_search_offset_by_timestamp_follows_the_boundary_type(broker: FakeBroker) -> None:
    for step in (0, 0, 10):  # stored at 1000, 1000, 1010
        broker.clock.advance(step)
        serve(broker, send_request())
    base = broker.clock.now_ms() - 10

    def ask(timestamp: int, boundary: str | None = None) -> str:
        ext = {"topic": "TopicTest", "queueId": "1", "timestamp": str(timestamp)}
        answer = serve(broker, make_request(bh.SEARCH_OFFSET_BY_TIMESTAMP, 1,
                                            {**ext, "boundaryType": boundary} if boundary else ext))
        assert answer.code == C.SUCCESS, answer.remark
        return answer.ext_fields["offset"]
    assert [ask(base), ask(base, "UPPER"), ask(base + 5), ask(base + 5, "upper"), ask(base + 11), ask(0)] == \
        ["0", "1", "2", "1", "3", "0"]
    refused = serve(broker, make_request(bh.SEARCH_OFFSET_BY_TIMESTAMP, 1, {
        "topic": "TopicTest", "queueId": "1", "timestamp": "1", "boundaryType": "MIDDLE"}))
    assert refused.code == C.INVALID_PARAMETER and "boundaryType" in (refused.remark or "")


# ------------------------------------------------------------------------------------- smaller rules


@pytest.mark.parametrize("topic", ["SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
                                   "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT"])
def test_sends_to_the_topics_rocketmq_forbids_are_refused(broker: FakeBroker, topic: str) -> None:
    answer = serve(broker, send_request(topic=topic))
    assert (answer.code, answer.remark) == (C.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
    assert broker.store.max_offset == 0


def test_a_pull_from_a_topic_the_broker_does_not_have_is_topic_not_exist(broker: FakeBroker) -> None:
    answer = serve(broker, pull_request(sys_flag=4 | 2, suspend_ms=30_000))  # not held: answered at once
    assert answer.code == C.TOPIC_NOT_EXIST and "topic[TopicTest] not exist" in (answer.remark or "")


# ------------------------------------------------------------------------------------------- topic configs


def update_topic(topic: str = "Orders", read: int = 8, write: int = 8, perm: int = 6, **extra: Any) -> RemotingCommand:
    header = bh.CreateTopicRequestHeader(topic=topic, default_topic="TBW102", read_queue_nums=read,
                                         write_queue_nums=write, perm=perm, topic_filter_type="SINGLE_TAG",
                                         topic_sys_flag=0, order=False, **extra)
    return make_request(bh.UPDATE_AND_CREATE_TOPIC, 3, header.to_ext_fields())


def all_topic_configs(broker: FakeBroker) -> dict[str, TopicConfig]:
    answer = serve(broker, make_request(bh.GET_ALL_TOPIC_CONFIG, 4))
    return dict(TopicConfigSerializeWrapper.decode(answer.body).topic_config_table)


def test_update_topic_8_8_creates_the_topic_with_its_queues_for_sends_pulls_and_the_listing(broker: FakeBroker) -> None:
    """mqadmin's default updateTopic (-r 8 -w 8 -p 6): every queue takes sends and pulls; the listing, the
    name-server registration and the file carry the counts."""
    assert serve(broker, update_topic()).code == C.SUCCESS
    assert broker.namesrv.triggers == 1
    assert serve(broker, update_topic()).code == C.SUCCESS and broker.namesrv.triggers == 1  # unchanged: no-op
    assert all_topic_configs(broker)["Orders"] == TopicConfig("Orders", 8, 8, 6)
    assert serve(broker, send_request(topic="Orders", queue_id=7)).code == C.SUCCESS
    refused = serve(broker, send_request(topic="Orders", queue_id=8))
    assert refused.code == C.INVALID_PARAMETER and (refused.remark or "").startswith("request queueId[8] is illegal")
    pulled = serve(broker, pull_request(queue_id=7, topic="Orders"))
    assert pulled.code == C.SUCCESS and [m.body for m in decode_pulled(pulled.body)] == [b"hello"]
    assert [q["queueId"] for q in broker.store.topics()[0]["queues"]] == list(range(8))  # type: ignore[index]


def test_reducing_a_topics_queues_keeps_the_messages_beyond_them(broker: FakeBroker) -> None:
    """As on RocketMQ: the writable queues go first (readable ones may exceed them) and the data stays."""
    serve(broker, update_topic())
    assert serve(broker, send_request(topic="Orders", queue_id=7, body=b"kept")).code == C.SUCCESS
    assert serve(broker, update_topic(read=8, write=4)).code == C.SUCCESS
    assert all_topic_configs(broker)["Orders"] == TopicConfig("Orders", 8, 4, 6)
    pulled = serve(broker, pull_request(queue_id=7, topic="Orders"))
    assert [m.body for m in decode_pulled(pulled.body)] == [b"kept"]
    assert serve(broker, update_topic(read=4, write=4)).code == C.SUCCESS
    assert serve(broker, pull_request(queue_id=7, topic="Orders")).code == C.INVALID_PARAMETER
    assert serve(broker, update_topic(read=8, write=8)).code == C.SUCCESS  # grown again: the message is there
    pulled = serve(broker, pull_request(queue_id=7, topic="Orders"))
    assert [m.body for m in decode_pulled(pulled.body)] == [b"kept"]
    assert 7 in [q["queueId"] for q in broker.store.topics()[0]["queues"]]  # type: ignore[index]


def test_a_topics_perm_refuses_sends_or_pulls(broker: FakeBroker) -> None:
    serve(broker, update_topic("ReadOnly", perm=4))
    serve(broker, update_topic("WriteOnly", perm=2))
    refused = serve(broker, send_request(topic="ReadOnly", queue_id=0))
    assert (refused.code, refused.remark) == (C.NO_PERMISSION, "the topic[ReadOnly] sending message is forbidden")
    assert serve(broker, send_request(topic="WriteOnly", queue_id=0)).code == C.SUCCESS
    refused = serve(broker, pull_request(queue_id=0, topic="WriteOnly"))
    assert (refused.code, refused.remark) == (C.NO_PERMISSION, "the topic[WriteOnly] pulling message is forbidden")


def test_update_topic_refusals_over_remoting(broker: FakeBroker) -> None:
    answer = serve(broker, update_topic("TBW102"))
    assert (answer.code, answer.remark) == (C.INVALID_PARAMETER, "The topic[TBW102] is conflict with system topic.")
    answer = serve(broker, update_topic(read=2000))
    assert answer.code == C.INVALID_PARAMETER and "readQueueNums 2000" in (answer.remark or "")
    assert "Orders" not in all_topic_configs(broker)


def test_auto_create_follows_tbw102_and_the_producers_queue_count(broker: FakeBroker) -> None:
    assert serve(broker, send_request(topic="Fresh", queue_id=0, default_queues=2)).code == C.SUCCESS
    assert broker.store.created_topics.get("Fresh") == TopicConfig("Fresh", 2, 2, 6)
    assert broker.namesrv.noted == ["Fresh"]
    assert all_topic_configs(broker)["TBW102"] == TopicConfig("TBW102", 4, 4, 7)


def test_without_auto_create_a_send_to_an_unknown_topic_is_topic_not_exist(tmp_path: Path) -> None:
    broker = FakeBroker(tmp_path, autoCreateTopicEnable=False)
    answer = serve(broker, send_request(topic="Fresh"))
    assert answer.code == C.TOPIC_NOT_EXIST
    assert (answer.remark or "").startswith("topic[Fresh] not exist, apply first please!")
    assert broker.store.max_offset == 0 and broker.store.created_topics.get("Fresh") is None
    assert "TBW102" not in all_topic_configs(broker)
    assert serve(broker, send_request(topic="%RETRY%cg", queue_id=0)).code == C.SUCCESS  # retry topics still
    serve(broker, update_topic("Fresh"))
    assert serve(broker, send_request(topic="Fresh")).code == C.SUCCESS


def test_queue_questions_take_every_queue_of_a_topic_with_more_than_the_default(broker: FakeBroker) -> None:
    """A topic created with 8 queues (the default for new topics is 4): its queues 4-7 have offsets too, and a
    consumer commits and reads its offset of them (RocketMQ bounds none of these by the default)."""
    fields = {"topic": "WideTopic", "queueId": "6"}
    assert serve(broker, make_request(RC.GET_MIN_OFFSET, 1, fields)).code == C.SUCCESS
    assert serve(broker, make_request(RC.GET_MAX_OFFSET, 2, fields)).code == C.SUCCESS
    assert serve(broker, make_request(RC.UPDATE_CONSUMER_OFFSET, 3, {**fields, "consumerGroup": "cg",
                                                                     "commitOffset": "0"})).code == C.SUCCESS
    assert serve(broker, make_request(RC.QUERY_CONSUMER_OFFSET, 4, {**fields, "consumerGroup": "cg"})).code == C.SUCCESS
    refused = serve(broker, make_request(RC.GET_MIN_OFFSET, 5, {"topic": "WideTopic", "queueId": "1024"}))
    assert refused.code == C.INVALID_PARAMETER
