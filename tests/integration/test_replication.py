"""A replicated broker group (3 real broker processes) behind 3 real controllers: no acknowledged message
is lost when the master is killed with SIGKILL mid-stream, and the replicas converge byte for byte."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqctl.localcluster import BrokerNode, ControllerCluster, make_broker
from services.common.broker_client import BrokerClient
from services.common.errors import MqctlError
from tests.integration.conftest import poll
from tests.integration.test_broker import FAST_BROKER, pull_all, runtime, sync_state, wait_role

pytestmark = pytest.mark.integration

HA = {**FAST_BROKER, "allAckInSyncStateSet": "true", "haSendHeartbeatInterval": 300,
      "haHousekeepingInterval": 3000, "checkSyncStateSetPeriod": 500, "haMaxTimeSlaveNotCatchup": 3000,
      "slaveTimeout": 3000, "mappedFileSizeCommitLog": 256 * 1024, "maxMessageSize": 65536}


@pytest.fixture
def group(tmp_path: Path, controllers: ControllerCluster) -> Iterator[list[BrokerNode]]:
    nodes = [make_broker(tmp_path, "broker-a", i, controllers.addresses, **HA) for i in (1, 2, 3)]
    nodes[0].start()
    wait_role(nodes[0], "MASTER")
    for node in nodes[1:]:
        node.start()
    try:
        yield nodes
    finally:
        for node in nodes:
            node.kill()


def in_sync_ids(controllers: ControllerCluster) -> list[int]:
    return [r["brokerId"] for r in sync_state(controllers, "broker-a")["inSyncReplicas"]]


def commitlog_bytes(node: BrokerNode) -> bytes:
    files = sorted((node.store_dir / "commitlog").iterdir())
    return b"".join(f.read_bytes() for f in files)


class Producer(threading.Thread):
    """Sends uniquely numbered messages to whoever is master, recording every PUT_OK."""

    def __init__(self, controllers: ControllerCluster, total: int, batch: int = 10) -> None:
        super().__init__(daemon=True)
        self.controllers, self.total, self.batch = controllers, total, batch
        self.acked: list[str] = []
        self.failed = 0
        self.master: str | None = None

    def run(self) -> None:
        sent = 0
        deadline = time.monotonic() + 120
        with BrokerClient(5.0) as client:
            while sent < self.total and time.monotonic() < deadline:
                bodies = [f"msg-{sent + i}" for i in range(self.batch)]
                try:
                    address = self.master or self._find_master()
                    env = client.request(address, "POST", "/v1/broker/sendMessages",
                                         json={"messages": [{"topic": "Orders", "body": b} for b in bodies]},
                                         accept=tuple(range(1, 3000)))
                except MqctlError:
                    self.master = None
                    time.sleep(0.05)
                    continue
                if env.data and env.data.get("status") == "PUT_OK":
                    self.acked.extend(bodies)
                    sent += self.batch
                else:
                    self.failed += 1
                    self.master = None
                    time.sleep(0.05)
                    sent += self.batch  # never resend: an unknown outcome is simply not counted

    def _find_master(self) -> str:
        bs = sync_state(self.controllers, "broker-a")
        if not bs["masterAddress"] or bs["masterBrokerId"] is None:
            raise MqctlError("no master")
        self.master = bs["masterAddress"]
        return str(self.master)


def test_failover_loses_no_acknowledged_message(controllers: ControllerCluster, group: list[BrokerNode]) -> None:
    poll(lambda: in_sync_ids(controllers) == [1, 2, 3], 40, "the SyncStateSet to grow to all three")
    old_master = group[0]
    producer = Producer(controllers, total=5000)
    producer.start()
    poll(lambda: len(producer.acked) >= 1500, 60, "1500 acknowledged messages")
    old_master.kill()
    producer.join(timeout=150)
    assert not producer.is_alive()
    assert len(producer.acked) > 1500

    bs = poll(lambda: (b := sync_state(controllers, "broker-a"))["masterBrokerId"] in (2, 3) and b, 30,
              "a new master")
    assert bs["masterEpoch"] == 2
    new_master = next(n for n in group if n.address == bs["masterAddress"])
    wait_role(new_master, "MASTER")
    readable = {m["body"] for m in pull_all(new_master, "Orders")}
    missing = [b for b in producer.acked if b not in readable]
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {missing[:5]}"

    # The old master comes back: it truncates what was never confirmed and rejoins as a slave.
    old_master.start()
    info = wait_role(old_master, "SLAVE", timeout=40)
    assert info["masterAddress"] == new_master.address
    poll(lambda: in_sync_ids(controllers) == [1, 2, 3], 60, "the SyncStateSet to grow back to three")

    # Quiesce, then every replica holds the same bytes up to confirmOffset.
    def converged() -> bool:
        infos = [runtime(n) for n in group]
        return len({(i["maxOffset"], i["confirmOffset"]) for i in infos}) == 1 and infos[0]["confirmOffset"] > 0
    poll(converged, 30, "all replicas to converge")
    confirm = runtime(new_master)["confirmOffset"]
    images = [commitlog_bytes(n)[:confirm] for n in group]
    assert images[0] == images[1] == images[2]
    for node in group:
        assert {m["body"] for m in pull_all(node, "Orders")} >= set(producer.acked)
    epochs = [[(e["epoch"], e["startOffset"]) for e in
               BrokerClient(2.0).request(n.address, "GET", "/v1/broker/epochCache").data["epochEntries"]]
              for n in group]
    assert epochs[0] == epochs[1] == epochs[2]
    assert [e for e, _ in epochs[0]] == [1, 2]
