"""Where the CLI sends the auth token: to the controllers the operator listed (-a, $MQCTL_CONTROLLER_ADDR)
and the peers those controllers list, and to a broker address given with --brokerAddr; never to a broker
address learned from the controller (anyone who can register a broker would receive it)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner

from mqctl.cli import cli
from services.broker import contract as bc
from services.controller import contract
from tests.unit.cli.conftest import (
    BASE_ENV,
    FOLLOWER,
    LEADER,
    MASTER,
    SLAVE,
    FakeCluster,
    Invoke,
    assert_one_line_error,
    envelope,
)

TOKEN = "s3cret-token"
BEARER = f"Bearer {TOKEN}"
UNLISTED = "127.0.0.1:9999"


def auth(fake: FakeCluster, address: str) -> list[str | None]:
    """The Authorization header of every request ``address`` received, in order."""
    return [r.headers.get("authorization") for r in fake.hits(address)]


# ====================================================================== controllers
class TestControllers:
    def test_listed_controller_gets_the_token(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("--token", TOKEN, "electMaster", "-a", LEADER, "-c", "DefaultCluster", "-bn", "broker-a",
                       "-b", "2", timeout=None)
        assert result.exit_code == 0, result.stderr
        assert auth(fake, LEADER) == [BEARER]

    def test_token_from_the_environment(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getSyncStateSet", "-b", "broker-a", env={"MQCTL_TOKEN": TOKEN,
                                                                "MQCTL_CONTROLLER_ADDR": LEADER})
        assert result.exit_code == 0, result.stderr
        assert auth(fake, LEADER) == [BEARER]

    def test_leader_named_by_a_follower_gets_it_when_a_listed_controller_lists_it_as_peer(
            self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("--token", TOKEN, "electMaster", "-a", FOLLOWER, "-c", "DefaultCluster", "-bn", "broker-a",
                       "-b", "2", timeout=None)
        assert result.exit_code == 0, result.stderr
        assert [(r.address, r.path, r.headers.get("authorization")) for r in fake.requests] == [
            (FOLLOWER, contract.ELECT_MASTER, BEARER),
            (FOLLOWER, contract.METADATA, None),  # which peers the listed controller vouches for
            (LEADER, contract.ELECT_MASTER, BEARER)]

    def test_an_unlisted_leader_hint_does_not_get_it(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.leader_hint = UNLISTED
        fake.override(UNLISTED, contract.ELECT_MASTER,
                      envelope(16, None, "this call needs the cluster's auth token"))
        result = mqctl("--token", TOKEN, "electMaster", "-a", FOLLOWER, "-c", "DefaultCluster", "-bn", "broker-a",
                       "-b", "2", timeout=None)
        line = assert_one_line_error(result, 4)
        assert line == ("Error: controller 127.0.0.1:9999 asks for the auth token, which is sent only to the "
                        "controllers given with -a (or $MQCTL_CONTROLLER_ADDR) and the peers they list; add "
                        "127.0.0.1:9999 to -a [NO_PERMISSION]")
        assert auth(fake, UNLISTED) == [None]

    def test_a_read_still_follows_an_unlisted_leader_without_the_token(self, mqctl: Invoke,
                                                                       fake: FakeCluster) -> None:
        fake.leader_hint = UNLISTED
        fake.override(UNLISTED, contract.SYNC_STATE_DATA, envelope(0, {"brokers": []}))
        result = mqctl("--token", TOKEN, "getSyncStateSet", "-a", FOLLOWER, "-c", "Nothing", timeout=None)
        assert_one_line_error(result, 2, "cluster Nothing has no broker-set registered in the controller")
        assert auth(fake, UNLISTED) == [None]

    def test_no_token_no_peer_lookup(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("electMaster", "-a", FOLLOWER, "-c", "DefaultCluster", "-bn", "broker-a", "-b", "2")
        assert result.exit_code == 0, result.stderr
        assert [r.path for r in fake.requests] == [contract.ELECT_MASTER] * 2
        assert {r.headers.get("authorization") for r in fake.requests} == {None}


# ====================================================================== brokers
class TestBrokers:
    @pytest.mark.parametrize("args", [
        ("getBrokerEpoch", "-b", "broker-a"), ("haStatus", "-b", "broker-a"),
        ("sendMessage", "-t", "TopicTest", "-p", "x", "-b", "broker-a"),
        ("consumeMessage", "-t", "TopicTest", "-b", "broker-a"),
    ], ids=lambda a: a[0])
    def test_brokers_learned_from_the_controller_never_get_it(self, mqctl: Invoke, fake: FakeCluster,
                                                              args: tuple[str, ...]) -> None:
        result = mqctl("--token", TOKEN, *args, timeout=None)
        assert result.exit_code == 0, result.stderr
        assert auth(fake, LEADER) == [BEARER]
        brokers = [r for r in fake.requests if r.address in (MASTER, SLAVE)]
        assert brokers and {r.headers.get("authorization") for r in brokers} == {None}

    def test_broker_addr_gets_it(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("--token", TOKEN, "sendMessage", "-t", "TopicTest", "-p", "x", "--brokerAddr", MASTER,
                       timeout=None)
        assert result.exit_code == 0, result.stderr
        assert auth(fake, MASTER) == [BEARER]

    def test_a_master_named_by_a_learned_slave_does_not_get_it(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.sync_state["broker-a"]["masterAddress"] = SLAVE  # a stale view: the slave names the master
        result = mqctl("--token", TOKEN, "sendMessage", "-t", "TopicTest", "-p", "x", "-b", "broker-a",
                       timeout=None)
        assert result.exit_code == 0, result.stderr
        assert (auth(fake, SLAVE), auth(fake, MASTER)) == ([None], [None])

    def test_a_learned_broker_asking_for_the_token_says_how_to_give_it(self, mqctl: Invoke,
                                                                        fake: FakeCluster) -> None:
        fake.override(MASTER, bc.SEND_MESSAGE, envelope(16, None, "this call needs the auth token"))
        result = mqctl("--token", TOKEN, "sendMessage", "-t", "TopicTest", "-p", "x", "-b", "broker-a",
                       timeout=None)
        line = assert_one_line_error(result, 4)
        assert line == ("Error: broker 127.0.0.1:10911 asks for the auth token, which is sent only to a broker "
                        "address given explicitly: run the command again with --brokerAddr 127.0.0.1:10911 "
                        "[NO_PERMISSION]")


# ====================================================================== the token itself
@pytest.mark.parametrize("token", ["sécret", "two words", "tab\there", "esc\x1b[31m"])
def test_a_token_that_cannot_be_a_header_is_a_usage_error(mqctl: Invoke, fake: FakeCluster, token: str) -> None:
    result = mqctl("--token", token, "electMaster", "-c", "DefaultCluster", "-bn", "broker-a", "-b", "2",
                   timeout=None)
    line = assert_one_line_error(result, 2)
    assert line == ("Error: the auth token (--token or $MQCTL_TOKEN) may hold only visible ASCII characters: no "
                    "spaces, control characters or non-ASCII letters")
    assert fake.requests == []


# ====================================================================== real sockets
class Recorder(ThreadingHTTPServer):
    """A loopback HTTP server answering fixed envelopes and recording each request's Authorization."""

    daemon_threads = True

    def __init__(self, family: socket.AddressFamily, host: str, routes: dict[str, Any]) -> None:
        self.address_family = family
        super().__init__((host, 0), Handler)
        self.routes = routes
        self.seen: list[tuple[str, str | None]] = []

    @property
    def address(self) -> str:
        host, port = self.server_address[:2]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


