"""One failover scenario, run with either kind of controllers (mqctl's or RocketMQ's DLedger group) and
either kind of brokers (RocketMQ's Java brokers or mqctl's with ``controllerProtocol=remoting``), with the
tier's Java test program producing through the name servers and consuming at the end
(tests/rocketmq/javaclients.py: one synchronous send at a time, every 50 ms; a push consumer of a new group).

The steps (``run``), each waited on by asking the controller leader for the group's SyncStateSet (1006):

1. the three brokers start one after the other, so they get ids 1, 2 and 3; the first is master at epoch 1
   and the master expands the SyncStateSet to all three;
2. the producer sends; it is paused (no send in flight), the replicas are let settle, and the master is
   killed with SIGKILL; the producer resumes against the new master, and the old master, restarted,
   rejoins as a slave;
3. the same with SIGSTOP (the controllers find the master by its heartbeats' timeout), then SIGCONT: the
   stopped master learns the new epoch, becomes a slave and rejoins the set (with the third replica,
   except under RocketMQ's name server with RocketMQ's brokers: ``SIGSTOP_STEADY``);
4. the controller leader is killed with SIGKILL: another leads, the group keeps its master and epoch,
   the producer goes on; the killed controller is started again;
5. the producer stops and a consumer reads the topic from the start: every acknowledged message is there.

Why the pause before each fault: the controllers elect among equals by the (epoch, maxOffset) each
replica last reported in a heartbeat; with a send in flight the two slaves can report different offsets
and either may win. Paused, both report the same, and the rules (lowest id among equals, on both sides)
decide: that is what makes the two kinds of controllers comparable.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from services.remoting.bodies import EpochEntryCache, ReplicasInfo
from services.remoting.command import RequestCode, make_request
from tests.rocketmq import probe
from tests.rocketmq.client_history import History
from tests.rocketmq.errors import NotReady, ProcessExited
from tests.rocketmq.javaclients import ClientRun, JavaClients, wait_for
from tests.rocketmq.jvm import poll
from tests.support.remoting import ask

GROUP = "broker-a"
#: The steps from which only the masters and their epochs are steady. After a SIGSTOP, a RocketMQ broker
#: that becomes a slave of the new master re-registers with its name servers and follows the master they
#: answer; RocketMQ's own name server answers the address registered as id 0, still the stopped master's
#: until the new master's registration replaces it. Such a slave then replicates from the stopped broker
#: (once it continues, a slave itself) and stays out of the new master's SyncStateSet: seen with 5.3.3 and
#: 5.5.0. mqctl's controllers answer the master they elected (docs/compatibility.md, "Mixed clusters").
SIGSTOP_STEADY = ("master SIGSTOPped", "stopped master continued", "controller leader killed")
TOPIC = "InteropFailover"
#: The producer's longest run (s): the scenario takes 1-4 minutes; the tests' own timeout is 900 s.
PRODUCER_DEADLINE_S = 900
#: The reader gives up after this long without a new message, if it has not read every acknowledged one: over
#: two of RocketMQ's rebalance periods (20 s), so a queue the consumer's first rebalance did not take (a route
#: it read early, on a machine short of CPU) is read after its next one before anything counts as lost.
READER_IDLE_S = 45


class Controllers(Protocol):
    """A controller group and the name servers its brokers register with."""

    addresses: str  # controllerAddr
    namesrv: str  # namesrvAddr of brokers and clients

    def leader(self) -> str: ...
    def kill_leader(self) -> str: ...
    def restart(self, address: str) -> None: ...


class Brokers(Protocol):
    """The three replicas of one group, by index."""

    def address(self, index: int) -> str: ...
    def start(self, index: int) -> None: ...
    def signal(self, index: int, sig: signal.Signals) -> None: ...
    def check_alive(self) -> None: ...


@dataclass(frozen=True)
class Milestone:
    """The group as the controller leader shows it once a step has settled."""

    step: str
    master_id: int | None
    master_epoch: int
    sync_state_set: tuple[int, ...]
    sync_state_set_epoch: int

    def steady(self) -> tuple[object, ...]:
        """What the step's outcome is under either kind of name server (``SIGSTOP_STEADY``)."""
        if self.step in SIGSTOP_STEADY:
            return self.step, self.master_id, self.master_epoch
        return self.step, self.master_id, self.master_epoch, self.sync_state_set, self.sync_state_set_epoch

    @classmethod
    def of(cls, step: str, info: ReplicasInfo) -> Milestone:
        return cls(step, info.master_broker_id, info.master_epoch,
                   tuple(sorted(r.broker_id for r in info.in_sync_replicas)), info.sync_state_set_epoch)


