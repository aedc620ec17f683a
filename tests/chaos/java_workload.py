"""RocketMQ's Java clients in a chaos run's workload, beside its HTTP producers: the kinds of client real
applications run, each through the faults.

One JVM (the test program's ``together`` mode, tests/rocketmq/java) runs, over RocketMQ's remoting protocol
with the controllers as name servers:

* an **orderly** consumer (``MessageListenerOrderly``: queue locks, LOCK_BATCH_MQ) of sync sends;
* a **failing** consumer: every fifth message is refused each time it comes, so it goes back through the
  retry topic (CONSUMER_SEND_MSG_BACK) with the backoff, then to ``%DLQ%<group>`` after ``maxReconsumeTimes``,
  where another consumer reads it; the other messages are consumed;
* **delayed** messages (level 2) and their consumer;
* **transactions**: commits, rollbacks and unknowns resolved by the broker's check-back, and their consumer.

The brokers run with short delay levels and quick check-backs (``BROKER_PROPS``). ``verdict`` judges the
histories with the controllers' election times: no acknowledged message lost by any kind of client; nothing
consumed twice or out of queue order by the orderly consumer within one master epoch; no delayed message
consumed sooner than its delay after it was sent (each copy by its own born time); every failed message consumed later or in the DLQ; no rolled-back transaction
consumed unless its producer committed it on a check-back (a rollback is a oneway request a failover may
lose: the broker then asks, and this producer answers every check-back with a commit).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.rocketmq.client_history import History
from tests.rocketmq.javaclients import ClientRun, JavaClients, option_args, wait_for

ORDERLY, DELAYED, POISON, TRANSACTIONS = "ChaosOrderly", "ChaosDelayed", "ChaosPoison", "ChaosTransactions"
QUEUES = 4
POISON_GROUP = "chaos-poison"
DLQ = f"%DLQ%{POISON_GROUP}"
#: Broker properties the workload needs (added to every broker's configuration of the run).
BROKER_PROPS = {"messageDelayLevel": "1s 2s 3s 4s 5s", "transactionCheckInterval": "1000",
                "transactionTimeOut": "5000", "transactionOpBatchInterval": "100"}
DELAY_MS, POISON_EVERY, MAX_RECONSUME = 2000, 5, 2
COMMIT, ROLLBACK, UNKNOWN = 0, 1, 2  # seq % 3: what a transaction's local step answers (TransactionProduce.java)
#: How much sooner than due a delayed message may be seen consumed: the client and the broker read the same
#: clock, but in whole milliseconds, each at its own moment.
CLOCK_MARGIN_MS = 5
START_S = 120.0

#: name -> (mode, options): the clients of the workload. Producers end with the producers' stop file, consumers
#: (and the transaction producer, which must stay to answer check-backs) with the consumers'.
CONSUMERS = {
    "orderly-consumer": ("push", {"topic": ORDERLY, "group": "chaos-orderly", "listener": "orderly", "threads": 2}),
    "delayed-consumer": ("push", {"topic": DELAYED, "group": "chaos-delayed"}),
    "poison-consumer": ("poison", {"topic": POISON, "group": POISON_GROUP, "poison_every": POISON_EVERY,
                                   "max_reconsume": MAX_RECONSUME}),
    "dlq-consumer": ("push", {"topic": DLQ, "group": "chaos-dlq"}),
    "transaction-consumer": ("push", {"topic": TRANSACTIONS, "group": "chaos-transactions-consumer"}),
}
PRODUCERS = {
    "orderly-producer": ("produce", {"topic": ORDERLY, "modes": "sync", "group": "chaos-orderly-producer",
                                     "pause_ms": 40}),
    "delayed-producer": ("produce", {"topic": DELAYED, "modes": "delayed", "group": "chaos-delayed-producer",
                                     "pause_ms": 100}),
    "poison-producer": ("produce", {"topic": POISON, "modes": "sync", "group": "chaos-poison-producer",
                                    "pause_ms": 100}),
}
TRANSACTION_PRODUCER = ("transaction-produce", {"topic": TRANSACTIONS, "group": "chaos-transactions",
                                                "pause_ms": 100, "rounds": 10**9})


def _line(mode: str, options: dict[str, object]) -> str:
    return "\t".join([mode, *option_args(options)])


@dataclass
class JavaWorkload:
    clients: JavaClients
    folder: Path
    namesrv: str
    deadline_s: int
    run: ClientRun | None = None
    #: name -> the history file of each client
    files: dict[str, Path] = field(default_factory=dict)

    @property
    def producers_stop(self) -> Path:
        return self.folder / "producers.stop"

    @property
    def consumers_stop(self) -> Path:
        return self.folder / "consumers.stop"

    def start(self) -> None:
        """Creates the topics (one JVM, a thread each), then starts every client in one JVM and waits until each
        has started."""
        self.folder.mkdir(parents=True, exist_ok=True)
        common = {"namesrv": self.namesrv, "deadline_s": self.deadline_s}
        create = self.folder / "create.plan"
        create.write_text("".join(_line("create-topic", {**common, "topic": t, "queues": QUEUES}) + "\n"
                                  for t in (ORDERLY, DELAYED, POISON, TRANSACTIONS)))
        created = self.clients.start("together", self.folder / "create", plan=create)
        assert created.wait(START_S + 60) == 0, created.describe()
        lines = []
        clients = {**CONSUMERS, **PRODUCERS, "transaction-producer": TRANSACTION_PRODUCER}
        for name, (mode, options) in clients.items():
            self.files[name] = self.folder / f"{name}.tsv"
            stop = self.consumers_stop if name in CONSUMERS or name == "transaction-producer" else self.producers_stop
            extra: dict[str, object] = {"stop_sending": self.producers_stop} if name == "transaction-producer" else {}
            lines.append(_line(mode, {**common, **options, **extra, "history": self.files[name], "until": stop}))
        plan = self.folder / "workload.plan"
        plan.write_text("\n".join(lines) + "\n")
        self.run = self.clients.start("together", self.folder / "workload", plan=plan)
        wait_for(lambda: all(self.history(name).started for name in clients), START_S,
                 "the Java clients to start", (self.run,))

    def history(self, name: str) -> History:
        return History.read(self.files[name])

    def stop_producers(self) -> None:
        self.producers_stop.touch()

    def drain(self, timeout_s: float) -> None:
        """Waits until every consumer consumed what it must (or ``timeout_s``: the verdict then says what is
        missing), then stops the clients as a user does."""
        assert self.run is not None
        try:
            wait_for(lambda: not self.missing(), timeout_s, "the Java consumers to consume everything", (self.run,))
        except TimeoutError:
            pass
        finally:
            self.consumers_stop.touch()
            self.run.wait(120)

    def stop(self) -> None:
        for path in (self.producers_stop, self.consumers_stop):
            path.touch()
        if self.run is not None and self.run.running():
            try:
                self.run.wait(60)
            except Exception:  # noqa: BLE001 (wait kills it on a timeout; the run's end must not fail here)
                self.run.kill()

    # ------------------------------------------------------------------ verdict
    def missing(self) -> dict[str, list[int]]:
        """Per kind, the acknowledged messages not (yet) consumed where they must be."""
        orderly = self.history("orderly-producer").acknowledged - self.history("orderly-consumer").seqs
        delayed = self.history("delayed-producer").acknowledged - self.history("delayed-consumer").seqs
        poison_sent = self.history("poison-producer").acknowledged
        poisons = {s for s in poison_sent if s % POISON_EVERY == 0}
        fine = (poison_sent - poisons) - self.history("poison-consumer").seqs
        dead = poisons - self.history("dlq-consumer").seqs
        return {k: sorted(v)[:20] for k, v in (("orderly", orderly), ("delayed", delayed), ("consumed after failing", fine),
                                               ("poison in the DLQ", dead),
                                               ("transactions", self._transactions_missing())) if v}

    def _transactions_missing(self) -> set[int]:
        producer = self.history("transaction-producer")
        acked, checked = producer.acknowledged, self._checked(producer)
        wanted = {s for s in acked if s % 3 in (COMMIT, UNKNOWN)} | {s for s in acked if s % 3 == ROLLBACK} & checked
        return wanted - self.history("transaction-consumer").seqs

    @staticmethod
    def _checked(producer: History) -> set[int]:
        return {int(f[2]) for f in (line.split("\t") for line in producer.other) if f[0] == "CHECKED"}

    def verdict(self, events: list[dict[str, Any]]) -> dict[str, list[str]]:
        elections = sorted(int(e.get("timestamp") or 0) for e in events
                           if e["eventType"] == "ELECT_MASTER" and e.get("elected"))
        missing = self.missing()
        problems = {f"java: lost acknowledged ({kind})": [str(s) for s in seqs] for kind, seqs in missing.items()}
        problems["java: orderly consumer out of queue order within an epoch"] = self._out_of_order(elections)
        problems["java: delayed message consumed before due"] = self._early()
        problems["java: rolled-back transaction consumed"] = self._rolled_back_consumed()
        problems["java: consumed but never sent"] = self._never_sent()
        return problems

    def _out_of_order(self, elections: list[int]) -> list[str]:
        """Per queue and master epoch (between two elections), the orderly consumer's offsets must rise: a
        message consumed twice, or an older one after a newer, is a violation unless an election lies between."""
        found = []
        consumed = self.history("orderly-consumer").consumed
        for queue in range(QUEUES):
            last: dict[int, int] = {}
            for c in sorted((c for c in consumed if c.queue_id == queue), key=lambda c: c.at_ms):
                epoch = bisect_right(elections, c.at_ms)
                if epoch in last and c.queue_offset <= last[epoch]:
                    found.append(f"queue {queue}: offset {c.queue_offset} (seq {c.seq}) after {last[epoch]} "
                                 f"within one epoch")
                last[epoch] = max(c.queue_offset, last.get(epoch, -1))
        return found[:20]

    def _early(self) -> list[str]:
        """A copy consumed sooner than the delay after the client sent it (its born time: the broker stores it
        later, and is due to deliver it the delay after that). Not the acknowledgement's time: a send that timed
        out may have been stored, its retry acknowledged later, and the first copy is then due first."""
        return [f"seq {c.seq}: consumed {c.at_ms - c.born_ms} ms after it was sent"
                for c in self.history("delayed-consumer").consumed
                if c.born_ms >= 0 and c.at_ms < c.born_ms + DELAY_MS - CLOCK_MARGIN_MS][:20]

    def _rolled_back_consumed(self) -> list[str]:
        producer = self.history("transaction-producer")
        checked = self._checked(producer)
        consumed = Counter(c.seq for c in self.history("transaction-consumer").consumed)
        return [f"seq {s}: rolled back and never checked back, consumed {n} times" for s, n in consumed.items()
                if s % 3 == ROLLBACK and s not in checked][:20]

    def _never_sent(self) -> list[str]:
        found = []
        for producer, consumers in (("orderly-producer", ("orderly-consumer",)), ("delayed-producer", ("delayed-consumer",)),
                                    ("poison-producer", ("poison-consumer", "dlq-consumer")),
                                    ("transaction-producer", ("transaction-consumer",))):
            sent = self.history(producer)
            tried = {s.seq for s in sent.sent} | {f.seq for f in sent.failed}
            for name in consumers:
                found += [f"{name}: seq {s}" for s in sorted(self.history(name).seqs - tried)[:5]]
        return found

    def stats(self) -> dict[str, Any]:
        counts: dict[str, Any] = {}
        for name in self.files:
            history = self.history(name)
            counts[name] = ({"acknowledged": len(history.acknowledged), "failed": len(history.failed)}
                            if history.sent or history.failed else
                            {"consumed": len(history.consumed), "duplicates": history.duplicates})
        return counts
