"""Delayed messages on real broker processes (services/broker/schedule/): held until due, delivered no earlier,
and neither lost nor delivered again when the broker is SIGKILLed and restarted (the progress on disk); in a
replicated group, what the master had not yet delivered when it was SIGKILLed is delivered by the new master
(the held messages are in the replicated commitlog, the progress copied by the slaves): every message at least
once, none before its time; a message delivered just before the failover may come twice."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import pytest

from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from services.broker.schedule.delay_offsets import DelayProgress
from services.common.codes import ResponseCode
from services.common.remoting_client import RemotingClient
from services.remoting.message import decode_pulled
from tests.integration.conftest import poll
from tests.integration.test_broker import FAST_BROKER, sync_state, wait_role
from tests.integration.test_broker_remoting import pull, send
from tests.integration.test_replication import HA

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

TOPIC = "DelayedTopic"
LEVELS = {"messageDelayLevel": "1s 3s 6s 20s"}


def call(address: str, *requests: object) -> list[object]:
    async def run() -> list[object]:
        client = RemotingClient(timeout_s=5.0)
        try:
            return [await client.call(address, r) for r in requests]  # type: ignore[arg-type]
        finally:
            await client.close()
    return asyncio.run(run())


def send_delayed(address: str, key: str, level: int) -> int:
    """Send one message at ``level``; a time before it was stored (its due time is at least its wait later)."""
    before = int(time.time() * 1000)
    (answer,) = call(address, send(TOPIC, key.encode(), DELAY=str(level), UNIQ_KEY=key))
    assert answer.code == ResponseCode.SUCCESS, answer.remark  # type: ignore[attr-defined]
    return before


def delivered(address: str) -> list[tuple[str, int]]:
    """(UNIQ_KEY, store time) of every message of the real topic's queue 0, in queue order."""
    found, offset = [], 0
    while True:
        (answer,) = call(address, pull(TOPIC, 0, offset))
        if answer.code != ResponseCode.SUCCESS:  # type: ignore[attr-defined]
            return found
        messages = decode_pulled(answer.body)  # type: ignore[attr-defined]
        found += [(m.properties["UNIQ_KEY"], m.store_timestamp) for m in messages]
        offset = messages[-1].queue_offset + 1


def test_delayed_messages_survive_a_sigkill_of_their_broker(controller: ControllerCluster,
                                                            brokers: list[BrokerNode], tmp_path: Path) -> None:
    node = make_broker(tmp_path, "broker-a", 1, controller.addresses, **FAST_BROKER, **LEVELS)
    brokers.append(node)
    node.start()
    wait_role(node, "MASTER")
    sent_early = send_delayed(node.address, "early", 1)
    sent_late = send_delayed(node.address, "late", 3)  # 6 s
    assert not any(key == "late" for key, _ in delivered(node.address))
    poll(lambda: [k for k, _ in delivered(node.address)] == ["early"], 30, "the 1 s message delivered")
    # its delivery counted on disk (written just after the delivery is stored: a SIGKILL in between would
    # deliver it again, at least once)
    progress = node.store_dir / "config" / "delayOffset.json"
    poll(lambda: progress.exists() and DelayProgress.decode(progress.read_bytes()).level(1) == 1, 30,
         "the delivery progress on disk")
    node.kill()  # before the 6 s message is due
    node.start()
    wait_role(node, "MASTER")
    poll(lambda: len(delivered(node.address)) >= 2, 60, "the 6 s message delivered after the restart")
    found = delivered(node.address)
    assert [k for k, _ in found] == ["early", "late"]  # each once: the first not again after the restart
    stored = dict(found)
    assert stored["early"] >= sent_early + 1000 and stored["late"] >= sent_late + 6000  # never early


def test_a_new_master_delivers_what_the_killed_master_had_not(controllers: ControllerCluster,
                                                               tmp_path: Path) -> None:
    nodes = [make_broker(tmp_path, "broker-a", i, controllers.addresses, **HA, **LEVELS) for i in (1, 2, 3)]
    try:
        nodes[0].start()
        wait_role(nodes[0], "MASTER")
        for node in nodes[1:]:
            node.start()
        poll(lambda: len(sync_state(controllers, "broker-a")["inSyncReplicas"]) == 3, 60, "all three in sync")
        master = nodes[0]
        acked = {f"short-{i}": send_delayed(master.address, f"short-{i}", 1) for i in range(5)}
        poll(lambda: len(delivered(master.address)) >= 5, 30, "the 1 s messages delivered by the first master")
        acked |= {f"long-{i}": send_delayed(master.address, f"long-{i}", 4) for i in range(5)}  # 20 s
        master.kill()
        new = poll(lambda: (ss := sync_state(controllers, "broker-a"))["masterAddress"] not in (None, master.address)
                   and ss["masterAddress"], 60, "a new master")
        wait_role(next(n for n in nodes if n.address == new), "MASTER")
        poll(lambda: set(acked) <= {k for k, _ in delivered(new)}, 90, "every message delivered by the new master")
        found = delivered(new)
        counts = Counter(k for k, _ in found)
        assert all(counts[k] == 1 for k in acked if k.startswith("long")), counts  # not delivered before the kill
        stored = dict(found)
        for key, before in acked.items():  # never before its time
            assert stored[key] >= before + (20_000 if key.startswith("long") else 1000), (key, stored[key], before)
    finally:
        for node in nodes:
            node.kill()
