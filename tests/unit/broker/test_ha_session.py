"""The sessions' authentication and ordering rules (ha/session.py), driven directly: each out-of-order or
forged frame closes the connection (ProtocolError) before the master counts anything or the slave writes
anything. End-to-end streaming through the same sessions is in test_ha_inmemory.py."""

from __future__ import annotations

import itertools
import struct
from pathlib import Path

import pytest

from services.broker.ha.auth import BrokerKey
from services.broker.ha.frames import (
    MasterHandshake,
    ProtocolError,
    SlaveAck,
    SlaveHandshake,
    SlaveHello,
    SlaveProof,
    Transfer,
)
from services.broker.ha.master import transfer_from_where
from services.broker.ha.session import (
    Acked,
    Authenticated,
    KeysNeeded,
    MasterSession,
    Reconcile,
    SlaveSession,
)
from services.broker.store import Message, MessageStore

MASTER_KEY, SLAVE_KEY = BrokerKey.generate(), BrokerKey.generate()
KEYS = {1: MASTER_KEY.public_hex, 2: SLAVE_KEY.public_hex}


@pytest.fixture
def store(tmp_path: Path) -> MessageStore:
    s = MessageStore(tmp_path / "m", "127.0.0.1:10911", segment_size=1 << 16)
    s.open()
    s.epochs.append(3, 0)
    s.append(Message("T", b"x"), 1)
    return s


def master(store: MessageStore) -> MasterSession:
    return MasterSession(store, "broker-a", 1, 3, MASTER_KEY, now_ms=0)


def slave(store: MessageStore, master_id: int = 1, epoch: int = 3) -> SlaveSession:
    return SlaveSession(store, "broker-a", 2, master_id, epoch, SLAVE_KEY)


def authenticate(m: MasterSession, s: SlaveSession) -> None:
    assert m.receive(s.opening(), 1) == [KeysNeeded(2)]
    assert s.receive(m.challenge(KEYS)) == [KeysNeeded(1)]
    assert m.receive(s.proof(KEYS), 2) == [Authenticated(2, False)]


def test_both_sides_authenticate_and_acks_count_only_after(store: MessageStore, tmp_path: Path) -> None:
    m = master(store)
    other = MessageStore(tmp_path / "s", "127.0.0.1:10921")
    other.open()
    s = slave(other)
    authenticate(m, s)
    assert m.receive(SlaveAck(0).encode(), 3) == [Acked(0, True)]
    assert m.receive(SlaveAck(store.max_offset).encode(), 4) == [Acked(store.max_offset, False)]


@pytest.mark.parametrize("frames", [
    [SlaveAck(0)],                                                  # an ack from a stranger
    [SlaveHello(b"n" * 32)],                                        # hello before handshake
    [SlaveHandshake(2), SlaveProof(b"p" * 64)],                     # proof before hello
    [SlaveHandshake(2), SlaveHello(b"n" * 32), SlaveAck(0)],        # ack while the keys are fetched
    [SlaveHandshake(2), SlaveHandshake(2)],                         # second handshake
    [SlaveHandshake(1)],                                            # the master's own id
])
def test_frames_out_of_order_close_the_connection(store: MessageStore, frames: list[object]) -> None:
    m = master(store)
    with pytest.raises(ProtocolError):
        for frame in frames:
            m.receive(frame.encode(), 1)  # type: ignore[attr-defined]
    assert m.ack_offset == -1


@pytest.mark.parametrize("keys,match", [
    ({1: MASTER_KEY.public_hex}, "not registered"),
    ({1: MASTER_KEY.public_hex, 2: ""}, "has no key"),
])
def test_a_slave_without_a_registered_key_gets_no_challenge(store: MessageStore, keys: dict[int, str],
                                                            match: str) -> None:
    m = master(store)
    assert m.receive(SlaveHandshake(2).encode() + SlaveHello(b"n" * 32).encode(), 1) == [KeysNeeded(2)]
    with pytest.raises(ProtocolError, match=match):
        m.challenge(keys)


def test_a_forged_proof_is_refused(store: MessageStore, tmp_path: Path) -> None:
    m = master(store)
    m.receive(SlaveHandshake(2).encode() + SlaveHello(b"n" * 32).encode(), 1)
    m.challenge(KEYS)
    with pytest.raises(ProtocolError, match="failed to prove it is broker 2"):
        m.receive(SlaveProof(b"\0" * 64).encode(), 2)
    # A real slave key signing for another slave id proves nothing either.
    m2 = master(store)
    impostor = SlaveSession(store, "broker-a", 3, 1, 3, SLAVE_KEY)
    m2.receive(impostor.opening(), 1)
    impostor.receive(m2.challenge({**KEYS, 3: BrokerKey.generate().public_hex}))
    with pytest.raises(ProtocolError, match="failed to prove it is broker 3"):
        m2.receive(impostor.proof(KEYS), 2)


