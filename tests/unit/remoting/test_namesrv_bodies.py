"""REGISTER_BROKER's body (services/remoting/namesrv_bodies.py): the JSON a RocketMQ broker writes, the
compressed form read part by part, the form of brokers before V3_0_11, and hostile input (a zlib bomb,
lengths and counts that do not fit, truncation, trailing bytes) refused with a BodyError.

Classes followed (RocketMQ 8fc57f1): remoting/.../protocol/body/RegisterBrokerBody.java (encode(boolean)
:50, decode :114), body/TopicConfigSerializeWrapper.java:27, body/TopicConfigAndMappingSerializeWrapper
.java:27, protocol/DataVersion.java:22, common/.../TopicConfig.java (fields :36, encode :85, decode :110),
common/.../UtilAll.java:298 (crc32).
"""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.remoting.errors import BodyError, HeaderFieldError
from services.remoting.headers import RegisterBrokerRequestHeader
from services.remoting.namesrv_bodies import (
    V3_0_11,
    V5_0_0,
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    body_crc32,
)

VERSION = DataVersion(1, 1700000000000, 3)
BODY = RegisterBrokerBody(TopicConfigSerializeWrapper({"TopicTest": TopicConfig("TopicTest", 4, 4, 6)}, VERSION))

# What a broker's RegisterBrokerBody.encode(false) writes: bean properties by name; the wrapper is a
# TopicConfigAndMappingSerializeWrapper (its mappingDataVersion is stamped at construction by RocketMQ,
# 0 here); TopicConfig's getTopicMessageType is @JSONField(serialize = false).
GOLDEN = (b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"stateVersion":1,'
          b'"timestamp":1700000000000},"mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":0},'
          b'"topicConfigTable":{"TopicTest":{"attributes":{},"order":false,"perm":6,"readQueueNums":4,'
          b'"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}},'
          b'"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}}')


def parts(*chunks: bytes) -> bytes:
    return b"".join(struct.pack(">i", len(c)) + c for c in chunks)


def compressed(topic_texts: list[bytes], filters: bytes = b"[]", mappings: list[bytes] | None = None,
               tail: bytes = b"") -> bytes:
    """The inflated layout of RegisterBrokerBody.encode(true), written out by hand, then deflated."""
    raw = parts(VERSION.encode()) + struct.pack(">i", len(topic_texts)) + parts(*topic_texts) + parts(filters)
    if mappings is not None:
        raw += struct.pack(">i", len(mappings)) + parts(*mappings)
    return zlib.compress(raw + tail, 9)


def test_golden_json() -> None:
    assert BODY.encode() == GOLDEN
    assert RegisterBrokerBody.decode_request(GOLDEN, compressed=False, version=479) == BODY


def test_the_compressed_form_is_read_part_by_part() -> None:
    data = compressed([b"TopicTest 4 4 6 SINGLE_TAG {}", b'Tagged 8 8 2 MULTI_TAG {"+message.type":"FIFO"}'],
                      b'["10.0.0.9:1"]', [b'{"topic":"x","bname":"b"}'])
    body = RegisterBrokerBody.decode_request(data, compressed=True, version=V5_0_0)
    assert body.topic_config_serialize_wrapper.data_version == VERSION
    assert body.topic_config_serialize_wrapper.topic_config_table == {
        "TopicTest": TopicConfig("TopicTest", 4, 4, 6),
        "Tagged": TopicConfig("Tagged", 8, 8, 2, "MULTI_TAG", attributes={"+message.type": "FIFO"})}
    assert body.filter_server_list == ("10.0.0.9:1",)
    # before V5_0_0 there is no mapping section
    older = compressed([b"TopicTest 4 4 6 SINGLE_TAG"])
    assert RegisterBrokerBody.decode_request(older, compressed=True, version=V5_0_0 - 1) == BODY


def test_our_compressed_writer_round_trips() -> None:
    assert RegisterBrokerBody.decode_request(BODY.encode_compressed(), compressed=True, version=V5_0_0) == BODY
    assert TopicConfig("T", 1, 2, 3).encode_text() == "T 1 2 3 SINGLE_TAG {}"


def test_attributes_rocketmq_cannot_read_are_ignored_as_it_does() -> None:
    body = RegisterBrokerBody.decode_request(compressed([b'T 1 1 6 SINGLE_TAG {"a b":"c"}', b"U 1 1 6 SINGLE_TAG {"]),
                                             compressed=True, version=V5_0_0 - 1)
    table = body.topic_config_serialize_wrapper.topic_config_table
    assert table["T"].attributes == {} and table["U"].attributes == {}


def test_old_brokers_send_the_bare_wrapper_and_an_empty_body_registers_no_topics() -> None:
    wrapper = BODY.topic_config_serialize_wrapper
    assert RegisterBrokerBody.decode_request(wrapper.encode(), compressed=False, version=V3_0_11 - 1) == BODY
    assert RegisterBrokerBody.decode_request(b"", compressed=True, version=479) == RegisterBrokerBody()


