"""A class-data-sharing archive for the report's driver JVM.

Every Spark start loads and verifies some 12,000 classes from about 250 jars. Java 17 can map them from
one archive instead, written by an earlier run (dynamic CDS: ``-XX:ArchiveClassesAtExit`` once, then
``-XX:SharedArchiveFile``); here that takes the session start from ~5 s to ~3 s and the first query about
a second faster (docs/performance.md).

- The archive is kept in ``$MQCTL_CACHE_DIR``, else ``$XDG_CACHE_HOME/mqctl``, else ``~/.cache/mqctl``, named
  after what it depends on (the java binary and its version, Spark's jars): another Java or Spark gets
  its own, and the JVM itself ignores an archive whose class path does not match.
- A run that finds none asks its JVM to write one, under a temporary name. At exit we end the JVM (by
  closing its stdin, as happens anyway when Python exits); a detached process waits for it to finish
  writing, then keeps the file only if a JVM starts with it (a truncated archive crashes the JVM, so none
  is ever used unchecked) and renames it into place. The command itself does not wait.
- ``MQCTL_SPARK_CDS=0`` turns it off, and so does a class-sharing option of the user's own.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

#: temporary archives older than this are left-overs of a JVM that never finished writing one
STALE_SECONDS = 3600
#: how long the detached check waits for the JVM to finish writing the archive
WRITE_TIMEOUT = 600.0
#: archives kept (most recently used first): one per Java and Spark installation in use, ~150 MB each
KEEP = 3
USER_OPTIONS = ("-Xshare", "SharedArchiveFile", "ArchiveClassesAtExit")


class JvmProcess(Protocol):
    pid: int
    stdin: IO[bytes] | None


@dataclass(frozen=True)
class ClassArchive:
    java: str
    path: Path
    #: where this run's JVM writes a new archive, or None when ``path`` exists and is used
    pending: Path | None

    def java_options(self) -> str:
        if self.pending is not None:
            return f"-XX:ArchiveClassesAtExit={self.pending}"
        return f"-XX:SharedArchiveFile={self.path} -Xshare:auto"

    def finish(self, jvm: JvmProcess | None) -> bool:
        """At exit: end the JVM (it writes the archive as it exits) and leave checking the archive and moving
        it into place to a detached process, so the command does not wait the ~15 s the JVM takes."""
        if self.pending is None or jvm is None:
            return False
        try:
            if jvm.stdin is not None:
                jvm.stdin.close()  # the gateway JVM exits when its stdin closes
            subprocess.Popen([sys.executable, "-m", "spark_reports.cds", str(jvm.pid), self.java, str(self.pending),
                              str(self.path)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError:
            return False
        return True


def cache_dir() -> Path:
    configured = os.environ.get("MQCTL_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mqctl"


def enabled(user_java_options: str) -> bool:
    if os.environ.get("MQCTL_SPARK_CDS", "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    return not any(option in user_java_options for option in USER_OPTIONS)


def archive_name(java: str, java_version: str, spark_jars: Path) -> str:
    """``spark-<digest>.jsa``: the digest covers the java binary, its version text and Spark's jar files."""
    digest = hashlib.sha256()
    digest.update(os.path.realpath(java).encode())
    digest.update(java_version.encode())
    with contextlib.suppress(OSError):
        for jar in sorted(spark_jars.glob("*.jar")):
            digest.update(f"{jar.name}:{jar.stat().st_size}".encode())
    return f"spark-{digest.hexdigest()[:16]}.jsa"


def plan(java: str, java_version: str, spark_jars: Path, directory: Path | None = None) -> ClassArchive | None:
    """The archive to use, or to write in this run; None if the cache directory is unusable."""
    directory = directory or cache_dir()
    if any(c.isspace() for c in str(directory)):
        return None  # Spark splits extraJavaOptions at spaces: such a path cannot be passed to the JVM
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        _sweep(directory)
    except OSError:
        return None
    path = directory / archive_name(java, java_version, spark_jars)
    if path.is_file():
        with contextlib.suppress(OSError):
            os.utime(path)  # most recently used: kept when old ones are cleared
        return ClassArchive(java, path, None)
    return ClassArchive(java, path, path.with_name(f"{path.name}.tmp-{os.getpid()}"))


def promote(java: str, written: Path, path: Path) -> bool:
    """Keep ``written`` as ``path`` if a JVM starts with it (atomic rename); otherwise delete it."""
    try:
        if not written.is_file() or written.stat().st_size == 0:
            return False
        # A damaged archive crashes the JVM: run it where its crash report (hs_err_pid*.log) is thrown away.
        with tempfile.TemporaryDirectory(prefix="mqctl-cds-") as scratch:
            probe = subprocess.run([java, f"-XX:SharedArchiveFile={written}", "-Xshare:auto",
                                    "-XX:-CreateCoredumpOnCrash", "-version"],
                                   capture_output=True, timeout=60, check=False, cwd=scratch)
        if probe.returncode != 0:
            return False
        os.replace(written, path)
        _remove_others(path)
        return True
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        written.unlink(missing_ok=True)


def wait_for_exit(pid: int, timeout: float) -> bool:
    """True once ``pid`` has exited (gone, or a zombie waiting for its parent), False after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.2)
    return False


def _sweep(directory: Path) -> None:
    now = time.time()
    for leftover in directory.glob("spark-*.jsa.tmp-*"):
        with contextlib.suppress(OSError):
            if now - leftover.stat().st_mtime > STALE_SECONDS:
                leftover.unlink()


def _remove_others(kept: Path) -> None:
    """Only the ``KEEP`` most recently used archives stay (others belong to a Java or Spark no longer run)."""
    def used(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except OSError:
            return 0.0

    others = sorted((p for p in kept.parent.glob("spark-*.jsa") if p != kept), key=used, reverse=True)
    for old in others[KEEP - 1:]:
        with contextlib.suppress(OSError):
            old.unlink()


def main(argv: list[str]) -> int:
    """``python -m spark_reports.cds PID JAVA WRITTEN PATH``: wait for the JVM, then :func:`promote`."""
    pid, java, written, path = int(argv[0]), argv[1], Path(argv[2]), Path(argv[3])
    if not wait_for_exit(pid, WRITE_TIMEOUT):
        return 1  # still writing after all this time: the stale sweep removes the file later
    return 0 if promote(java, written, path) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
