"""consumeMessage --format mqadmin: mqadmin's reading of a topic, step by step, over RocketMQ's requests to
a broker faked in memory (fake_remoting.py). The expected texts are what real mqadmin 5.3.3 printed for
the same stored messages (the rocketmq tier compares the two tools on a live cluster)."""

from __future__ import annotations

import pytest

from services.remoting.message import PulledMessage, SocketAddress
from tests.unit.cli.conftest import MASTER, Invoke, assert_one_line_error
from tests.unit.cli.fake_remoting import FakeRemotingBroker

#: A message as a RocketMQ 5.3.3 broker stored it (what mqadmin's sendMessage sent, with the broker's own
#: MSG_REGION, TRACE_ON and CLUSTER).
HELLO = PulledMessage(
    "TopicA", 1, 0, 0, b"hello world",
    {"MSG_REGION": "DefaultRegion", "UNIQ_KEY": "C000020266F64E0E2F2A878C677C0000", "CLUSTER": "DefaultCluster",
     "TAGS": "tagA", "KEYS": "key1", "WAIT": "true", "TRACE_ON": "true"},
    1795765325788, SocketAddress.parse("127.0.0.1", 39122), 1795765325694, SocketAddress.parse("127.0.0.1", 54618))
HELLO_SHOWN = (
    "MSGID: C000020266F64E0E2F2A878C677C0000 MessageExt [brokerName=broker-a, queueId=1, storeSize=242, "
    "queueOffset=0, sysFlag=0, bornTimestamp=1795765325694, bornHost=/127.0.0.1:54618, "
    "storeTimestamp=1795765325788, storeHost=/127.0.0.1:39122, msgId=7F000001000098D20000000000000000, "
    "commitLogOffset=0, bodyCRC=222957957, reconsumeTimes=0, preparedTransactionOffset=0, "
    "toString()=Message{topic='TopicA', flag=0, properties={MSG_REGION=DefaultRegion, "
    "UNIQ_KEY=C000020266F64E0E2F2A878C677C0000, CLUSTER=DefaultCluster, MIN_OFFSET=0, TAGS=tagA, KEYS=key1, "
    "WAIT=true, TRACE_ON=true, MAX_OFFSET=1}, body=[104, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100], "
    "transactionId='null'}] BODY: hello world\n")


def queue_line(queue_id: int, what: str) -> str:
    return f"MessageQueue [topic=TopicA, brokerName=broker-a, queueId={queue_id}] {what}\n"


def later(offset: int, body: bytes) -> PulledMessage:
    return PulledMessage("TopicA", 1, offset, 300 * offset, body, {"UNIQ_KEY": f"{offset:032X}"}, 1795765325800,
                         SocketAddress.parse("127.0.0.1", 39122))


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> FakeRemotingBroker:
    fake = FakeRemotingBroker({"TopicA": {q: [] for q in range(8)}})
    fake.queues["TopicA"][1] = [HELLO]
    monkeypatch.setattr("mqctl.commands.consume.BlockingRemoting", fake.client)
    return fake


def test_one_queue(mqctl: Invoke, broker: FakeRemotingBroker) -> None:
    result = mqctl("consumeMessage", "-t", "TopicA", "-b", "broker-a", "-i", "1", "--format", "mqadmin")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ("Consume ok\n" + HELLO_SHOWN
                             + queue_line(1, "print msg finished. status=NO_NEW_MSG, offset=1"))
    pulls = [(fields["queueOffset"], fields["maxMsgNums"], fields["consumerGroup"], fields["sysFlag"])
             for _, code, fields in broker.requests if code == 11]
    assert pulls == [("0", "2", "TOOLS_CONSUMER", "4"), ("1", "1", "TOOLS_CONSUMER", "4")]
    assert {address for address, _, _ in broker.requests} == {MASTER}


