"""The driver JVM's class-data-sharing archive: naming, when it is used or written, and that only an
archive a JVM starts with is ever kept (a truncated one crashes the JVM). The last tests run a real JVM."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from spark_reports import cds, session
from spark_reports.errors import SparkSetupError
from spark_reports.session import SessionOptions, class_archive, effective_conf, java_command


def jars(tmp_path: Path, *names: str) -> Path:
    directory = tmp_path / "jars"
    directory.mkdir(exist_ok=True)
    for name in names:
        (directory / name).write_bytes(b"x" * len(name))
    return directory


def test_the_name_follows_java_and_spark(tmp_path: Path) -> None:
    spark = jars(tmp_path, "spark-core.jar")
    name = cds.archive_name("/usr/bin/java", 'openjdk version "17.0.15"', spark)
    assert name.startswith("spark-") and name.endswith(".jsa")
    assert cds.archive_name("/usr/bin/java", 'openjdk version "17.0.15"', spark) == name
    assert cds.archive_name("/usr/bin/java", 'openjdk version "17.0.16"', spark) != name
    (spark / "spark-sql.jar").write_bytes(b"y")
    assert cds.archive_name("/usr/bin/java", 'openjdk version "17.0.15"', spark) != name


def test_first_run_writes_then_later_runs_use(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = cds.plan("java", "v", jars(tmp_path), cache)
    assert first is not None and first.pending is not None
    assert first.java_options() == f"-XX:ArchiveClassesAtExit={first.pending}"
    assert first.pending.parent == cache and not first.path.exists()
    first.path.write_bytes(b"archive")
    later = cds.plan("java", "v", jars(tmp_path), cache)
    assert later is not None and later.pending is None and later.path == first.path
    assert later.java_options() == f"-XX:SharedArchiveFile={first.path} -Xshare:auto"


def test_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQCTL_SPARK_CDS", "1")  # the suite's default is off (tests/conftest.py)
    assert cds.enabled("")
    assert not cds.enabled("-Xshare:off")
    assert not cds.enabled("-XX:SharedArchiveFile=/mine.jsa")
    monkeypatch.setenv("MQCTL_SPARK_CDS", "0")
    assert not cds.enabled("")


def test_cache_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("MQCTL_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cds.cache_dir() == tmp_path / "xdg" / "mqctl"
    monkeypatch.setenv("MQCTL_CACHE_DIR", str(tmp_path / "mine"))
    assert cds.cache_dir() == tmp_path / "mine"


def test_an_unusable_cache_directory_means_no_archive(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert cds.plan("java", "v", jars(tmp_path), blocker / "cache") is None


def test_no_archive_under_a_path_with_spaces(tmp_path: Path) -> None:
    assert cds.plan("java", "v", jars(tmp_path), tmp_path / "my cache") is None  # Spark splits options at spaces


def test_stale_temporary_archives_are_swept(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    stale, fresh = cache / "spark-a.jsa.tmp-1", cache / "spark-a.jsa.tmp-2"
    for path in (stale, fresh):
        path.write_bytes(b"partial")
    old = time.time() - cds.STALE_SECONDS - 10
    os.utime(stale, (old, old))
    cds.plan("java", "v", jars(tmp_path), cache)
    assert not stale.exists() and fresh.exists()  # a JVM may still be writing the fresh one


def test_our_archive_goes_into_the_driver_java_options(tmp_path: Path) -> None:
    archive = cds.ClassArchive("java", tmp_path / "spark-x.jsa", None)
    log4j = tmp_path / "log4j2.properties"
    conf = effective_conf(SessionOptions(conf={"spark.driver.extraJavaOptions": "-Dx=1"}, small_input=True), log4j, (),
                          archive)
    assert conf["spark.driver.extraJavaOptions"] == (
        f"-Dlog4j2.configurationFile=file:{log4j} -XX:SharedArchiveFile={archive.path} -Xshare:auto "
        "-XX:TieredStopAtLevel=1 -Dx=1")
    verbose = effective_conf(SessionOptions(), None, (), archive)  # no log4j file when verbose
    assert verbose["spark.driver.extraJavaOptions"] == archive.java_options()


# ---------------------------------------------------------------------- with a real JVM
@pytest.fixture
def java() -> str:
    """The java the report would start (the same lookup), as the Spark tests require it."""
    try:
        return java_command()
    except SparkSetupError:
        if os.environ.get("CI"):  # CI installs Java: a missing one is a failure, never a silent skip
            pytest.fail("no Java runtime in CI: the class-archive tests need Java 17 or 21")
        pytest.skip("no Java runtime on this developer machine: the class-archive tests need Java 17 or 21")


def test_an_archive_the_jvm_wrote_is_kept(java: str, tmp_path: Path) -> None:
    archive = cds.plan(java, "v", jars(tmp_path), tmp_path / "cache")
    assert archive is not None and archive.pending is not None
    jvm = subprocess.Popen([java, archive.java_options(), "-version"], stdin=subprocess.PIPE,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert archive.finish(jvm)  # returns at once; a detached process checks and places the archive
    jvm.wait(timeout=60)
    deadline = time.monotonic() + 60
    while not archive.path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert archive.path.is_file()
    while archive.pending.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not archive.pending.exists()
    started = subprocess.run([java, f"-XX:SharedArchiveFile={archive.path}", "-Xshare:on", "-version"],
                             capture_output=True, text=True, timeout=60, check=False)
    assert started.returncode == 0 and "sharing" in started.stderr


def test_waiting_for_the_jvm_to_exit() -> None:
    done = subprocess.Popen(["true"])
    assert cds.wait_for_exit(done.pid, timeout=10)  # a zombie until reaped counts as exited
    done.wait()
    assert cds.wait_for_exit(done.pid, timeout=10)
    running = subprocess.Popen(["sleep", "30"])
    try:
        assert not cds.wait_for_exit(running.pid, timeout=0.5)
    finally:
        running.kill()
        running.wait()


def test_a_truncated_archive_is_never_kept(java: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written, final = tmp_path / "spark-t.jsa.tmp-1", tmp_path / "spark-t.jsa"
    subprocess.run([java, f"-XX:ArchiveClassesAtExit={written}", "-version"], capture_output=True, timeout=60,
                   check=True)
    data = written.read_bytes()
    written.write_bytes(data[: len(data) // 2])  # what a JVM killed while writing leaves
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    assert not cds.promote(java, written, final)
    assert not final.exists() and not written.exists()
    assert list(cwd.iterdir()) == []  # the crashed probe's hs_err_pid*.log is not left where the user ran


def test_only_the_most_recently_used_archives_stay(java: str, tmp_path: Path) -> None:
    written = tmp_path / "spark-new.jsa.tmp-1"
    subprocess.run([java, f"-XX:ArchiveClassesAtExit={written}", "-version"], capture_output=True, timeout=60,
                   check=True)
    olds = [tmp_path / f"spark-old{i}.jsa" for i in range(4)]
    for age, path in enumerate(olds):
        path.write_bytes(b"old")
        os.utime(path, (time.time() - 100 * (age + 1),) * 2)
    assert cds.promote(java, written, tmp_path / "spark-new.jsa")
    assert sorted(p.name for p in tmp_path.glob("spark-*.jsa")) == ["spark-new.jsa", "spark-old0.jsa",
                                                                   "spark-old1.jsa"]


def test_when_the_session_uses_an_archive(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").write_text("")
    monkeypatch.setenv("JAVA_HOME", str(home))
    monkeypatch.setenv("MQCTL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MQCTL_SPARK_CDS", "1")
    options = SessionOptions()
    assert class_archive(options) is None  # Java not checked yet
    monkeypatch.setitem(session._JAVA_VERSIONS, str(home / "bin" / "java"), 'openjdk version "17.0.15"')
    archive = class_archive(options)
    assert archive is not None and archive.pending is not None and archive.path.parent == tmp_path / "cache"
    assert class_archive(options, {"spark.driver.extraJavaOptions"}) is None  # spark-defaults.conf's stay
    assert class_archive(SessionOptions(conf={"spark.driver.extraJavaOptions": "-Xshare:off"})) is None
    monkeypatch.setenv("MQCTL_SPARK_CDS", "0")
    assert class_archive(options) is None
