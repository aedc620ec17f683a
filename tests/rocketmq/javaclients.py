"""Our Java test program (``tests/rocketmq/java``, package ``mqctl.clients``): RocketMQ's own remoting clients
(``DefaultMQProducer``, ``DefaultMQPushConsumer``, ``DefaultLitePullConsumer``) driven by modes, against our
cluster, RocketMQ's, or a mix of the two; the one Java program of the rocketmq tier.

``JavaClients(version).build()`` compiles the Maven project against ``rocketmq-client`` of that version, into the
kit's cache (``<cache>/<version>/java-clients/<digest of the sources>/``: ``classes/`` and ``lib/``, the client
and what it needs), once per version and source; a complete folder is reused without Maven. ``start(mode,
folder, ...)`` runs one mode in its own JVM (``java -cp``), its ``user.home`` (the client's logs) in
``folder``, its history in ``folder/history.tsv`` (client_history.py reads it), its output in
``folder/console.log``; ``stop()`` asks it to end (the ``--until`` file) and waits, ``kill()`` does not ask.
A producer can be paused and resumed (``pause()``, ``resume()``: its ``--pause-while`` file), and
``read_from_start`` reads a topic from the first message of every queue with a push consumer of a new group.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.rocketmq.client_history import History
from tests.rocketmq.errors import KitError, ProcessExited
from tests.rocketmq.fetch import (
    COMPLETE,
    DEPENDENCY_PLUGIN,
    MAVEN_TIMEOUT_S,
    cache_root,
    require_java,
    require_tool,
    resolution_error,
)
from tests.rocketmq.jvm import COMMON_FLAGS, JAVA17_FLAGS, tail, tied_to_parent
from tests.support.pacing import cpu_seconds, pause_after

SOURCE = Path(__file__).with_name("java")
MAIN_CLASS = "mqctl.clients.Main"
#: A client JVM's heap and direct memory (MiB): six of them beside a cluster stay under 1.5 GB.
HEAP = ("-Xms32m", "-Xmx192m", "-XX:MaxDirectMemorySize=128m")


class BuildFailed(KitError):
    """Maven resolved the client but could not compile the program (the message carries javac's errors)."""


def source_digest(source: Path = SOURCE) -> str:
    """A digest of the program's pom and sources: a change builds a new folder, never reuses a stale one."""
    digest = hashlib.sha256()
    files = [source / "pom.xml", *sorted((source / "src").rglob("*.java"))]
    for path in files:
        digest.update(str(path.relative_to(source)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class JavaClients:
    """The program built against one version of ``rocketmq-client``."""

    version: str
    cache: Path = field(default_factory=cache_root)
    #: Extra arguments for mvn (e.g. ``-s settings.xml``, ``-Dmaven.repo.local=...``).
    maven_args: tuple[str, ...] = ()

    @property
    def folder(self) -> Path:
        return self.cache / self.version / "java-clients" / source_digest()

    @property
    def classpath(self) -> str:
        return f"{self.folder / 'classes'}{os.pathsep}{self.folder / 'lib'}/*"

    def is_built(self) -> bool:
        return (self.folder / COMPLETE).is_file()

    def build(self) -> JavaClients:
        """Compile unless a complete build is there; raises ``ArtifactUnavailable`` or ``BuildFailed``."""
        if self.is_built():
            return self
        mvn = require_tool("mvn", "to build the Java test program against rocketmq-client")
        partial = self.folder.with_name(f"{self.folder.name}.partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        command = [mvn, "-B", "-q", *self.maven_args, "-f", str(SOURCE / "pom.xml"), f"-Drmq.version={self.version}",
                   f"-Dclient.dir={partial}", "compile", f"{DEPENDENCY_PLUGIN}:copy-dependencies",
                   f"-DoutputDirectory={partial / 'lib'}", "-DincludeScope=runtime"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S, check=False)
        if done.returncode != 0 or not any(partial.glob(f"lib/rocketmq-client-{self.version}.jar")):
            shutil.rmtree(partial, ignore_errors=True)
            output = done.stdout + done.stderr
            if "COMPILATION ERROR" in output:
                raise BuildFailed(f"the Java test program does not compile against rocketmq-client {self.version}:\n"
                                  + "\n".join(line for line in output.splitlines() if "ERROR" in line)[:4000])
            raise resolution_error(self.version, output)
        (partial / COMPLETE).write_text(f"rocketmq-client {self.version}\n")
        try:
            partial.rename(self.folder)
        except OSError:  # built meanwhile by another run: keep that one
            shutil.rmtree(partial, ignore_errors=True)
        return self

    def command(self, java: str, mode: str, folder: Path, options: dict[str, object]) -> list[str]:
        args = option_args(options)
        return [java, *JAVA17_FLAGS, *COMMON_FLAGS, *HEAP, f"-Duser.home={folder}", "-cp", self.classpath,
                MAIN_CLASS, mode, *args]

    def start(self, mode: str, folder: Path, **options: object) -> ClientRun:
        """One mode in its own JVM; ``history`` and ``until`` are set to files in ``folder``."""
        self.build()
        folder.mkdir(parents=True, exist_ok=True)
        run = ClientRun(mode, folder)
        full = {**options, "history": run.history_file, "until": run.until_file}
        if mode in ("create-topic", "together"):  # (together: each line of its plan names its own files)
            full.pop("history")
        if mode == "together":
            full.pop("until")
        if mode == "produce":
            full["pause_while"] = run.pause_file
        run.start(self.command(require_java(), mode, folder, full))
        return run

    def read_from_start(self, folder: Path, namesrv: str, topic: str, expect: frozenset[int], timeout_s: float,
                        idle_s: float, group: str = "mqctl-java-reader") -> History:
        """Every message of ``topic``, read by a push consumer of ``group`` (a group new to the cluster starts at
        the first message of every queue) until it consumed every number of ``expect``, consumed nothing new
        for ``idle_s``, or ran ``timeout_s``; then stopped as a user stops it. What it consumed is its
        history's: the caller says what is missing."""
        run = self.start("push", folder, namesrv=namesrv, topic=topic, group=group, deadline_s=int(timeout_s) + 60)
        deadline = time.monotonic() + timeout_s
        seen, last_new = 0, time.monotonic()
        while time.monotonic() < deadline:
            history = run.history()
            if history.started and expect <= history.seqs:
                break
            if len(history.consumed) > seen or not history.started:
                seen, last_new = len(history.consumed), time.monotonic()
            elif time.monotonic() - last_new >= idle_s:
                break
            run.check_running()
            time.sleep(0.2)
        code = run.stop()
        if code != 0:
            raise ProcessExited(f"the Java consumer reading {topic} exited with {code}:\n{run.describe()}")
        return run.history()


def option_args(options: dict[str, object]) -> list[str]:
    """The program's ``--name value`` arguments for ``options`` (a Python name's underscores as dashes)."""
    return [arg for name, value in options.items() for arg in (f"--{name.replace('_', '-')}", str(value))]


@dataclass
class ClientRun:
    """One running mode of the program."""

    mode: str
    folder: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def history_file(self) -> Path:
        return self.folder / "history.tsv"

    @property
    def until_file(self) -> Path:
        return self.folder / "stop"

    @property
    def pause_file(self) -> Path:
        return self.folder / "pause"

    @property
    def console(self) -> Path:
        return self.folder / "console.log"

    def start(self, command: list[str]) -> None:
        self.until_file.unlink(missing_ok=True)
        self.pause_file.unlink(missing_ok=True)
        with self.console.open("ab") as out:
            self.process = subprocess.Popen(tied_to_parent(command), stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, cwd=self.folder, start_new_session=True)

    def history(self) -> History:
        return History.read(self.history_file)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def check_running(self) -> None:
        if not self.running():
            raise ProcessExited(f"the Java {self.mode} client exited ({self.exit_code()}):\n{self.describe()}")

    def exit_code(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def wait(self, timeout_s: float) -> int:
        """Its exit code; kills it and raises ``ProcessExited`` if it runs past ``timeout_s``."""
        assert self.process is not None
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise ProcessExited(f"the Java {self.mode} client did not end within {timeout_s:.0f} s:\n"
                                f"{self.describe()}") from None

    def stop(self, timeout_s: float = 60.0) -> int:
        """Asks it to end as a user would (its consumers shut down, committing their offsets) and waits."""
        self.until_file.touch()
        return self.wait(timeout_s)

    def pause(self, timeout_s: float = 60.0) -> None:
        """A producer sends nothing more once this returns (it wrote PAUSED; its async sends were answered)."""
        before = len(self.history().paused)
        self.pause_file.touch()
        wait_for(lambda: len(self.history().paused) > before, timeout_s, f"the Java {self.mode} client to pause",
                 (self,))

    def resume(self) -> None:
        self.pause_file.unlink(missing_ok=True)

    def kill(self) -> None:
        if self.running():
            assert self.process is not None
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)

    def describe(self) -> str:
        logs = sorted((self.folder / "logs" / "rocketmqlogs").glob("rocketmq_client*.log"))
        client_log = f"\n{logs[0]}:\n{tail(logs[0], 20)}" if logs else ""
        return f"{self.console}:\n{tail(self.console, 30)}\n{self.history_file}:\n{tail(self.history_file, 10)}" \
               + client_log


def wait_for(check: Callable[[], object], timeout_s: float, what: str, runs: tuple[ClientRun, ...] = ()) -> None:
    """Poll ``check()`` until it is true; a client of ``runs`` that exits meanwhile ends the wait at once."""
    deadline = time.monotonic() + timeout_s
    while True:
        asked = cpu_seconds()
        if check():
            return
        for run in runs:
            run.check_running()
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(pause_after(cpu_seconds() - asked, 0.2))
