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


def dataset(root: Path) -> Path:
    """A directory that passes the checks made before Spark starts (events/ and epochs/ with a file)."""
    for table in ("events", "epochs"):
        (root / table).mkdir(parents=True)
        (root / table / f"{table}.jsonl").write_text("")
    return root


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
        code, out = invoke("--input", str(dataset(tmp_path / "in")), "--output", str(tmp_path / "out"),
                           "--spark-master", f"spark://127.0.0.1:{port}")
    assert code == 3
    assert out.startswith(f"Error: Spark master spark://127.0.0.1:{port} is unreachable (127.0.0.1:{port}: ")
    assert len(out.strip().splitlines()) == 1


def test_missing_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    code, out = invoke("--input", str(dataset(tmp_path / "in")), "--output", str(tmp_path / "out"))
    assert code == 1
    assert out.strip().splitlines() == [(
        "Error: mqctl report runs on Spark, which needs Java 17 or 21: no java on PATH and JAVA_HOME is not set "
        "(e.g. apt-get install openjdk-17-jre-headless)")]


# ---------------------------------------------------------------------- paths are checked before Spark starts
@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to go as far as Spark's start-up checks fails the test loudly."""
    def started(*args: object) -> None:
        raise AssertionError("reached Spark's start-up checks")

    monkeypatch.setattr("spark_reports.session.check_java", started)
    monkeypatch.setattr("spark_reports.session.check_master_reachable", started)


@pytest.mark.usefixtures("no_spark")
def test_output_that_cannot_be_created() -> None:
    code, out = invoke("--output", "/proc/mqctl-nope", "-a", "127.0.0.1:1")
    assert (code, out) == (2, ("Error: cannot write the report to /proc/mqctl-nope: /proc does not accept new "
                              "directories\n"))


@pytest.mark.usefixtures("no_spark")
def test_output_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    code, out = invoke("--output", str(tmp_path / "file" / "out"), "-a", "127.0.0.1:1")
    assert (code, out) == (2, (f"Error: cannot write the report to {tmp_path}/file/out: {tmp_path}/file is not a "
                              "directory\n"))


@pytest.mark.usefixtures("no_spark")
def test_missing_input(tmp_path: Path) -> None:
    code, out = invoke("--input", str(tmp_path / "nonexistent"), "--output", str(tmp_path / "out"))
    assert (code, out) == (2, f"Error: no dataset at {tmp_path}/nonexistent: the directory does not exist\n")
    assert not (tmp_path / "out").exists()


@pytest.mark.usefixtures("no_spark")
def test_input_without_epochs(tmp_path: Path) -> None:
    (tmp_path / "in" / "events").mkdir(parents=True)
    (tmp_path / "in" / "events" / "e.jsonl").write_text("")
    code, out = invoke("--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"))
    assert (code, out) == (2, (f"Error: malformed dataset {tmp_path}/in: no epochs/ directory (expected events/ and "
                              "epochs/ holding *.jsonl or *.parquet files)\n"))


@pytest.mark.usefixtures("no_spark")
def test_bad_controller_address_before_anything(tmp_path: Path) -> None:
    code, out = invoke("-a", "::1:9878", "--output", str(tmp_path / "out"))
    assert (code, out) == (2, ("Error: bad controller address '::1:9878': write an IPv6 address in brackets, "
                              "e.g. [::1]:9878\n"))
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def spark_checks_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("spark_reports.session.check_java", lambda: 17)
    monkeypatch.setattr("spark_reports.session.check_master_reachable", lambda master: None)


@pytest.mark.usefixtures("spark_checks_pass")
def test_failed_collect_leaves_nothing_it_created(tmp_path: Path) -> None:
    code, out = invoke("-a", "127.0.0.1:1", "--output", str(tmp_path / "new" / "report"), root=("--timeout", "0.5"))
    assert (code, out) == (3, "Error: no controller reachable at 127.0.0.1:1\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("spark_checks_pass")
def test_failed_collect_keeps_what_was_there(tmp_path: Path) -> None:
    (tmp_path / "old.txt").write_text("mine")
    code, _ = invoke("-a", "127.0.0.1:1", "--output", str(tmp_path), root=("--timeout", "0.5"))
    assert code == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.txt"]
    dataset(tmp_path / "dataset")  # an earlier run's dataset in the same output: not this run's to delete
    code, _ = invoke("-a", "127.0.0.1:1", "--output", str(tmp_path), root=("--timeout", "0.5"))
    assert code == 3
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == [
        "dataset", "dataset/epochs", "dataset/epochs/epochs.jsonl", "dataset/events", "dataset/events/events.jsonl",
        "old.txt"]


@pytest.mark.usefixtures("spark_checks_pass")
def test_default_output_is_removed_after_a_failed_collect(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, _ = invoke("-a", "127.0.0.1:1", root=("--timeout", "0.5"))
    assert code == 3
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("absent,named", [(("pyspark",), "PySpark"), (("pyspark", "matplotlib"),
                                                                     "PySpark and matplotlib")])
def test_without_the_report_extra_it_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                          absent: tuple[str, ...], named: str) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in absent else real(name, *a))
    code, out = invoke("--input", str(dataset(tmp_path / "in")), "--output", str(tmp_path / "out"))
    assert code == 2
    assert out.strip().splitlines() == [
        (f"Error: mqctl report needs {named}, which this install lacks: pip install 'mqctl[report]' "
        "(Java 17 or 21 too)")]
    assert not (tmp_path / "out").exists()  # nothing was started or written