@pytest.mark.parametrize("master_id,epoch", [(9, 3), (1, 4)])
def test_the_slave_refuses_another_master_or_an_older_epoch(store: MessageStore, master_id: int, epoch: int) -> None:
    m = master(store)  # broker 1 at epoch 3
    s = slave(store, master_id=master_id, epoch=epoch)
    m.receive(s.opening(), 1)
    with pytest.raises(ProtocolError, match="the controller named"):
        s.receive(m.challenge(KEYS))


def test_the_slave_refuses_a_master_signing_with_another_key(store: MessageStore) -> None:
    m = MasterSession(store, "broker-a", 1, 3, BrokerKey.generate(), now_ms=0)
    s = slave(store)
    m.receive(s.opening(), 1)
    assert s.receive(m.challenge(KEYS)) == [KeysNeeded(1)]
    with pytest.raises(ProtocolError, match="failed to prove it is broker 1"):
        s.proof(KEYS)


def test_close_reasons(store: MessageStore) -> None:
    m = master(store)
    assert m.close_reason(4_000, idle_limit_ms=20_000, auth_limit_ms=5_000) is None
    assert "did not prove its identity" in str(m.close_reason(5_001, 20_000, 5_000))
    m.receive(b"\0", 5_000)  # a dripping peer is not idle, but still unauthenticated
    assert "did not prove its identity" in str(m.close_reason(5_001, 20_000, 5_000))


def test_a_record_the_store_refuses_closes_the_connection_before_its_epoch_is_recorded(tmp_path: Path) -> None:
    """A CRC-valid record with a traversal topic, in the frame that opens a new epoch: the slave refuses the
    frame as a protocol error, writes nothing, records no epoch, and creates no file outside its store."""
    from services.broker.ha.frames import Transfer
    from services.broker.record import encode

    slave_store = MessageStore(tmp_path / "s", "127.0.0.1:10921", segment_size=1 << 16)
    slave_store.open()
    s = slave(slave_store)
    s.state = s.state.TRANSFER
    record = encode(b"../../../outside", b"", 0, 0, 0, 1, b"payload")
    with pytest.raises(ProtocolError, match="invalid record"):
        s.apply((Transfer(0, 3, 0, len(record), record),))
    assert slave_store.max_offset == 0 and slave_store.epochs.entries() == []
    assert not (tmp_path / "outside").exists()


def test_transfer_from_where_is_minus_one_until_the_master_has_data() -> None:
    """As RocketMQ's master shows a slave's TransferFromWhere: -1 while its commitlog is empty (no file to
    start from), else the next offset to send."""
    assert transfer_from_where(0, 0) == -1
    assert transfer_from_where(504, 0) == 0
    assert transfer_from_where(504, 504) == 504


# --------------------------------------------------------------- RocketMQ's own brokers (rocketmqHaPeers)
ADDRESSES = {1: "127.0.0.1:10911", 2: "127.0.0.1:10921", 3: "10.0.0.9:10931"}
JAVA_KEYS = {1: MASTER_KEY.public_hex, 2: "", 3: ""}  # a RocketMQ broker registers no key


def handshake_only(m: MasterSession, slave_id: int) -> None:
    assert m.receive(SlaveHandshake(slave_id).encode(), 1) == []


def test_a_member_without_a_key_from_its_registered_address_is_served_without_proof(store: MessageStore) -> None:
    m = master(store)
    handshake_only(m, 2)
    assert m.plain(JAVA_KEYS, ADDRESSES, "127.0.0.1") == Authenticated(2, False)
    assert m.receive(SlaveAck(0).encode(), 3) == [Acked(0, True)]


@pytest.mark.parametrize("slave_id, keys, peer, reason", [
    (2, KEYS, "127.0.0.1", "has a key registered"),        # an mqctl broker's id: it must prove itself
    (3, JAVA_KEYS, "127.0.0.1", "registered at 10.0.0.9"),  # another host than the controllers have
    (4, JAVA_KEYS, "127.0.0.1", "not registered"),          # an id the group does not have
])
def test_no_proof_is_refused_for_a_keyed_id_another_address_or_a_stranger(store: MessageStore, slave_id: int,
                                                                           keys: dict[int, str], peer: str,
                                                                           reason: str) -> None:
    m = master(store)
    handshake_only(m, slave_id)
    with pytest.raises(ProtocolError, match=reason):
        m.plain(keys, ADDRESSES, peer)
    with pytest.raises(ProtocolError, match="before the slave proved"):
        m.receive(SlaveAck(0).encode(), 3)


