"""Addresses: what an operator may write (names, IPv4, bracketed IPv6), what a server may report, and how
URLs are built from them. A malformed address given by the operator is a usage error naming it."""

from __future__ import annotations

import re

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.broker import contract as bc
from services.common.controller_client import http_url, parse_addresses, split_address
from services.common.errors import AddressError, UsageError
from services.controller import contract
from tests.support.examples import examples
from tests.unit.cli.conftest import FakeCluster, Invoke, assert_one_line_error, envelope, initial_sync_state

META_PATH = contract.METADATA
SYNC_PATH = contract.SYNC_STATE_DATA
EXAMPLE = "e.g. 127.0.0.1:9878 or [::1]:9878"


# ====================================================================== parsing
@pytest.mark.parametrize("spec", [
    "127.0.0.1:9878", "localhost:1", "ctl-1.example.com:65535", "my_host:9878", "host.:80", "127.0.0.1:09878",
    "[::1]:9878", "[2001:db8::7]:10911", "[::ffff:127.0.0.1]:1",
])
def test_valid_addresses_are_kept_as_written(spec: str) -> None:
    assert parse_addresses(spec) == [spec]


def test_lists_and_tolerated_spellings_are_unchanged() -> None:
    assert parse_addresses(" http://127.0.0.1:9878/ ; [::1]:9868,https://h:1/ ") == [
        "127.0.0.1:9878", "[::1]:9868", "h:1"]


@pytest.mark.parametrize(("spec", "problem"), [
    ("::1:19878", "write an IPv6 address in brackets, e.g. [::1]:19878"),
    ("2001:db8::7:10911", "write an IPv6 address in brackets, e.g. [2001:db8::7]:10911"),
    ("a:b:c", f"expected host:port, {EXAMPLE}"),
    ("not-an-address", f"expected host:port, {EXAMPLE}"),
    ("[::1]", f"expected [ipv6]:port, {EXAMPLE}"),
    ("[::1]9878", f"expected [ipv6]:port, {EXAMPLE}"),
    ("[nope]:9878", "'nope' is not an IPv6 address"),
    ("[127.0.0.1]:9878", "'127.0.0.1' is not an IPv6 address"),
    ("[fe80::1%eth0]:80", "IPv6 zone ids (%eth0) are not supported"),
    ("999.1.1.1:9878", "'999.1.1.1' is not an IPv4 address"),
    ("010.0.0.1:9878", "'010.0.0.1' is not an IPv4 address"),
    ("bad addr:1", f"a host name holds only letters, digits, '.', '-' and '_' ({EXAMPLE})"),
    ("user@host:1", f"a host name holds only letters, digits, '.', '-' and '_' ({EXAMPLE})"),
    ("host/path:1", f"a host name holds only letters, digits, '.', '-' and '_' ({EXAMPLE})"),
    ("héllo:1", f"a host name holds only letters, digits, '.', '-' and '_' ({EXAMPLE})"),
    ("host:0", f"the port must be a number from 1 to 65535 ({EXAMPLE})"),
    ("host:65536", f"the port must be a number from 1 to 65535 ({EXAMPLE})"),
    ("host:１２", f"the port must be a number from 1 to 65535 ({EXAMPLE})"),  # fullwidth digits
    ("host:+1", f"the port must be a number from 1 to 65535 ({EXAMPLE})"),
])
def test_malformed_addresses_name_the_problem(spec: str, problem: str) -> None:
    with pytest.raises(AddressError) as caught:
        parse_addresses(spec)
    assert isinstance(caught.value, UsageError)
    assert caught.value.remark == f"bad controller address {spec!r}: {problem}"


def test_a_server_may_report_an_unbracketed_ipv6_address() -> None:
    assert split_address("::1:10911", lenient=True) == ("::1", 10911)
    assert http_url("::1:10911", bc.HA_STATUS) == "http://[::1]:10911/v1/broker/haStatus"
    assert http_url("[::1]:10911", "/x") == "http://[::1]:10911/x"
    with pytest.raises(AddressError, match=re.escape("bad broker address 'evil.example/x?:1': a host name")):
        http_url("evil.example/x?:1", "/x", "broker")


