"""RocketMQ's Java clients across a master SIGKILL, one scenario run the same way against our cluster and against
RocketMQ's (each a ``Side``), with our Java test program (tests/rocketmq/java) in every client role.

1. ``create-topic``: the topic, through TBW102's route, as a client creates one.
2. Four consumer groups start: a push consumer (``push``) and a subscribed lite pull consumer (``lite``) that
   run to the end, and a push consumer (``push-restart``) and an assigned lite pull consumer (``lite-assign``)
   that stop after the first run and start again after the failover.
3. First run: ten rounds of sync, async, oneway and batch sends (numbered messages with keys and tags).
4. ``push-restart`` and ``lite-assign`` consume all of it, and stop once their commits have reached the master
   (stopping commits the same offsets again); their offsets are read from the master and waited for on every
   slave (copied from the master, every few seconds), so the kill below does not come before the copy (a copy
   that never comes is noted, and the scenario goes on).
5. Second run, sent on and on: the master is killed with SIGKILL once 30 of its sends are acknowledged;
   sending goes on until 30 more are acknowledged after the kill.
6. ``push`` and ``lite`` must consume every acknowledged message of both runs.
7. The new master must hold the offsets ``push-restart`` and ``lite-assign`` committed before the kill;
   started again, they must consume every acknowledged message of the second run and nothing of the first.

Every wait has a deadline. A wait that runs out in steps 6 and 7 is what the outcome reports (the test says
what is missing); one that runs out elsewhere fails the scenario.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from services.common.codes import ResponseCode
from services.common.errors import MqctlError
from services.common.remoting_client import RemotingClient
from services.remoting.command import RequestCode, make_request
from tests.rocketmq.client_history import SEND_OK, History
from tests.rocketmq.javaclients import ClientRun, JavaClients, wait_for

TOPIC = "JavaFailoverTopic"
QUEUES = 4
#: The consumer groups, by the name of the consumer that uses each.
GROUPS = {"push": "java-push", "lite": "java-lite", "push-restart": "java-push-restart",
          "lite-assign": "java-lite-assign"}
FIRST_RUN_ROUNDS = 10
SECOND_RUN_FIRST_SEQ = 100_000
ACKED_BEFORE_KILL = ACKED_AFTER_KILL = 30
#: The consumers that run to the end (every acknowledged message), and those restarted after the failover
#: (every acknowledged message of the second run, none of the first).
THROUGHOUT, RESTARTED = ("push", "lite"), ("push-restart-again", "lite-assign-again")
#: Deadlines (s): a client's start, a failover's acknowledged sends, consuming everything, and the slaves'
#: copy of the offsets (RocketMQ's slaves copy every 10 s, ours every 3 s).
START_S, FAILOVER_S, CONSUME_S, COPY_S = 90.0, 150.0, 120.0, 45.0


class Side(Protocol):
    """One kind of cluster: a name server address for the clients, and its group of three replicas."""

    @property
    def label(self) -> str: ...

    @property
    def namesrv(self) -> str: ...

    def master(self) -> str | None:
        """The group's master now, as its controllers say (None while there is none)."""

    def replicas(self) -> list[str]:
        """Every broker of the group, alive or not."""

    def kill(self, address: str) -> None:
        """SIGKILL to the broker at ``address``."""


Offsets = dict[int, int]


