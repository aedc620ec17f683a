"""Controllers whose Raft journal's filesystem fills up (a tmpfs the test mounts over each store and fills to
the last byte): the node refuses writes at once with CONTROLLER_NOT_LEADER naming the journal and the disk,
never acknowledges a write it does not hold on disk, sits out of Raft (a leader's group elects another and
carries on), and resumes by itself once space is freed; after a restart every acknowledged write is there.

Before the journal handled failed writes, a full disk left the node half way through pysyncobj's steps on
every tick: writes hung until their timeout and were answered as a lost majority, a leader kept its office
(heartbeats still left) so its group could write nothing, and a short write was kept as if whole."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mqctl.cluster import ControllerCluster, ControllerNode
from services.common.errors import MqctlError
from services.controller import contract
from tests.integration.conftest import FAST_SCANS, poll, register_broker
from tests.support.diskfull import fill, free, small_filesystem

pytestmark = pytest.mark.integration

STORE_BYTES = 4 * 2**20
CLUSTER = "DiskCluster"
_ports = itertools.count(21000)


@contextlib.contextmanager
def controllers_on_small_disks(root: Path, size: int) -> Iterator[ControllerCluster]:
    """``size`` controllers, each with its store on a tmpfs of its own; all stopped before the unmount."""
    cluster = ControllerCluster(root / "cluster", size=size, extra=dict(FAST_SCANS))
    cluster.configure()
    with contextlib.ExitStack() as disks:
        for node in cluster.nodes:
            disks.enter_context(small_filesystem(node.store_dir, STORE_BYTES))
        cluster.start()
        try:
            cluster.leader(timeout=60)
            yield cluster
        finally:
            cluster.kill_all()


def write(cluster: ControllerCluster, acked: list[str], prefix: str, count: int = 1, timeout: float = 5.0) -> None:
    """Register ``count`` new groups (three writes each, as a starting broker makes); each one the controllers
    acknowledged whole goes to ``acked``. A refusal raises (MqctlError)."""
    with cluster.client(timeout=timeout) as client:
        for _ in range(count):
            name = f"{prefix}-{next(_ports)}"
            register_broker(client, CLUSTER, name, f"127.0.0.1:{next(_ports)}")
            acked.append(name)


def try_write(cluster: ControllerCluster, acked: list[str], prefix: str) -> bool:
    try:
        write(cluster, acked, prefix, timeout=2.0)
    except MqctlError:
        return False
    return True


def direct(node: ControllerNode, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """One node's own answer (no leader following), as JSON."""
    method = "POST" if body is not None else "GET"
    response = httpx.request(method, f"http://{node.address}{path}", json=body, timeout=3.0)
    answer: dict[str, Any] = response.json()
    return answer


def sitting_out(node: ControllerNode) -> dict[str, Any] | None:
    """The node's answer to a write while its journal cannot be written, or None while it answers otherwise (or
    not within 3 s)."""
    try:
        answer = direct(node, contract.APPLY_BROKER_ID, {"clusterName": CLUSTER, "brokerName": "probe-while-full",
                                                         "appliedBrokerId": 1, "registerCheckCode": "127.0.0.1:1;1"})
    except httpx.TimeoutException:
        return None
    return answer if "No space left on device" in str(answer.get("remark")) else None


def write_then_ask(cluster: ControllerCluster, acked: list[str], node: ControllerNode) -> dict[str, Any] | None:
    try_write(cluster, acked, "filling")
    return sitting_out(node)


def raft_status(node: ControllerNode) -> dict[str, Any]:
    raft: dict[str, Any] = direct(node, contract.METADATA)["data"]["raft"]
    return raft


def known(cluster: ControllerCluster, names: list[str]) -> set[str]:
    with cluster.client(timeout=10.0) as client:
        return {b.brokerName for b in client.sync_state_data(names).brokers}


def test_a_single_controller_refuses_writes_on_a_full_disk_and_resumes_with_every_acknowledged_one(
        tmp_path: Path) -> None:
    with controllers_on_small_disks(tmp_path, 1) as cluster:
        node = cluster.nodes[0]
        acked: list[str] = []
        write(cluster, acked, "before", 10)
        filler = fill(node.store_dir)
        # Writes may still land in the last page the journal has; then the node sits out and says why.
        refusal = poll(lambda: write_then_ask(cluster, acked, node), 60, "the controller to refuse writes for its "
                                                                         "full disk")
        assert refusal["code"] == 2007 and refusal["codeName"] == "CONTROLLER_NOT_LEADER", refusal
        assert "cannot write the Raft journal file" in refusal["remark"] and "raft.journal" in refusal["remark"]
        assert refusal["data"]["controllerLeaderAddress"] is None  # it names no stale leader
        assert "No space left on device" in str(raft_status(node)["journalError"])
        with pytest.raises(MqctlError, match="No space left on device"):  # what mqctl and brokers are told
            write(cluster, acked, "refused", timeout=2.0)
        assert node.alive()

        free(filler)
        poll(lambda: try_write(cluster, acked, "after"), 30, "writes to resume once space is freed")
        assert raft_status(node)["journalError"] is None
        cluster.kill_all()
        cluster.start()  # the journal check at start finds nothing torn or lost
        cluster.leader(timeout=60)
        assert set(acked) <= known(cluster, acked)


def test_a_leader_whose_disk_fills_sits_out_while_the_others_carry_on_and_it_catches_up_later(
        tmp_path: Path) -> None:
    with controllers_on_small_disks(tmp_path, 3) as cluster:
        full = cluster.leader(timeout=30)
        acked: list[str] = []
        write(cluster, acked, "before", 10)
        filler = fill(full.store_dir)
        # The other two elect one of themselves and acknowledge writes again.
        poll(lambda: try_write(cluster, acked, "during") and cluster.leader(timeout=5) is not full, 60,
             "another controller to lead and acknowledge writes")
        write(cluster, acked, "during", 10)
        assert sitting_out(full)
        assert full.alive() and raft_status(full)["journalError"]

        free(filler)
        leader = cluster.leader(timeout=30)
        poll(lambda: raft_status(full)["journalError"] is None
             and raft_status(full)["lastApplied"] >= raft_status(leader)["commitIndex"], 60,
             "the node to write its journal again and catch up with the leader")
        write(cluster, acked, "after", 3)
        cluster.kill_all()
        cluster.start()
        cluster.leader(timeout=60)
        assert set(acked) <= known(cluster, acked)
