"""SIGTERM stops every service within a few seconds, in every state, including while the controller (or the
rest of the controller group) is unreachable.

Before, a broker whose controller had gone away ignored SIGTERM: its liveness-channel task swallowed the
cancellation around its reconnect sleep, so shutdown waited for it forever.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from tests.integration.conftest import FAST_SCANS
from tests.integration.test_broker import FAST_BROKER, wait_role

pytestmark = pytest.mark.integration

#: What "a few seconds" means here: uvicorn's own graceful shutdown plus the broker's bounded stop steps.
STOP_WITHIN_S = 10.0


def stops_on_sigterm(process: subprocess.Popen[bytes] | None) -> float:
    assert process is not None and process.poll() is None, "the process is not running"
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_WITHIN_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
        raise AssertionError(f"still running {STOP_WITHIN_S} s after SIGTERM") from None
    return time.monotonic() - started




def test_broker_stops_after_its_controller_died(controller: ControllerCluster, brokers: list[BrokerNode],
                                                tmp_path: Path) -> None:
    broker = make_broker(tmp_path, "broker-a", 1, controller.addresses, **FAST_BROKER)
    brokers.append(broker)
    broker.start()
    wait_role(broker, "MASTER")
    controller.kill_all()
    stops_on_sigterm(broker.process)


def test_broker_stops_while_the_controller_was_never_reachable(brokers: list[BrokerNode],
                                                               tmp_path: Path) -> None:
    broker = make_broker(tmp_path, "broker-a", 1, "127.0.0.1:1", **FAST_BROKER)
    brokers.append(broker)
    broker.start()
    log = broker.store_dir / "logs" / "broker.log"
    deadline = time.monotonic() + 30
    while not (log.exists() and "retrying" in log.read_text()):
        assert time.monotonic() < deadline, "the broker never tried to register"
        time.sleep(0.1)
    stops_on_sigterm(broker.process)


def test_controller_stops_without_a_quorum(tmp_path: Path) -> None:
    cluster = ControllerCluster(tmp_path / "cluster", size=3, extra=dict(FAST_SCANS))
    cluster.configure()
    node = cluster.nodes[0]
    node.start()  # its two peers never start: no leader, no quorum
    try:
        log = node.log_file
        deadline = time.monotonic() + 30
        while not (log.exists() and "Raft" in log.read_text()):
            assert time.monotonic() < deadline, "the controller did not start"
            time.sleep(0.1)
        stops_on_sigterm(node.process)
    finally:
        cluster.kill_all()
