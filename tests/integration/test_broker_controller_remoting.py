"""Brokers that talk to the controllers over RocketMQ's remoting protocol (``controllerProtocol=remoting``):
register (1012 → 1013 → 1003), heartbeat (oneway 904), alter the SyncStateSet and fail over, against three
controller processes; with an auth token, every request signed and an unsigned or replayed one refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from services.common.codes import ResponseCode
from services.remoting import headers as h
from services.remoting.acl import sign
from services.remoting.bodies import ClusterInfo
from services.remoting.command import RemotingCommand, RequestCode, make_request
from tests.integration.conftest import FAST_SCANS, poll
from tests.integration.test_broker import runtime, sync_state, wait_role
from tests.integration.test_replication import HA
from tests.support.remoting import ask

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

REMOTING = {**HA, "controllerProtocol": "remoting"}
TOPIC = "OverRemoting"


def mqctl(*args: str, token: str | None = None, code: int = 0) -> str:
    """mqctl's output (its error output when ``code`` is not 0), after checking its exit code."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")}
    if token:
        env["MQCTL_TOKEN"] = token
    result = subprocess.run([sys.executable, "-m", "mqctl", "--timeout", "10", *args], capture_output=True,
                            text=True, timeout=90, env=env, check=False)
    assert result.returncode == code, f"{args}: {result.stderr}"
    return result.stdout if code == 0 else result.stderr


@contextmanager
def pair(tmp_path: Path, addresses: str, **extra: object) -> Iterator[list[BrokerNode]]:
    nodes = [make_broker(tmp_path, "broker-a", i, addresses, **REMOTING, **extra) for i in (1, 2)]
    nodes[0].start()
    try:
        wait_role(nodes[0], "MASTER", timeout=60)
        nodes[1].start()
        yield nodes
    finally:
        for node in nodes:
            node.kill()


@pytest.fixture
def remoting_pair(tmp_path: Path, controllers: ControllerCluster) -> Iterator[list[BrokerNode]]:
    with pair(tmp_path, controllers.addresses) as nodes:
        yield nodes


def test_brokers_over_remoting_register_replicate_and_fail_over(controllers: ControllerCluster,
                                                                remoting_pair: list[BrokerNode]) -> None:
    master, slave = remoting_pair
    # the master's alter (1001, signed by its key) brings the slave into the SyncStateSet
    poll(lambda: len(sync_state(controllers, "broker-a")["inSyncReplicas"]) == 2, 60, "both replicas in sync")
    state = sync_state(controllers, "broker-a")
    assert state["masterAddress"] == master.address and state["syncStateSetEpoch"] >= 2
    mqctl("sendMessage", "-a", controllers.addresses, "-b", "broker-a", "-t", TOPIC, "-q", "0", "-p", "m",
          "--count", "20")
    assert runtime(master)["controllerProtocol"] == "remoting"
    assert runtime(master)["controllerLeader"] in controllers.addresses.split(";")

    master.kill()
    poll(lambda: sync_state(controllers, "broker-a")["masterAddress"] == slave.address, 30,
         "the slave to be elected master")
    info = wait_role(slave, "MASTER")
    assert info["masterEpoch"] == state["masterEpoch"] + 1
    out = json.loads(mqctl("consumeMessage", "-a", controllers.addresses, "-b", "broker-a", "-t", TOPIC, "-q", "0",
                           "-n", "100", "--format", "json"))
    assert [m["body"] for m in out["messages"]] == [f"m #{i}" for i in range(20)]  # every acknowledged message


def test_with_a_token_every_request_is_signed_and_unsigned_or_replayed_ones_are_refused(tmp_path: Path) -> None:
    token = "t0ken-for-remoting"
    cluster = ControllerCluster(tmp_path / "c", extra={**FAST_SCANS, "authToken": token,
                                                       "notifyBrokerRoleChanged": "true"})
    cluster.configure()
    cluster.start()
    try:
        leader = cluster.leader(timeout=60)
        with pair(tmp_path, cluster.addresses, authToken=token) as (master, slave):
            _signed_requests(cluster, leader.address, token, master, slave)
    finally:
        cluster.kill_all()


def _signed_requests(cluster: ControllerCluster, leader: str, token: str, master: BrokerNode,
                     slave: BrokerNode) -> None:
    poll(lambda: len(_sync_state(cluster, token)["inSyncReplicas"]) == 2, 60, "both in sync")
    # both brokers registered with the controllers as name servers (signed 103s)
    info = ClusterInfo.decode(ask(leader, make_request(RequestCode.GET_BROKER_CLUSTER_INFO, 0)).body)
    assert set(info.broker_addr_table["broker-a"].broker_addrs.values()) == {master.address, slave.address}

    elect = h.ElectMasterRequestHeader(cluster_name="DefaultCluster", broker_name="broker-a", broker_id=2,
                                       designate_elect=True).to_ext_fields()
    unsigned = ask(leader, make_request(RequestCode.CONTROLLER_ELECT_MASTER, 0, elect))
    assert unsigned.code == ResponseCode.NO_PERMISSION and "signed" in (unsigned.remark or "")
    forged = sign(make_request(RequestCode.CONTROLLER_ELECT_MASTER, 0, elect), "not-the-token", _now())
    assert ask(leader, forged).code == ResponseCode.NO_PERMISSION
    replica = h.GetReplicaInfoRequestHeader(broker_name="broker-a").to_ext_fields()
    other_code = sign(make_request(RequestCode.CONTROLLER_GET_REPLICA_INFO, 0, replica), token, _now())
    moved = RemotingCommand(code=RequestCode.CONTROLLER_ELECT_MASTER, ext_fields=other_code.ext_fields)
    assert ask(leader, moved).code == ResponseCode.NO_PERMISSION  # signed for another request code

    signed = sign(make_request(RequestCode.CONTROLLER_ELECT_MASTER, 0, elect), token, _now())
    first = ask(leader, signed)
    assert first.code == ResponseCode.SUCCESS, first.remark  # the administrator's election: broker 2
    again = ask(leader, signed)
    assert again.code == ResponseCode.NO_PERMISSION and "replay" in (again.remark or "")
    wait_role(slave, "MASTER")
    wait_role(master, "SLAVE")
    log = (slave.store_dir / "logs" / "broker.log").read_text()
    assert "ignored a role-change notification" not in log
    assert token not in log

    # mqctl over remoting signs with --token too: an administrator's election, a topic on a broker
    elect_back = ["--protocol", "remoting", "electMaster", "-a", cluster.addresses, "-c", "DefaultCluster",
                  "-bn", "broker-a", "-b", "1"]
    assert "NO_PERMISSION" in mqctl(*elect_back, code=4)
    mqctl(*elect_back, token=token)
    wait_role(master, "MASTER")
    topic = ["updateTopic", "-t", "Signed", "-b", master.address]
    assert "NO_PERMISSION" in mqctl(*topic, code=4)
    assert "Signed" in mqctl(*topic, token=token)


def _sync_state(cluster: ControllerCluster, token: str) -> dict:
    out = mqctl("getSyncStateSet", "-a", cluster.addresses, "-b", "broker-a", "--format", "json", token=token)
    return json.loads(out)["brokers"][0]


def _now() -> int:
    return time.time_ns() // 1_000_000
