"""The kit's class data archives (tests/rocketmq/classdata.py) and the mqadmin launcher's jar, without a JVM."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.rocketmq import classdata
from tests.rocketmq.classdata import archive_use


def jars(tmp_path: Path) -> str:
    lib = tmp_path / "lib"
    lib.mkdir()
    for name in ("a.jar", "b.jar"):
        (lib / name).write_bytes(b"PK" + name.encode())
    classdata._digest.cache_clear()
    return f"{lib}/*"


def test_without_an_archive_the_jvm_writes_one_that_goes_into_place_after_a_clean_exit(tmp_path: Path) -> None:
    classpath = jars(tmp_path)
    use = archive_use(tmp_path / "cache", "/usr/bin/java", "broker", classpath)
    assert use.written is not None and use.archive is not None
    assert f"-XX:ArchiveClassesAtExit={use.written}" in use.flags
    use.written.write_bytes(b"archive")
    use.settle(143)  # SIGTERM's shutdown writes it whole
    assert use.archive.read_bytes() == b"archive" and not use.written.exists()
    again = archive_use(tmp_path / "cache", "/usr/bin/java", "broker", classpath)
    assert again.flags[0] == f"-XX:SharedArchiveFile={use.archive}" and again.written is None


@pytest.mark.parametrize("code", [-9, 1, None])
def test_an_archive_of_a_jvm_killed_or_failed_is_thrown_away(tmp_path: Path, code: int | None) -> None:
    use = archive_use(tmp_path / "cache", "/usr/bin/java", "tools", jars(tmp_path))
    assert use.written is not None and use.archive is not None
    use.written.write_bytes(b"half")
    use.settle(code)
    assert not use.written.exists() and not use.archive.exists()


def test_new_jars_make_a_new_archive(tmp_path: Path) -> None:
    classpath = jars(tmp_path)
    first = archive_use(tmp_path / "cache", "/usr/bin/java", "tools", classpath)
    jar = tmp_path / "lib" / "a.jar"
    jar.write_bytes(b"PK another build")
    os.utime(jar, ns=(time.time_ns(), time.time_ns() + 10**9))
    classdata._digest.cache_clear()
    second = archive_use(tmp_path / "cache", "/usr/bin/java", "tools", classpath)
    assert first.archive != second.archive


def test_off_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQCTL_ROCKETMQ_CDS", "0")
    assert archive_use(tmp_path / "cache", "/usr/bin/java", "tools", jars(tmp_path)).flags == ()


def test_the_archives_warnings_stay_off_stdout() -> None:
    flags = classdata.LOG_FLAGS
    assert flags[0] == "-Xlog:disable" and all(f.endswith(":stderr") for f in flags[1:])


def test_a_stale_file_never_put_in_place_is_removed(tmp_path: Path) -> None:
    folder = tmp_path / "cache" / "class-archives"
    folder.mkdir(parents=True)
    stale, fresh = folder / "broker-x.jsa.tmp-1-aa", folder / "broker-x.jsa.tmp-2-bb"
    for path in (stale, fresh):
        path.write_bytes(b"x")
    old = time.time() - classdata.STALE_S - 60
    os.utime(stale, (old, old))
    archive_use(tmp_path / "cache", "/usr/bin/java", "broker", jars(tmp_path))
    assert not stale.exists() and fresh.exists()


def test_makers_of_the_launcher_jar_at_once_each_leave_a_whole_jar(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.rocketmq import launcher

    folder = tmp_path / "launcher"
    (folder / "mqctl" / "tools").mkdir(parents=True)
    (folder / "mqctl" / "tools" / "MqadminThenExit.class").write_bytes(b"\xca\xfe\xba\xbe")
    monkeypatch.setattr(launcher, "launcher_classes", lambda java, rocketmq: folder)
    with ThreadPoolExecutor(8) as pool:
        made = set(pool.map(lambda _: launcher.launcher_jar("java", None), range(32)))  # type: ignore[arg-type]
    assert made == {folder / "launcher.jar"}
    assert sorted(p.name for p in folder.iterdir()) == ["launcher.jar", "mqctl"]
