"""One RocketMQ JVM: its command line, its folder, starting it, waiting on it and stopping it.

Every JVM gets its own folder: ``-Duser.home`` points there, so RocketMQ's logs
(``<folder>/logs/rocketmqlogs``) and any default store path stay inside it; its stdout and stderr go to
``<folder>/console.log``. ``-Drocketmq.home.dir`` names an empty folder shared by the cluster (RocketMQ
refuses to start without one and reads nothing from it that the kit needs).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from tests.rocketmq.classdata import ArchiveUse
from tests.rocketmq.errors import NotReady, ProcessExited
from tests.support.pacing import cpu_seconds, pause_after

T = TypeVar("T")

#: What Java 17 needs for RocketMQ: hessian (pulled in by the controller) opens java.lang's fields at
#: class init and prints a stack trace without this; the rest is for DLedger's and the store's direct
#: buffers (unmapping files), which only some code paths reach.
JAVA17_FLAGS = (
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
)
#: Small and quick to start on two cores: the serial collector and C1 only (no C2 compile storm at start).
COMMON_FLAGS = (
    "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k", "-XX:-OmitStackTraceInFastThrow",
    "-XX:+ExitOnOutOfMemoryError", "-Djava.net.preferIPv4Stack=true", "-Dfile.encoding=UTF-8",
)
MAIN_CLASSES = {
    "namesrv": "org.apache.rocketmq.namesrv.NamesrvStartup",
    "controller": "org.apache.rocketmq.controller.ControllerStartup",
    "broker": "org.apache.rocketmq.broker.BrokerStartup",
    "tools": "org.apache.rocketmq.tools.command.MQAdminStartup",
}
#: Heap and direct memory per role (MiB): three controllers, a name server and three brokers stay
#: under about 2.5 GB of resident memory.
HEAPS = {"namesrv": (64, 256, 128), "controller": (64, 256, 128), "broker": (128, 512, 256),
         "tools": (32, 128, 64)}
POLL_S = 0.25


def java_command(java: str, classpath: str, role: str, folder: Path, rocketmq_home: Path,
                 args: tuple[str, ...] = (), main: str | None = None, extra: tuple[str, ...] = ()) -> list[str]:
    """The command line of one JVM of ``role``; ``main`` replaces the role's main class (mqadmin's launcher);
    ``extra`` are more JVM flags (the class data archive's, classdata.py)."""
    xms, xmx, direct = HEAPS[role]
    return [java, *JAVA17_FLAGS, *COMMON_FLAGS, f"-Xms{xms}m", f"-Xmx{xmx}m", f"-XX:MaxDirectMemorySize={direct}m",
            *extra, f"-Duser.home={folder}", f"-Drocketmq.home.dir={rocketmq_home}",
            f"-Drmq.logback.configurationFile=rmq.{role}.logback.xml", "-cp", classpath, main or MAIN_CLASSES[role], *args]


def tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"({path} unreadable)"
    return "\n".join(text.splitlines()[-lines:])


def poll(check: Callable[[], T | None], timeout_s: float, what: str,
         alive: Callable[[], None] = lambda: None) -> T:
    """Call ``check`` until it returns a value; ``alive`` raises when waiting is pointless."""
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while True:
        alive()
        asked = cpu_seconds()
        try:
            value = check()
        except Exception as exc:  # noqa: BLE001 - any failed ask means "not yet"; the last one is reported
            value, last = None, exc
        if value is not None:
            return value
        if time.monotonic() >= deadline:
            raise NotReady(f"{what}: not within {timeout_s:.0f} s" + (f" (last answer: {last})" if last else ""))
        time.sleep(pause_after(cpu_seconds() - asked, POLL_S))


def pid_runs_in(pid: int, folder: Path) -> bool:
    """Whether ``pid`` is still a process whose command line names ``folder`` (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z" and f"-Duser.home={folder}".encode() in cmdline


def tied_to_parent(command: list[str]) -> list[str]:
    """``command`` run so that it gets SIGTERM when the process that started it dies (util-linux's
    setpriv sets PR_SET_PDEATHSIG, then execs it: same pid), so a test run killed outright leaves no JVM
    behind. Without setpriv the command is returned as it is."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", "--", *command] if setpriv else command


@dataclass
class JavaProcess:
    """A RocketMQ JVM in its own session. ``outlive_parent``: it keeps running after the Python process
    that started it exits (``python -m tests.rocketmq up``); otherwise it gets SIGTERM then. Start it from
    the main thread: the kernel ties it to the starting thread, not the process."""

    name: str
    role: str
    folder: Path
    command: list[str]
    pid: int | None = None
    outlive_parent: bool = False
    #: The class data archive this JVM writes at exit, if there was none yet (classdata.py).
    archive: ArchiveUse = field(default_factory=lambda: ArchiveUse(()))
    _popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def console(self) -> Path:
        return self.folder / "console.log"

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        with self.console.open("ab") as out:
            command = self.command if self.outlive_parent else tied_to_parent(self.command)
            self._popen = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, cwd=self.folder, start_new_session=True)
        self.pid = self._popen.pid

    def alive(self) -> bool:
        if self._popen is not None:
            code = self._popen.poll()
            if code is not None:
                self.archive.settle(code)
            return code is None
        return self.pid is not None and pid_runs_in(self.pid, self.folder)

    def check_alive(self) -> None:
        if not self.alive():
            code = self._popen.returncode if self._popen is not None else "?"
            raise ProcessExited(f"{self.name} ({self.role}, pid {self.pid}) exited with {code}; "
                                f"{self.console}:\n{tail(self.console)}\n{self.logs_tail()}")

    def logs_tail(self) -> str:
        logs = sorted((self.folder / "logs" / "rocketmqlogs").glob("*.log"))
        main = [p for p in logs if p.stem in (self.role, "namesrv", "broker", "controller")]
        return "\n".join(f"{p}:\n{tail(p, 15)}" for p in main[:1])

    def signal(self, sig: signal.Signals) -> None:
        if self.pid is not None and self.alive():
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def wait_exit(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while self.alive():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        return True


def stop_all(processes: list[JavaProcess], grace_s: float = 15.0) -> None:
    """SIGTERM to all at once (RocketMQ's shutdown hooks run in parallel), SIGKILL to what is left."""
    for process in processes:
        process.signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for process in processes:
        if not process.wait_exit(max(0.0, deadline - time.monotonic())):
            process.signal(signal.SIGKILL)
            process.wait_exit(10.0)