def test_crc32_is_rocketmqs() -> None:
    assert body_crc32(b"123456789") == 0xCBF43926 & 0x7FFFFFFF  # CRC-32's check value, top bit cleared


def test_the_header_requires_what_rocketmq_marks_not_null() -> None:
    with pytest.raises(HeaderFieldError, match="'haServerAddr' is missing"):
        RegisterBrokerRequestHeader.from_ext_fields({"brokerName": "b", "brokerAddr": "a:1", "clusterName": "c",
                                                     "brokerId": "0"})
    header = RegisterBrokerRequestHeader.from_ext_fields({"brokerName": "b", "brokerAddr": "a:1",
                                                          "clusterName": "c", "haServerAddr": "", "brokerId": "0"})
    assert (header.compressed, header.body_crc32, header.enable_acting_master) == (False, 0, None)


@pytest.mark.parametrize(("data", "match"), [
    (b"not zlib", "not a zlib stream"),
    (zlib.compress(b"\0" * (16 * 1024 * 1024 + 1)), "inflates to more than the limit"),
    (compressed([b"T 1 1 6 SINGLE_TAG"])[:-6], "truncated"),
    (compressed([b"T 1 1 6 SINGLE_TAG"]) + b"x", "1 bytes follow the zlib stream"),
    (compressed([b"T 1 1 6 SINGLE_TAG"], tail=b"\0\0\0\0\0"), "5 bytes follow its last part"),
    (zlib.compress(struct.pack(">i", 100) + b"{}"), "the data version of 100 bytes runs past the end"),
    (zlib.compress(struct.pack(">i", -1)), "the data version of -1 bytes"),
    (zlib.compress(parts(b"{}") + struct.pack(">i", 1 << 30)), "topic count 1073741824 does not fit"),
    (zlib.compress(parts(b"{}") + struct.pack(">i", -2)), "topic count -2 does not fit"),
    (zlib.compress(parts(b"{}")), "ends inside the topic count"),
    (compressed([b"T 1 1 6"]), "has fewer than 5 fields"),
    (compressed([b"T x 1 6 SINGLE_TAG"]), "readQueueNums 'x' is not an int32"),
    (compressed([b"T 1 99999999999 6 SINGLE_TAG"]), "writeQueueNums '99999999999' is not an int32"),
    (compressed([b"T 1 1 6 NO_TAG"]), "not one of SINGLE_TAG, MULTI_TAG"),
    (compressed([b"T\xff 1 1 6 SINGLE_TAG"]), "topic config 0 is not UTF-8"),
    (compressed([b"T 1 1 6 SINGLE_TAG"], b'{"a":1}'), "filterServerList is an object"),
    (compressed([b"T 1 1 6 SINGLE_TAG"], b"[1]"), r"filterServerList\[0\] is an integer"),
    (compressed([b"T 1 1 6 SINGLE_TAG"], mappings=[b"[]"]), "mapping 0 is an array"),
])
def test_a_hostile_compressed_body_is_refused(data: bytes, match: str) -> None:
    with pytest.raises(BodyError, match=match):
        RegisterBrokerBody.decode_request(data, compressed=True, version=V5_0_0 if b"mapping" in match.encode()
                                          else V5_0_0 - 1)


@pytest.mark.parametrize(("text", "match"), [
    (b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"readQueueNums":"4","topicName":"T"}}}}',
     "topicConfigSerializeWrapper.topicConfigTable.T.readQueueNums is a string"),
    (b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{}}}}', "topicConfigTable.T.topicName is missing"),
    (b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T","topicFilterType":"X"}}}}',
     "not one of SINGLE_TAG"),
    (b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":"1"}}}', "dataVersion.counter is a string"),
    (b'{"topicConfigSerializeWrapper":{"topicQueueMappingInfoMap":[]}}', "topicQueueMappingInfoMap is an array"),
    (b'{"topicConfigSerializeWrapper":[]}', "topicConfigSerializeWrapper is an array"),
    (b'{"filterServerList":"x"}', "filterServerList is a string"),
    (b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T","attributes":{"a":1}}}}}',
     "attributes.a is an integer"),
])
def test_a_malformed_json_body_is_refused_naming_the_field(text: bytes, match: str) -> None:
    with pytest.raises(BodyError, match=match):
        RegisterBrokerBody.decode_request(text, compressed=False, version=479)


@given(st.binary(max_size=200), st.booleans(), st.sampled_from([0, V3_0_11, V5_0_0]))
@settings(deadline=None)
def test_any_bytes_give_a_body_or_a_body_error(data: bytes, is_compressed: bool, version: int) -> None:
    for candidate in (data, zlib.compress(data)):
        try:
            RegisterBrokerBody.decode_request(candidate, compressed=is_compressed, version=version)
        except BodyError:
            pass
