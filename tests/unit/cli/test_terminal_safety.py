"""Text from users and servers reaches the terminal as data: no rich markup, no :emoji: codes, and no
control characters (ESC sequences, newlines that forge lines, bidi overrides), in every format but json,
which stays valid JSON with the characters escaped by JSON itself."""

from __future__ import annotations

import inspect
import io
import json

import pytest
from rich.console import Console

from mqctl import render, render_broker, render_consume, render_report
from mqctl.app import App
from mqctl.terminal import clean, printable, printable_layout
from services.controller import contract
from services.remoting.message import PulledMessage, SocketAddress
from tests.unit.cli.conftest import (
    MASTER,
    SLAVE,
    FakeCluster,
    Invoke,
    assert_one_line_error,
    envelope,
)
from tests.unit.cli.fake_remoting import FakeRemotingBroker

#: markup, an emoji code, a colour, a window-title sequence ended by BEL, a newline, a bidi override
HOSTILE = "[bold]x[/] :smile: \x1b[31mred\x1b]0;pwned\x07\nline2\u202egnp.exe"
SHOWN = "[bold]x[/] :smile: \\x1b[31mred\\x1b]0;pwned\\x07\\nline2\\u202egnp.exe"


def assert_inert(text: str) -> None:
    """Nothing in ``text`` acts on a terminal or was interpreted."""
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "😄" not in text


# ====================================================================== the functions
def test_printable_escapes_every_control_character() -> None:
    assert printable(HOSTILE) == SHOWN
    assert printable("\x00\x7f\x9b\t\r") == "\\x00\\x7f\\x9b\\t\\r"
    assert printable("broker-a 127.0.0.1:10911 é ü 中") == "broker-a 127.0.0.1:10911 é ü 中"


def test_printable_layout_keeps_only_newlines_and_tabs() -> None:
    assert printable_layout("#k\tv\x1b[2J\n") == "#k\tv\\x1b[2J\n"


def test_clean_reaches_keys_and_nested_values() -> None:
    assert clean({"\x1b": [("\x07", 1)], "n": None}) == {"\\x1b": [("\\x07", 1)], "n": None}


def test_every_renderer_is_terminal_safe() -> None:
    """A new show_* function cannot forget it: the rule is structural."""
    renderers = [(module.__name__, name, fn) for module in (render, render_broker, render_consume, render_report)
                 for name, fn in inspect.getmembers(module, inspect.isfunction)
                 if name.startswith("show_") and fn.__module__ == module.__name__]
    assert len(renderers) >= 11
    assert [f"{m}.{n}" for m, n, fn in renderers if not getattr(fn, "terminal_safe", False)] == []


def test_app_messages() -> None:
    out, err = io.StringIO(), io.StringIO()
    app = App(out=Console(file=out, width=200, markup=False, emoji=False), err=Console(file=err, width=200))
    app.warn(HOSTILE)
    app.info(HOSTILE)
    app.error(HOSTILE)
    assert err.getvalue() == f"Warning: {SHOWN}\n{SHOWN}\nError: {SHOWN}\n"


