"""Master -> slave replication end to end, in memory: the real sessions (ha/session.py) wired together, over
real MessageStores (files in tmp_path, 4 KiB segments), no sockets, no sleeps.

The test does only what the asyncio code does around the sessions: it carries bytes between them in small
pieces (so frames are split at arbitrary boundaries), hands over the group's public keys when a session
asks, calls ``reconcile`` when the slave session asks, pulls ``next_transfer`` until the master session
has nothing more (where the master would wait) and then sends one ``heartbeat``, and on the slave applies
what arrives, acks, and only then sets confirmOffset. The master's confirmOffset follows the slave's acks
through the real quorum rule (``quorum.confirm_offset``).

Scenarios: (a) an empty slave catches up across three epochs, the middle one empty (RocketMQ PR #9942);
(b) a slave with a divergent tail from an epoch in which it was master truncates durably (reopening the
store does not bring the tail back, RocketMQ issue #10666) and converges; (c) a re-elected master whose
epochs start at the same offset.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from services.broker.epoch_file import MAX_OFFSET, EpochEntry, EpochFileCache
from services.broker.ha.auth import BrokerKey
from services.broker.ha.frames import MasterFrameReader, ProtocolError, Transfer
from services.broker.ha.protocol import Unreconcilable, epoch_index_for
from services.broker.ha.session import (
    Acked,
    Authenticated,
    KeysNeeded,
    MasterSession,
    Reconcile,
    SlaveSession,
    Transfers,
)
from services.broker.quorum import confirm_offset
from services.broker.store import Message, MessageStore

SEG = 4096
HOST = "127.0.0.1:10911"
TOPIC = "TopicTest"
QUEUES = 2
TS = 1_700_000_000_000
GROUP = "broker-a"


# ====================================================================================== nodes


def open_store(root: Path) -> MessageStore:
    store = MessageStore(root, HOST, segment_size=SEG, queue_nums=QUEUES, max_message_size=4000)
    store.open()
    return store


@dataclass
class Node:
    root: Path
    broker_id: int
    store: MessageStore = field(init=False)
    key: BrokerKey = field(default_factory=BrokerKey.generate)
    written: int = 0

    def __post_init__(self) -> None:
        self.store = open_store(self.root)

    def become_master(self, epoch: int) -> None:
        """What changeToMaster does to the epoch file: the new epoch starts at the current end."""
        assert self.store.epochs.append(epoch, self.store.max_offset)

    def write(self, n: int, tag: str, confirm: bool = True) -> None:
        """Append n messages (sizes vary so record and segment boundaries fall irregularly)."""
        for _ in range(n):
            i = self.written
            self.written += 1
            body = f"{tag}-{i:04d}-".encode() + bytes(60 + (i * 37) % 150)
            self.store.append(Message(TOPIC, body, keys=f"k{i}", tags=tag, queue_id=i % QUEUES), TS + i)
        if confirm:  # a single-member (or non-allAck) master confirms its own max offset
            self.store.set_confirm_offset(self.store.max_offset)

    def crash_and_reopen(self) -> None:
        """Drop the store without flushing or closing it cleanly, then open it again from its files."""
        for seg in self.store.commitlog.segments:
            os.close(seg.fd)
        self.store.commitlog.segments.clear()
        for cq in self.store.queues.queues.values():
            cq.close()
        self.store = open_store(self.root)

    def close(self) -> None:
        self.store.close()


Nodes = Callable[[int], Node]


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[Nodes]:
    """nodes(broker_id) opens a broker's store under tmp_path; all are closed at the end."""
    made: dict[int, Node] = {}

    def make(broker_id: int) -> Node:
        made[broker_id] = Node(tmp_path / f"broker-{broker_id}", broker_id)
        return made[broker_id]

    yield make
    for node in made.values():
        node.close()


# ====================================================================================== the connection


