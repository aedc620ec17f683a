"""Exit codes and one-line errors, controller address resolution, command-name aliases and help."""

from __future__ import annotations

import httpx
import pytest

from services.controller import contract
from tests.unit.cli.conftest import (
    DEAD_CONTROLLER,
    FOLLOWER,
    LEADER,
    FakeCluster,
    Invoke,
    assert_one_line_error,
    envelope,
)

SYNC_PATH = contract.SYNC_STATE_DATA
META_PATH = contract.METADATA
CONFIG_PATH = contract.CONFIG


# ====================================================================== unreachable (3)
class TestUnreachable:
    def test_metadata_from_a_dead_controller(self, mqctl: Invoke) -> None:
        result = mqctl("getControllerMetaData", "-a", DEAD_CONTROLLER, "--format", "mqadmin")
        assert result.stdout == ""
        line = assert_one_line_error(result, 3)
        assert line == "Error: no controller reachable at 127.0.0.1:9858"

    def test_leader_following_command_retries_then_gives_up(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getSyncStateSet", "-a", DEAD_CONTROLLER, "-b", "broker-a", "--format", "mqadmin")
        assert result.stdout == ""
        line = assert_one_line_error(result, 3)
        assert line == "Error: no controller reachable at 127.0.0.1:9858"
        assert len(fake.hits(DEAD_CONTROLLER)) >= 2  # retried within --timeout

    def test_every_listed_node_dead(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.down |= {LEADER, FOLLOWER}
        result = mqctl("electMaster", "-a", f"{LEADER};{FOLLOWER}", "-c", "DefaultCluster", "-bn", "broker-a",
                       "-b", "2", timeout="0.1")
        line = assert_one_line_error(result, 3)
        assert line == "Error: no controller reachable at 127.0.0.1:9878;127.0.0.1:9868"

    def test_read_timeout_on_metadata(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.override(LEADER, META_PATH, lambda request, n: httpx.ReadTimeout("timed out", request=request))
        result = mqctl("getControllerMetaData", "--format", "json")
        assert result.stdout == ""
        assert_one_line_error(result, 3, "127.0.0.1:9878")

    def test_read_timeout_on_a_leader_route(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.override(LEADER, SYNC_PATH, lambda request, n: httpx.ReadTimeout("timed out", request=request))
        result = mqctl("getSyncStateSet", "-b", "broker-a", "--format", "json", timeout="0.1")
        assert result.stdout == ""
        assert_one_line_error(result, 3, "127.0.0.1:9878")

    def test_timeout_then_the_next_node_answers(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.override(LEADER, META_PATH, lambda request, n: httpx.ConnectTimeout("timed out", request=request))
        result = mqctl("getControllerMetaData", "-a", f"{LEADER};{FOLLOWER}", "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert "#ControllerLeaderAddress\t127.0.0.1:9878\n" in result.stdout


# ====================================================================== refused / no leader (4)
class TestRefused:
    def test_no_leader_anywhere(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.leader_hint = None  # the follower answers 2007 without an address
        result = mqctl("getSyncStateSet", "-a", FOLLOWER, "-b", "broker-a", "--format", "mqadmin")
        assert result.stdout == ""
        line = assert_one_line_error(result, 4, "no controller leader is reachable", "[CONTROLLER_NOT_LEADER]")
        assert line == ("Error: no controller leader is reachable (tried 127.0.0.1:9868); the controller group "
                        "may have lost its majority [CONTROLLER_NOT_LEADER]")
        assert len(fake.hits(FOLLOWER, SYNC_PATH)) >= 2  # it kept retrying until --timeout
        assert fake.hits(LEADER) == []

    def test_leader_named_by_the_follower_is_down(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.leader_hint = DEAD_CONTROLLER
        result = mqctl("electMaster", "-a", FOLLOWER, "-c", "DefaultCluster", "-bn", "broker-a", "-b", "2",
                       timeout="0.1")
        line = assert_one_line_error(result, 4, "no controller leader is reachable", "[CONTROLLER_NOT_LEADER]")
        assert "127.0.0.1:9858" in line and "127.0.0.1:9868" in line
        assert fake.hits(DEAD_CONTROLLER, contract.ELECT_MASTER)

    def test_unknown_code_shows_its_number(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.override(LEADER, SYNC_PATH, envelope(4242, None, "from the future"))
        result = mqctl("getSyncStateSet", "-b", "broker-a")
        line = assert_one_line_error(result, 4)
        assert line == "Error: from the future [UNKNOWN_4242]"

    def test_empty_remark_falls_back_to_the_code_name(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.override(LEADER, SYNC_PATH, envelope(2, None, ""))
        result = mqctl("getSyncStateSet", "-b", "broker-a")
        line = assert_one_line_error(result, 4)
        assert line == "Error: SYSTEM_BUSY [SYSTEM_BUSY]"


# ====================================================================== non-JSON answers
class TestNonEnvelopeAnswers:
    """A server answering something that is not an envelope is reported as a SYSTEM_ERROR refusal (exit 4)
    by ControllerClient.request_node / BrokerClient.request."""

    def test_html_on_metadata(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.override(LEADER, META_PATH, httpx.Response(502, text="<html>Bad Gateway</html>"))
        result = mqctl("getControllerMetaData", "--format", "mqadmin")
        assert result.stdout == ""
        line = assert_one_line_error(result, 4)
        assert line == ("Error: 127.0.0.1:9878 answered HTTP 502 without a controller envelope; "
                        "is it a controller? [SYSTEM_ERROR]")

    @pytest.mark.parametrize("response", [
        httpx.Response(200, text="hello"),
        httpx.Response(200, json=["not", "an", "object"]),
        httpx.Response(200, json={"no": "code"}),
        httpx.Response(200, json={"code": None}),
    ], ids=["text", "json-list", "json-without-code", "null-code"])
    def test_leader_route(self, mqctl: Invoke, fake: FakeCluster, response: httpx.Response) -> None:
        fake.override(LEADER, SYNC_PATH, response)
        result = mqctl("getSyncStateSet", "-b", "broker-a", "--format", "mqadmin")
        assert result.stdout == ""
        assert_one_line_error(result, 4, "127.0.0.1:9878 answered HTTP 200 without a controller envelope",
                              "[SYSTEM_ERROR]")


# ====================================================================== usage (2)
class TestUsage:
    @pytest.mark.parametrize("args", [
        ("getControllerMetaData",),
        ("getSyncStateSet", "-b", "broker-a"),
        ("electMaster", "-c", "DefaultCluster", "-bn", "broker-a", "-b", "2"),
        ("cleanBrokerMetadata", "-c", "DefaultCluster", "-bn", "broker-b"),
        ("getControllerConfig",),
        ("updateControllerConfig", "-k", "logLevel", "-v", "INFO"),
        ("getBrokerEpoch", "-b", "broker-a"),
    ], ids=lambda a: a[0])
    def test_bad_controller_address(self, mqctl: Invoke, fake: FakeCluster, args: tuple[str, ...]) -> None:
        result = mqctl(*args, "-a", "not-an-address")
        assert result.stdout == ""
        line = assert_one_line_error(result, 2)
        assert line == ("Error: bad controller address 'not-an-address': expected host:port, e.g. 127.0.0.1:9878 or "
                        "[::1]:9878")
        assert fake.requests == []

    @pytest.mark.parametrize("address", ["127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:", ":9878",
                                         f"{LEADER};bogus"])
    def test_bad_port_or_host(self, mqctl: Invoke, fake: FakeCluster, address: str) -> None:
        result = mqctl("getSyncStateSet", "-a", address, "-b", "broker-a")
        assert_one_line_error(result, 2, "bad controller address")
        assert fake.requests == []

    def test_tolerated_address_spellings(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getControllerMetaData", "-a", " http://127.0.0.1:9858/ , http://127.0.0.1:9868/ ",
                       "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert [r.address for r in fake.requests] == [DEAD_CONTROLLER, FOLLOWER]

    def test_unknown_format(self, mqctl: Invoke) -> None:
        result = mqctl("getControllerMetaData", "--format", "yaml")
        assert result.exit_code == 2
        assert "Invalid value for '--format'" in result.stderr

    def test_timeout_out_of_range(self, mqctl: Invoke) -> None:
        result = mqctl("--timeout", "0.01", "getControllerMetaData", timeout=None)
        assert result.exit_code == 2
        assert "Invalid value for '--timeout'" in result.stderr

    def test_interval_out_of_range(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getSyncStateSet", "-b", "broker-a", "-i", "0")
        assert result.exit_code == 2
        assert "Invalid value for '-i'" in result.stderr
        assert fake.requests == []

    def test_unknown_command(self, mqctl: Invoke) -> None:
        result = mqctl("getNothing")
        assert result.exit_code == 2
        assert "No such command 'getNothing'" in result.stderr
        assert "Traceback" not in result.stderr


# ====================================================================== unexpected errors, debug, Ctrl-C
class TestUnexpected:
    def test_unexpected_error_is_one_line_exit_1(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.override(LEADER, CONFIG_PATH, lambda request, n: KeyError("config"))
        result = mqctl("getControllerConfig", "-a", LEADER)
        assert result.stdout == ""
        line = assert_one_line_error(result, 1)
        assert line == "Error: unexpected KeyError: 'config' (set MQCTL_DEBUG=1 for a traceback)"

    @pytest.mark.parametrize("command,path,model,field", [
        (("getSyncStateSet", "-b", "broker-a"), SYNC_PATH, "SyncStateData", "brokers"),
        (("getControllerConfig", "-a", LEADER), CONFIG_PATH, "ControllerConfig", "config"),
    ])
    def test_an_answer_that_breaks_the_contract_is_a_refusal_naming_the_field(
            self, mqctl: Invoke, fake: FakeCluster, command: tuple[str, ...], path: str, model: str,
            field: str) -> None:
        fake.override(LEADER, path, envelope(0, {}))  # SUCCESS without the answer's data
        result = mqctl(*command)
        line = assert_one_line_error(result, 4)
        assert f"controller {LEADER}'s answer is malformed ({model}: {field}: Field required) [SYSTEM_ERROR]" in line

    def test_exception_raised_by_the_transport(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.override(LEADER, META_PATH, lambda request, n: RuntimeError("boom"))
        result = mqctl("getControllerMetaData")
        line = assert_one_line_error(result, 1)
        assert line == "Error: unexpected RuntimeError: boom (set MQCTL_DEBUG=1 for a traceback)"

    def test_mqctl_debug_prints_the_traceback(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.override(LEADER, CONFIG_PATH, lambda request, n: KeyError("config"))
        result = mqctl("getControllerConfig", "-a", LEADER, env={"MQCTL_DEBUG": "1"})
        assert result.exit_code == 1
        err = result.stderr
        assert err.startswith("Traceback (most recent call last):\n")
        assert "KeyError: 'config'\n" in err
        assert err.rstrip("\n").split("\n")[-1] == ("Error: unexpected KeyError: 'config' "
                                                      "(set MQCTL_DEBUG=1 for a traceback)")

    def test_mqctl_debug_keeps_the_exit_code_of_expected_errors(self, mqctl: Invoke) -> None:
        result = mqctl("electMaster", "-c", "DefaultCluster", "-bn", "broker-a", "-b", "1",
                       env={"MQCTL_DEBUG": "1"})
        assert result.exit_code == 4
        assert "Traceback (most recent call last):" in result.stderr
        assert result.stderr.rstrip("\n").endswith("[CONTROLLER_MASTER_STILL_EXIST]")

    def test_ctrl_c_outside_watch_mode_is_130(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.override(LEADER, SYNC_PATH, lambda request, n: KeyboardInterrupt())
        result = mqctl("getSyncStateSet", "-b", "broker-a")
        assert result.exit_code == 130
        assert result.stderr == "Interrupted.\n"


# ====================================================================== $MQCTL_CONTROLLER_ADDR
class TestControllerAddressFallback:
    def test_default_address(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getSyncStateSet", "-b", "broker-a", "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert [r.address for r in fake.requests] == [LEADER]

    def test_environment_variable(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getSyncStateSet", "-b", "broker-a", "--format", "mqadmin",
                       env={"MQCTL_CONTROLLER_ADDR": FOLLOWER})
        assert result.exit_code == 0, result.stderr
        assert "#brokerName\tbroker-a\n" in result.stdout
        assert [r.address for r in fake.requests] == [FOLLOWER, LEADER]

    def test_environment_variable_with_several_nodes(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getControllerConfig", "--format", "json",
                       env={"MQCTL_CONTROLLER_ADDR": f"{FOLLOWER};{LEADER}"})
        assert result.exit_code == 0, result.stderr
        assert [r.address for r in fake.requests] == [FOLLOWER, LEADER]

    def test_empty_option_falls_back_to_the_environment(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getControllerMetaData", "-a", "", env={"MQCTL_CONTROLLER_ADDR": FOLLOWER})
        assert result.exit_code == 0, result.stderr
        assert [r.address for r in fake.requests] == [FOLLOWER]

    def test_option_wins_over_the_environment(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getControllerMetaData", "-a", LEADER, env={"MQCTL_CONTROLLER_ADDR": FOLLOWER})
        assert result.exit_code == 0, result.stderr
        assert [r.address for r in fake.requests] == [LEADER]

    def test_bad_environment_variable_is_usage(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getControllerMetaData", env={"MQCTL_CONTROLLER_ADDR": "not-an-address"})
        assert_one_line_error(result, 2, "bad controller address 'not-an-address'")
        assert fake.requests == []


# ====================================================================== aliases and help
class TestNamesAndHelp:
    @pytest.mark.parametrize("name", ["get-sync-state-set", "GETSYNCSTATESET", "getsyncstateset",
                                      "get_sync_state_set", "GET_SYNC_STATE_SET", "Get-Sync-State-Set"])
    def test_aliases_and_case(self, mqctl: Invoke, name: str) -> None:
        canonical = mqctl("getSyncStateSet", "-b", "broker-a", "--format", "mqadmin")
        aliased = mqctl(name, "-b", "broker-a", "--format", "mqadmin")
        assert aliased.exit_code == 0, aliased.stderr
        assert aliased.stdout == canonical.stdout
        assert aliased.stdout.startswith("\n#brokerName\tbroker-a\n")

    @pytest.mark.parametrize("name", ["get-controller-meta-data", "GET_CONTROLLER_META_DATA",
                                      "getcontrollermetadata"])
    def test_documented_metadata_aliases(self, mqctl: Invoke, name: str) -> None:
        result = mqctl(name, "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout.startswith("\n#ControllerGroup\tDefaultControllerGroup\n")

    def test_help_for_a_command_shows_its_examples(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("help", "getSyncStateSet")
        assert result.exit_code == 0, result.stderr
        out = result.stdout
        assert out.startswith("Usage: mqctl getSyncStateSet [OPTIONS]\n")
        assert "Show master, epochs and SyncStateSet of broker-sets" in out
        assert ("  Examples:\n"
                "    mqctl getSyncStateSet -a 127.0.0.1:9878 -b broker-a\n"
                "    mqctl getSyncStateSet -c DefaultCluster --format mqadmin\n"
                "    mqctl getSyncStateSet -b broker-a -i 2 --count 5\n") in out
        for option in ("--controllerAddress", "--brokerName", "--clusterName", "--interval", "--count",
                       "--format"):
            assert option in out
        assert fake.requests == []

    @pytest.mark.parametrize("name", ["getSyncStateSet", "get-sync-state-set", "GETSYNCSTATESET"])
    def test_help_is_the_same_as_dash_dash_help(self, mqctl: Invoke, name: str) -> None:
        via_help = mqctl("help", name)
        via_option = mqctl("getSyncStateSet", "--help")
        assert via_help.exit_code == via_option.exit_code == 0
        assert via_help.stdout == via_option.stdout

    def test_short_help_option(self, mqctl: Invoke) -> None:
        assert mqctl("getSyncStateSet", "-h").stdout == mqctl("getSyncStateSet", "--help").stdout

    def test_help_without_command_is_the_root_help(self, mqctl: Invoke) -> None:
        result = mqctl("help")
        assert result.exit_code == 0
        assert result.stdout == mqctl("--help").stdout
        assert "getSyncStateSet (get-sync-state-set)" in result.stdout
        assert "electMaster (elect-master)" in result.stdout

    def test_help_for_an_unknown_command(self, mqctl: Invoke) -> None:
        result = mqctl("help", "nope")
        assert result.exit_code == 2
        assert result.stdout == ""
        assert result.stderr.rstrip("\n").endswith("Error: The sub command nope not exist.")


# ====================================================================== regressions
@pytest.mark.parametrize("address", [LEADER, "127.0.0.1:10911"], ids=["controller-refuses", "broker-address"])
def test_get_controller_config_refused_by_the_server_exits_4(mqctl: Invoke, fake: FakeCluster,
                                                             address: str) -> None:
    # the fake broker at 127.0.0.1:10911 answers an unknown route like the real one: HTTP 404,
    # code 3 REQUEST_CODE_NOT_SUPPORTED, remark "no such route: GET /v1/controller/config", data null
    fake.override(LEADER, contract.CONFIG, envelope(3, None, "no such route: GET /v1/controller/config"))
    result = mqctl("getControllerConfig", "-a", address, "--format", "mqadmin")
    assert result.stdout == ""
    line = assert_one_line_error(result, 4)
    assert line == "Error: no such route: GET /v1/controller/config [REQUEST_CODE_NOT_SUPPORTED]"
