"""``mqctl quickstart``'s cluster: controllers plus broker groups, all on 127.0.0.1 under one data
directory, with demo timings (failures seen in about 3 s)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqctl.cluster.nodes import BrokerNode, ControllerCluster, make_broker
from mqctl.cluster.processes import wait_until

__all__ = ["DEMO_BROKER", "DEMO_CONTROLLER", "LocalCluster"]


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
            brokers = client.sync_state_data([broker_name]).brokers
        return brokers[0].model_dump() if brokers else {}

    def master_of(self, broker_name: str) -> BrokerNode | None:
        address = self.sync_state(broker_name).get("masterAddress")
        return next((n for n in self.brokers[broker_name] if n.address == address), None)

    def stop(self) -> None:
        for nodes in self.brokers.values():
            for node in nodes:
                node.stop()
        if self.controller_cluster is not None:
            self.controller_cluster.stop()