@dataclass
class Connection:
    """One replication connection between a master and a slave node: the two real sessions, and the
    byte-carrying the asyncio code does between them."""

    master: Node
    slave: Node
    batch: int = 1024             # haTransferBatchSize
    piece: int = 97               # bytes per socket read on the slave
    all_ack: bool = False         # allAckInSyncStateSet on the master
    sync_from_last_file: bool = False
    sent: list[Transfer] = field(default_factory=list)
    point: int | None = None
    acks: int = 0
    now_ms: int = 0
    m: MasterSession = field(init=False)
    s: SlaveSession = field(init=False)
    _record: MasterFrameReader = field(default_factory=MasterFrameReader)

    def __post_init__(self) -> None:
        epoch = self.master.store.epochs.last_epoch()
        self.m = MasterSession(self.master.store, GROUP, self.master.broker_id, epoch, self.master.key, 0)
        self.s = SlaveSession(self.slave.store, GROUP, self.slave.broker_id, self.master.broker_id, epoch,
                              self.slave.key, sync_from_last_file=self.sync_from_last_file)

    @property
    def keys(self) -> dict[int, str]:
        return {n.broker_id: n.key.public_hex for n in (self.master, self.slave)}

    @property
    def transfer_offset(self) -> int:
        return self.m.transfer_offset

    @property
    def entries(self) -> list[EpochEntry]:
        return self.m.entries

    # ---------------------------------------------------------------- the wire
    def to_master(self, data: bytes) -> list[object]:
        self.now_ms += 1
        events: list[object] = []
        for k in range(0, len(data), 5):  # split every slave frame too
            events += self.m.receive(data[k:k + 5], self.now_ms)
        for event in events:
            if isinstance(event, Acked):
                self.acks += 1
                if event.first:
                    self.m.start_transfer(SEG)
                self.update_confirm()
        return events

    def to_slave(self, data: bytes) -> list[object]:
        self._record_sent(data)
        events: list[object] = []
        for k in range(0, len(data), self.piece):
            events += self.s.receive(data[k:k + self.piece])
        return events

    def _record_sent(self, data: bytes) -> None:
        self.sent += [f for f in self._record.feed(data) if isinstance(f, Transfer)]

    # ---------------------------------------------------------------- handshake (both sides)
    def handshake(self) -> int:
        """Handshake, hello, challenge, proof, the master's epochs; the slave cuts its log; returns the
        truncation point."""
        assert self.to_master(self.s.opening()) == [KeysNeeded(self.slave.broker_id)]
        assert self.to_slave(self.m.challenge(self.keys)) == [KeysNeeded(self.master.broker_id)]
        assert self.to_master(self.s.proof(self.keys)) == [Authenticated(self.slave.broker_id, False)]
        [reconcile] = self.to_slave(self.m.handshake())
        assert isinstance(reconcile, Reconcile)
        self.point = reconcile.point
        self._first_ack = self.s.reconcile(reconcile.point)
        return self.point

    def update_confirm(self) -> None:
        """HAService.update_confirm with the SyncStateSet {master, slave}, the slave connected."""
        m = self.master.store
        members = {self.master.broker_id, self.slave.broker_id}
        target = confirm_offset(self.all_ack, {self.slave.broker_id: self.m.ack_offset}, members,
                                self.master.broker_id, [self.slave.broker_id], m.max_offset)
        if target is not None and target > m.confirm_offset:
            m.set_confirm_offset(target)

    # ---------------------------------------------------------------- transfer
    def start(self) -> None:
        """The slave's first ack; the master picks the start offset."""
        [ack] = self.to_master(self._first_ack)
        assert isinstance(ack, Acked) and ack.first

    def _deliver(self, data: bytes) -> None:
        for event in self.to_slave(data):
            assert isinstance(event, Transfers)
            confirm = self.s.apply(event.frames)
            ack = self.s.ack(self.slave.store.max_offset)
            if ack is not None:
                self.to_master(ack)
            self.slave.store.set_confirm_offset(confirm)

    def pump(self, window: int = 600) -> None:
        """Run until the master session has nothing more and the wire is empty, then wake the master once
        (it sends a heartbeat with the latest confirmOffset), as after notify_new_data."""
        for _ in range(2):
            wire, idle = bytearray(), False
            while True:
                while not idle and len(wire) < window:
                    frame = self.m.next_transfer(self.batch, self.now_ms)
                    if frame is None:
                        idle = True
                    else:
                        wire += frame
                if not wire:
                    break
                data = bytes(wire[:self.piece])
                del wire[:self.piece]
                self._deliver(data)
            if self.master.store.max_offset <= self.m.transfer_offset:
                self._deliver(self.m.heartbeat())

    def run(self) -> int:
        point = self.handshake()
        self.start()
        self.pump()
        return point


