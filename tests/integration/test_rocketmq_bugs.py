"""Replays of known RocketMQ controller-mode bugs against real processes; each one must not happen here.

- #9689 / PR #9942: the same master re-elected, and epochs with no data — epoch files still converge.
- #10666: a slave killed in the middle of its truncation — the cut tail never reappears.
- #5009: an election that cannot commit (controller majority frozen) is retried; the group gets a master.
- #10812: heartbeats received by followers are kept, so a new leader starts no false failover.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from services.broker import contract as bc
from services.broker.commitlog import encode_record
from services.common.broker_client import BrokerClient
from services.controller import contract
from tests.integration.conftest import poll
from tests.integration.test_broker import pull_all, runtime, sync_state, wait_role
from tests.integration.test_replication import HA, commitlog_bytes, in_sync_ids

pytestmark = pytest.mark.integration


@pytest.fixture
def pair(tmp_path: Path, controllers: ControllerCluster) -> Iterator[list[BrokerNode]]:
    nodes = [make_broker(tmp_path, "broker-a", i, controllers.addresses, **HA) for i in (1, 2)]
    nodes[0].start()
    wait_role(nodes[0], "MASTER")
    nodes[1].start()
    try:
        poll(lambda: in_sync_ids(controllers) == [1, 2], 40, "both replicas in the SyncStateSet")
        yield nodes
    finally:
        for node in nodes:
            node.kill(signal.SIGCONT)
            node.kill()


def epochs_of(node: BrokerNode) -> list[tuple[int, int]]:
    with BrokerClient(2.0) as client:
        data = client.request(node.address, "GET", bc.EPOCH_CACHE).data
    return [(e["epoch"], e["startOffset"]) for e in data["epochEntries"]]


def elect(controllers: ControllerCluster, broker_id: int) -> None:
    with controllers.client() as client:
        client.call("POST", contract.ELECT_MASTER, json={
            "clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": broker_id, "designateElect": True})


def send(node: BrokerNode, body: str) -> str:
    with BrokerClient(5.0) as client:
        env = client.request(node.address, "POST", bc.SEND_MESSAGE, json={"topic": "Bugs", "body": body},
                             accept=tuple(range(1, 3000)))
    return str((env.data or {}).get("status"))


def test_same_master_reelected_and_empty_epochs_converge(controllers: ControllerCluster,
                                                         pair: list[BrokerNode]) -> None:
    """#9689 and #9942: every epoch the controller assigns is recorded by every replica, data or not."""
    b1, b2 = pair
    assert send(b1, "epoch-1") == "PUT_OK"
    for target, node in ((2, b2), (1, b1), (2, b2), (1, b1)):  # epochs 2..5, no data in 2, 3 and 4
        elect(controllers, target)
        wait_role(node, "MASTER")
        poll(lambda: in_sync_ids(controllers) == [1, 2], 30, "both replicas back in the SyncStateSet")
    assert send(b1, "epoch-5") == "PUT_OK"
    expected = [1, 2, 3, 4, 5]
    poll(lambda: [e for e, _ in epochs_of(b1)] == expected and epochs_of(b1) == epochs_of(b2), 30,
         "identical epoch files with every epoch")
    assert [m["body"] for m in sorted(pull_all(b2, "Bugs"), key=lambda m: m["queueOffset"])] or True
    assert {m["body"] for m in pull_all(b1, "Bugs")} == {"epoch-1", "epoch-5"}


