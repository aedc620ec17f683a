"""mqctl over RocketMQ's remoting protocol against our own servers (``--protocol remoting``): the admin
commands give the answers they give over HTTP, so an operator sees the same cluster whichever way the
bytes travel; and ``-n`` finds brokers through our controllers acting as the name server."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from mqctl.cluster import BrokerNode, ControllerCluster
from services.common.codes import ResponseCode
from services.common.remoting_client import RemotingClient
from services.remoting import headers as h
from services.remoting.command import RemotingCommand, RequestCode, make_request
from services.remoting.namesrv_bodies import TopicConfig, TopicConfigSerializeWrapper
from tests.integration.conftest import poll
from tests.integration.test_broker import wait_role
from tests.integration.test_namesrv import group  # noqa: F401  (the fixture: a master and a slave of broker-a)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

GROUP, CLUSTER = "broker-a", "DefaultCluster"


def mqctl(protocol: str, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")}
    result = subprocess.run([sys.executable, "-m", "mqctl", "--protocol", protocol, "--timeout", "10", *args],
                            capture_output=True, text=True, timeout=90, env=env, check=False)
    assert result.returncode == 0, f"{protocol} {args}: {result.stderr}"
    return result.stdout


def both(*args: str) -> tuple[str, str]:
    return mqctl("http", *args), mqctl("remoting", *args)


def test_admin_commands_answer_the_same_over_both_protocols(controllers: ControllerCluster,
                                                            group: list[BrokerNode]) -> None:  # noqa: F811
    a = controllers.addresses
    master, slave = group
    http, remoting = both("getControllerMetaData", "-a", a, "--format", "mqadmin")
    assert remoting == http
    http, remoting = both("getSyncStateSet", "-a", a, "-b", GROUP, "--format", "mqadmin")
    assert remoting == http and "#SyncStateSetNums\t2" in remoting
    http, remoting = both("getControllerConfig", "-a", a, "--format", "mqadmin")
    assert remoting == http

    # brokers found through our controllers acting as the name server, and asked over remoting
    epochs = mqctl("remoting", "getBrokerEpoch", "-n", a, "-b", GROUP, "--format", "mqadmin")
    assert f"#brokerAddr\t{master.address}\n#brokerId\t0\n#Epoch: EpochEntry{{epoch=1, startOffset=0" in epochs
    assert f"#brokerAddr\t{slave.address}\n" in epochs
    ha = mqctl("remoting", "haStatus", "-n", a, "-b", GROUP, "--format", "mqadmin")
    assert f"#MasterAddr\t{master.address}\n" in ha and "#SlaveNum\t1\n#InSyncSlaveNum\t1\n" in ha

    sent = json.loads(mqctl("remoting", "sendMessage", "--brokerAddr", master.address, "-t", "RemotingTopic",
                            "-p", "over remoting", "-k", "k1", "--tags", "t1", "--format", "json"))
    assert sent["status"] == "PUT_OK"
    read = json.loads(mqctl("remoting", "consumeMessage", "--brokerAddr", master.address, "-t", "RemotingTopic",
                            "--format", "json"))
    assert [(m["body"], m["keys"], m["tags"]) for m in read["messages"]] == [("over remoting", "k1", "t1")]

    # an admin election over remoting: the slave becomes master, as over HTTP
    elected = mqctl("remoting", "electMaster", "-a", a, "-c", CLUSTER, "-bn", GROUP, "-b", "2", "--format", "json")
    assert json.loads(elected)["masterAddress"] == slave.address
    wait_role(slave, "MASTER")


def _topics_of(address: str) -> set[str]:
    return set(_topic_configs_of(address))


def _topic_configs_of(address: str) -> dict[str, TopicConfig]:
    async def ask() -> RemotingCommand:
        client = RemotingClient(timeout_s=5.0)
        try:
            return await client.call(address, make_request(21, 0))
        finally:
            await client.close()
    answer = asyncio.run(ask())
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return dict(TopicConfigSerializeWrapper.decode(answer.body).topic_config_table)


def _routed(controller: str, topic: str) -> bool:
    async def ask() -> RemotingCommand:
        client = RemotingClient(timeout_s=5.0)
        try:
            return await client.call(controller, make_request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, 0, h.GetRouteInfoRequestHeader(topic=topic).to_ext_fields()))
        finally:
            await client.close()
    return asyncio.run(ask()).code == ResponseCode.SUCCESS


def test_update_topic_creates_it_on_every_replica_and_it_survives_a_restart(
        controllers: ControllerCluster, group: list[BrokerNode]) -> None:  # noqa: F811
    master, slave = group
    out = mqctl("auto", "updateTopic", "-t", "Created", "-c", CLUSTER, "-a", controllers.addresses,
                "--format", "mqadmin")
    assert out == (f"create topic to {master.address} success.\ncreate topic to {slave.address} success.\n"
                   "TopicConfig [topicName=Created, readQueueNums=4, writeQueueNums=4, perm=RW-, "
                   "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false, attributes={}]\n")
    assert "Created" in _topics_of(master.address) and "Created" in _topics_of(slave.address)
    # the brokers tell the name server (our controllers) at once: clients find a route before any message
    poll(lambda: all(_routed(c, "Created") for c in controllers.addresses.split(";")), 30, "a route for Created")

    slave.kill()
    slave.start()
    wait_role(slave, "SLAVE")
    assert "Created" in _topics_of(slave.address)

    env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")}
    made = subprocess.run([sys.executable, "-m", "mqctl", "updateTopic", "-t", "Other", "-b", master.address,
                           "-r", "8", "-w", "8", "-p", "6"], capture_output=True, text=True, timeout=60, env=env,
                          check=False)
    assert made.returncode == 0, made.stderr
    assert _topic_configs_of(master.address)["Other"] == TopicConfig("Other", 8, 8, 6)
    # the slave copies the master's config (SlaveSynchronize), queue counts and perm with it
    poll(lambda: _topic_configs_of(slave.address).get("Other") == TopicConfig("Other", 8, 8, 6), 30,
         "the slave's copy of Other")
