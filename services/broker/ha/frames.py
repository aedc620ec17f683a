"""Master/slave replication frames (RocketMQ's AutoSwitch HA protocol), big-endian.

Connection states carried in every frame: READY=0, HANDSHAKE=1, TRANSFER=2, SUSPEND=3, SHUTDOWN=4.

Slave → master, handshake (16 bytes)::

    0  4  state = 1
    4  2  isSyncFromLastFile (0/1)
    6  2  isAsyncLearner (0/1)
    8  8  slaveBrokerId (the controller id)

Slave → master, hello (36 bytes), right after the handshake::

    0  4  state = 5
    4  32 slaveNonce

Slave → master, proof (68 bytes), after the master's challenge::

    0  4  state = 6
    4  64 signature (Ed25519, by the slave's key, over the binding: see ha/auth.py)

Slave → master, transfer ack (12 bytes)::

    0  4  state = 2
    4  8  slaveMaxOffset

Master → slave, challenge (116 bytes), the answer to the slave's hello::

    0  4  state = 5
    4  4  bodySize = 108
    8  8  masterBrokerId
    16 4  masterEpoch
    20 32 masterNonce
    52 64 signature (Ed25519, by the master's key, over the binding)

Master → slave, handshake (20 bytes + 12 per epoch entry), only after the slave's proof checked out::

    0  4  state = 1
    4  4  bodySize = 12 * entries
    8  8  masterMaxPhyOffset
    16 4  lastEpoch
    20 .. entries: 4 epoch, 8 startOffset

Master → slave, transfer (36 bytes + body); a heartbeat is a transfer with bodySize 0::

    0  4  state = 2
    4  4  bodySize
    8  8  offset            commitlog offset of the first body byte
    16 4  epoch             the epoch every byte of this body belongs to
    20 8  epochStartOffset
    28 8  confirmOffset
    36 .. body: raw commitlog bytes (whole records)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

READY, HANDSHAKE, TRANSFER, SUSPEND, SHUTDOWN = range(5)
#: Authentication frames (not in RocketMQ's protocol): the slave's hello and the master's challenge share
#: a state value (they travel in opposite directions); the slave's proof has its own.
AUTH_HELLO = CHALLENGE = 5
AUTH_PROOF = 6

SLAVE_HANDSHAKE = struct.Struct(">ihhq")
SLAVE_ACK = struct.Struct(">iq")
MASTER_HANDSHAKE = struct.Struct(">iiqi")
EPOCH_ENTRY = struct.Struct(">iq")
MASTER_TRANSFER = struct.Struct(">iiqiqq")
SLAVE_HELLO = struct.Struct(">i32s")
SLAVE_PROOF = struct.Struct(">i64s")
MASTER_CHALLENGE = struct.Struct(">iiqi32s64s")
CHALLENGE_BODY = MASTER_CHALLENGE.size - 8
MAX_EPOCH_ENTRIES = 1000
MAX_BODY = 64 * 2**20


class ProtocolError(Exception):
    """The peer sent something that breaks the protocol; the connection must be dropped."""


@dataclass(frozen=True)
class SlaveHandshake:
    slave_broker_id: int
    sync_from_last_file: bool = False
    async_learner: bool = False

    def encode(self) -> bytes:
        return SLAVE_HANDSHAKE.pack(HANDSHAKE, int(self.sync_from_last_file), int(self.async_learner),
                                    self.slave_broker_id)


@dataclass(frozen=True)
class SlaveHello:
    nonce: bytes

    def encode(self) -> bytes:
        return SLAVE_HELLO.pack(AUTH_HELLO, self.nonce)


@dataclass(frozen=True)
class SlaveProof:
    signature: bytes

    def encode(self) -> bytes:
        return SLAVE_PROOF.pack(AUTH_PROOF, self.signature)


@dataclass(frozen=True)
class MasterChallenge:
    master_id: int
    master_epoch: int
    nonce: bytes
    signature: bytes

    def encode(self) -> bytes:
        return MASTER_CHALLENGE.pack(CHALLENGE, CHALLENGE_BODY, self.master_id, self.master_epoch, self.nonce,
                                     self.signature)


@dataclass(frozen=True)
class SlaveAck:
    max_offset: int

    def encode(self) -> bytes:
        return SLAVE_ACK.pack(TRANSFER, self.max_offset)


@dataclass(frozen=True)
class MasterHandshake:
    max_offset: int
    last_epoch: int
    entries: tuple[tuple[int, int], ...]  # (epoch, startOffset)

    def encode(self) -> bytes:
        body = b"".join(EPOCH_ENTRY.pack(e, s) for e, s in self.entries)
        return MASTER_HANDSHAKE.pack(HANDSHAKE, len(body), self.max_offset, self.last_epoch) + body


@dataclass(frozen=True)
class Transfer:
    offset: int
    epoch: int
    epoch_start_offset: int
    confirm_offset: int
    body: bytes = b""

    def encode(self) -> bytes:
        return MASTER_TRANSFER.pack(TRANSFER, len(self.body), self.offset, self.epoch,
                                    self.epoch_start_offset, self.confirm_offset) + self.body

    @property
    def is_heartbeat(self) -> bool:
        return not self.body


SlaveFrame = SlaveHandshake | SlaveHello | SlaveProof | SlaveAck
MasterFrame = MasterChallenge | MasterHandshake | Transfer


class SlaveFrameReader:
    """Bytes from a slave → SlaveHandshake / SlaveHello / SlaveProof / SlaveAck frames (used by the master)."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[SlaveFrame]:
        self._buf += data
        frames: list[SlaveFrame] = []
        while len(self._buf) >= 4:
            (state,) = struct.unpack_from(">i", self._buf, 0)
            if state == HANDSHAKE:
                if len(self._buf) < SLAVE_HANDSHAKE.size:
                    break
                _, last_file, learner, slave_id = SLAVE_HANDSHAKE.unpack_from(self._buf, 0)
                if last_file not in (0, 1) or learner not in (0, 1) or slave_id < 1:
                    raise ProtocolError(f"malformed slave handshake (id {slave_id})")
                frames.append(SlaveHandshake(slave_id, bool(last_file), bool(learner)))
                del self._buf[:SLAVE_HANDSHAKE.size]
            elif state == TRANSFER:
                if len(self._buf) < SLAVE_ACK.size:
                    break
                _, offset = SLAVE_ACK.unpack_from(self._buf, 0)
                if offset < 0:
                    raise ProtocolError(f"negative ack offset {offset}")
                frames.append(SlaveAck(offset))
                del self._buf[:SLAVE_ACK.size]
            elif state in (AUTH_HELLO, AUTH_PROOF):
                layout = SLAVE_HELLO if state == AUTH_HELLO else SLAVE_PROOF
                if len(self._buf) < layout.size:
                    break
                _, value = layout.unpack_from(self._buf, 0)
                frames.append(SlaveHello(value) if state == AUTH_HELLO else SlaveProof(value))
                del self._buf[:layout.size]
            else:
                raise ProtocolError(f"unexpected slave frame state {state}")
        return frames


