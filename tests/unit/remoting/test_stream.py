"""The incremental FrameDecoder (services/remoting/codec.py) on streams: every split point, the frame-size
limit (RocketMQ's NettyDecoder: 16 MiB for a whole frame, length field included), round trips of any
command, and hostile bytes in any pieces: frames, a RemotingProtocolError or a wait for more, never
another exception, and never more held than one frame."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.remoting.codec import MAX_FRAME_SIZE, FrameDecoder, decode_frame, encode
from services.remoting.command import (
    INT32_MAX,
    INT32_MIN,
    LanguageCode,
    RemotingCommand,
    SerializeType,
    make_request,
)
from services.remoting.errors import RemotingProtocolError
from tests.support.examples import examples

COMMANDS = [
    make_request(105, opaque=1, ext_fields={"topic": "TopicTest"}),
    make_request(1004, opaque=2, ext_fields={"brokerName": "broker-a"}, serialize_type=SerializeType.ROCKETMQ),
    RemotingCommand(code=0, opaque=2, flag=1, remark="ok", body=b'{"syncStateSet":[1],"syncStateSetEpoch":3}'),
    make_request(904, opaque=3, oneway=True, serialize_type=SerializeType.ROCKETMQ, body=b"\x00" * 40),
]
STREAM = b"".join(encode(c) for c in COMMANDS)


def feed_in_pieces(decoder: FrameDecoder, data: bytes, cuts: list[int]) -> list[RemotingCommand]:
    out: list[RemotingCommand] = []
    start = 0
    for cut in [*sorted(cuts), len(data)]:
        out += decoder.feed(data[start:cut])
        assert decoder.buffered <= decoder.max_frame_size
        start = cut
    return out


def test_one_feed_of_many_frames() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(STREAM) == COMMANDS
    assert decoder.idle and decoder.buffered == 0


@pytest.mark.parametrize("cut", range(1, len(STREAM)))
def test_every_split_point(cut: int) -> None:
    decoder = FrameDecoder()
    assert decoder.feed(STREAM[:cut]) + decoder.feed(STREAM[cut:]) == COMMANDS
    assert decoder.idle


def test_one_byte_at_a_time() -> None:
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    for index in range(len(STREAM)):
        out += decoder.feed(STREAM[index:index + 1])
    assert out == COMMANDS


def test_feed_accepts_bytearray_and_memoryview() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(bytearray(STREAM[:10])) + decoder.feed(memoryview(STREAM)[10:]) == COMMANDS


def test_empty_feed_is_nothing() -> None:
    assert FrameDecoder().feed(b"") == []


# --------------------------------------------------------------------------------- frame-size limit


def test_default_limit_is_rocketmqs() -> None:
    assert MAX_FRAME_SIZE == 16 * 1024 * 1024 == FrameDecoder().max_frame_size


def test_a_frame_of_exactly_the_limit_is_accepted() -> None:
    command = RemotingCommand(code=1, body=b"")
    header_size = len(encode(command)) - 8
    big = RemotingCommand(code=1, body=b"b" * (1000 - 8 - header_size))
    raw = encode(big, max_frame_size=1000)
    assert len(raw) == 1000
    assert FrameDecoder(max_frame_size=1000).feed(raw) == [big]


def test_the_limit_is_checked_from_the_length_prefix_alone() -> None:
    decoder = FrameDecoder(max_frame_size=1000)
    with pytest.raises(RemotingProtocolError, match="frame of 1001 bytes is more than the limit of 1000"):
        decoder.feed(struct.pack(">i", 997))  # no body sent at all: refused before any is buffered
    assert decoder.buffered == 0


def test_sixteen_mib_frame_refused_before_its_body() -> None:
    decoder = FrameDecoder()
    with pytest.raises(RemotingProtocolError, match="more than the limit of 16777216"):
        decoder.feed(struct.pack(">ii", MAX_FRAME_SIZE - 3, 0x7B))


def test_a_partial_frame_is_the_only_thing_held() -> None:
    decoder = FrameDecoder(max_frame_size=1000)
    raw = encode(RemotingCommand(code=1, body=b"x" * 500))
    assert decoder.feed(raw[:300]) == []
    assert decoder.buffered == 300 - 4 and not decoder.idle


def test_limit_must_be_sane() -> None:
    with pytest.raises(ValueError):
        FrameDecoder(max_frame_size=4)


# ------------------------------------------------------------------------------------- properties


texts = st.text(st.characters(codec="utf-8"), max_size=40)


@st.composite
def commands(draw: st.DrawFn) -> RemotingCommand:
    kind = draw(st.sampled_from(SerializeType))
    int16 = st.integers(-(2**15), 2**15 - 1)
    int32 = st.integers(INT32_MIN, INT32_MAX)
    small = int16 if kind is SerializeType.ROCKETMQ else int32
    # what a ROCKETMQ header reads back as null (see codec.py) is left out of the generated commands
    key = st.text(st.characters(codec="utf-8"), min_size=1, max_size=20)
    value = st.text(st.characters(codec="utf-8"), min_size=1 if kind else 0, max_size=40)
    remark = st.none() | (texts.filter(bool) if kind else texts)
    return RemotingCommand(code=draw(small), opaque=draw(int32), flag=draw(int32),
                           language=draw(st.sampled_from(LanguageCode)), version=draw(small),
                           remark=draw(remark), ext_fields=draw(st.dictionaries(key, value, max_size=6)),
                           body=draw(st.binary(max_size=64)), serialize_type=kind)


@given(commands())
@settings(deadline=None)
def test_round_trip(command: RemotingCommand) -> None:
    assert decode_frame(encode(command)) == command


@given(st.lists(commands(), min_size=1, max_size=5), st.data())
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_streams_of_commands_in_any_pieces(sent: list[RemotingCommand], data: st.DataObject) -> None:
    stream = b"".join(encode(c) for c in sent)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=12))
    decoder = FrameDecoder()
    assert feed_in_pieces(decoder, stream, cuts) == sent
    assert decoder.idle


def outcome_of(decoder: FrameDecoder, pieces: list[bytes]) -> None:
    """Feed ``pieces``: every result is frames, a RemotingProtocolError or a wait; nothing else escapes."""
    for piece in pieces:
        try:
            for command in decoder.feed(piece):
                assert isinstance(command, RemotingCommand)
        except RemotingProtocolError:
            assert decoder.buffered == 0
            return
        assert decoder.buffered <= decoder.max_frame_size - 4


@given(st.lists(st.binary(max_size=200), max_size=8), st.integers(8, 4096))
@settings(deadline=None)
def test_any_bytes_in_any_pieces(pieces: list[bytes], limit: int) -> None:
    outcome_of(FrameDecoder(max_frame_size=limit), pieces)


@st.composite
def framed_noise(draw: st.DrawFn) -> bytes:
    """Well-framed garbage, so the fuzzing reaches the header decoders and not only the length check."""
    kind = draw(st.sampled_from([0, 1, 2]))
    header = draw(st.binary(max_size=120) | st.sampled_from([
        b'{"code":1,"opaque":2}', b'{"code":1,"opaque":2,"extFields":{"a":"b"}}', b"{}", b"[]"]))
    body = draw(st.binary(max_size=20))
    header_length = draw(st.sampled_from([len(header), len(header) + 1, max(0, len(header) - 1), 0xFFFFFF]))
    return struct.pack(">ii", 4 + len(header) + len(body), kind << 24 | header_length) + header + body


@given(st.lists(framed_noise(), min_size=1, max_size=4), st.data())
@settings(deadline=None)
def test_framed_noise_in_any_pieces(frames: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    outcome_of(FrameDecoder(), pieces)


@given(commands(), st.data())
@settings(deadline=None)
def test_one_flipped_byte_never_escapes(command: RemotingCommand, data: st.DataObject) -> None:
    raw = bytearray(encode(command))
    index = data.draw(st.integers(0, len(raw) - 1))
    raw[index] ^= data.draw(st.integers(1, 255))
    outcome_of(FrameDecoder(), [bytes(raw)])


@given(st.binary(max_size=64))
@settings(deadline=None, max_examples=examples(300))
def test_rocketmq_header_noise(noise: bytes) -> None:
    header = struct.pack(">hBhiii", 1, 0, 0, 1, 0, 0) + noise
    raw = struct.pack(">ii", 4 + len(header), 1 << 24 | len(header)) + header
    outcome_of(FrameDecoder(), [raw])