# ====================================================================================== checks


def commitlog_files(node: Node) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((node.root / "commitlog").iterdir()) if p.name.isdigit()}


def messages(node: Node) -> list[list[tuple[int, bytes]]]:
    result = []
    for q in range(QUEUES):
        res = node.store.get_messages(TOPIC, q, 0, 10_000)
        result.append([(r.physical_offset, r.body) for r in res.records])
    return result


def record_bodies(node: Node, start: int = 0) -> list[bytes]:
    return [r.body for r in node.store.commitlog.iter_records(start)]


def assert_converged(master: Node, slave: Node) -> None:
    m, s = master.store, slave.store
    assert s.epochs.entries() == m.epochs.entries()
    assert s.max_offset == m.max_offset
    assert s.min_offset == m.min_offset
    assert commitlog_files(slave) == commitlog_files(master)
    assert s.confirm_offset == m.confirm_offset == m.max_offset
    assert messages(slave) == messages(master)
    # The epoch file on disk says the same as memory.
    on_disk = EpochFileCache(s.epochs.path)
    assert on_disk.load()
    assert on_disk.entries() == m.epochs.entries()


def check_frames(conn: Connection) -> None:
    """Every frame belongs to one epoch and never crosses its end; epochs are announced in order, each
    one (empty ones too) before its bytes; offsets are contiguous."""
    entries = conn.entries
    by_epoch = {e.epoch: (i, e) for i, e in enumerate(entries)}
    seen: list[int] = []
    offset = conn.sent[0].offset
    for frame in conn.sent:
        i, entry = by_epoch[frame.epoch]
        assert frame.epoch_start_offset == entry.start_offset
        assert frame.offset == offset
        offset += len(frame.body)
        if not seen or seen[-1] != frame.epoch:
            assert frame.body == b"", "a new epoch is announced with an empty frame first"
            if seen:
                assert i == by_epoch[seen[-1]][0] + 1, "no epoch is skipped"
            seen.append(frame.epoch)
        if frame.body:
            end = entries[i + 1].start_offset if i + 1 < len(entries) else MAX_OFFSET
            assert entry.start_offset <= frame.offset and frame.offset + len(frame.body) <= end
            assert frame.offset // SEG == (frame.offset + len(frame.body) - 1) // SEG, "one segment per frame"
    assert seen[-1] == entries[-1].epoch


# ====================================================================================== (a) catch-up


