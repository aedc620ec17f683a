"""A power loss of a SYNC_FLUSH broker loses no acknowledged message: a real broker (64 KiB segments, so the
log spans several files) acknowledges sends, is killed with SIGKILL, and every file of its store is put back to
exactly what it had fsynced (tests/support/powerloss.py): commitlog, consume queues, checkpoint, epoch file,
identity and key. It restarts, registers under the same id, and serves every acknowledged message. (Under
ASYNC_FLUSH what is acknowledged but not yet flushed can be lost: docs/storage.md, 'Durability'.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from services.broker import contract as bc
from services.common.broker_client import BrokerClient
from tests.integration.test_broker import FAST_BROKER, wait_role
from tests.support.powerloss import SHADOW_ENV, power_loss

pytestmark = pytest.mark.integration

TOPIC = "Durable"


@pytest.fixture
def broker(tmp_path: Path, controller: ControllerCluster) -> Iterator[BrokerNode]:
    node = make_broker(tmp_path, "broker-p", 1, controller.addresses, **FAST_BROKER, flushDiskType="SYNC_FLUSH",
                       mappedFileSizeCommitLog=64 * 1024, maxMessageSize=16384, defaultTopicQueueNums=2)
    node.env[SHADOW_ENV] = "1"
    node.start()
    try:
        wait_role(node, "MASTER")
        yield node
    finally:
        node.kill()


def read_all(node: BrokerNode) -> list[str]:
    bodies: list[str] = []
    with BrokerClient(5.0) as client:
        for qid in range(2):
            offset = 0
            while True:
                pulled = client.pull(node.address, TOPIC, qid, offset, 256)
                bodies += [m.body or "" for m in pulled.messages]
                if pulled.status != "FOUND":
                    break
                offset = pulled.nextBeginOffset
    return bodies


def test_every_acknowledged_message_survives_a_power_loss(broker: BrokerNode) -> None:
    acked: list[str] = []
    with BrokerClient(10.0) as client:
        for start in range(0, 300, 10):
            batch = [f"m{i:04d}-" + "x" * 500 for i in range(start, start + 10)]
            data = client.request(broker.address, "POST", bc.SEND_MESSAGES,
                                  json={"messages": [{"topic": TOPIC, "body": b} for b in batch]}).data
            assert data["status"] == "PUT_OK", data
            acked += batch
    identity = (broker.store_dir / "brokerIdentity").read_text()
    broker.kill()
    outcome = power_loss(broker.store_dir)
    kept = [name for name, what in outcome.items() if what == "kept"]
    assert any(name.startswith("commitlog/") for name in kept) and "brokerIdentity" in kept, outcome
    broker.start()
    wait_role(broker, "MASTER")
    assert (broker.store_dir / "brokerIdentity").read_text() == identity  # the same id, not a new one
    assert sorted(read_all(broker)) == sorted(acked)
