"""Class data archives for the kit's JVMs: RocketMQ's servers and mqadmin start from an archive of the
classes they loaded the first time, instead of reading, parsing and verifying them from the jars again.

The rocketmq tier starts some hundreds of JVMs (every mqadmin command is one) on two cores: a JVM of
mqadmin spends about a third less CPU starting from an archive. The first JVM of a role and version that
finds no archive writes one as it exits (``-XX:ArchiveClassesAtExit``) into a file of its own; once it has
exited on its own or on SIGTERM (code 0 or 143), that file is renamed into place (a JVM killed while
writing leaves a file that is thrown away). The archive's name carries a digest of what it was made from
(java, the role, the classpath's jars with their sizes and times), so new jars or another JDK make another.
The JVM's own warnings go to stderr, but for the archive's (LOG_FLAGS): mqadmin's stdout is what the
tests compare, and the servers' stderr goes to their console.log with their stdout.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

#: The JVM's unified logging off on stdout, its warnings and errors on stderr, but for the archive's own:
#: writing one warns of every class it leaves out (fastjson's, compiled for Java 5, among them
#: ``JSONException``, a word the tests look for on mqadmin's stderr), and an archive that no longer matches
#: is simply not used.
LOG_FLAGS = ("-Xlog:disable", "-Xlog:all=warning:stderr", "-Xlog:cds*=off:stderr", "-Xlog:class+path=off:stderr")
#: Exit codes after which a JVM has written its archive whole: its own exit, SIGTERM's shutdown.
WRITTEN = (0, 143)
#: A file written at exit and never put in place is removed after this long.
STALE_S = 86_400.0


@dataclass(frozen=True)
class ArchiveUse:
    """The JVM flags for one start, and where a newly written archive goes once the JVM has exited."""

    flags: tuple[str, ...]
    written: Path | None = None  # the file the JVM writes at exit, when there was no archive yet
    archive: Path | None = None

    def settle(self, returncode: int | None) -> None:
        """After the JVM exited: a whole new archive goes into place, anything else is removed."""
        if self.written is None or self.archive is None or not self.written.exists():
            return
        try:
            if returncode in WRITTEN and self.written.stat().st_size > 0:
                os.replace(self.written, self.archive)
            else:
                self.written.unlink()
        except OSError:
            pass


def archive_use(cache: Path, java: str, role: str, classpath: str) -> ArchiveUse:
    """How a JVM of ``role`` on ``classpath`` uses the archive kept under ``cache`` (writing it if missing).
    Off when MQCTL_ROCKETMQ_CDS=0."""
    if os.environ.get("MQCTL_ROCKETMQ_CDS", "1") == "0":
        return ArchiveUse(())
    folder = cache / "class-archives"
    archive = folder / f"{role}-{_digest(java, role, classpath)}.jsa"
    if archive.is_file():
        return ArchiveUse((f"-XX:SharedArchiveFile={archive}", *LOG_FLAGS))
    folder.mkdir(parents=True, exist_ok=True)
    _forget_stale(folder)
    written = archive.with_name(f"{archive.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    return ArchiveUse((f"-XX:ArchiveClassesAtExit={written}", *LOG_FLAGS), written, archive)


def _forget_stale(folder: Path) -> None:
    """Files that JVMs started by a process now gone wrote at exit with nobody to put them in place (the
    kit's ``up`` leaves its servers running): removed once a day old."""
    now = time.time()
    for path in folder.glob("*.tmp-*"):
        try:
            if now - path.stat().st_mtime > STALE_S:
                path.unlink()
        except OSError:
            continue


@lru_cache(maxsize=32)
def _digest(java: str, role: str, classpath: str) -> str:
    """What the archive depends on: the JDK, the role and every jar (name, size, time) of the classpath."""
    parts = [str(Path(java).resolve()), str(_stamp(Path(java).resolve())), role]
    for entry in classpath.split(os.pathsep):
        paths = sorted(Path(entry[:-1]).glob("*.jar")) if entry.endswith("*") else [Path(entry)]
        parts += [f"{p.name}:{_stamp(p)}" for p in paths]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _stamp(path: Path) -> tuple[int, int]:
    try:
        stat = path.stat()
    except OSError:
        return (0, 0)
    return (stat.st_size, stat.st_mtime_ns)