def test_every_queue_in_the_order_of_mqadmins_hash_set(mqctl: Invoke, broker: FakeRemotingBroker) -> None:
    result = mqctl("consumeMessage", "-t", "TopicA", "-b", "broker-a", "--format", "mqadmin")
    assert result.exit_code == 0, result.stderr
    empty = [queue_line(q, "print msg finished. status=NO_NEW_MSG, offset=0") for q in (7, 5, 6, 3, 4)]
    assert result.stdout == ("".join(empty) + "Consume ok\n" + HELLO_SHOWN
                             + queue_line(1, "print msg finished. status=NO_NEW_MSG, offset=1")
                             + queue_line(2, "print msg finished. status=NO_NEW_MSG, offset=0")
                             + queue_line(0, "print msg finished. status=NO_NEW_MSG, offset=0"))


def test_a_count_that_runs_out_stops_at_the_queue_it_runs_out_in(mqctl: Invoke, broker: FakeRemotingBroker) -> None:
    """mqadmin counts each queue's span plus one: two empty queues use up a count of 2."""
    result = mqctl("consumeMessage", "-t", "TopicA", "-b", "broker-a", "-n", "2", "--format", "mqadmin")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "".join(queue_line(q, "print msg finished. status=NO_NEW_MSG, offset=0") for q in (7, 5))


def test_one_queue_cut_to_the_count(mqctl: Invoke, broker: FakeRemotingBroker) -> None:
    broker.queues["TopicA"][1] += [later(1, b"second"), later(2, b"third")]
    result = mqctl("consumeMessage", "-t", "TopicA", "-b", "broker-a", "-i", "1", "-n", "2", "--format", "mqadmin")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == ["The oldler 2 message will be provided", "Consume ok"]  # sic
    assert [line.rsplit(" BODY: ", 1)[1] for line in lines[2:]] == ["hello world", "second"]
    assert "properties={UNIQ_KEY=00000000000000000000000000000001, MIN_OFFSET=0, MAX_OFFSET=3}" in lines[3]


def test_an_offset_past_the_end(mqctl: Invoke, broker: FakeRemotingBroker) -> None:
    result = mqctl("consumeMessage", "-t", "TopicA", "-b", "broker-a", "-i", "1", "-o", "5", "--format", "mqadmin")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == queue_line(1, "no matched msg, offset=5")


def test_a_group_reads_from_its_committed_offsets_and_commits(mqctl: Invoke, broker: FakeRemotingBroker) -> None:
    first = mqctl("consumeMessage", "-t", "TopicA", "-b", "broker-a", "-i", "1", "-g", "g1", "--format", "mqadmin")
    assert first.exit_code == 0, first.stderr
    assert first.stdout.startswith("Consume ok\n")
    assert broker.committed == {("g1", "TopicA", 1): 1}
    assert {fields["consumerGroup"] for _, code, fields in broker.requests if code == 11} == {"g1"}
    again = mqctl("consumeMessage", "-t", "TopicA", "-b", "broker-a", "-i", "1", "-g", "g1", "--format", "mqadmin")
    assert again.stdout == queue_line(1, "print msg finished. status=NO_NEW_MSG, offset=1")


def test_control_characters_are_shown_as_escapes(mqctl: Invoke, broker: FakeRemotingBroker) -> None:
    broker.queues["TopicA"][1] = [later(0, b"\x1b[2Jline\nforged")]
    result = mqctl("consumeMessage", "-t", "TopicA", "-b", "broker-a", "-i", "1", "--format", "mqadmin")
    assert result.exit_code == 0, result.stderr
    assert " BODY: \\x1b[2Jline\\nforged\n" in result.stdout
    assert "body=[27, 91, 50, 74, 108, 105, 110, 101, 10, 102, 111, 114, 103, 101, 100]" in result.stdout


def test_an_unknown_topic(mqctl: Invoke, broker: FakeRemotingBroker) -> None:
    result = mqctl("consumeMessage", "-t", "Nope", "-b", "broker-a", "--format", "mqadmin")
    assert result.stdout == ""
    assert assert_one_line_error(result, 2) == "Error: topic Nope does not exist on 127.0.0.1:10911"
