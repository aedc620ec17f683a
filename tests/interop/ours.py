"""Our cluster laid out as the kit lays out RocketMQ's (tests/rocketmq): three controllers of the group
``group1`` with the node ids n0..n2 (they also serve the name server's role), and the three brokers of
broker-a in DefaultCluster, registering with the controllers over RocketMQ's remoting protocol. The
brokers start one after another, so that they get ids 1, 2 and 3 in their start order and the first is
the first master, as the first RocketMQ broker to register is."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from services.common.controller_client import ControllerClient
from services.common.errors import MqctlError
from tests.support.pacing import cpu_seconds, pause_after

#: The kit's controller settings that our controllers share (tests/rocketmq/servers.py, CONTROLLER_DEFAULTS).
CONTROLLER_PROPS: dict[str, Any] = {"scanNotActiveBrokerInterval": 2000, "scanInactiveMasterInterval": 2000,
                                    "notifyBrokerRoleChanged": "true", "enableElectUncleanMaster": "false"}
#: The kit's broker settings that ours share (BROKER_DEFAULTS there), over remoting to the controllers, and
#: RocketMQ's broker's default queue count (8: TBW102's, so a topic a send creates gets as many; ours default
#: to 4).
BROKER_PROPS: dict[str, Any] = {
    "controllerProtocol": "remoting", "defaultTopicQueueNums": 8, "allAckInSyncStateSet": "true", "totalReplicas": 3, "inSyncReplicas": 2,
    "minInSyncReplicas": 1, "flushDiskType": "ASYNC_FLUSH", "brokerHeartbeatInterval": 1000,
    "controllerHeartBeatTimeoutMills": 10000, "syncBrokerMetadataPeriod": 2000, "checkSyncStateSetPeriod": 2000,
    "haSendHeartbeatInterval": 1000,
}


class OurCluster:
    """Three controllers and broker-a's three brokers under ``root``; ``stop`` ends every process."""

    group = "broker-a"

    def __init__(self, root: Path, brokers: int = 3) -> None:
        self.root = root
        self.controllers = ControllerCluster(root / "controllers", group="group1", extra=dict(CONTROLLER_PROPS))
        self.size = brokers
        self.brokers: list[BrokerNode] = []

    @property
    def controller_addrs(self) -> str:
        return self.controllers.addresses

    def start(self, timeout: float = 90.0) -> None:
        used: set[int] = set()
        self.controllers.configure(used)
        for node in self.controllers.nodes:  # as the kit does: each node keeps its runtime updates in its folder
            with node.conf_file.open("a", encoding="utf-8") as conf:
                conf.write(f"configStorePath={node.conf_file.parent / 'controller.properties'}\n")
        self.controllers.start()
        self.controllers.leader(timeout)
        for index in range(self.size):
            broker = make_broker(self.root, self.group, index, self.controller_addrs, used, **BROKER_PROPS)
            self.brokers.append(broker)
            broker.start()
            wait_for(lambda n=index + 1: self.registered() >= n, timeout, f"broker {index + 1} to register")
        wait_for(lambda: self.in_sync() == self.size, timeout, "every broker in the SyncStateSet")

    def sync_state(self) -> dict[str, Any]:
        with ControllerClient(self.controller_addrs.split(";"), timeout=3.0) as client:
            return client.sync_state_data([self.group], None).brokers[0].model_dump()

    def registered(self) -> int:
        try:
            state = self.sync_state()
        except (MqctlError, IndexError):
            return 0
        return len(state["inSyncReplicas"]) + len(state["notInSyncReplicas"])

    def in_sync(self) -> int:
        try:
            state = self.sync_state()
        except (MqctlError, IndexError):
            return 0
        return len(state["inSyncReplicas"]) if state.get("masterBrokerId") is not None else 0

    def stop(self) -> None:
        for broker in self.brokers:
            broker.stop()
        self.controllers.stop()


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        asked = cpu_seconds()
        if predicate():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(pause_after(cpu_seconds() - asked, 0.2))
