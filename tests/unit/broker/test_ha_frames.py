"""HA wire frames (ha/frames.py): exact sizes, big-endian layout, round trips, incremental readers.

Reference: rocketmq-controller.md §6.2 (slave handshake 16 bytes, slave ack 12 bytes, master handshake
20 + 12 per epoch entry, master transfer 36 + body, all big-endian; a heartbeat is a transfer with no body).
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.broker.ha.frames import (
    AUTH_HELLO,
    AUTH_PROOF,
    CHALLENGE,
    HANDSHAKE,
    MAX_BODY,
    MAX_EPOCH_ENTRIES,
    READY,
    SHUTDOWN,
    SUSPEND,
    TRANSFER,
    MasterChallenge,
    MasterFrameReader,
    MasterHandshake,
    ProtocolError,
    SlaveAck,
    SlaveFrameReader,
    SlaveHandshake,
    SlaveHello,
    SlaveProof,
    Transfer,
)
from tests.support.examples import examples

HX = bytes.fromhex


# ------------------------------------------------------------------------------------ constants


def test_connection_state_ordinals() -> None:
    assert (READY, HANDSHAKE, TRANSFER, SUSPEND, SHUTDOWN) == (0, 1, 2, 3, 4)


# ------------------------------------------------------------------------------------ sizes and layout


class TestSlaveHandshake:
    def test_size_is_16(self) -> None:
        assert len(SlaveHandshake(1).encode()) == 16
        assert len(SlaveHandshake(2**62, True, True).encode()) == 16

    def test_big_endian_layout(self) -> None:
        raw = SlaveHandshake(slave_broker_id=2, sync_from_last_file=True, async_learner=False).encode()
        #          state=1   lastFile learner  slaveBrokerId
        assert raw == HX("00000001" "0001" "0000" "0000000000000002")

    def test_learner_flag_position(self) -> None:
        raw = SlaveHandshake(slave_broker_id=0x0102030405060708, async_learner=True).encode()
        assert raw == HX("00000001" "0000" "0001" "0102030405060708")

    def test_defaults(self) -> None:
        hs = SlaveHandshake(5)
        assert hs.sync_from_last_file is False and hs.async_learner is False

    @pytest.mark.parametrize("hs", [SlaveHandshake(1), SlaveHandshake(3, True, False),
                                    SlaveHandshake(7, False, True), SlaveHandshake(2**63 - 1, True, True)])
    def test_round_trip(self, hs: SlaveHandshake) -> None:
        assert SlaveFrameReader().feed(hs.encode()) == [hs]


class TestSlaveAck:
    def test_size_is_12(self) -> None:
        assert len(SlaveAck(0).encode()) == 12

    def test_big_endian_layout(self) -> None:
        assert SlaveAck(0x0102030405060708).encode() == HX("00000002" "0102030405060708")
        assert SlaveAck(1000).encode() == HX("00000002" "00000000000003e8")

    @pytest.mark.parametrize("offset", [0, 1, 4096, 2**40 + 7, 2**63 - 1])
    def test_round_trip(self, offset: int) -> None:
        assert SlaveFrameReader().feed(SlaveAck(offset).encode()) == [SlaveAck(offset)]


class TestMasterHandshake:
    @pytest.mark.parametrize("n", [0, 1, 2, 5, MAX_EPOCH_ENTRIES])
    def test_size_is_20_plus_12_per_entry(self, n: int) -> None:
        hs = MasterHandshake(10_000, n, tuple((i + 1, i * 100) for i in range(n)))
        raw = hs.encode()
        assert len(raw) == 20 + 12 * n
        assert struct.unpack(">i", raw[4:8])[0] == 12 * n  # bodySize

    def test_big_endian_layout(self) -> None:
        raw = MasterHandshake(max_offset=1000, last_epoch=3, entries=((1, 0), (3, 500))).encode()
        assert raw == HX(
            "00000001"            # state HANDSHAKE
            "00000018"            # bodySize 24 = 2 entries
            "00000000000003e8"    # masterMaxPhyOffset 1000
            "00000003"            # lastEpoch 3
            "00000001" "0000000000000000"   # epoch 1 @ 0
            "00000003" "00000000000001f4")  # epoch 3 @ 500

    @pytest.mark.parametrize("hs", [
        MasterHandshake(0, -1, ()),
        MasterHandshake(1000, 3, ((1, 0), (3, 500))),
        MasterHandshake(2**50, 9, tuple((e, e * 1000) for e in range(1, 10))),
        MasterHandshake(5000, 2, ((1, 100), (2, 100))),  # re-elected master: same start offset
        MasterHandshake(1, MAX_EPOCH_ENTRIES, tuple((e, e) for e in range(1, MAX_EPOCH_ENTRIES + 1))),
    ])
    def test_round_trip(self, hs: MasterHandshake) -> None:
        assert MasterFrameReader().feed(hs.encode()) == [hs]


class TestTransfer:
    @pytest.mark.parametrize("body", [b"", b"x", bytes(range(256)) * 3])
    def test_size_is_36_plus_body(self, body: bytes) -> None:
        raw = Transfer(4096, 2, 1024, 4000, body).encode()
        assert len(raw) == 36 + len(body)
        assert struct.unpack(">i", raw[4:8])[0] == len(body)
        assert raw[36:] == body

    def test_big_endian_layout(self) -> None:
        raw = Transfer(offset=4096, epoch=2, epoch_start_offset=1024, confirm_offset=4000, body=b"abc").encode()
        assert raw == HX(
            "00000002"            # state TRANSFER
            "00000003"            # bodySize
            "0000000000001000"    # offset 4096
            "00000002"            # epoch 2
            "0000000000000400"    # epochStartOffset 1024
            "0000000000000fa0"    # confirmOffset 4000
            "616263")

    def test_heartbeat_is_an_empty_transfer(self) -> None:
        hb = Transfer(100, 1, 0, 50)
        assert hb.is_heartbeat
        assert hb.body == b""
        assert len(hb.encode()) == 36
        assert not Transfer(100, 1, 0, 50, b"\x00").is_heartbeat

    @pytest.mark.parametrize("frame", [
        Transfer(0, 1, 0, 0),
        Transfer(4096, 2, 1024, 4000, b"abc"),
        Transfer(2**40, 7, 2**39, 2**40 - 1, bytes(1000)),
    ])
    def test_round_trip(self, frame: Transfer) -> None:
        assert MasterFrameReader().feed(frame.encode()) == [frame]


class TestAuthFrames:
    def test_hello_layout(self) -> None:
        assert SlaveHello(b"\x01" * 32).encode() == HX("00000005") + b"\x01" * 32
        assert AUTH_HELLO == CHALLENGE == 5 and AUTH_PROOF == 6

    def test_proof_layout(self) -> None:
        assert SlaveProof(b"\x02" * 64).encode() == HX("00000006") + b"\x02" * 64

    def test_challenge_layout(self) -> None:
        raw = MasterChallenge(0x0102030405060708, 9, b"\x03" * 32, b"\x04" * 64).encode()
        #                   state=5   bodySize=108  masterBrokerId      masterEpoch
        assert raw == HX("00000005" "0000006c" "0102030405060708" "00000009") + b"\x03" * 32 + b"\x04" * 64

    def test_challenge_body_size_must_be_exact(self) -> None:
        for size in (0, 107, 109, 12):
            with pytest.raises(ProtocolError):
                MasterFrameReader().feed(struct.pack(">ii", CHALLENGE, size) + bytes(size))


# ------------------------------------------------------------------------------------ incremental reading

SLAVE_FRAMES: list[object] = [
    SlaveHandshake(2, True, False), SlaveHello(bytes(range(32))), SlaveProof(bytes(range(64))), SlaveAck(0),
    SlaveAck(1234), SlaveAck(2**40 + 3), SlaveAck(5000),
]
MASTER_FRAMES: list[object] = [
    MasterChallenge(1, 3, b"n" * 32, b"s" * 64),
    MasterHandshake(3000, 3, ((1, 0), (2, 1000), (3, 1000))),
    Transfer(1000, 2, 1000, 900, b""),
    Transfer(1000, 3, 1000, 900, b""),
    Transfer(1000, 3, 1000, 1000, b"0123456789" * 7),
    Transfer(1070, 3, 1000, 1070, b""),
    Transfer(1070, 3, 1000, 1070, b"q"),
]


def stream_of(frames: list) -> bytes:  # type: ignore[type-arg]
    return b"".join(f.encode() for f in frames)


class TestSlaveFrameReaderSplitting:
    def test_several_frames_in_one_feed(self) -> None:
        assert SlaveFrameReader().feed(stream_of(SLAVE_FRAMES)) == SLAVE_FRAMES

    def test_byte_by_byte(self) -> None:
        reader = SlaveFrameReader()
        got = []
        for b in stream_of(SLAVE_FRAMES):
            got += reader.feed(bytes([b]))
        assert got == SLAVE_FRAMES

    def test_every_single_split_point(self) -> None:
        data = stream_of(SLAVE_FRAMES)
        for i in range(len(data) + 1):
            reader = SlaveFrameReader()
            assert reader.feed(data[:i]) + reader.feed(data[i:]) == SLAVE_FRAMES, i

    def test_every_pair_of_split_points(self) -> None:
        data = stream_of(SLAVE_FRAMES)
        for i in range(len(data) + 1):
            for j in range(i, len(data) + 1):
                reader = SlaveFrameReader()
                got = reader.feed(data[:i]) + reader.feed(data[i:j]) + reader.feed(data[j:])
                assert got == SLAVE_FRAMES, (i, j)

    def test_partial_frame_yields_nothing_until_complete(self) -> None:
        reader = SlaveFrameReader()
        raw = SlaveHandshake(9).encode()
        assert reader.feed(raw[:3]) == []   # not even the state yet
        assert reader.feed(raw[3:15]) == []
        assert reader.feed(raw[15:]) == [SlaveHandshake(9)]
        assert reader.feed(b"") == []

    def test_remainder_is_kept(self) -> None:
        reader = SlaveFrameReader()
        ack1, ack2 = SlaveAck(10).encode(), SlaveAck(20).encode()
        assert reader.feed(ack1 + ack2[:5]) == [SlaveAck(10)]
        assert reader.feed(ack2[5:]) == [SlaveAck(20)]


class TestMasterFrameReaderSplitting:
    def test_several_frames_in_one_feed(self) -> None:
        assert MasterFrameReader().feed(stream_of(MASTER_FRAMES)) == MASTER_FRAMES

    def test_byte_by_byte(self) -> None:
        reader = MasterFrameReader()
        got = []
        for b in stream_of(MASTER_FRAMES):
            got += reader.feed(bytes([b]))
        assert got == MASTER_FRAMES

    def test_every_single_split_point(self) -> None:
        data = stream_of(MASTER_FRAMES)
        for i in range(len(data) + 1):
            reader = MasterFrameReader()
            assert reader.feed(data[:i]) + reader.feed(data[i:]) == MASTER_FRAMES, i

    def test_many_pairs_of_split_points(self) -> None:
        data = stream_of(MASTER_FRAMES)
        for i in range(0, len(data) + 1, 3):
            for j in range(i, len(data) + 1, 5):
                reader = MasterFrameReader()
                got = reader.feed(data[:i]) + reader.feed(data[i:j]) + reader.feed(data[j:])
                assert got == MASTER_FRAMES, (i, j)

    @pytest.mark.parametrize("piece", [1, 2, 7, 13, 35, 36, 37, 100])
    def test_fixed_size_pieces(self, piece: int) -> None:
        data = stream_of(MASTER_FRAMES)
        reader = MasterFrameReader()
        got = []
        for k in range(0, len(data), piece):
            got += reader.feed(data[k:k + piece])
        assert got == MASTER_FRAMES

    def test_header_complete_but_body_missing(self) -> None:
        reader = MasterFrameReader()
        raw = Transfer(0, 1, 0, 0, b"hello").encode()
        assert reader.feed(raw[:36]) == []
        assert reader.feed(raw[36:40]) == []
        assert reader.feed(raw[40:]) == [Transfer(0, 1, 0, 0, b"hello")]

    def test_handshake_body_missing(self) -> None:
        hs = MasterHandshake(100, 2, ((1, 0), (2, 50)))
        raw = hs.encode()
        reader = MasterFrameReader()
        assert reader.feed(raw[:20]) == []
        assert reader.feed(raw[20:31]) == []
        assert reader.feed(raw[31:]) == [hs]

    def test_body_bytes_are_not_shared_with_the_buffer(self) -> None:
        reader = MasterFrameReader()
        [frame] = reader.feed(Transfer(0, 1, 0, 0, b"abc").encode())
        assert isinstance(frame, Transfer)
        reader.feed(Transfer(3, 1, 0, 0, b"zzz").encode()[:10])
        assert frame.body == b"abc" and isinstance(frame.body, bytes)


# ------------------------------------------------------------------------------------ malformed input


def slave_hs_raw(last_file: int = 0, learner: int = 0, slave_id: int = 2) -> bytes:
    return struct.pack(">ihhq", HANDSHAKE, last_file, learner, slave_id)


class TestSlaveFrameReaderMalformed:
    @pytest.mark.parametrize("state", [READY, SUSPEND, SHUTDOWN, -1, 7, 0x7FFFFFFF])
    def test_unknown_state(self, state: int) -> None:
        with pytest.raises(ProtocolError):
            SlaveFrameReader().feed(struct.pack(">i", state))

    def test_unknown_state_after_valid_frames(self) -> None:
        reader = SlaveFrameReader()
        assert reader.feed(SlaveAck(5).encode()) == [SlaveAck(5)]
        with pytest.raises(ProtocolError):
            reader.feed(struct.pack(">iq", SUSPEND, 5))

    @pytest.mark.parametrize("last_file,learner", [(2, 0), (0, 2), (-1, 0), (0, -1), (256, 0)])
    def test_flags_must_be_0_or_1(self, last_file: int, learner: int) -> None:
        with pytest.raises(ProtocolError):
            SlaveFrameReader().feed(slave_hs_raw(last_file, learner))

    @pytest.mark.parametrize("slave_id", [0, -1, -(2**63)])
    def test_slave_id_must_be_positive(self, slave_id: int) -> None:
        with pytest.raises(ProtocolError):
            SlaveFrameReader().feed(slave_hs_raw(slave_id=slave_id))

    @pytest.mark.parametrize("offset", [-1, -(2**63)])
    def test_negative_ack(self, offset: int) -> None:
        with pytest.raises(ProtocolError):
            SlaveFrameReader().feed(struct.pack(">iq", TRANSFER, offset))

    def test_malformed_frame_split_across_feeds(self) -> None:
        reader = SlaveFrameReader()
        raw = slave_hs_raw(slave_id=0)
        assert reader.feed(raw[:10]) == []
        with pytest.raises(ProtocolError):
            reader.feed(raw[10:])


class TestMasterFrameReaderMalformed:
    @pytest.mark.parametrize("state", [READY, SUSPEND, SHUTDOWN, -1, 9])
    def test_unknown_state(self, state: int) -> None:
        with pytest.raises(ProtocolError):
            MasterFrameReader().feed(struct.pack(">ii", state, 0) + bytes(40))

    @pytest.mark.parametrize("state", [HANDSHAKE, TRANSFER])
    def test_negative_body_size_is_rejected_from_the_header(self, state: int) -> None:
        with pytest.raises(ProtocolError):
            MasterFrameReader().feed(struct.pack(">ii", state, -1))

    @pytest.mark.parametrize("state", [HANDSHAKE, TRANSFER])
    def test_body_size_above_limit_is_rejected_from_the_header(self, state: int) -> None:
        with pytest.raises(ProtocolError):
            MasterFrameReader().feed(struct.pack(">ii", state, MAX_BODY + 1))

    def test_body_size_at_limit_is_not_rejected(self) -> None:
        assert MasterFrameReader().feed(struct.pack(">ii", TRANSFER, MAX_BODY)) == []

    @pytest.mark.parametrize("body_size", [1, 11, 13, 23])
    def test_handshake_body_not_a_multiple_of_12(self, body_size: int) -> None:
        raw = struct.pack(">iiqi", HANDSHAKE, body_size, 100, 1) + bytes(body_size)
        with pytest.raises(ProtocolError):
            MasterFrameReader().feed(raw)

    def test_handshake_with_too_many_entries(self) -> None:
        n = MAX_EPOCH_ENTRIES + 1
        raw = struct.pack(">iiqi", HANDSHAKE, 12 * n, 100, n) + bytes(12 * n)
        with pytest.raises(ProtocolError):
            MasterFrameReader().feed(raw)

    def test_garbage_after_a_valid_frame(self) -> None:
        reader = MasterFrameReader()
        good = Transfer(0, 1, 0, 0, b"ok").encode()
        with pytest.raises(ProtocolError):
            reader.feed(good + struct.pack(">ii", 7, 0))


# ------------------------------------------------------------------------------------ any bytes


@settings(max_examples=examples(400), deadline=None)
@given(st.binary(max_size=600), st.integers(min_value=1, max_value=64))
def test_any_bytes_give_frames_a_protocol_error_or_need_more(data: bytes, step: int) -> None:
    """Whatever a peer sends, in whatever pieces, each reader yields frames, raises ProtocolError, or waits
    for more; it never raises anything else and never buffers more than one frame's worth."""
    for reader in (SlaveFrameReader(), MasterFrameReader()):
        try:
            for i in range(0, len(data), step):
                reader.feed(data[i:i + step])
        except ProtocolError:
            continue
        assert len(reader._buf) < 36 + MAX_BODY
