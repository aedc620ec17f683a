"""One replication connection as two sans-I/O sessions: bytes and time in, frames and decisions out.

Theory of operation
-------------------
A :class:`MasterSession` is one slave's connection seen from the master; a :class:`SlaveSession` is the
connection seen from the slave. Neither touches a socket, a clock or the controller: the asyncio code in
``ha/master.py`` and ``ha/slave.py`` moves bytes, passes the time in, fetches the group's public keys when
a session asks for them (``KeysNeeded``), and carries out what the slave session decides (truncate the log,
append what arrived). The master session reads the log it streams; the slave session writes the log it
replicates only through :meth:`SlaveSession.apply`.

The connection goes through these states (a frame out of order closes it, ``ProtocolError``)::

    slave                                   master
    opening(): handshake + hello  ───────▶  receive → KeysNeeded(slave id)
                                            challenge(keys)   (the slave id must have a key)
    receive → KeysNeeded(master id) ◀─────  challenge: master id, epoch, nonce, signature
    proof(keys)                   ───────▶  receive → Authenticated
                                            handshake(): the epoch entries, snapshotted
    receive → Reconcile(point)    ◀─────
    reconcile(point): cut the log
      there; the first ack        ───────▶  receive → Acked(first=True); start_transfer()
    receive → Transfers(frames)   ◀─────  next_transfer() … / heartbeat()
    apply(frames); ack(ackable)   ───────▶  receive → Acked

The master never lets a transfer frame cross the end of an epoch, and announces every epoch (even one
that holds no data) with an empty frame before its bytes, so the slave's epoch file ends up identical to
the master's (``ha/protocol.py`` has the rules each side checks).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from services.broker.epoch_file import EpochEntry
from services.broker.ha.auth import (
    Binding,
    BrokerKey,
    master_proof_ok,
    new_nonce,
    slave_proof_ok,
    valid_public_key,
)
from services.broker.ha.frames import (
    MasterChallenge,
    MasterFrameReader,
    MasterHandshake,
    ProtocolError,
    SlaveAck,
    SlaveFrame,
    SlaveFrameReader,
    SlaveHandshake,
    SlaveHello,
    SlaveProof,
    Transfer,
)
from services.broker.ha.protocol import (
    SlaveStep,
    check_ack,
    decide_truncation,
    epoch_index_for,
    slave_step,
    transfer_start,
)
from services.broker.record import InvalidRecord

# ---------------------------------------------------------------------- what the sessions read and write


class Epochs(Protocol):
    def entries(self) -> list[EpochEntry]: ...

    def last_epoch(self) -> int: ...

    def append(self, epoch: int, start_offset: int) -> bool: ...

    def truncate_suffix_by_offset(self, offset: int) -> None: ...


class Chunks(Protocol):
    def aligned_chunk(self, offset: int, max_bytes: int, limit: int | None = None) -> bytes: ...


class Log(Protocol):
    """The parts of a broker's store a session uses (``MessageStore`` is one)."""

    @property
    def min_offset(self) -> int: ...

    @property
    def max_offset(self) -> int: ...

    @property
    def confirm_offset(self) -> int: ...

    @property
    def epochs(self) -> Epochs: ...

    @property
    def commitlog(self) -> Chunks: ...

    def check_raw(self, offset: int, data: bytes) -> Any: ...

    def append_checked(self, offset: int, data: bytes, checked: Any) -> None: ...

    def truncate(self, offset: int) -> None: ...

    def start_over(self, offset: int) -> None: ...


# ---------------------------------------------------------------------- decisions handed to the I/O code


@dataclass(frozen=True)
class KeysNeeded:
    """Fetch the group's public keys from the controller, then call ``challenge`` (master) or ``proof``
    (slave) with them."""

    broker_id: int


@dataclass(frozen=True)
class Authenticated:
    slave_id: int
    learner: bool


@dataclass(frozen=True)
class Acked:
    offset: int
    first: bool


@dataclass(frozen=True)
class Reconcile:
    """Call ``reconcile(point)`` (it cuts the log durably, so the I/O code may run it in a worker thread)."""

    point: int


@dataclass(frozen=True)
class Transfers:
    frames: tuple[Transfer, ...]


