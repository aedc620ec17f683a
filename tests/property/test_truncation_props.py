"""Property tests of the replication truncation rule (ha/protocol.py decide_truncation, epoch_file.py
find_consistent_point; RIP-44 "Election Truncation Algorithm").

Model
-----
A broker group of 2-4 replicas. A log is a list of records, one per offset, each record being the epoch
that wrote it (two records are the same record iff they have the same (epoch, offset): only one
master writes in an epoch). Each replica also has its epoch entries [(epoch, startOffset)], kept exactly
as the broker keeps them:

- a replica elected master at epoch E appends (E, its max offset) (replicas_manager.change_to_master);
- the master appends records of its epoch;
- a slave syncs: ``decide_truncation`` against the master's handshake, cuts its log there (the store
  drops epochs starting past the cut, the HA client those starting at it), then takes the stream the
  master would send (``transfer_start``, ``epoch_index_for``, one epoch per frame, every epoch announced
  by an empty frame) through ``slave_step``, possibly disconnected part-way;
- a replica may lose an unflushed tail in a crash (the store drops epochs starting past its new end);
  a master that does is deposed (a new epoch follows);
- the controller may fail an election (the epoch is used up with no master) or elect anyone (unclean).

Properties, for any replica syncing against the current master:

- the cut point p is within the replica's log, and the replica's log up to p is a prefix of the
  master's (safety: nothing divergent survives);
- p is the longest common prefix (nothing the replica shares with the master is cut needlessly);
- ``Unreconcilable`` is only raised when the logs share nothing;
- after a complete catch-up, the replica's log and epoch entries equal the master's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from services.broker.epoch_file import MAX_OFFSET, EpochEntry
from services.broker.ha.frames import MasterHandshake, Transfer
from services.broker.ha.protocol import (
    Unreconcilable,
    decide_truncation,
    entries_with_end,
    epoch_index_for,
    slave_step,
    transfer_start,
)
from tests.support.examples import examples


@dataclass
class Replica:
    log: list[int] = field(default_factory=list)  # log[offset] = epoch that wrote the record
    entries: list[tuple[int, int]] = field(default_factory=list)  # (epoch, startOffset)

    @property
    def max_offset(self) -> int:
        return len(self.log)

    def cache_entries(self) -> list[EpochEntry]:
        """What EpochFileCache.entries() returns (ends rebuilt from the starts, the last one open)."""
        return entries_with_end(self.entries, MAX_OFFSET).entries()

    def handshake(self) -> MasterHandshake:
        return MasterHandshake(
            self.max_offset, self.entries[-1][0] if self.entries else -1, tuple(self.entries)
        )

    def drop_entries_from(self, start: int) -> None:
        self.entries = [(e, s) for e, s in self.entries if s < start]


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def stream(master: Replica, slave: Replica, limit: int, announce_at_limit: bool) -> None:
    """What HAService._stream sends and HAClient._apply does with it, stopping at ``limit`` (a
    disconnect). Record batches are cut at epoch boundaries, as the master's are."""
    entries = master.cache_entries()
    offset = transfer_start(slave.max_offset, 0, master.max_offset, 1 << 30, False)
    idx = epoch_index_for(entries, offset)
    frames: list[Transfer] = []

    def send(entry: EpochEntry, size: int) -> None:
        frames.append(Transfer(offset, entry.epoch, entry.start_offset, 0, bytes(size)))

    send(entries[idx], 0)
    while True:
        end = entries[idx + 1].start_offset if idx + 1 < len(entries) else None
        if end is not None and offset >= end:
            if offset == limit and not announce_at_limit:
                break
            idx += 1
            send(entries[idx], 0)
            continue
        stop = min(limit, master.max_offset if end is None else end)
        if offset >= stop:
            break
        body = master.log[offset:stop]
        assert all(e == entries[idx].epoch for e in body), "the model's master log disagrees with its epochs"
        send(entries[idx], len(body))
        offset = stop
    for frame in frames:
        last_epoch = slave.entries[-1][0] if slave.entries else -1
        step = slave_step(frame, 0, slave.max_offset, last_epoch)
        if step.new_epoch is not None:
            epoch, start = step.new_epoch
            assert not slave.entries or (epoch > slave.entries[-1][0] and start >= slave.entries[-1][1]), (
                f"EpochFileCache.append would refuse {step.new_epoch} after {slave.entries[-1]}"
            )
            slave.entries.append((epoch, start))
        if step.append:
            assert frame.offset == slave.max_offset
            slave.log.extend([frame.epoch] * len(step.append))


class ReplicationModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.replicas: list[Replica] = []
        self.master: int | None = None
        self.epoch = 0

    @initialize(n=st.integers(2, 4), first=st.integers(0, 3))
    def start(self, n: int, first: int) -> None:
        self.replicas = [Replica() for _ in range(n)]
        self.elect_unclean(first % n)  # the first broker to start elects itself

    # ------------------------------------------------------------------ controller
    @rule(data=st.data())
    def elect(self, data: st.DataObject) -> None:
        """A failover to another replica (clean or not: the model does not care who was in sync), a
        failover to one of the longest logs, or anyone at all."""
        kind = data.draw(st.integers(0, 2))
        others = [i for i in range(len(self.replicas)) if i != self.master]
        if kind == 0:
            who = data.draw(st.sampled_from(others))
        elif kind == 1:
            longest = max(r.max_offset for r in self.replicas)
            who = data.draw(
                st.sampled_from([i for i, r in enumerate(self.replicas) if r.max_offset == longest])
            )
        else:
            who = data.draw(st.integers(0, len(self.replicas) - 1))
        self.elect_unclean(who)

    def elect_unclean(self, who: int) -> None:
        self.epoch += 1
        self.master = who
        r = self.replicas[who]
        if not r.entries or r.entries[-1][0] < self.epoch:
            r.entries.append((self.epoch, r.max_offset))

    def failed_election(self) -> None:
        """A controller-triggered election with no candidate: the epoch is used, nobody is master."""
        self.epoch += 1
        self.master = None

    # ------------------------------------------------------------------ brokers
    @precondition(lambda self: self.master is not None)
    @rule(n=st.integers(1, 5))
    def master_writes(self, n: int) -> None:
        assert self.master is not None
        self.replicas[self.master].log.extend([self.epoch] * n)

    @precondition(lambda self: self.master is not None)
    @rule(who=st.integers(0, 3), how_far=st.integers(0, 6), complete=st.booleans(), announce=st.booleans())
    def sync(self, who: int, how_far: int, complete: bool, announce: bool) -> None:
        assert self.master is not None
        who %= len(self.replicas)
        if who == self.master:
            return
        master, slave = self.replicas[self.master], self.replicas[who]
        lcp = common_prefix(slave.log, master.log)
        try:
            point = decide_truncation(slave.cache_entries(), 0, slave.max_offset, master.handshake())
        except Unreconcilable as exc:
            assert lcp == 0, f"refused to reconcile logs that share {lcp} records: {exc}"
            # The documented way out (protocol.WAY_OUT): the operator moves the store aside.
            self.replicas[who] = Replica()
            return
        assert 0 <= point <= slave.max_offset, f"cut point {point} outside the log [0, {slave.max_offset}]"
        assert slave.log[:point] == master.log[:point], (
            f"cut at {point} keeps records the master does not have: slave {slave.log} master {master.log} "
            f"(slave epochs {slave.entries}, master epochs {master.entries})"
        )
        assert point == lcp, (
            f"cut at {point} but the logs agree up to {lcp}: needless truncation "
            f"(slave {slave.entries} {slave.log}, master {master.entries} {master.log})"
        )
        # HAClient._reconcile: store.truncate(point) then epochs.truncate_suffix_by_offset(point)
        slave.log = slave.log[:point]
        slave.drop_entries_from(point + 1)
        slave.drop_entries_from(point)
        limit = master.max_offset if complete else min(master.max_offset, point + how_far)
        stream(master, slave, limit, announce or complete)
        assert slave.log == master.log[:limit]
        if complete:
            assert slave.entries == master.entries, (
                f"after catching up the epoch files differ: slave {slave.entries}, master {master.entries}"
            )

    @rule(kind=st.integers(0, 3), who=st.integers(0, 3), lost=st.integers(1, 4))
    def fault(self, kind: int, who: int, lost: int) -> None:
        if kind == 0:
            self.failed_election()
        elif kind == 1:
            self.crash_loses_tail(who, lost)

    def crash_loses_tail(self, who: int, lost: int) -> None:
        """Async flush: a crash loses the unflushed tail. The store drops epochs starting past the new
        end on open. A master that lost data is deposed: continuing its epoch would reuse
        (epoch, offset) pairs for different records."""
        who %= len(self.replicas)
        r = self.replicas[who]
        r.log = r.log[: max(0, r.max_offset - lost)]
        r.drop_entries_from(r.max_offset + 1)
        if who == self.master:
            self.failed_election()

    # ------------------------------------------------------------------ invariants
    @invariant()
    def epoch_entries_describe_the_log(self) -> None:
        for r in self.replicas:
            for (e1, s1), (e2, s2) in zip(r.entries, r.entries[1:]):
                assert e1 < e2 and s1 <= s2, r.entries
            for i, (e, s) in enumerate(r.entries):
                end = r.entries[i + 1][1] if i + 1 < len(r.entries) else r.max_offset
                assert s <= r.max_offset
                assert all(x == e for x in r.log[s:end]), f"epochs {r.entries} do not describe log {r.log}"
            if r.log:
                assert r.entries and r.entries[0][1] == 0


ReplicationModel.TestCase.settings = settings(
    max_examples=examples(400),
    stateful_step_count=50,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestReplicationModel = ReplicationModel.TestCase


# ---------------------------------------------------------------------------------- known bug
@pytest.mark.parametrize("master_max", [0, 500])
def test_empty_replica_with_an_unknown_epoch_can_replicate(master_max: int) -> None:
    # Broker A started first and elected itself (epoch 1, entry (1, 0)); nothing was written. A went
    # down before B ever replicated from it, B was elected (unclean) at epoch 2 with entry (2, 0) and
    # may have taken writes since. A comes back as a slave: its log is empty.
    slave = Replica(log=[], entries=[(1, 0)])
    master = Replica(log=[2] * master_max, entries=[(2, 0)])
    point = decide_truncation(slave.cache_entries(), 0, 0, master.handshake())
    assert point == 0
