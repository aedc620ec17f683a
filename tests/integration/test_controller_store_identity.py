"""A controller refuses to start on the Raft files of another controller group, and starts on its own.

Without the check, a node of group B pointed at group A's store loaded A's state, served A's broker groups
in its console and routes, and offered A's log to B's peers. Here real groups are started, a node of B is
stopped and pointed at a store of A: it must exit naming the mismatch, touching none of A's files, and start
again once pointed back at its own store. Two cases: groups that differ in their peers (the stamp's peer
set tells them apart), and a group configured exactly like A, on A's very ports (only the cluster id each
group made at its first start tells them apart, and the node learns B's from its peers).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mqctl.cluster import ControllerCluster, ControllerNode
from services.common.controller_client import ControllerClient
from services.common.props import format_properties, load_properties
from tests.integration.conftest import FAST_SCANS, poll, register_broker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@contextmanager
def running(*clusters: ControllerCluster) -> Iterator[None]:
    try:
        for cluster in clusters:
            cluster.start()
        for cluster in clusters:
            cluster.leader(timeout=60)
        yield
    finally:
        for cluster in clusters:
            cluster.kill_all()


def holding_a_broker_group(cluster: ControllerCluster, name: str) -> None:
    """A broker group registered, and applied on every node (so is everything committed before it)."""
    with cluster.client() as client:
        register_broker(client, "DefaultCluster", name, "127.0.0.1:10911")
    for node in cluster.nodes:
        poll(lambda node=node: _applied(node) >= 1, 30, f"{node.node_id} to apply the registration")


def _applied(node: ControllerNode) -> int:
    with ControllerClient([node.address], timeout=2) as client:
        return int(client.metadata(node.address).shown().get("appliedEvents") or 0)


def point_at(node: ControllerNode, store: Path) -> None:
    props = load_properties(node.conf_file)
    props["controllerStorePath"] = str(store)
    node.conf_file.write_text(format_properties(props), encoding="utf-8")


def refused(node: ControllerNode) -> str:
    """Start ``node``, which must exit with 2; its output."""
    node.start()
    poll(lambda: not node.alive(), 30, f"{node.node_id} to refuse to start (it is running)")
    assert node.process is not None and node.process.returncode == 2
    return node.log_file.read_text(encoding="utf-8")


def files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def starts_on_its_own_store(node: ControllerNode, cluster: ControllerCluster) -> None:
    point_at(node, node.store_dir)
    node.start()
    leader = cluster.leader(timeout=60)
    with ControllerClient([node.address], timeout=2) as client:
        poll(lambda: client.metadata(node.address).controllerLeaderId == leader.node_id, 30,
             f"{node.node_id} to follow its own group's leader again")
    assert node.alive()


def test_a_node_pointed_at_a_store_of_a_group_with_other_peers_refuses_to_start(tmp_path: Path) -> None:
    used: set[int] = set()
    a, b = (ControllerCluster(tmp_path / name, extra=dict(FAST_SCANS)) for name in ("a", "b"))
    a.configure(used)
    b.configure(used)
    with running(a, b):
        holding_a_broker_group(a, "group-of-a")
        donor, victim = a.node("n1"), b.node("n1")
        donor.stop()  # A's n1 store, no longer in use
        victim.stop()
        before = files(donor.store_dir / "raft")
        point_at(victim, donor.store_dir)
        out = refused(victim)
        assert "belongs to another controller group" in out and "peers" in out, out[-2000:]
        assert files(donor.store_dir / "raft") == before, "the refused node changed the other group's files"
        starts_on_its_own_store(victim, b)


def twin(cluster: ControllerCluster, data_dir: Path) -> ControllerCluster:
    """A group configured exactly like ``cluster`` (name, peers, ports, password) with stores of its own."""
    copy = ControllerCluster(data_dir, size=cluster.size, group=cluster.group, extra=dict(cluster.extra))
    for node in cluster.nodes:
        node_dir = data_dir / f"controller-{node.node_id}"
        node_dir.mkdir(parents=True)
        props = load_properties(node.conf_file)
        props["controllerStorePath"] = str(node_dir / "store")
        (node_dir / "controller.conf").write_text(format_properties(props), encoding="utf-8")
        copy.nodes.append(ControllerNode(node.node_id, node.port, node_dir / "controller.conf",
                                         node_dir / "controller.out"))
    return copy


def test_a_node_pointed_at_a_store_of_a_group_configured_alike_refuses_to_start(tmp_path: Path) -> None:
    a = ControllerCluster(tmp_path / "a", extra=dict(FAST_SCANS))
    a.configure()
    with running(a):
        holding_a_broker_group(a, "group-of-a")
        a.stop()
    b = twin(a, tmp_path / "b")
    with running(b):
        holding_a_broker_group(b, "group-of-b")
        donor, victim = a.node("n1"), b.node("n1")
        victim.stop()
        before = files(donor.store_dir / "raft")
        point_at(victim, donor.store_dir)
        out = refused(victim)
        assert "answers for controller cluster" in out, out[-2000:]
        assert files(donor.store_dir / "raft") == before, "the refused node changed the other group's files"
        starts_on_its_own_store(victim, b)