class State(Enum):
    HANDSHAKE = "HANDSHAKE"          # waiting for the slave's handshake (master)
    HELLO = "HELLO"                  # waiting for the slave's hello (master)
    KEYS = "KEYS"                    # waiting for the I/O code to bring the keys
    CHALLENGE = "CHALLENGE"          # waiting for the master's challenge (slave)
    PROOF = "PROOF"                  # waiting for the slave's proof (master)
    MASTER_HANDSHAKE = "MASTER_HANDSHAKE"  # waiting for the master's epochs (slave)
    RECONCILE = "RECONCILE"          # waiting for the I/O code to cut the log (slave)
    TRANSFER = "TRANSFER"


def _key_of(keys: dict[int, str], broker_id: int, group: str) -> str:
    if broker_id not in keys:
        raise ProtocolError(f"broker id {broker_id} is not registered in {group}")
    if not valid_public_key(keys[broker_id]):
        raise ProtocolError(f"broker id {broker_id} has no key registered with the controller (a broker of an "
                            "older mqctl version? restart it on this version)")
    return keys[broker_id]


# ---------------------------------------------------------------------- master side


class MasterSession:
    """One slave's connection, on the master."""

    def __init__(self, log: Log, broker_name: str, master_id: int, master_epoch: int, key: BrokerKey,
                 now_ms: int, nonce: Callable[[], bytes] = new_nonce) -> None:
        self.log, self.broker_name, self.master_id, self.master_epoch = log, broker_name, master_id, master_epoch
        self.key, self._nonce = key, nonce
        self.state = State.HANDSHAKE
        self.slave_id, self.learner, self.sync_from_last_file = -1, False, False
        self.connected_ms = self.last_read_ms = now_ms
        self.ack_offset, self.request_offset = -1, -1
        self.transfer_offset = 0
        self.last_master_max, self.last_transfer_ms = 0, 0
        self.bytes_sent = 0
        self._reader = SlaveFrameReader()
        self._binding: Binding | None = None
        self._slave_key = ""
        self.entries: list[EpochEntry] = []  # the master's epochs when the handshake was sent
        self._idx = 0
        self._announce = False

    @property
    def authenticated(self) -> bool:
        return self.state is State.TRANSFER

    def receive(self, data: bytes, now_ms: int) -> list[KeysNeeded | Authenticated | Acked]:
        self.last_read_ms = now_ms
        return [event for frame in self._reader.feed(data) if (event := self._on(frame)) is not None]

    def _on(self, frame: SlaveFrame) -> KeysNeeded | Authenticated | Acked | None:
        if isinstance(frame, SlaveAck):
            return self._on_ack(frame)
        if isinstance(frame, SlaveHandshake) and self.state is State.HANDSHAKE:
            if frame.slave_broker_id == self.master_id:
                raise ProtocolError("a broker cannot replicate from itself")
            self.slave_id, self.learner = frame.slave_broker_id, frame.async_learner
            self.sync_from_last_file, self.state = frame.sync_from_last_file, State.HELLO
            return None
        if isinstance(frame, SlaveHello) and self.state is State.HELLO:
            self._binding = Binding(self.broker_name, self.master_id, self.slave_id, self.master_epoch,
                                    self._nonce(), frame.nonce)
            self.state = State.KEYS
            return KeysNeeded(self.slave_id)
        if isinstance(frame, SlaveProof) and self.state is State.PROOF:
            assert self._binding is not None
            if not slave_proof_ok(self._slave_key, self._binding, frame.signature):
                raise ProtocolError(f"the peer failed to prove it is broker {self.slave_id} (bad signature)")
            self.state = State.TRANSFER
            return Authenticated(self.slave_id, self.learner)
        if isinstance(frame, SlaveHandshake):
            raise ProtocolError("second handshake on one connection")
        raise ProtocolError(f"{type(frame).__name__} out of order (connection state {self.state.value})")

    def plain(self, keys: dict[int, str], addresses: dict[int, str], peer_host: str) -> Authenticated:
        """Serve a slave that sent its handshake and no hello: RocketMQ's own broker, whose protocol has no
        proof of identity (allowed only with ``rocketmqHaPeers``; the I/O code waits a moment for a hello
        first). Its id must be one the controllers registered in this group, hold no key (a broker with a
        key proves itself, always: nobody may take its id by leaving the proof out) and be registered at
        the address this connection comes from."""
        if self.state is not State.HELLO:
            raise ProtocolError(f"no handshake without proof is due (connection state {self.state.value})")
        if self.slave_id not in addresses:
            raise ProtocolError(f"broker id {self.slave_id} is not registered in {self.broker_name}")
        if valid_public_key(keys.get(self.slave_id, "")):
            raise ProtocolError(f"broker id {self.slave_id} has a key registered with the controller but did "
                                "not prove it holds it")
        registered = addresses[self.slave_id].rpartition(":")[0]
        if registered != peer_host:
            raise ProtocolError(f"broker id {self.slave_id} is registered at {addresses[self.slave_id]}, but this "
                                f"connection comes from {peer_host}")
        self.state = State.TRANSFER
        return Authenticated(self.slave_id, self.learner)

    def challenge(self, keys: dict[int, str]) -> bytes:
        """The answer to the hello, once the keys are known: this master's signed challenge."""
        if self.state is not State.KEYS or self._binding is None:
            raise ProtocolError("no challenge is due")
        self._slave_key = _key_of(keys, self.slave_id, self.broker_name)
        self.state = State.PROOF
        b = self._binding
        return MasterChallenge(self.master_id, self.master_epoch, b.master_nonce, self.key.sign_as_master(b)).encode()

    def _on_ack(self, ack: SlaveAck) -> Acked:
        if self.state is not State.TRANSFER:
            raise ProtocolError("ack before the slave proved its identity")
        check_ack(ack.max_offset, self.log.max_offset)
        self.ack_offset = ack.max_offset
        first = self.request_offset < 0
        if first:
            self.request_offset = ack.max_offset
        return Acked(ack.max_offset, first)

    # ------------------------------------------------------------------ streaming
    def handshake(self) -> bytes:
        """The master's epochs and max offset; the entries are the ones streamed for this connection."""
        self.entries = self.log.epochs.entries()
        if not self.entries:
            raise ProtocolError("the master has no epoch entries")
        return MasterHandshake(self.log.max_offset, self.log.epochs.last_epoch(),
                               tuple((e.epoch, e.start_offset) for e in self.entries)).encode()

    def start_transfer(self, segment_size: int) -> None:
        """After the slave's first ack: where streaming starts, and its epoch announced first."""
        self.transfer_offset = transfer_start(self.request_offset, self.log.min_offset, self.log.max_offset,
                                              segment_size, self.sync_from_last_file)
        self._idx = epoch_index_for(self.entries, self.transfer_offset)
        self._announce = True

    def next_transfer(self, batch: int, now_ms: int) -> bytes | None:
        """The next frame to send, or None when the slave has everything there is (then wait for new
        data or the heartbeat interval)."""
        if self._announce:
            self._announce = False
            return self._frame(b"")
        end = self.entries[self._idx + 1].start_offset if self._idx + 1 < len(self.entries) else None
        if end is not None and self.transfer_offset >= end:
            self._idx += 1
            return self._frame(b"")  # every epoch is announced, even one that holds no data
        chunk = self.log.commitlog.aligned_chunk(self.transfer_offset, batch, end)
        if not chunk:
            return None
        self.last_master_max, self.last_transfer_ms = self.log.max_offset, now_ms
        return self._frame(chunk)

    def heartbeat(self) -> bytes:
        """An empty frame: the slave learns the current confirmOffset and that the master is alive."""
        return self._frame(b"")

    def caught_up_since(self, now_ms: int) -> int | None:
        """Since when this slave has held everything the master had (for the SyncStateSet), or None."""
        if self.learner or self.ack_offset < 0:
            return None
        if self.ack_offset >= self.log.max_offset:
            return now_ms
        if self.ack_offset >= self.last_master_max and self.last_transfer_ms:
            return self.last_transfer_ms
        return None

    def close_reason(self, now_ms: int, idle_limit_ms: int, auth_limit_ms: int) -> str | None:
        if self.state is not State.TRANSFER and now_ms - self.connected_ms > auth_limit_ms:
            return f"did not prove its identity within {auth_limit_ms} ms"
        if now_ms - self.last_read_ms > idle_limit_ms:
            return f"nothing heard for {idle_limit_ms} ms"
        return None

    def _frame(self, body: bytes) -> bytes:
        entry = self.entries[self._idx]
        frame = Transfer(self.transfer_offset, entry.epoch, entry.start_offset, self.log.confirm_offset, body)
        self.transfer_offset += len(body)
        self.bytes_sent += len(body)
        return frame.encode()


