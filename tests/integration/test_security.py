"""Authentication: Raft traffic needs the shared password; mutating calls need the auth token."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from mqctl.cluster import ControllerCluster, make_broker
from services.common.codes import ResponseCode as RC
from services.common.controller_client import ControllerClient
from services.controller import contract
from tests.integration.conftest import call, poll, run_cli
from tests.integration.test_broker import FAST_BROKER, wait_role

pytestmark = pytest.mark.integration


def test_wrong_raft_password_cannot_join(tmp_path: Path) -> None:
    cluster = ControllerCluster(tmp_path / "c", extra={"controllerRaftPassword": "right-secret",
                                                       "notifyBrokerRoleChanged": "false"})
    cluster.configure()
    intruder = cluster.nodes[2]
    intruder.conf_file.write_text(intruder.conf_file.read_text().replace("right-secret", "wrong-secret"))
    cluster.start()
    try:
        leader = cluster.leader(timeout=60)
        assert leader is not intruder
        with cluster.client() as client:
            client.addresses = [n.address for n in cluster.nodes[:2]]
            call(client, "POST", contract.APPLY_BROKER_ID, json={
                "clusterName": "c", "brokerName": "b", "appliedBrokerId": 1, "registerCheckCode": "x:1;1"})
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            with ControllerClient([intruder.address], timeout=1.0) as c:
                meta = c.request_node(intruder.address, "GET", contract.METADATA).data
            assert meta["controllerLeaderId"] in (None, intruder.node_id)
            assert meta["raft"]["commitIndex"] in (0, None) or meta["raft"]["lastApplied"] <= 2
            time.sleep(0.3)
        assert "wrong-secret" not in (cluster.nodes[0].conf_file.parent / "store" / "logs" /
                                      "controller.log").read_text()
    finally:
        cluster.kill_all()


def test_mutating_calls_need_the_token(tmp_path: Path) -> None:
    cluster = ControllerCluster(tmp_path / "c", extra={"authToken": "s3cret", "notifyBrokerRoleChanged": "true",
                                                       "scanNotActiveBrokerInterval": 300})
    cluster.configure()
    cluster.start()
    broker = make_broker(tmp_path, "broker-a", 1, "", **FAST_BROKER, authToken="s3cret")
    try:
        cluster.leader(timeout=60)
        broker.controller_addr = cluster.addresses
        broker.start()
        wait_role(broker, "MASTER")  # the broker authenticates its registration and heartbeats
        with cluster.client() as anonymous:
            refused = anonymous.request_node(cluster.leader().address, "POST", contract.ELECT_MASTER,
                                             json={"clusterName": "DefaultCluster", "brokerName": "broker-a",
                                                   "brokerId": 1, "designateElect": True})
            assert refused.code == RC.NO_PERMISSION
            reads = anonymous.call("GET", contract.SYNC_STATE_DATA, params={"brokerName": "broker-a"})
            assert reads.data["brokers"][0]["masterBrokerId"] == 1
        denied = run_cli("electMaster", "-a", cluster.addresses, "-c", "DefaultCluster", "-bn", "broker-a", "-b", "1")
        assert denied.returncode == 4 and "NO_PERMISSION" in denied.stderr
        allowed = run_cli("--token", "s3cret", "electMaster", "-a", cluster.addresses, "-c", "DefaultCluster",
                          "-bn", "broker-a", "-b", "1")
        assert allowed.returncode == 4 and "CONTROLLER_MASTER_STILL_EXIST" in allowed.stderr  # got past auth
        via_env = run_cli("updateControllerConfig", "-a", cluster.addresses, "-k", "notifyBrokerRoleChanged",
                          "-v", "true", env={"MQCTL_TOKEN": "s3cret"})
        assert via_env.returncode == 0, via_env.stderr
        shown = json.loads(run_cli("getControllerConfig", "-a", cluster.nodes[0].address, "--format", "json").stdout)
        assert shown["controllers"][0]["config"]["authToken"] == "******"
        for node in cluster.nodes:
            log = (node.conf_file.parent / "store" / "logs" / "controller.log").read_text()
            assert "s3cret" not in log
        poll(lambda: "s3cret" not in (broker.store_dir / "logs" / "broker.log").read_text(), 1, "no secret in logs")
    finally:
        broker.kill()
        cluster.kill_all()
