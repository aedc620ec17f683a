"""queryMsgByKey: which brokers are asked, what is kept of their answers (mqadmin's filter: the topic and the
key), mqadmin's text of each version and a clear error when nothing has the key. The name server and the
brokers are faked in memory; tests/interop (scenario steps ``queryMsgByKey``) compares the text with real
mqadmin's on RocketMQ's cluster, and tests/integration/test_query_message.py runs it across a failover."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from mqctl.commands.query import Found, index_key
from services.common.codes import ResponseCode
from services.remoting import broker_headers as bh
from services.remoting.command import RemotingCommand, RequestCode, make_response
from services.remoting.message import PulledMessage, SocketAddress, encode_pulled
from tests.unit.cli.conftest import Invoke, assert_one_line_error

ROUTE = (b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a",'
         b'"cluster":"DefaultCluster"},{"brokerAddrs":{1:"10.0.0.5:10911"},"brokerName":"broker-b",'
         b'"cluster":"Other"}],"queueDatas":[]}')
HOST = SocketAddress(bytes([10, 0, 0, 1]), 10911)
UNIQ = "7F0000010A8C18B4AAC2" + "1F2E3D4C0001"


def message(offset: int, keys: str, topic: str = "T", uniq: str | None = UNIQ) -> PulledMessage:
    properties = {"KEYS": keys, **({"UNIQ_KEY": uniq} if uniq else {})}
    return PulledMessage(topic, 1, offset, 1000 + offset, b"body", properties, 1_795_802_461_234, HOST)


@dataclass
class FakeServers:
    version: int = 479
    answers: dict[str, list[PulledMessage]] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    def client(self, *args: object, **kwargs: object) -> FakeServers:
        return self

    def close(self) -> None:
        pass

    def call(self, host: str, port: int, request: RemotingCommand, deadline: float) -> RemotingCommand:
        if request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            return make_response(request, ResponseCode.SUCCESS, body=ROUTE)
        assert request.code == bh.QUERY_MESSAGE and request.ext_fields["key"] == "order-1"
        self.asked.append(f"{host}:{port}")
        found = self.answers.get(f"{host}:{port}", [])
        answer = make_response(request, ResponseCode.SUCCESS, body=b"".join(encode_pulled(m) for m in found)) \
            if found else make_response(request, ResponseCode.QUERY_NOT_FOUND, "can not find message")
        return dataclasses.replace(answer, version=self.version)


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> FakeServers:
    fake = FakeServers()
    monkeypatch.setattr("mqctl.commands.namesrv.BlockingRemoting", fake.client)
    return fake


def test_each_groups_master_is_asked_and_only_messages_of_the_topic_with_the_key_are_kept(
        mqctl: Invoke, servers: FakeServers) -> None:
    servers.answers["10.0.0.1:10911"] = [message(0, "order-1 x"), message(1, "order-10"), message(2, "order-1", "U")]
    servers.answers["10.0.0.5:10911"] = [message(7, "order-1", uniq=None)]
    result = mqctl("queryMsgByKey", "-n", "127.0.0.1:9876", "-t", "T", "-k", "order-1", "--format", "mqadmin")
    assert result.exit_code == 0, result.stderr
    assert servers.asked == ["10.0.0.1:10911", "10.0.0.5:10911"]
    offset_id = "0A000001" + "00002A9F" + f"{1007:016X}"  # no unique key: the offset message id
    assert result.stdout == (f"{'#Message ID':<50} {'#QID':>4} {'#Offset':>40}\n"
                             f"{UNIQ:<50} {1:>4} {0:>40}\n{offset_id:<50} {1:>4} {7:>40}\n")
    only_a = mqctl("queryMsgByKey", "-n", "127.0.0.1:9876", "-t", "T", "-k", "order-1", "-c", "DefaultCluster")
    assert only_a.exit_code == 0 and servers.asked[2:] == ["10.0.0.1:10911"]


def test_a_broker_of_5_4_or_later_gets_mqadmins_index_key_column(mqctl: Invoke, servers: FakeServers) -> None:
    servers.version = 513
    servers.answers["10.0.0.1:10911"] = [message(3, "order-1")]
    result = mqctl("queryMsgByKey", "-n", "127.0.0.1:9876", "-t", "T", "-k", "order-1", "--format", "mqadmin")
    key = f"1795802400000@T@K@order-1@{UNIQ}@1003"
    assert index_key(Found(message(3, "order-1"), 513), "T", "order-1") == key
    assert result.stdout == (f"{'#Message ID':<50} {'#QID':>4} {'#Offset':>40} {'#IndexKey':<200}\n"
                             f"{UNIQ:<50} {1:>4} {3:>40} {key:<200}\n")


def test_no_message_with_the_key_is_one_error_line(mqctl: Invoke, servers: FakeServers) -> None:
    result = mqctl("queryMsgByKey", "-n", "127.0.0.1:9876", "-t", "T", "-k", "order-1")
    assert_one_line_error(result, 4, "no message of topic T has the key order-1")
