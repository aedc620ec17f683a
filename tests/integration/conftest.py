"""Fixtures that start real controller processes on loopback and always stop them."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from services.common.controller_client import ControllerClient, Envelope
from services.common.errors import MqctlError
from services.controller import contract
from tests.support.pacing import cpu_seconds, pause_after

FAST_SCANS = {"scanNotActiveBrokerInterval": 300, "scanInactiveMasterInterval": 500,
              "notifyBrokerRoleChanged": "false"}


@pytest.fixture
def controllers(tmp_path: Path) -> Iterator[ControllerCluster]:
    cluster = ControllerCluster(tmp_path / "cluster", extra=dict(FAST_SCANS))
    cluster.configure()
    cluster.start()
    try:
        cluster.leader(timeout=60)
        yield cluster
    finally:
        cluster.kill_all()
        for node in cluster.nodes:
            if node.log_file.exists() and os.environ.get("MQCTL_TEST_SHOW_LOGS"):
                print(node.log_file.read_text()[-3000:])


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[ControllerCluster]:
    """One controller node (a test file may define its own ``controller`` instead)."""
    cluster = ControllerCluster(tmp_path / "controller", size=1, extra=dict(FAST_SCANS))
    cluster.configure()
    cluster.start()
    try:
        cluster.leader(timeout=60)
        yield cluster
    finally:
        cluster.kill_all()


@pytest.fixture
def brokers() -> Iterator[list[BrokerNode]]:
    """Brokers a test starts: append each; every one is killed at the end."""
    started: list[BrokerNode] = []
    yield started
    for node in started:
        node.kill()



@pytest.fixture(scope="module")
def cpp_client() -> None:
    """Skip (with the reason) only where the wheel cannot load; where it should, a missing one is an error."""
    probe = subprocess.run([sys.executable, "-c", "import rocketmq.client"], capture_output=True, text=True,
                           timeout=60, check=False)
    if probe.returncode == 0:
        return
    supported = sys.platform == "linux" and platform.machine() == "x86_64"
    if "No module named 'rocketmq'" in probe.stderr and supported:
        pytest.fail("the RocketMQ C++ client is not installed: pip install -e '.[test]' (rocketmq==0.4.4)")
    pytest.skip(f"the RocketMQ C++ client (rocketmq==0.4.4, manylinux x86_64 only) cannot load here: "
                f"{probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else probe.returncode}")


@dataclass
class FakeBrokerHeartbeats:
    """Sends heartbeats the way a broker does (to every controller), from a background thread."""

    addresses: list[str]
    brokers: dict[int, dict[str, Any]] = field(default_factory=dict)
    interval: float = 0.2
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def add(self, cluster: str, name: str, broker_id: int, address: str, timeout_ms: int = 1500,
            epoch: int = -1, max_offset: int = -1, priority: int = 0) -> None:
        self.brokers[broker_id] = {
            "clusterName": cluster, "brokerName": name, "brokerAddr": address, "brokerId": broker_id,
            "epoch": epoch, "maxOffset": max_offset, "confirmOffset": -1,
            "heartbeatTimeoutMills": timeout_ms, "electionPriority": priority}

    def remove(self, broker_id: int) -> None:
        self.brokers.pop(broker_id, None)

    def beat_once(self) -> None:
        with ControllerClient(self.addresses, timeout=1.0) as client:
            for body in list(self.brokers.values()):
                for address in self.addresses:
                    try:
                        client.request_node(address, "POST", contract.HEARTBEAT, json=body)
                    except MqctlError:
                        pass

    def start(self) -> None:
        def loop() -> None:
            while not self._stop.is_set():
                self.beat_once()
                self._stop.wait(self.interval)
        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


@pytest.fixture
def heartbeats(controllers: ControllerCluster) -> Iterator[FakeBrokerHeartbeats]:
    hb = FakeBrokerHeartbeats([n.address for n in controllers.nodes])
    hb.start()
    try:
        yield hb
    finally:
        hb.stop()


def register_broker(client: ControllerClient, cluster: str, name: str, address: str) -> int:
    """getNextBrokerId → applyBrokerId → registerBroker, as a starting broker does."""
    next_id = client.call("POST", contract.GET_NEXT_BROKER_ID,
                          json={"clusterName": cluster, "brokerName": name}).data["nextBrokerId"]
    client.call("POST", contract.APPLY_BROKER_ID, json={
        "clusterName": cluster, "brokerName": name, "appliedBrokerId": next_id,
        "registerCheckCode": f"{address};{int(time.time() * 1000)}"})
    client.call("POST", contract.REGISTER_BROKER, json={
        "clusterName": cluster, "brokerName": name, "brokerId": next_id, "brokerAddress": address})
    return int(next_id)


def poll(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        asked = cpu_seconds()
        try:
            last = predicate()
            if last:
                return last
        except MqctlError as exc:
            last = exc
        time.sleep(pause_after(cpu_seconds() - asked, 0.1))
    raise AssertionError(f"timed out waiting for {what}; last value: {last!r}")


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mqctl", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, check=False)


def call(client: ControllerClient, method: str, path: str, **kwargs: Any) -> Envelope:
    """Like client.call but returns refusals instead of raising (to assert codes)."""
    return client.call(method, path, accept=tuple(range(1, 3000)), **kwargs)


#: Brokers that notice a dead controller or master within a few seconds (tests poll for failovers).
FAST_BROKER_PROPS = {"brokerHeartbeatInterval": 300, "controllerHeartBeatTimeoutMills": 2000,
                     "syncBrokerMetadataPeriod": 500, "flushIntervalCommitLog": 100}


@contextmanager
def group_cluster(root: Path, group: str, replicas: int, props: dict[str, Any] | None = None,
                  **broker_props: Any) -> Iterator[tuple[ControllerCluster, list[BrokerNode]]]:
    """Three controllers (role notifications on) and ``replicas`` brokers of ``group``, all given ``props``;
    stopped at the end whatever happened."""
    extra = dict(props or {})
    controllers = ControllerCluster(root / "cluster", extra={**FAST_SCANS, "notifyBrokerRoleChanged": "true", **extra})
    controllers.configure()
    brokers: list[BrokerNode] = []
    try:
        controllers.start()
        controllers.leader(timeout=60)
        used: set[int] = set()
        brokers += [make_broker(root, group, i, controllers.addresses, used, **FAST_BROKER_PROPS, **extra,
                                **broker_props) for i in range(replicas)]
        for broker in brokers:
            broker.start()
        yield controllers, brokers
    finally:
        for broker in brokers:
            broker.stop()
        controllers.stop()
