"""The broker's HA (replication) port only serves peers that prove who they are (RocketMQ issue #3015: a
master that counts acks from any connection can confirm writes no replica holds).

A real master (a real single-node controller behind it) needs two acks per write (inSyncReplicas=2) and
has no slave. While a write waits for its second ack, raw sockets send the master:

(a) an ack frame with no handshake; (b) a handshake with an unregistered broker id, then a hello;
(c) a handshake with the master's own id, then an ack; (d) garbage (random bytes, an HTTP request, an
unknown frame state, a malformed handshake); (e) a handshake and hello dripped one byte at a time, so the
connection is never idle but never proves anything.

Each connection must be closed by the master, the waiting write must still time out
(FLUSH_SLAVE_TIMEOUT, not PUT_OK), and the master's haStatus must list no slave. Afterwards a real slave
still replicates and a write is acknowledged.

Then the attack of a peer that claims the id of a real, registered slave (ids are public): while the real
slave is paused, the impostor gets the master's challenge but cannot answer it, so its acks never count,
the real slave's connection is not replaced, and no write is acknowledged that the real slave lacks.

Last, with ``rocketmqHaPeers=true`` (RocketMQ's own brokers allowed, whose protocol has no proof): a
handshake with no hello is refused for a stranger's id and for a real mqctl slave's id alike.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from services.broker import contract as bc
from services.broker.ha.frames import (
    SLAVE_ACK,
    SLAVE_HANDSHAKE,
    TRANSFER,
    MasterChallenge,
    MasterFrameReader,
    SlaveAck,
    SlaveHandshake,
    SlaveHello,
    SlaveProof,
)
from services.common.broker_client import BrokerClient
from services.common.codes import ResponseCode as RC
from tests.integration.conftest import poll
from tests.integration.test_broker import FAST_BROKER, runtime, wait_role

pytestmark = pytest.mark.integration

HA = {
    **FAST_BROKER,
    "inSyncReplicas": 2,
    "totalReplicas": 2,
    "slaveTimeout": 4000,
    "haHousekeepingInterval": 3000,
    "haSendHeartbeatInterval": 300,
    "checkSyncStateSetPeriod": 500,
}




def ha_status(node: BrokerNode) -> dict[str, Any]:
    with BrokerClient(3.0) as client:
        return dict(client.request(node.address, "GET", bc.HA_STATUS).data)


def closed_by_peer(sock: socket.socket, timeout: float = 4.0) -> bool:
    """True once the master closes the connection (EOF or reset); False if it is still open at the end.
    Anything the master sends before closing (it must not send a handshake) is returned in the error."""
    sock.settimeout(0.2)
    deadline = time.monotonic() + timeout
    received = b""
    while time.monotonic() < deadline:
        try:
            data = sock.recv(4096)
        except TimeoutError:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return True
        if not data:
            assert not received, f"the master answered an invalid peer with {received[:40]!r}"
            return True
        received += data
    return False


def attack(port: int, payload: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=3)
    sock.sendall(payload)
    return sock


def test_ha_port_drops_peers_without_a_valid_handshake(
    controller: ControllerCluster, brokers: list[BrokerNode], tmp_path: Path
) -> None:
    master = make_broker(tmp_path, "broker-a", 1, controller.addresses, **HA)
    brokers.append(master)
    master.start()
    info = wait_role(master, "MASTER")
    master_id = info["brokerId"]
    before = ha_status(master)
    assert before["slaves"] == []

    # A write that needs a second ack; it waits slaveTimeout (4 s) while the attacks run.
    outcome: dict[str, Any] = {}

    def put() -> None:
        with BrokerClient(10.0) as c:
            outcome["env"] = c.request(
                master.address,
                "POST",
                bc.SEND_MESSAGE,
                json={"topic": "T", "body": "needs-two-acks"},
                accept=(RC.FLUSH_SLAVE_TIMEOUT,),
            )

    writer = threading.Thread(target=put)
    writer.start()
    poll(lambda: ha_status(master)["maxOffset"] > 0, 5, "the write to be appended")
    big = 2**40  # an ack "for everything" (beyond the end is refused as well)
    end = ha_status(master)["maxOffset"]
    attacks = {
        "ack without handshake": SlaveAck(end).encode() + SlaveAck(big).encode(),
        "unregistered broker id": SlaveHandshake(99).encode() + SlaveHello(os.urandom(32)).encode(),
        "the master's own id": SlaveHandshake(master_id).encode() + SlaveAck(end).encode(),
        "random bytes": os.urandom(64),
        "an HTTP request": b"GET /v1/broker/haStatus HTTP/1.1\r\nHost: x\r\n\r\n",
        "unknown frame state": struct.pack(">iq", 7, end),
        "malformed handshake": SLAVE_HANDSHAKE.pack(1, 5, 9, 2) + SLAVE_ACK.pack(TRANSFER, end),
        "negative ack": SLAVE_ACK.pack(TRANSFER, -1),
    }
    sockets = {name: attack(master.ha_port, payload) for name, payload in attacks.items()}
    drip = attack(master.ha_port, b"")
    stop_drip = threading.Event()

    def dripping() -> None:
        for byte in SlaveHandshake(99).encode() + SlaveHello(os.urandom(32)).encode():
            if stop_drip.wait(0.25):
                return
            try:
                drip.sendall(bytes([byte]))
            except OSError:
                return

    dripper = threading.Thread(target=dripping)
    dripper.start()
    # All must be closed well before haHousekeepingInterval (3 s) would close an idle connection anyway,
    # except the silent one, which has AUTH_TIMEOUT_MS (5 s) to prove itself.
    deadline = time.monotonic() + 7.0
    try:
        still_open = [
            name
            for name, sock in sockets.items()
            if not closed_by_peer(sock, max(0.05, deadline - time.monotonic()))
        ]
        if not closed_by_peer(drip, max(0.05, deadline - time.monotonic())):
            still_open.append("a handshake dripped one byte at a time")
    finally:
        stop_drip.set()
        dripper.join(timeout=5)
        for sock in [*sockets.values(), drip]:
            sock.close()
    writer.join(timeout=15)
    assert not still_open, f"the master kept these connections open: {still_open}"
    assert outcome["env"].code == RC.FLUSH_SLAVE_TIMEOUT, (
        f"a write was acknowledged with no replica holding it: {outcome['env']}"
    )
    after = ha_status(master)
    assert after["slaves"] == [], f"an invalid peer is listed as a slave: {after['slaves']}"
    assert after["role"] == "MASTER" and after["masterEpoch"] == before["masterEpoch"]
    log = (master.store_dir / "logs" / "broker.log").read_text()
    for reason in (
        "ack before the slave proved its identity",
        "did not prove its identity within",
        "broker id 99 is not registered",
        "cannot replicate from itself",
        "unexpected slave frame state",
        "malformed slave handshake",
    ):
        assert reason in log, f"no connection was closed for {reason!r}"

    # The port still serves a real slave, whose acks count.
    slave = make_broker(tmp_path, "broker-a", 2, controller.addresses, **HA)
    brokers.append(slave)
    slave.start()
    wait_role(slave, "SLAVE")
    poll(
        lambda: [s["slaveId"] for s in ha_status(master)["slaves"]] == [runtime(slave)["brokerId"]],
        30,
        "the real slave to connect",
    )
    with BrokerClient(10.0) as client:
        env = client.request(
            master.address, "POST", bc.SEND_MESSAGE, json={"topic": "T", "body": "ok"}
        )
    assert env.data["status"] == "PUT_OK"
    poll(lambda: runtime(slave)["maxOffset"] == runtime(master)["maxOffset"], 15, "the slave to catch up")


def read_challenge(sock: socket.socket) -> MasterChallenge:
    reader, deadline = MasterFrameReader(), time.monotonic() + 5
    while time.monotonic() < deadline:
        frames = reader.feed(sock.recv(4096))
        if frames:
            assert isinstance(frames[0], MasterChallenge), frames
            return frames[0]
    raise AssertionError("the master sent no challenge")


def test_a_peer_claiming_a_registered_slave_id_cannot_ack(
    controller: ControllerCluster, brokers: list[BrokerNode], tmp_path: Path
) -> None:
    settings = {**HA, "allAckInSyncStateSet": "true", "haHousekeepingInterval": 20000}
    master = make_broker(tmp_path, "broker-a", 1, controller.addresses, **settings)
    slave = make_broker(tmp_path, "broker-a", 2, controller.addresses, **settings)
    brokers += [master, slave]
    master.start()
    wait_role(master, "MASTER")
    slave.start()
    wait_role(slave, "SLAVE")
    slave_id = runtime(slave)["brokerId"]
    poll(lambda: ha_status(master)["syncStateSet"] == sorted([runtime(master)["brokerId"], slave_id]), 30,
         "the slave to join the SyncStateSet")
    real_peer = ha_status(master)["slaves"][0]["slaveAddress"]
    assert slave.process is not None
    os.kill(slave.process.pid, signal.SIGSTOP)  # the real slave holds no new data from here on
    try:
        outcome: dict[str, Any] = {}

        def put() -> None:
            with BrokerClient(10.0) as c:
                outcome["env"] = c.request(master.address, "POST", bc.SEND_MESSAGE,
                                           json={"topic": "T", "body": "only-the-master-has-it"},
                                           accept=(RC.FLUSH_SLAVE_TIMEOUT,))

        before = ha_status(master)["maxOffset"]
        writer = threading.Thread(target=put)
        writer.start()
        poll(lambda: ha_status(master)["maxOffset"] > before, 5, "the write to be appended")
        end = ha_status(master)["maxOffset"]
        impostor = attack(master.ha_port, SlaveHandshake(slave_id).encode() + SlaveHello(os.urandom(32)).encode())
        try:
            challenge = read_challenge(impostor)
            assert challenge.master_id == runtime(master)["brokerId"]
            impostor.sendall(SlaveProof(os.urandom(64)).encode() + SlaveAck(end).encode())
            assert closed_by_peer(impostor), "the master kept the impostor's connection open"
        finally:
            impostor.close()
        writer.join(timeout=15)
        assert outcome["env"].code == RC.FLUSH_SLAVE_TIMEOUT, (
            f"a write the real slave does not hold was acknowledged: {outcome['env']}")
        slaves = ha_status(master)["slaves"]
        assert [(s["slaveId"], s["slaveAddress"]) for s in slaves] == [(slave_id, real_peer)], slaves
    finally:
        os.kill(slave.process.pid, signal.SIGCONT)
    log = (master.store_dir / "logs" / "broker.log").read_text()
    assert f"failed to prove it is broker {slave_id}" in log


def test_with_rocketmq_peers_allowed_no_id_of_an_mqctl_broker_is_served_without_proof(
    controller: ControllerCluster, brokers: list[BrokerNode], tmp_path: Path
) -> None:
    """``rocketmqHaPeers=true`` serves a handshake with no hello only for an id the controller holds no key
    for (RocketMQ's broker): a stranger's id and a real mqctl slave's id, claimed without proof from the
    right address, are closed with nothing sent; the real slave still proves itself and replicates."""
    props = {**HA, "rocketmqHaPeers": "true"}
    master = make_broker(tmp_path, "broker-a", 1, controller.addresses, **props)
    slave = make_broker(tmp_path, "broker-a", 2, controller.addresses, **props)
    brokers.extend([master, slave])
    master.start()
    wait_role(master, "MASTER")
    slave.start()
    wait_role(slave, "SLAVE")
    slave_id = runtime(slave)["brokerId"]
    poll(lambda: [s["slaveId"] for s in ha_status(master)["slaves"]] == [slave_id], 30, "the real slave to connect")
    claims = {"an unregistered id": attack(master.ha_port, SlaveHandshake(99).encode()),
              "the real slave's id": attack(master.ha_port, SlaveHandshake(slave_id).encode())}
    try:
        still_open = [name for name, sock in claims.items() if not closed_by_peer(sock, 4.0)]
    finally:
        for sock in claims.values():
            sock.close()
    assert not still_open, f"the master kept these connections open: {still_open}"
    assert [s["slaveId"] for s in ha_status(master)["slaves"]] == [slave_id]
    log = (master.store_dir / "logs" / "broker.log").read_text()
    assert "broker id 99 is not registered" in log
    assert f"broker id {slave_id} has a key registered with the controller but did not prove it" in log
    assert "without proof of identity" not in log  # the real slave proved itself
    with BrokerClient(10.0) as client:
        env = client.request(master.address, "POST", bc.SEND_MESSAGE, json={"topic": "T", "body": "two acks"})
    assert env.code == RC.SUCCESS