@dataclass
class Outcome:
    """What one side did with the scenario (the tests read it, and compare the two sides' outcomes)."""

    label: str
    client_version: str = ""
    first_run: frozenset[int] = frozenset()
    acknowledged: frozenset[int] = frozenset()
    acknowledged_after_kill: frozenset[int] = frozenset()
    statuses: dict[str, int] = field(default_factory=dict)
    failed_sends: int = 0
    failures: tuple[str, ...] = ()
    oneway: frozenset[int] = frozenset()
    consumed: dict[str, frozenset[int]] = field(default_factory=dict)
    duplicates: dict[str, int] = field(default_factory=dict)
    mismatches: tuple[str, ...] = ()
    committed_before_kill: dict[str, Offsets] = field(default_factory=dict)
    committed_after_failover: dict[str, Offsets] = field(default_factory=dict)
    #: Whether every slave held those offsets before the kill.
    slaves_copied_offsets: bool = False
    old_master: str = ""
    new_master: str = ""
    #: Seconds from the kill to the first send the new master acknowledged.
    failover_s: float | None = None
    timings: dict[str, float] = field(default_factory=dict)

    def lost(self, consumer: str) -> frozenset[int]:
        """Acknowledged messages a consumer of THROUGHOUT or RESTARTED should have consumed and did not."""
        wanted = self.acknowledged - self.first_run if consumer in RESTARTED else self.acknowledged
        return wanted - self.consumed.get(consumer, frozenset())

    def reread(self, consumer: str) -> frozenset[int]:
        """Messages of the first run a restarted consumer consumed again (its group had committed them)."""
        return self.consumed.get(consumer, frozenset()) & self.first_run

    def summary(self) -> str:
        consumers = ", ".join(f"{name} {len(self.consumed.get(name, ()))} (+{self.duplicates.get(name, 0)} again, "
                              f"{len(self.lost(name))} lost, {len(self.reread(name))} of the first run)"
                              for name in (*THROUGHOUT, *RESTARTED))
        times = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.timings.items())
        return (f"{self.label} (client {self.client_version}): {len(self.acknowledged)} acknowledged "
                f"({len(self.acknowledged_after_kill)} after the kill), sends {self.statuses}, "
                f"{self.failed_sends} failed {list(self.failures)[:3]}, {len(self.oneway)} oneway; consumed: "
                f"{consumers}; offsets before the kill {self.committed_before_kill}, copied by the slaves: "
                f"{self.slaves_copied_offsets}, on the new master {self.committed_after_failover}; "
                f"master {self.old_master} -> {self.new_master}, the first send acknowledged there "
                f"{self.failover_s} s after the kill; {times}")


def query_offsets(address: str, group: str, topic: str = TOPIC) -> tuple[Offsets, Offsets]:
    """(the group's committed offset, the queue's max offset) of every queue, asked of one broker over remoting;
    -1 where the group has none."""
    async def ask() -> tuple[Offsets, Offsets]:
        client = RemotingClient(5.0)
        committed, top = {}, {}
        try:
            for queue in range(QUEUES):
                ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue)}
                mine = await client.call(address, make_request(RequestCode.QUERY_CONSUMER_OFFSET, 0, {
                    **ext, "setZeroIfNotFound": "false"}))
                end = await client.call(address, make_request(RequestCode.GET_MAX_OFFSET, 0, ext))
                committed[queue] = int(mine.ext_fields["offset"]) if mine.code == ResponseCode.SUCCESS else -1
                top[queue] = int(end.ext_fields["offset"])
        finally:
            await client.close()
        return committed, top
    return asyncio.run(ask())


def quietly(check: Callable[[], bool]) -> Callable[[], bool]:
    """``check``, with a broker that does not answer (killed, or not up yet) counting as "not yet"."""
    def wrapped() -> bool:
        try:
            return check()
        except (MqctlError, OSError, KeyError, ValueError):
            return False
    return wrapped


