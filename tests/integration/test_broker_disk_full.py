"""Brokers whose store's filesystem fills up (a tmpfs the test mounts over the store and fills to the last byte).

A master refuses sends with SERVICE_NOT_AVAILABLE (over HTTP and remoting, as RocketMQ answers when its store
is not writeable) once the disk cannot take the next segment, acknowledges nothing it did not store, leaves no
torn bytes past the log's end, keeps serving reads and replication, and takes sends again once space is freed;
after a restart every acknowledged message is there. A slave whose disk fills stops acknowledging (nothing it
could not write), the master drops it from the SyncStateSet and carries on, and the slave catches up and rejoins
once space is freed, with no restart of either.

The retention check of the disk's used ratio (diskSpaceWarningLevelRatio, tests/integration/test_retention.py)
is kept out of the way here (one run an hour), so that the writes themselves meet the full disk.

Before the store handled a refused write, a full disk answered a send ``internal error: OSError`` (HTTP 500,
some connections closed without an answer), and a short write left bytes past the log's end."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from services.broker import contract as bc
from services.common.broker_client import BrokerClient
from services.common.codes import ResponseCode
from services.remoting.command import RequestCode
from tests.integration.conftest import poll
from tests.integration.test_broker import FAST_BROKER, pull_all, runtime, sync_state, wait_role
from tests.integration.test_broker_remoting import send as remoting_send
from tests.support.diskfull import fill, free, small_filesystem
from tests.support.remoting import ask

pytestmark = pytest.mark.integration

SEGMENT = 64 * 1024
STORE_BYTES = 4 * 2**20
TOPIC = "DiskTopic"
PROPS = {**FAST_BROKER, "mappedFileSizeCommitLog": SEGMENT, "maxMessageSize": 16384, "defaultTopicQueueNums": 2,
         "cleanResourceInterval": 3_600_000, "allAckInSyncStateSet": "true", "haSendHeartbeatInterval": 300,
         "checkSyncStateSetPeriod": 500, "haHousekeepingInterval": 3000, "haMaxTimeSlaveNotCatchup": 3000}


@contextlib.contextmanager
def group(root: Path, controller: ControllerCluster, small: int) -> Iterator[list[BrokerNode]]:
    """A master and a slave; replica ``small`` (0: the master, 1: the slave) has its store on a small tmpfs."""
    nodes = [make_broker(root, "broker-d", i, controller.addresses, **PROPS) for i in (1, 2)]
    with small_filesystem(nodes[small].store_dir, STORE_BYTES):
        try:
            nodes[0].start()
            wait_role(nodes[0], "MASTER")
            nodes[1].start()
            wait_role(nodes[1], "SLAVE")
            poll(lambda: len(in_sync(controller)) == 2, 30, "a full SyncStateSet")
            yield nodes
        finally:
            for node in nodes:
                node.kill()


class Producer:
    """Sends numbered batches to a broker over HTTP; remembers every message it got PUT_OK for."""

    def __init__(self, node: BrokerNode) -> None:
        self.node = node
        self.acked: list[str] = []
        self.next = 0

    def send(self, count: int = 5) -> dict[str, Any]:
        """One batch; the answer as the broker gave it (a refusal is returned, not raised)."""
        bodies = [f"m{self.next + i:06d}-" + "x" * 1000 for i in range(count)]
        self.next += count
        with BrokerClient(10.0) as client:
            env = client.request(self.node.address, "POST", bc.SEND_MESSAGES, accept=tuple(range(1, 100)),
                                 json={"messages": [{"topic": TOPIC, "body": b} for b in bodies]})
        answer = {"code": env.code, "remark": env.remark, **(env.data if isinstance(env.data, dict) else {})}
        if env.ok and answer.get("status") == "PUT_OK":
            self.acked += [b[:7] for b in bodies]
        return answer

    def until_refused(self, limit: int = 400) -> dict[str, Any]:
        for _ in range(limit):
            answer = self.send()
            if answer.get("status") != "PUT_OK":
                return answer
        raise AssertionError(f"{limit} batches were all stored on a full disk")


def in_sync(controller: ControllerCluster) -> list[int]:
    return sorted(r["brokerId"] for r in sync_state(controller, "broker-d")["inSyncReplicas"])


def read_all(node: BrokerNode) -> set[str]:
    return {m["body"][:7] for m in pull_all(node, TOPIC, 2)}


def assert_no_torn_segment(node: BrokerNode) -> None:
    """Every segment file ends where the log says: nothing written past the log's end, no empty leftover."""
    info = runtime(node)
    files = sorted(p for p in (node.store_dir / "commitlog").iterdir() if p.name.isdigit())
    assert files and int(files[-1].name) + files[-1].stat().st_size == info["maxOffset"], \
        ([(p.name, p.stat().st_size) for p in files], info["maxOffset"])
    assert all(p.stat().st_size == SEGMENT for p in files[:-1])