@dataclass
class Record:
    """What one run showed."""

    milestones: list[Milestone] = field(default_factory=list)
    timeline: list[Milestone] = field(default_factory=list)  # every distinct view polled along the way
    produced: History = field(default_factory=History)
    consumed: History = field(default_factory=History)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def acknowledged(self) -> frozenset[int]:
        return self.produced.acknowledged

    @property
    def lost(self) -> frozenset[int]:
        return self.acknowledged - self.consumed.seqs

    def summary(self) -> str:
        """The milestones, every view polled, the sends that were not acknowledged and the timings."""
        lines = [f"milestone {m}" for m in self.milestones] + [f"view {m}" for m in self.timeline]
        lines += [f"not acknowledged {s}" for s in self.produced.not_acknowledged]
        lines += [(f"sent {len(self.produced.sent) + len(self.produced.failed)}, acknowledged "
                   f"{len(self.acknowledged)}, consumed {len(self.consumed.seqs)}, lost {len(self.lost)}: "
                   f"{sorted(self.lost)[:20]}")]
        return "\n".join(lines + [f"time {k}: {v:.1f} s" for k, v in self.timings.items()]) + "\n"


@dataclass
class Scenario:
    controllers: Controllers
    brokers: Brokers
    client: JavaClients
    folder: Path
    #: How long a broker's heartbeat may be late before the controllers count it dead (its
    #: controllerHeartBeatTimeoutMills), and how often it beats.
    heartbeat_timeout_s: float
    heartbeat_interval_s: float
    #: Whether every replica must be back in the set after the stopped master continues (not under
    #: RocketMQ's name server with RocketMQ's brokers: ``SIGSTOP_STEADY``); the continued one always must.
    all_back_after_sigstop: bool = True
    record: Record = field(default_factory=Record)
    producer: ClientRun | None = None
    _began: float = field(default_factory=time.monotonic)

    # ------------------------------------------------------------------------------ asking

    def view(self) -> ReplicasInfo | None:
        info = probe.sync_state(self.controllers.leader(), GROUP)
        if info is not None:
            seen = Milestone.of("", info)
            if not self.record.timeline or self.record.timeline[-1] != seen:
                self.record.timeline.append(seen)
        return info

    def wait_view(self, what: str, ok: Callable[[ReplicasInfo], bool], timeout_s: float = 120.0) -> ReplicasInfo:
        def check() -> ReplicasInfo | None:
            info = self.view()
            return info if info is not None and ok(info) else None
        return poll(check, timeout_s, f"{GROUP}: {what}", self.brokers.check_alive)

    def milestone(self, step: str, info: ReplicasInfo) -> Milestone:
        self.record.milestones.append(Milestone.of(step, info))
        self.record.timings[step] = time.monotonic() - self._began
        return self.record.milestones[-1]

    def max_offset(self, index: int) -> int:
        answer = ask(self.brokers.address(index), make_request(RequestCode.GET_BROKER_EPOCH_CACHE, 1), 3.0)
        return EpochEntryCache.decode(answer.body).max_offset

    # ------------------------------------------------------------------------------ steps

    def start_group(self) -> Milestone:
        """Each broker once the one before it is registered (ids 1, 2, 3 in start order), then all in sync."""
        for index in range(3):
            self.brokers.start(index)
            self.wait_view(f"broker {index + 1} registered",
                           lambda i, n=index + 1: i.master_broker_id is not None and registered(i) >= n, 180)
        return self.milestone("started", self.wait_view("all three in sync", lambda i: len(in_sync(i)) == 3))

    def start_producer(self) -> None:
        """Synchronous sends, one every 50 ms, to a topic the brokers create on its first send (TBW102)."""
        self.producer = self.client.start("produce", self.folder / "producer", namesrv=self.controllers.namesrv,
                                          topic=TOPIC, modes="sync", pause_ms=50, send_timeout_ms=5000,
                                          deadline_s=PRODUCER_DEADLINE_S)
        self.wait_acknowledged(20, 120)

    def wait_acknowledged(self, count: int, timeout_s: float, after: int = -1) -> None:
        """Until ``count`` messages numbered above ``after`` got SEND_OK."""
        producer = self.producer
        assert producer is not None
        wait_for(lambda: sum(seq > after for seq in producer.history().acknowledged) >= count, timeout_s,
                 f"{count} acknowledgements after message {after}", (producer,))

    def settle(self, master: int) -> None:
        """Pause the producer, wait until the replicas hold the same log and have each reported it in a
        heartbeat: that report is not observable on RocketMQ's controllers, so the wait is two heartbeat
        intervals after the offsets agree."""
        assert self.producer is not None
        self.producer.pause()
        others = [i for i in range(3) if i != master]
        target = self.max_offset(master)
        poll(lambda: all(self.max_offset(i) == target for i in others) or None, 30,
             f"the slaves to reach the master's offset {target}")
        agreed = time.monotonic()
        poll(lambda: time.monotonic() - agreed >= 2 * self.heartbeat_interval_s or None, 30, "two heartbeats")

    def fail_master(self, step: str, sig: signal.Signals) -> Milestone:
        """Settle, signal the master, resume the producer once another is master (so no send waits in a
        stopped master's socket, to be stored when it continues). After a SIGKILL the milestone is the new
        master with the other live replica in its set (the step's steady state, whatever the timing of the
        expansion); after a SIGSTOP, the new master as first seen: see ``SIGSTOP_STEADY``."""
        before = self.wait_view("a master", lambda i: i.master_broker_id is not None)
        master = int(before.master_broker_id or 0) - 1
        self.settle(master)
        self.brokers.signal(master, sig)
        after = self.wait_view(f"a new master after {sig.name}",
                               lambda i: i.master_epoch > before.master_epoch and i.master_broker_id is not None,
                               self.heartbeat_timeout_s + 90)
        assert self.producer is not None
        self.producer.resume()
        if sig == signal.SIGSTOP:
            return self.milestone(step, after)
        return self.milestone(step, self.wait_view(
            "the new master and the other live replica in sync",
            lambda i: i.master_epoch == after.master_epoch and len(in_sync(i)) == 2, 120))

    def rejoin(self, step: str, index: int, everyone: bool = True) -> Milestone:
        """The old master (restarted or continued) follows the new one and rejoins the set (with every
        other replica, unless ``everyone`` is false)."""
        def back(i: ReplicasInfo) -> bool:
            return index + 1 in in_sync(i) and i.master_broker_id != index + 1 and (len(in_sync(i)) == 3
                                                                                    or not everyone)
        info = self.wait_view(f"broker {index + 1} back in sync" + (" with every replica" if everyone else ""),
                              back, 180)
        self.acknowledged_after(step)
        return self.milestone(step, info)

    def acknowledged_after(self, step: str, count: int = 20) -> None:
        """The producer got ``count`` more acknowledgements after this point."""
        assert self.producer is not None
        self.wait_acknowledged(count, 120, after=self.producer.history().last_seq)
        self.record.timings[f"{step}: producer acknowledged again"] = time.monotonic() - self._began

    def kill_controller_leader(self) -> Milestone:
        before = self.wait_view("a master", lambda i: i.master_broker_id is not None)
        killed = self.controllers.kill_leader()
        info = self.wait_view("a new controller leader", lambda i: self.controllers.leader() != killed, 120)
        self.acknowledged_after("controller leader killed")
        self.controllers.restart(killed)
        assert (info.master_broker_id, info.master_epoch) == (before.master_broker_id, before.master_epoch)
        return self.milestone("controller leader killed", info)

    def finish(self) -> Record:
        """The producer stops, then a consumer of a new group reads the topic from the start."""
        assert self.producer is not None
        self.producer.resume()
        code = self.producer.stop()
        if code != 0:
            raise ProcessExited(f"the Java producer exited with {code}:\n{self.producer.describe()}")
        self.record.produced = self.producer.history()
        self.record.consumed = self.client.read_from_start(self.folder / "consumer", self.controllers.namesrv, TOPIC,
                                                           self.record.acknowledged, timeout_s=180, idle_s=READER_IDLE_S)
        self.record.timings["consumed"] = time.monotonic() - self._began
        return self.record

    def run(self) -> Record:
        try:
            return self._run()
        finally:
            if self.producer is not None:
                self.producer.kill()
                self.record.produced = self.producer.history()
            (self.folder / "record.txt").write_text(self.record.summary())

    def _run(self) -> Record:
        self.start_group()
        self.start_producer()
        self.fail_master("master SIGKILLed", signal.SIGKILL)
        self.acknowledged_after("master SIGKILLed")
        self.brokers.start(0)
        self.rejoin("old master restarted", 0)
        stopped = int(self.record.milestones[-1].master_id or 0) - 1
        self.fail_master("master SIGSTOPped", signal.SIGSTOP)
        self.acknowledged_after("master SIGSTOPped")
        self.brokers.signal(stopped, signal.SIGCONT)
        self.rejoin("stopped master continued", stopped, self.all_back_after_sigstop)
        self.kill_controller_leader()
        return self.finish()


def in_sync(info: ReplicasInfo) -> list[int]:
    return sorted(r.broker_id for r in info.in_sync_replicas)


def registered(info: ReplicasInfo) -> int:
    return len(info.in_sync_replicas) + len(info.not_in_sync_replicas)


__all__ = ["GROUP", "TOPIC", "Brokers", "Controllers", "Milestone", "NotReady", "Record", "Scenario"]