class TestEmptySlaveCatchesUp:
    @pytest.mark.parametrize("batch,piece,all_ack", [
        (1024, 97, False),
        (1, 36, True),           # one record per frame; reads of exactly one header
        (1 << 20, 4096, False),  # whole segments per frame
        (700, 1, True),          # byte-by-byte reads
    ])
    def test_three_epochs_middle_one_empty(self, nodes: Nodes, batch: int, piece: int, all_ack: bool) -> None:
        """RocketMQ PR #9942: the empty epoch 2 must reach the slave's epoch file too."""
        master, slave = nodes(1), nodes(2)
        master.become_master(1)
        master.write(25, "e1")
        x = master.store.max_offset
        master.become_master(2)       # no data in epoch 2
        master.become_master(3)
        master.write(25, "e3")
        assert x > SEG and master.store.max_offset > 2 * SEG
        assert [(e.epoch, e.start_offset, e.end_offset) for e in master.store.epochs.entries()] == [
            (1, 0, x), (2, x, x), (3, x, MAX_OFFSET)]

        conn = Connection(master, slave, batch=batch, piece=piece, all_ack=all_ack)
        assert conn.run() == 0

        assert_converged(master, slave)
        check_frames(conn)
        announced = [(f.epoch, f.epoch_start_offset, f.offset) for f in conn.sent if not f.body]
        assert (2, x, x) in announced
        assert len(record_bodies(slave)) == 50

    def test_all_ack_confirm_follows_the_slave_acks(self, nodes: Nodes) -> None:
        master, slave = nodes(1), nodes(2)
        master.become_master(1)
        master.write(20, "e1", confirm=False)
        conn = Connection(master, slave, all_ack=True)
        conn.handshake()
        conn.start()
        # The first ack is 0: the slave holds nothing yet, so confirmOffset must not move past it
        # (RocketMQ ignores such a member; we do not, see services/broker/quorum.py).
        assert master.store.confirm_offset == 0
        conn.pump()
        assert_converged(master, slave)
        # Now the slave has acked something: new writes are confirmed only as far as it acks.
        before = master.store.max_offset
        master.write(20, "e1", confirm=False)
        conn.update_confirm()
        assert master.store.confirm_offset == before
        first_new = len(conn.sent)
        conn.pump()
        new_data = [f for f in conn.sent[first_new:] if f.body]
        assert new_data
        assert all(f.confirm_offset <= f.offset for f in new_data), "never beyond what the slave acked"
        confirms = [f.confirm_offset for f in conn.sent[first_new:]]
        assert confirms == sorted(confirms)
        assert_converged(master, slave)

    def test_resume_in_the_same_connection_after_new_writes(self, nodes: Nodes) -> None:
        master, slave = nodes(1), nodes(2)
        master.become_master(1)
        master.write(5, "e1")
        conn = Connection(master, slave)
        conn.run()
        assert_converged(master, slave)
        for _ in range(3):
            master.write(7, "e1")  # notify_new_data wakes the stream
            conn.pump()
            assert_converged(master, slave)
        check_frames(conn)

    def test_resume_on_a_new_connection_across_epochs(self, nodes: Nodes) -> None:
        master, slave = nodes(1), nodes(2)
        master.become_master(1)
        master.write(10, "e1")
        Connection(master, slave).run()
        assert_converged(master, slave)
        end_seen = slave.store.max_offset
        master.write(6, "e1")         # the slave is away
        master.become_master(2)
        master.become_master(3)
        master.write(12, "e3")
        conn = Connection(master, slave, batch=500, piece=41)
        assert conn.run() == end_seen  # nothing to cut: the slave is simply behind
        assert conn.sent[0].epoch == 1 and conn.sent[0].offset == end_seen
        check_frames(conn)
        assert_converged(master, slave)

    def test_slave_restart_between_connections(self, nodes: Nodes) -> None:
        master, slave = nodes(1), nodes(2)
        master.become_master(1)
        master.write(12, "e1")
        Connection(master, slave).run()
        slave.crash_and_reopen()
        master.become_master(2)
        master.write(12, "e2")
        Connection(master, slave).run()
        assert_converged(master, slave)

    def test_sync_from_last_file(self, nodes: Nodes) -> None:
        master, slave = nodes(1), nodes(2)
        master.become_master(1)
        master.write(20, "e1")
        master.become_master(2)
        master.write(20, "e2")
        m = master.store
        last_file = m.max_offset - m.max_offset % SEG
        assert last_file > 0
        conn = Connection(master, slave, sync_from_last_file=True)
        conn.run()
        s = slave.store
        assert s.min_offset == last_file and s.max_offset == m.max_offset
        first = conn.sent[0]
        assert first.offset == last_file and first.body == b""
        # The slave's epochs are the master's, from the epoch holding the last file's start.
        idx = epoch_index_for(m.epochs.entries(), last_file)
        assert s.epochs.entries() == m.epochs.entries()[idx:]
        name = f"{last_file:020d}"
        assert commitlog_files(slave) == {name: commitlog_files(master)[name]}
        assert record_bodies(slave, last_file) == record_bodies(master, last_file)
        assert s.confirm_offset == m.max_offset


# ====================================================================================== (a') retention


def queue_bodies(node: Node) -> list[list[bytes]]:
    """Every message body each queue still holds, from the queue's min offset."""
    result = []
    for q in range(QUEUES):
        cq = node.store.queues.queue(TOPIC, q)
        start = cq.min_offset if cq else 0
        result.append([r.body for r in node.store.get_messages(TOPIC, q, start, 10_000).records])
    return result


