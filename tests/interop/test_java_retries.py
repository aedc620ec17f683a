"""RocketMQ's Java clients with delayed messages and consume failures, on one broker of each kind, ours and
RocketMQ's: the same program (tests/rocketmq/java) and the same steps on both, the same verdicts expected.
Both brokers run with ``messageDelayLevel=1s 2s 3s 4s 5s`` to keep the waits short.

* **Delayed messages**: a producer sends numbered messages at delay level 2 (``setDelayTimeLevel``, 2 s here);
  a push consumer consumes every acknowledged one, none sooner than 2 s after its send was acknowledged (less
  the acknowledgement's own round trip, ``ACK_MARGIN_MS``).
* **A poison message** (CONSUMER_SEND_MSG_BACK, 36): a push consumer with ``maxReconsumeTimes`` 2 refuses every
  fifth message each time it comes. Each is delivered three times, with reconsume times 0, 1 and 2, the retries
  no sooner than levels 3 and 4 (3 s, then 4 s: RocketMQ's ``3 + reconsumeTimes``) after the delivery before;
  then it is in ``%DLQ%<group>``, where a consumer of that topic reads exactly the poison messages. The others
  are consumed once each.

Delayed messages across a master's SIGKILL on our brokers: tests/integration/test_delayed_messages.py.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.interop.test_java_clients import TheirSide, kit_or_skip, our_broker
from tests.rocketmq import SCENARIO_VERSIONS, RocketMQCluster, leftover_pids
from tests.rocketmq.javaclients import ClientRun, JavaClients, wait_for

pytestmark = pytest.mark.timeout(900)

LEVELS = {"messageDelayLevel": "1s 2s 3s 4s 5s"}
DELAY_TOPIC, POISON_TOPIC, QUEUES = "JavaDelayTopic", "JavaPoisonTopic", 4
DELAY_GROUP, POISON_GROUP, DLQ_GROUP = "java-delay", "java-poison", "java-dlq"
ROUNDS, POISON_EVERY, MAX_RECONSUME = 20, 5, 2
DELAY_MS, RETRY_WAITS_MS = 2000, (3000, 4000)
#: How much sooner than its due time a consumption may be seen: a send's acknowledgement is recorded after the
#: broker stored the message, a round trip later.
ACK_MARGIN_MS = 500
START_S, RUN_S, CONSUME_S = 90.0, 120.0, 150.0


@dataclass
class Outcome:
    label: str
    delayed_sent: dict[int, int] = field(default_factory=dict)  # seq -> acknowledged at
    delayed_consumed: dict[int, list[int]] = field(default_factory=dict)  # seq -> consumed at
    poison_sent: frozenset[int] = frozenset()
    attempts: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # seq -> (at, reconsume times)
    consumed: dict[int, int] = field(default_factory=dict)  # seq -> times consumed by the poison group
    dead: dict[int, int] = field(default_factory=dict)  # seq -> times read from the DLQ

    def early(self) -> list[int]:
        return [s for s, at in self.delayed_sent.items()
                if any(c < at + DELAY_MS - ACK_MARGIN_MS for c in self.delayed_consumed.get(s, []))]

    def poisons(self) -> frozenset[int]:
        return frozenset(s for s in self.poison_sent if s % POISON_EVERY == 0)

    def backoff_ok(self) -> bool:
        for seq in self.poisons():
            tries = self.attempts.get(seq, [])
            if [t for _, t in tries[:3]] != [0, 1, 2]:
                return False
            gaps = [b[0] - a[0] for a, b in itertools.pairwise(tries[:3])]
            if any(gap < wait - ACK_MARGIN_MS for gap, wait in zip(gaps, RETRY_WAITS_MS)):
                return False
        return True

    def verdict(self) -> dict[str, object]:
        return {"every delayed message consumed": set(self.delayed_sent) <= set(self.delayed_consumed),
                "none early": not self.early(),
                "three deliveries of each poison, with the backoff": self.backoff_ok(),
                "the poisons in the DLQ": set(self.dead) == set(self.poisons()),
                "the rest consumed": set(self.consumed) == set(self.poison_sent - self.poisons())}

    def summary(self) -> str:
        return (f"{self.label}: {self.verdict()}; delayed sent {len(self.delayed_sent)}, consumed "
                f"{len(self.delayed_consumed)}, early {self.early()[:5]}; attempts "
                f"{ {s: self.attempts.get(s) for s in sorted(self.poisons())} }, dead {self.dead}, consumed "
                f"{len(self.consumed)} of {len(self.poison_sent - self.poisons())}")


class Retries:
    """The steps above against one side (its name server address)."""

    def __init__(self, namesrv: str, clients: JavaClients, folder: Path, label: str) -> None:
        self.namesrv, self.clients, self.folder = namesrv, clients, folder
        self.runs: dict[str, ClientRun] = {}
        self.outcome = Outcome(label)

    def run(self) -> Outcome:
        try:
            for topic in (DELAY_TOPIC, POISON_TOPIC):
                created = self._start("create-topic", f"create-{topic}", topic=topic, queues=QUEUES)
                assert created.wait(START_S + 30) == 0, created.describe()
            self._delayed()
            self._poison()
        finally:
            for run in self.runs.values():
                if run.running():
                    run.kill()
        return self.outcome

    def _delayed(self) -> None:
        consumer = self._consumer("push", "delay-consumer", DELAY_TOPIC, DELAY_GROUP)
        produced = self._start("produce", "delayed", topic=DELAY_TOPIC, modes="delayed", rounds=ROUNDS, pause_ms=10)
        assert produced.wait(RUN_S) == 0, produced.describe()
        sent = produced.history().sent
        acked = {s.seq: s.at_ms for s in sent if s.status == "SEND_OK"}
        wait_for(lambda: set(acked) <= consumer.history().seqs, CONSUME_S, "the delayed messages consumed",
                 (consumer,))
        assert consumer.stop() == 0, consumer.describe()
        self.outcome.delayed_sent = acked
        for c in consumer.history().consumed:
            self.outcome.delayed_consumed.setdefault(c.seq, []).append(c.at_ms)

    def _poison(self) -> None:
        poison = self._consumer("poison", "poison-consumer", POISON_TOPIC, POISON_GROUP,
                                poison_every=POISON_EVERY, max_reconsume=MAX_RECONSUME)
        dlq = self._consumer("push", "dlq-consumer", f"%DLQ%{POISON_GROUP}", DLQ_GROUP)
        produced = self._start("produce", "poison-sends", topic=POISON_TOPIC, modes="sync", rounds=ROUNDS, pause_ms=10)
        assert produced.wait(RUN_S) == 0, produced.describe()
        self.outcome.poison_sent = frozenset(produced.history().acknowledged)
        poisons = self.outcome.poisons()
        wait_for(lambda: poisons <= dlq.history().seqs, CONSUME_S, "the poison messages in the DLQ", (poison, dlq))
        for run in (poison, dlq):
            assert run.stop() == 0, run.describe()
        for line in poison.history().other:
            fields = line.split("\t")
            if fields[0] == "ATTEMPT":
                self.outcome.attempts.setdefault(int(fields[2]), []).append((int(fields[1]), int(fields[3])))
        for c in poison.history().consumed:
            self.outcome.consumed[c.seq] = self.outcome.consumed.get(c.seq, 0) + 1
        for c in dlq.history().consumed:
            self.outcome.dead[c.seq] = self.outcome.dead.get(c.seq, 0) + 1

    def _consumer(self, mode: str, name: str, topic: str, group: str, **options: object) -> ClientRun:
        run = self._start(mode, name, topic=topic, group=group, **options)
        wait_for(lambda: run.history().started, START_S, f"{name} to start", (run,))
        return run

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
    with our_broker(root, **LEVELS) as side:
        outcome = Retries(side.namesrv, clients, root / "clients", "mqctl").run()
    print(outcome.summary())
    return outcome


@pytest.fixture(scope="module")
def theirs(clients: JavaClients, tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    root = tmp_path_factory.mktemp(f"rocketmq-{clients.version}")
    cluster = RocketMQCluster(root / "cluster", clients.version, brokers=1, controllers=1, broker_props=LEVELS)
    kit_or_skip(cluster.start)
    try:
        outcome = Retries(TheirSide(cluster).namesrv, clients, root / "clients", f"RocketMQ {clients.version}").run()
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


def test_delayed_messages_are_consumed_and_none_before_its_time(outcome: Outcome) -> None:
    assert set(outcome.delayed_sent) <= set(outcome.delayed_consumed), outcome.summary()
    assert not outcome.early(), outcome.summary()


def test_a_poison_message_is_retried_with_backoff_then_reaches_the_dead_letter_queue(outcome: Outcome) -> None:
    assert outcome.backoff_ok(), outcome.summary()
    assert set(outcome.dead) == set(outcome.poisons()), outcome.summary()
    assert set(outcome.consumed) == set(outcome.poison_sent - outcome.poisons()), outcome.summary()


def test_both_sides_agree(ours: Outcome, theirs: Outcome) -> None:
    assert ours.verdict() == theirs.verdict(), f"\n{ours.summary()}\n{theirs.summary()}"
