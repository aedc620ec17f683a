"""The controller's name-server answers (services/controller/namesrv_remoting.py through
ControllerRemoting.handle), byte for byte as RocketMQ's name server writes them.

RocketMQ 8fc57f1: namesrv/.../processor/ClientRequestProcessor.java:56 (105: the route in fastjson, or in
standard JSON for a requester at V4_9_4 = 401 or later or one that sets acceptStandardJsonOnly; else
TOPIC_NOT_EXIST with FAQUrl.suggestTodo's tip), DefaultRequestProcessor.java (registerBroker :223 with
checksum :331, queryBrokerTopicConfig :344, unregisterBroker :368, getBrokerClusterInfo :397),
common/help/FAQUrl.java.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

import pytest

from services.common.clock import FakeClock
from services.common.codes import ResponseCode
from services.controller.remoting import ControllerRemoting
from services.remoting import headers as h
from services.remoting.acl import sign
from services.remoting.command import RemotingCommand, RequestCode, make_request
from services.remoting.namesrv_bodies import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    body_crc32,
)

RC = RequestCode
CLUSTER, GROUP, A1, A2 = "DefaultCluster", "broker-a", "127.0.0.1:10911", "127.0.0.1:10921"
CPP_VERSION = 63  # what the Apache RocketMQ C++ client sends (V3_1_8)


class Conn:
    def __init__(self) -> None:
        self.attributes: dict[str, Any] = {}
        self.peer = "127.0.0.1:50000"


class Manager:
    """What ControllerRemoting needs of a ControllerManager for these codes (no Raft: no controller view)."""

    def __init__(self, token: str) -> None:
        self.clock, self.raft = FakeClock(), None
        self.config = SimpleNamespace(authToken=token, acceptLegacySignatures=False)
        self.beats: list[object] = []

    def on_heartbeat(self, heartbeat: object) -> None:
        self.beats.append(heartbeat)

    @staticmethod
    def bounded_heartbeat_timeout(value: int | None) -> int:
        return 10_000


def controller(token: str = "") -> ControllerRemoting:
    return ControllerRemoting(Manager(token))  # type: ignore[arg-type]


def ask(remoting: ControllerRemoting, request: RemotingCommand, conn: Conn | None = None) -> RemotingCommand:
    answer = asyncio.run(remoting.handle(request, conn or Conn()))  # type: ignore[arg-type]
    assert answer is not None
    return answer


def registration(broker_id: int, address: str, *topics: str, crc: bool = True, compressed: bool = False,
                 version: int = 479) -> RemotingCommand:
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(
        {t: TopicConfig(t, 4, 4, 6) for t in topics}, DataVersion(0, 1, 1)))
    data = body.encode_compressed() if compressed else body.encode()
    header = h.RegisterBrokerRequestHeader(broker_name=GROUP, broker_addr=address, cluster_name=CLUSTER,
                                           ha_server_addr=address[:-1] + "2", broker_id=broker_id,
                                           compressed=compressed, body_crc32=body_crc32(data) if crc else 0)
    return make_request(RC.REGISTER_BROKER, 1, header.to_ext_fields(), data, version=version)


def route_request(topic: str, version: int = CPP_VERSION, standard: bool | None = None) -> RemotingCommand:
    header = h.GetRouteInfoRequestHeader(topic=topic, accept_standard_json_only=standard)
    return make_request(RC.GET_ROUTEINFO_BY_TOPIC, 2, header.to_ext_fields(), version=version)


@pytest.fixture
def a1_conn() -> Conn:
    """The connection the master (A1) registered on."""
    return Conn()


@pytest.fixture
def served(a1_conn: Conn) -> ControllerRemoting:
    remoting = controller()
    assert ask(remoting, registration(0, A1, "TopicTest"), a1_conn).code == ResponseCode.SUCCESS
    assert ask(remoting, registration(1, A2, "TopicTest", compressed=True)).code == ResponseCode.SUCCESS
    return remoting


ROUTE = (b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"broker-a",'
         b'"cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":'
         b'"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}')


def test_105_answers_the_route_in_fastjsons_form_to_an_old_requester(served: ControllerRemoting) -> None:
    answer = ask(served, route_request("TopicTest"))
    assert (answer.code, answer.remark, answer.opaque, answer.is_response) == (ResponseCode.SUCCESS, None, 2, True)
    assert answer.body == ROUTE


@pytest.mark.parametrize(("version", "standard"), [(401, None), (479, False), (CPP_VERSION, True)])
def test_105_answers_standard_json_when_asked(served: ControllerRemoting, version: int, standard: bool) -> None:
    answer = ask(served, route_request("TopicTest", version, standard))
    assert answer.body == ROUTE.replace(b"{0:", b'{"0":').replace(b',1:"', b',"1":"')


def test_105_for_an_unknown_topic_is_topic_not_exist_with_rocketmqs_remark(served: ControllerRemoting) -> None:
    answer = ask(served, route_request("NoSuchTopic"))
    assert answer.code == ResponseCode.TOPIC_NOT_EXIST
    assert answer.code == 17
    assert answer.remark == ("No topic route info in name server for the topic: NoSuchTopic\n"
                             "See https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.")
    assert answer.body == b""


def test_105_without_a_topic_names_the_field(served: ControllerRemoting) -> None:
    answer = ask(served, make_request(RC.GET_ROUTEINFO_BY_TOPIC, 3, {"AccessKey": ""}))
    assert answer.code == ResponseCode.INVALID_PARAMETER
    assert answer.remark == "GetRouteInfoRequestHeader: field 'topic' is missing (required)"


def test_106_answers_the_cluster_info(served: ControllerRemoting) -> None:
    answer = ask(served, make_request(RC.GET_BROKER_CLUSTER_INFO, 4))
    assert answer.code == ResponseCode.SUCCESS
    assert answer.body == (b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},'
                           b'"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}},'
                           b'"clusterAddrTable":{"DefaultCluster":["broker-a"]}}')
    assert ask(controller(), make_request(RC.GET_BROKER_CLUSTER_INFO, 5)).body == (
        b'{"brokerAddrTable":{},"clusterAddrTable":{}}')


def test_103_tells_a_slave_its_master(served: ControllerRemoting) -> None:
    answer = ask(served, registration(2, "127.0.0.1:10931", "TopicTest"))
    assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, None)
    assert dict(answer.ext_fields) == {"masterAddr": A1, "haServerAddr": "127.0.0.1:10912"}
    assert dict(ask(served, registration(0, A1, "TopicTest")).ext_fields) == {}


def test_103_with_a_wrong_crc_is_refused_as_rocketmq_does() -> None:
    request = registration(0, A1, "TopicTest")
    forged = make_request(RC.REGISTER_BROKER, 1, {**request.ext_fields, "bodyCrc32": "12345"}, request.body)
    answer = ask(controller(), forged)
    assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
    unchecked = ask(controller(), registration(0, A1, "TopicTest", crc=False))
    assert unchecked.code == ResponseCode.SUCCESS  # bodyCrc32 0: not checked


@pytest.mark.parametrize(("ext", "body", "match"), [
    ({"bodyCrc32": "0"}, b"{", "body is not valid JSON"),
    ({"bodyCrc32": "0", "compressed": "true"}, b"{}", "not a zlib stream"),
    ({"brokerId": "x"}, None, "field 'brokerId' must be a decimal integer"),
    ({"brokerAddr": "nowhere"}, None, "brokerAddr 'nowhere' is not a host:port address"),
])
def test_103_malformed_is_refused_naming_the_problem(ext: dict[str, str], body: bytes | None, match: str) -> None:
    request = registration(0, A1, "TopicTest")
    answer = ask(controller(), make_request(RC.REGISTER_BROKER, 1, {**request.ext_fields, **ext},
                                            request.body if body is None else body))
    assert answer.code == ResponseCode.INVALID_PARAMETER
    assert answer.remark is not None and match in answer.remark


def test_104_unregisters_and_a_closed_connection_forgets(served: ControllerRemoting, a1_conn: Conn) -> None:
    header = h.UnRegisterBrokerRequestHeader(broker_name=GROUP, broker_addr=A1, cluster_name=CLUSTER, broker_id=0)
    unregister = make_request(RC.UNREGISTER_BROKER, 6, header.to_ext_fields())
    assert ask(served, unregister).code == ResponseCode.SUCCESS  # from another connection: answered, ignored
    assert b'"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"}' in ask(served, route_request("TopicTest")).body
    assert ask(served, unregister, a1_conn).code == ResponseCode.SUCCESS
    assert b'"brokerAddrs":{1:"127.0.0.1:10921"}' in ask(served, route_request("TopicTest")).body
    conn = Conn()
    ask(served, registration(3, "127.0.0.1:10941", "TopicTest"), conn)
    assert b"10941" in ask(served, route_request("TopicTest")).body
    served.on_closed(conn)  # type: ignore[arg-type]
    assert b"10941" not in ask(served, route_request("TopicTest")).body


def test_a_heartbeat_keeps_the_registration_fresh(served: ControllerRemoting, a1_conn: Conn) -> None:
    header = h.BrokerHeartbeatRequestHeader(cluster_name=CLUSTER, broker_addr=A1, broker_name=GROUP, broker_id=1)
    manager = cast(Manager, served.m)
    manager.clock.advance(100_000)
    asyncio.run(served.handle(make_request(RC.BROKER_HEARTBEAT, 7, header.to_ext_fields(), oneway=True),
                              a1_conn))  # type: ignore[arg-type]
    manager.clock.advance(100_000)
    assert b'"brokerAddrs":{0:"127.0.0.1:10911"}' in ask(served, route_request("TopicTest")).body
    assert len(manager.beats) == 1  # and the controller's liveness got it too


def test_with_an_auth_token_only_signed_registrations_count_and_routes_are_still_served() -> None:
    remoting = controller(token="s3cret")
    now = cast(Manager, remoting.m).clock.now_ms()
    for request in (registration(0, A1, "TopicTest"), make_request(RC.UNREGISTER_BROKER, 1, {}),
                    sign(registration(0, A1, "TopicTest"), "wrong", now)):
        answer = ask(remoting, request)
        assert answer.code == ResponseCode.NO_PERMISSION
        assert answer.remark is not None and ("auth token" in answer.remark or "does not match" in answer.remark)
    assert ask(remoting, route_request("TopicTest")).code == ResponseCode.TOPIC_NOT_EXIST
    assert ask(remoting, make_request(RC.GET_BROKER_CLUSTER_INFO, 4)).code == ResponseCode.SUCCESS
    signed = ask(remoting, sign(registration(0, A1, "TopicTest"), "s3cret", now))
    assert signed.code == ResponseCode.SUCCESS, signed.remark
    assert ask(remoting, route_request("TopicTest")).code == ResponseCode.SUCCESS


def test_322_says_whether_the_data_version_changed_and_keeps_the_registration(served: ControllerRemoting,
                                                                             a1_conn: Conn) -> None:
    def query(address: str, version: DataVersion) -> RemotingCommand:
        header = h.QueryDataVersionRequestHeader(broker_name=GROUP, broker_addr=address, cluster_name=CLUSTER,
                                                 broker_id=0)
        return ask(served, make_request(RC.QUERY_DATA_VERSION, 8, header.to_ext_fields(), version.encode()), a1_conn)

    same = query(A1, DataVersion(0, 1, 1))
    assert (same.code, dict(same.ext_fields), same.body) == (
        ResponseCode.SUCCESS, {"changed": "false"}, b'{"counter":1,"stateVersion":0,"timestamp":1}')
    assert dict(query(A1, DataVersion(0, 1, 2)).ext_fields) == {"changed": "true"}
    unknown = query("127.0.0.1:10999", DataVersion(0, 1, 1))
    assert (dict(unknown.ext_fields), unknown.body) == ({"changed": "true"}, b"")
    manager = cast(Manager, served.m)
    manager.clock.advance(100_000)
    query(A1, DataVersion(0, 1, 1))  # asking counts as a sign of life
    manager.clock.advance(100_000)
    assert b'"brokerAddrs":{0:"127.0.0.1:10911"}' in ask(served, route_request("TopicTest")).body