class Handler(BaseHTTPRequestHandler):
    server: Recorder

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer()

    def _answer(self) -> None:
        path = urlsplit(self.path).path
        self.server.seen.append((path, self.headers.get("Authorization")))
        body = json.dumps(self.server.routes.get(path) or envelope(3, None, "no such route")).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def servers() -> Iterator[tuple[Recorder, Recorder]]:
    """A controller on [::1] that lists a 'broker' on 127.0.0.1 which anyone could have registered."""
    broker = Recorder(socket.AF_INET, "127.0.0.1", {})
    broker.routes[bc.HA_STATUS] = envelope(0, {"brokerAddr": broker.address, "role": "SLAVE",
                                                       "maxOffset": 0, "confirmOffset": 0})
    replica = {"brokerName": "broker-a", "brokerId": 1, "brokerAddress": broker.address, "alive": True}
    controller = Recorder(socket.AF_INET6, "::1", {contract.SYNC_STATE_DATA: envelope(0, {"brokers": [
        {"clusterName": "C", "brokerName": "broker-a", "masterBrokerId": 1, "masterAddress": broker.address,
         "masterEpoch": 1, "syncStateSetEpoch": 1, "inSyncReplicas": [replica], "notInSyncReplicas": []}]})})
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (broker, controller)]
    for thread in threads:
        thread.start()
    try:
        yield controller, broker
    finally:
        for server, thread in zip((broker, controller), threads, strict=True):
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)


def test_over_loopback_a_registered_broker_never_sees_the_token(servers: tuple[Recorder, Recorder]) -> None:
    controller, broker = servers
    result = CliRunner().invoke(cli, ["--timeout", "5", "--token", TOKEN, "haStatus", "-a", controller.address,
                                      "-b", "broker-a", "--format", "json"], env=dict(BASE_ENV))
    assert result.exit_code == 0, result.output
    assert controller.seen == [(contract.SYNC_STATE_DATA, BEARER)]
    assert broker.seen == [(bc.HA_STATUS, None)]
    result = CliRunner().invoke(cli, ["--timeout", "5", "--token", TOKEN, "haStatus", "--brokerAddr",
                                      broker.address, "--format", "json"], env=dict(BASE_ENV))
    assert result.exit_code == 0, result.output
    assert broker.seen[-1] == (bc.HA_STATUS, BEARER)  # the operator named it
