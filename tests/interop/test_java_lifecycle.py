"""RocketMQ's Java consumers on one broker, ours and RocketMQ's, for each tested client version: the same
program (tests/rocketmq/java) and the same steps on both, the same verdicts expected.

* **Orderly consumption across a rebalance** (LOCK_BATCH_MQ 41, UNLOCK_BATCH_MQ 42): a push consumer with
  ``MessageListenerOrderly`` consumes a first run of numbered sync sends; a second consumer of the group
  joins, the queues are shared out again, and a second run is sent. Every acknowledged message is consumed;
  each consumer consumes each queue in queue order; and a queue that changes hands does so once, cleanly:
  everything the first owner consumed of it comes before anything the second did (the lock's point).
* **Consumption from a timestamp** (SEARCH_OFFSET_BY_TIMESTAMP 29): a first run, a time ``t`` after its last
  acknowledgement, a second run; a lite pull consumer asks every queue's ``offsetForTimestamp(t)``, seeks
  there and consumes exactly the second run. The broker's answer with each boundary type is also asked over
  remoting, before, between and after the runs. Then a push consumer of a new group starts with
  ``CONSUME_FROM_TIMESTAMP`` at ``t`` (a whole second: the client's ``consumeTimestamp`` has no milliseconds):
  it reads both runs on both brokers, which answer a new group's offset 0 (see its test).
* **An administrator's reset while the group consumes** (INVOKE_BROKER_TO_RESET_OFFSET 222): with that push
  consumer still running, real mqadmin's ``resetOffsetByTime -s t`` moves the group back to ``t``; the
  consumer then reads the second run again, and only it. mqctl's ``resetOffsetByTime --format mqadmin`` for
  the same reset then prints what mqadmin printed.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from services.common.remoting_client import RemotingClient
from services.remoting import broker_headers as bh
from services.remoting.command import make_request
from tests.interop.admin_sides import mqctl, succeeded
from tests.interop.test_java_clients import TheirSide, kit_or_skip, our_broker
from tests.rocketmq import SCENARIO_VERSIONS, RocketMQCluster, leftover_pids
from tests.rocketmq.client_history import Consumed
from tests.rocketmq.cluster import mqadmin
from tests.rocketmq.fetch import RocketMQ, require_java
from tests.rocketmq.javaclients import ClientRun, JavaClients, wait_for
from tests.rocketmq.jvm import poll
from tests.rocketmq.servers import Runtime

pytestmark = pytest.mark.timeout(900)

ORDERLY_TOPIC, TIME_TOPIC, QUEUES = "JavaOrderlyTopic", "JavaTimeTopic", 4
ORDERLY_GROUP, SEEK_GROUP, PUSH_T_GROUP = "java-orderly", "java-seek", "java-push-from-t"
ROUNDS, SECOND_FIRST_SEQ = 60, 10_000
START_S, RUN_S, CONSUME_S = 90.0, 120.0, 120.0


@dataclass
class Outcome:
    label: str
    acknowledged: frozenset[int] = frozenset()
    consumed: dict[str, tuple[Consumed, ...]] = field(default_factory=dict)
    before_t: dict[int, int] = field(default_factory=dict)  # queue -> messages of the first time run
    offsets_for_t: dict[int, int] = field(default_factory=dict)
    time_runs: tuple[frozenset[int], frozenset[int]] = (frozenset(), frozenset())
    boundaries: dict[str, int] = field(default_factory=dict)
    expected_boundaries: dict[str, int] = field(default_factory=dict)
    consumed_again: frozenset[int] = frozenset()  # what the push consumer read again after the reset
    reset_texts: dict[str, str] = field(default_factory=dict)  # resetOffsetByTime's output, by tool

    def orderly_lost(self) -> frozenset[int]:
        return self.acknowledged - {c.seq for run in ("orderly-a", "orderly-b") for c in self.consumed.get(run, ())}

    def out_of_order(self) -> list[str]:
        """Per consumer and queue, offsets that do not increase."""
        found = []
        for run in ("orderly-a", "orderly-b"):
            for queue in range(QUEUES):
                offsets = [c.queue_offset for c in self.consumed.get(run, ()) if c.queue_id == queue]
                if any(b <= a for a, b in itertools.pairwise(offsets)):
                    found.append(f"{run} queue {queue}: {offsets[:40]}")
        return found

    def interleaved(self) -> list[int]:
        """Queues both consumers consumed with their times interleaved (not one handover)."""
        found = []
        for queue in range(QUEUES):
            a = [c.at_ms for c in self.consumed.get("orderly-a", ()) if c.queue_id == queue]
            b = [c.at_ms for c in self.consumed.get("orderly-b", ()) if c.queue_id == queue]
            if a and b and not (max(a) <= min(b) or max(b) <= min(a)):
                found.append(queue)
        return found

    def verdict(self) -> dict[str, object]:
        seek = {c.seq for c in self.consumed.get("seek", ())}
        pushed = {c.seq for c in self.consumed.get("push-from-t", ())}
        return {"pushed from t": "the second run" if pushed == set(self.time_runs[1]) else
                "both runs" if pushed == set(self.time_runs[0]) | set(self.time_runs[1]) else sorted(pushed)[:20],
                "orderly lost nothing": not self.orderly_lost(), "orderly in queue order": not self.out_of_order(),
                "one clean handover per queue": not self.interleaved(),
                "the joining consumer took queues": bool(self.consumed.get("orderly-b")),
                "offsets for t as stored": self.offsets_for_t == self.before_t,
                "read again after the reset to t": "the second run" if self.consumed_again == self.time_runs[1]
                else sorted(self.consumed_again)[:20],
                "mqctl prints the reset as mqadmin does": self.reset_texts.get("mqctl") == self.reset_texts.get("mqadmin"),
                "consumed from t exactly the second run": seek == set(self.time_runs[1]),
                "boundaries": self.boundaries == self.expected_boundaries}

    def summary(self) -> str:
        return (f"{self.label}: {self.verdict()}; acknowledged {len(self.acknowledged)}, lost "
                f"{sorted(self.orderly_lost())[:10]}, out of order {self.out_of_order()[:2]}, interleaved "
                f"{self.interleaved()}, consumed {({k: len(v) for k, v in self.consumed.items()})}, offsets for t "
                f"{self.offsets_for_t} (stored before t {self.before_t}), boundaries {self.boundaries} (wanted "
                f"{self.expected_boundaries}), resetOffsetByTime printed {self.reset_texts}")


class Lifecycle:
    """The steps above against one side (a name server address and its broker's address)."""

    def __init__(self, namesrv: str, broker: str, clients: JavaClients, runtime: Runtime, folder: Path,
                 label: str) -> None:
        self.namesrv, self.broker, self.clients, self.runtime, self.folder = namesrv, broker, clients, runtime, folder
        self.runs: dict[str, ClientRun] = {}
        self.outcome = Outcome(label)

    def run(self) -> Outcome:
        try:
            for topic in (ORDERLY_TOPIC, TIME_TOPIC):
                created = self._start("create-topic", f"create-{topic}", topic=topic, queues=QUEUES)
                assert created.wait(START_S + 30) == 0, created.describe()
            self._orderly()
            self._from_a_timestamp()
        finally:
            for run in self.runs.values():
                if run.running():
                    run.kill()
        return self.outcome

    def _orderly(self) -> None:
        first = self._consumer("orderly-a")
        acked = self._produce("orderly-1", ORDERLY_TOPIC, 0)
        wait_for(lambda: acked <= first.history().seqs, CONSUME_S, "the first run consumed in order", (first,))
        second = self._consumer("orderly-b")
        acked |= self._produce("orderly-2", ORDERLY_TOPIC, SECOND_FIRST_SEQ)
        wait_for(lambda: acked <= first.history().seqs | second.history().seqs, CONSUME_S,
                 "both runs consumed by the two orderly consumers", (first, second))
        for run in (first, second):
            assert run.stop() == 0, run.describe()
        self.outcome.acknowledged = frozenset(acked)
        self.outcome.consumed.update({name: self.runs[name].history().consumed for name in ("orderly-a", "orderly-b")})

    def _from_a_timestamp(self) -> None:
        before = self._produce("time-1", TIME_TOPIC, 0)
        sent = self.runs["time-1"].history().sent
        t = (max(s.at_ms for s in sent) // 1000 + 1) * 1000  # every message of the first run was stored by then
        poll(lambda: time.time() * 1000 > t + 1 or None, 5.0, "the clock past t")  # a whole second: see the top
        after = self._produce("time-2", TIME_TOPIC, SECOND_FIRST_SEQ)
        self.outcome.time_runs = (frozenset(before), frozenset(after))
        self.outcome.before_t = dict(Counter(s.queue_id for s in sent))
        seek = self._start("seek-time", "seek", topic=TIME_TOPIC, group=SEEK_GROUP, timestamp=t)
        wait_for(lambda: after <= seek.history().seqs, CONSUME_S, "the second run consumed from t", (seek,))
        assert seek.stop() == 0, seek.describe()
        history = seek.history()
        self.outcome.consumed["seek"] = history.consumed
        self.outcome.offsets_for_t = {int(f[2]): int(f[3]) for f in (line.split("\t") for line in history.other)
                                      if f[0] == "OFFSET" and int(f[3]) > 0}
        self._boundaries(t)
        push = self._start("push", "push-from-t", topic=TIME_TOPIC, group=PUSH_T_GROUP, from_timestamp=t)
        wait_for(lambda: after <= push.history().seqs, CONSUME_S, "the push consumer from t consumed", (push,))
        self._reset_to(t, push, after)
        assert push.stop() == 0, push.describe()
        self.outcome.consumed["push-from-t"] = push.history().consumed

    def _reset_to(self, t: int, push: ClientRun, after: set[int]) -> None:
        """Real mqadmin resets the running push consumer's group to t; it reads the second run again. Then
        mqctl asks the same reset, and prints it as mqadmin does."""
        args = ("resetOffsetByTime", "-g", PUSH_T_GROUP, "-t", TIME_TOPIC, "-s", str(t))
        done = mqadmin(self.runtime, self.folder / "mqadmin", args, self.namesrv)
        self.outcome.reset_texts["mqadmin"] = succeeded("mqadmin", args, done)

        def twice() -> frozenset[int]:
            counts = Counter(c.seq for c in push.history().consumed)
            return frozenset(seq for seq, count in counts.items() if count > 1)
        wait_for(lambda: after <= twice(), CONSUME_S, "the second run consumed again after the reset", (push,))
        self.outcome.consumed_again = twice()
        mine = (args[0], "--format", "mqadmin", "-n", self.namesrv, *args[1:])
        self.outcome.reset_texts["mqctl"] = succeeded("mqctl", mine, mqctl(*mine))

    def _boundaries(self, t: int) -> None:
        """Queue 0's offset by time, over remoting, before, between and after the runs, with each boundary."""
        stored = self.outcome.before_t.get(0, 0)
        total = stored + sum(1 for s in self.runs["time-2"].history().sent if s.queue_id == 0)
        self.outcome.expected_boundaries = {"0 LOWER": 0, "0 UPPER": 0, "t LOWER": stored, "t UPPER": stored - 1,
                                            "end LOWER": total, "end UPPER": total - 1}
        times = {"0": 0, "t": t, "end": int(time.time() * 1000) + 60_000}

        async def ask() -> dict[str, int]:
            client, found = RemotingClient(5.0), {}
            try:
                for name, at in times.items():
                    for boundary in ("LOWER", "UPPER"):
                        answer = await client.call(self.broker, make_request(bh.SEARCH_OFFSET_BY_TIMESTAMP, 0, {
                            "topic": TIME_TOPIC, "queueId": "0", "timestamp": str(at), "boundaryType": boundary}))
                        found[f"{name} {boundary}"] = int(answer.ext_fields.get("offset", "-1"))
            finally:
                await client.close()
            return found
        self.outcome.boundaries = asyncio.run(ask())

    def _produce(self, name: str, topic: str, first: int) -> set[int]:
        run = self._start("produce", name, topic=topic, modes="sync", rounds=ROUNDS, first=first, pause_ms=10)
        assert run.wait(RUN_S) == 0, run.describe()
        return set(run.history().acknowledged)

    def _consumer(self, name: str) -> ClientRun:
        run = self._start("push", name, topic=ORDERLY_TOPIC, group=ORDERLY_GROUP, listener="orderly", threads=2)
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
    with our_broker(root) as side:
        master = side.master()
        assert master is not None
        runtime = Runtime(require_java(), RocketMQ(clients.version).fetch(), root / "home")
        outcome = Lifecycle(side.namesrv, master, clients, runtime, root / "clients", "mqctl").run()
    print(outcome.summary())
    return outcome


@pytest.fixture(scope="module")
def theirs(clients: JavaClients, tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    root = tmp_path_factory.mktemp(f"rocketmq-{clients.version}")
    cluster = RocketMQCluster(root / "cluster", clients.version, brokers=1, controllers=1)
    kit_or_skip(cluster.start)
    try:
        side = TheirSide(cluster)
        assert cluster.runtime is not None
        outcome = Lifecycle(side.namesrv, side.replicas()[0], clients, cluster.runtime, root / "clients",
                            side.label).run()
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


def test_orderly_consumers_consume_every_message_in_queue_order_across_a_rebalance(outcome: Outcome) -> None:
    assert not outcome.orderly_lost(), outcome.summary()
    assert not outcome.out_of_order(), outcome.summary()
    assert not outcome.interleaved() and outcome.consumed.get("orderly-b"), outcome.summary()


def test_a_consumer_reads_from_a_timestamp_exactly_what_was_stored_after_it(outcome: Outcome) -> None:
    assert outcome.offsets_for_t == outcome.before_t, outcome.summary()
    assert {c.seq for c in outcome.consumed["seek"]} == set(outcome.time_runs[1]), outcome.summary()
    assert outcome.boundaries == outcome.expected_boundaries, outcome.summary()


def test_a_new_groups_push_consumer_from_a_timestamp_starts_at_a_queues_first_message_still_in_memory(
        outcome: Outcome) -> None:
    """RocketMQ's client applies CONSUME_FROM_TIMESTAMP only when the broker has no offset for the group: a
    broker answers a new group's QUERY_CONSUMER_OFFSET with 0 while the queue starts at 0 and its first message
    is in memory, so the consumer reads both runs, on RocketMQ 5.3.3's broker as on ours."""
    assert outcome.verdict()["pushed from t"] == "both runs", outcome.summary()


def test_resetting_a_running_push_consumers_group_to_a_time_makes_it_read_again_from_there(outcome: Outcome) -> None:
    """Real mqadmin's resetOffsetByTime (222, the broker moves the offsets and tells the consumer at its next
    pull), and mqctl's, which prints the same text for the same reset."""
    assert outcome.consumed_again == outcome.time_runs[1], outcome.summary()
    assert outcome.reset_texts["mqctl"] == outcome.reset_texts["mqadmin"], outcome.summary()


def test_both_sides_agree(ours: Outcome, theirs: Outcome) -> None:
    assert ours.verdict() == theirs.verdict(), f"\n{ours.summary()}\n{theirs.summary()}"
