"""Slowloris on the remoting port (hardening item 5), against a real controller with a cap of 40 connections
and 1 s deadlines. Connections from a stranger's address that trickle a frame a byte at a time used to hold
the whole cap for ever (the idle timer restarted on every byte), so a new broker and an admin were refused.
Now a frame's head must arrive within httpHeaderTimeoutMillis and the frame within httpBodyTimeoutMillis,
strangers hold at most half the cap, and a known peer that finds the cap full closes the oldest idle
stranger instead of being refused."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from services.remoting.codec import FrameDecoder, encode
from services.remoting.command import RemotingCommand, RequestCode, make_request
from services.remoting.errors import RemotingProtocolError
from tests.integration.conftest import FAST_SCANS, poll, run_cli
from tests.integration.test_broker import FAST_BROKER, wait_role
from tests.support.strangers import STRANGER, Trickler, closed_by_server, open_from, raise_fd_limit

pytestmark = pytest.mark.component
CAP = 40
FAST_FRAMES = {"httpHeaderTimeoutMillis": 1000, "httpBodyTimeoutMillis": 1000}


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[ControllerCluster]:
    cluster = ControllerCluster(tmp_path / "c", size=1, extra={**FAST_SCANS, **FAST_FRAMES, "httpMaxConnections": CAP})
    cluster.configure()
    try:
        cluster.start()
        cluster.leader(timeout=60)
        yield cluster
    finally:
        cluster.kill_all()


def host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def metadata_on(sock: socket.socket, opaque: int) -> RemotingCommand | None:
    """Ask the controller's metadata (1005) on an open connection: its answer, or None if the connection was
    closed or answered something that is not a remoting frame (a refusal)."""
    sock.settimeout(5)
    try:
        sock.sendall(encode(make_request(RequestCode.CONTROLLER_GET_METADATA_INFO, opaque=opaque)))
        decoder = FrameDecoder()
        while chunk := sock.recv(65536):
            if answers := decoder.feed(chunk):
                return answers[0]
    except (OSError, RemotingProtocolError):
        return None
    return None


def test_trickled_frames_are_cut_and_a_new_broker_and_an_admin_get_in(controller: ControllerCluster,
                                                                      tmp_path: Path) -> None:
    raise_fd_limit()
    node = controller.nodes[0]
    attack = Trickler([host_port(node.address)], per_target=CAP + 20, pace_s=0.3).start()
    broker: BrokerNode | None = None
    try:
        poll(lambda: attack.opened >= CAP + 20, 15, "the trickling connections to open")
        broker = make_broker(tmp_path, "broker-a", 1, controller.addresses, **FAST_BROKER,
                             controllerProtocol="remoting")
        broker.start()
        wait_role(broker, "MASTER", timeout=30)
        admin = run_cli("--protocol", "remoting", "getControllerMetaData", "-a", node.address)
        assert admin.returncode == 0, admin.stderr
    finally:
        attack.stop()
        if broker is not None:
            broker.kill()
    assert attack.lifetimes and max(attack.lifetimes) < 4.0, sorted(attack.lifetimes)[-5:]
    log = (node.store_dir / "logs" / "controller.log").read_text()
    assert f"remoting connection from {STRANGER}:" in log
    assert "closed: frame header not received within 1 s" in log


def test_a_known_peer_displaces_the_oldest_idle_stranger(controller: ControllerCluster) -> None:
    host, port = host_port(controller.nodes[0].address)
    strangers = [open_from(host, port, STRANGER) for _ in range(CAP // 2)]
    known: list[socket.socket] = []
    try:
        assert all(metadata_on(sock, i) is not None for i, sock in enumerate(strangers))
        extra = open_from(host, port, STRANGER)
        assert metadata_on(extra, 99) is None  # the strangers' half of the cap is full
        extra.close()
        known += [open_from(host, port, "127.0.0.1") for _ in range(CAP // 2)]
        assert all(metadata_on(sock, i) is not None for i, sock in enumerate(known))
        newcomer = open_from(host, port, "127.0.0.1")  # the cap is full: the oldest idle stranger goes
        known.append(newcomer)
        assert metadata_on(newcomer, 100) is not None
        poll(lambda: closed_by_server(strangers[0]), 5, "the oldest stranger to be closed")
        assert metadata_on(strangers[1], 101) is not None
    finally:
        for sock in strangers + known:
            sock.close()
    log = (controller.nodes[0].store_dir / "logs" / "controller.log").read_text()
    assert "to make room for a known peer" in log