class TestSlaveBehindRetention:
    """The master's retention deleted what a slave needs to catch up: the slave starts over from the master's
    oldest data (protocol.py step 4) instead of being stuck, and ends up byte-identical to it."""

    def test_slave_starts_over_at_the_masters_oldest_data(self, nodes: Nodes) -> None:
        master, slave = nodes(1), nodes(2)
        master.become_master(1)
        master.write(10, "e1")
        Connection(master, slave).run()
        end_seen = slave.store.max_offset
        master.become_master(2)  # the slave is away while the master writes on and deletes old segments
        master.write(60, "e2")
        master.store.flush()
        new_min = master.store.delete_oldest(len(master.store.commitlog.segments) - 2)
        assert new_min > end_seen

        conn = Connection(master, slave)
        assert conn.run() == end_seen  # nothing to cut: the slave's log is simply behind
        assert conn.sent[0].offset == new_min
        check_frames(conn)
        m, s = master.store, slave.store
        assert (s.min_offset, s.max_offset) == (new_min, m.max_offset)
        assert commitlog_files(slave) == commitlog_files(master)
        assert s.epochs.entries() == m.epochs.entries()
        assert queue_bodies(slave) == queue_bodies(master) and sum(map(len, queue_bodies(slave))) > 0
        slave.crash_and_reopen()  # what the start-over did is on disk
        assert (slave.store.min_offset, slave.store.max_offset) == (new_min, m.max_offset)
        assert queue_bodies(slave) == queue_bodies(master)

    def test_a_gap_after_the_first_frame_is_still_refused(self, nodes: Nodes) -> None:
        master, slave = nodes(1), nodes(2)
        master.become_master(1)
        master.write(10, "e1")
        Connection(master, slave).run()
        gap = Transfer(slave.store.max_offset + SEG, 1, 0, 0, b"")
        session = SlaveSession(slave.store, GROUP, 2, 1, 1, slave.key)
        assert session.starts_over((gap,))  # as a first frame it would discard the log (the caller locks)
        session._first_frame = False
        assert not session.starts_over((gap,))
        with pytest.raises(ProtocolError, match="discontinuity"):
            session.apply((gap,))
        assert slave.store.min_offset == 0  # nothing discarded


# ====================================================================================== (b) divergent tail


class TestDivergentTail:
    def _old_master_with_tail(self, nodes: Nodes, tail: int = 14) -> tuple[Node, Node, int]:
        """A (1) was master in epoch 1; B (2) replicated part of it; A wrote a tail B never got; B is
        master in epoch 2 and has written more."""
        a, b = nodes(1), nodes(2)
        a.become_master(1)
        a.write(12, "A1")
        Connection(a, b).run()
        x = a.store.max_offset
        a.write(tail, "A1-tail")    # never replicated
        b.become_master(2)
        b.written = 1000
        b.write(20, "B2")
        return a, b, x

    def test_truncates_durably_then_converges(self, nodes: Nodes) -> None:
        a, b, x = self._old_master_with_tail(nodes)
        a_end = a.store.max_offset
        assert a_end > SEG > x, "the tail crosses a segment boundary"
        tail_bodies = record_bodies(a, x)
        assert len(tail_bodies) == 14
        assert sum(len(q) for q in messages(a)) == 26  # the tail was visible on A as master

        conn = Connection(b, a)
        assert conn.handshake() == x
        assert a.store.max_offset == x
        assert a.store.epochs.entries() == [EpochEntry(1, 0)]

        # RocketMQ issue #10666: the truncation must survive a crash right after it.
        a.crash_and_reopen()
        s = a.store
        assert s.max_offset == x
        assert record_bodies(a, x) == []
        assert all(body not in record_bodies(a) for body in tail_bodies)
        assert [p.name for p in (a.root / "commitlog").iterdir() if p.name.isdigit()] == [f"{0:020d}"]
        assert os.path.getsize(a.root / "commitlog" / f"{0:020d}") == x
        assert s.epochs.entries() == [EpochEntry(1, 0)]
        assert sum(len(q) for q in messages(a)) == 12  # consume queues cut with the log
        assert s.confirm_offset <= x
        assert commitlog_files(a)[f"{0:020d}"] == commitlog_files(b)[f"{0:020d}"][:x]

        # A new connection: nothing more to cut; A converges byte-identical with B.
        conn = Connection(b, a, batch=800, piece=53)
        assert conn.run() == x
        check_frames(conn)
        assert_converged(b, a)
        assert all(body not in record_bodies(a) for body in tail_bodies)

    def test_truncate_and_converge_in_one_connection(self, nodes: Nodes) -> None:
        a, b, x = self._old_master_with_tail(nodes, tail=3)
        conn = Connection(b, a, all_ack=True)
        assert conn.run() == x
        check_frames(conn)
        assert_converged(b, a)

    def test_slave_epoch_unknown_to_the_master_is_dropped(self, nodes: Nodes) -> None:
        """A was master in epoch 3 (B partitioned) and wrote a tail; B, master again in epoch 4, never
        heard of epoch 3. The consistent point is A's end of epoch 2."""
        a, b = nodes(1), nodes(2)
        a.become_master(1)
        a.write(8, "A1")
        Connection(a, b).run()
        b.become_master(2)
        b.written = 1000
        b.write(8, "B2")
        Connection(b, a).run()       # A follows B in epoch 2 ...
        z = a.store.max_offset
        b.write(6, "B2-more")         # ... but misses this
        a.become_master(3)            # unclean election of A at z
        a.written = 2000
        a.write(10, "A3")
        b.become_master(4)            # B, which never saw epoch 3
        b.write(10, "B4")
        assert [e.epoch for e in a.store.epochs.entries()] == [1, 2, 3]
        assert [e.epoch for e in b.store.epochs.entries()] == [1, 2, 4]

        conn = Connection(b, a, batch=600, piece=29)
        assert conn.handshake() == z
        assert [e.epoch for e in a.store.epochs.entries()] == [1, 2]
        a.crash_and_reopen()
        assert a.store.max_offset == z
        assert [e.epoch for e in a.store.epochs.entries()] == [1, 2]
        conn = Connection(b, a, batch=600, piece=29)
        assert conn.run() == z
        check_frames(conn)
        assert_converged(b, a)

    def test_no_common_epoch_stops_before_touching_the_log(self, nodes: Nodes) -> None:
        a, b = nodes(1), nodes(2)
        a.become_master(1)
        a.write(5, "A1")
        b.become_master(2)
        b.write(5, "B2")
        before = commitlog_files(a)
        with pytest.raises(Unreconcilable):
            Connection(b, a).handshake()
        assert commitlog_files(a) == before
        assert a.store.epochs.entries() == [EpochEntry(1, 0)]


