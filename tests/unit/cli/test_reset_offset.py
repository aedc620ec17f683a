"""resetOffsetByTime: -s as mqadmin reads it, what is asked of which server, mqadmin's text, and clear errors.
The name server and the broker are faked in memory; tests/interop/test_java_lifecycle.py compares the text
with real mqadmin's for the same reset, on RocketMQ's broker and on ours."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest

from mqctl.commands.offset import parse_timestamp, reset_order
from services.common.codes import ResponseCode
from services.common.errors import UsageError
from services.remoting import admin_headers as ah
from services.remoting import broker_headers as bh
from services.remoting.admin_bodies import ResetOffsetBody
from services.remoting.broker_bodies import MessageQueue
from services.remoting.command import RemotingCommand, RequestCode, make_response
from services.remoting.javaorder import hash_set_order, message_queue_hash
from tests.unit.cli.conftest import Invoke, assert_one_line_error

ROUTE = (b'{"brokerDatas":[{"brokerAddrs":{1:"10.0.0.2:10911",0:"10.0.0.1:10911"},"brokerName":"broker-a",'
         b'"cluster":"DefaultCluster"},{"brokerAddrs":{2:"10.0.0.5:10911"},"brokerName":"broker-b",'
         b'"cluster":"DefaultCluster"}],"queueDatas":[]}')


def test_s_takes_now_epoch_milliseconds_or_local_time_to_the_millisecond() -> None:
    assert parse_timestamp("now", 1234) == 1234
    assert parse_timestamp("1795803270000", 0) == 1795803270000
    assert parse_timestamp("-1", 0) == -1
    local = int(time.mktime((2026, 11, 27, 9, 30, 5, 0, 0, -1))) * 1000 + 42
    assert parse_timestamp("2026-11-27#09:30:05:042", 0) == local
    for bad in ("yesterday", "2026-11-27 09:30:05", "2026-13-01#00:00:00:000", "99999999999999999999", ""):
        with pytest.raises(UsageError, match="no time"):
            parse_timestamp(bad, 0)


def test_the_queues_come_in_the_order_of_mqadmins_hash_map() -> None:
    first = {MessageQueue("T", "broker-a", q): q for q in range(8)}
    second = {MessageQueue("T", "broker-b", q): q for q in range(8)}
    expected = hash_set_order([*first, *second], lambda q: message_queue_hash(q.topic, q.broker_name, q.queue_id))
    assert reset_order([first, second]) == expected
    assert sorted(reset_order([first, second])) == sorted([*first, *second])
    recorded = {MessageQueue("JavaTimeTopic", "broker-a", q): 15 for q in range(4)}
    assert [q.queue_id for q in reset_order([recorded])] == [0, 3, 2, 1]  # as RocketMQ 5.3.3's mqadmin printed it


@dataclass
class FakeServers:
    """A name server with ROUTE; brokers that answer 222 with the queues asked, 29 and 15."""

    asked: list[tuple[str, int, dict[str, str]]] = field(default_factory=list)
    refuse: tuple[int, str] | None = None

    def client(self, *args: object, **kwargs: object) -> FakeServers:
        return self

    def close(self) -> None:
        pass

    def call(self, host: str, port: int, request: RemotingCommand, deadline: float) -> RemotingCommand:
        self.asked.append((f"{host}:{port}", request.code, dict(request.ext_fields)))
        if request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            return make_response(request, ResponseCode.SUCCESS, body=ROUTE)
        if request.code == ah.INVOKE_BROKER_TO_RESET_OFFSET and self.refuse:
            return make_response(request, *self.refuse)
        if request.code == ah.INVOKE_BROKER_TO_RESET_OFFSET:
            name = "broker-a" if host == "10.0.0.1" else "broker-b"
            queues = [int(request.ext_fields["queueId"])] if request.ext_fields.get("queueId", "-1") != "-1" \
                else [0, 1]
            body = ResetOffsetBody({MessageQueue("T", name, q): 10 * q + 3 for q in queues})
            return make_response(request, ResponseCode.SUCCESS, body=body.encode())
        if request.code == bh.SEARCH_OFFSET_BY_TIMESTAMP:
            return make_response(request, ResponseCode.SUCCESS, ext_fields={"offset": "17"})
        assert request.code == RequestCode.UPDATE_CONSUMER_OFFSET
        return make_response(request, ResponseCode.SUCCESS)


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> FakeServers:
    fake = FakeServers()
    monkeypatch.setattr("mqctl.commands.namesrv.BlockingRemoting", fake.client)
    return fake


def test_each_broker_groups_master_is_asked_and_mqadmins_text_printed(mqctl: Invoke, servers: FakeServers) -> None:
    result = mqctl("resetOffsetByTime", "-n", "127.0.0.1:9876", "-g", "G", "-t", "T", "-s", "1000", "--format",
                   "mqadmin")
    assert result.exit_code == 0, result.stderr
    resets = [(address, fields) for address, code, fields in servers.asked if code == ah.INVOKE_BROKER_TO_RESET_OFFSET]
    assert [address for address, _ in resets] == ["10.0.0.1:10911", "10.0.0.5:10911"]  # the master, else a slave
    assert resets[0][1] == {"topic": "T", "group": "G", "timestamp": "1000", "isForce": "true", "queueId": "-1",
                            "offset": "-1"}
    queues = reset_order([{MessageQueue("T", "broker-a", q): 0 for q in (0, 1)},
                          {MessageQueue("T", "broker-b", q): 0 for q in (0, 1)}])
    assert result.stdout == (
        "start reset consumer offset by specified, group[G], topic[T], force[true], timestamp(string)[1000], "
        "timestamp(long)[1000]\n" + f"{'#brokerName':<40}  {'#queueId':<40}  {'#offset':<40}\n"
        + "".join(f"{q.broker_name:<40}  {q.queue_id:<40}  {10 * q.queue_id + 3:<40}\n" for q in queues))


def test_one_queue_is_searched_committed_and_reset(mqctl: Invoke, servers: FakeServers) -> None:
    result = mqctl("resetOffsetByTime", "-n", "127.0.0.1:9876", "-g", "G", "-t", "T", "-s", "now", "-b",
                   "10.0.0.1:10911", "-q", "1", "--format", "mqadmin")
    assert result.exit_code == 0, result.stderr
    assert [code for _, code, _ in servers.asked] == [bh.SEARCH_OFFSET_BY_TIMESTAMP,
                                                       RequestCode.UPDATE_CONSUMER_OFFSET, ah.INVOKE_BROKER_TO_RESET_OFFSET]
    assert servers.asked[2][2]["queueId"] == "1" and servers.asked[2][2]["offset"] == "17"
    lines = result.stdout.splitlines()
    assert lines[0].startswith("start reset consumer offset by specified, group[G], topic[T], queueId[1], "
                               "broker[10.0.0.1:10911], timestamp(string)[now], timestamp(long)[")
    assert lines[1:] == ["reset consumer offset to 17"]


def test_a_refusal_and_bad_options_are_one_error_line(mqctl: Invoke, servers: FakeServers) -> None:
    servers.refuse = (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "Group G does not exist")
    result = mqctl("resetOffsetByTime", "-n", "127.0.0.1:9876", "-g", "G", "-t", "T", "-s", "0")
    assert_one_line_error(result, 4, "broker 10.0.0.1:10911", "Group G does not exist")
    for args, fragment in ((("-s", "soon"), "no time"), (("-s", "0", "-b", "10.0.0.1:10911"), "-b and -q"),
                           (("-s", "0", "-o", "5"), "-o needs -b and -q")):
        result = mqctl("resetOffsetByTime", "-n", "127.0.0.1:9876", "-g", "G", "-t", "T", *args)
        assert_one_line_error(result, 2, fragment)
