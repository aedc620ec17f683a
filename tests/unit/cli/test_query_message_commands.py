"""queryMsgById, queryMsgByUniqueKey and queryMsgByOffset: offset ids decoded as RocketMQ does, a broker asked
only if the name server routes the topic to it, mqadmin's text of a message and of its track (the exceptions
mqadmin describes included), and the body file written only under a hex name and never through a link. The
name server and the brokers are faked in memory; tests/interop/test_mqadmin_brokeradmin.py compares the text
with real mqadmin's on RocketMQ's cluster and against ours."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mqctl import render_message
from mqctl.commands.message import _CONNECTION_FRAME, _ROUTE_FRAME, decode_offset_id, java_exception
from mqctl.render_message import Track, message_text, save_body, tracks_text
from services.common.codes import ResponseCode
from services.common.errors import MqctlError, UnreachableError
from services.remoting import broker_headers as bh
from services.remoting.command import RemotingCommand, RequestCode, make_response
from services.remoting.message import PulledMessage, SocketAddress, encode_pulled, offset_msg_id
from tests.unit.cli.conftest import Invoke, assert_one_line_error

ROUTE = (b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],'
         b'"queueDatas":[]}')
HOST = SocketAddress(bytes([10, 0, 0, 1]), 10911)
UNIQ = "7F0000010A8C18B4AAC21F2E3D4C0001"
STORED = 1_795_802_461_234


def message(uniq: str | None = UNIQ, tags: str | None = "TagA") -> PulledMessage:
    properties = {"KEYS": "order-1", **({"TAGS": tags} if tags else {}), **({"UNIQ_KEY": uniq} if uniq else {})}
    return PulledMessage("T", 1, 5, 1234, b"hello", properties, STORED, HOST, born_timestamp=STORED - 7,
                         born_host=SocketAddress(bytes([10, 0, 0, 9]), 50123))


@dataclass
class FakeServers:
    stored: list[PulledMessage] = field(default_factory=lambda: [message()])
    asked: list[tuple[str, int]] = field(default_factory=list)
    down: set[str] = field(default_factory=set)

    def client(self, *args: object, **kwargs: object) -> FakeServers:
        return self

    def close(self) -> None:
        pass

    def call(self, host: str, port: int, request: RemotingCommand, deadline: float) -> RemotingCommand:
        self.asked.append((f"{host}:{port}", request.code))
        if f"{host}:{port}" in self.down:
            raise UnreachableError(f"{host}:{port} refused the connection", [f"{host}:{port}"])
        if request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            if request.ext_fields["topic"] != "T":
                return make_response(request, ResponseCode.TOPIC_NOT_EXIST, "no route")
            return make_response(request, ResponseCode.SUCCESS, body=ROUTE)
        if request.code == bh.VIEW_MESSAGE_BY_ID:
            found = [m for m in self.stored if m.commit_log_offset == int(request.ext_fields["offset"])]
            return make_response(request, ResponseCode.SUCCESS, body=encode_pulled(found[0])) if found else \
                make_response(request, ResponseCode.SYSTEM_ERROR, "can not find message by the offset")
        if request.code == bh.QUERY_MESSAGE:
            assert request.ext_fields["_UNIQUE_KEY_QUERY"] == "true"
            found = [m for m in self.stored if m.properties.get("UNIQ_KEY") == request.ext_fields["key"]]
            return make_response(request, ResponseCode.SUCCESS, body=b"".join(encode_pulled(m) for m in found)) \
                if found else make_response(request, ResponseCode.QUERY_NOT_FOUND, "can not find message")
        assert request.code == 300  # QUERY_TOPIC_CONSUME_BY_WHO: no group consumes the topic
        return dataclasses.replace(make_response(request, ResponseCode.SUCCESS, body=b'{"groupList":[]}'))


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeServers:
    fake = FakeServers()
    monkeypatch.setattr("mqctl.commands.namesrv.BlockingRemoting", fake.client)
    monkeypatch.setattr(render_message, "BODY_DIR", tmp_path / "msgbodys")
    return fake


def test_an_offset_id_names_the_store_host_and_the_commitlog_offset() -> None:
    assert decode_offset_id(offset_msg_id(HOST, 1234)) == ("10.0.0.1:10911", 1234)
    v6 = SocketAddress(bytes(15) + b"\x01", 10911)
    assert decode_offset_id(offset_msg_id(v6, 7)) == ("[0:0:0:0:0:0:0:1]:10911", 7)
    for text in ("", "XYZ" * 11 + "Z", "0A000001" + "00000000" + "0" * 16, "0A000001" + "FFFFFFFF" + "0" * 16):
        assert decode_offset_id(text) is None  # not hex, or port 0, or a negative port


def test_mqadmins_exception_text_names_the_frame_of_its_version() -> None:
    route = java_exception(17, "No topic route info in name server for the topic: %RETRY%g\nSee https://x for "
                               "further details.", _ROUTE_FRAME, newer=False)
    assert route == ("org.apache.rocketmq.client.exception.MQClientException: CODE: 17  DESC: No topic route info "
                     "in name server for the topic: %RETRY%g\nSee https://x for further details., org.apache.rocketmq."
                     "client.impl.MQClientAPIImpl.getTopicRouteInfoFromNameServer(MQClientAPIImpl.java:1998)")
    connection = java_exception(206, "Not found the consumer group connection", _CONNECTION_FRAME, newer=True)
    assert connection.endswith("DESC: Not found the consumer group connection\nFor more information, please visit "
                               "the url, https://rocketmq.apache.org/docs/bestPractice/06FAQ, org.apache.rocketmq.tools."
                               "admin.DefaultMQAdminExtImpl.examineConsumerConnectionInfo(DefaultMQAdminExtImpl.java:619)")


def test_a_message_and_its_tracks_in_mqadmins_text() -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(STORED / 1000))
    text = message_text(message(tags=None), "/tmp/rocketmq/msgbodys/X", offset_id=True, charset="UTF-8")
    assert text.splitlines() == [
        f"OffsetID:            {offset_msg_id(HOST, 1234)}", "Topic:               T", "Tags:                [null]",
        "Keys:                [order-1]", "Queue ID:            1", "Queue Offset:        5",
        "CommitLog Offset:    1234", "Reconsume Times:     0", f"Born Timestamp:      {stamp},227",
        f"Store Timestamp:     {stamp},234", "Born Host:           10.0.0.9:50123", "Store Host:          10.0.0.1:10911",
        "System Flag:         0", f"Properties:          {{UNIQ_KEY={UNIQ}, KEYS=order-1}}",
        "Message Body Path:   /tmp/rocketmq/msgbodys/X", "Message Body:        hello"]
    tracks = [Track("g1", "CONSUMED"), Track("g2", "NOT_ONLINE", "CODE:206 DESC:gone\x1b[2J")]
    assert tracks_text(tracks, True) == ("\n\nMessageTrack [consumerGroup=g1, trackType=CONSUMED, exceptionDesc=null]\n"
                                         "MessageTrack [consumerGroup=g2, trackType=NOT_ONLINE, exceptionDesc=CODE:206 "
                                         "DESC:gone\\x1b[2J]\n")
    assert tracks_text(tracks[:1], False).endswith("exceptionDesc=null]") and tracks_text([], True) == (
        "\n\nWARN: No Consumer")


def test_the_body_is_written_under_a_hex_name_only_and_never_through_a_link(tmp_path: Path) -> None:
    assert Path(save_body(message(), body_dir=tmp_path)).read_bytes() == b"hello"
    hostile = save_body(message(uniq="../../etc/passwd"), body_dir=tmp_path)
    assert hostile == str(tmp_path / offset_msg_id(HOST, 1234))
    os.symlink(tmp_path / "elsewhere", tmp_path / f"{UNIQ}_1")
    with pytest.raises(MqctlError, match="symbolic link"):
        save_body(message(), "_1", body_dir=tmp_path)
    assert not (tmp_path / "elsewhere").exists()


def test_an_offset_id_of_a_routed_broker_is_viewed_there(mqctl: Invoke, servers: FakeServers) -> None:
    result = mqctl("queryMsgById", "-n", "127.0.0.1:9876", "-t", "T", "-i", offset_msg_id(HOST, 1234),
                   "--format", "mqadmin")
    assert result.exit_code == 0, result.stderr
    assert ("10.0.0.1:10911", bh.VIEW_MESSAGE_BY_ID) in servers.asked
    assert result.stdout.startswith(f"OffsetID:            {offset_msg_id(HOST, 1234)}\nTopic:               T\n")
    assert result.stdout.endswith(f"/msgbodys/{UNIQ}\n\n\nWARN: No Consumer")


def test_an_id_naming_an_address_the_topic_is_not_routed_to_is_looked_up_as_a_unique_key(
        mqctl: Invoke, servers: FakeServers) -> None:
    stranger = offset_msg_id(SocketAddress(bytes([10, 9, 9, 9]), 10911), 1234)
    servers.stored = [message(uniq=stranger)]
    result = mqctl("queryMsgById", "-n", "127.0.0.1:9876", "-t", "T", "-i", stranger, "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert all(address == "10.0.0.1:10911" or code == RequestCode.GET_ROUTEINFO_BY_TOPIC
               for address, code in servers.asked)
    assert json.loads(result.stdout)[0]["msgId"] == stranger


def test_a_broker_that_cannot_be_reached_is_named_and_not_taken_for_an_answer(mqctl: Invoke,
                                                                              servers: FakeServers) -> None:
    servers.down.add("10.0.0.1:10911")
    result = mqctl("queryMsgByUniqueKey", "-n", "127.0.0.1:9876", "-t", "T", "-i", UNIQ)
    assert_one_line_error(result, 3, f"no message of topic T has the id {UNIQ} on the brokers that answered",
                          "unreachable: 10.0.0.1:10911")


def test_no_such_message_is_one_error_line(mqctl: Invoke, servers: FakeServers) -> None:
    result = mqctl("queryMsgByUniqueKey", "-n", "127.0.0.1:9876", "-t", "T", "-i", "00FF")
    assert_one_line_error(result, 4, "no message of topic T has the id 00FF")
    bad = mqctl("queryMsgById", "-n", "127.0.0.1:9876", "-t", "T", "-i", UNIQ, "-f", "no-such-charset")
    assert bad.exit_code == 2 and "unknown charset" in bad.stderr