def test_a_master_whose_disk_fills_refuses_sends_keeps_serving_reads_and_resumes(
        tmp_path: Path, controller: ControllerCluster) -> None:
    with group(tmp_path, controller, small=0) as (master, slave):
        producer = Producer(master)
        for _ in range(20):
            assert producer.send()["status"] == "PUT_OK"
        filler = fill(master.store_dir)
        refusal = producer.until_refused()  # the segment being written has its blocks: it fills up first
        assert refusal["code"] == ResponseCode.SERVICE_NOT_AVAILABLE, refusal
        assert refusal["status"] == "SERVICE_NOT_AVAILABLE" and "No space left on device" in refusal["remark"]
        assert "the message store is not writable" in refusal["remark"] and "nothing was stored" in refusal["remark"]
        over_remoting = ask(master.address, remoting_send(TOPIC, b"refused", RequestCode.SEND_MESSAGE_V2))
        assert over_remoting.code == ResponseCode.SERVICE_NOT_AVAILABLE, over_remoting.remark
        assert all(producer.send()["code"] == ResponseCode.SERVICE_NOT_AVAILABLE for _ in range(5))

        assert read_all(master) >= set(producer.acked) and read_all(slave) >= set(producer.acked)
        assert "No space left on device" in str(runtime(master)["storeWriteError"]) and master.alive()
        assert_no_torn_segment(master)

        free(filler)
        poll(lambda: producer.send()["status"] == "PUT_OK", 15, "sends to be stored again once space is freed")
        for _ in range(5):
            assert producer.send()["status"] == "PUT_OK"
        assert runtime(master)["storeWriteError"] is None
        master.kill()
        master.start()
        serving = poll(lambda: next((n for n in (master, slave) if runtime(n)["role"] == "MASTER"), None), 60,
                       "a master after the restart")
        assert set(producer.acked) <= read_all(serving)
        assert "torn tail" not in master.log_file.read_text()


def test_a_slave_whose_disk_fills_is_left_behind_and_catches_up_once_space_is_freed(
        tmp_path: Path, controller: ControllerCluster) -> None:
    with group(tmp_path, controller, small=1) as (master, slave):
        producer = Producer(master)
        for _ in range(10):
            assert producer.send()["status"] == "PUT_OK"
        pid = slave.process.pid if slave.process else None
        filler = fill(slave.store_dir)
        # The slave cannot store what comes next: the master drops it from the SyncStateSet and goes on alone.
        alone = [runtime(master)["brokerId"]]
        poll(lambda: producer.send()["status"] == "PUT_OK" and in_sync(controller) == alone, 60,
             "the master to acknowledge writes without the slave")
        for _ in range(40):
            assert producer.send()["status"] == "PUT_OK"
        error = poll(lambda: runtime(slave)["ha"].get("error"), 30, "the slave to report its disk")
        assert error.startswith("local store not writable: cannot write") and "No space left on device" in error
        assert slave.alive() and slave.process is not None and slave.process.pid == pid
        assert_no_torn_segment(slave)

        free(filler)
        poll(lambda: len(in_sync(controller)) == 2 and runtime(slave)["maxOffset"] == runtime(master)["maxOffset"], 60,
             "the slave to catch up and rejoin the SyncStateSet")
        assert runtime(slave)["ha"]["error"] is None
        assert set(producer.acked) <= read_all(slave)


def test_a_master_restarted_on_a_full_disk_stays_fenced_until_there_is_room(
        tmp_path: Path, controller: ControllerCluster) -> None:
    """Taking the role means writing the new masterEpoch in the epoch file: a broker that cannot stays fenced,
    keeps heartbeating, and takes the role once it can (before, its first role change failed silently and it
    never heartbeated again, fenced for good)."""
    node = make_broker(tmp_path, "broker-f", 1, controller.addresses,
                       **{**PROPS, "cleanResourceInterval": 500, "cleanFileForciblyEnable": "false"})
    with small_filesystem(node.store_dir, STORE_BYTES):
        try:
            node.start()
            wait_role(node, "MASTER")
            producer = Producer(node)
            for _ in range(10):
                assert producer.send()["status"] == "PUT_OK"
            node.kill()
            filler = fill(node.store_dir)
            node.start()
            poll(lambda: "cannot become master at epoch" in node.log_file.read_text(), 30,
                 "the broker to say it cannot record its epoch")
            assert runtime(node)["role"] == "FENCED" and node.alive()
            assert producer.send()["code"] == ResponseCode.SERVICE_NOT_AVAILABLE
            free(filler)
            wait_role(node, "MASTER", timeout=30)
            poll(lambda: producer.send()["status"] == "PUT_OK", 30, "sends to be stored once there is room")
            assert set(producer.acked) <= read_all(node)
        finally:
            node.kill()
