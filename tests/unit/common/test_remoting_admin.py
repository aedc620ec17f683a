"""Our admin operations carried over remoting: the RocketMQ request each sends, and RocketMQ's answer read
back into our API's data (the remoting side is an in-memory fake: no sockets)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from services.common import remoting_admin as ra
from services.common.codes import ResponseCode
from services.common.errors import UnreachableError
from services.common.wire import NoHttpAnswer, Wire
from services.controller import contract
from services.remoting.command import RemotingCommand, make_response


def fake(answers: dict[int, Callable[[RemotingCommand], RemotingCommand]]) -> tuple[ra.Call, list[RemotingCommand]]:
    sent: list[RemotingCommand] = []

    def call(request: RemotingCommand) -> RemotingCommand:
        sent.append(request)
        answer = answers.get(request.code)
        return answer(request) if answer else make_response(request, 3, f" request type {request.code} not supported")
    return call, sent


def reply(code: int = 0, remark: str | None = None, ext: dict[str, str] | None = None,
          body: bytes = b"") -> Callable[[RemotingCommand], RemotingCommand]:
    return lambda request: make_response(request, code, remark, ext, body)


META = reply(0, None, {"group": "g", "controllerLeaderId": "n1", "controllerLeaderAddress": "127.0.0.1:9868",
                       "isLeader": "false", "peers": "n0:127.0.0.1:9878;n1:127.0.0.1:9868;"})


def test_metadata_reads_rocketmqs_peer_list() -> None:
    call, sent = fake({1005: META})
    answer = ra.translate(call, "GET", contract.METADATA, None, None)
    assert answer.data == {"group": "g", "controllerLeaderId": "n1", "controllerLeaderAddress": "127.0.0.1:9868",
                           "isLeader": False, "peers": ["n0:127.0.0.1:9878", "n1:127.0.0.1:9868"]}
    assert [r.code for r in sent] == [1005]


def test_peers_in_dledger_config_form_are_read_too() -> None:
    assert ra._peers("n0-127.0.0.1:9878;n1-[::1]:9868") == ["n0:127.0.0.1:9878", "n1:[::1]:9868"]


def test_a_follower_answer_carries_the_leader_it_names() -> None:
    call, sent = fake({1006: reply(2007, "The controller is not in leader state"), 1005: META})
    answer = ra.translate(call, "GET", contract.SYNC_STATE_DATA, None, {"brokerName": ["broker-a"]})
    assert (answer.code, answer.data) == (2007, {"controllerLeaderAddress": "127.0.0.1:9868"})
    assert sent[0].body == b'["broker-a"]'


def test_a_malformed_answer_is_a_system_error_not_a_crash() -> None:
    call, _ = fake({1006: reply(0, None, None, b'{"replicasInfoTable":{"a":{"masterEpoch":"x"}}}')})
    answer = ra.translate(call, "GET", contract.SYNC_STATE_DATA, None, {"brokerName": ["a"]})
    assert answer.code == ResponseCode.SYSTEM_ERROR and "malformed remoting answer" in answer.remark


def test_an_operation_rocketmq_has_no_request_for_is_refused_clearly() -> None:
    call, sent = fake({})
    with pytest.raises(ra.NotOverRemoting, match="no request for GET /v1/controller/events"):
        ra.translate(call, "GET", contract.EVENTS, None, None)
    assert sent == []


def test_elect_reads_the_member_group_with_bare_ids() -> None:
    body = b'{"brokerMemberGroup":{"brokerAddrs":{1:"a:1",2:"b:2"},"brokerName":"bn","cluster":"c"},"syncStateSet":[2]}'
    call, sent = fake({1002: reply(0, None, {"masterBrokerId": "2", "masterAddress": "b:2", "masterEpoch": "5",
                                             "syncStateSetEpoch": "6"}, body)})
    answer = ra.translate(call, "POST", contract.ELECT_MASTER, {"clusterName": "c", "brokerName": "bn",
                                                                       "brokerId": 2, "designateElect": True}, None)
    assert answer.data["brokers"] == [{"brokerId": 1, "brokerAddress": "a:1"}, {"brokerId": 2, "brokerAddress": "b:2"}]
    assert (answer.data["masterBrokerId"], answer.data["masterEpoch"], answer.data["syncStateSet"]) == (2, 5, [2])
    assert sent[0].ext_fields["designateElect"] == "true" and sent[0].ext_fields["brokerId"] == "2"


class _ClosesHttp(httpx.BaseTransport):
    def handle_request(self, request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.")


def test_the_wire_asks_over_remoting_only_what_gives_no_http_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    wire = Wire(2.0, _ClosesHttp())
    asked: list[int] = []

    def remoting_call(host: str, port: int, request: RemotingCommand, deadline: float) -> RemotingCommand:
        asked.append(request.code)
        return META(request)
    monkeypatch.setattr(wire.remoting, "call", remoting_call)
    env = wire.exchange("127.0.0.1:9878", "GET", contract.METADATA, what="controller", deadline=1e18,
                        headers={})
    assert env.data["controllerLeaderId"] == "n1" and wire.speaks("127.0.0.1:9878") == "remoting"
    with pytest.raises(ra.NotOverRemoting, match="gives no HTTP answer; if it is a RocketMQ server"):
        Wire(2.0, _ClosesHttp()).exchange("127.0.0.1:1", "GET", contract.EVENTS, what="controller",
                                          deadline=1e18, headers={})
    only_http = Wire(2.0, _ClosesHttp(), protocol="http")
    with pytest.raises(NoHttpAnswer):
        only_http.exchange("127.0.0.1:9878", "GET", contract.METADATA, what="controller", deadline=1e18,
                           headers={})
    assert asked == [1005]


def test_a_server_that_answers_neither_protocol_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    wire = Wire(2.0, _ClosesHttp())

    def remoting_call(host: str, port: int, request: RemotingCommand, deadline: float) -> RemotingCommand:
        raise UnreachableError("127.0.0.1:9878 closed the connection without answering", ["127.0.0.1:9878"])
    monkeypatch.setattr(wire.remoting, "call", remoting_call)
    with pytest.raises(NoHttpAnswer, match="controller 127.0.0.1:9878 is unreachable"):
        wire.exchange("127.0.0.1:9878", "GET", contract.METADATA, what="controller", deadline=1e18,
                      headers={})
    assert wire.speaks("127.0.0.1:9878") == "auto"
