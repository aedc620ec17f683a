"""RocketMQ's Java transaction producer on one broker of each kind, ours and RocketMQ's: the same program
(tests/rocketmq/java) and the same steps on both, the same verdicts expected. Both brokers check half messages
every second (``transactionCheckInterval``) once they are five seconds old (``transactionTimeOut``), so the
check-back comes within seconds. RocketMQ's broker writes a verdict's op record in batches, every
``transactionOpBatchInterval`` (3 s by default); with a check interval shorter than that it checks a message
already resolved by a check-back a second time (its op record not yet written) and stores its commit again, so
that message is consumed twice (seen with 5.3.3). Both brokers are given a 100 ms batch interval: RocketMQ's then
writes its op records before its next check, as ours always does (ours writes each at once, and the property has
no effect on it). docs/compatibility.md, the transactional messages row.

A ``TransactionMQProducer`` sends numbered half messages (RMQ_SYS_TRANS_HALF_TOPIC); message ``seq``'s local
transaction commits (``seq % 3 == 0``), rolls back (1) or does not know yet (2, UNKNOW), and the producer answers
every check-back (CHECK_TRANSACTION_STATE 39) with a commit (END_TRANSACTION 37 either way). A push consumer of
the topic, started first, consumes exactly the committed messages and the unknown ones once checked, each once,
and never a rolled-back one: the broker checks back the unknown messages only, each at least once. After the
last unknown message was checked the test waits until the last send is a timeout and three check intervals old,
so a rolled-back message wrongly checked (and then committed by the producer's answer) would be seen.

Transactions across a master's SIGKILL and a producer's crash on our brokers: tests/integration/test_transactions.py.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.interop.test_java_clients import TheirSide, kit_or_skip, our_broker
from tests.rocketmq import SCENARIO_VERSIONS, RocketMQCluster, leftover_pids
from tests.rocketmq.javaclients import ClientRun, JavaClients, wait_for

pytestmark = pytest.mark.timeout(900)

CHECK_INTERVAL_MS, TIMEOUT_MS, OP_BATCH_MS = 1000, 5000, 100
TRANSACTIONS = {"transactionCheckInterval": CHECK_INTERVAL_MS, "transactionTimeOut": TIMEOUT_MS,
                "transactionOpBatchInterval": OP_BATCH_MS}
TOPIC, QUEUES = "JavaTransactionTopic", 4
PRODUCER_GROUP, CONSUMER_GROUP = "java-transactions", "java-transactions-consumer"
ROUNDS = 30
COMMIT, ROLLBACK, UNKNOWN = 0, 1, 2  # seq % 3: what the local transaction answers
START_S, RUN_S, CONSUME_S = 90.0, 120.0, 120.0


@dataclass
class Outcome:
    label: str
    acknowledged: frozenset[int] = frozenset()
    failed: int = 0
    local: dict[int, str] = field(default_factory=dict)  # seq -> the send result's local transaction state
    checked: Counter[int] = field(default_factory=Counter)  # seq -> check-backs
    consumed: Counter[int] = field(default_factory=Counter)  # seq -> deliveries

    def answering(self, answer: int) -> frozenset[int]:
        return frozenset(s for s in self.acknowledged if s % 3 == answer)

    def expected(self) -> frozenset[int]:
        return self.answering(COMMIT) | self.answering(UNKNOWN)

    def verdict(self) -> dict[str, object]:
        wanted_local = {s: ("COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW")[s % 3] for s in self.acknowledged}
        return {"every send acknowledged": len(self.acknowledged) == ROUNDS and not self.failed,
                "the local states as answered": self.local == wanted_local,
                "committed ones consumed": self.answering(COMMIT) <= set(self.consumed),
                "unknown ones checked back": self.answering(UNKNOWN) <= set(self.checked),
                "only unknown ones checked back": set(self.checked) <= self.answering(UNKNOWN),
                "checked ones consumed": self.answering(UNKNOWN) <= set(self.consumed),
                "no rolled-back one consumed": not self.answering(ROLLBACK) & set(self.consumed),
                "nothing else consumed": set(self.consumed) <= self.expected(),
                "each consumed once": all(n == 1 for n in self.consumed.values())}

    def summary(self) -> str:
        return (f"{self.label}: {self.verdict()}; acknowledged {len(self.acknowledged)}, failed {self.failed}, "
                f"check-backs {dict(sorted(self.checked.items()))}, consumed {sorted(self.consumed)} "
                f"(duplicates {sum(n - 1 for n in self.consumed.values())}), local {self.local}")


class Transactions:
    """The steps above against one side (its name server address)."""

    def __init__(self, namesrv: str, clients: JavaClients, folder: Path, label: str) -> None:
        self.namesrv, self.clients, self.folder = namesrv, clients, folder
        self.runs: dict[str, ClientRun] = {}
        self.outcome = Outcome(label)

    def run(self) -> Outcome:
        try:
            created = self._start("create-topic", "create-topic", topic=TOPIC, queues=QUEUES)
            assert created.wait(START_S + 30) == 0, created.describe()
            self._transactions()
        finally:
            for run in self.runs.values():
                if run.running():
                    run.kill()
        return self.outcome

    def _transactions(self) -> None:
        consumer = self._start("push", "consumer", topic=TOPIC, group=CONSUMER_GROUP)
        wait_for(lambda: consumer.history().started, START_S, "the consumer to start", (consumer,))
        producer = self._start("transaction-produce", "producer", topic=TOPIC, group=PRODUCER_GROUP, rounds=ROUNDS,
                               pause_ms=20)
        wait_for(lambda: any(line.startswith("SENT_ALL") for line in producer.history().other), RUN_S,
                 "the transactional sends", (producer,))
        sent = producer.history()
        self.outcome.acknowledged, self.outcome.failed = sent.acknowledged, len(sent.failed)
        unknown, expected = self.outcome.answering(UNKNOWN), self.outcome.expected()
        wait_for(lambda: unknown <= set(self._checked(producer)) and expected <= consumer.history().seqs, CONSUME_S,
                 "the committed and the checked messages consumed", (producer, consumer))
        quiet_from = max(s.at_ms for s in sent.sent) + TIMEOUT_MS + 3 * CHECK_INTERVAL_MS
        wait_for(lambda: time.time() * 1000 >= quiet_from, CONSUME_S, "the last send's check-backs over",
                 (producer, consumer))
        for run in (consumer, producer):
            assert run.stop() == 0, run.describe()
        self.outcome.local = {int(f[2]): f[4] for f in self._lines(producer, "LOCAL")}
        self.outcome.checked = self._checked(producer)
        self.outcome.consumed = Counter(c.seq for c in consumer.history().consumed)

    @staticmethod
    def _lines(run: ClientRun, kind: str) -> list[list[str]]:
        return [f for f in (line.split("\t") for line in run.history().other) if f[0] == kind]

    def _checked(self, producer: ClientRun) -> Counter[int]:
        return Counter(int(f[2]) for f in self._lines(producer, "CHECKED"))

    def _start(self, mode: str, name: str, **options: object) -> ClientRun:
        run = self.clients.start(mode, self.folder / name, namesrv=self.namesrv, **options)
        self.runs[name] = run
        return run


@pytest.fixture(scope="module", params=SCENARIO_VERSIONS)
def clients(request: pytest.FixtureRequest) -> JavaClients:
    version: str = request.param
    return kit_or_skip(lambda: JavaClients(version).build())


@pytest.fixture(scope="module")
def ours(clients: JavaClients, tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    root = tmp_path_factory.mktemp(f"ours-{clients.version}")
    with our_broker(root, **TRANSACTIONS) as side:
        outcome = Transactions(side.namesrv, clients, root / "clients", "mqctl").run()
    print(outcome.summary())
    return outcome


@pytest.fixture(scope="module")
def theirs(clients: JavaClients, tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    root = tmp_path_factory.mktemp(f"rocketmq-{clients.version}")
    cluster = RocketMQCluster(root / "cluster", clients.version, brokers=1, controllers=1, broker_props=TRANSACTIONS)
    kit_or_skip(cluster.start)
    try:
        outcome = Transactions(TheirSide(cluster).namesrv, clients, root / "clients",
                               f"RocketMQ {clients.version}").run()
    finally:
        cluster.stop()
        left = leftover_pids(cluster.root)
        assert not left, f"processes of RocketMQ {clients.version} outlived the stop: {left}"
    print(outcome.summary())
    return outcome


@pytest.fixture(params=["ours", "theirs"])
def outcome(request: pytest.FixtureRequest, clients: JavaClients) -> Outcome:
    found: Outcome = request.getfixturevalue(request.param)
    return found


def test_committed_and_checked_messages_are_consumed_and_rolled_back_ones_never(outcome: Outcome) -> None:
    verdict = outcome.verdict()
    assert verdict["every send acknowledged"] and verdict["the local states as answered"], outcome.summary()
    assert set(outcome.consumed) == outcome.expected(), outcome.summary()
    assert verdict["each consumed once"], outcome.summary()


def test_the_broker_checks_back_exactly_the_unknown_transactions(outcome: Outcome) -> None:
    assert set(outcome.checked) == outcome.answering(UNKNOWN), outcome.summary()


def test_both_sides_agree(ours: Outcome, theirs: Outcome) -> None:
    assert ours.verdict() == theirs.verdict(), f"\n{ours.summary()}\n{theirs.summary()}"