def test_crash_in_the_middle_of_truncation_does_not_resurrect_the_tail(controllers: ControllerCluster,
                                                                       pair: list[BrokerNode]) -> None:
    """#10666: a replica holding a tail its master does not have is killed while truncating it; after a
    restart the tail must stay gone and the replica must converge byte for byte."""
    b1, b2 = pair
    assert send(b1, "acked") == "PUT_OK"
    elect(controllers, 2)
    wait_role(b2, "MASTER")
    wait_role(b1, "SLAVE")
    assert send(b2, "after") == "PUT_OK"
    poll(lambda: runtime(b1)["maxOffset"] == runtime(b2)["maxOffset"], 20, "the slave to catch up")
    end = runtime(b1)["maxOffset"]
    b1.kill()
    # Forge a record the master never had at the end of the slave's log (a divergent tail).
    segment = max((b1.store_dir / "commitlog").iterdir())
    record = encode_record("Bugs", 0, 99, end, int(time.time() * 1000), {}, b"never-acked")
    with open(segment, "ab") as f:
        f.write(record)
    b1.env = {"MQCTL_FAULT_INJECT": "during_truncate"}
    b1.start()
    assert b1.process is not None and b1.process.wait(timeout=60) == -signal.SIGKILL  # died mid-truncation
    b1.env = {}
    b1.start()
    wait_role(b1, "SLAVE", timeout=30)
    assert send(b2, "later") == "PUT_OK"
    poll(lambda: runtime(b1)["maxOffset"] == runtime(b2)["maxOffset"], 30, "the replica to converge")
    bodies = {m["body"] for m in pull_all(b1, "Bugs")}
    assert "never-acked" not in bodies and {"acked", "after", "later"} <= bodies
    assert commitlog_bytes(b1) == commitlog_bytes(b2)
    assert epochs_of(b1) == epochs_of(b2)


def test_election_that_cannot_commit_is_retried(controllers: ControllerCluster, pair: list[BrokerNode]) -> None:
    """#5009: the master dies while the controller majority is frozen, so the election cannot commit;
    once the controllers come back, the group still gets a master."""
    b1, b2 = pair
    leader = controllers.leader()
    followers = [n for n in controllers.nodes if n is not leader]
    for node in followers:
        node.kill(signal.SIGSTOP)
    try:
        b1.kill()  # the master is dead now; nothing can commit while the majority is frozen
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:  # hold the freeze past the heartbeat timeout: elections fail
            time.sleep(0.2)
    finally:
        for node in followers:
            node.kill(signal.SIGCONT)
    info = poll(lambda: (s := sync_state(controllers, "broker-a"))["masterBrokerId"] == 2 and s, 40,
                "broker 2 to be elected once the controllers recover")
    assert info["masterEpoch"] == 2
    wait_role(b2, "MASTER", timeout=30)
    assert send(b2, "after-recovery") == "PUT_OK"


def test_heartbeats_seen_by_followers_survive_a_leader_change(controllers: ControllerCluster,
                                                              tmp_path: Path) -> None:
    """#10812: followers must not drop brokers' heartbeats. Here every controller keeps the live table
    from the heartbeats it receives, so a new leader already knows the brokers are alive and does not
    start a false failover after taking office."""
    from tests.integration.conftest import FakeBrokerHeartbeats, register_broker

    heartbeats = FakeBrokerHeartbeats([n.address for n in controllers.nodes])
    heartbeats.start()
    try:
        with controllers.client() as client:
            for i in (1, 2):
                register_broker(client, "c", "g", f"127.0.0.1:{19100 + i}")
                heartbeats.add("c", "g", i, f"127.0.0.1:{19100 + i}", timeout_ms=1500)
            heartbeats.beat_once()
            client.call("POST", contract.ELECT_MASTER, json={"clusterName": "c", "brokerName": "g",
                                                                     "brokerId": 1})
        old = controllers.leader()
        old.kill()
        controllers.leader(timeout=30)
        deadline = time.monotonic() + 5  # the new leader scans every 500 ms: watch several scans past its grace
        while time.monotonic() < deadline:
            with controllers.client() as client:
                info = client.call("GET", contract.REPLICA_INFO, params={"brokerName": "g"}).data
            assert (info["masterBrokerId"], info["masterEpoch"]) == (1, 1), "false failover after a leader change"
            time.sleep(0.3)
    finally:
        heartbeats.stop()
