"""The controller's Raft port under attack, against real controller processes: pickles, huge lengths,
silent and half-sent connections, floods and random bytes; and the Raft password every controller now
has (generated for a lone node, shared through a file by local clusters, required for a group)."""

from __future__ import annotations

import os
import pickle
import random
import select
import signal
import socket
import stat
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from mqctl.cluster import RAFT_PASSWORD_FILE, ControllerCluster, DevCluster, free_port_pair
from services.common.controller_client import ControllerClient
from services.controller import contract
from services.controller.raft_transport import MAX_FRAME_BYTES
from tests.integration.conftest import FAST_SCANS, call, poll, run_cli

pytestmark = pytest.mark.component

FAST = ["-o", "raftElectionTimeoutMinMillis=300", "-o", "raftElectionTimeoutMaxMillis=600", "-o",
        "raftHeartbeatIntervalMillis=50", "-o", "raftLeaderFallbackTimeoutMillis=300"]


@dataclass
class Controller:
    """One controller process started from flags, its output in a file."""

    directory: Path
    port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def store(self) -> Path:
        return self.directory / "store"

    @property
    def raft_port(self) -> int:
        return self.port + 1

    def start(self, *args: str) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / "controller.out", "ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "services.controller", "--peers", f"n0-127.0.0.1:{self.port}",
                 "--self-id", "n0", "--store-path", str(self.store), *FAST, *args],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    def serving(self) -> bool:
        try:
            response = httpx.get(f"http://127.0.0.1:{self.port}/v1/controller/metadata", timeout=2)
            return bool(response.json()["data"]["isLeader"])
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            return False

    def output(self) -> str:
        logs = self.store / "logs" / "controller.log"
        text = (self.directory / "controller.out").read_text(errors="replace")
        return text + (logs.read_text(errors="replace") if logs.exists() else "")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[Controller]:
    """A single-node controller started with no Raft password configured (the default)."""
    c = Controller(tmp_path / "controller", free_port_pair())
    c.start()
    try:
        poll(c.serving, 30, "the controller to serve")
        yield c
    finally:
        c.kill()


class MakeDirectory:
    """Unpickling this creates a directory: harmless proof that a pickle was run."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return os.mkdir, (str(self.path),)


def closed_by_server(sock: socket.socket, timeout: float) -> bool:
    """True once the server closed ``sock`` (EOF or reset); False if still open at the deadline."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


