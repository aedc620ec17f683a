"""Broker metrics: live state read at scrape time, plus put latency and status counters."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from services.broker.broker import Broker

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 3.0, 5.0)


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.put_latency = Histogram("mqctl_broker_put_latency_seconds", "Time from receiving a put to its answer",
                                     buckets=LATENCY_BUCKETS, registry=self.registry)
        self.put_status = Counter("mqctl_broker_put_requests", "Put requests by result status", ["status"],
                                  registry=self.registry)
        self.put_messages = Counter("mqctl_broker_put_messages", "Messages in put requests by result status",
                                    ["status"], registry=self.registry)

    def attach(self, broker: Broker) -> None:
        self.registry.register(BrokerCollector(broker))


class BrokerCollector(Collector):
    def __init__(self, broker: Broker) -> None:
        self.b = broker

    def collect(self) -> Iterator[GaugeMetricFamily]:
        b = self.b
        state = b.replicas.state
        role = GaugeMetricFamily("mqctl_broker_role", "1 for the broker's current role", labels=["role"])
        for name in ("MASTER", "SLAVE", "FENCED"):
            role.add_metric([name.lower()], 1.0 if state.role.value == name else 0.0)
        yield role
        yield GaugeMetricFamily("mqctl_broker_master_epoch", "masterEpoch this broker holds", value=state.master_epoch)
        yield GaugeMetricFamily("mqctl_broker_epoch_file_last_epoch", "Last epoch in the epoch file",
                                value=b.store.epochs.last_epoch())
        yield GaugeMetricFamily("mqctl_broker_max_offset", "Commitlog max offset", value=b.store.max_offset)
        yield GaugeMetricFamily("mqctl_broker_min_offset", "Commitlog min offset (retention moves it up)",
                                value=b.store.min_offset)
        yield GaugeMetricFamily("mqctl_broker_disk_used_ratio", "Fraction of the store's disk in use at the last "
                                "retention run", value=b.retention.used)
        yield GaugeMetricFamily("mqctl_broker_disk_full", "1 while writes are refused over "
                                "diskSpaceWarningLevelRatio", value=1.0 if b.retention.disk_full else 0.0)
        yield GaugeMetricFamily("mqctl_broker_store_writable", "0 while the disk refuses writes to the store "
                                "(sends are refused)", value=0.0 if b.write_error else 1.0)
        yield GaugeMetricFamily("mqctl_broker_segments_deleted", "Commitlog segments retention deleted since start",
                                value=b.retention.deleted_segments)
        yield GaugeMetricFamily("mqctl_broker_confirm_offset", "confirmOffset", value=b.store.confirm_offset)
        yield GaugeMetricFamily("mqctl_broker_sync_state_set_size", "Members of the local SyncStateSet",
                                value=len(state.sync_state_set))
        lag = GaugeMetricFamily("mqctl_broker_slave_lag_bytes", "Bytes each slave is behind (master only)",
                                labels=["slave_id"])
        in_sync = GaugeMetricFamily("mqctl_broker_slave_in_sync", "1 if the slave is in the SyncStateSet",
                                    labels=["slave_id"])
        status: dict[str, Any] = b.replication.status()
        for slave in status.get("slaves", []) or []:
            lag.add_metric([str(slave["slaveId"])], float(slave["lag"]))
            in_sync.add_metric([str(slave["slaveId"])], 1.0 if slave["inSync"] else 0.0)
        yield lag
        yield in_sync
