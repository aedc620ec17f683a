"""TLS on every link (docs/security.md): three controllers and a two-replica broker group started from a
``mqctl tls init --mutual`` CA, i.e. each node's .conf naming tls.config.file. Writes are acknowledged by
both replicas (the HA link in TLS), a failover goes through (the controllers' role notifications and the
brokers' calls in TLS), mqctl works over HTTP and over remoting with the CA and a client certificate, and
every plain-text or unauthenticated attempt is turned away with an error that says what to give."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mqctl.cluster import BrokerNode, ControllerCluster
from services.broker import contract as bc
from services.common import tls
from services.common.broker_client import BrokerClient
from services.controller import contract as c
from tests.integration.conftest import group_cluster, poll, run_cli
from tests.integration.test_broker import wait_role

pytestmark = pytest.mark.integration
GROUP = "broker-tls"


@dataclass
class World:
    ca: Path
    controllers: ControllerCluster
    brokers: list[BrokerNode]

    def flags(self, cert: bool = True) -> list[str]:
        client = ["--tls-cert", str(self.ca / "client.pem"), "--tls-key", str(self.ca / "client.key")]
        return ["--tls-ca", str(self.ca / "ca.pem"), *(client if cert else [])]

    def group(self) -> dict:
        """The group as the controllers see it, asked in TLS from this process."""
        with self.controllers.client() as client:
            groups = client.sync_state_data([GROUP]).brokers
        return groups[0].model_dump() if groups else {"masterAddress": None, "inSyncReplicas": []}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    ca = tmp_path / "tls"
    assert run_cli("tls", "init", str(ca), "--mutual").returncode == 0
    props = {"tls.config.file": str(ca / "tls.properties")}
    tls.use_client(tls.client_context(str(ca / "ca.pem"), str(ca / "client.pem"), str(ca / "client.key")), True)
    try:
        with group_cluster(tmp_path, GROUP, 2, props, allAckInSyncStateSet="true") as (controllers, brokers):
            yield World(ca, controllers, brokers)
    finally:
        tls.use_client(None)


def send(address: str, count: int, first: int = 0) -> None:
    with BrokerClient(5.0) as client:
        for i in range(first, first + count):
            env = client.request(address, "POST", bc.SEND_MESSAGE, json={"topic": "Secure", "body": f"m{i}"})
            assert env.data["status"] == "PUT_OK"


def plain_text_is_refused(address: str) -> None:
    """A plain-text client gets no answer: the port speaks TLS only (HTTP and remoting alike)."""
    host, _, port = address.rpartition(":")
    for hello in (b"GET /v1/controller/metadata HTTP/1.1\r\nHost: x\r\n\r\n", b"\x00\x00\x00\x10" + b"\x00" * 16):
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(hello)
            try:
                answer = sock.recv(4096)
            except ConnectionResetError:
                answer = b""
            assert b"HTTP/1.1 200" not in answer and b'"code"' not in answer


def test_every_link_in_tls_and_nothing_in_plain_text(world: World) -> None:
    group = poll(lambda: (g := world.group())["masterAddress"] and len(g["inSyncReplicas"]) == 2 and g, 90,
                 "a master and its slave in sync over TLS")
    master = group["masterAddress"]
    done = run_cli(*world.flags(), "getSyncStateSet", "-a", world.controllers.addresses, "-b", GROUP,
                   "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["brokers"][0]["masterAddress"] == master
    send(master, 20)  # allAckInSyncStateSet: each acknowledged only once the slave has it (HA link in TLS)

    # mqctl: over HTTP and over remoting, with the CA and a client certificate.
    done = run_cli(*world.flags(), "--protocol", "remoting", "getControllerMetaData", "-a",
                   world.controllers.nodes[0].address, "--format", "json")
    assert done.returncode == 0, done.stderr
    # Without the CA, without a client certificate, or with another CA: refused, and told what to give.
    done = run_cli("getSyncStateSet", "-a", world.controllers.addresses, "-b", GROUP)
    assert done.returncode == 3 and "--tls-ca" in done.stderr, done.stderr
    done = run_cli(*world.flags(cert=False), "getSyncStateSet", "-a", world.controllers.addresses, "-b", GROUP)
    assert done.returncode == 3 and "--tls-cert" in done.stderr, done.stderr
    other = world.ca.parent / "other-ca"
    assert run_cli("tls", "init", str(other)).returncode == 0
    done = run_cli("--tls-ca", str(other / "ca.pem"), "getSyncStateSet", "-a", world.controllers.addresses,
                   "-b", GROUP)
    assert done.returncode == 3 and "certificate was not accepted" in done.stderr, done.stderr
    for address in (world.controllers.nodes[0].address, master):
        plain_text_is_refused(address)
    if shutil.which("curl"):  # a TLS client nobody here wrote (curl and its TLS library) checks our servers
        ca = world.ca
        done = subprocess.run(["curl", "-sS", "--cacert", str(ca / "ca.pem"), "--cert", str(ca / "client.pem"),
                               "--key", str(ca / "client.key"),
                               f"https://{world.controllers.nodes[0].address}{c.METADATA}"],
                              capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == 0 and json.loads(done.stdout)["code"] == 0, done.stderr
        done = subprocess.run(["curl", "-sS", "--cacert", str(ca / "ca.pem"), f"https://{master}{bc.RUNTIME_INFO}"],
                              capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode != 0  # no client certificate: the handshake is refused
    ha = next(b for b in world.brokers if b.address == master).ha_port
    context = tls.client_context(str(world.ca / "ca.pem"))  # the HA port wants a client certificate too
    try:
        with socket.create_connection(("127.0.0.1", ha), timeout=5) as sock, \
                context.wrap_socket(sock, server_hostname="127.0.0.1") as secure:
            secure.sendall(b"\x00" * 64)
            answer = secure.recv(64)
    except (ssl.SSLError, OSError):
        answer = b""
    assert answer == b""

    # A failover in TLS: the slave takes over and has every acknowledged message.
    old = next(b for b in world.brokers if b.address == master)
    old.kill()
    group = poll(lambda: (g := world.group())["masterAddress"] not in (None, master) and g, 60,
                 "the slave to take over")
    wait_role(next(b for b in world.brokers if b.address == group["masterAddress"]), "MASTER")
    send(group["masterAddress"], 5, first=20)
    with BrokerClient(5.0) as client:
        bodies = []
        for qid in range(4):
            pulled = client.pull(group["masterAddress"], "Secure", qid, 0, 100)
            bodies += [m.body for m in pulled.messages]
    assert sorted(bodies, key=lambda b: int(b[1:])) == [f"m{i}" for i in range(25)]
