"""Per-code bounds (services/remoting/limits.py): the request decoder reads each frame's header first, keeps a
body only when its request code admits its size, skips a larger one unread with the stream kept in step,
and refuses an oversized header before reading it; each server's table admits what RocketMQ's clients and
brokers send (a registration of 10,000 topics, a heartbeat of hundreds of groups, a send's 32 KiB of
properties) and nothing a code cannot use."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.broker.remoting import request_limits as broker_limits
from services.common.codes import ResponseCode
from services.controller.remoting import request_limits as controller_limits
from services.remoting import broker_bodies as bb
from services.remoting import broker_headers as bh
from services.remoting.codec import FrameDecoder, encode
from services.remoting.command import RemotingCommand, RequestCode, SerializeType, make_request, make_response
from services.remoting.errors import RemotingProtocolError
from services.remoting.limits import (
    BROKER_NAMES_BODY,
    HEARTBEAT_BODY,
    MAX_HEADER,
    NO_BODY,
    REGISTRATION_BODY,
    SMALL_BODY,
    BodyLimit,
    Oversized,
    RequestDecoder,
    RequestLimits,
    server_limits,
)
from services.remoting.message import encode_properties
from services.remoting.namesrv_bodies import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from tests.support.examples import examples

RC = RequestCode
LIMITS = RequestLimits({34: BodyLimit(100, 29), 310: BodyLimit(1000, 13, "maxMessageSize")}, BodyLimit(10, 3),
                       max_header=500)


def feed_bytewise(decoder: RequestDecoder, data: bytes) -> list[RemotingCommand | Oversized]:
    return [item for i in range(len(data)) for item in decoder.feed(data[i:i + 1])]


def request(code: int, body: bytes, opaque: int = 1, **kwargs: object) -> bytes:
    return encode(make_request(code, opaque, {"k": "v"}, body, **kwargs))  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------ the decoder


def test_a_body_within_its_codes_bound_is_kept() -> None:
    got = RequestDecoder(LIMITS).feed(request(34, b"x" * 100))
    assert len(got) == 1 and isinstance(got[0], RemotingCommand) and got[0].body == b"x" * 100


def test_a_larger_body_is_skipped_unread_and_the_stream_stays_in_step() -> None:
    decoder = RequestDecoder(LIMITS)
    stream = request(34, b"y" * 101, opaque=7) + request(34, b"ok", opaque=8)
    got = decoder.feed(stream[:60]) + decoder.feed(stream[60:])
    refused, after = got
    assert isinstance(refused, Oversized) and isinstance(after, RemotingCommand)
    assert (refused.request.code, refused.request.opaque, refused.request.body, refused.body_size) == (34, 7, b"", 101)
    assert refused.request.ext_fields == {"k": "v"} and refused.limit == LIMITS.body(34)
    assert (after.opaque, after.body) == (8, b"ok")
    assert decoder.buffered == 0  # the refused body was never held


def test_a_refused_body_arriving_a_byte_at_a_time_is_never_buffered() -> None:
    decoder = RequestDecoder(LIMITS)
    held = 0
    for byte in request(34, b"z" * 5000):
        decoder.feed(bytes([byte]))
        held = max(held, decoder.buffered)
    assert held < 200  # the prefix and the header, never the body


def test_the_remark_names_both_sizes_and_the_setting() -> None:
    refused = RequestDecoder(LIMITS).feed(request(310, b"m" * 1001))[0]
    assert isinstance(refused, Oversized)
    assert refused.remark() == ("request 310 carries a body of 1001 bytes; this server takes at most 1000 "
                                "(maxMessageSize) for it")


def test_codes_without_an_entry_and_responses_take_the_other_bound() -> None:
    got = RequestDecoder(LIMITS).feed(request(999, b"a" * 11) + encode(make_response(
        make_request(34, 5), 0, body=b"b" * 11)))
    assert [type(item) for item in got] == [Oversized, Oversized]
    assert all(isinstance(item, Oversized) and item.limit.refusal == 3 for item in got)


def test_a_header_over_the_limit_closes_the_stream_before_it_is_read() -> None:
    decoder = RequestDecoder(LIMITS)
    oversized = encode(make_request(34, 1, {"k": "v" * 600}))
    with pytest.raises(RemotingProtocolError, match="header of [0-9]+ bytes is more than the limit of 500"):
        decoder.feed(oversized[:8])  # the mark alone says it
    with pytest.raises(RemotingProtocolError, match="already failed"):
        decoder.feed(b"")


@pytest.mark.parametrize(("raw", "match"), [
    (struct.pack(">i", 3), "less than the 4 bytes"),
    (struct.pack(">ii", 2**24, 0), "more than the limit"),
    (struct.pack(">ii", 8, 9), "header length 9 is more than the 4 bytes"),
    (struct.pack(">ii", 4, 7 << 24), "unknown serialize type 7"),
    (struct.pack(">ii", 4, 0), "JSON header"),
])
def test_malformed_frames_are_refused_as_before(raw: bytes, match: str) -> None:
    with pytest.raises(RemotingProtocolError, match=match):
        RequestDecoder(RequestLimits({}, BodyLimit(2**24, 1), max_header=2**24)).feed(raw + bytes(64))


frames = st.lists(st.tuples(st.sampled_from([34, 310, 999]), st.integers(0, 1200),
                            st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ])), max_size=6)


@given(frames, st.integers(1, 97))
@settings(deadline=None, max_examples=examples(150))
def test_any_split_of_a_stream_gives_what_the_frame_decoder_gives(spec: list[tuple[int, int, SerializeType]],
                                                                  chunk: int) -> None:
    """Within the bounds, the same commands as FrameDecoder; beyond, an Oversized in the same place."""
    stream = b"".join(request(code, bytes([i]) * size, opaque=i, serialize_type=kind)
                      for i, (code, size, kind) in enumerate(spec))
    decoder = RequestDecoder(LIMITS)
    got = [item for at in range(0, len(stream), chunk) for item in decoder.feed(stream[at:at + chunk])]
    expected = FrameDecoder().feed(stream)
    assert len(got) == len(expected)
    for item, command in zip(got, expected):
        if isinstance(item, Oversized):
            assert item.body_size == len(command.body) > LIMITS.body(command.code).max_bytes
            assert item.request.opaque == command.opaque
        else:
            assert item == command


# --------------------------------------------------------------------------------- the servers' tables


def test_server_limits_give_every_served_code_no_body_unless_told() -> None:
    limits = server_limits([1, 2], {2: BodyLimit(50, 29)}, 29, 3)
    assert limits.body(1) == BodyLimit(NO_BODY, 29)
    assert limits.body(2) == BodyLimit(50, 29)
    assert limits.body(7) == BodyLimit(NO_BODY, 3)


def test_the_broker_table() -> None:
    limits = broker_limits([RC.PULL_MESSAGE, RC.HEART_BEAT, RC.NOTIFY_BROKER_ROLE_CHANGED], 4 * 2**20)
    for code in (RC.SEND_MESSAGE, RC.SEND_MESSAGE_V2, RC.SEND_BATCH_MESSAGE):
        assert limits.body(code) == BodyLimit(4 * 2**20, ResponseCode.MESSAGE_ILLEGAL, "maxMessageSize")
    assert limits.body(RC.HEART_BEAT) == BodyLimit(HEARTBEAT_BODY, ResponseCode.INVALID_PARAMETER)
    assert limits.body(RC.NOTIFY_BROKER_ROLE_CHANGED) == BodyLimit(SMALL_BODY, ResponseCode.INVALID_PARAMETER)
    assert limits.body(RC.PULL_MESSAGE) == BodyLimit(NO_BODY, ResponseCode.INVALID_PARAMETER)
    assert limits.body(RC.REGISTER_BROKER) == BodyLimit(NO_BODY, ResponseCode.REQUEST_CODE_NOT_SUPPORTED)


def test_the_controller_table() -> None:
    limits = controller_limits([RC.REGISTER_BROKER, RC.CONTROLLER_GET_SYNC_STATE_DATA, RC.QUERY_DATA_VERSION,
                                RC.CONTROLLER_GET_METADATA_INFO])
    assert limits.body(RC.REGISTER_BROKER).max_bytes == REGISTRATION_BODY == 16 * 2**20
    assert limits.body(RC.CONTROLLER_GET_SYNC_STATE_DATA).max_bytes == BROKER_NAMES_BODY
    assert limits.body(RC.QUERY_DATA_VERSION).max_bytes == SMALL_BODY
    assert limits.body(RC.CONTROLLER_GET_METADATA_INFO) == BodyLimit(NO_BODY, ResponseCode.INVALID_PARAMETER)
    assert limits.body(RC.HEART_BEAT).refusal == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


# ------------------------------------------------------------------- what RocketMQ sends fits the bounds


def test_a_registration_of_ten_thousand_topics_fits_in_either_form() -> None:
    """Topic names of 64 characters, in the JSON form (attributes included, as a RocketMQ 5 broker writes
    them) and the compressed one: well under the bound."""
    table = {f"{'T' * 58}{i:06d}": TopicConfig(f"{'T' * 58}{i:06d}", 16, 16, 6, attributes={"+message.type": "NORMAL"})
             for i in range(10_000)}
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(table, DataVersion(1, 2, 3)), ("10.0.0.9:1",))
    assert len(body.encode()) < REGISTRATION_BODY // 4
    assert len(body.encode_compressed()) < REGISTRATION_BODY // 100


def test_a_heartbeat_of_many_groups_and_subscriptions_fits() -> None:
    """200 consumer groups of 20 topics each (and each group's retry topic), every subscription with a few tags."""
    def subscriptions(group: int) -> tuple[bb.SubscriptionData, ...]:
        tags = frozenset({"TagA", "TagB", "TagC"})
        return (*(bb.SubscriptionData(f"topic_{group:04d}_{t:02d}", "TagA || TagB || TagC", tags, frozenset({1, 2, 3}),
                                      1_700_000_000_000) for t in range(20)),
                bb.SubscriptionData(f"%RETRY%GID_consumer_group_{group:04d}", "*", sub_version=1_700_000_000_000))
    groups = tuple(bb.ConsumerData(f"GID_consumer_group_{g:04d}", "CONSUME_PASSIVELY", "CLUSTERING",
                                   "CONSUME_FROM_LAST_OFFSET", subscriptions(g)) for g in range(200))
    body = bb.HeartbeatData("10.0.0.1@12345#1234567890", (bb.ProducerData("PID_group"),), groups).encode()
    assert 500_000 < len(body) < HEARTBEAT_BODY


@pytest.mark.parametrize("kind", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_a_send_with_32_kib_of_properties_fits_the_header_bound(kind: SerializeType) -> None:
    """RocketMQ stores at most 32,767 bytes of properties; the separators escape to six characters each in
    JSON (as the C++ client writes them), which is the most a header can grow."""
    properties = encode_properties({f"k{i:04d}": "v" * 20 for i in range(1200)})
    assert 30_000 < len(properties.encode()) < 32_767
    header = bh.SendMessageRequestHeaderV2(producer_group="pg", topic="T", default_topic="TBW102",
                                           default_topic_queue_nums=4, queue_id=0, sys_flag=0, born_timestamp=1,
                                           flag=0, properties=properties)
    frame = encode(make_request(RC.SEND_MESSAGE_V2, 1, header.to_ext_fields(), b"body", serialize_type=kind))
    header_length = int.from_bytes(frame[5:8], "big")
    assert header_length < MAX_HEADER
    got = RequestDecoder(RequestLimits({}, BodyLimit(10, 1))).feed(frame)
    assert isinstance(got[0], RemotingCommand) and got[0].ext_fields["i"] == properties


def test_a_length_below_the_mark_is_refused_before_the_mark_arrives() -> None:
    with pytest.raises(RemotingProtocolError, match="frame length 2 is less than the 4 bytes"):
        RequestDecoder(LIMITS).feed(b"\x00\x00\x00\x02\x00\x00")


def test_idle_and_head_received_follow_the_frame_being_read() -> None:
    decoder = RequestDecoder(LIMITS)
    kept, refused = request(34, b"k" * 50), request(34, b"r" * 500)
    states = []
    for frame, header_end in ((kept, 8 + int.from_bytes(kept[5:8], "big")),
                              (refused, 8 + int.from_bytes(refused[5:8], "big"))):
        decoder.feed(frame[:header_end - 1])
        states.append((decoder.idle, decoder.head_received))
        decoder.feed(frame[header_end - 1:header_end + 1])
        states.append((decoder.idle, decoder.head_received))
        decoder.feed(frame[header_end + 1:])
        states.append((decoder.idle, decoder.head_received))
    assert states == [(False, False), (False, True), (True, False)] * 2
