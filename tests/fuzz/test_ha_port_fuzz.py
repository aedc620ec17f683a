"""Random bytes into a real master's HA (replication) port: mixtures of garbage and well-formed frames with
random fields (handshakes claiming any id, hellos, forged proofs, acks for anything), each on its own
connection. Afterwards the master is alive and still master, lists no slave, has counted no ack (a write
that needs a second replica still times out), and logged no unexpected error."""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from services.broker import contract as bc
from services.broker.ha.frames import SLAVE_HANDSHAKE, SlaveAck, SlaveHandshake, SlaveHello, SlaveProof
from services.common.broker_client import BrokerClient
from services.common.codes import ResponseCode as RC
from tests.integration.conftest import FAST_SCANS
from tests.integration.test_broker import FAST_BROKER, runtime, wait_role
from tests.support.examples import examples

pytestmark = pytest.mark.fuzz

settings_ha = {**FAST_BROKER, "inSyncReplicas": 2, "totalReplicas": 2, "slaveTimeout": 1500}


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerNode]:
    root: Path = tmp_path_factory.mktemp("ha-fuzz")
    cluster = ControllerCluster(root / "controller", size=1, extra=dict(FAST_SCANS))
    cluster.configure()
    cluster.start()
    node = make_broker(root, "broker-a", 1, cluster.addresses, **settings_ha)
    try:
        cluster.leader(timeout=60)
        node.start()
        wait_role(node, "MASTER")
        yield node
    finally:
        node.kill()
        cluster.kill_all()


ids = st.integers(min_value=-3, max_value=6) | st.integers(min_value=-(2**63), max_value=2**63 - 1)
frames = st.one_of(
    st.binary(max_size=300),
    st.builds(lambda i, f, learner: SLAVE_HANDSHAKE.pack(1, f, learner, i), ids, st.sampled_from([0, 1, 2]),
              st.sampled_from([0, 1, -1])),
    st.builds(lambda i: SlaveHandshake(i).encode(), st.integers(min_value=1, max_value=6)),
    st.builds(lambda n: SlaveHello(n).encode(), st.binary(min_size=32, max_size=32)),
    st.builds(lambda s: SlaveProof(s).encode(), st.binary(min_size=64, max_size=64)),
    st.builds(lambda o: SlaveAck(o).encode(), st.integers(min_value=0, max_value=2**62)),
    st.builds(lambda s, n: struct.pack(">ii", s, n), st.integers(-(2**31), 2**31 - 1), st.integers(-(2**31), 2**31 - 1)),
)


def send(port: int, payload: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=2.0) as sock:
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(0.3)
            while sock.recv(65536):
                pass
        except OSError:
            pass  # reset or timeout: both are fine answers to garbage


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(frames, min_size=1, max_size=8))
def test_random_bytes_never_count_as_a_replica(master: BrokerNode, chunks: list[bytes]) -> None:
    send(master.ha_port, b"".join(chunks))


def test_after_the_fuzzing_the_master_is_intact(master: BrokerNode) -> None:
    send(master.ha_port, os.urandom(4096))
    info = runtime(master)
    assert info["role"] == "MASTER"
    with BrokerClient(10.0) as client:
        status = client.request(master.address, "GET", bc.HA_STATUS).data
        assert status["slaves"] == []
        env = client.request(master.address, "POST", bc.SEND_MESSAGE, json={"topic": "T", "body": "x"},
                             accept=(RC.FLUSH_SLAVE_TIMEOUT,))
    assert env.code == RC.FLUSH_SLAVE_TIMEOUT, env
    log = (master.store_dir / "logs" / "broker.log").read_text()
    assert "Traceback" not in log and "unexpectedly" not in log
