"""mqctl over RocketMQ's remoting protocol against our own servers (``--protocol remoting``): the admin
commands give the answers they give over HTTP, so an operator sees the same cluster whichever way the
bytes travel; and ``-n`` finds brokers through our controllers acting as the name server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqctl.localcluster import BrokerNode, ControllerCluster, make_broker
from tests.integration.test_broker import wait_role
from tests.integration.test_replication import HA

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

GROUP, CLUSTER = "broker-a", "DefaultCluster"


@pytest.fixture
def group(tmp_path: Path, controllers: ControllerCluster) -> Iterator[list[BrokerNode]]:
    nodes = [make_broker(tmp_path, GROUP, i, controllers.addresses, **HA) for i in (1, 2)]
    try:
        nodes[0].start()
        wait_role(nodes[0], "MASTER")
        nodes[1].start()
        wait_role(nodes[1], "SLAVE")
        yield nodes
    finally:
        for node in nodes:
            node.kill()


def mqctl(protocol: str, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")}
    result = subprocess.run([sys.executable, "-m", "mqctl", "--protocol", protocol, "--timeout", "10", *args],
                            capture_output=True, text=True, timeout=90, env=env, check=False)
    assert result.returncode == 0, f"{protocol} {args}: {result.stderr}"
    return result.stdout


def both(*args: str) -> tuple[str, str]:
    return mqctl("http", *args), mqctl("remoting", *args)


def test_admin_commands_answer_the_same_over_both_protocols(controllers: ControllerCluster,
                                                            group: list[BrokerNode]) -> None:
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