# ====================================================================================== (c) re-election


class TestReElectedMaster:
    def test_epochs_1_and_2_start_at_the_same_offset(self, nodes: Nodes) -> None:
        master, slave = nodes(1), nodes(2)
        master.become_master(1)
        Connection(master, slave).run()      # the slave hears of epoch 1 (no data yet)
        assert slave.store.epochs.entries() == [EpochEntry(1, 0)]
        master.become_master(2)              # re-elected, still at 0
        master.write(20, "e2")
        assert [(e.epoch, e.start_offset) for e in master.store.epochs.entries()] == [(1, 0), (2, 0)]
        conn = Connection(master, slave)
        assert conn.run() == 0
        check_frames(conn)
        assert_converged(master, slave)

    def test_same_start_offset_empty_slave(self, nodes: Nodes) -> None:
        master, slave = nodes(1), nodes(2)
        master.become_master(1)
        master.become_master(2)
        master.write(10, "e2")
        conn = Connection(master, slave, batch=1)
        conn.run()
        assert [(f.epoch, f.offset) for f in conn.sent[:2]] == [(1, 0), (2, 0)]
        check_frames(conn)
        assert_converged(master, slave)

    def test_re_elected_twice_without_new_data(self, nodes: Nodes) -> None:
        master, slave = nodes(1), nodes(2)
        master.become_master(1)
        master.write(10, "e1")
        Connection(master, slave).run()
        x = master.store.max_offset
        master.become_master(2)
        master.become_master(3)              # epochs 2 and 3 both start at x
        master.write(10, "e3")
        conn = Connection(master, slave)
        assert conn.run() == x
        check_frames(conn)
        assert_converged(master, slave)

    def test_slave_already_holding_the_empty_epoch(self, nodes: Nodes) -> None:
        master, slave = nodes(1), nodes(2)
        master.become_master(1)
        master.write(10, "e1")
        x = master.store.max_offset
        master.become_master(2)
        Connection(master, slave).run()      # the slave records epoch 2 at x, with no data in it
        assert slave.store.epochs.entries()[-1] == EpochEntry(2, x)
        master.become_master(3)
        master.write(5, "e3")
        conn = Connection(master, slave)
        assert conn.run() == x
        check_frames(conn)
        assert_converged(master, slave)