# ---------------------------------------------------------------------- slave side

#: The most bytes of one record (or end-of-segment padding) a slave keeps while the rest is to come: a BLANK
#: fills a segment's end, so this bounds the segment size of a group with RocketMQ's brokers.
MAX_PENDING = 1 << 30


def whole_records_length(data: bytes) -> int:
    """How many bytes at the start of ``data`` are whole records (by their totalSize fields). A size that no
    record can have ends the count there with everything that follows, so the record checks refuse it."""
    pos = 0
    while len(data) - pos >= 8:
        total = int.from_bytes(data[pos:pos + 4], "big", signed=True)
        if total < 8 or total > MAX_PENDING:
            return len(data)
        if pos + total > len(data):
            break
        pos += total
    return pos


class SlaveSession:
    """The connection to the master, on a slave."""

    def __init__(self, log: Log, broker_name: str, self_id: int, master_id: int, master_epoch: int,
                 key: BrokerKey, learner: bool = False, sync_from_last_file: bool = False,
                 nonce: Callable[[], bytes] = new_nonce, plain: bool = False) -> None:
        self.log, self.broker_name, self.self_id, self.key = log, broker_name, self_id, key
        self.master_id, self.master_epoch = master_id, master_epoch
        self.learner, self.sync_from_last_file = learner, sync_from_last_file
        #: RocketMQ's own protocol, without proof (``rocketmqHaPeers``, a master the controllers hold no key
        #: for: RocketMQ's broker): the handshake alone, and the master's epochs straight after it.
        self.plain = plain
        self.state = State.MASTER_HANDSHAKE if plain else State.CHALLENGE
        self.acked = -1  # the last offset acknowledged on this connection
        self._first_frame = True
        self._nonce = nonce()
        self._reader = MasterFrameReader()
        self._challenge: MasterChallenge | None = None
        #: From RocketMQ's master: the start of a record whose rest is still to come (see _whole_records).
        self._pending = b""

    def opening(self) -> bytes:
        handshake = SlaveHandshake(self.self_id, self.sync_from_last_file, self.learner).encode()
        return handshake if self.plain else handshake + SlaveHello(self._nonce).encode()

    def receive(self, data: bytes) -> list[KeysNeeded | Reconcile | Transfers]:
        events: list[KeysNeeded | Reconcile | Transfers] = []
        transfers: list[Transfer] = []
        for frame in self._reader.feed(data):
            if isinstance(frame, Transfer) and self.state is State.TRANSFER:
                transfers.append(frame)
            elif isinstance(frame, MasterChallenge) and self.state is State.CHALLENGE:
                events.append(self._on_challenge(frame))
            elif isinstance(frame, MasterHandshake) and self.state is State.MASTER_HANDSHAKE:
                self.state = State.RECONCILE
                events.append(Reconcile(decide_truncation(self.log.epochs.entries(), self.log.min_offset,
                                                          self.log.max_offset, frame)))
            elif self.state is State.CHALLENGE:
                raise ProtocolError("expected the master's challenge first (is the master an older mqctl "
                                    "version?)")
            else:
                raise ProtocolError(f"unexpected {type(frame).__name__} (connection state {self.state.value})")
        if transfers:
            events.append(Transfers(tuple(transfers)))
        return events

    def _on_challenge(self, challenge: MasterChallenge) -> KeysNeeded:
        """The master must be the broker the controller named, at no older an epoch."""
        if challenge.master_id != self.master_id or challenge.master_epoch < self.master_epoch:
            raise ProtocolError(f"the peer claims to be master {challenge.master_id} at epoch "
                                f"{challenge.master_epoch}; the controller named {self.master_id} at epoch "
                                f"{self.master_epoch}")
        self._challenge, self.state = challenge, State.KEYS
        return KeysNeeded(challenge.master_id)

    def proof(self, keys: dict[int, str]) -> bytes:
        """Check the master's signature with its key from the controller; answer with this slave's own."""
        c = self._challenge
        if self.state is not State.KEYS or c is None:
            raise ProtocolError("no proof is due")
        binding = Binding(self.broker_name, c.master_id, self.self_id, c.master_epoch, c.nonce, self._nonce)
        if not master_proof_ok(keys.get(c.master_id, ""), binding, c.signature):
            raise ProtocolError(f"the peer failed to prove it is broker {c.master_id} (bad signature, or no key "
                                "registered for it)")
        self.state = State.MASTER_HANDSHAKE
        return SlaveProof(self.key.sign_as_slave(binding)).encode()

    def reconcile(self, point: int) -> bytes:
        """Cut the log, durably, at the consistent point (nothing when it already ends there) and drop the
        epochs from there on; the first ack then asks the master to stream from the new end."""
        if self.state is not State.RECONCILE:
            raise ProtocolError("no reconciliation was due")
        if point < self.log.max_offset:
            self.log.truncate(point)
        self.log.epochs.truncate_suffix_by_offset(point)
        self.state = State.TRANSFER
        return self._ack(self.log.max_offset)

    def starts_over(self, frames: tuple[Transfer, ...]) -> bool:
        """Whether ``apply(frames)`` will discard this log first (its first frame lies past this log's end)."""
        return bool(self._first_frame and frames and frames[0].offset > self.log.max_offset > self.log.min_offset)

    def apply(self, frames: tuple[Transfer, ...]) -> int:
        """Check each frame and every record in it, record new epochs, append the bytes; returns the
        confirmOffset to set once the frames are acknowledged (min of the master's and this log's end).
        A record that fails the store's checks (InvalidRecord, raised as ProtocolError) is refused before
        its frame's epoch is recorded or any byte written."""
        confirm = -1
        for frame in frames:
            if self.plain:
                frame = self._whole_records(frame)
            if self.starts_over((frame,)):
                # The master's oldest data is past this log's end (protocol.transfer_start): start over there.
                self.log.start_over(frame.offset)
            self._first_frame = False
            step: SlaveStep = slave_step(frame, self.log.min_offset, self.log.max_offset,
                                         self.log.epochs.last_epoch())
            checked = self._checked(frame.offset, step.append) if step.append else None
            if step.new_epoch is not None and not self.log.epochs.append(*step.new_epoch):
                raise ProtocolError(f"cannot record epoch {step.new_epoch} after {self.log.epochs.entries()[-1:]}")
            if step.append:
                self.log.append_checked(frame.offset, step.append, checked)
            confirm = max(confirm, step.confirm_offset)
        return confirm

    def _whole_records(self, frame: Transfer) -> Transfer:
        """RocketMQ's master cuts its batches at a byte count, through records (ours never does): the
        incomplete last record of a frame is kept until the rest of it comes, so that only whole records are
        checked, written and acknowledged. A frame must continue where the kept bytes end."""
        if not self._pending or (frame.offset == -1 and not frame.body):
            data, start = frame.body, frame.offset
        elif frame.offset != self.log.max_offset + len(self._pending):
            raise ProtocolError(f"offset discontinuity: frame at {frame.offset}, the log and the part of a record "
                                f"received end at {self.log.max_offset + len(self._pending)}")
        else:
            data, start = self._pending + frame.body, self.log.max_offset
        whole = whole_records_length(data)
        self._pending = data[whole:]
        if len(self._pending) > MAX_PENDING:
            raise ProtocolError(f"the master sent {len(self._pending)} bytes of one record")
        return Transfer(start, frame.epoch, frame.epoch_start_offset, frame.confirm_offset, data[:whole])

    def _checked(self, offset: int, data: bytes) -> Any:
        try:
            return self.log.check_raw(offset, data)
        except InvalidRecord as exc:
            raise ProtocolError(f"the master sent an invalid record: {exc}") from None

    def ack(self, ackable: int) -> bytes | None:
        """An ack for ``ackable`` if it moves this connection's ack; a frame that only moved confirmOffset
        needs no answer (the last ack still holds)."""
        return None if ackable == self.acked else self._ack(ackable)

    def heartbeat(self, ackable: int) -> bytes:
        return self._ack(ackable)

    def _ack(self, offset: int) -> bytes:
        self.acked = offset
        return SlaveAck(offset).encode()
