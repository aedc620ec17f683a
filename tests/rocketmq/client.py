"""Our own Java client (java/src/main/java/mqctl/interop/Client.java) built against RocketMQ's remoting client
of one version, and run as a producer or a consumer of a topic (modes by argument).

``JavaClient(version).build()`` compiles it with Maven into ``<cache>/<version>/client`` (``classes/`` and
``lib/``, RocketMQ's client and what it needs) and marks the folder complete; a complete folder is reused
without Maven, as the kit's jars are (fetch.py). ``produce`` starts a producer that writes one history line
per message (``Producer``), ``consume`` reads a topic from the start (a push consumer, or with
``consumer="lite"`` a lite pull consumer) and returns what it read.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tests.rocketmq.errors import KitError, NotReady
from tests.rocketmq.fetch import (
    COMPLETE,
    DEPENDENCY_PLUGIN,
    MAVEN_TIMEOUT_S,
    cache_root,
    require_java,
    require_tool,
)
from tests.rocketmq.jvm import COMMON_FLAGS, tail, tied_to_parent

PROJECT = Path(__file__).with_name("java")
MAIN_CLASS = "mqctl.interop.Client"
#: The client JVMs are small: one producer or one consumer each.
HEAP = ("-Xms32m", "-Xmx192m", "-XX:MaxDirectMemorySize=64m")


def sources() -> list[Path]:
    return [*sorted(PROJECT.rglob("*.java")), PROJECT / "pom.xml"]


@dataclass(frozen=True)
class JavaClient:
    version: str
    cache: Path = field(default_factory=cache_root)

    @property
    def folder(self) -> Path:
        return self.cache / self.version / "client"

    @property
    def classpath(self) -> str:
        return f"{self.folder / 'classes'}:{self.folder / 'lib'}/*"

    def is_built(self) -> bool:
        """Built and no older than any source (a changed Client.java is compiled again)."""
        marker = self.folder / COMPLETE
        return marker.is_file() and all(p.stat().st_mtime <= marker.stat().st_mtime for p in sources())

    def build(self) -> JavaClient:
        if self.is_built():
            return self
        mvn = require_tool("mvn", "to build the tier's Java client")
        require_tool("javac", "to compile the tier's Java client (Debian: openjdk-17-jdk-headless)")
        partial = self.folder.with_name("client.partial")
        shutil.rmtree(partial, ignore_errors=True)
        command = [mvn, "-B", "-q", "-f", str(PROJECT / "pom.xml"), f"-Drmq.version={self.version}",
                   f"-Dclient.dir={partial}", "compile", f"{DEPENDENCY_PLUGIN}:copy-dependencies",
                   f"-DoutputDirectory={partial / 'lib'}", "-DincludeScope=runtime"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S, check=False)
        if done.returncode != 0 or not (partial / "classes" / "mqctl" / "interop" / "Client.class").is_file():
            raise KitError(f"building the Java client against RocketMQ {self.version} failed:\n"
                           f"{(done.stdout + done.stderr)[-3000:]}")
        (partial / COMPLETE).write_text(self.version + "\n")
        shutil.rmtree(self.folder, ignore_errors=True)
        partial.rename(self.folder)
        return self

    def command(self, folder: Path, mode: str, options: dict[str, object]) -> list[str]:
        args = [item for name, value in options.items() for item in (f"--{name}", str(value))]
        return [require_java(), *COMMON_FLAGS, *HEAP, f"-Duser.home={folder}",
                "-Drmq.logback.configurationFile=rmq.client.logback.xml", "-cp", self.classpath, MAIN_CLASS, mode,
                *args]

    def produce(self, folder: Path, namesrv: str, topic: str, **options: object) -> Producer:
        """A producer sending until its stop file exists (or ``count`` messages), started now."""
        return Producer.start(self, folder, {"namesrv": namesrv, "topic": topic, **options})

    def consume(self, folder: Path, namesrv: str, topic: str, expect: Iterable[int] = (),
                timeout_s: float = 120.0, **options: object) -> list[Consumed]:
        """Every message of ``topic`` from the start of its queues, until the keys of ``expect`` were read
        (or ``idle-ms`` without a new one)."""
        folder.mkdir(parents=True, exist_ok=True)
        out = folder / "consumed.tsv"
        out.unlink(missing_ok=True)
        expect_file = folder / "expect.txt"
        expect_file.write_text("".join(f"{key}\n" for key in expect))
        command = self.command(folder, "consume", {"namesrv": namesrv, "topic": topic, "out": out,
                                                   "expect": expect_file, "timeout-ms": int(timeout_s * 1000),
                                                   **options})
        with (folder / "console.log").open("ab") as console:
            done = subprocess.run(tied_to_parent(command), stdout=console, stderr=subprocess.STDOUT,
                                  timeout=timeout_s + 60, check=False, cwd=folder)
        text = out.read_text() if out.is_file() else ""
        if done.returncode != 0 or "# done" not in text:
            raise KitError(f"the Java consumer exited with {done.returncode}:\n{tail(folder / 'console.log')}")
        return [Consumed.parse(line) for line in text.splitlines() if line and not line.startswith("#")]


@dataclass(frozen=True)
class Consumed:
    key: int
    broker: str
    queue_id: int
    queue_offset: int
    msg_id: str

    @classmethod
    def parse(cls, line: str) -> Consumed:
        key, broker, queue, offset, msg_id = line.split("\t")
        return cls(int(key), broker, int(queue), int(offset), msg_id)


@dataclass(frozen=True)
class Sent:
    """One history line: the message's number, the client's status (SEND_OK, FLUSH_SLAVE_TIMEOUT, ...,
    or FAILED) and the rest of the line."""

    number: int
    status: str
    detail: str

    @property
    def acknowledged(self) -> bool:
        return self.status == "SEND_OK"


@dataclass
class Producer:
    """A running producer JVM; ``pause``/``resume``/``stop`` through its control files."""

    folder: Path
    history_file: Path
    process: subprocess.Popen[bytes]

    @classmethod
    def start(cls, client: JavaClient, folder: Path, options: dict[str, object]) -> Producer:
        folder.mkdir(parents=True, exist_ok=True)
        history = folder / "history.tsv"
        for name in ("history.tsv", "pause", "stop"):
            (folder / name).unlink(missing_ok=True)
        command = client.command(folder, "produce", {"history": history, "pause-file": folder / "pause",
                                                     "stop-file": folder / "stop", **options})
        with (folder / "console.log").open("ab") as console:
            process = subprocess.Popen(tied_to_parent(command), stdout=console, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, cwd=folder, start_new_session=True)
        return cls(folder, history, process)

    def lines(self) -> list[str]:
        return self.history_file.read_text().splitlines() if self.history_file.is_file() else []

    def history(self) -> list[Sent]:
        sent = []
        for line in self.lines():
            if line and not line.startswith("#"):
                number, status, detail = ([*line.split("\t", 2), ""])[:3]
                sent.append(Sent(int(number), status, detail))
        return sent

    def acknowledged(self) -> list[int]:
        return [s.number for s in self.history() if s.acknowledged]

    def check_alive(self) -> None:
        if self.process.poll() is not None and "# done" not in self.lines():
            raise KitError(f"the Java producer exited with {self.process.returncode}:\n"
                           f"{tail(self.folder / 'console.log')}")

    def wait_acknowledged(self, count: int, timeout_s: float, after: int = 0) -> list[Sent]:
        """Until ``count`` messages numbered above ``after`` got SEND_OK."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.check_alive()
            done = [s for s in self.history() if s.acknowledged and s.number > after]
            if len(done) >= count:
                return done
            if time.monotonic() > deadline:
                last = self.history()[-3:]
                raise NotReady(f"the producer got {len(done)} of {count} acknowledgements after message {after} "
                               f"within {timeout_s:.0f} s; its last sends: {last}")
            time.sleep(0.2)

    def pause(self, timeout_s: float = 60.0) -> int:
        """No send in flight once this returns; the number of the last message it tried."""
        def pauses() -> int:
            return sum(line.startswith("# paused") for line in self.lines())
        before = pauses()
        (self.folder / "pause").touch()
        deadline = time.monotonic() + timeout_s
        while pauses() == before and "# done" not in self.lines():
            self.check_alive()
            if time.monotonic() > deadline:
                raise NotReady(f"the producer did not pause within {timeout_s:.0f} s")
            time.sleep(0.1)
        history = self.history()
        return history[-1].number if history else 0

    def resume(self) -> None:
        (self.folder / "pause").unlink(missing_ok=True)

    def stop(self, timeout_s: float = 60.0) -> list[Sent]:
        """Ends the producer (after its send in flight) and returns its whole history."""
        self.resume()
        (self.folder / "stop").touch()
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        return self.history()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
