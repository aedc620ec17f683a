"""RemotingCommand, its flags and codes (services/remoting/command.py).

Numbers follow RocketMQ 8fc57f1, remoting/src/main/java/org/apache/rocketmq/remoting/protocol/:
RemotingCommand.java:52-53 (RPC_TYPE bit 0, RPC_ONEWAY bit 1), LanguageCode.java, SerializeType.java,
RequestCode.java, ResponseCode.java and RemotingSysResponseCode.java.
"""

from __future__ import annotations

import pytest

from services.common.codes import ResponseCode
from services.remoting.command import (
    DEFAULT_VERSION,
    ONEWAY_FLAG,
    RESPONSE_FLAG,
    LanguageCode,
    RemotingCommand,
    RequestCode,
    SerializeType,
    make_request,
    make_response,
)


def test_flag_bits_are_rocketmqs() -> None:
    assert RESPONSE_FLAG == 0b01 and ONEWAY_FLAG == 0b10
    assert RemotingCommand(code=0, flag=1).is_response and not RemotingCommand(code=0, flag=1).is_oneway
    assert RemotingCommand(code=0, flag=2).is_oneway and not RemotingCommand(code=0, flag=2).is_response
    assert RemotingCommand(code=0, flag=3).is_oneway and RemotingCommand(code=0, flag=3).is_response


def test_language_codes_are_rocketmqs() -> None:  # LanguageCode.java
    expected = ["JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP",
                "OMS", "RUST", "NODE_JS"]
    assert [(m.name, m.value) for m in LanguageCode] == [(name, code) for code, name in enumerate(expected)]


def test_unknown_languages_read_as_other() -> None:
    assert LanguageCode.from_code(1) is LanguageCode.CPP
    assert LanguageCode.from_code(200) is LanguageCode.OTHER
    assert LanguageCode.from_name("CPP") is LanguageCode.CPP
    assert LanguageCode.from_name("COBOL") is LanguageCode.OTHER
    assert LanguageCode.from_name("cpp") is LanguageCode.OTHER  # enum names are case-sensitive in fastjson


def test_serialize_types_are_rocketmqs() -> None:  # SerializeType.java
    assert (SerializeType.JSON, SerializeType.ROCKETMQ) == (0, 1)


def test_request_codes_are_rocketmqs() -> None:  # RequestCode.java
    assert {c.name: c.value for c in RequestCode} == {
        "SEND_MESSAGE": 10, "PULL_MESSAGE": 11, "QUERY_CONSUMER_OFFSET": 14, "UPDATE_CONSUMER_OFFSET": 15,
        "GET_MAX_OFFSET": 30, "GET_MIN_OFFSET": 31, "HEART_BEAT": 34, "GET_CONSUMER_LIST_BY_GROUP": 38,
        "PUT_KV_CONFIG": 100, "GET_KV_CONFIG": 101, "DELETE_KV_CONFIG": 102,
        "REGISTER_BROKER": 103, "UNREGISTER_BROKER": 104, "GET_ROUTEINFO_BY_TOPIC": 105,
        "GET_BROKER_CLUSTER_INFO": 106, "WIPE_WRITE_PERM_OF_BROKER": 205, "GET_ALL_TOPIC_LIST_FROM_NAMESERVER": 206,
        "DELETE_TOPIC_IN_NAMESRV": 216, "GET_KVLIST_BY_NAMESPACE": 219, "SEND_MESSAGE_V2": 310,
        "SEND_BATCH_MESSAGE": 320, "UPDATE_NAMESRV_CONFIG": 318, "GET_NAMESRV_CONFIG": 319, "QUERY_DATA_VERSION": 322,
        "ADD_WRITE_PERM_OF_BROKER": 327, "GET_BROKER_MEMBER_GROUP": 901, "BROKER_HEARTBEAT": 904,
        "GET_BROKER_HA_STATUS": 907,
        "CONTROLLER_ALTER_SYNC_STATE_SET": 1001, "CONTROLLER_ELECT_MASTER": 1002,
        "CONTROLLER_REGISTER_BROKER": 1003, "CONTROLLER_GET_REPLICA_INFO": 1004,
        "CONTROLLER_GET_METADATA_INFO": 1005, "CONTROLLER_GET_SYNC_STATE_DATA": 1006,
        "GET_BROKER_EPOCH_CACHE": 1007, "NOTIFY_BROKER_ROLE_CHANGED": 1008, "UPDATE_CONTROLLER_CONFIG": 1009,
        "GET_CONTROLLER_CONFIG": 1010, "CLEAN_BROKER_DATA": 1011, "CONTROLLER_GET_NEXT_BROKER_ID": 1012,
        "CONTROLLER_APPLY_BROKER_ID": 1013}


