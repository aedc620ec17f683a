"""``mqctl report``'s checks that run a program: which Java it finds (a stand-in ``java`` script that prints
a version line), and the command's answer when the controller is unreachable (after the real Java check)."""

from __future__ import annotations

import socket
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from mqctl.cli import cli
from spark_reports.errors import SparkSetupError
from spark_reports.session import check_java

pytestmark = pytest.mark.component


def _fake_java(directory: Path, version_line: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "java"
    script.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n", encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


@pytest.mark.parametrize(("line", "major"), [('openjdk version "11.0.2" 2019-01-15', 11),
                                             ('java version "1.8.0_392"', 8)])
def test_old_java(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, line: str, major: int) -> None:
    _fake_java(tmp_path / "bin", line)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(SparkSetupError, match=f"Spark 4 needs Java 17 or 21, but .* is Java {major}"):
        check_java()


def test_java_17_and_21(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for line, major in (('openjdk version "17.0.15" 2025-04-15', 17), ('openjdk version "21" 2023-09-19', 21)):
        _fake_java(tmp_path / "bin", line)
        monkeypatch.setenv("JAVA_HOME", str(tmp_path))
        assert check_java() == major



def invoke(*args: str, root: tuple[str, ...] = ()) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [*root, "report", *args])
    return result.exit_code, result.output


def test_unreachable_controller(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        code, out = invoke("-a", f"127.0.0.1:{port}", "--output", str(tmp_path), root=("--timeout", "0.5"))
    assert code == 3 and out.startswith("Error: no controller reachable at")
