"""Master -> slave replication end to end, in memory: real MessageStores (files in tmp_path, 4 KiB
segments), the real frame encoders/readers and protocol rules, no sockets, no sleeps.

The master side mirrors ``HAService._stream`` (ha/master.py): announce the epoch of the first offset with
an empty Transfer, then ``aligned_chunk`` batches that never cross the end of their epoch, announcing each
next epoch (even an empty one) before its bytes; when caught up it waits (here: yields IDLE) and, woken
with no new data, sends a heartbeat carrying the current confirmOffset. The slave side mirrors
``HAClient._reconcile`` / ``_apply`` (ha/slave.py): decide_truncation, truncate durably, drop epochs from
the point on; then per frame slave_step, epochs.append, append_raw, set_confirm_offset, and one ack per
read. The bytes go through the wire in small pieces, so frames are split at arbitrary boundaries.

Scenarios: (a) an empty slave catches up across three epochs, the middle one empty (RocketMQ PR #9942);
(b) a slave with a divergent tail from an epoch in which it was master truncates durably (reopening the
store does not bring the tail back, RocketMQ issue #10666) and converges; (c) a re-elected master whose
epochs start at the same offset.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from services.broker.epoch_file import MAX_OFFSET, EpochEntry, EpochFileCache
from services.broker.ha.frames import (
    MasterFrameReader,
    MasterHandshake,
    ProtocolError,
    SlaveAck,
    SlaveFrameReader,
    SlaveHandshake,
    Transfer,
)
from services.broker.ha.protocol import (
    Unreconcilable,
    check_ack,
    decide_truncation,
    epoch_index_for,
    slave_step,
    transfer_start,
)
from services.broker.quorum import confirm_offset
from services.broker.store import Message, MessageStore

SEG = 4096
HOST = "127.0.0.1:10911"
TOPIC = "TopicTest"
QUEUES = 2
TS = 1_700_000_000_000
IDLE = object()


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
    """One replication connection between a master and a slave node."""

    master: Node
    slave: Node
    batch: int = 1024             # haTransferBatchSize
    piece: int = 97               # bytes per socket read on either side
    all_ack: bool = False         # allAckInSyncStateSet on the master
    sync_from_last_file: bool = False
    sent: list[Transfer] = field(default_factory=list)
    point: int | None = None
    acks: int = 0
    transfer_offset: int = 0
    ack_offset: int = -1
    entries: list[EpochEntry] = field(default_factory=list)
    _wire: bytearray = field(default_factory=bytearray)
    _gen: Iterator[object] | None = None
    _to_master: SlaveFrameReader = field(default_factory=SlaveFrameReader)
    _to_slave: MasterFrameReader = field(default_factory=MasterFrameReader)

    # ---------------------------------------------------------------- helpers
    def _deliver_to_master(self, data: bytes) -> list[object]:
        frames: list[object] = []
        for k in range(0, len(data), 5):  # split every slave frame too
            frames += self._to_master.feed(data[k:k + 5])
        return frames

    def _deliver_to_slave(self, data: bytes) -> list[object]:
        frames: list[object] = []
        for k in range(0, len(data), self.piece):
            frames += self._to_slave.feed(data[k:k + self.piece])
        return frames

    # ---------------------------------------------------------------- handshake (both sides)
    def handshake(self) -> int:
        """Slave handshake, master handshake, slave reconcile; returns the truncation point."""
        [shs] = self._deliver_to_master(SlaveHandshake(self.slave.broker_id, self.sync_from_last_file).encode())
        assert isinstance(shs, SlaveHandshake) and shs.slave_broker_id == self.slave.broker_id
        m = self.master.store
        self.entries = m.epochs.entries()  # HAService._epochs_snapshot, used for the whole connection
        hs = MasterHandshake(m.max_offset, m.epochs.last_epoch(),
                             tuple((e.epoch, e.start_offset) for e in self.entries))
        [got] = self._deliver_to_slave(hs.encode())
        assert got == hs
        assert isinstance(got, MasterHandshake)
        self.point = self._reconcile(got)
        return self.point

    def _reconcile(self, hs: MasterHandshake) -> int:
        """HAClient._reconcile."""
        s = self.slave.store
        point = decide_truncation(s.epochs.entries(), s.min_offset, s.max_offset, hs)
        if point < s.max_offset:
            s.truncate(point)
        s.epochs.truncate_suffix_by_offset(point)
        return point

    # ---------------------------------------------------------------- transfer
    def start(self) -> None:
        """The slave's first ack; the master picks the start offset and begins streaming."""
        self._on_acks(self._deliver_to_master(SlaveAck(self.slave.store.max_offset).encode()), first=True)
        self._gen = self._stream()

    def _on_acks(self, frames: list[object], first: bool = False) -> None:
        """HAService._on_ack (the parts that touch the log): check, record, move confirmOffset."""
        m = self.master.store
        for ack in frames:
            assert isinstance(ack, SlaveAck)
            check_ack(ack.max_offset, m.max_offset)
            self.ack_offset = ack.max_offset
            if first:
                self.transfer_offset = transfer_start(ack.max_offset, m.min_offset, m.max_offset, SEG,
                                                      self.sync_from_last_file)
                first = False
            self.acks += 1
        self.update_confirm()

    def update_confirm(self) -> None:
        """HAService.update_confirm with the SyncStateSet {master, slave}, the slave connected."""
        m = self.master.store
        members = {self.master.broker_id, self.slave.broker_id}
        target = confirm_offset(self.all_ack, {self.slave.broker_id: self.ack_offset}, members,
                                self.master.broker_id, [self.slave.broker_id], m.max_offset)
        if target is not None and target > m.confirm_offset:
            m.set_confirm_offset(target)

    def _send(self, entry: EpochEntry, body: bytes) -> Transfer:
        frame = Transfer(self.transfer_offset, entry.epoch, entry.start_offset,
                         self.master.store.confirm_offset, body)
        self.transfer_offset += len(body)
        self.sent.append(frame)
        return frame

    def _stream(self) -> Iterator[object]:
        """HAService._stream, with IDLE where it would wait for new data or the heartbeat interval."""
        entries, m = self.entries, self.master.store
        if not entries:
            raise ProtocolError("the master has no epoch entries")
        idx = epoch_index_for(entries, self.transfer_offset)
        yield self._send(entries[idx], b"")  # announce the epoch (it may hold no data)
        while True:
            entry = entries[idx]
            end = entries[idx + 1].start_offset if idx + 1 < len(entries) else None
            if end is not None and self.transfer_offset >= end:
                idx += 1
                yield self._send(entries[idx], b"")
                continue
            chunk = m.commitlog.aligned_chunk(self.transfer_offset, self.batch, end)
            if chunk:
                yield self._send(entry, chunk)
                continue
            yield IDLE
            if m.max_offset <= self.transfer_offset:
                yield self._send(entry, b"")  # confirmOffset moved (or heartbeat): tell the slave

    def _apply(self, frames: Sequence[object]) -> None:
        """HAClient._apply: check, record the epoch, append, confirm; then one ack."""
        s = self.slave.store
        for frame in frames:
            if not isinstance(frame, Transfer):
                raise ProtocolError("unexpected handshake during transfer")
            step = slave_step(frame, s.min_offset, s.max_offset, s.epochs.last_epoch())
            if step.new_epoch is not None and not s.epochs.append(*step.new_epoch):
                raise ProtocolError(f"cannot record epoch {step.new_epoch} after {s.epochs.entries()[-1:]}")
            if step.append:
                s.append_raw(frame.offset, step.append)
            s.set_confirm_offset(step.confirm_offset)
        self._on_acks(self._deliver_to_master(SlaveAck(s.max_offset).encode()))

    def pump(self, window: int = 600) -> None:
        """Run until the master is caught up and the wire is empty, then wake the master once (so it
        sends the heartbeat with the latest confirmOffset), as after notify_new_data."""
        assert self._gen is not None
        for _ in range(2):
            idle = False
            while True:
                while not idle and len(self._wire) < window:
                    item = next(self._gen)
                    if item is IDLE:
                        idle = True
                    else:
                        self._wire += item.encode()  # type: ignore[attr-defined]
                if not self._wire:
                    break
                data = bytes(self._wire[:self.piece])
                del self._wire[:self.piece]
                frames = self._to_slave.feed(data)
                if frames:
                    self._apply(frames)

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
