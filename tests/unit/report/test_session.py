"""Session settings and the checks made before any JVM starts (no Spark needed)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from spark_reports.errors import MasterUnreachableError, SettingError, SparkSetupError
from spark_reports.session import (
    SessionOptions,
    check_java,
    check_master_reachable,
    effective_conf,
    is_local_master,
    is_loopback_master,
    package_zip,
    parse_conf,
    spark_defaults_keys,
    standalone_hosts,
)


def test_parse_conf() -> None:
    assert parse_conf(["spark.a=1", " spark.b = x=y "]) == {"spark.a": "1", "spark.b": "x=y"}
    for bad in ("spark.a", "=1"):
        with pytest.raises(SettingError, match="expected key=value"):
            parse_conf([bad])


@pytest.mark.parametrize(("master", "local", "loopback"), [
    ("local[*]", True, True), ("local", True, True), ("local[2,3]", True, True),
    ("spark://127.0.0.1:7077", False, True), ("spark://localhost:7077,127.0.0.2:7078", False, True),
    ("spark://10.1.2.3:7077", False, False), ("yarn", False, False), (None, False, False),
])
def test_master_kinds(master: str | None, local: bool, loopback: bool) -> None:
    assert (is_local_master(master), is_loopback_master(master)) == (local, loopback)


def test_standalone_hosts() -> None:
    assert standalone_hosts("spark://a:1,b:2") == [("a", 1), ("b", 2)]
    assert standalone_hosts("k8s://https://x:443") == []
    with pytest.raises(SettingError, match="expected spark://host:port"):
        standalone_hosts("spark://nohost")


def test_effective_conf_defaults_and_overrides(tmp_path: Path) -> None:
    log4j = tmp_path / "log4j2.properties"
    conf = effective_conf(SessionOptions(master="local[*]", small_input=True, conf={
        "spark.ui.enabled": "true", "spark.driver.extraJavaOptions": "-Dx=1"}), log4j)
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf["spark.ui.enabled"] == "true"  # the user's setting wins
    assert conf["spark.driver.extraJavaOptions"] == (
        f"-Dlog4j2.configurationFile=file:{log4j} -XX:TieredStopAtLevel=1 -Dx=1")  # theirs last: theirs win
    remote = effective_conf(SessionOptions(master="spark://10.0.0.1:7077", small_input=True), None)
    assert "spark.driver.host" not in remote
    assert remote["spark.driver.extraJavaOptions"] == "-XX:TieredStopAtLevel=1"
    large = effective_conf(SessionOptions(master="local[*]"), None)  # a long job: C2 pays for itself
    assert "spark.driver.extraJavaOptions" not in large
    submitted = effective_conf(SessionOptions(master=None, small_input=True), None, {"spark.master"})
    assert "spark.driver.extraJavaOptions" not in submitted  # spark-submit's JVM is already running
    preset = effective_conf(SessionOptions(master="local[*]", small_input=True), None, {"spark.driver.extraJavaOptions"})
    assert "spark.driver.extraJavaOptions" not in preset  # spark-defaults.conf's options stay whole


def test_no_java(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SparkSetupError, match="no java on PATH and JAVA_HOME is not set"):
        check_java()


def test_java_home_without_java(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(SparkSetupError, match="does not exist"):
        check_java()


def test_unreachable_master() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound but not listening: connections are refused
        with pytest.raises(MasterUnreachableError, match=f"Spark master spark://127.0.0.1:{port} is unreachable"):
            check_master_reachable(f"spark://127.0.0.1:{port}", timeout=2)
    check_master_reachable("local[*]")  # nothing to check


def test_package_zip(tmp_path: Path) -> None:
    import zipfile

    names = zipfile.ZipFile(package_zip(tmp_path)).namelist()
    assert "spark_reports/jobs/epoch_history.py" in names and "spark_reports/session.py" in names
    assert all(n.startswith("spark_reports/") and n.endswith(".py") for n in names)
    assert os.path.getsize(tmp_path / "spark_reports.zip") < 200_000


def test_spark_defaults_conf_keeps_its_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "spark-defaults.conf").write_text(
        "# mine\nspark.ui.enabled  true\nspark.sql.session.timeZone=Europe/Paris\n\n", encoding="utf-8")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    preset = spark_defaults_keys()
    assert preset == {"spark.ui.enabled", "spark.sql.session.timeZone"}
    conf = effective_conf(SessionOptions(master="local[2]", conf={"spark.ui.enabled": "false"}), None, preset)
    assert "spark.sql.session.timeZone" not in conf  # left to spark-defaults.conf
    assert conf["spark.ui.enabled"] == "false"  # --conf always wins
    assert conf["spark.ui.showConsoleProgress"] == "false"


class FakeThrowable:
    def __init__(self, message: str, cause: FakeThrowable | None = None) -> None:
        self.message, self.cause = message, cause

    def getMessage(self) -> str:
        return self.message

    def getCause(self) -> FakeThrowable | None:
        return self.cause


def test_spark_messages_walk_the_java_causes() -> None:
    from spark_reports.errors import spark_messages

    error = RuntimeError("An error occurred while calling o45.count.\n: org.apache.spark.SparkException: "
                         "[FAILED_READ_FILE.NO_HINT] Encountered error while reading file f.jsonl.  SQLSTATE: KD001\n"
                         "\tat org.apache.spark.X")
    error.java_exception = FakeThrowable(  # type: ignore[attr-defined]
        "[FAILED_READ_FILE.NO_HINT] Encountered error while reading file f.jsonl.  SQLSTATE: KD001",
        FakeThrowable("Unexpected character ('o')\n at [Source: x]"))
    assert spark_messages(error) == ["[FAILED_READ_FILE.NO_HINT] Encountered error while reading file f.jsonl.",
                                     "Unexpected character ('o')"]
    assert spark_messages(RuntimeError("")) == ["RuntimeError"]