# ====================================================================== on the command line
class TestCommandLine:
    def test_unbracketed_ipv6_is_a_usage_error(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getControllerMetaData", "-a", "::1:19878")
        assert result.stdout == ""
        line = assert_one_line_error(result, 2)
        assert line == ("Error: bad controller address '::1:19878': write an IPv6 address in brackets, "
                        "e.g. [::1]:19878")
        assert fake.requests == []

    def test_bracketed_ipv6_controller(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.override("[::1]:9878", META_PATH, envelope(0, {
            "group": "G", "controllerLeaderId": "n0", "controllerLeaderAddress": "[::1]:9878",
            "peers": ["n0:[::1]:9878"]}))
        result = mqctl("getControllerMetaData", "-a", "[::1]:9878", "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == ("\n#ControllerGroup\tG\n#ControllerLeaderId\tn0\n#ControllerLeaderAddress\t[::1]:9878"
                                 "\n#Peer:\tn0:[::1]:9878\n")
        assert [r.url for r in fake.requests] == ["http://[::1]:9878/v1/controller/metadata"]

    @pytest.mark.parametrize("reported", ["[::1]:10911", "::1:10911"])
    def test_ipv6_broker_addresses_from_the_controller(self, mqctl: Invoke, fake: FakeCluster,
                                                       reported: str) -> None:
        bs = fake.sync_state["broker-a"]
        bs["inSyncReplicas"][0]["brokerAddress"] = reported
        bs["notInSyncReplicas"] = []
        fake.override("[::1]:10911", bc.EPOCH_CACHE, envelope(0, {
            "role": "MASTER", "epochEntries": [], "maxOffset": 0, "confirmOffset": 0}))
        result = mqctl("getBrokerEpoch", "-b", "broker-a", "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == (f"\n#clusterName\tDefaultCluster\n#brokerName\tbroker-a\n#brokerAddr\t{reported}"
                                 "\n#brokerId\t0\n")
        assert fake.requests[-1].url == "http://[::1]:10911/v1/broker/epochCache"

    def test_ipv6_broker_addr(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.override("[::1]:10911", bc.HA_STATUS, envelope(0, {
            "brokerAddr": "[::1]:10911", "role": "SLAVE", "maxOffset": 1, "confirmOffset": 1}))
        result = mqctl("haStatus", "--brokerAddr", "[::1]:10911", "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert [r.url for r in fake.requests] == ["http://[::1]:10911/v1/broker/haStatus"]

    @pytest.mark.parametrize("args", [
        ("haStatus",), ("sendMessage", "-t", "T", "-p", "x"), ("consumeMessage", "-t", "T", "-q", "0"),
    ], ids=lambda a: a[0])
    def test_bad_broker_addr_is_a_usage_error(self, mqctl: Invoke, fake: FakeCluster,
                                              args: tuple[str, ...]) -> None:
        result = mqctl(*args, "--brokerAddr", "bad addr")
        assert result.stdout == ""
        line = assert_one_line_error(result, 2)
        assert line == f"Error: bad broker address 'bad addr': expected host:port, {EXAMPLE}"
        assert fake.requests == []

    def test_malformed_master_address_from_the_controller(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.sync_state["broker-a"]["masterAddress"] = "evil.example/steal?x=:80"
        result = mqctl("sendMessage", "-t", "T", "-p", "x", "-b", "broker-a")
        line = assert_one_line_error(result, 1)
        assert line == ("Error: the controller lists 'evil.example/steal?x=:80' as the master of broker-a, which "
                        "is not host:port; give the master's address with --brokerAddr")
        assert [r.path for r in fake.requests] == [SYNC_PATH]

    def test_malformed_replica_address_is_a_row_error(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.sync_state = initial_sync_state()
        fake.sync_state["broker-a"]["notInSyncReplicas"][0]["brokerAddress"] = "a b:1"
        result = mqctl("haStatus", "-b", "broker-a", "--format", "json")
        assert '"error": "bad broker address \'a b:1\': a host name holds only' in result.stdout
        assert_one_line_error(result, 3, "no status from broker a b:1")

    def test_malformed_leader_hint_is_skipped(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.leader_hint = "http://evil/:1"
        result = mqctl("getSyncStateSet", "-a", "127.0.0.1:9868", "-b", "broker-a", timeout="0.1")
        line = assert_one_line_error(result, 4, "[CONTROLLER_NOT_LEADER]")
        assert line.startswith("Error: no controller leader is reachable (tried ")
        assert {r.address for r in fake.requests} == {"127.0.0.1:9868"}


# ====================================================================== any text
@settings(max_examples=examples(400), deadline=None)
@given(st.text(max_size=40) | st.from_regex(r"\[?[0-9a-fA-F:.%]{0,20}\]?:[0-9+]{0,6}", fullmatch=True)
       | st.from_regex(r"[0-9]{1,4}(\.[0-9]{1,4}){2,4}:[0-9]{1,5}", fullmatch=True))
def test_any_text_is_an_address_or_a_usage_error(text: str) -> None:
    """Whatever the operator types: an address whose URL goes to exactly that host and port, or a usage
    error; never another exception, and never a URL that httpx reads differently (user info, a path)."""
    try:
        addresses = parse_addresses(text or "x")
    except UsageError:
        return
    for address in addresses:
        host, port = split_address(address, lenient=True)
        url = httpx.URL(http_url(address, contract.METADATA))
        assert (url.host.lower(), url.port or 80, url.path, url.userinfo) == (
            host.lower(), port, contract.METADATA, b"")
