"""A replicated broker group (3 real broker processes) behind 3 real controllers: no acknowledged message
is lost when the master is killed with SIGKILL mid-stream, and the replicas converge byte for byte."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from services.broker import contract as bc
from services.common.broker_client import BrokerClient
from services.common.errors import MqctlError
from tests.integration.conftest import poll, run_cli
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
                    env = client.request(address, "POST", bc.SEND_MESSAGES,
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


@pytest.mark.smoke
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
               BrokerClient(2.0).request(n.address, "GET", bc.EPOCH_CACHE).data["epochEntries"]]
              for n in group]
    assert epochs[0] == epochs[1] == epochs[2]
    assert [e for e, _ in epochs[0]] == [1, 2]


def wipe_store_keep_identity(node: BrokerNode) -> None:
    """Everything but the broker's identity: its id file and its key (the key proves the id to the others)."""
    import shutil
    kept = {name: (node.store_dir / name).read_bytes() for name in ("brokerIdentity", "brokerIdentity.key")}
    shutil.rmtree(node.store_dir)
    node.store_dir.mkdir(parents=True)
    for name, content in kept.items():
        (node.store_dir / name).write_bytes(content)
        (node.store_dir / name).chmod(0o600)


def test_empty_slave_catches_up_and_sync_from_last_file(controllers: ControllerCluster,
                                                        group: list[BrokerNode]) -> None:
    poll(lambda: in_sync_ids(controllers) == [1, 2, 3], 40, "the SyncStateSet to grow to all three")
    master, slave2, slave3 = group
    with BrokerClient(10.0) as client:
        for batch in range(8):  # ~800 KiB: the log spans several 256 KiB segments
            msgs = [{"topic": "Big", "body": f"{batch}-{i}-" + "x" * 1000} for i in range(100)]
            env = client.request(master.address, "POST", bc.SEND_MESSAGES, json={"messages": msgs})
            assert env.data["status"] == "PUT_OK"
    segment = 256 * 1024
    assert runtime(master)["maxOffset"] > 3 * segment

    # A slave restarted with an empty store (identity kept) replicates everything from offset 0.
    slave3_id = runtime(slave3)["brokerId"]
    slave3.kill()
    wipe_store_keep_identity(slave3)
    slave3.start()
    info = wait_role(slave3, "SLAVE")
    assert info["brokerId"] == slave3_id
    target = runtime(master)["maxOffset"]
    poll(lambda: runtime(slave3)["maxOffset"] == target, 30, "the empty slave to catch up")
    assert commitlog_bytes(slave3) == commitlog_bytes(master)[:target]
    poll(lambda: in_sync_ids(controllers) == [1, 2, 3], 30, "slave 3 back in the SyncStateSet")
    assert len(pull_all(slave3, "Big")) == 800

    # With syncFromLastFile, an empty slave starts at the beginning of the master's last segment.
    slave2.kill()
    wipe_store_keep_identity(slave2)
    conf = slave2.conf_file.read_text() + "syncFromLastFile=true\n"
    slave2.conf_file.write_text(conf)
    slave2.start()
    wait_role(slave2, "SLAVE")
    poll(lambda: runtime(slave2)["maxOffset"] == target, 30, "the last-file slave to catch up")
    assert runtime(slave2)["minOffset"] == target - target % segment > 0
    with BrokerClient(10.0) as client:
        env = client.request(master.address, "POST", bc.SEND_MESSAGE, json={"topic": "Big", "body": "after"})
        assert env.data["status"] == "PUT_OK"
    new_target = runtime(master)["maxOffset"]
    poll(lambda: all(runtime(n)["maxOffset"] == new_target for n in group), 30, "both slaves to follow")

    metrics = httpx.get(f"http://{master.address}/metrics").text
    assert 'mqctl_broker_role{role="master"} 1.0' in metrics
    assert 'mqctl_broker_slave_lag_bytes{slave_id="2"}' in metrics
    assert 'mqctl_broker_put_requests_total{status="PUT_OK"}' in metrics
    assert "mqctl_broker_put_latency_seconds_bucket" in metrics
    assert f"mqctl_broker_confirm_offset {float(new_target)}" in metrics
    leader = next(n for n in controllers.nodes if httpx.get(f"http://{n.address}/v1/controller/metadata")
                  .json()["data"]["isLeader"])
    cmetrics = httpx.get(f"http://{leader.address}/metrics").text
    assert 'mqctl_controller_raft_role{role="leader"} 1.0' in cmetrics
    assert 'mqctl_controller_elections_total{reason="INITIAL"} 1.0' in cmetrics
    assert 'mqctl_controller_broker_alive{broker="broker-a",broker_id="3",cluster="DefaultCluster"} 1.0' in cmetrics

    status = run_cli("haStatus", "-a", controllers.addresses, "-b", "broker-a", "--format", "json")
    assert status.returncode == 0, status.stderr
    rows = {r["brokerId"]: r for r in json.loads(status.stdout)["brokers"]}
    assert rows[1]["role"] == "MASTER" and {s["slaveId"] for s in rows[1]["slaves"]} == {2, 3}
    assert rows[2]["role"] == "SLAVE" and rows[2]["state"] == "TRANSFER"
    text = run_cli("haStatus", "-a", controllers.addresses, "--brokerAddr", master.address, "--format", "mqadmin")
    assert text.stdout.startswith(f"\n#MasterAddr\t{master.address}\n#MasterCommitLogMaxOffset\t{new_target}\n"
                                  "#SlaveNum\t2\n")
