"""The name server's administrative codes on the controller (services/controller/namesrv_admin.py through
ControllerRemoting.handle), with no network and no Raft: a stand-in Raft holds a real state machine, and a
write is applied as soon as it is proposed.

RocketMQ 8fc57f1: namesrv/.../processor/DefaultRequestProcessor.java (putKVConfig, getKVConfig's
QUERY_NOT_FOUND remark, getKVListByNamespace, wipeWritePermOfBroker, addWritePermOfBroker,
getAllTopicListFromNameserver's "disable", deleteTopicInNamesrv, getBrokerMemberGroup, updateConfig's black
list remark, getConfig), ClientRequestProcessor.java (orderTopicConf with orderMessageEnable),
routeinfo/RouteInfoManager.java (operateWritePermOfBroker, deleteTopic).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from services.common.clock import FakeClock
from services.common.codes import ResponseCode
from services.controller.config import ControllerConfig
from services.controller.controller import ControllerManager
from services.controller.kv_config import ORDER_TOPIC_CONFIG
from services.controller.remoting import ControllerRemoting
from services.controller.state_machine import ControllerResult, ReplicasInfoManager
from services.remoting import bodies
from services.remoting import headers as h
from services.remoting.acl import sign
from services.remoting.command import RemotingCommand, RequestCode, make_request
from services.remoting.namesrv_bodies import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
)

RC = RequestCode
T = TypeVar("T")
CLUSTER, GROUP, A1 = "DefaultCluster", "broker-a", "127.0.0.1:10911"


class FakeRaft:
    def __init__(self) -> None:
        self.state = ReplicasInfoManager()

    def read(self, fn: Callable[[ReplicasInfoManager], T]) -> T:
        return fn(self.state)


class Conn:
    def __init__(self) -> None:
        self.attributes: dict[str, Any] = {}
        self.peer = "127.0.0.1:50000"


def served(tmp_path: Path, **config: Any) -> ControllerRemoting:
    manager = ControllerManager(ControllerConfig(controllerStorePath=str(tmp_path), **config), clock=FakeClock())
    raft = FakeRaft()
    manager.raft = raft  # type: ignore[assignment]

    async def write_anywhere(group: str, command: Callable[[ReplicasInfoManager], ControllerResult]
                             ) -> ControllerResult:
        result = command(raft.state)
        for event in result.events:
            raft.state.apply_event(event)
        return result

    manager.write_anywhere = write_anywhere  # type: ignore[method-assign]
    return ControllerRemoting(manager)


def ask(remoting: ControllerRemoting, code: int, header: h.CustomHeader | None = None, body: bytes = b"",
        conn: Conn | None = None) -> RemotingCommand:
    request = make_request(code, 7, header.to_ext_fields() if header is not None else {}, body)
    answer = asyncio.run(remoting.handle(request, conn or Conn()))  # type: ignore[arg-type]
    assert answer is not None and answer.opaque == 7
    return answer


def register(remoting: ControllerRemoting, *topics: str, perm: int = 6) -> None:
    body = RegisterBrokerBody(TopicConfigSerializeWrapper({t: TopicConfig(t, 4, 4, perm) for t in topics},
                                                          DataVersion(0, 1, 1))).encode()
    header = h.RegisterBrokerRequestHeader(broker_name=GROUP, broker_addr=A1, cluster_name=CLUSTER,
                                           ha_server_addr="127.0.0.1:10912", broker_id=0)
    assert ask(remoting, RC.REGISTER_BROKER, header, body).code == ResponseCode.SUCCESS


def route(remoting: ControllerRemoting, topic: str) -> bodies.TopicRouteData:
    answer = ask(remoting, RC.GET_ROUTEINFO_BY_TOPIC, h.GetRouteInfoRequestHeader(topic=topic))
    assert answer.code == ResponseCode.SUCCESS
    return bodies.TopicRouteData.decode(answer.body)


# ---------------------------------------------------------------------------------- KV config
def test_kv_put_get_list_and_delete(tmp_path: Path) -> None:
    remoting = served(tmp_path)
    put = ask(remoting, RC.PUT_KV_CONFIG, h.PutKVConfigRequestHeader(namespace="ns", key="k", value="v"))
    assert (put.code, put.remark, put.body) == (ResponseCode.SUCCESS, None, b"")
    got = ask(remoting, RC.GET_KV_CONFIG, h.GetKVConfigRequestHeader(namespace="ns", key="k"))
    assert (got.code, dict(got.ext_fields)) == (ResponseCode.SUCCESS, {"value": "v"})
    listed = ask(remoting, RC.GET_KVLIST_BY_NAMESPACE, h.GetKVListByNamespaceRequestHeader(namespace="ns"))
    assert listed.body == b'{"table":{"k":"v"}}'
    assert ask(remoting, RC.DELETE_KV_CONFIG, h.DeleteKVConfigRequestHeader(namespace="ns", key="k")).code == 0
    gone = ask(remoting, RC.GET_KV_CONFIG, h.GetKVConfigRequestHeader(namespace="ns", key="k"))
    assert (gone.code, gone.remark) == (ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: ns Key: k")
    empty = ask(remoting, RC.GET_KVLIST_BY_NAMESPACE, h.GetKVListByNamespaceRequestHeader(namespace="ns"))
    assert (empty.code, empty.remark) == (ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: ns")


def test_kv_requests_out_of_bounds_are_refused_with_a_remark(tmp_path: Path) -> None:
    remoting = served(tmp_path)
    answer = ask(remoting, RC.PUT_KV_CONFIG, h.PutKVConfigRequestHeader(namespace="n" * 300, key="k", value="v"))
    assert answer.code == ResponseCode.INVALID_PARAMETER and "namespace" in (answer.remark or "")
    missing = ask(remoting, RC.PUT_KV_CONFIG, None)
    assert missing.code == ResponseCode.INVALID_PARAMETER and "namespace" in (missing.remark or "")
    long_get = ask(remoting, RC.GET_KV_CONFIG, h.GetKVConfigRequestHeader(namespace="ns", key="k" * 70_000))
    assert long_get.code == ResponseCode.INVALID_PARAMETER


def test_order_topic_conf_is_in_the_route_only_with_order_message_enable(tmp_path: Path) -> None:
    remoting = served(tmp_path)
    register(remoting, "TopicOrder")
    ask(remoting, RC.PUT_KV_CONFIG, h.PutKVConfigRequestHeader(namespace=ORDER_TOPIC_CONFIG, key="TopicOrder",
                                                                value="broker-a:4"))
    assert route(remoting, "TopicOrder").order_topic_conf is None
    update = ask(remoting, RC.UPDATE_NAMESRV_CONFIG, None, b"orderMessageEnable=true\n")
    assert update.code == ResponseCode.SUCCESS
    assert route(remoting, "TopicOrder").order_topic_conf == "broker-a:4"


def test_kv_writes_need_the_token_when_one_is_configured(tmp_path: Path) -> None:
    remoting = served(tmp_path, authToken="s3cret-token-of-enough-length")
    header = h.PutKVConfigRequestHeader(namespace="ns", key="k", value="v")
    assert ask(remoting, RC.PUT_KV_CONFIG, header).code == ResponseCode.NO_PERMISSION
    signed = sign(make_request(RC.PUT_KV_CONFIG, 7, header.to_ext_fields()), "s3cret-token-of-enough-length",
                  FakeClock().now_ms())
    answer = asyncio.run(remoting.handle(signed, Conn()))  # type: ignore[arg-type]
    assert answer is not None and answer.code == ResponseCode.SUCCESS
    for code in (RC.DELETE_KV_CONFIG, RC.WIPE_WRITE_PERM_OF_BROKER, RC.ADD_WRITE_PERM_OF_BROKER,
                 RC.DELETE_TOPIC_IN_NAMESRV, RC.UPDATE_NAMESRV_CONFIG):
        assert ask(remoting, code).code == ResponseCode.NO_PERMISSION
    got = ask(remoting, RC.GET_KV_CONFIG, h.GetKVConfigRequestHeader(namespace="ns", key="k"))
    assert got.code == ResponseCode.SUCCESS  # reads stay open, as routes are


# ---------------------------------------------------------------------------------- the route table
def test_206_lists_every_topic_and_answers_disable_when_turned_off(tmp_path: Path) -> None:
    remoting = served(tmp_path)
    register(remoting, "TopicA", "TopicB")
    answer = ask(remoting, RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert answer.code == ResponseCode.SUCCESS
    assert set(bodies.TopicList.decode(answer.body).topic_list) == {"TopicA", "TopicB"}
    ask(remoting, RC.UPDATE_NAMESRV_CONFIG, None, b"enableAllTopicList=false")
    off = ask(remoting, RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert (off.code, off.remark) == (ResponseCode.SYSTEM_ERROR, "disable")


def test_wipe_and_add_write_perm_count_topics_and_change_routes(tmp_path: Path) -> None:
    remoting = served(tmp_path)
    register(remoting, "TopicA", "TopicB")
    wiped = ask(remoting, RC.WIPE_WRITE_PERM_OF_BROKER, h.WipeWritePermOfBrokerRequestHeader(broker_name=GROUP))
    assert (wiped.code, dict(wiped.ext_fields)) == (ResponseCode.SUCCESS, {"wipeTopicCount": "2"})
    assert route(remoting, "TopicA").queue_datas[0].perm == 4
    register(remoting, "TopicA", "TopicB")  # the same DataVersion: the wipe holds, as in RocketMQ
    assert route(remoting, "TopicA").queue_datas[0].perm == 4
    added = ask(remoting, RC.ADD_WRITE_PERM_OF_BROKER, h.AddWritePermOfBrokerRequestHeader(broker_name=GROUP))
    assert dict(added.ext_fields) == {"addTopicCount": "2"}
    assert route(remoting, "TopicA").queue_datas[0].perm == 6
    other = ask(remoting, RC.WIPE_WRITE_PERM_OF_BROKER, h.WipeWritePermOfBrokerRequestHeader(broker_name="nobody"))
    assert dict(other.ext_fields) == {"wipeTopicCount": "0"}


def test_216_deletes_a_topics_routes(tmp_path: Path) -> None:
    remoting = served(tmp_path)
    register(remoting, "TopicA", "TopicB")
    assert ask(remoting, RC.DELETE_TOPIC_IN_NAMESRV, h.DeleteTopicFromNamesrvRequestHeader(
        topic="TopicA", cluster_name="OtherCluster")).code == ResponseCode.SUCCESS
    assert route(remoting, "TopicA").queue_datas  # another cluster's groups only: nothing here
    ask(remoting, RC.DELETE_TOPIC_IN_NAMESRV, h.DeleteTopicFromNamesrvRequestHeader(topic="TopicA"))
    answer = ask(remoting, RC.GET_ROUTEINFO_BY_TOPIC, h.GetRouteInfoRequestHeader(topic="TopicA"))
    assert answer.code == ResponseCode.TOPIC_NOT_EXIST


def test_901_answers_the_groups_members(tmp_path: Path) -> None:
    remoting = served(tmp_path)
    register(remoting, "TopicA")
    answer = ask(remoting, RC.GET_BROKER_MEMBER_GROUP,
                 h.GetBrokerMemberGroupRequestHeader(cluster_name=CLUSTER, broker_name=GROUP))
    assert answer.body == (b'{"brokerMemberGroup":{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a",'
                           b'"cluster":"DefaultCluster"}}')
    unknown = ask(remoting, RC.GET_BROKER_MEMBER_GROUP,
                  h.GetBrokerMemberGroupRequestHeader(cluster_name=CLUSTER, broker_name="nobody"))
    assert unknown.body == b'{"brokerMemberGroup":{"brokerAddrs":{},"brokerName":"nobody","cluster":"DefaultCluster"}}'


# ---------------------------------------------------------------------------------- configuration
def test_319_answers_properties_text(tmp_path: Path) -> None:
    text = ask(served(tmp_path), RC.GET_NAMESRV_CONFIG).body.decode()
    lines = dict(line.split("=", 1) for line in text.splitlines())
    assert lines["orderMessageEnable"] == "false" and lines["enableAllTopicList"] == "true"
    assert lines["listenPort"] == "9878"


@pytest.mark.parametrize(("body", "code", "remark"), [
    (b"kvConfigPath=/tmp/x", ResponseCode.NO_PERMISSION, "Can not update config in black list."),
    (b"configStorePath=/tmp/x", ResponseCode.NO_PERMISSION, "Can not update config in black list."),
    (b"enableElectUncleanMaster=true", ResponseCode.INVALID_PARAMETER, "use updateControllerConfig"),
    (b"noSuchKey=1", ResponseCode.INVALID_PARAMETER, "not a name-server property"),
    (b"orderMessageEnable=maybe", ResponseCode.INVALID_PARAMETER, "orderMessageEnable"),
    (b"\xff\xfe", ResponseCode.INVALID_PARAMETER, "not properties text"),
])
def test_318_refuses_what_it_does_not_change(tmp_path: Path, body: bytes, code: int, remark: str) -> None:
    remoting = served(tmp_path)
    answer = ask(remoting, RC.UPDATE_NAMESRV_CONFIG, None, body)
    assert answer.code == code and remark in (answer.remark or "")
    assert b"orderMessageEnable=false" in ask(remoting, RC.GET_NAMESRV_CONFIG).body


def test_318_persists_what_it_changes(tmp_path: Path) -> None:
    remoting = served(tmp_path)
    assert ask(remoting, RC.UPDATE_NAMESRV_CONFIG, None, b"orderMessageEnable=true").code == ResponseCode.SUCCESS
    assert "orderMessageEnable=true" in (tmp_path / "controller.properties").read_text()