@pytest.mark.parametrize(("name", "code"), [
    ("SUCCESS", 0), ("SYSTEM_ERROR", 1), ("SYSTEM_BUSY", 2), ("REQUEST_CODE_NOT_SUPPORTED", 3),
    ("VERSION_NOT_SUPPORTED", 15), ("NO_PERMISSION", 16), ("TOPIC_NOT_EXIST", 17), ("TOPIC_EXIST_ALREADY", 18),
    ("PULL_NOT_FOUND", 19), ("PULL_RETRY_IMMEDIATELY", 20), ("PULL_OFFSET_MOVED", 21), ("QUERY_NOT_FOUND", 22),
    ("SUBSCRIPTION_PARSE_FAILED", 23), ("SUBSCRIPTION_NOT_EXIST", 24), ("SUBSCRIPTION_NOT_LATEST", 25),
    ("SUBSCRIPTION_GROUP_NOT_EXIST", 26), ("INVALID_PARAMETER", 29), ("CONTROLLER_FENCED_MASTER_EPOCH", 2000),
    ("CONTROLLER_NOT_LEADER", 2007), ("CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS", 2016),
])
def test_response_codes_are_rocketmqs(name: str, code: int) -> None:  # ResponseCode.java
    assert ResponseCode[name] == code


def test_request_defaults() -> None:
    request = make_request(RequestCode.CONTROLLER_GET_METADATA_INFO, opaque=41)
    assert (request.code, request.opaque, request.flag) == (1005, 41, 0)
    assert request.language is LanguageCode.PYTHON and request.version == DEFAULT_VERSION == 479
    assert request.serialize_type is SerializeType.JSON and request.remark is None and request.body == b""
    assert make_request(904, opaque=1, oneway=True).is_oneway


def test_response_echoes_opaque_and_serialize_type() -> None:
    request = make_request(105, opaque=-7, ext_fields={"topic": "T"}, serialize_type=SerializeType.ROCKETMQ)
    answer = make_response(request, ResponseCode.TOPIC_NOT_EXIST, "no route")
    assert (answer.code, answer.opaque, answer.flag, answer.remark) == (17, -7, RESPONSE_FLAG, "no route")
    assert answer.serialize_type is SerializeType.ROCKETMQ and answer.is_response and not answer.is_oneway


def test_no_response_to_a_oneway_request_or_to_a_response() -> None:
    with pytest.raises(ValueError, match="oneway"):
        make_response(make_request(904, opaque=3, oneway=True), ResponseCode.SUCCESS)
    with pytest.raises(ValueError, match="response"):
        make_response(RemotingCommand(code=0, flag=RESPONSE_FLAG), ResponseCode.SUCCESS)


def test_ext_fields_are_read_only_and_compared_by_content() -> None:
    source = {"b": "2", "a": "1"}
    command = RemotingCommand(code=1, ext_fields=source)
    source["c"] = "3"  # the command keeps its own copy
    assert dict(command.ext_fields) == {"a": "1", "b": "2"}
    with pytest.raises(TypeError):
        command.ext_fields["d"] = "4"  # type: ignore[index]
    assert command == RemotingCommand(code=1, ext_fields={"a": "1", "b": "2"})
    assert hash(command) == hash(RemotingCommand(code=1, ext_fields={"a": "1", "b": "2"}))


@pytest.mark.parametrize("bad", [
    {"code": 2**31}, {"opaque": -(2**31) - 1}, {"flag": True}, {"version": 1.5},
])
def test_fields_must_be_int32(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="int32"):
        RemotingCommand(**{"code": 1, **bad})  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [
    {"ext_fields": {"k": 1}}, {"remark": 5}, {"body": "text"}, {"language": 3},
])
def test_fields_must_have_their_types(bad: dict[str, object]) -> None:
    with pytest.raises(TypeError):
        RemotingCommand(**{"code": 1, **bad})  # type: ignore[arg-type]