def test_no_proof_is_due_once_the_hello_came(store: MessageStore) -> None:
    m = master(store)
    assert m.receive(SlaveHandshake(2).encode() + SlaveHello(b"n" * 32).encode(), 1) == [KeysNeeded(2)]
    with pytest.raises(ProtocolError, match="no handshake without proof"):
        m.plain(JAVA_KEYS, ADDRESSES, "127.0.0.1")


def test_a_slave_of_rocketmqs_master_sends_its_handshake_alone_and_takes_the_epochs_next(store: MessageStore,
                                                                                      tmp_path: Path) -> None:
    other = MessageStore(tmp_path / "s", "127.0.0.1:10921")
    other.open()
    s = SlaveSession(other, "broker-a", 2, 1, 3, SLAVE_KEY, plain=True)
    assert s.opening() == SlaveHandshake(2).encode()
    m = master(store)
    handshake_only(m, 2)
    m.plain(JAVA_KEYS, ADDRESSES, "127.0.0.1")
    assert s.receive(m.handshake()) == [Reconcile(0)]


def test_a_slave_that_expects_proof_refuses_a_master_that_skips_it(store: MessageStore, tmp_path: Path) -> None:
    other = MessageStore(tmp_path / "s", "127.0.0.1:10921")
    other.open()
    s = slave(other)
    s.opening()
    m = master(store)
    handshake_only(m, 2)
    m.plain(JAVA_KEYS, ADDRESSES, "127.0.0.1")
    with pytest.raises(ProtocolError, match="challenge first"):
        s.receive(m.handshake())


def test_a_slave_of_rocketmqs_master_keeps_a_record_cut_by_a_batch_until_its_rest_comes(tmp_path: Path) -> None:
    """RocketMQ's master cuts its transfer batches at a byte count, through records."""
    src = MessageStore(tmp_path / "m", "127.0.0.1:10911", segment_size=1 << 16, rocketmq_format=True)
    src.open()
    src.epochs.append(1, 0)
    for i in range(5):
        src.append(Message("T", b"x" * 50 + bytes([i])), 1)
    data = src.commitlog.read(0, src.max_offset)
    dst = MessageStore(tmp_path / "s", "127.0.0.1:10921", segment_size=1 << 16, rocketmq_format=True)
    dst.open()
    s = SlaveSession(dst, "broker-a", 2, 1, 1, SLAVE_KEY, plain=True)
    s.opening()
    assert s.receive(MasterHandshake(0, 1, ((1, 0),)).encode()) == [Reconcile(0)]
    s.reconcile(0)
    size = len(data) // 5
    cuts = [0, 37, size + 3, size + 4, 3 * size - 1, len(data)]
    ends = []
    for start, end in itertools.pairwise(cuts):
        s.apply((Transfer(start, 1, 0, 0, data[start:end]),))
        ends.append(dst.max_offset)
        s.apply((Transfer(end, 1, 0, 0),))  # a heartbeat where the bytes received end
    assert ends == [0, size, size, 2 * size, len(data)]
    assert dst.commitlog.read(0, dst.max_offset) == data
    with pytest.raises(ProtocolError, match="discontinuity"):
        s.apply((Transfer(len(data) + 1, 1, 0, 0, b"x"),))


@pytest.mark.parametrize("forged", [
    struct.pack(">iI", 2**31 - 1, 0xDAA320A7) + bytes(64),  # a totalSize far past anything that can be kept
    struct.pack(">iI", 4, 0xDAA320A7) + bytes(64),          # smaller than its own header
    b"\xff" * 80,                                           # garbage
])
def test_a_rocketmq_masters_forged_sizes_and_garbage_close_the_connection(tmp_path: Path, forged: bytes) -> None:
    dst = MessageStore(tmp_path / "s", "127.0.0.1:10921", segment_size=1 << 16, rocketmq_format=True)
    dst.open()
    s = SlaveSession(dst, "broker-a", 2, 1, 1, SLAVE_KEY, plain=True)
    s.opening()
    s.receive(MasterHandshake(0, 1, ((1, 0),)).encode())
    s.reconcile(0)
    with pytest.raises(ProtocolError, match="invalid record"):
        s.apply((Transfer(0, 1, 0, 0, forged),))
    assert dst.max_offset == 0
