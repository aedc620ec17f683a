"""The name server's KV config across a real group of three controllers: a key written on a follower
(handed to the leader through Raft) and one written on the leader are read on every node, survive a SIGKILL
of the whole group and its restart, and a delete on any node reaches every node; ORDER_TOPIC_CONFIG shows
in a route once a node has orderMessageEnable."""

from __future__ import annotations

import asyncio
import json

import pytest

from mqctl.cluster import ControllerCluster
from services.common.codes import ResponseCode
from services.common.errors import MqctlError
from services.common.remoting_client import RemotingClient
from services.remoting import bodies
from services.remoting import headers as h
from services.remoting.command import RemotingCommand, RequestCode, make_request
from services.remoting.namesrv_bodies import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from tests.integration.conftest import poll, run_cli

pytestmark = pytest.mark.integration

RC = RequestCode
NS = "ORDER_TOPIC_CONFIG"


async def _call(address: str, code: int, ext: dict[str, str], body: bytes = b"") -> RemotingCommand:
    client = RemotingClient(timeout_s=8.0)
    try:
        return await client.call(address, make_request(code, 0, ext, body))
    finally:
        await client.close()


def call(address: str, code: int, header: h.CustomHeader | None = None, body: bytes = b"") -> RemotingCommand:
    return asyncio.run(_call(address, code, header.to_ext_fields() if header is not None else {}, body))


def value_on(address: str, key: str) -> str | None:
    """The key's value as this node answers it (None: QUERY_NOT_FOUND or no answer yet)."""
    try:
        answer = call(address, RC.GET_KV_CONFIG, h.GetKVConfigRequestHeader(namespace=NS, key=key))
    except MqctlError:  # a node still starting (unreachable, or no answer yet): polled again
        return None
    if answer.code == ResponseCode.QUERY_NOT_FOUND:
        return None
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return answer.ext_fields.get("value")


def put(address: str, key: str, value: str) -> None:
    answer = call(address, RC.PUT_KV_CONFIG, h.PutKVConfigRequestHeader(namespace=NS, key=key, value=value))
    assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, None)


async def _route_with_order_conf(address: str) -> str | None:
    """Register a broker group (not the controller's) for TopicB on this node and read TopicB's route on the
    same connection (a registration lasts as long as its connection)."""
    client = RemotingClient(timeout_s=8.0)
    try:
        body = RegisterBrokerBody(TopicConfigSerializeWrapper({"TopicB": TopicConfig("TopicB", 2, 2, 6)},
                                                              DataVersion(0, 1, 1))).encode()
        header = h.RegisterBrokerRequestHeader(broker_name="broker-a", broker_addr="127.0.0.1:1", cluster_name="c",
                                               ha_server_addr="127.0.0.1:2", broker_id=0)
        registered = await client.call(address, make_request(RC.REGISTER_BROKER, 0, header.to_ext_fields(), body))
        assert registered.code == ResponseCode.SUCCESS, registered.remark
        answer = await client.call(address, make_request(RC.GET_ROUTEINFO_BY_TOPIC, 0,
                                                         h.GetRouteInfoRequestHeader(topic="TopicB").to_ext_fields()))
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        return bodies.TopicRouteData.decode(answer.body).order_topic_conf
    finally:
        await client.close()


