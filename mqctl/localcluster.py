"""Start and stop real controller processes on 127.0.0.1 (used by quickstart and the tests).

Each node gets a RocketMQ-style ``.conf`` file and a log file under the data directory, so the user can
read and reuse what was started.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.common.controller_client import ControllerClient
from services.common.errors import MqctlError
from services.common.ports import port_free
from services.common.props import format_properties
from services.controller.raft_secret import write_password_file

#: The Raft password file shared by the controllers of a local cluster (mode 0600), in its data directory.
RAFT_PASSWORD_FILE = "raft.password"


def raft_password_props(data_dir: Path, extra: dict[str, Any]) -> dict[str, Any]:
    """``controllerRaftPasswordFile`` for every controller of a cluster in ``data_dir``, pointing at a
    file created on first use; nothing when ``extra`` already names a password."""
    if extra.get("controllerRaftPassword") or extra.get("controllerRaftPasswordFile"):
        return {}
    path = data_dir / RAFT_PASSWORD_FILE
    if not path.exists():
        write_password_file(path)
    return {"controllerRaftPasswordFile": str(path.resolve())}


def ephemeral_port_start() -> int:
    """The first port the kernel hands out for outgoing connections (Linux; 32768 elsewhere)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port_pair(used: set[int] | None = None) -> int:
    """A port P such that P and P+1 are both free (API and Raft).

    Chosen below the ephemeral range: a port in it can be taken, while its server is down, as the
    source port of some outgoing connection (even a TCP self-connection of a client polling it), and
    the restarted server then cannot bind it."""
    used = used if used is not None else set()
    rng = random.Random()
    high = max(ephemeral_port_start() - 2, 12000)
    for _ in range(500):
        port = rng.randrange(10000, high)
        if port in used or port + 1 in used:
            continue
        if _port_free(port) and _port_free(port + 1):
            used.update({port, port + 1})
            return port
    raise MqctlError("could not find two adjacent free ports on 127.0.0.1")


def _port_free(port: int) -> bool:
    return port_free(port)


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001  polling: remember the last failure for the message
            last_error = exc
        time.sleep(interval)
    detail = f" (last error: {last_error})" if last_error else ""
    raise MqctlError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")


def spawn(module: str, conf: Path, log_file: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``python -m <module> -c <conf>`` in its own session, output appended to ``log_file``."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", module, "-c", str(conf)], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})


def running(process: subprocess.Popen[bytes] | None) -> bool:
    return process is not None and process.poll() is None


def send_and_wait(process: subprocess.Popen[bytes] | None, sig: int, grace: float = 10.0) -> None:
    """Signal a running process; for SIGKILL/SIGTERM wait for it (SIGKILL after ``grace`` seconds)."""
    if not running(process):
        return
    assert process is not None
    process.send_signal(sig)
    if sig in (signal.SIGKILL, signal.SIGTERM):
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@dataclass
class ControllerNode:
    node_id: str
    port: int
    conf_file: Path
    log_file: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self.process = spawn("services.controller", self.conf_file, self.log_file)

    def alive(self) -> bool:
        return running(self.process)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        send_and_wait(self.process, sig)

    def stop(self) -> None:
        self.kill(signal.SIGTERM)


@dataclass
class ControllerCluster:
    data_dir: Path
    size: int = 3
    group: str = "DefaultControllerGroup"
    extra: dict[str, Any] = field(default_factory=dict)
    nodes: list[ControllerNode] = field(default_factory=list)

    def configure(self, used_ports: set[int] | None = None) -> None:
        ports = [free_port_pair(used_ports) for _ in range(self.size)]
        peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(ports))
        password = raft_password_props(self.data_dir, self.extra)
        for i, port in enumerate(ports):
            node_dir = self.data_dir / f"controller-n{i}"
            conf = node_dir / "controller.conf"
            node_dir.mkdir(parents=True, exist_ok=True)
            props: dict[str, Any] = {
                "controllerDLegerGroup": self.group, "controllerDLegerPeers": peers,
                "controllerDLegerSelfId": f"n{i}", "controllerStorePath": str(node_dir / "store"),
                **password, **self.extra,
            }
            conf.write_text(format_properties(props), encoding="utf-8")
            self.nodes.append(ControllerNode(f"n{i}", port, conf, node_dir / "controller.out"))

    @property
    def addresses(self) -> str:
        return ";".join(n.address for n in self.nodes)

    def start(self) -> None:
        for node in self.nodes:
            node.start()

    def client(self, timeout: float = 5.0) -> ControllerClient:
        return ControllerClient([n.address for n in self.nodes], timeout=timeout)

    def leader(self, timeout: float = 30.0) -> ControllerNode:
        """Wait until a node reports itself serving as leader and return it."""
        def find() -> ControllerNode | None:
            for node in self.nodes:
                if not node.alive():
                    continue
                with ControllerClient([node.address], timeout=1.0) as c:
                    try:
                        env = c.request_node(node.address, "GET", "/v1/controller/metadata")
                    except MqctlError:
                        continue
                    if env.data.get("isLeader"):
                        return node
            return None
        node: ControllerNode = wait_until(find, timeout, "a controller leader")
        return node

    def node(self, node_id: str) -> ControllerNode:
        return next(n for n in self.nodes if n.node_id == node_id)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def kill_all(self) -> None:
        for node in self.nodes:
            node.kill()


