"""A local cluster that outlives the command that started it: ``mqctl cluster up/status/down``.

Everything lives under one data directory::

    cluster.json                      the layout (nodes, ports); re-running ``up`` resumes it
    raft.password                     the controllers' shared Raft password (mode 0600)
    controller-n0/controller.conf     RocketMQ-style configs the user can read and reuse
    controller-n0/controller.out      stdout/stderr of the process (its log file is under store/logs)
    controller-n0/pid
    broker-a-1/broker.conf, broker.out, pid, store/

Processes run in their own session, so they keep running after the CLI exits; they are found again
through their pid files.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mqctl.cluster.local import DEMO_BROKER, DEMO_CONTROLLER
from mqctl.cluster.processes import pid_is_ours, pid_running, raft_password_props, signal_pid, wait_until
from services.common.broker_client import BrokerClient
from services.common.controller_client import ControllerClient
from services.common.errors import ConfigError, MqctlError, UsageError
from services.common.ports import port_free
from services.common.props import format_properties

LAYOUT_FILE = "cluster.json"
LAYOUT_VERSION = 1


@dataclass
class NodeSpec:
    name: str
    kind: str  # "controller" | "broker"
    port: int
    raft_or_ha_port: int
    group: str = ""
    host: str = "127.0.0.1"  # the address it binds and advertises

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


class DevCluster:
    def __init__(self, data_dir: Path, nodes: list[NodeSpec]) -> None:
        self.data_dir = data_dir
        self.nodes = nodes

    # ------------------------------------------------------------------ layout
    @classmethod
    def create(cls, data_dir: Path, controllers: int, groups: int, replicas: int, base_port: int) -> DevCluster:
        if controllers < 1 or groups < 1 or replicas < 1:
            raise UsageError("--controllers, --groups and --replicas must be at least 1")
        if groups > 26:
            raise UsageError("at most 26 broker groups (broker-a .. broker-z)")
        nodes = [NodeSpec(f"n{i}", "controller", base_port + 2 * i, base_port + 2 * i + 1) for i in range(controllers)]
        broker_base = base_port + 2 * controllers + 10
        for g in range(groups):
            group = f"broker-{chr(ord('a') + g)}"
            for r in range(1, replicas + 1):
                port = broker_base + 2 * (g * replicas + r - 1)
                nodes.append(NodeSpec(f"{group}-{r}", "broker", port, port + 1, group))
        cluster = cls(data_dir, nodes)
        busy = [p for n in nodes for p in (n.port, n.raft_or_ha_port) if not port_free(p)]
        if busy:
            raise ConfigError(f"port {busy[0]} on 127.0.0.1 is already in use ({len(busy)} of the cluster's ports "
                              "are); choose other ports with --base-port, or stop what is using them")
        cluster._write_configs()
        return cluster

    @classmethod
    def load(cls, data_dir: Path) -> DevCluster:
        path = data_dir / LAYOUT_FILE
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            raise UsageError(f"no cluster in {data_dir} (no {LAYOUT_FILE}); start one with 'mqctl cluster up "
                             f"--data-dir {data_dir}'") from None
        except ValueError:
            raise ConfigError(f"{path} is not valid JSON; remove the directory to start over") from None
        if doc.get("version") != LAYOUT_VERSION:
            raise ConfigError(f"{path} was written by another version of mqctl; remove the directory to start over")
        return cls(data_dir, [NodeSpec(**n) for n in doc["nodes"]])

    def _write_configs(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        controllers = self.controllers()
        peers = ";".join(f"{n.name}-{n.host}:{n.port}" for n in controllers)
        password = raft_password_props(self.data_dir, {})
        for node in controllers:
            props: dict[str, Any] = {"controllerDLegerGroup": "LocalControllerGroup", "controllerDLegerPeers": peers,
                                     "controllerDLegerSelfId": node.name,
                                     "controllerStorePath": str(self.node_dir(node) / "store"), **password,
                                     **DEMO_CONTROLLER}
            self._write(self.conf_file(node), props)
        addrs = ";".join(n.address for n in controllers)
        for node in self.brokers():
            props = {"brokerClusterName": "DefaultCluster", "brokerName": node.group, "brokerIP1": node.host,
                     "listenPort": node.port, "haListenPort": node.raft_or_ha_port,
                     "storePathRootDir": str(self.node_dir(node) / "store"), "controllerAddr": addrs, **DEMO_BROKER}
            self._write(self.conf_file(node), props)
        doc = {"version": LAYOUT_VERSION, "nodes": [asdict(n) for n in self.nodes]}
        (self.data_dir / LAYOUT_FILE).write_text(json.dumps(doc, indent=2) + "\n")

    @staticmethod
    def _write(path: Path, props: dict[str, Any]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(format_properties(props), encoding="utf-8")

    def controllers(self) -> list[NodeSpec]:
        return [n for n in self.nodes if n.kind == "controller"]

    def brokers(self, group: str | None = None) -> list[NodeSpec]:
        return [n for n in self.nodes if n.kind == "broker" and (group is None or n.group == group)]

    def groups(self) -> list[str]:
        return sorted({n.group for n in self.brokers()})

    def node(self, name: str) -> NodeSpec:
        for node in self.nodes:
            if node.name == name:
                return node
        raise UsageError(f"no node {name!r} in this cluster; nodes: {', '.join(n.name for n in self.nodes)}")

    def node_dir(self, node: NodeSpec) -> Path:
        return self.data_dir / (f"controller-{node.name}" if node.kind == "controller" else node.name)

    def conf_file(self, node: NodeSpec) -> Path:
        return self.node_dir(node) / f"{node.kind}.conf"

    def out_file(self, node: NodeSpec) -> Path:
        return self.node_dir(node) / f"{node.kind}.out"

    @property
    def controller_addresses(self) -> str:
        return ";".join(n.address for n in self.controllers())

    # ------------------------------------------------------------------ processes
    def pid(self, node: NodeSpec) -> int | None:
        try:
            pid = int((self.node_dir(node) / "pid").read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        return pid if pid_running(pid) and pid_is_ours(pid, self.conf_file(node)) else None

    def start_node(self, node: NodeSpec) -> None:
        if self.pid(node) is not None:
            return
        for port in (node.port, node.raft_or_ha_port):
            if not self.launcher(node) and not port_free(port):
                raise ConfigError(f"cannot start {node.name}: port {port} on 127.0.0.1 is in use by another process")
        module = "services.controller" if node.kind == "controller" else "services.broker"
        with open(self.out_file(node), "ab") as out:
            process = subprocess.Popen([*self.launcher(node), sys.executable, "-m", module, "-c", str(self.conf_file(node))],
                                       stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        (self.node_dir(node) / "pid").write_text(str(process.pid))

    def launcher(self, node: NodeSpec) -> list[str]:
        """What runs a node's process (a subclass may run it elsewhere, e.g. in a network namespace)."""
        return []

    def stop_node(self, node: NodeSpec, grace: float = 10.0) -> bool:
        """SIGTERM, then SIGKILL after ``grace`` seconds; True if it had to be killed."""
        pid = self.pid(node)
        if pid is None:
            return False
        signal_pid(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and pid_running(pid):
            time.sleep(0.05)
        forced = pid_running(pid)
        if forced:
            signal_pid(pid, signal.SIGKILL)
            wait_until(lambda: not pid_running(pid), 10, f"{node.name} to die")
        (self.node_dir(node) / "pid").unlink(missing_ok=True)
        return forced

    def kill_node(self, node: NodeSpec) -> int:
        pid = self.pid(node)
        if pid is None:
            raise MqctlError(f"{node.name} is not running")
        signal_pid(pid, signal.SIGKILL)
        wait_until(lambda: not pid_running(pid), 10, f"{node.name} to die")
        (self.node_dir(node) / "pid").unlink(missing_ok=True)
        return pid

    # ------------------------------------------------------------------ cluster-level operations
    def client(self, timeout: float = 3.0) -> ControllerClient:
        return ControllerClient([n.address for n in self.controllers()], timeout=timeout)

    def sync_state(self, group: str) -> dict[str, Any]:
        with self.client() as client:
            brokers = client.sync_state_data([group]).brokers
        return brokers[0].model_dump() if brokers else {}

    def ensure_raft_password(self) -> None:
        """Clusters created before every controller had a Raft password: give their configs the shared
        file (a group of several controllers no longer starts without one)."""
        for node in self.controllers():
            conf = self.conf_file(node)
            if not conf.exists():
                continue
            text = conf.read_text(encoding="utf-8")
            if "controllerRaftPassword" not in text:
                added = format_properties(raft_password_props(self.data_dir, {}))
                conf.write_text(text.rstrip("\n") + "\n" + added, encoding="utf-8")

    def up(self, timeout: float = 120.0) -> None:
        self.ensure_raft_password()
        for node in self.controllers():
            self.start_node(node)
        wait_until(self._leader_serving, timeout, "the controllers to elect a leader")
        for group in self.groups():
            first = self.brokers(group)[0]
            if not self.sync_state(group):
                self.start_node(first)  # a new group: its first broker becomes the first master
                wait_until(lambda g=group: self.sync_state(g).get("masterBrokerId") is not None, timeout,  # type: ignore[misc]
                           f"{group} to elect a master")
        for node in self.brokers():
            self.start_node(node)
        for group in self.groups():
            size = len(self.brokers(group))
            wait_until(lambda g=group, k=size: self._group_healthy(g, k), timeout,  # type: ignore[misc]
                       f"{group} to have a master and all {size} replicas in its SyncStateSet")

    def _leader_serving(self) -> bool:
        with self.client(timeout=1.0) as client:
            for node in self.controllers():
                try:
                    if client.metadata(node.address).isLeader:
                        return True
                except MqctlError:
                    continue
        return False

    def _group_healthy(self, group: str, size: int) -> bool:
        state = self.sync_state(group)
        return state.get("masterBrokerId") is not None and len(state.get("inSyncReplicas", [])) == size

    def down(self, grace: float = 10.0) -> list[str]:
        forced = []
        for node in self.brokers() + self.controllers():
            if self.stop_node(node, grace):
                forced.append(node.name)
        return forced

    def master_of(self, group: str) -> NodeSpec | None:
        address = self.sync_state(group).get("masterAddress")
        return next((n for n in self.brokers(group) if n.address == address), None)

    def status(self) -> list[dict[str, Any]]:
        rows = []
        with BrokerClient(1.0) as brokers, self.client(timeout=1.0) as client:
            for node in self.nodes:
                pid = self.pid(node)
                row: dict[str, Any] = {"name": node.name, "kind": node.kind, "address": node.address,
                                       "pid": pid, "running": pid is not None, "role": None, "group": node.group or None}
                if pid is not None:
                    try:
                        if node.kind == "controller":
                            row["role"] = "leader" if client.metadata(node.address).isLeader else "follower"
                        else:
                            info = brokers.runtime_info(node.address)
                            row["role"] = info.role.lower()
                            row["masterEpoch"] = info.masterEpoch
                            row["maxOffset"] = info.maxOffset
                    except MqctlError:
                        row["role"] = "starting"
                rows.append(row)
        return rows