def test_kv_config_is_one_table_for_the_group_and_survives_a_sigkill_of_every_node(
        controllers: ControllerCluster) -> None:
    leader = controllers.leader(timeout=60)
    follower = next(n for n in controllers.nodes if n is not leader)
    put(follower.address, "TopicA", "broker-a:4")
    put(leader.address, "TopicB", "broker-a:2;broker-b:2")
    expected = {"TopicA": "broker-a:4", "TopicB": "broker-a:2;broker-b:2"}
    for node in controllers.nodes:
        poll(lambda a=node.address: all(value_on(a, k) == v for k, v in expected.items()), 20,
             f"both keys on {node.address}")

    controllers.kill_all()  # SIGKILL: nothing flushed on the way out
    controllers.start()
    controllers.leader(timeout=90)
    for node in controllers.nodes:
        poll(lambda a=node.address: all(value_on(a, k) == v for k, v in expected.items()), 60,
             f"both keys on {node.address} after the restart")

    other = next(n for n in controllers.nodes if n is not controllers.leader(timeout=60))
    answer = call(other.address, RC.DELETE_KV_CONFIG, h.DeleteKVConfigRequestHeader(namespace=NS, key="TopicA"))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    for node in controllers.nodes:
        poll(lambda a=node.address: value_on(a, "TopicA") is None and value_on(a, "TopicB") is not None, 20,
             f"TopicA deleted on {node.address}")
    listed = call(leader.address, RC.GET_KVLIST_BY_NAMESPACE, h.GetKVListByNamespaceRequestHeader(namespace=NS))
    assert listed.body == b'{"table":{"TopicB":"broker-a:2;broker-b:2"}}'
    assert asyncio.run(_route_with_order_conf(other.address)) is None  # orderMessageEnable is off by default
    update = call(other.address, RC.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true\n")
    assert update.code == ResponseCode.SUCCESS, update.remark
    assert asyncio.run(_route_with_order_conf(other.address)) == "broker-a:2;broker-b:2"


def test_mqctl_name_server_commands_against_the_group(controllers: ControllerCluster) -> None:
    """mqctl's name-server commands, with mqadmin's text, against three controllers given as -n."""
    every = controllers.addresses
    one = controllers.nodes[0].address
    put_kv = run_cli("updateKvConfig", "-n", every, "-s", NS, "-k", "TopicC", "-v", "broker-a:8", "--format", "mqadmin")
    assert (put_kv.returncode, put_kv.stdout) == (0, "create or update kv config to namespace success.\n"), put_kv.stderr
    got = run_cli("getKvConfig", "-n", controllers.nodes[2].address, "-s", NS, "--format", "json")
    assert json.loads(got.stdout) == {"namespace": NS, "table": {"TopicC": "broker-a:8"}}, got.stderr
    config = run_cli("getNamesrvConfig", "-n", one, "--format", "mqadmin")
    assert config.returncode == 0, config.stderr
    assert config.stdout.startswith(f"============{one}============\n")
    assert f"{'orderMessageEnable':<50}=  false\n" in config.stdout
    refused = run_cli("updateNamesrvConfig", "-n", one, "-k", "kvConfigPath", "-v", "/tmp/x")
    assert refused.returncode != 0 and "Can not update config in black list." in refused.stderr
    updated = run_cli("updateNamesrvConfig", "-n", one, "-k", "enableAllTopicList", "-v", "false", "--format", "mqadmin")
    assert updated.stdout == f"update name server config success![{one}]\nenableAllTopicList : false\n", updated.stderr
    disabled = run_cli("topicList", "-n", one)
    assert disabled.returncode != 0 and "disable" in disabled.stderr
    listed = run_cli("topicList", "-n", controllers.nodes[1].address, "--format", "json")
    assert json.loads(listed.stdout) == {"topics": []}, listed.stderr
    wiped = run_cli("wipeWritePerm", "-n", every, "-b", "broker-a", "--format", "mqadmin")
    assert wiped.stdout == "".join(f"wipe write perm of broker[broker-a] in name server[{n.address}] OK, 0\n"
                                   for n in controllers.nodes), wiped.stderr
    deleted = run_cli("deleteKvConfig", "-n", one, "-s", NS, "-k", "TopicC", "--format", "mqadmin")
    assert deleted.stdout == "delete kv config from namespace success.\n", deleted.stderr
    for node in controllers.nodes:
        poll(lambda a=node.address: value_on(a, "TopicC") is None, 20, f"TopicC deleted on {node.address}")
