"""A forged role-change notification cannot move a broker: the body is never trusted, the broker re-reads
its role from the controller leader.

Before, anyone who could reach a broker's HTTP port (no token is the default) could post
``notifyRoleChanged`` naming a fake master at a higher epoch: the master truncated its commitlog to the
fake master's view while the controller still listed it as master, and ``masterEpoch=2147483647`` poisoned
its epoch file so it stayed FENCED after a restart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from services.broker import contract as bc
from services.common.broker_client import BrokerClient
from services.controller import contract
from tests.integration.conftest import poll
from tests.integration.test_broker import FAST_BROKER, runtime, wait_role

pytestmark = pytest.mark.integration

SETTINGS = {**FAST_BROKER, "allAckInSyncStateSet": "true", "checkSyncStateSetPeriod": 500}




def forge(node: BrokerNode, **body: Any) -> None:
    with BrokerClient(5.0) as client:
        client.request(node.address, "POST", bc.NOTIFY_ROLE_CHANGED, json=body)


def epochs_of(node: BrokerNode) -> list[int]:
    with BrokerClient(5.0) as client:
        entries = client.request(node.address, "GET", bc.EPOCH_CACHE).data["epochEntries"]
    return [e["epoch"] for e in entries]


def test_forged_notifications_move_no_broker(controller: ControllerCluster, brokers: list[BrokerNode],
                                             tmp_path: Path) -> None:
    master = make_broker(tmp_path, "broker-a", 1, controller.addresses, **SETTINGS)
    slave = make_broker(tmp_path, "broker-a", 2, controller.addresses, **SETTINGS)
    brokers += [master, slave]
    master.start()
    wait_role(master, "MASTER")
    slave.start()
    wait_role(slave, "SLAVE")
    with BrokerClient(10.0) as client:
        for i in range(20):
            env = client.request(master.address, "POST", bc.SEND_MESSAGE,
                                 json={"topic": "T", "body": f"acked-{i}"})
            assert env.data["status"] == "PUT_OK"
    before_master, before_slave = runtime(master), runtime(slave)
    master_id, slave_id = before_master["brokerId"], before_slave["brokerId"]

    # The master is told it is the slave of a fake master at the highest epoch; the slave is told it is master.
    forge(master, masterBrokerId=99, masterAddress="127.0.0.1:1", masterEpoch=2**31 - 1,
          syncStateSetEpoch=2**31 - 1, syncStateSet=[99])
    forge(slave, masterBrokerId=slave_id, masterAddress=slave.address, masterEpoch=2**31 - 2,
          syncStateSetEpoch=5, syncStateSet=[slave_id])

    after_master, after_slave = runtime(master), runtime(slave)
    assert (after_master["role"], after_master["masterEpoch"]) == ("MASTER", before_master["masterEpoch"])
    assert (after_slave["role"], after_slave["masterBrokerId"]) == ("SLAVE", master_id)
    assert after_master["maxOffset"] == before_master["maxOffset"]
    assert max(epochs_of(master)) == before_master["masterEpoch"]
    assert max(epochs_of(slave)) == before_master["masterEpoch"]
    with BrokerClient(10.0) as client:
        env = client.request(master.address, "POST", bc.SEND_MESSAGE, json={"topic": "T", "body": "after"})
        assert env.data["status"] == "PUT_OK"

    # Restarted, the master is not fenced by a poisoned epoch file: it takes a role again.
    master.stop()
    master.start()
    poll(lambda: runtime(master)["role"] in ("MASTER", "SLAVE"), 30, "the restarted broker to take a role")
    assert max(epochs_of(master)) < 2**31 - 2


def test_a_forged_alter_cannot_put_a_lagging_replica_in_sync(controller: ControllerCluster,
                                                             brokers: list[BrokerNode], tmp_path: Path) -> None:
    """With no token, anyone may call alterSyncStateSet, and the epochs it must name are public. Had it
    worked, a replica that lacks acknowledged messages could be elected after the master's death. The
    controller takes an alter only when the master signed it; the master's own alters still commit."""
    from services.common.codes import ResponseCode
    from services.common.controller_client import ControllerClient

    master = make_broker(tmp_path, "broker-a", 1, controller.addresses, **SETTINGS)
    slave = make_broker(tmp_path, "broker-a", 2, controller.addresses, **SETTINGS)
    brokers += [master, slave]
    master.start()
    wait_role(master, "MASTER")
    slave.start()
    wait_role(slave, "SLAVE")
    master_id, slave_id = runtime(master)["brokerId"], runtime(slave)["brokerId"]
    poll(lambda: sorted(runtime(master)["syncStateSet"]) == sorted([master_id, slave_id]), 30,
         "the master's own (signed) expansion to commit")
    with ControllerClient(controller.addresses.split(";"), timeout=5.0) as client:
        info = client.call("GET", contract.REPLICA_INFO, params={"brokerName": "broker-a"}).data
        forged = client.call("POST", contract.ALTER_SYNC_STATE_SET, json={
            "brokerName": "broker-a", "masterBrokerId": master_id, "masterEpoch": info["masterEpoch"],
            "newSyncStateSet": [master_id], "syncStateSetEpoch": info["syncStateSetEpoch"]},
            accept=(ResponseCode.NO_PERMISSION,))
        assert forged.code == ResponseCode.NO_PERMISSION, forged
        after = client.call("GET", contract.REPLICA_INFO, params={"brokerName": "broker-a"}).data
    assert after["syncStateSetEpoch"] == info["syncStateSetEpoch"]
    assert sorted(after["syncStateSet"]) == sorted([master_id, slave_id])
