"""deleteTopic: 215 to each master of the cluster, then 216 (with the cluster) to every name server of -n, in
mqadmin's text; the first refusal is one error line naming the broker, and nothing is asked of the name servers
then. The name servers and the brokers are faked in memory; tests/interop/test_mqadmin_topic_delete.py runs the
command beside real mqadmin on both kinds of cluster."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from services.common.codes import ResponseCode
from services.remoting import admin_headers as ah
from services.remoting.bodies import BrokerData, ClusterInfo
from services.remoting.command import RemotingCommand, RequestCode, make_response
from tests.unit.cli.conftest import Invoke, assert_one_line_error

NS = "10.0.0.8:9876;10.0.0.9:9876"
INFO = ClusterInfo({"broker-a": BrokerData("C1", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}),
                    "broker-b": BrokerData("C1", "broker-b", {1: "10.0.0.5:10911"})},
                   {"C1": frozenset({"broker-a", "broker-b"})})


@dataclass
class FakeServers:
    refuse: set[str] = field(default_factory=set)
    asked: list[tuple[str, int, dict[str, str]]] = field(default_factory=list)

    def client(self, *args: object, **kwargs: object) -> FakeServers:
        return self

    def close(self) -> None:
        pass

    def call(self, host: str, port: int, request: RemotingCommand, deadline: float) -> RemotingCommand:
        address = f"{host}:{port}"
        self.asked.append((address, request.code, dict(request.ext_fields)))
        if request.code == RequestCode.GET_BROKER_CLUSTER_INFO:
            return make_response(request, ResponseCode.SUCCESS, body=INFO.encode())
        if address in self.refuse:
            return make_response(request, ResponseCode.SYSTEM_ERROR, "topic T is not deleted: this broker is a slave")
        return make_response(request, ResponseCode.SUCCESS)


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> FakeServers:
    fake = FakeServers()
    monkeypatch.setattr("mqctl.commands.namesrv.BlockingRemoting", fake.client)
    return fake


def test_the_masters_then_every_name_server_are_asked_with_mqadmins_text(mqctl: Invoke, servers: FakeServers) -> None:
    result = mqctl("deleteTopic", "-n", NS, "-c", "C1", "-t", " T ", "--format", "mqadmin")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "delete topic [T] from cluster [C1] success.\ndelete topic [T] from NameServer success.\n"
    writes = [(a, code, fields) for a, code, fields in servers.asked if code != RequestCode.GET_BROKER_CLUSTER_INFO]
    assert writes == [("10.0.0.1:10911", ah.DELETE_TOPIC_IN_BROKER, {"topic": "T"}),  # broker-b has no master
                      ("10.0.0.8:9876", RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T", "clusterName": "C1"}),
                      ("10.0.0.9:9876", RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T", "clusterName": "C1"})]


def test_a_refusing_broker_is_one_error_line_and_the_name_servers_keep_the_routes(mqctl: Invoke,
                                                                                  servers: FakeServers) -> None:
    servers.refuse.add("10.0.0.1:10911")
    result = mqctl("deleteTopic", "-n", NS, "-c", "C1", "-t", "T")
    assert_one_line_error(result, 4, "broker 10.0.0.1:10911: topic T is not deleted: this broker is a slave",
                          "SYSTEM_ERROR")
    assert not [code for _, code, _ in servers.asked if code == RequestCode.DELETE_TOPIC_IN_NAMESRV]


def test_a_bad_topic_name_or_a_cluster_without_a_master_is_refused_before_any_write(mqctl: Invoke,
                                                                                   servers: FakeServers) -> None:
    bad = mqctl("deleteTopic", "-n", NS, "-c", "C1", "-t", "no such/topic")
    assert bad.exit_code == 2 and "is no topic name" in bad.stderr and servers.asked == []
    none = mqctl("deleteTopic", "-n", NS, "-c", "Other", "-t", "T")
    assert_one_line_error(none, 1, "cluster Other has no master")
    assert [code for _, code, _ in servers.asked] == [RequestCode.GET_BROKER_CLUSTER_INFO]
