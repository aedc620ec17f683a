"""The services' HTTP limits and secrets against real controller and broker processes (issue 19, items 9,
10, 12 and 13): slow clients are closed and the services keep answering, connections are capped far below
the file-descriptor limit (raised at start), oversized requests are refused before they are read, a
hostile heartbeat cannot hold the start-up grace open, and no token reaches a log at DEBUG."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import resource
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from services.broker import contract as bc
from services.common.codes import ResponseCode as RC
from services.controller import contract
from tests.integration.conftest import FAST_SCANS, FakeBrokerHeartbeats, call, poll, register_broker
from tests.integration.test_broker import FAST_BROKER, wait_role

pytestmark = pytest.mark.component

FAST_HTTP = {"httpHeaderTimeoutMillis": 1000, "httpBodyTimeoutMillis": 1000}


# ---------------------------------------------------------------------------------- helpers
@contextlib.contextmanager
def inherited_fd_limit(soft: int) -> Iterator[None]:
    """Processes started inside get ``soft`` as their open-file limit (this process gets it back)."""
    old_soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (old_soft, hard))


def open_file_limit(pid: int) -> int:
    line = next(x for x in Path(f"/proc/{pid}/limits").read_text().splitlines() if x.startswith("Max open files"))
    return int(line.split()[3])


@contextlib.contextmanager
def controller(tmp_path: Path, soft_fd_limit: int | None = None, **extra: Any) -> Iterator[ControllerCluster]:
    cluster = ControllerCluster(tmp_path / "c", size=1, extra={**FAST_SCANS, **extra})
    cluster.configure()
    with inherited_fd_limit(soft_fd_limit) if soft_fd_limit else contextlib.nullcontext():
        cluster.start()
    try:
        cluster.leader(timeout=60)
        yield cluster
    finally:
        cluster.kill_all()


def host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


class Collector(asyncio.Protocol):
    def __init__(self) -> None:
        self.data = b""
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.data += data

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


def slowloris(address: str, clients: int, probe_path: str) -> list[bytes]:
    """``clients`` connections each sending a request one byte every 0.2 s, while the service is asked
    ``probe_path`` over and over; returns what each slow connection got before the service closed it."""
    host, port = host_port(address)

    async def slow(index: int) -> bytes:
        transport, client = await asyncio.get_running_loop().create_connection(Collector, host, port)
        for byte in f"GET /healthz?slow={index} HTTP/1.1\r\nHost: localhost\r\nX-Pad: {'p' * 100}\r\n\r\n".encode():
            if transport.is_closing():
                break
            transport.write(bytes([byte]))
            await asyncio.sleep(0.2)
        await asyncio.wait_for(client.closed, 15)
        return client.data

    def probe() -> int:
        return int(httpx.get(f"http://{address}{probe_path}", timeout=5).json()["code"])

    async def attack() -> list[bytes]:
        tasks = [asyncio.create_task(slow(i)) for i in range(clients)]
        while not all(t.done() for t in tasks):
            assert await asyncio.to_thread(probe) == RC.SUCCESS
            await asyncio.sleep(0.2)
        return [t.result() for t in tasks]

    return asyncio.run(asyncio.wait_for(attack(), 60))


def raw_request(address: str, head: bytes, timeout: float = 15) -> tuple[int, dict[str, Any]]:
    with socket.create_connection(host_port(address)) as sock:
        sock.sendall(head)
        sock.settimeout(timeout)
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    status_line, _, body = raw.partition(b"\r\n\r\n")
    return int(status_line.split(b" ")[1]), json.loads(body)


# ---------------------------------------------------------------------------------- item 10
def test_controller_closes_slow_clients_caps_connections_and_raises_its_fd_limit(tmp_path: Path) -> None:
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] <= 1024:
        pytest.skip("the hard open-file limit leaves nothing to raise the soft one to")
    with controller(tmp_path, soft_fd_limit=512, httpMaxConnections=60, **FAST_HTTP) as cluster:
        node = cluster.nodes[0]
        assert node.process is not None
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        raised = open_file_limit(node.process.pid)
        assert raised == (65536 if hard == resource.RLIM_INFINITY else min(65536, hard)) and raised > 512
        # Slow clients: every one is answered 408 and closed, and the controller answers meanwhile.
        answers = slowloris(node.address, 40, contract.METADATA)
        assert all(a.startswith(b"HTTP/1.1 408 ") for a in answers), answers[:3]
        # The cap: 60 connections held open, the next ones refused at once; then service resumes.
        held = [socket.create_connection(host_port(node.address)) for _ in range(60)]
        try:
            for sock in held:
                sock.sendall(b"G")
            status, body = raw_request(node.address, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            assert status == 503 and body["codeName"] == "SYSTEM_BUSY" and "cap is 60" in body["remark"]
        finally:
            for sock in held:
                sock.close()
        poll(lambda: httpx.get(f"http://{node.address}/healthz", timeout=2).json()["code"] == RC.SUCCESS, 15,
             "the controller to accept connections again")
        log = (node.conf_file.parent / "store" / "logs" / "controller.log").read_text()
        assert "at most 60 connections" in log


def test_the_liveness_channel_and_the_broker_api_under_the_limits(tmp_path: Path) -> None:
    """A broker's websocket to the controller lives past every request deadline; the broker's own
    listener closes slow clients and refuses bodies over 2 x maxMessageSize + 1 MiB unread."""
    with controller(tmp_path, **FAST_HTTP) as cluster:
        broker = make_broker(tmp_path, "broker-a", 1, cluster.addresses, **FAST_BROKER, **FAST_HTTP,
                             maxMessageSize=64 * 1024)
        try:
            broker.start()
            wait_role(broker, "MASTER")
            check_broker_limits(broker)
            answers = slowloris(broker.address, 20, "/healthz")
            assert all(a.startswith(b"HTTP/1.1 408 ") for a in answers), answers[:3]
        finally:
            broker.kill()
        log = (cluster.nodes[0].conf_file.parent / "store" / "logs" / "controller.log").read_text()
        # Several deadlines passed while the broker ran: its channel was closed only by its SIGKILL.
        assert log.count("liveness channel of broker DefaultCluster/broker-a id 1 closed") <= 1


def check_broker_limits(broker: BrokerNode) -> None:
    limit = 2 * 64 * 1024 + 2**20
    route = bc.SEND_MESSAGES
    status, body = raw_request(broker.address, f"POST {route} HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                                                f"application/json\r\nContent-Length: {50 * 2**20}\r\n\r\n".encode())
    assert status == 413 and body["codeName"] == "INVALID_PARAMETER"
    assert f"over the limit of {limit} bytes for POST {route}" in body["remark"]

    def chunks() -> Iterator[bytes]:
        yield b'{"messages": ['
        for _ in range(10_000):
            yield b'{"topic": "T", "body": "' + b"x" * 1000 + b'"},'

    refused = httpx.post(f"http://{broker.address}{route}", content=chunks(), timeout=15)
    assert refused.status_code == 413, refused.text
    batch = {"messages": [{"topic": "T", "body": "m" * 50_000} for _ in range(15)]}
    accepted = httpx.post(f"http://{broker.address}{route}", json=batch, timeout=15).json()
    assert accepted["data"]["status"] == "PUT_OK", accepted


# ---------------------------------------------------------------------------------- items 9 and 12
def test_a_hostile_heartbeat_cannot_keep_a_dead_master_in_office(tmp_path: Path) -> None:
    """After a controller restart the recorded master (id 1) is dead. A heartbeat asking for a 10^18 ms
    timeout used to keep the start-up grace open for ever, so nobody replaced it; it is refused now and
    the live in-sync replica (id 2) is elected once the grace ends."""
    with controller(tmp_path, **FAST_HTTP) as cluster:
        addresses = [cluster.nodes[0].address]
        beats = FakeBrokerHeartbeats(addresses)
        with cluster.client() as client:
            for broker_id in (1, 2):
                assert register_broker(client, "DefaultCluster", "broker-a", f"127.0.0.1:{20910 + broker_id}") == \
                    broker_id
                beats.add("DefaultCluster", "broker-a", broker_id, f"127.0.0.1:{20910 + broker_id}", epoch=1)
            beats.beat_once()
            assert call(client, "POST", contract.ELECT_MASTER, json={
                "clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": 1}).code == RC.SUCCESS
            assert call(client, "POST", contract.ALTER_SYNC_STATE_SET, json={
                "brokerName": "broker-a", "masterBrokerId": 1, "masterEpoch": 1, "newSyncStateSet": [1, 2],
                "syncStateSetEpoch": 1}).code == RC.SUCCESS
        node = cluster.nodes[0]
        node.kill()
        node.start()
        cluster.leader(timeout=60)
        hostile = httpx.post(f"http://{node.address}/v1/controller/heartbeat", timeout=5, json={
            "clusterName": "x", "brokerName": "anything", "brokerAddr": "10.0.0.1:1", "brokerId": 1,
            "heartbeatTimeoutMills": 10**18}).json()
        assert hostile["code"] == RC.INVALID_PARAMETER and "heartbeatTimeoutMills" in hostile["remark"]
        beats.remove(1)
        beats.start()
        try:
            with cluster.client() as client:
                info = poll(lambda: (i := client.call("GET", contract.REPLICA_INFO,
                                                      params={"brokerName": "broker-a"}).data)
                            ["masterBrokerId"] == 2 and i, 30, "broker 2 to replace the dead master")
            assert info["masterEpoch"] == 2
        finally:
            beats.stop()


def test_oversized_requests_to_the_controller_are_refused_unread(tmp_path: Path) -> None:
    with controller(tmp_path) as cluster:
        address = cluster.nodes[0].address
        for _ in range(4):  # the attack: four 50 MiB bodies at once
            status, body = raw_request(address, b"POST /v1/controller/heartbeat HTTP/1.1\r\nHost: localhost\r\n"
                                                b"Content-Type: application/json\r\nContent-Length: 52428800\r\n\r\n")
            assert status == 413 and "over the limit of 65536 bytes" in body["remark"]
        huge_id = httpx.post(f"http://{address}/v1/controller/applyBrokerId", timeout=10, json={
            "clusterName": "c", "brokerName": "b", "appliedBrokerId": 1, "registerCheckCode": "127.0.0.1:1;1",
            "requestId": "r" * 60_000}).json()
        assert huge_id["code"] == RC.INVALID_PARAMETER and "requestId" in huge_id["remark"]
        ok = httpx.post(f"http://{address}/v1/controller/applyBrokerId", timeout=10, json={
            "clusterName": "c", "brokerName": "b", "appliedBrokerId": 1, "registerCheckCode": "127.0.0.1:1;1",
            "requestId": "apply-b-1"}).json()
        assert ok["code"] == RC.SUCCESS, ok


# ---------------------------------------------------------------------------------- item 13
def test_no_token_in_any_log_at_debug_both_ways(tmp_path: Path) -> None:
    """DEBUG turned on at runtime on the controller and from the start on the broker; the broker
    registers, heartbeats and holds its liveness channel with the token, and the controller notifies it
    of its election with the token. No log holds the token, and the DEBUG lines that carried the
    Authorization header are there, masked."""
    token = "tok-debug-3f9a1c77e2"
    with controller(tmp_path, authToken=token, notifyBrokerRoleChanged="true") as cluster:
        node = cluster.nodes[0]
        changed = httpx.post(f"http://{node.address}/v1/controller/config", json={"logLevel": "DEBUG"},
                             headers={"Authorization": f"Bearer {token}"}, timeout=10).json()
        assert changed["code"] == RC.SUCCESS, changed
        broker = make_broker(tmp_path, "broker-a", 1, cluster.addresses, **FAST_BROKER, authToken=token,
                             logLevel="DEBUG")
        try:
            broker.start()
            wait_role(broker, "MASTER")
            controller_log = node.conf_file.parent / "store" / "logs" / "controller.log"
            broker_log = broker.store_dir / "logs" / "broker.log"

            def both_ways_logged() -> bool:
                c, b = controller_log.read_text(), broker_log.read_text()
                header = re.compile(r"DEBUG .*Authorization: Bearer ", re.IGNORECASE)
                # The channel's upgrade request, as the broker sent it and as the controller received it;
                # the controller's only HTTP calls out are role-change notifications.
                return bool(header.search(c) and header.search(b)
                            and "[httpcore.http11] send_request_headers.complete" in c)
            poll(both_ways_logged, 20, "authenticated traffic both ways in the DEBUG logs")
        finally:
            broker.kill()
    logs = [*tmp_path.rglob("*.log"), *tmp_path.rglob("*.out")]
    text = {str(p): p.read_text(errors="replace") for p in logs}
    leaked = [p for p, t in text.items() if token in t]
    assert not leaked, f"the token is in {leaked}"
    everything = "\n".join(text.values())
    assert re.search(r"DEBUG .*Authorization: Bearer \*{6}", everything, re.IGNORECASE)


@pytest.mark.parametrize("service", ["services.controller", "services.broker"])
def test_a_non_ascii_auth_token_is_a_clear_config_error(tmp_path: Path, service: str) -> None:
    conf = tmp_path / "service.conf"
    store = tmp_path / "store"
    if service == "services.controller":
        conf.write_text(f"controllerDLegerPeers=n0-127.0.0.1:1\ncontrollerStorePath={store}\nauthToken=jeton-é\n",
                        encoding="utf-8")
    else:
        conf.write_text(f"storePathRootDir={store}\ncontrollerAddr=127.0.0.1:1\nauthToken=jeton-é\n",
                        encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", service, "-c", str(conf)], capture_output=True, text=True,
                          check=False, timeout=60, env={**os.environ, "MQCTL_DEBUG": ""})
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "authToken may hold only printable ASCII characters" in output and "Traceback" not in output