def hung_up(sock: socket.socket) -> bool:
    """Without waiting: the server closed ``sock``."""
    if not select.select([sock], [], [], 0)[0]:
        return False
    try:
        return sock.recv(65536, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def test_a_pickle_sent_to_the_raft_port_of_a_controller_given_no_password_is_not_run(
        controller: Controller, tmp_path: Path) -> None:
    proof = tmp_path / "pickle-ran"
    payload = zlib.compress(pickle.dumps(MakeDirectory(proof)))
    with socket.create_connection(("127.0.0.1", controller.raft_port)) as sock:
        sock.sendall(struct.pack("i", len(payload)) + payload)
        assert closed_by_server(sock, 15), "the Raft port kept a connection that sent an unauthenticated pickle"
    assert not proof.exists(), "the Raft port ran a pickle from an unauthenticated connection"
    generated = controller.store / "raft.password"
    assert stat.S_IMODE(generated.stat().st_mode) == 0o600
    password = generated.read_text().strip()
    assert len(password) >= 40 and password not in controller.output()
    assert "password from generated file" in controller.output()
    assert controller.serving()


@pytest.mark.parametrize("length", [2 ** 31 - 1, 300 * 1024 * 1024, MAX_FRAME_BYTES - 1])
def test_a_huge_length_then_a_slow_stream_is_cut_off_while_the_leader_keeps_serving(
        controller: Controller, length: int) -> None:
    """The library buffered the whole declared length, copying the buffer on every read: 300 MiB kept
    a controller busy for ten minutes. A length a peer may send is still far more than a handshake."""
    chunk = bytes(range(256)) * 4
    with socket.create_connection(("127.0.0.1", controller.raft_port)) as sock:
        sock.sendall(struct.pack("i", length))
        deadline = time.monotonic() + 20
        while not hung_up(sock):
            assert time.monotonic() < deadline, "the Raft port still reads a stream it can never accept"
            try:
                sock.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
            assert controller.serving(), "leader reads fail while the Raft port is streamed to"
    assert controller.serving()


def test_silent_and_half_sent_connections_are_closed(controller: Controller) -> None:
    silent = socket.create_connection(("127.0.0.1", controller.raft_port))
    half = socket.create_connection(("127.0.0.1", controller.raft_port))
    half.sendall(b"\x40\x00")  # half of a frame length
    with silent, half:
        assert closed_by_server(silent, 20), "a connection that never said anything is still open"
        assert closed_by_server(half, 20), "a connection that stopped half-way through a length is still open"


def test_random_bytes_into_the_raft_port_never_reach_pickle_nor_stop_the_controller(
        controller: Controller, tmp_path: Path) -> None:
    rng = random.Random(19)
    for _ in range(150):
        with socket.create_connection(("127.0.0.1", controller.raft_port)) as sock:
            body = rng.randbytes(rng.randrange(0, 6000))
            if rng.random() < 0.5:  # a plausible length in front, sometimes the true one
                size = len(body) if rng.random() < 0.5 else rng.randrange(-2 ** 31, 2 ** 31)
                body = struct.pack("i", size) + body
            try:
                sock.sendall(body)
            except (BrokenPipeError, ConnectionResetError):
                continue
    assert controller.process is not None and controller.process.poll() is None
    assert controller.serving()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["controller"]


def test_a_group_with_no_password_refuses_to_start_and_says_how_to_fix_it(tmp_path: Path) -> None:
    peers = "n0-127.0.0.1:29878;n1-127.0.0.1:29868;n2-127.0.0.1:29858"
    started = run_cli("startController", "--peers", peers, "--self-id", "n0", "--store-path", str(tmp_path / "s"),
                      "-o", "listenAddress=0.0.0.0", timeout=30)
    assert started.returncode == 2, started.stdout + started.stderr
    assert started.stderr.startswith("Error: this controller group has 3 nodes and no Raft password: set "
                                     "controllerRaftPasswordFile"), started.stderr


def test_a_password_file_others_can_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "raft.password"
    path.write_text("s3cret-from-a-file\n")
    path.chmod(0o644)
    started = run_cli("startController", "--store-path", str(tmp_path / "s"), "-o",
                      f"controllerRaftPasswordFile={path}", timeout=30)
    assert started.returncode == 2
    assert f"run chmod 600 {path}" in started.stderr and "s3cret" not in started.stderr


def flood(port: int, rng: random.Random) -> list[socket.socket]:
    """Idle connections, a half-sent length, a huge length and random bytes, all left open."""
    socks = []
    for i in range(20):
        sock = socket.create_connection(("127.0.0.1", port))
        if i % 4 == 1:
            sock.sendall(b"\x7f")
        elif i % 4 == 2:
            sock.sendall(struct.pack("i", 2 ** 31 - 1) + rng.randbytes(1000))
        elif i % 4 == 3:
            sock.sendall(rng.randbytes(rng.randrange(1, 3000)))
        socks.append(sock)
    return socks


def applied_everywhere(cluster: ControllerCluster, index: int) -> bool:
    for node in cluster.nodes:
        if not node.alive():
            continue
        with ControllerClient([node.address], timeout=2.0) as c:
            raft = c.request_node(node.address, "GET", contract.METADATA).data["raft"]
        if (raft.get("lastApplied") or 0) < index:
            return False
    return True


def test_a_local_group_shares_a_generated_password_and_elects_and_replicates_under_a_flood(tmp_path: Path) -> None:
    cluster = ControllerCluster(tmp_path / "c", extra=dict(FAST_SCANS))
    cluster.configure()
    password_file = tmp_path / "c" / RAFT_PASSWORD_FILE
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
    assert all(f"controllerRaftPasswordFile={password_file.resolve()}" in n.conf_file.read_text()
               for n in cluster.nodes)
    rng = random.Random(8)
    held: list[socket.socket] = []
    cluster.start()
    try:
        first = cluster.leader(timeout=60)
        for node in cluster.nodes:
            held += flood(node.port + 1, rng)
        with cluster.client() as client:
            for broker_id in (1, 2):
                answer = call(client, "POST", contract.APPLY_BROKER_ID, json={
                    "clusterName": "c", "brokerName": "b", "appliedBrokerId": broker_id,
                    "registerCheckCode": f"127.0.0.1:{broker_id};1"})
                assert answer.code == 0, answer
            index = client.call_any("GET", contract.METADATA).data["raft"]["commitIndex"]
        poll(lambda: applied_everywhere(cluster, index), 30, "every controller to apply the writes")
        first.kill()
        second = cluster.leader(timeout=60)
        assert second is not first
        with cluster.client() as client:
            answer = call(client, "POST", contract.APPLY_BROKER_ID, json={
                "clusterName": "c", "brokerName": "b", "appliedBrokerId": 3, "registerCheckCode": "127.0.0.1:3;1"})
            assert answer.code == 0, answer
        password = password_file.read_text().strip()
        for node in cluster.nodes:
            log = node.conf_file.parent / "store" / "logs" / "controller.log"
            assert password not in log.read_text() + node.log_file.read_text()
        shown = run_cli("getControllerConfig", "-a", second.address, "--format", "json")
        assert shown.returncode == 0 and password not in shown.stdout and str(password_file.resolve()) in shown.stdout
    finally:
        for sock in held:
            sock.close()
        cluster.kill_all()


def test_cluster_up_gives_a_cluster_made_by_an_older_version_a_shared_password(tmp_path: Path) -> None:
    dev = DevCluster.create(tmp_path / "c", controllers=3, groups=1, replicas=1, base_port=free_port_pair())
    for node in dev.controllers():  # as written before every controller had a password
        conf = dev.conf_file(node)
        conf.write_text("".join(line for line in conf.read_text().splitlines(keepends=True)
                                if "controllerRaftPassword" not in line))
    (tmp_path / "c" / RAFT_PASSWORD_FILE).unlink()
    dev.ensure_raft_password()
    dev.ensure_raft_password()
    password_file = (tmp_path / "c" / RAFT_PASSWORD_FILE).resolve()
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
    for node in dev.controllers():
        assert dev.conf_file(node).read_text().count(f"controllerRaftPasswordFile={password_file}\n") == 1