class MasterFrameReader:
    """Bytes from a master → MasterHandshake / Transfer frames (used by the slave)."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[MasterFrame]:
        self._buf += data
        frames: list[MasterFrame] = []
        while len(self._buf) >= 8:
            state, body_size = struct.unpack_from(">ii", self._buf, 0)
            if body_size < 0 or body_size > MAX_BODY:
                raise ProtocolError(f"bad body size {body_size}")
            frame: MasterFrame | None
            if state == HANDSHAKE:
                frame = self._handshake(body_size)
            elif state == CHALLENGE:
                frame = self._challenge(body_size)
            elif state == TRANSFER:
                frame = self._transfer(body_size)
            else:
                raise ProtocolError(f"unexpected master frame state {state}")
            if frame is None:
                break
            frames.append(frame)
        return frames

    def _handshake(self, body_size: int) -> MasterHandshake | None:
        if body_size % EPOCH_ENTRY.size or body_size // EPOCH_ENTRY.size > MAX_EPOCH_ENTRIES:
            raise ProtocolError(f"bad handshake body size {body_size}")
        total = MASTER_HANDSHAKE.size + body_size
        if len(self._buf) < total:
            return None
        _, _, max_offset, last_epoch = MASTER_HANDSHAKE.unpack_from(self._buf, 0)
        entries = tuple(EPOCH_ENTRY.unpack_from(self._buf, MASTER_HANDSHAKE.size + i * EPOCH_ENTRY.size)
                        for i in range(body_size // EPOCH_ENTRY.size))
        del self._buf[:total]
        return MasterHandshake(max_offset, last_epoch, entries)

    def _challenge(self, body_size: int) -> MasterChallenge | None:
        if body_size != CHALLENGE_BODY:
            raise ProtocolError(f"bad challenge body size {body_size}")
        if len(self._buf) < MASTER_CHALLENGE.size:
            return None
        _, _, master_id, epoch, nonce, signature = MASTER_CHALLENGE.unpack_from(self._buf, 0)
        del self._buf[:MASTER_CHALLENGE.size]
        return MasterChallenge(master_id, epoch, nonce, signature)

    def _transfer(self, body_size: int) -> Transfer | None:
        total = MASTER_TRANSFER.size + body_size
        if len(self._buf) < total:
            return None
        _, _, offset, epoch, epoch_start, confirm = MASTER_TRANSFER.unpack_from(self._buf, 0)
        body = bytes(self._buf[MASTER_TRANSFER.size:total])
        del self._buf[:total]
        return Transfer(offset, epoch, epoch_start, confirm, body)
