"""Retention over real processes: a master and a slave (64 KiB segments, a run every 200 ms, every hour a
deleteWhen hour, fileReservedTime 1 h) delete the segments the test ages by setting their files' times;
consumers are moved past what went; a failover changes nothing of that; and a slave that was away while its
master deleted what it would have needed starts over from the master's oldest data instead of being stuck."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from services.broker import contract as bc
from services.common.broker_client import BrokerClient
from tests.integration.conftest import poll, run_cli
from tests.integration.test_broker import FAST_BROKER, runtime, wait_role

pytestmark = pytest.mark.integration

SEG = 64 * 1024
RETAIN = {**FAST_BROKER, "mappedFileSizeCommitLog": SEG, "maxMessageSize": 16384, "cleanResourceInterval": 200,
          "deleteWhen": ";".join(str(h) for h in range(24)), "fileReservedTime": 1,
          "haSendHeartbeatInterval": 300, "checkSyncStateSetPeriod": 500, "defaultTopicQueueNums": 2}
TOPIC = "Retained"


@pytest.fixture
def pair(tmp_path: Path, controller: ControllerCluster) -> Iterator[list[BrokerNode]]:
    nodes = [make_broker(tmp_path, "broker-r", i, controller.addresses, **RETAIN) for i in (1, 2)]
    nodes[0].start()
    wait_role(nodes[0], "MASTER")
    nodes[1].start()
    wait_role(nodes[1], "SLAVE")
    try:
        yield nodes
    finally:
        for node in nodes:
            node.kill()


def send(node: BrokerNode, count: int, first: int = 0) -> None:
    with BrokerClient(10.0) as client:
        for start in range(first, first + count, 20):
            batch = [{"topic": TOPIC, "body": f"m{i:05d}-" + "x" * 1000} for i in range(start, start + 20)]
            data = client.request(node.address, "POST", bc.SEND_MESSAGES, json={"messages": batch}).data
            assert data["status"] == "PUT_OK", data


def age_segments(node: BrokerNode, keep: int) -> int:
    """Make every commitlog segment but the newest ``keep`` two hours old; returns how many were aged."""
    files = sorted(p for p in (node.store_dir / "commitlog").iterdir() if p.name.isdigit())
    old = time.time() - 2 * 3600
    for path in files[:-keep]:
        os.utime(path, (old, old))
    return len(files[:-keep])


def consume(node: BrokerNode) -> tuple[list[str], list[str]]:
    """Pull every queue from offset 0 as a consumer does; returns (statuses seen first, bodies read)."""
    first, bodies = [], []
    with BrokerClient(5.0) as client:
        for qid in range(2):
            offset, seen = 0, False
            while True:
                data = client.request(node.address, "GET", bc.PULL_MESSAGE, params={
                    "topic": TOPIC, "queueId": qid, "queueOffset": offset, "maxNums": 256}).data
                if not seen:
                    first.append(data["status"])
                    seen = True
                bodies += [m["body"][:6] for m in data["messages"]]
                if data["status"] not in ("FOUND", "OFFSET_TOO_SMALL"):
                    break
                offset = data["nextBeginOffset"]
    return first, bodies


def test_old_segments_go_consumers_move_on_and_a_failover_changes_nothing(pair: list[BrokerNode],
                                                                         controller: ControllerCluster) -> None:
    master, slave = pair
    send(master, 600)
    poll(lambda: runtime(slave)["maxOffset"] == runtime(master)["maxOffset"], 30, "the slave to catch up")
    aged = age_segments(master, keep=2)
    age_segments(slave, keep=2)
    assert aged >= 5
    poll(lambda: runtime(master)["minOffset"] == aged * SEG, 30, "the master to delete the aged segments")
    poll(lambda: runtime(slave)["minOffset"] == aged * SEG, 30, "the slave to delete them too")
    metrics = httpx.get(f"http://{master.address}/metrics").text
    assert f"mqctl_broker_segments_deleted {float(aged)}" in metrics and "mqctl_broker_disk_full 0.0" in metrics

    statuses, bodies = consume(master)
    assert statuses == ["OFFSET_TOO_SMALL"] * 2  # moved to the queue's min offset, then read on
    kept = sorted(bodies)
    assert kept and kept[-1] == "m00599" and len(kept) == len(set(kept))
    assert int(kept[0][1:]) > 0  # the oldest are gone

    master.kill()
    wait_role(slave, "MASTER")
    assert sorted(consume(slave)[1]) == kept  # the new master serves exactly what was kept
    send(slave, 20, first=600)
    cli = run_cli("consumeMessage", "-a", controller.addresses, "-t", TOPIC, "-b", "broker-r", "-n", "5000",
                  "--format", "json")  # from offset 0: moved on to what is kept, as a consumer is
    assert cli.returncode == 0, cli.stderr
    assert len(json.loads(cli.stdout)["messages"]) == len(kept) + 20


def test_a_slave_away_while_its_data_was_deleted_starts_over(pair: list[BrokerNode]) -> None:
    master, slave = pair
    send(master, 100)
    poll(lambda: runtime(slave)["maxOffset"] == runtime(master)["maxOffset"], 30, "the slave to catch up")
    slave.kill()
    send(master, 600, first=100)
    aged = age_segments(master, keep=2)
    poll(lambda: runtime(master)["minOffset"] == aged * SEG, 30, "the master to delete the aged segments")
    assert aged * SEG > 100 * 1000  # past everything the slave holds

    slave.start()
    wait_role(slave, "SLAVE")
    poll(lambda: (runtime(slave)["minOffset"], runtime(slave)["maxOffset"]) == (
        aged * SEG, runtime(master)["maxOffset"]), 30, "the slave to start over at the master's oldest data")
    master_files = sorted((master.store_dir / "commitlog").iterdir())
    slave_files = sorted((slave.store_dir / "commitlog").iterdir())
    assert [p.name for p in slave_files] == [p.name for p in master_files]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(master_files, slave_files))
    assert sorted(consume(slave)[1]) == sorted(consume(master)[1])