class Scenario:
    """The steps above against one side; ``run()`` returns the outcome and always stops every client."""

    def __init__(self, side: Side, clients: JavaClients, folder: Path) -> None:
        self.side, self.clients, self.folder = side, clients, folder
        self.runs: dict[str, ClientRun] = {}
        self.outcome = Outcome(side.label)
        self._began = time.monotonic()
        self._kill_ms = 0.0

    def run(self) -> Outcome:
        try:
            self._create_topic()
            self._start_consumers()
            self._first_run()
            self._settle_restart_groups()
            self._second_run_across_the_kill()
            self._drain(THROUGHOUT)
            self._restart_groups()
        finally:
            self._stop_all()
        self._collect()
        return self.outcome

    # ------------------------------------------------------------------ steps
    def _create_topic(self) -> None:
        created = self._start("create-topic", topic=TOPIC, queues=QUEUES, deadline_s=int(START_S))
        code = created.wait(START_S + 30)
        assert code == 0, f"create-topic exited with {code}:\n{created.describe()}"
        self._mark("topic created")

    def _start_consumers(self) -> None:
        self._consumer("push", "push")
        self._consumer("lite", "lite-pull")
        self._consumer("push-restart", "push")
        self._consumer("lite-assign", "lite-pull", assign="true")
        started = tuple(self.runs[name] for name in GROUPS)
        wait_for(lambda: all(run.history().started for run in started), START_S, "the consumers to start", started)
        self._mark("consumers started")

    def _first_run(self) -> None:
        first = self._start("produce", name="produce-1", topic=TOPIC, rounds=FIRST_RUN_ROUNDS)
        code = first.wait(FAILOVER_S)
        assert code == 0, f"the first producer run exited with {code}:\n{first.describe()}"
        self._mark("first run sent")

    def _settle_restart_groups(self) -> None:
        """The groups that restart consume every stored message of the first run (its oneway sends too, which
        no answer vouches for: the queues' ends say what is stored), stop, and their offsets reach the slaves."""
        names = ("push-restart", "lite-assign")
        runs = tuple(self.runs[name] for name in names)
        master = self._master()
        stored = sum(query_offsets(master, GROUPS[names[0]])[1].values())
        acked = self.runs["produce-1"].history().acknowledged
        assert stored >= len(acked) > 0, self.runs["produce-1"].describe()

        def consumed_all(run: ClientRun) -> bool:
            history = run.history()
            return acked <= history.seqs and len(history.consumed) >= stored
        wait_for(lambda: all(consumed_all(run) for run in runs), CONSUME_S,
                 f"the {stored} messages of the first run consumed by the groups that restart", runs)
        for name in names:  # see _committed_everything: stopped before this, a group can be left behind
            self._committed_everything(master, GROUPS[name])
        for name in names:
            assert self.runs[name].stop() == 0, self.runs[name].describe()
        for name in names:
            self.outcome.committed_before_kill[name] = self._committed_everything(master, GROUPS[name])
        self._mark("restart groups committed")
        self.outcome.slaves_copied_offsets = self._slaves_copy(master, names)
        self._mark("slaves copied the offsets")

    def _slaves_copy(self, master: str, names: tuple[str, ...]) -> bool:
        """Whether every slave holds the offsets the groups committed (the outcome says if not: what a failover
        then does with the offsets is the point)."""
        slaves = [address for address in self.side.replicas() if address != master]
        wanted = {GROUPS[name]: self.outcome.committed_before_kill[name] for name in names}
        try:
            wait_for(quietly(lambda: all(query_offsets(slave, group)[0] == offsets for slave in slaves
                                         for group, offsets in wanted.items())), COPY_S, "the slaves' copy")
        except TimeoutError:
            return False
        return True

    def _committed_everything(self, master: str, group: str) -> Offsets:
        """The group's offsets once they reach the end of every queue. A running client commits them every
        second (after its first ten), and its shutdown once more, each as a oneway UPDATE_CONSUMER_OFFSET (15);
        RocketMQ's broker serves 15 on a thread pool and takes a smaller offset than it holds, so a periodic
        commit sent just before the shutdown's can be applied after it and leave the group behind for good.
        The scenario therefore waits for this before it stops a group (the shutdown then commits the same
        offsets again), and once more after."""
        found: list[Offsets] = []

        def at_end() -> bool:
            committed, top = query_offsets(master, group)
            found[:] = [committed, top]
            return committed == top
        try:
            wait_for(quietly(at_end), 30.0, f"{group}'s committed offsets on {master} to reach every queue's end")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; committed {found[:1]}, queue ends {found[1:]}") from None
        return found[0]

    def _second_run_across_the_kill(self) -> None:
        second = self._start("produce", name="produce-2", topic=TOPIC, first=SECOND_RUN_FIRST_SEQ, pause_ms=50)
        wait_for(lambda: len(second.history().acknowledged) >= ACKED_BEFORE_KILL, FAILOVER_S,
                 f"{ACKED_BEFORE_KILL} acknowledged sends in the second run", (second,))
        self.outcome.old_master = self._master()
        self._kill_ms = time.time() * 1000
        self.side.kill(self.outcome.old_master)
        self._mark("master killed")
        wait_for(lambda: len(second.history().acknowledged_after(self._kill_ms)) >= ACKED_AFTER_KILL, FAILOVER_S,
                 f"{ACKED_AFTER_KILL} acknowledged sends after the kill", (second,))
        self._mark("sends acknowledged after the kill")
        assert second.stop(FAILOVER_S) == 0, second.describe()
        self.outcome.new_master = self._master()

    def _drain(self, names: tuple[str, ...]) -> bool:
        """Whether every consumer named has consumed what it should before the deadline (no exception: the
        outcome says what is missing)."""
        acked = self._produced().acknowledged
        first = self.runs["produce-1"].history().acknowledged
        runs = {name: self.runs[name] for name in names}

        def done() -> bool:
            return all((acked - first if name in RESTARTED else acked) <= run.history().seqs
                       for name, run in runs.items())
        try:
            wait_for(done, CONSUME_S, f"{', '.join(names)} to consume every acknowledged message",
                     tuple(runs.values()))
        except TimeoutError:
            return False
        finally:
            self._mark(f"{' and '.join(names)} drained")
        return True

    def _restart_groups(self) -> None:
        master = self.outcome.new_master
        for name in ("push-restart", "lite-assign"):
            self.outcome.committed_after_failover[name] = query_offsets(master, GROUPS[name])[0]
        self._consumer("push-restart-again", "push", group=GROUPS["push-restart"])
        self._consumer("lite-assign-again", "lite-pull", group=GROUPS["lite-assign"], assign="true")
        self._drain(RESTARTED)

    # ------------------------------------------------------------------ helpers
    def _start(self, mode: str, name: str | None = None, **options: object) -> ClientRun:
        name = name or mode
        run = self.clients.start(mode, self.folder / name, namesrv=self.side.namesrv, **options)
        self.runs[name] = run
        return run

    def _consumer(self, name: str, mode: str, group: str | None = None, **options: object) -> ClientRun:
        return self._start(mode, name=name, topic=TOPIC, group=group or GROUPS[name], **options)

    def _master(self) -> str:
        found: list[str] = []

        def elected() -> bool:
            found[:] = [self.side.master() or ""]
            return bool(found[0]) and found[0] != self.outcome.old_master
        wait_for(quietly(elected), FAILOVER_S, f"a master of {self.side.label}'s group")
        return found[0]

    def _produced(self) -> History:
        histories = [self.runs[name].history() for name in ("produce-1", "produce-2") if name in self.runs]
        return History(sent=tuple(s for h in histories for s in h.sent),
                       failed=tuple(f for h in histories for f in h.failed),
                       oneway=tuple(o for h in histories for o in h.oneway))

    def _mark(self, step: str) -> None:
        self.outcome.timings[step] = time.monotonic() - self._began

    def _stop_all(self) -> None:
        for run in self.runs.values():
            if run.running():
                try:
                    run.stop(30.0)
                except Exception:  # noqa: BLE001 - whatever happened, every JVM must go
                    run.kill()

    def _collect(self) -> None:
        self._collect_sends()
        for name in [*GROUPS, *RESTARTED]:
            if name in self.runs:
                history = self.runs[name].history()
                self.outcome.consumed[name], self.outcome.duplicates[name] = history.seqs, history.duplicates
                self.outcome.mismatches += tuple(m for m in (c.mismatch() for c in history.consumed) if m)

    def _collect_sends(self) -> None:
        produced, o = self._produced(), self.outcome
        first = self.runs["produce-1"].history() if "produce-1" in self.runs else History()
        o.first_run = frozenset(s.seq for s in first.sent) | frozenset(first.oneway) | frozenset(
            f.seq for f in first.failed)
        o.client_version = first.started[1] if first.started and len(first.started) > 1 else ""
        o.acknowledged, o.oneway = produced.acknowledged, frozenset(produced.oneway)
        o.statuses, o.failed_sends = dict(produced.statuses()), len(produced.failed)
        o.failures = tuple(dict.fromkeys(f.error.split(" (")[0][:160] for f in produced.failed))
        if self._kill_ms:
            o.acknowledged_after_kill = produced.acknowledged_after(self._kill_ms)
            there = [s.at_ms for s in produced.sent if s.status == SEND_OK and s.store_host == o.new_master]
            o.failover_s = round((min(there) - self._kill_ms) / 1000, 2) if there else None