# ====================================================================== server data
class TestServerData:
    @pytest.fixture(autouse=True)
    def hostile_master(self, fake: FakeCluster) -> None:
        bs = fake.sync_state["broker-a"]
        bs["masterAddress"] = HOSTILE
        bs["inSyncReplicas"][0]["brokerAddress"] = HOSTILE

    def test_mqadmin(self, mqctl: Invoke) -> None:
        result = mqctl("getSyncStateSet", "-c", "DefaultCluster", "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert f"\n#MasterAddr\t{SHOWN}\n#MasterEpoch\t3\n" in result.stdout
        assert f"brokerAddress='{SHOWN}', alive=true}}\n" in result.stdout
        assert_inert(result.stdout)

    def test_table(self, mqctl: Invoke) -> None:
        result = mqctl("--timeout", "0.5", "getSyncStateSet", "-c", "DefaultCluster", env={"COLUMNS": "400"},
                       timeout=None)
        assert result.exit_code == 0, result.stderr
        assert f"DefaultCluster/broker-a  master=1 ({SHOWN})  masterEpoch=3" in result.stdout
        assert f"│ 1         │ {SHOWN} │ master │" in result.stdout
        assert_inert(result.stdout)

    def test_json_keeps_the_value_escaped_by_json(self, mqctl: Invoke) -> None:
        result = mqctl("getSyncStateSet", "-c", "DefaultCluster", "--format", "json")
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout)["brokers"][0]["masterAddress"] == HOSTILE
        assert '"masterAddress": "[bold]x[/] :smile: \\u001b[31mred\\u001b]0;pwned\\u0007\\nline2\\u202egnp.exe"' \
            in result.stdout
        assert_inert(result.stdout)

    def test_remark_in_the_error_line(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.override("127.0.0.1:9878", contract.ELECT_MASTER, envelope(2012, None, HOSTILE))
        result = mqctl("electMaster", "-c", "DefaultCluster", "-bn", "broker-a", "-b", "2")
        line = assert_one_line_error(result, 4)
        assert line == f"Error: {SHOWN} [CONTROLLER_ELECT_MASTER_FAILED]"
        assert_inert(result.stderr)

    def test_ha_status_table(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.sync_state["broker-a"]["inSyncReplicas"][0]["brokerAddress"] = MASTER
        fake.ha_status[MASTER]["slaves"][0]["slaveAddress"] = "\x1b[2J:smile:"
        fake.ha_status[SLAVE].update(masterAddress=HOSTILE, error=HOSTILE)
        result = mqctl("haStatus", "-b", "broker-a", env={"COLUMNS": "400"})
        assert result.exit_code == 0, result.stderr
        assert "│ 2     │ \\x1b[2J:smile: │" in result.stdout
        assert f"  replicating from {SHOWN} (TRANSFER)  ERROR: {SHOWN}\n" in result.stdout
        assert_inert(result.stdout)

    def test_message_bodies(self, mqctl: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
        message = PulledMessage("TopicTest", 0, 0, 0, b"a\nb\x1b[2J", {"KEYS": ":smile:", "TAGS": "[red]t\t"}, 0,
                                SocketAddress.parse("127.0.0.1", 10911))
        broker = FakeRemotingBroker({"TopicTest": {0: [message]}})
        monkeypatch.setattr("mqctl.commands.consume.BlockingRemoting", broker.client)
        result = mqctl("consumeMessage", "-t", "TopicTest", "-q", "0", "--brokerAddr", MASTER, "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert "TAGS=[red]t\\t, KEYS=:smile:" in result.stdout
        assert " BODY: a\\nb\\x1b[2J\n" in result.stdout
        assert_inert(result.stdout)

    def test_report_tables(self) -> None:
        out = io.StringIO()
        app = App(out=Console(file=out, width=300, markup=False, emoji=False))
        group = {"clusterName": HOSTILE, "brokerName": ":smile:", "failoverRank": 1, "currentMasterBrokerId": 1,
                 "currentMasterEpoch": 2, "masterEpochs": 2, "failovers": 1, "uncleanElections": 0,
                 "adminElections": 0, "failedElections": 0, "meanTenureMs": 1, "maxTenureMs": 1,
                 "currentTenureMs": 1, "replicas": 3, "shrinkCount": 0, "expandCount": 0, "underReplicatedMs": 0,
                 "divergentEpochs": []}
        cluster = {"clusterNames": [HOSTILE], "groups": 1, "replicas": 3, "masterEpochs": 2, "failovers": 1,
                   "uncleanElections": 0, "adminElections": 0, "failedElections": 0, "shrinkCount": 0,
                   "expandCount": 0, "divergentEpochs": 0, "underReplicatedMs": 0,
                   "failoverRanking": [{"clusterName": HOSTILE, "brokerName": ":smile:", "failovers": 1}]}
        render_report.show_report(app, "table", {"asOf": 0, "groups": [group], "cluster": cluster})
        assert f"{SHOWN}/:smile: (1)" in out.getvalue()
        assert_inert(out.getvalue())


# ====================================================================== user input
class TestUserInput:
    def test_unknown_broker_name_in_the_error_line(self, mqctl: Invoke) -> None:
        result = mqctl("getSyncStateSet", "-b", HOSTILE)
        line = assert_one_line_error(result, 2)
        assert line == f"Error: broker-set {SHOWN} is not known to the controller"
        assert_inert(result.stderr)

    def test_emoji_code_in_a_bad_address(self, mqctl: Invoke) -> None:
        result = mqctl("getControllerMetaData", "-a", "a:b:c")
        line = assert_one_line_error(result, 2)
        assert line == "Error: bad controller address 'a:b:c': expected host:port, e.g. 127.0.0.1:9878 or [::1]:9878"

    def test_click_errors(self, mqctl: Invoke) -> None:
        result = mqctl("getControllerMetaData", "\x1b[31mred")
        assert result.exit_code == 2
        assert result.stderr.endswith("Error: Got unexpected extra argument (\\x1b[31mred)\n")
        result = mqctl("--\x1b]0;x\x07")
        assert result.exit_code == 2
        assert result.stderr.endswith("Error: No such option '--\\x1b]0;x\\x07'.\n")

    def test_updated_config_echo(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.override("127.0.0.1:9878", contract.CONFIG, envelope(0, {"config": {}}))
        result = mqctl("updateControllerConfig", "-a", "127.0.0.1:9878", "-k", "logLevel", "-v", HOSTILE,
                       "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == f"update controller config success![127.0.0.1:9878]\nlogLevel : {SHOWN}\n"
