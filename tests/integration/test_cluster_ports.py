"""The ports a local cluster's nodes are given: no two nodes chosen before any of them started share one
(each choice probes the port with a socket bound on loopback, so these are component tests)."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest

from mqctl.cluster import ControllerCluster, make_broker, processes
from mqctl.cluster.processes import PORT_RANGE_ENV, free_port_pair, free_port_span

pytestmark = pytest.mark.component


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if no port had been handed out in this process yet."""
    monkeypatch.setattr(processes, "_HANDED_OUT", type(processes._HANDED_OUT)(maxlen=1024))


def eight_free_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    """Narrow the port range to eight free ports of this worker's own range (a fixed block of numbers
    may hold another worker's cluster)."""
    first = free_port_span(8)
    monkeypatch.setattr(processes, "_HANDED_OUT", type(processes._HANDED_OUT)(maxlen=1024))
    monkeypatch.setenv(PORT_RANGE_ENV, f"{first}-{first + 7}")


def peers_of(conf: Path) -> str:
    parser = configparser.ConfigParser(delimiters=("=",))
    parser.read_string("[c]\n" + conf.read_text(encoding="utf-8"))
    return parser["c"]["controllerDLegerPeers"]


@pytest.mark.parametrize("attempt", range(5))
def test_a_controller_cluster_never_gives_one_port_to_two_uses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               attempt: int) -> None:
    """Six ports out of eight: with each pair chosen on its own, a node's API port was often the Raft
    port of another (the third controller of a test then failed to bind)."""
    eight_free_ports(monkeypatch)
    cluster = ControllerCluster(tmp_path / "cluster")
    cluster.configure()
    peers = peers_of(tmp_path / "cluster" / "controller-n0" / "controller.conf")
    apis = [int(p.rsplit(":", 1)[1]) for p in peers.split(";")]
    ports = [port for api in apis for port in (api, api + 1)]  # API and Raft
    assert len(set(ports)) == 6, peers


def test_servers_chosen_one_after_the_other_get_different_ports(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    eight_free_ports(monkeypatch)
    first = make_broker(tmp_path, "broker-a", 1, "127.0.0.1:1")
    second = make_broker(tmp_path, "broker-a", 2, "127.0.0.1:1")
    third = free_port_pair()
    ports = [first.port, first.port + 1, second.port, second.port + 1, third, third + 1]
    assert len(set(ports)) == 6, ports