@dataclass
class BrokerNode:
    """One broker process with its own .conf, store and log under ``directory``."""

    name: str
    directory: Path
    port: int
    ha_port: int
    controller_addr: str
    cluster: str = "DefaultCluster"
    extra: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def conf_file(self) -> Path:
        return self.directory / "broker.conf"

    @property
    def log_file(self) -> Path:
        return self.directory / "broker.out"

    @property
    def store_dir(self) -> Path:
        return self.directory / "store"

    def write_conf(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        props: dict[str, Any] = {
            "brokerClusterName": self.cluster, "brokerName": self.name, "brokerIP1": "127.0.0.1",
            "listenPort": self.port, "haListenPort": self.ha_port, "storePathRootDir": str(self.store_dir),
            "controllerAddr": self.controller_addr, **self.extra,
        }
        self.conf_file.write_text(format_properties(props), encoding="utf-8")

    def start(self) -> None:
        if not self.conf_file.exists():
            self.write_conf()
        self.process = spawn("services.broker", self.conf_file, self.log_file, self.env)

    def alive(self) -> bool:
        return running(self.process)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        send_and_wait(self.process, sig, grace=15)

    def stop(self) -> None:
        self.kill(signal.SIGTERM)


def make_broker(root: Path, name: str, index: int, controller_addr: str, used_ports: set[int] | None = None,
                **extra: Any) -> BrokerNode:
    port = free_port_pair(used_ports)
    return BrokerNode(name, root / f"{name}-{index}", port, port + 1, controller_addr, extra=dict(extra))


#: Timings for local clusters and demos: failures are detected in about 3 s instead of RocketMQ's 10 s.
DEMO_CONTROLLER = {"scanNotActiveBrokerInterval": 500, "scanInactiveMasterInterval": 1000}
DEMO_BROKER = {"brokerHeartbeatInterval": 500, "controllerHeartBeatTimeoutMills": 3000,
               "syncBrokerMetadataPeriod": 1000, "checkSyncStateSetPeriod": 1000, "haSendHeartbeatInterval": 1000,
               "haHousekeepingInterval": 5000, "haMaxTimeSlaveNotCatchup": 5000, "allAckInSyncStateSet": "true",
               "flushIntervalCommitLog": 200}


@dataclass
class LocalCluster:
    """Controllers plus broker groups, all on 127.0.0.1 under one data directory."""

    data_dir: Path
    controllers: int = 3
    groups: int = 1
    replicas: int = 3
    controller_cluster: ControllerCluster | None = None
    brokers: dict[str, list[BrokerNode]] = field(default_factory=dict)

    def configure(self) -> None:
        used: set[int] = set()
        self.controller_cluster = ControllerCluster(self.data_dir, size=self.controllers, extra=dict(DEMO_CONTROLLER))
        self.controller_cluster.configure(used)
        for g in range(self.groups):
            name = f"broker-{chr(ord('a') + g)}"
            self.brokers[name] = [make_broker(self.data_dir, name, i, self.controller_cluster.addresses, used,
                                              **DEMO_BROKER) for i in range(1, self.replicas + 1)]

    @property
    def controller_addresses(self) -> str:
        assert self.controller_cluster is not None
        return self.controller_cluster.addresses

    def start(self, timeout: float = 90) -> None:
        assert self.controller_cluster is not None
        self.controller_cluster.start()
        self.controller_cluster.leader(timeout=timeout)
        for nodes in self.brokers.values():
            nodes[0].start()  # the first broker of each group becomes its first master
        for name in self.brokers:
            wait_until(self._has_master(name), timeout, f"{name} to elect a master")
        for nodes in self.brokers.values():
            for node in nodes[1:]:
                node.start()
        for name, nodes in self.brokers.items():
            wait_until(self._set_full(name, len(nodes)), timeout,
                       f"{name}'s SyncStateSet to hold all {len(nodes)} replicas")

    def _has_master(self, name: str) -> Callable[[], bool]:
        return lambda: self.sync_state(name).get("masterBrokerId") is not None

    def _set_full(self, name: str, size: int) -> Callable[[], bool]:
        return lambda: len(self.sync_state(name).get("inSyncReplicas", [])) == size

    def sync_state(self, broker_name: str) -> dict[str, Any]:
        assert self.controller_cluster is not None
        with self.controller_cluster.client(timeout=3.0) as client:
            brokers = client.call("GET", "/v1/controller/syncStateData",
                                  params={"brokerName": [broker_name]}).data["brokers"]
        return dict(brokers[0]) if brokers else {}

    def master_of(self, broker_name: str) -> BrokerNode | None:
        address = self.sync_state(broker_name).get("masterAddress")
        return next((n for n in self.brokers[broker_name] if n.address == address), None)

    def stop(self) -> None:
        for nodes in self.brokers.values():
            for node in nodes:
                node.stop()
        if self.controller_cluster is not None:
            self.controller_cluster.stop()
