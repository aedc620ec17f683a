"""Controller metrics, read from live state at scrape time."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from services.controller.controller import ControllerManager

ROLES = ("LEADER", "FOLLOWER", "CANDIDATE")


class ControllerCollector(Collector):
    def __init__(self, manager: ControllerManager) -> None:
        self.m = manager

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        status = self.m.raft.status() if self.m.raft is not None else {}
        role = GaugeMetricFamily("mqctl_controller_raft_role", "1 for this node's current Raft role", labels=["role"])
        for name in ROLES:
            role.add_metric([name.lower()], 1.0 if status.get("state") == name else 0.0)
        yield role
        yield GaugeMetricFamily("mqctl_controller_raft_term", "Current Raft term", value=status.get("term") or 0)
        yield GaugeMetricFamily("mqctl_controller_raft_commit_index", "Raft commit index",
                                value=status.get("commitIndex") or 0)
        yield GaugeMetricFamily("mqctl_controller_raft_last_applied", "Last Raft entry applied",
                                value=status.get("lastApplied") or 0)
        yield GaugeMetricFamily("mqctl_controller_serving", "1 while this node serves as leader",
                                value=1.0 if self.m.serving else 0.0)
        yield GaugeMetricFamily("mqctl_controller_raft_journal_writable",
                                "0 while this node cannot write its Raft journal (a full disk) and sits out of Raft",
                                value=0.0 if status.get("journalError") else 1.0)
        elections = CounterMetricFamily("mqctl_controller_elections", "Masters elected through this node, by reason",
                                        labels=["reason"])
        for reason, count in sorted(self.m.elections.items()):
            elections.add_metric([reason], count)
        yield elections
        age = GaugeMetricFamily("mqctl_controller_broker_heartbeat_age_seconds",
                                "Time since each broker's last heartbeat", labels=["cluster", "broker", "broker_id"])
        alive = GaugeMetricFamily("mqctl_controller_broker_alive", "1 if the broker's heartbeat has not expired",
                                  labels=["cluster", "broker", "broker_id"])
        now = self.m.clock.monotonic_ms()
        for info in self.m.heartbeats.snapshot():
            labels = [info.clusterName, info.brokerName, str(info.brokerId)]
            age.add_metric(labels, (now - info.lastUpdateMs) / 1000)
            alive.add_metric(labels, 1.0 if info.is_alive(now) else 0.0)
        yield age
        yield alive


def controller_registry(manager: ControllerManager) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(ControllerCollector(manager))
    return registry
