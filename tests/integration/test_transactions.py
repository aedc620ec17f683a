"""Transactional messages on real broker processes (services/broker/transaction/): a half message is invisible
until committed, a rolled-back one never appears, one whose producer "crashed" before END_TRANSACTION is
resolved by the check-back to another producer of its group; the check progress survives a SIGKILL of the
broker; and in a replicated group, a transaction left open when the master is SIGKILLed is checked and committed
by the new master, while one committed and acknowledged before the kill is neither undone nor stored twice."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from services.broker.transaction.half import COMMIT, OP_TOPIC, ROLLBACK
from services.broker.transaction.progress import TransactionProgress
from services.common.codes import ResponseCode
from services.common.remoting_client import RemotingClient
from services.remoting.command import RequestCode
from services.remoting.message import decode_pulled
from tests.integration.conftest import poll
from tests.integration.test_broker import FAST_BROKER, sync_state, wait_role
from tests.integration.test_broker_remoting import offsets, pull
from tests.integration.test_replication import HA
from tests.integration.txn_producer import TxnProducer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

TOPIC = "TxnTopic"
CHECKS = {"transactionCheckInterval": 500, "transactionTimeOut": 2000}


def consumed(address: str, queue_id: int = 1) -> list[str]:
    """UNIQ_KEY of every message in the real topic's queue, in queue order."""
    async def run() -> list[str]:
        client = RemotingClient(timeout_s=5.0)
        found: list[str] = []
        try:
            while True:
                answer = await client.call(address, pull(TOPIC, queue_id, len(found)))
                if answer.code != ResponseCode.SUCCESS:
                    return found
                found += [m.properties["UNIQ_KEY"] for m in decode_pulled(answer.body)]
        finally:
            await client.close()
    return asyncio.run(run())


def op_records(address: str) -> int:
    async def run() -> int:
        client = RemotingClient(timeout_s=5.0)
        try:
            answer = await client.call(address, offsets(RequestCode.GET_MAX_OFFSET, OP_TOPIC, 0))
            return int(answer.ext_fields.get("offset", "0"))
        finally:
            await client.close()
    return asyncio.run(run())


def test_commit_rollback_and_a_check_back_after_the_producer_crashed(controller: ControllerCluster,
                                                                      brokers: list[BrokerNode],
                                                                      tmp_path: Path) -> None:
    node = make_broker(tmp_path, "broker-a", 1, controller.addresses, **FAST_BROKER, **CHECKS)
    brokers.append(node)
    node.start()
    wait_role(node, "MASTER")
    first = TxnProducer(node.address, "txn-group")
    try:
        answers = {key: first.half(TOPIC, key) for key in ("commit", "rollback", "open")}
        assert all(a.code == ResponseCode.SUCCESS and a.ext_fields["transactionId"] == k for k, a in answers.items())
        assert consumed(node.address) == []  # half messages are invisible
        first.end(answers["commit"], COMMIT)
        first.end(answers["commit"], COMMIT)  # a repeated commit is stored once
        first.end(answers["rollback"], ROLLBACK)
        poll(lambda: consumed(node.address) == ["commit"], 20, "the committed message")
    finally:
        first.close()  # crashes with "open" neither committed nor rolled back
    second = TxnProducer(node.address, "txn-group", decide=lambda tid: COMMIT)
    try:
        poll(lambda: consumed(node.address) == ["commit", "open"], 30, "the open transaction checked and committed")
        assert [tid for tid, _ in second.checks] == ["open"]  # the rolled-back and committed ones are not asked
        progress = node.store_dir / "config" / "transactionProgress.json"
        poll(lambda: progress.exists() and TransactionProgress.decode(progress.read_bytes()).half_offset >= 4, 20,
             "the check progress on disk")
    finally:
        second.close()
    node.kill()
    node.start()
    wait_role(node, "MASTER")
    third = TxnProducer(node.address, "txn-group", decide=lambda tid: COMMIT)
    try:
        later = third.half(TOPIC, "after-restart")  # left open: checked after the restart
        assert later.code == ResponseCode.SUCCESS
        poll(lambda: consumed(node.address) == ["commit", "open", "after-restart"], 30, "checked after the restart")
        assert [tid for tid, _ in third.checks] == ["after-restart"]  # nothing resolved before is asked again
    finally:
        third.close()


def test_an_unknown_verdict_is_checked_again_up_to_transaction_check_max(controller: ControllerCluster,
                                                                         brokers: list[BrokerNode],
                                                                         tmp_path: Path) -> None:
    node = make_broker(tmp_path, "broker-a", 1, controller.addresses, **FAST_BROKER, **CHECKS,
                       transactionCheckMax=2)
    brokers.append(node)
    node.start()
    wait_role(node, "MASTER")
    producer = TxnProducer(node.address, "txn-group", decide=lambda tid: 0)  # UNKNOW, every time
    try:
        assert producer.half(TOPIC, "never").code == ResponseCode.SUCCESS
        poll(lambda: len(producer.checks) >= 2, 30, "two check-backs")
        discarded = node.store_dir / "consumequeue" / "TRANS_CHECK_MAX_TIME_TOPIC"
        poll(discarded.exists, 30, "the message discarded after transactionCheckMax checks")
        assert producer.checks == [("never", 1), ("never", 2)]
        assert consumed(node.address) == []
    finally:
        producer.close()


def test_a_new_master_resolves_what_the_killed_master_had_not(controllers: ControllerCluster,
                                                               tmp_path: Path) -> None:
    nodes = [make_broker(tmp_path, "broker-a", i, controllers.addresses, **HA, **CHECKS) for i in (1, 2, 3)]
    producers: list[TxnProducer] = []
    try:
        nodes[0].start()
        wait_role(nodes[0], "MASTER")
        for node in nodes[1:]:
            node.start()
        poll(lambda: len(sync_state(controllers, "broker-a")["inSyncReplicas"]) == 3, 60, "all three in sync")
        master = nodes[0]
        producer = TxnProducer(master.address, "txn-group")
        producers.append(producer)
        answers = {key: producer.half(TOPIC, key) for key in ("done", "gone", "open")}
        assert all(a.code == ResponseCode.SUCCESS for a in answers.values())
        producer.end(answers["done"], COMMIT)
        producer.end(answers["gone"], ROLLBACK)
        poll(lambda: consumed(master.address) == ["done"], 20, "the commit on the first master")
        poll(lambda: op_records(master.address) == 2, 20, "the commit's and the rollback's op records stored")
        producer.close()
        master.kill()
        new = poll(lambda: (ss := sync_state(controllers, "broker-a"))["masterAddress"] not in (None, master.address)
                   and ss["masterAddress"], 60, "a new master")
        wait_role(next(n for n in nodes if n.address == new), "MASTER")
        checker = TxnProducer(new, "txn-group", decide=lambda tid: COMMIT if tid == "open" else ROLLBACK)
        producers.append(checker)
        poll(lambda: "open" in consumed(new), 60, "the open transaction committed by the new master's check-back")
        counts = Counter(consumed(new))
        assert counts == {"done": 1, "open": 1}, counts  # the commit not undone nor doubled, the rollback kept
        assert {tid for tid, _ in checker.checks} == {"open"}
    finally:
        for p in producers:
            p.close()
        for node in nodes:
            node.kill()
