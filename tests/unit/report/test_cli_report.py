"""``mqctl report`` failures that happen before Spark starts: one line, a stable exit code."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from mqctl.cli import cli


def invoke(*args: str, root: tuple[str, ...] = ()) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [*root, "report", *args])
    return result.exit_code, result.output


def test_help_lists_the_options() -> None:
    code, out = invoke("--help")
    assert code == 0
    for option in ("--spark-master", "-a, --controllerAddress", "-c, --clusterName", "--input", "--output",
                   "--as-of", "--format", "--conf", "-v, --verbose"):
        assert option in out


def test_bad_conf_is_a_usage_error(tmp_path: Path) -> None:
    code, out = invoke("--input", str(tmp_path), "--conf", "spark.driver.memory")
    assert code == 2
    assert out.strip().splitlines() == [
        "Error: bad --conf 'spark.driver.memory': expected key=value, e.g. spark.driver.memory=2g"]


def test_unreachable_spark_master(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        code, out = invoke("--input", str(tmp_path), "--spark-master", f"spark://127.0.0.1:{port}")
    assert code == 3
    assert out.startswith(f"Error: Spark master spark://127.0.0.1:{port} is unreachable (127.0.0.1:{port}: ")
    assert len(out.strip().splitlines()) == 1


def test_missing_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    code, out = invoke("--input", str(tmp_path))
    assert code == 1
    assert out.strip().splitlines() == [(
        "Error: mqctl report runs on Spark, which needs Java 17 or 21: no java on PATH and JAVA_HOME is not set "
        "(e.g. apt-get install openjdk-17-jre-headless)")]


def test_unreachable_controller(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        code, out = invoke("-a", f"127.0.0.1:{port}", "--output", str(tmp_path), root=("--timeout", "0.5"))
    assert code == 3 and out.startswith("Error: no controller reachable at")
