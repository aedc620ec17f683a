"""Frames and both header encodings (services/remoting/codec.py): golden bytes written by hand from RocketMQ's
source, and every malformed input the decoder must refuse with a clear RemotingProtocolError.

Source references are RocketMQ 8fc57f1, remoting/src/main/java/org/apache/rocketmq/remoting/protocol/:
RemotingCommand.java (encode at line 387: int32 length, int32 mark, header, body; decode at line 191 with
the "headerLength > length - 4" check at line 195; markProtocolType at line 248) and
RocketMQSerializable.java (rocketMQProtocolEncode at line 97, rocketMQProtocolDecode at line 205, readStr
reading length 0 as null at line 49, mapSerialize at line 145).
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.remoting.codec import MAX_FRAME_SIZE, FrameDecoder, decode_frame, encode, response_frame
from services.remoting.command import (
    LanguageCode,
    RemotingCommand,
    SerializeType,
    make_request,
    make_response,
)
from services.remoting.errors import RemotingProtocolError

HX = bytes.fromhex
JSON, ROCKETMQ = SerializeType.JSON, SerializeType.ROCKETMQ


def frame(header: bytes, body: bytes = b"", kind: int = 0) -> bytes:
    """A frame around ``header`` as RemotingCommand.encode lays it out (line 387)."""
    return struct.pack(">ii", 4 + len(header) + len(body), kind << 24 | len(header)) + header + body


def rocketmq_header(code: int = 105, language: int = 0, version: int = 479, opaque: int = 1, flag: int = 0,
                    remark: bytes = b"", ext: bytes = b"") -> bytes:
    return struct.pack(">hBhiii", code, language, version, opaque, flag, len(remark)) + remark + \
        struct.pack(">i", len(ext)) + ext


# --------------------------------------------------------------------------------------- the mark


def test_mark_of_a_json_header() -> None:
    # RemotingCommandTest.testMarkProtocolType_JSONProtocolType: 261 bytes, JSON -> 00 00 01 05
    command = RemotingCommand(code=0, remark="x" * (261 - 100))
    raw = encode(command)
    assert raw[4] == 0 and int.from_bytes(raw[5:8], "big") == len(raw) - 8


def test_mark_of_a_rocketmq_header() -> None:
    # RemotingCommandTest.testMarkProtocolType_ROCKETMQProtocolType: the type is the top byte
    raw = encode(RemotingCommand(code=0, serialize_type=ROCKETMQ))
    assert raw[4:8] == HX("01000015")  # ROCKETMQ, header of 21 bytes


# --------------------------------------------------------------------------------- JSON: golden


GOLDEN_JSON_REQUEST = (
    HX("00000087" "00000083")
    + b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":7,'
      b'"serializeTypeCurrentRPC":"JSON","version":479}'
)


def test_json_request_golden() -> None:
    """fastjson writes RemotingCommand's getters sorted by name (code, extFields, flag, language, opaque,
    remark, serializeTypeCurrentRPC, version), enums by name, null remark left out; body and the
    @JSONField(serialize=false) / transient properties are not written."""
    command = make_request(105, opaque=7, ext_fields={"topic": "TopicTest"}, language=LanguageCode.JAVA)
    assert encode(command) == GOLDEN_JSON_REQUEST
    assert decode_frame(GOLDEN_JSON_REQUEST) == command


def test_json_response_golden_with_remark_and_body() -> None:
    header = (b'{"code":17,"flag":1,"language":"PYTHON","opaque":7,"remark":"No route",'
              b'"serializeTypeCurrentRPC":"JSON","version":479}')
    raw = HX("0000007d" "00000076") + header + b"abc"
    command = RemotingCommand(code=17, opaque=7, flag=1, remark="No route", body=b"abc")
    assert encode(command) == raw
    assert decode_frame(raw) == command


def test_json_header_of_the_cpp_client() -> None:
    """What the Apache RocketMQ C++ client (PyPI rocketmq 0.4.4) sends, byte for byte as observed: jsoncpp
    output with a trailing newline, an empty remark, no serializeTypeCurrentRPC."""
    header = (b'{"code":105,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN",'
              b'"Signature":"r2KscApgmp4mTbXF2/WzOmrUVqw=","topic":"ProbeTopic"},"flag":0,'
              b'"language":"CPP","opaque":0,"remark":"","version":63}\n')
    command = decode_frame(frame(header))
    assert (command.code, command.language, command.version, command.opaque, command.flag) == (
        105, LanguageCode.CPP, 63, 0, 0)
    assert command.remark == "" and command.serialize_type is JSON and command.body == b""
    assert command.ext_fields["topic"] == "ProbeTopic" and command.ext_fields["AccessKey"] == ""


def test_json_ext_fields_read_as_fastjson_reads_a_string_map() -> None:
    """The C++ client writes its int header fields as JSON numbers (PullMessageRequestHeader::Encode:
    ``outData["queueId"] = queueId``); fastjson reads extFields into a HashMap<String, String>, so a
    number or a boolean becomes its text, and a null value is an absent field."""
    header = (b'{"code":11,"extFields":{"queueId":3,"queueOffset":"12","sysFlag":-2,"big":9223372036854775807,'
              b'"unitMode":false,"gone":null},"flag":0,"language":"CPP","opaque":5,"remark":"","version":63}\n')
    assert dict(decode_frame(frame(header)).ext_fields) == {
        "queueId": "3", "queueOffset": "12", "sysFlag": "-2", "big": "9223372036854775807", "unitMode": "false"}


def test_json_header_defaults_as_rocketmq() -> None:
    # absent flag/version read 0 and an absent language JAVA (RemotingCommand.java:87-89)
    command = decode_frame(frame(b'{"code":1,"opaque":2}'))
    assert (command.flag, command.version, command.language, command.remark, dict(command.ext_fields)) == (
        0, 0, LanguageCode.JAVA, None, {})


def test_json_header_language_by_number_and_unknown_name() -> None:
    assert decode_frame(frame(b'{"code":1,"opaque":2,"language":9}')).language is LanguageCode.GO
    assert decode_frame(frame(b'{"code":1,"opaque":2,"language":"ZIG"}')).language is LanguageCode.OTHER


def test_json_header_ignores_unknown_fields_and_trusts_the_mark() -> None:
    command = decode_frame(frame(b'{"code":1,"opaque":2,"serializeTypeCurrentRPC":"ROCKETMQ","x":[1,{}]}'))
    assert command.serialize_type is JSON


def test_json_strings_are_escaped() -> None:
    command = RemotingCommand(code=1, remark='quote " backslash \\ newline \n tab \t nul \x00 é',
                              ext_fields={"k": "\u2028"})
    raw = encode(command)
    assert b'"remark":"quote \\" backslash \\\\ newline \\n tab \\t nul \\u0000 \xc3\xa9"' in raw
    assert decode_frame(raw) == command


# ----------------------------------------------------------------------------- ROCKETMQ: golden


def test_rocketmq_header_without_remark_or_ext_fields_is_21_bytes() -> None:
    # RocketMQSerializableTest.testRocketMQProtocolEncodeAndDecode_WithoutRemarkWithoutExtFields
    command = RemotingCommand(code=103, language=LanguageCode.JAVA, version=2333, opaque=5,
                              serialize_type=ROCKETMQ)
    raw = encode(command)
    assert raw == HX("00000019" "01000015" "0067" "00" "091d" "00000005" "00000000" "00000000" "00000000")
    assert decode_frame(raw) == command


def test_rocketmq_header_with_remark_is_34_bytes() -> None:
    # ...WithRemarkWithoutExtFields: remark length 13 at offset 13, the text at 17
    command = RemotingCommand(code=103, language=LanguageCode.JAVA, version=2333, opaque=5,
                              remark="Sample Remark", serialize_type=ROCKETMQ)
    header = encode(command)[8:]
    assert len(header) == 34 and header[13:17] == HX("0000000d") and header[17:30] == b"Sample Remark"
    assert header[30:] == HX("00000000")


def test_rocketmq_header_with_ext_fields_is_35_bytes() -> None:
    # ...WithoutRemarkWithExtFields: extFields of 14 bytes: 0003 "key" 00000005 "value"
    command = RemotingCommand(code=103, language=LanguageCode.JAVA, version=2333, opaque=5,
                              ext_fields={"key": "value"}, serialize_type=ROCKETMQ)
    header = encode(command)[8:]
    assert len(header) == 35
    assert header[17:] == HX("0000000e" "0003") + b"key" + HX("00000005") + b"value"


GOLDEN_ROCKETMQ_REQUEST = HX(
    "00000031" "0100002d"           # length 49, ROCKETMQ | header 45
    "03ec" "00" "01df"              # code 1004, JAVA, version 479
    "00000009" "00000000"           # opaque 9, flag 0
    "00000000"                      # no remark
    "00000018" "000a") + b"brokerName" + HX("00000008") + b"broker-a"


def test_rocketmq_request_golden() -> None:
    command = make_request(1004, opaque=9, ext_fields={"brokerName": "broker-a"},
                           serialize_type=ROCKETMQ, language=LanguageCode.JAVA)
    assert encode(command) == GOLDEN_ROCKETMQ_REQUEST
    assert decode_frame(GOLDEN_ROCKETMQ_REQUEST) == command


def test_rocketmq_response_golden() -> None:
    raw = HX("0000002b" "01000027" "0000" "03" "01df" "00000005" "00000001" "00000012") + \
        b"Heart beat success" + HX("00000000")
    command = RemotingCommand(code=0, opaque=5, flag=1, remark="Heart beat success", serialize_type=ROCKETMQ)
    assert encode(command) == raw
    assert decode_frame(raw) == command


def test_rocketmq_empty_strings_read_as_null() -> None:
    """readStr (line 49) returns null for length 0: an empty remark is none, and an extFields entry with
    an empty key or value is a null field, so it is left out."""
    ext = HX("0001") + b"a" + HX("00000000") + HX("0000" "00000001") + b"v" + HX("0001") + b"b" + \
        HX("00000001") + b"2"
    command = decode_frame(frame(rocketmq_header(ext=ext), kind=1))
    assert command.remark is None and dict(command.ext_fields) == {"b": "2"}
    sent = RemotingCommand(code=1, remark="", ext_fields={"a": "", "b": "2"}, serialize_type=ROCKETMQ)
    assert dict(decode_frame(encode(sent)).ext_fields) == {"b": "2"}


def test_rocketmq_negative_code_and_unknown_language() -> None:
    command = decode_frame(frame(rocketmq_header(code=-1, language=99), kind=1))
    assert command.code == -1 and command.language is LanguageCode.OTHER


def test_body_is_kept_as_bytes() -> None:
    command = make_request(1001, opaque=1, body=b"\x00\xff{}", serialize_type=ROCKETMQ)
    assert decode_frame(encode(command)).body == b"\x00\xff{}"


# ------------------------------------------------------------------------------- encoding refusals


@pytest.mark.parametrize("command", [
    RemotingCommand(code=40000, serialize_type=ROCKETMQ),
    RemotingCommand(code=1, version=-40000, serialize_type=ROCKETMQ),
    RemotingCommand(code=1, ext_fields={"k" * 40000: "v"}, serialize_type=ROCKETMQ),
    RemotingCommand(code=1, remark="\ud800"),
    RemotingCommand(code=1, remark="\udfff", serialize_type=ROCKETMQ),
    RemotingCommand(code=1, body=b"x" * 100),
], ids=["code-int16", "version-int16", "key-int16", "surrogate-json", "surrogate-rocketmq", "too-big"])
def test_what_cannot_be_encoded_is_a_value_error(command: RemotingCommand) -> None:
    with pytest.raises(ValueError):
        encode(command, max_frame_size=100)


def test_json_code_beyond_int16_is_fine() -> None:
    assert decode_frame(encode(RemotingCommand(code=70000))).code == 70000


# ------------------------------------------------------------------------------- malformed frames


def refused(raw: bytes, match: str, max_frame_size: int = MAX_FRAME_SIZE) -> None:
    decoder = FrameDecoder(max_frame_size)
    with pytest.raises(RemotingProtocolError, match=match):
        decoder.feed(raw)


@pytest.mark.parametrize(("raw", "match"), [
    (HX("00000000"), "less than the 4 bytes"),
    (HX("00000003" "000000"), "less than the 4 bytes"),
    (HX("ffffffff"), "length -1 is less"),
    (HX("80000000"), "less than"),
    (HX("00000008" "00000005" "7b7d7b7d"), "header length 5 is more than the 4 bytes"),
    (HX("00000004" "00ffffff"), "header length 16777215"),
    (HX("00000006" "02000000" "7b7d"), "unknown serialize type 2"),
    (HX("00000006" "ff000000" "7b7d"), "unknown serialize type 255"),
])
def test_malformed_frames(raw: bytes, match: str) -> None:
    refused(raw, match)


@pytest.mark.parametrize(("header", "match"), [
    (b"", "unexpected end"),
    (b"[]", "not an object"),
    (b'"x"', "not an object"),
    (b"{", "expected"),
    (b'{"code":1,"opaque":2}x', "unexpected data after"),
    (b'{"opaque":2}', "no 'code'"),
    (b'{"code":1}', "no 'opaque'"),
    (b'{"code":null,"opaque":1}', "no 'code'"),
    (b'{"code":"105","opaque":1}', "'code' is a string, not an integer"),
    (b'{"code":true,"opaque":1}', "'code' is a boolean"),
    (b'{"code":1.0,"opaque":1}', "'code' is a number"),
    (b'{"code":2147483648,"opaque":1}', "outside int32"),
    (b'{"code":1,"opaque":1,"flag":-2147483649}', "outside int32"),
    (b'{"code":1,"opaque":1,"language":true}', "'language' is a boolean"),
    (b'{"code":1,"opaque":1,"language":["CPP"]}', "'language' is an array"),
    (b'{"code":1,"opaque":1,"remark":5}', "'remark' is an integer"),
    (b'{"code":1,"opaque":1,"serializeTypeCurrentRPC":{}}', "serializeTypeCurrentRPC"),
    (b'{"code":1,"opaque":1,"extFields":[]}', "'extFields' is an array"),
    (b'{"code":1,"opaque":1,"extFields":{"a":1.5}}', r"extFields\['a'\] is a number"),
    (b'{"code":1,"opaque":1,"extFields":{"a":["1"]}}', r"extFields\['a'\] is an array"),
    (b'{"code":1,"opaque":1,"extFields":{"a":{}}}', r"extFields\['a'\] is an object"),
    (b'{"code":1,"opaque":1,"x":[[[[]]]]}', "nested deeper than 4"),
    (b'{"code":1,"opaque":1,"extFields":{7:"x"}}', "key 7 is not a string"),
    (b'{"code":1,"opaque":1,"code":2}', "duplicate key 'code'"),
    (b'{"code":1,"opaque":NaN}', "expected a value"),
    (b'{"code":1,"opaque":1,"remark":"\xff"}', "not UTF-8"),
    (b'{"code":1,"opaque":1,"remark":"\\ud800"}', "lone UTF-16 surrogate"),
    (b"{'code':1,'opaque':1}", "expected a string or an integer key"),
])
def test_malformed_json_headers(header: bytes, match: str) -> None:
    refused(frame(header), "JSON header.*" + match)


@pytest.mark.parametrize(("header", "match"), [
    (HX("0069000000"), "shorter than 21"),
    (rocketmq_header()[:-1], "shorter than 21"),
    (rocketmq_header(remark=b"ab")[:-1], "extFields length 0 leaves trailing|past the header"),
    (HX("0069" "00" "01df" "00000001" "00000000" "ffffffff" "00000000"), "remark length -1 is negative"),
    (HX("0069" "00" "01df" "00000001" "00000000" "00000009" "00000000"), "remark length 9"),
    (rocketmq_header() + b"x", "leaves trailing bytes"),
    (rocketmq_header()[:-4] + HX("ffffffff"), "extFields length -1 is negative"),
    (rocketmq_header()[:-4] + HX("00000001"), "runs past the header's end"),
    (rocketmq_header(ext=HX("00")), "truncated in the length of extFields key"),
    (rocketmq_header(ext=HX("ffff")), "extFields key length -1"),
    (rocketmq_header(ext=HX("0005") + b"abc"), "extFields key length 5"),
    (rocketmq_header(ext=HX("0001") + b"a" + HX("000000")), r"truncated in the length of extFields\['a'\]"),
    (rocketmq_header(ext=HX("0001") + b"a" + HX("80000000")), r"extFields\['a'\] length -2147483648"),
    (rocketmq_header(ext=HX("0001") + b"a" + HX("00000002") + b"v"), r"extFields\['a'\] length 2"),
    (rocketmq_header(ext=(HX("0001") + b"a" + HX("00000001") + b"v") * 2), "repeats extFields key 'a'"),
    (rocketmq_header(remark=b"\xc3"), "remark is not UTF-8"),
    (rocketmq_header(ext=HX("0001") + b"\xff" + HX("00000001") + b"v"), "extFields key is not UTF-8"),
    (rocketmq_header(ext=HX("0001") + b"a" + HX("00000001") + b"\x80"), r"extFields\['a'\] is not UTF-8"),
])
def test_malformed_rocketmq_headers(header: bytes, match: str) -> None:
    refused(frame(header, kind=1), "ROCKETMQ header.*" + match)


def test_a_failed_decoder_stays_failed() -> None:
    decoder = FrameDecoder()
    with pytest.raises(RemotingProtocolError):
        decoder.feed(HX("00000000"))
    assert decoder.buffered == 0
    with pytest.raises(RemotingProtocolError, match="already failed"):
        decoder.feed(GOLDEN_JSON_REQUEST)


def test_decode_frame_wants_exactly_one_frame() -> None:
    with pytest.raises(RemotingProtocolError, match="exactly one"):
        decode_frame(GOLDEN_JSON_REQUEST[:-1])
    with pytest.raises(RemotingProtocolError, match="exactly one"):
        decode_frame(GOLDEN_JSON_REQUEST * 2)


@given(st.dictionaries(st.text(max_size=10), st.text(max_size=30), max_size=5), st.integers(0, 2**31 - 1),
       st.sampled_from([0, 1, 16, 2012]), st.sampled_from(list(SerializeType)))
def test_a_response_frame_is_the_encoded_response_byte_for_byte(ext: dict[str, str], opaque: int, code: int,
                                                                serialize_type: SerializeType) -> None:
    request = make_request(310, opaque, {"a": "x"}, b"body", serialize_type=serialize_type)
    try:
        expected = encode(make_response(request, code, None, ext))
    except ValueError:  # a lone surrogate: no UTF-8 form either way
        with pytest.raises(ValueError):
            response_frame(request, code, ext)
        return
    assert response_frame(request, code, ext) == expected


def test_the_decoder_says_when_a_frames_head_is_in() -> None:
    """The length, mark and header of the frame being read (what the connection's head deadline waits for)."""
    frame = encode(make_request(105, opaque=3, body=b"body"))
    head = len(frame) - 4
    decoder = FrameDecoder()
    for i, byte in enumerate(frame[:-1]):
        decoder.feed(bytes([byte]))
        assert decoder.head_received == (i + 1 >= head), i
    assert decoder.feed(frame[-1:]) and not decoder.head_received and decoder.idle
