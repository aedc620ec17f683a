"""Controller and broker processes on 127.0.0.1, each with a RocketMQ-style ``.conf`` file and a log file
under the data directory, so the user can read and reuse what was started (quickstart's cluster and the
tests' clusters are made of these)."""

from __future__ import annotations

import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqctl.cluster.processes import (
    free_port_pair,
    raft_password_props,
    running,
    send_and_wait,
    spawn,
    wait_until,
)
from services.common.controller_client import ControllerClient
from services.common.errors import MqctlError
from services.common.props import format_properties

__all__ = ["BrokerNode", "ControllerCluster", "ControllerNode", "make_broker"]


@dataclass
class ControllerNode:
    node_id: str
    port: int
    conf_file: Path
    log_file: Path
    process: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)  # added to the process's environment

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def store_dir(self) -> Path:
        return self.conf_file.parent / "store"

    def start(self) -> None:
        self.process = spawn("services.controller", self.conf_file, self.log_file, self.env)

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
    env: dict[str, str] = field(default_factory=dict)  # added to every node's environment

    def configure(self, used_ports: set[int] | None = None) -> None:
        used = used_ports if used_ports is not None else set()  # one set: no two nodes share a port
        ports = [free_port_pair(used) for _ in range(self.size)]
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
            self.nodes.append(ControllerNode(f"n{i}", port, conf, node_dir / "controller.out", env=dict(self.env)))

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
                        meta = c.metadata(node.address)
                    except MqctlError:
                        continue
                    if meta.isLeader:
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
